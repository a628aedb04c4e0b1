//! The glue every HTTP adapter shares. A provider supplies its parts through [`Wire`]
//! (and [`Streams`] where it streams): its transport, how a request is encoded and how
//! a reply is decoded, and its stream assembler. Written once here: the LLM call, the
//! streamed LLM call (with the fallback for servers that ignore `stream: true`), the
//! traced `LlmClient` calls, and the constructor's error mapping.

use std::borrow::Cow;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderValue};

use crate::error::ConfigError;
use crate::llm::{LlmError, LlmFuture, LlmRequest, LlmResponse, StreamSink, replay};
use crate::providers::http::{Reply, Transport, traced};
use crate::providers::normalize;
use crate::providers::sse::{self, Assembler, Framing};

/// A provider's request and reply formats, over its [`Transport`].
pub(crate) trait Wire: Send + Sync {
    /// The transport: endpoint, headers (the key), pool and caps.
    fn transport(&self) -> &Transport;

    /// The URL a request is posted to: the transport's, unless the endpoint depends on
    /// the request (Gemini names the model in the path).
    ///
    /// # Errors
    /// A permanent [`LlmError`] when no URL can be made for the request.
    fn url(&self, _request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        Ok(Cow::Borrowed(self.transport().url()))
    }

    /// Headers computed over the URL and body of each request, besides the
    /// transport's: a request signature (AWS SigV4 for Bedrock). None by default.
    ///
    /// # Errors
    /// A permanent [`LlmError`] when the request cannot be signed.
    fn signed_headers(&self, _url: &Url, _body: &[u8]) -> Result<HeaderMap, LlmError> {
        Ok(HeaderMap::new())
    }

    /// Headers a request needs from its content, beside the transport's and the
    /// signed ones (Anthropic's Files API beta header when a part is a file id).
    /// None by default.
    fn content_headers(&self, _request: &LlmRequest, _headers: &mut HeaderMap) {}

    /// The JSON body of a request (`stream`: asking for server-sent events).
    ///
    /// # Errors
    /// A permanent [`LlmError`] when the body cannot be serialized.
    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<Vec<u8>, LlmError>;

    /// Normalizes a 2xx reply read whole.
    ///
    /// # Errors
    /// The provider's classification of an undecodable body or an error object in it.
    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError>;
}

/// A provider that streams: its assembler of the event stream and the decoding of what
/// it assembled.
pub(crate) trait Streams: Wire {
    /// Reads the provider's events into the reply.
    type Assembler: Assembler + Default + Send;

    /// How the stream's events are framed: server-sent events (the default), or AWS
    /// binary event-stream messages.
    const FRAMING: Framing = Framing::Sse;

    /// The URL a streamed request is posted to: the transport's, unless the endpoint
    /// depends on the request or differs from the non-streamed one (Bedrock's
    /// `/converse-stream`).
    ///
    /// # Errors
    /// A permanent [`LlmError`] when no URL can be made for the request.
    fn stream_url(&self, _request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        Ok(Cow::Borrowed(self.transport().url()))
    }

    /// Normalizes a stream that reached its end marker (or ended after its final
    /// chunk, see [`Assembler::complete`]): `assembled` is the assembler's reply,
    /// `status` and `headers` the response's.
    ///
    /// # Errors
    /// As [`Wire::decode`].
    fn decode_streamed(
        &self,
        assembled: <Self::Assembler as Assembler>::Output,
        status: u16,
        headers: HeaderMap,
    ) -> Result<LlmResponse, LlmError>;
}

/// One LLM call: encode, post, decode.
///
/// # Errors
/// The transport's errors (status, connection, caps) and the provider's decode errors.
pub(crate) async fn round_trip<W: Wire>(
    wire: &W,
    request: &LlmRequest,
) -> Result<LlmResponse, LlmError> {
    let url = wire.url(request)?;
    let body = wire.encode(request, false)?;
    let mut signed = wire.signed_headers(&url, &body)?;
    wire.content_headers(request, &mut signed);
    let reply = wire.transport().post_with(&url, body, signed).await?;
    decode_whole(wire, &reply)
}

/// A 2xx reply read whole, decoded and normalized as every plain LLM call's is: a live
/// call's, and a batch job's result line (which holds the same body).
///
/// # Errors
/// The provider's classification of an undecodable body or an error object in it.
pub(crate) fn decode_whole<W: Wire + ?Sized>(
    wire: &W,
    reply: &Reply,
) -> Result<LlmResponse, LlmError> {
    wire.decode(reply).map(normalize::blank_identity)
}

/// One streamed LLM call: the pieces go to `sink` as they arrive; the returned
/// response is the whole turn, normalized as a non-streamed one. An error event in the
/// stream is decoded as an error body; a server that answers with one JSON body is read
/// as a non-streamed reply, and the turn replayed to `sink`.
///
/// # Errors
/// As [`round_trip`], plus the stream's: cut mid-way, undecodable events, over the cap.
pub(crate) async fn streamed_round_trip<W: Streams>(
    wire: &W,
    request: &LlmRequest,
    sink: &mut dyn StreamSink,
) -> Result<LlmResponse, LlmError> {
    let url = wire.stream_url(request)?;
    let body = wire.encode(request, true)?;
    let mut signed = wire.signed_headers(&url, &body)?;
    wire.content_headers(request, &mut signed);
    let transport = wire.transport();
    let accept = HeaderValue::from_static(W::FRAMING.media_type());
    let streaming = transport
        .post_streaming_with(&url, body, signed, accept)
        .await?;
    let status = streaming.status;
    let assembler = W::Assembler::default();
    let response = match sse::read(transport, streaming, W::FRAMING, assembler, sink).await? {
        sse::Streamed::Done(assembled, headers) => wire.decode_streamed(assembled, status, headers),
        sse::Streamed::Failed(reply) => wire.decode(&reply),
        sse::Streamed::Whole(reply) => {
            let response = wire.decode(&reply)?;
            replay(&response, sink);
            Ok(response)
        }
    };
    response.map(normalize::blank_identity)
}

/// [`LlmClient::complete`](crate::llm::LlmClient::complete) of an HTTP adapter: one traced
/// LLM call.
pub(crate) fn complete<'a, W: Wire>(wire: &'a W, request: &'a LlmRequest) -> LlmFuture<'a> {
    Box::pin(traced(
        wire.transport().provider(),
        round_trip(wire, request),
    ))
}

/// [`LlmClient::complete_streaming`](crate::llm::LlmClient::complete_streaming) of an HTTP
/// adapter that streams: one traced streamed LLM call.
pub(crate) fn complete_streaming<'a, W: Streams>(
    wire: &'a W,
    request: &'a LlmRequest,
    sink: &'a mut dyn StreamSink,
) -> LlmFuture<'a> {
    Box::pin(traced(
        wire.transport().provider(),
        streamed_round_trip(wire, request, sink),
    ))
}

/// A public constructor's result: the message of a client that could not be built
/// becomes [`ConfigError::InvalidProvider`] with `model` set to `provider`.
///
/// # Errors
/// That [`ConfigError`].
pub(crate) fn built<C>(provider: &str, client: Result<C, String>) -> Result<C, ConfigError> {
    client.map_err(|message| ConfigError::InvalidProvider {
        model: provider.to_owned(),
        message,
    })
}
