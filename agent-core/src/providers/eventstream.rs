//! AWS event-stream framing (`application/vnd.amazon.eventstream`): the binary
//! messages of a streamed AWS reply (Bedrock's ConverseStream), decoded by
//! `aws-smithy-eventstream`, as the [`Event`]s the shared stream reader
//! ([`sse::read`](super::sse::read)) hands to a provider's assembler.
//!
//! Each message has a prelude (total and header lengths, CRC), headers and a payload,
//! then a message CRC, all checked by the decoder. `:message-type` is `event` (the
//! event's name in `:event-type`), `exception` (its type in `:exception-type`, for
//! example `throttlingException`; the payload a JSON `{"message": ..}`) or `error`
//! (`:error-code`, `:error-message`, no payload). Source: "Event stream encoding",
//! <https://docs.aws.amazon.com/transcribe/latest/dg/event-stream.html>, and the
//! ConverseStream reference,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::Message;
use futures::{Stream, StreamExt};
use serde_json::json;

use crate::providers::sse::{Event, ReadError};

/// The events of a body read as chunks: one per message, in order; the first
/// undecodable message ends the stream with [`ReadError::Malformed`]. A body that ends
/// mid-message ends the events there (the reader then reports a cut stream).
pub(crate) fn events<S, B>(chunks: S) -> impl Stream<Item = Result<Event, ReadError>> + Send
where
    S: Stream<Item = Result<B, reqwest::Error>> + Send,
    B: AsRef<[u8]>,
{
    let state = (
        Box::pin(chunks),
        Vec::new(),
        MessageFrameDecoder::new(),
        false,
    );
    futures::stream::unfold(
        state,
        |(mut chunks, mut buffer, mut decoder, failed)| async move {
            if failed {
                return None;
            }
            loop {
                let mut unread: &[u8] = &buffer;
                let decoded = decoder.decode_frame(&mut unread);
                let consumed = buffer.len() - unread.len();
                buffer.drain(..consumed);
                match decoded {
                    Ok(DecodedFrame::Complete(message)) => {
                        let event = event_of(&message);
                        let failed = event.is_err();
                        return Some((event, (chunks, buffer, decoder, failed)));
                    }
                    Ok(DecodedFrame::Incomplete) => {}
                    Err(e) => {
                        let error = ReadError::Malformed(format!("undecodable message: {e}"));
                        return Some((Err(error), (chunks, buffer, decoder, true)));
                    }
                }
                match chunks.next().await {
                    Some(Ok(chunk)) => buffer.extend_from_slice(chunk.as_ref()),
                    Some(Err(e)) => {
                        return Some((Err(ReadError::Body(e)), (chunks, buffer, decoder, true)));
                    }
                    None => return None,
                }
            }
        },
    )
}

/// The value of a string header of a message.
fn header<'m>(message: &'m Message, name: &str) -> Option<&'m str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

/// The name of the event an `error` message becomes.
pub(crate) const ERROR_EVENT: &str = ":error";

/// A message as an event: an `event` by its `:event-type`, an `exception` by its
/// `:exception-type`, an `error` as the event [`ERROR_EVENT`] whose data is
/// `{"type": :error-code, "message": :error-message}`.
fn event_of(message: &Message) -> Result<Event, ReadError> {
    let kind = header(message, ":message-type").unwrap_or("event");
    let name = match kind {
        "event" => header(message, ":event-type"),
        "exception" => header(message, ":exception-type"),
        "error" => {
            let code = header(message, ":error-code").unwrap_or("error");
            let text = header(message, ":error-message").unwrap_or_default();
            return Ok(Event {
                name: ERROR_EVENT.to_owned(),
                data: json!({ "type": code, "message": text }).to_string(),
            });
        }
        other => {
            return Err(ReadError::Malformed(format!(
                "a message of unknown :message-type {other:?}"
            )));
        }
    };
    let Some(name) = name else {
        return Err(ReadError::Malformed(format!(
            "a message of type {kind} without its type header"
        )));
    };
    let data = std::str::from_utf8(message.payload())
        .map_err(|e| ReadError::Malformed(format!("a payload that is not UTF-8: {e}")))?;
    Ok(Event {
        name: name.to_owned(),
        data: data.to_owned(),
    })
}
