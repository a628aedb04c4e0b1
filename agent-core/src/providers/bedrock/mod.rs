//! [`BedrockClient`]: the AWS Bedrock Converse API
//! (`POST /model/{modelId}/converse` and `/converse-stream`).
//!
//! Wire format from the Converse and ConverseStream references
//! (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>,
//! <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>);
//! the rules that matter here are in `docs/providers.md`, "AWS Bedrock".

mod media;
mod stream;
mod wire;

use std::borrow::Cow;
use std::fmt;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::ConfigError;
use crate::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, OutputCapabilities, StreamSink,
};
use crate::providers::glue::{self, Streams, Wire};
use crate::providers::http::{Reply, Transport};
use crate::providers::sse::Framing;
use crate::providers::{AwsCredentials, ProviderOptions, sse};
use stream::EventAssembler;

/// A client of the AWS Bedrock Converse API.
///
/// Posts to `{base}/model/{modelId}/converse` (`/converse-stream` when streaming), the
/// model id percent-encoded (`anthropic.claude-sonnet-4-5-20250929-v1:0` becomes
/// `anthropic.claude-sonnet-4-5-20250929-v1%3A0`), base
/// `https://bedrock-runtime.{region}.amazonaws.com`. Each request is signed with AWS
/// Signature Version 4 (service `bedrock`, by the `aws-sigv4` crate), or carries a
/// Bedrock API key as `Authorization: Bearer`
/// (<https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html>).
///
/// Body: `system: [{text}]`; the conversation as alternating `user` / `assistant`
/// messages of content blocks (`text`, `toolUse`, `toolResult` with `status: "error"`
/// on failures), every tool call answered; `inferenceConfig {maxTokens,
/// temperature}`; `toolConfig {tools: [{toolSpec: {name, description, inputSchema:
/// {json}}}], toolChoice}` with `auto`, `any` for a required call, `tool` for a named
/// one where the model takes it (Claude, Nova), else `any`, else `auto` (see
/// [`output_capabilities`](LlmClient::output_capabilities)).
///
/// Replies: text blocks joined, `toolUse` blocks as calls; `stopReason` mapped
/// (`guardrail_intervened` and `content_filtered` are a content filter); usage with
/// input = uncached + cache reads + cache writes; `x-amzn-requestid` kept. Errors are
/// classified by status and `x-amzn-errortype` (`docs/providers.md`).
pub struct BedrockClient {
    transport: Transport,
    auth: Auth,
}

/// How requests are authorized.
enum Auth {
    /// A Bedrock API key, in the transport's `Authorization` header.
    Bearer,
    /// SigV4, computed per request.
    SigV4 {
        region: String,
        credentials: AwsCredentials,
    },
}

impl fmt::Debug for BedrockClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.auth {
            Auth::Bearer => "bearer",
            Auth::SigV4 { .. } => "sigv4",
        };
        f.debug_struct("BedrockClient")
            .field("transport", &self.transport)
            .field("auth", &auth)
            .finish()
    }
}

impl BedrockClient {
    /// The SigV4 signing name of the Bedrock runtime.
    pub const SIGNING_NAME: &'static str = "bedrock";

    /// The default endpoint of a region:
    /// `https://bedrock-runtime.{region}.amazonaws.com` (source: "Amazon Bedrock
    /// endpoints and quotas", <https://docs.aws.amazon.com/general/latest/gr/bedrock.html>).
    pub fn default_base_url(region: &str) -> String {
        format!("https://bedrock-runtime.{region}.amazonaws.com")
    }

    /// A client from explicit options; reads no environment variable. Needs
    /// `options.aws_region`, and `options.bearer_token` (a Bedrock API key) or
    /// `options.aws_credentials`; `options.base_url` replaces the region's endpoint
    /// (see [`default_base_url`](Self::default_base_url)).
    ///
    /// # Errors
    /// [`ConfigError::InvalidProvider`] (with `model` set to `"bedrock"`) when the
    /// region or the credentials are missing, the region is not a region name, the token
    /// cannot be sent in a header, or the base URL is invalid. No message holds a secret.
    pub fn new(options: &ProviderOptions) -> Result<Self, ConfigError> {
        glue::built("bedrock", Self::build(options))
    }

    pub(crate) fn build(options: &ProviderOptions) -> Result<Self, String> {
        let region = options
            .aws_region
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .ok_or("an AWS region is required (AWS_REGION or AWS_DEFAULT_REGION)")?;
        if !region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(format!(
                "{region:?} is not an AWS region name (such as us-east-1)"
            ));
        }
        let base = options
            .base_url
            .clone()
            .unwrap_or_else(|| Self::default_base_url(region));
        let mut headers = HeaderMap::new();
        let (auth, key) = match (&options.bearer_token, &options.aws_credentials) {
            (Some(token), _) => {
                let value = Transport::secret_header(&format!("Bearer {}", token.expose()))?;
                Transport::insert_header(&mut headers, "authorization", value);
                (Auth::Bearer, token.clone())
            }
            (None, Some(credentials)) => {
                // What messages are cleaned of: what is sent and could be echoed back,
                // the session token; the secret itself never leaves the process.
                let key = credentials
                    .session_token()
                    .unwrap_or(credentials.secret_access_key())
                    .clone();
                let auth = Auth::SigV4 {
                    region: region.to_owned(),
                    credentials: credentials.clone(),
                };
                (auth, key)
            }
            (None, None) => {
                return Err(
                    "AWS credentials are required (AWS_BEARER_TOKEN_BEDROCK, or \
                     AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                        .to_owned(),
                );
            }
        };
        let base = base.trim_end_matches('/');
        let transport = Transport::new("bedrock", base, headers, Some(key), options)?;
        Ok(Self { transport, auth })
    }

    /// `{base}/model/{modelId}/{operation}`, the model id percent-encoded as one path
    /// segment.
    fn endpoint(&self, model: &str, operation: &str) -> Result<Url, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::permanent("bedrock: the model id is empty"));
        }
        let base = self.transport.url().as_str().trim_end_matches('/');
        let url = format!("{base}/model/{}/{operation}", encode_segment(model));
        Url::parse(&url)
            .map_err(|e| LlmError::permanent(format!("bedrock: no URL for model {model:?}: {e}")))
    }
}

/// Percent-encodes every byte but the unreserved ones (RFC 3986: letters, digits,
/// `-._~`), as the AWS SDKs encode a path label.
fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3 / 2);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The SigV4 headers of a POST of `body` to `url` at `time`: `authorization`,
/// `x-amz-date`, and `x-amz-security-token` with temporary credentials (source:
/// "Signature Version 4 signing process",
/// <https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html>;
/// the canonical request, string to sign and signature are the `aws-sigv4` crate's).
fn sigv4_headers(
    region: &str,
    credentials: &AwsCredentials,
    url: &Url,
    body: &[u8],
    time: SystemTime,
) -> Result<HeaderMap, String> {
    let identity = Credentials::new(
        credentials.access_key_id(),
        credentials.secret_access_key().expose(),
        credentials.session_token().map(|t| t.expose().to_owned()),
        None,
        "agent-core",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(BedrockClient::SIGNING_NAME)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("SigV4 parameters: {e}"))?
        .into();
    let content_type = ("content-type", "application/json");
    let request = SignableRequest::new(
        "POST",
        url.as_str(),
        std::iter::once(content_type),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("the request cannot be signed: {e}"))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| format!("the request cannot be signed: {e}"))?
        .into_parts();
    let mut headers = HeaderMap::new();
    let (signed, _params) = instructions.into_parts();
    for header in signed {
        let name = HeaderName::from_static(header.name());
        let mut value = HeaderValue::from_str(header.value())
            .map_err(|_| format!("the {} header is not a legal value", header.name()))?;
        value.set_sensitive(header.sensitive() || name == "authorization");
        headers.insert(name, value);
    }
    Ok(headers)
}

impl Wire for BedrockClient {
    fn transport(&self) -> &Transport {
        &self.transport
    }

    fn url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.endpoint(&request.model, "converse").map(Cow::Owned)
    }

    fn signed_headers(&self, url: &Url, body: &[u8]) -> Result<HeaderMap, LlmError> {
        match &self.auth {
            Auth::Bearer => Ok(HeaderMap::new()),
            Auth::SigV4 {
                region,
                credentials,
            } => sigv4_headers(region, credentials, url, body, SystemTime::now())
                .map_err(|e| LlmError::permanent(format!("bedrock: {e}"))),
        }
    }

    fn encode(&self, request: &LlmRequest, _stream: bool) -> Result<Vec<u8>, LlmError> {
        wire::encode(request)
    }

    fn decode(&self, reply: &Reply) -> Result<LlmResponse, LlmError> {
        wire::decode(reply, self.transport.key())
    }
}

impl Streams for BedrockClient {
    type Assembler = EventAssembler;

    const FRAMING: Framing = Framing::EventStream;

    fn stream_url(&self, request: &LlmRequest) -> Result<Cow<'_, Url>, LlmError> {
        self.endpoint(&request.model, "converse-stream")
            .map(Cow::Owned)
    }

    fn decode_streamed(
        &self,
        assembled: Value,
        status: u16,
        headers: HeaderMap,
    ) -> Result<LlmResponse, LlmError> {
        wire::decode(
            &sse::reply(status, headers, &assembled),
            self.transport.key(),
        )
    }
}

impl LlmClient for BedrockClient {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        glue::complete(self, request)
    }

    /// Streams with ConverseStream, reading the binary event stream up to its
    /// `metadata` event (see the stream module). The turn is normalized as a
    /// non-streamed one.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a LlmRequest,
        sink: &'a mut dyn StreamSink,
    ) -> LlmFuture<'a> {
        glue::complete_streaming(self, request, sink)
    }

    /// `"aws.bedrock"`, the GenAI conventions' name for AWS Bedrock
    /// (`gen_ai.provider.name`).
    fn provider(&self) -> &str {
        "aws.bedrock"
    }

    /// A forced `submit_output` is guaranteed only where the model takes
    /// `toolChoice.tool` (Anthropic Claude, Amazon Nova; see the type's docs): tool mode
    /// there. Other models get `any` or `auto` and prompted output. No native output
    /// mode: Converse has no response schema setting.
    fn output_capabilities(&self, model: &str) -> OutputCapabilities {
        OutputCapabilities::new(wire::choice_support(model).tool, false)
    }

    /// Refused for every model: this adapter does not send reasoning settings yet
    /// (Converse takes them per model family in `additionalModelRequestFields`, and
    /// Claude's thinking blocks would have to go back with their signatures), so a
    /// `.reasoning(..)` on a `bedrock/` model is a `ConfigError` at build rather than
    /// a setting dropped in silence. Reasoning a model returns on its own (DeepSeek-R1's
    /// `reasoningContent`) is still read into the turn's reasoning text.
    fn check_reasoning(
        &self,
        _model: &str,
        _reasoning: &crate::llm::Reasoning,
        _max_tokens: u32,
    ) -> Result<(), &'static str> {
        Err("the bedrock/ route sends no reasoning settings yet")
    }

    /// Images for Claude 3+, Nova Lite/Pro/Premier, Llama 3.2 11B/90B and Llama 4,
    /// Pixtral; documents for Claude 3+ and Nova Lite/Pro/Premier; parts in tool
    /// results for Claude; as bytes only (a URL or a file id is refused before any
    /// request: pass the bytes). Limits from the Converse `Message` reference (see
    /// `docs/providers.md`, "Content parts").
    fn content_capabilities(&self, model: &str) -> crate::llm::ContentCapabilities {
        media::capabilities(model)
    }

    /// `5m` and `1h` for Claude 4.5 and later, `5m` for the other models that take cache
    /// points (Claude 3.5 Haiku, 3.7 Sonnet, Claude 4, Amazon Nova), none for the rest
    /// (the `cachePoint` block's `ttl`; sources:
    /// <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CachePointBlock.html>,
    /// <https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html>).
    fn prompt_cache_ttls(&self, model: &str) -> &'static [crate::output::PromptCacheTtl] {
        wire::cache_ttls(model)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn cache_points_and_ttls_follow_the_model_table() {
        use crate::output::PromptCacheTtl::{FiveMinutes, OneHour};
        let cases: [(&str, &[crate::output::PromptCacheTtl], bool); 9] = [
            (
                "anthropic.claude-haiku-4-5-20251001-v1:0",
                &[FiveMinutes, OneHour],
                true,
            ),
            (
                "us.anthropic.claude-opus-4-6-v1",
                &[FiveMinutes, OneHour],
                true,
            ),
            (
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                &[FiveMinutes, OneHour],
                true,
            ),
            (
                "anthropic.claude-opus-4-20250514-v1:0",
                &[FiveMinutes],
                true,
            ),
            (
                "eu.anthropic.claude-3-7-sonnet-20250219-v1:0",
                &[FiveMinutes],
                true,
            ),
            (
                "anthropic.claude-3-5-haiku-20241022-v1:0",
                &[FiveMinutes],
                true,
            ),
            ("anthropic.claude-3-5-sonnet-20240620-v1:0", &[], false),
            ("anthropic.claude-3-haiku-20240307-v1:0", &[], false),
            ("meta.llama3-3-70b-instruct-v1:0", &[], false),
        ];
        for (model, ttls, tools) in cases {
            assert_eq!(wire::cache_ttls(model), ttls, "{model}");
            assert_eq!(wire::cache_support(model).tools, tools, "{model}");
        }
        let nova = wire::cache_support("us.amazon.nova-lite-v1:0");
        assert!(nova.points && !nova.tools && !nova.one_hour);
    }

    #[test]
    fn model_ids_are_one_encoded_segment() {
        assert_eq!(
            encode_segment("anthropic.claude-sonnet-4-5-20250929-v1:0"),
            "anthropic.claude-sonnet-4-5-20250929-v1%3A0"
        );
        assert_eq!(
            encode_segment("arn:aws:bedrock:us-east-1:1:inference-profile/us.x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x"
        );
    }

    #[test]
    fn a_signature_names_the_key_region_and_service() {
        let credentials =
            AwsCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
                .with_session_token("session-token");
        let url =
            Url::parse("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse").unwrap();
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        let headers = sigv4_headers("us-east-1", &credentials, &url, b"{}", time).unwrap();
        let auth = headers["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, SignedHeaders="
            ),
            "{auth}"
        );
        assert!(headers["authorization"].is_sensitive());
        assert_eq!(headers["x-amz-date"], "20150830T123600Z");
        assert_eq!(headers["x-amz-security-token"], "session-token");
        assert!(!format!("{headers:?}").contains("session-token"));
        // The same request at the same time signs the same; another body does not.
        let again = sigv4_headers("us-east-1", &credentials, &url, b"{}", time).unwrap();
        assert_eq!(again["authorization"], headers["authorization"]);
        let other = sigv4_headers("us-east-1", &credentials, &url, b"{ }", time).unwrap();
        assert_ne!(other["authorization"], headers["authorization"]);
    }
}
