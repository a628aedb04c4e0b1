//! The decoders of the adapters driven from bytes, for the fuzz targets (feature
//! `fuzzing`, published as [`crate::fuzzing`]): the two readers of streamed bodies
//! (server-sent events, AWS event-stream), and each wire's reply and stream decoders
//! through the same code a call runs ([`Wire::decode`], [`sse::assemble`],
//! [`Streams::decode_streamed`]), with no network: the body is a list of chunks that
//! are all there, so every future here is ready at its first poll.

use std::sync::OnceLock;

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use futures::{FutureExt, StreamExt};
use reqwest::header::HeaderMap;

use crate::llm::{LlmError, LlmResponse, StreamDelta};
use crate::providers::glue::{Streams, Wire};
use crate::providers::http::Reply;
pub(crate) use crate::providers::sse::Framing;
use crate::providers::sse::{self, Event, ReadError, Streamed};
use crate::providers::{
    AnthropicClient, AwsCredentials, BedrockClient, GeminiClient, OpenAiClient,
    OpenAiResponsesClient, ProviderOptions,
};

/// The wires, by their decoders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireKind {
    /// OpenAI Chat Completions (`compatible`: an OpenAI-compatible server's flavour,
    /// which also reads tool calls written into the text).
    Chat { compatible: bool },
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `generateContent` / `streamGenerateContent?alt=sse`.
    Gemini,
    /// AWS Bedrock Converse / ConverseStream.
    Bedrock,
}

/// The adapters' clients, built once (no request is ever sent).
struct Clients {
    openai: OpenAiClient,
    compatible: OpenAiClient,
    responses: OpenAiResponsesClient,
    anthropic: AnthropicClient,
    gemini: GeminiClient,
    bedrock: BedrockClient,
}

fn clients() -> Result<&'static Clients, String> {
    static CLIENTS: OnceLock<Result<Clients, String>> = OnceLock::new();
    CLIENTS
        .get_or_init(|| {
            let options = ProviderOptions::default()
                .with_api_key("fuzz-key")
                .with_base_url("http://127.0.0.1:9/v1")
                .with_aws_region("us-east-1")
                .with_aws_credentials(AwsCredentials::new("AKIDFUZZ", "fuzz-secret"));
            let plain = ProviderOptions::default().with_api_key("fuzz-key");
            let e = |e: crate::ConfigError| e.to_string();
            Ok(Clients {
                openai: OpenAiClient::openai(&plain).map_err(e)?,
                compatible: OpenAiClient::compatible("fuzz", &options).map_err(e)?,
                responses: OpenAiResponsesClient::openai(&plain).map_err(e)?,
                anthropic: AnthropicClient::new(&plain).map_err(e)?,
                gemini: GeminiClient::new(&plain).map_err(e)?,
                bedrock: BedrockClient::new(&options).map_err(e)?,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A harness failure: not an outcome of the decoder under test, but a broken promise
/// of it (it waited on a body that was all there) or of the harness.
pub(crate) type Broken = String;

/// `body` in chunks of `size` bytes (0: one chunk), as the body stream of a response.
fn chunked(
    body: &[u8],
    size: usize,
) -> impl futures::Stream<Item = Result<&[u8], reqwest::Error>> + Send {
    let size = if size == 0 { body.len().max(1) } else { size };
    futures::stream::iter(body.chunks(size).map(Ok))
}

/// The events a streamed body is read as, in order: each event's name and data, or
/// the message of the malformed stream that ended them.
pub(crate) fn read_events(
    framing: Framing,
    body: &[u8],
    split: usize,
) -> Result<Result<Vec<(String, String)>, String>, Broken> {
    let mut events = sse::events(framing, chunked(body, split));
    let mut read = Vec::new();
    loop {
        match events.next().now_or_never() {
            None => return Err("the reader waited on a body that was all there".into()),
            Some(None) => return Ok(Ok(read)),
            Some(Some(Ok(Event { name, data }))) => read.push((name, data)),
            Some(Some(Err(ReadError::Malformed(message)))) => return Ok(Err(message)),
            Some(Some(Err(ReadError::Body(e)))) => return Err(e.to_string()),
        }
    }
}

/// A non-streamed reply's body decoded by `wire`.
pub(crate) fn decode_reply(
    wire: WireKind,
    body: &[u8],
) -> Result<Result<LlmResponse, LlmError>, Broken> {
    let clients = clients()?;
    let reply = Reply {
        status: 200,
        headers: HeaderMap::new(),
        body: body.to_vec(),
    };
    Ok(match wire {
        WireKind::Chat { compatible: false } => clients.openai.decode(&reply),
        WireKind::Chat { compatible: true } => clients.compatible.decode(&reply),
        WireKind::Responses => clients.responses.decode(&reply),
        WireKind::Anthropic => clients.anthropic.decode(&reply),
        WireKind::Gemini => clients.gemini.decode(&reply),
        WireKind::Bedrock => clients.bedrock.decode(&reply),
    })
}

/// What the sink of a fuzzed stream received: the bytes of every piece.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// The bytes of the text, argument and reasoning pieces, summed.
    pub(crate) bytes: usize,
    /// The number of pieces.
    pub(crate) pieces: usize,
}

/// A streamed body (server-sent events; for Bedrock, server-sent events each made an
/// event-stream message, see [`as_event_stream`]) read and decoded by `wire` as a
/// streamed call reads and decodes it, in chunks of `split` bytes.
pub(crate) fn decode_stream(
    wire: WireKind,
    body: &[u8],
    split: usize,
) -> Result<(Result<LlmResponse, LlmError>, Received), Broken> {
    let clients = clients()?;
    let mut received = Received::default();
    let outcome = match wire {
        WireKind::Chat { compatible: false } => stream(&clients.openai, body, split, &mut received),
        WireKind::Chat { compatible: true } => {
            stream(&clients.compatible, body, split, &mut received)
        }
        WireKind::Responses => stream(&clients.responses, body, split, &mut received),
        WireKind::Anthropic => stream(&clients.anthropic, body, split, &mut received),
        WireKind::Gemini => stream(&clients.gemini, body, split, &mut received),
        WireKind::Bedrock => {
            let frames = as_event_stream(body)?;
            stream(&clients.bedrock, &frames, split, &mut received)
        }
    }?;
    Ok((outcome, received))
}

fn stream<W: Streams>(
    wire: &W,
    body: &[u8],
    split: usize,
    received: &mut Received,
) -> Result<Result<LlmResponse, LlmError>, Broken> {
    let events = sse::events(W::FRAMING, chunked(body, split));
    let mut sink = |delta: StreamDelta<'_>| {
        let bytes = match delta {
            StreamDelta::Text(t) | StreamDelta::Reasoning(t) => t.len(),
            StreamDelta::ToolCallStarted { id, name, .. } => id.len() + name.len(),
            StreamDelta::ToolCallArguments { json, .. } => json.len(),
        };
        received.bytes = received.bytes.saturating_add(bytes);
        received.pieces += 1;
    };
    let assembled = sse::assemble(
        wire.transport(),
        200,
        HeaderMap::new(),
        events,
        W::Assembler::default(),
        &mut sink,
    )
    .now_or_never()
    .ok_or("the stream reader waited on a body that was all there")?;
    Ok(match assembled {
        Ok(Streamed::Done(assembled, headers)) => wire.decode_streamed(assembled, 200, headers),
        Ok(Streamed::Failed(reply) | Streamed::Whole(reply)) => wire.decode(&reply),
        Err(e) => Err(e),
    })
}

/// Server-sent events as AWS event-stream messages: an event named `exception:TYPE`
/// becomes an `exception` message of that type, `error:CODE` an `error` message with
/// that code and the data as its message, any other an `event` message of that type;
/// the data is the payload.
pub(crate) fn as_event_stream(body: &[u8]) -> Result<Vec<u8>, Broken> {
    // A malformed stream: no message (the reader then reports a stream cut short).
    let events = read_events(Framing::Sse, body, 0)?.unwrap_or_default();
    let mut out = Vec::new();
    for (name, data) in events {
        let string = |name: &'static str, value: &str| {
            Header::new(name, HeaderValue::String(value.to_owned().into()))
        };
        let message = if let Some(kind) = name.strip_prefix("exception:") {
            Message::new(data.into_bytes())
                .add_header(string(":message-type", "exception"))
                .add_header(string(":exception-type", kind))
        } else if let Some(code) = name.strip_prefix("error:") {
            Message::new(Vec::new())
                .add_header(string(":message-type", "error"))
                .add_header(string(":error-code", code))
                .add_header(string(":error-message", &data))
        } else {
            Message::new(data.into_bytes())
                .add_header(string(":message-type", "event"))
                .add_header(string(":event-type", &name))
        };
        // A header value over the format's limits cannot be written: left out.
        let mut frame = Vec::new();
        if write_message_to(&message, &mut frame).is_ok() {
            out.extend_from_slice(&frame);
        }
    }
    Ok(out)
}
