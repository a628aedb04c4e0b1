//! Streamed replies: the body's server-sent events, parsed by `sse-stream`, go
//! one by one to a provider's [`Assembler`], which hands the turn's pieces to the
//! caller's sink and builds the JSON body a non-streamed call would have returned, so
//! the provider's `decode` normalizes both alike.

use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};
use sse_stream::SseByteStream;

use crate::llm::LlmError;
use crate::llm::StreamSink;
use crate::providers::ApiKey;
use crate::providers::classify::{request_id, undecodable};
use crate::providers::http::{Reply, Streaming, Transport};

/// How many events after the end marker are read (without waiting) before the body is
/// dropped.
const DRAIN_EVENTS: usize = 4;

/// What one event means for the reply.
pub(crate) enum Step {
    /// More is to come.
    More,
    /// The provider's end marker: the reply is complete.
    End,
    /// An error event: the error object, classified as an embedded error.
    Failed(Value),
    /// Data that is not the JSON it should be.
    Undecodable(serde_json::Error),
}

/// A provider's reading of its event stream.
pub(crate) trait Assembler {
    /// The whole reply.
    type Output;

    /// Handles one event: `event` is its SSE event name (empty when none), `data` its
    /// data lines joined.
    fn on_event(&mut self, event: &str, data: &str, sink: &mut dyn StreamSink) -> Step;

    /// Whether what arrived is the whole reply although the end marker has not: the
    /// provider's final chunk, with its finish or stop reason, was read (case C55:
    /// servers and proxies that close the stream there, without `[DONE]` or its
    /// equivalent; Gemini's stream has no end marker at all). A stream that then ends
    /// cleanly is complete, not cut. `false` by default: only the end marker ends it.
    fn complete(&self) -> bool {
        false
    }

    /// The whole reply (for example the provider's non-streamed body).
    fn finish(self) -> Self::Output;
}

/// How a streamed reply frames its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Server-sent events (`text/event-stream`): the event name and its data lines.
    Sse,
    /// AWS event-stream binary messages (`application/vnd.amazon.eventstream`), read
    /// by [`eventstream`](super::eventstream): the `:event-type` (or `:exception-type`)
    /// header and the JSON payload. Bedrock's, with the `bedrock` feature.
    #[cfg(feature = "bedrock")]
    EventStream,
}

impl Framing {
    /// The media type asked for in `Accept`.
    pub(crate) fn media_type(self) -> &'static str {
        match self {
            Self::Sse => "text/event-stream",
            #[cfg(feature = "bedrock")]
            Self::EventStream => "application/vnd.amazon.eventstream",
        }
    }
}

/// One framed event: its name and its data (JSON text).
pub(crate) struct Event {
    pub(crate) name: String,
    pub(crate) data: String,
}

/// A failure to read the next event.
pub(crate) enum ReadError {
    /// The connection failed.
    Body(reqwest::Error),
    /// The bytes are not a well-formed stream (the message says why).
    Malformed(String),
}

/// How a stream ended.
pub(crate) enum Streamed<O> {
    /// At its end marker, or at the body's end after its final chunk
    /// ([`Assembler::complete`]), with the reply and the response headers.
    Done(O, reqwest::header::HeaderMap),
    /// With an error event: a reply whose body is `{"error": ..}`, for the provider's
    /// `decode` to classify as an error in a 2xx body.
    Failed(Reply),
    /// Not streamed: the server ignored `stream: true` and sent one JSON body, read
    /// whole (as a non-streamed reply, under the same cap), for the provider's `decode`.
    Whole(Reply),
}

/// Reads a streamed reply to its end marker (or to the body's end after its final
/// chunk, see [`Assembler::complete`]) and returns the assembled reply.
///
/// # Errors
/// Transient when the connection fails mid-way, when the stream ends before the end
/// marker and before its final chunk (cut mid-way), or when an event is not valid
/// UTF-8 or JSON; permanent when the events' data outgrows `max_response_bytes`.
pub(crate) async fn read<A: Assembler>(
    transport: &Transport,
    streaming: Streaming,
    framing: Framing,
    assembler: A,
    sink: &mut dyn StreamSink,
) -> Result<Streamed<A::Output>, LlmError> {
    let outcome = read_events(transport, streaming, framing, assembler, sink).await;
    // The last batch: what arrived before the end marker, or before a cut (which a
    // retry then voids).
    sink.flush();
    outcome
}

/// [`read`] without the last flush.
async fn read_events<A: Assembler>(
    transport: &Transport,
    streaming: Streaming,
    framing: Framing,
    assembler: A,
    sink: &mut dyn StreamSink,
) -> Result<Streamed<A::Output>, LlmError> {
    let Streaming {
        status,
        headers,
        mut response,
    } = streaming;
    if is_json(&headers) {
        let cap = transport.max_response_bytes();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > cap {
                        let length = (body.len() + chunk.len()) as u64;
                        return Err(transport.body_too_large(status, &headers, length));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(transport.stream_error(e, status, &headers)),
            }
        }
        return Ok(Streamed::Whole(Reply {
            status,
            headers,
            body,
        }));
    }
    let chunks = futures::stream::unfold(response, |mut response| async move {
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), response)),
            Ok(None) => None,
            Err(e) => Some((Err(e), response)),
        }
    });
    let events = events(framing, chunks);
    assemble(transport, status, headers, events, assembler, sink).await
}

/// The framed events of a body read as chunks.
pub(crate) fn events<'a, S, B>(framing: Framing, chunks: S) -> Events<'a>
where
    S: futures::Stream<Item = Result<B, reqwest::Error>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
    SseByteStream<S>:
        futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send + 'a,
{
    match framing {
        Framing::Sse => Box::pin(SseByteStream::new(chunks).map(sse_event)),
        #[cfg(feature = "bedrock")]
        Framing::EventStream => Box::pin(super::eventstream::events(chunks)),
    }
}

/// A body's events, as [`events`] frames them.
pub(crate) type Events<'a> =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<Event, ReadError>> + Send + 'a>>;

/// Hands each of `events` to `assembler` (under the transport's cap) up to the end
/// marker, an error event, or the events' end (see [`read`]); `status` and `headers`
/// are the response's.
///
/// # Errors
/// As [`read`].
pub(crate) async fn assemble<A: Assembler>(
    transport: &Transport,
    status: u16,
    headers: reqwest::header::HeaderMap,
    mut events: Events<'_>,
    mut assembler: A,
    sink: &mut dyn StreamSink,
) -> Result<Streamed<A::Output>, LlmError> {
    let provider = transport.provider();
    let key: Option<&ApiKey> = transport.key();
    let cap = transport.max_response_bytes();
    let mut read = 0usize;
    loop {
        let item = match events.next().now_or_never() {
            Some(item) => item,
            None => {
                // Nothing more is in yet: what was read so far is one batch.
                sink.flush();
                events.next().await
            }
        };
        let Some(item) = item else { break };
        let event = match item {
            Ok(event) => event,
            Err(ReadError::Body(e)) => return Err(transport.stream_error(e, status, &headers)),
            Err(ReadError::Malformed(e)) => {
                let message = format!("{provider} sent a malformed event stream: {e}");
                return Err(with_ids(LlmError::transient(message), status, &headers));
            }
        };
        let data = event.data.as_str();
        read = read.saturating_add(data.len());
        if read > cap {
            return Err(transport.body_too_large(status, &headers, read as u64));
        }
        match assembler.on_event(&event.name, data, sink) {
            Step::More => {}
            Step::End => {
                // What the server already sent after the end marker (usually nothing
                // but the body's own end) is read without waiting, so that HTTP/1.1
                // sees the body complete and keeps the connection for the next
                // request; a server that keeps the stream open is not waited for.
                for _ in 0..DRAIN_EVENTS {
                    match events.next().now_or_never() {
                        Some(Some(Ok(_))) => {}
                        _ => break,
                    }
                }
                return Ok(Streamed::Done(assembler.finish(), headers));
            }
            Step::Failed(error) => {
                return Ok(Streamed::Failed(reply(
                    status,
                    headers,
                    &json!({ "error": error }),
                )));
            }
            Step::Undecodable(e) => {
                return Err(undecodable(
                    provider,
                    status,
                    &headers,
                    data.as_bytes(),
                    &e,
                    key,
                ));
            }
        }
    }
    if assembler.complete() {
        // The final chunk came, then the body ended cleanly: the turn is whole (C55).
        tracing::debug!(
            provider,
            "the event stream ended after its final chunk, without its end marker"
        );
        return Ok(Streamed::Done(assembler.finish(), headers));
    }
    let message = format!(
        "{provider}: the event stream ended before its end marker (cut mid-way, after {read} bytes of data)"
    );
    Err(with_ids(LlmError::transient(message), status, &headers))
}

/// A server-sent event as an [`Event`] (no name: empty; no data: empty).
fn sse_event(item: Result<sse_stream::Sse, sse_stream::Error>) -> Result<Event, ReadError> {
    match item {
        Ok(event) => Ok(Event {
            name: event.event.unwrap_or_default(),
            data: event.data.unwrap_or_default(),
        }),
        Err(sse_stream::Error::Body(e)) => match e.downcast::<reqwest::Error>() {
            Ok(e) => Err(ReadError::Body(*e)),
            Err(e) => Err(ReadError::Malformed(format!(
                "reading the body failed: {e}"
            ))),
        },
        Err(e) => Err(ReadError::Malformed(e.to_string())),
    }
}

/// Whether the reply is one JSON body rather than an event stream.
fn is_json(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim_start().as_bytes();
            let json = b"application/json";
            v.len() >= json.len() && v[..json.len()].eq_ignore_ascii_case(json)
        })
}

/// A reply with `body` as its JSON body.
pub(crate) fn reply(status: u16, headers: reqwest::header::HeaderMap, body: &Value) -> Reply {
    Reply {
        status,
        headers,
        // A `Value` always serializes.
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

fn with_ids(error: LlmError, status: u16, headers: &reqwest::header::HeaderMap) -> LlmError {
    let error = error.with_status(status);
    match request_id(headers) {
        Some(id) => error.with_request_id(id),
        None => error,
    }
}
