//! API keys never appear in `Debug`, `Display`, errors, traces or transcripts: runs that
//! end in a 401 whose body echoes the key, with every printable thing searched.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::io;
use std::sync::{Arc, Mutex};

use agent_core::providers::{AnthropicClient, ApiKey, GeminiClient, OpenAiClient, ProviderOptions};
use agent_core::{AgentConfig, AgentError, llm::LlmClient, run_agent};
use providers_support::*;
use tracing_subscriber::fmt::format::FmtSpan;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Collects formatted trace output.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Runs `model` against a server that answers 401 with the key in the body, under a
/// TRACE subscriber; returns everything printable.
async fn everything_after_a_401(
    model: &str,
    body: String,
    base_url_suffix: &str,
) -> (Vec<String>, Vec<String>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_raw(body, "application/json"))
        .mount(&server)
        .await;
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::FULL)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = crate::common::traced::set_default(subscriber);

    let base_url = format!("{}{base_url_suffix}", server.uri());
    let builder = triage(model, &base_url);
    let builder_debug = format!("{builder:?}");
    let config = builder.build().unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.status, Some(401));

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    let sent_headers = format!("{:?}", sent[0].headers);
    assert!(
        sent_headers.contains(KEY),
        "the key must reach the server: {sent_headers}"
    );

    let outcome_error = result.outcome.as_ref().unwrap_err();
    let texts = vec![
        builder_debug,
        format!("{config:?}"),
        format!("{result:?}"),
        format!("{outcome_error}"),
        format!("{outcome_error:?}"),
        format!("{error}"),
        format!("{error:?}"),
        serde_json::to_string(error).unwrap(),
        serde_json::to_string(&result.transcript).unwrap(),
        result.output.clone(),
        captured.text(),
    ];
    let evidence = vec![captured.text(), format!("{error}")];
    (texts, evidence)
}

fn assert_no_key(texts: &[String]) {
    for (i, text) in texts.iter().enumerate() {
        assert!(!text.contains(KEY), "text #{i} shows the key: {text}");
    }
}

#[tokio::test]
async fn openai_401_echoing_the_key_leaks_it_nowhere() {
    let body = fixture("openai/error_invalid_api_key.template.json").replace("{KEY}", KEY);
    let (texts, evidence) = everything_after_a_401("gpt-4.1", body, "/v1").await;
    assert_no_key(&texts);
    // The search is meaningful: the trace saw the failure, the error says what happened.
    assert!(evidence[0].contains("401"), "{}", evidence[0]);
    assert!(
        evidence[0].contains("provider request failed"),
        "{}",
        evidence[0]
    );
    assert!(
        evidence[1].contains("invalid_request_error: Incorrect API key provided: <redacted>"),
        "{}",
        evidence[1]
    );
}

#[tokio::test]
async fn anthropic_401_leaks_the_key_nowhere() {
    let body = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {KEY}"}}}}"#
    );
    let (texts, evidence) = everything_after_a_401("claude-sonnet-4-5", body, "").await;
    assert_no_key(&texts);
    assert!(
        evidence[1].contains("authentication_error"),
        "{}",
        evidence[1]
    );
}

#[tokio::test]
async fn gemini_error_echoing_the_key_leaks_it_nowhere() {
    let body = fixture("gemini/error_api_key_invalid.template.json").replace("{KEY}", KEY);
    let (texts, evidence) = everything_after_a_401("gemini-2.5-flash", body, "").await;
    assert_no_key(&texts);
    assert!(
        evidence[1].contains(
            "INVALID_ARGUMENT: API key not valid. Please pass a valid API key. (key: <redacted>)"
        ),
        "{}",
        evidence[1]
    );
}

#[tokio::test]
async fn dispatch_401_leaks_the_key_nowhere() {
    let body = format!(
        r#"{{"error":{{"code":401,"message":"Invalid API Key: {KEY}","type":"authentication_error"}}}}"#
    );
    let (texts, _) = everything_after_a_401("dispatch/gemma", body, "/v1").await;
    assert_no_key(&texts);
}

#[test]
fn clients_options_and_config_errors_never_show_the_key() {
    let options = ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url("http://127.0.0.1:9/v1");
    let openai = OpenAiClient::openai(&options).unwrap();
    let anthropic = AnthropicClient::new(&options).unwrap();
    let compatible = OpenAiClient::compatible("dispatch", &options).unwrap();
    let gemini = GeminiClient::new(&options).unwrap();
    let key = ApiKey::new(KEY);
    let mut texts = vec![
        format!("{options:?}"),
        format!("{openai:?}"),
        format!("{anthropic:?}"),
        format!("{compatible:?}"),
        format!("{gemini:?}"),
        gemini.endpoint("gemini-2.5-flash").unwrap().to_string(),
        format!("{key:?}"),
        format!("{key}"),
        openai.endpoint().to_owned(),
        openai.provider().to_owned(),
    ];
    // A key that cannot go in a header: the error explains without quoting it.
    let bad = format!("{KEY}\n");
    let error = AgentConfig::<Triage>::builder("t")
        .model("gpt-4.1")
        .provider(ProviderOptions::default().with_api_key(bad.clone()))
        .build()
        .unwrap_err();
    texts.push(format!("{error}"));
    texts.push(format!("{error:?}"));
    let error = OpenAiClient::openai(&ProviderOptions::default().with_api_key(bad)).unwrap_err();
    texts.push(format!("{error} {error:?}"));
    assert!(texts.iter().any(|t| t.contains("<redacted>")));
    assert_no_key(&texts);
}

/// The fake AWS secret and session token of the Bedrock tests below.
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const AWS_SESSION: &str = "FwoGZXIvYXdzEXAMPLEsessiontoken";

#[tokio::test]
async fn bedrock_errors_echoing_the_secrets_leak_them_nowhere() {
    // The server echoes what each mode sends: the session token (SigV4; the secret
    // only signs and is never sent) and the API key (bearer).
    let server = MockServer::start().await;
    for (path, echoed) in [("/model/anthropic.", AWS_SESSION), ("/model/us.", KEY)] {
        let body = format!(
            r#"{{"message": "The security token included in the request is invalid: {echoed}"}}"#
        );
        Mock::given(method("POST"))
            .and(wiremock::matchers::path_regex(format!("^{path}")))
            .respond_with(
                ResponseTemplate::new(403)
                    .insert_header("x-amzn-errortype", "UnrecognizedClientException")
                    .set_body_raw(body, "application/json"),
            )
            .mount(&server)
            .await;
    }
    let credentials = agent_core::providers::AwsCredentials::new("AKIDEXAMPLE", AWS_SECRET)
        .with_session_token(AWS_SESSION);
    let mut texts = vec![format!("{credentials:?}")];
    // SigV4 (the secret signs, the token is sent) and bearer (the key is sent).
    let sigv4 = AgentConfig::<Triage>::builder("t")
        .model("bedrock/anthropic.claude-haiku-4-5-20251001-v1:0")
        .provider(
            ProviderOptions::default()
                .with_aws_region("us-east-1")
                .with_aws_credentials(credentials.clone())
                .with_base_url(server.uri()),
        )
        .backoff(agent_core::config::Backoff::none());
    let bearer = triage_with("bedrock/us.amazon.nova-pro-v1:0", &server.uri(), |o| {
        o.with_aws_region("us-east-1")
    });
    for builder in [sigv4, bearer] {
        texts.push(format!("{builder:?}"));
        let config = builder.build().unwrap();
        texts.push(format!("{config:?}"));
        let result = run_agent(&config, "ticket").await;
        let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
            panic!("{:?}", result.outcome)
        };
        assert_eq!(error.status, Some(403));
        assert!(
            error.message.contains("UnrecognizedClientException"),
            "{error}"
        );
        texts.push(format!("{result:?}"));
        texts.push(format!("{error} {error:?}"));
        texts.push(serde_json::to_string(error).unwrap());
        texts.push(serde_json::to_string(&result.transcript).unwrap());
    }
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].headers.get("x-amz-security-token").unwrap(),
        AWS_SESSION
    );
    // A client built by hand, and a build error.
    let client = agent_core::providers::BedrockClient::new(
        &ProviderOptions::default()
            .with_aws_region("us-east-1")
            .with_aws_credentials(credentials),
    )
    .unwrap();
    texts.push(format!("{client:?}"));
    let error = agent_core::providers::BedrockClient::new(
        &ProviderOptions::default()
            .with_bearer_token(KEY)
            .with_aws_region("not a region"),
    )
    .unwrap_err();
    texts.push(format!("{error} {error:?}"));
    assert!(texts.iter().any(|t| t.contains("<redacted>")));
    for (i, text) in texts.iter().enumerate() {
        for secret in [KEY, AWS_SECRET, AWS_SESSION] {
            assert!(!text.contains(secret), "text #{i} shows a secret: {text}");
        }
    }
}
