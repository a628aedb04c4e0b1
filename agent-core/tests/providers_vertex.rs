//! Google Cloud Vertex AI (`vertex/gemini-*`, `vertex/claude-*`) over wiremock: the
//! service-account token exchange against a fake token endpoint (a TEST RSA key made
//! here, never a real one), the exact URLs and bodies of both publishers, plain and
//! streamed, token reuse and refresh, token-endpoint failures, and missing settings
//! failing at build with no request sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::llm::{LlmClient, LlmErrorKind, StreamDelta};
use agent_core::providers::{
    ANTHROPIC_VERTEX_VERSION, AnthropicClient, GcpServiceAccount, GeminiClient, ProviderOptions,
    VertexClient,
};
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, RsaKeyPair, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use providers_support::*;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

const PROJECT: &str = "test-project-123";
const LOCATION: &str = "us-central1";
const GEMINI: &str = "gemini-2.5-flash";
const CLAUDE: &str = "claude-sonnet-4-5@20250929";
const EMAIL: &str = "agent-core-test@test-project-123.iam.gserviceaccount.com";
const TOKEN_PATH: &str = "/token";

fn models(publisher: &str) -> String {
    format!("/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/{publisher}/models")
}

/// A freshly generated TEST key (RSA 2048) as a service-account key file whose
/// `token_uri` is the mock server's; and the key, to check signatures with.
fn test_account(server: &MockServer) -> (String, RsaKeyPair) {
    let key = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der<'static>>::as_der(&key).unwrap();
    let body = STANDARD.encode(der.as_ref());
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        lines.join("\n")
    );
    let file = json!({
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "test-key-id-0001",
        "private_key": pem,
        "client_email": EMAIL,
        "client_id": "100000000000000000001",
        "token_uri": format!("{}{TOKEN_PATH}", server.uri()),
    });
    (file.to_string(), key)
}

fn options(server: &MockServer) -> ProviderOptions {
    ProviderOptions::default()
        .with_gcp_project(PROJECT)
        .with_gcp_location(LOCATION)
        .with_base_url(server.uri())
}

fn token_reply(token: &str, expires_in: u64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "access_token": token,
        "expires_in": expires_in,
        "token_type": "Bearer",
    }))
}

/// A client with a service-account key; the token endpoint answers `tokens` in turn.
async fn sa_client(server: &MockServer, tokens: &[(&str, u64)]) -> (VertexClient, RsaKeyPair) {
    for (token, expires_in) in tokens {
        mount_post(server, TOKEN_PATH, token_reply(token, *expires_in), Some(1)).await;
    }
    let (file, key) = test_account(server);
    let account = GcpServiceAccount::from_json(&file).unwrap();
    let client = VertexClient::new(&options(server).with_gcp_service_account(account)).unwrap();
    (client, key)
}

fn token_requests(requests: &[wiremock::Request]) -> Vec<&wiremock::Request> {
    requests
        .iter()
        .filter(|r| r.url.path() == TOKEN_PATH)
        .collect()
}

fn model_requests(requests: &[wiremock::Request]) -> Vec<&wiremock::Request> {
    requests
        .iter()
        .filter(|r| r.url.path() != TOKEN_PATH)
        .collect()
}

/// A request's path and query (wiremock rebuilds the host as `localhost`).
fn target(request: &wiremock::Request) -> String {
    match request.url.query() {
        Some(query) => format!("{}?{query}", request.url.path()),
        None => request.url.path().to_owned(),
    }
}

/// The form fields of a token request.
fn form(request: &wiremock::Request) -> Vec<(String, String)> {
    let text = std::str::from_utf8(&request.body).unwrap();
    text.split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            (k.to_owned(), v.replace("%3A", ":"))
        })
        .collect()
}

/// Checks a JWT's signature with the test key's public half; its header and claims.
fn verified_jwt(jwt: &str, key: &RsaKeyPair) -> (Value, Value) {
    let (signing_input, signature) = jwt.rsplit_once('.').unwrap();
    let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key().as_ref())
        .verify(signing_input.as_bytes(), &signature)
        .expect("the assertion is signed with the service account's key");
    let (header, claims) = signing_input.split_once('.').unwrap();
    let decode = |part: &str| -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    };
    (decode(header), decode(claims))
}

/// The body a plain adapter sends for the same request (its mock server, its key).
async fn direct_body(publisher: &str, model: &str) -> Value {
    let server = MockServer::start().await;
    let options = ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(server.uri());
    let request = hello(model);
    if publisher == "google" {
        mount_post(
            &server,
            &format!("/v1beta/models/{model}:generateContent"),
            json_fixture(200, "gemini/text.json"),
            None,
        )
        .await;
        GeminiClient::new(&options)
            .unwrap()
            .complete(&request)
            .await
            .unwrap();
    } else {
        mount_post(
            &server,
            "/v1/messages",
            json_fixture(200, "anthropic/text.json"),
            None,
        )
        .await;
        AnthropicClient::new(&options)
            .unwrap()
            .complete(&request)
            .await
            .unwrap();
    }
    bodies(&server).await.remove(0)
}

#[tokio::test]
async fn gemini_on_vertex_exchanges_a_signed_jwt_and_posts_the_gemini_body() {
    let server = MockServer::start().await;
    let path = format!("{}/{GEMINI}:generateContent", models("google"));
    mount_post(&server, &path, json_fixture(200, "gemini/text.json"), None).await;
    let (client, key) = sa_client(&server, &[("ya29.test-first", 3600)]).await;

    let response = client.complete(&hello(GEMINI)).await.unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );
    assert_eq!(client.provider(), "gcp.vertex_ai");

    let sent = requests(&server).await;
    // The token request: the JWT-bearer grant, form-encoded, a verifiable assertion.
    let tokens = token_requests(&sent);
    assert_eq!(tokens.len(), 1);
    assert_eq!(
        header(tokens[0], "content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let fields = form(tokens[0]);
    assert_eq!(fields[0].0, "grant_type");
    assert_eq!(fields[0].1, "urn:ietf:params:oauth:grant-type:jwt-bearer");
    assert_eq!(fields[1].0, "assertion");
    let (jwt_header, claims) = verified_jwt(&fields[1].1, &key);
    assert_eq!(
        jwt_header,
        json!({"alg": "RS256", "typ": "JWT", "kid": "test-key-id-0001"})
    );
    assert_eq!(claims["iss"], EMAIL);
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/cloud-platform"
    );
    assert_eq!(claims["aud"], format!("{}{TOKEN_PATH}", server.uri()));
    let iat = claims["iat"].as_u64().unwrap();
    assert_eq!(claims["exp"].as_u64().unwrap(), iat + 3600);

    // The model request: Vertex's URL, the bearer token, no API key, Gemini's body.
    let calls = model_requests(&sent);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        target(calls[0]),
        "/v1/projects/test-project-123/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(
        header(calls[0], "authorization"),
        Some("Bearer ya29.test-first")
    );
    assert_eq!(header(calls[0], "x-goog-api-key"), None);
    let body: Value = serde_json::from_slice(&calls[0].body).unwrap();
    assert_eq!(body, direct_body("google", GEMINI).await);
    assert_eq!(
        body["systemInstruction"]["parts"][0]["text"],
        "You triage support tickets."
    );
}

#[tokio::test]
async fn claude_on_vertex_posts_the_messages_body_without_model_with_the_vertex_version() {
    let server = MockServer::start().await;
    let path = format!("{}/{CLAUDE}:rawPredict", models("anthropic"));
    mount_post(
        &server,
        &path,
        json_fixture(200, "anthropic/text.json"),
        None,
    )
    .await;
    let client =
        VertexClient::new(&options(&server).with_bearer_token("ya29.given-token")).unwrap();

    let response = client.complete(&hello(CLAUDE)).await.unwrap();
    assert_eq!(
        response.text,
        "The parcel is late; I would route it to shipping."
    );

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1, "a given token: no exchange");
    assert_eq!(
        target(&sent[0]),
        "/v1/projects/test-project-123/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
    );
    assert_eq!(
        header(&sent[0], "authorization"),
        Some("Bearer ya29.given-token")
    );
    assert_eq!(header(&sent[0], "x-api-key"), None);
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    let mut expected = direct_body("anthropic", CLAUDE).await;
    assert_eq!(expected["model"], CLAUDE);
    let object = expected.as_object_mut().unwrap();
    object.remove("model");
    object.insert("anthropic_version".to_owned(), json!("vertex-2023-10-16"));
    assert_eq!(body, expected);
    assert_eq!(body["anthropic_version"], ANTHROPIC_VERTEX_VERSION);
    assert!(body.get("model").is_none());
}

#[tokio::test]
async fn both_publishers_stream_from_their_streaming_methods() {
    let server = MockServer::start().await;
    let gemini_sse = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Route it \"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n",
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"to shipping.\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],",
        "\"usageMetadata\":{\"promptTokenCount\":21,\"candidatesTokenCount\":5,\"totalTokenCount\":26},\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n",
    );
    mount_post(
        &server,
        &format!("{}/{GEMINI}:streamGenerateContent", models("google")),
        ResponseTemplate::new(200).set_body_raw(gemini_sse, "text/event-stream"),
        None,
    )
    .await;
    mount_post(
        &server,
        &format!("{}/{CLAUDE}:streamRawPredict", models("anthropic")),
        raw_fixture(200, "streaming/anthropic/submit.sse", "text/event-stream"),
        None,
    )
    .await;
    let (client, _key) = sa_client(&server, &[("ya29.stream-token", 3600)]).await;

    let mut texts = Vec::new();
    let mut sink = |delta: StreamDelta<'_>| {
        if let StreamDelta::Text(t) = delta {
            texts.push(t.to_owned());
        }
    };
    let gemini = client
        .complete_streaming(&hello(GEMINI), &mut sink)
        .await
        .unwrap();
    assert_eq!(gemini.text, "Route it to shipping.");
    assert_eq!(texts, ["Route it ", "to shipping."]);
    assert_eq!(gemini.usage.input_tokens, 21);

    let claude = client
        .complete_streaming(&hello(CLAUDE), &mut |_: StreamDelta<'_>| {})
        .await
        .unwrap();
    assert_eq!(claude.tool_calls.len(), 1);
    assert_eq!(claude.tool_calls[0].name, "submit_output");

    let sent = requests(&server).await;
    assert_eq!(
        token_requests(&sent).len(),
        1,
        "one token serves both calls"
    );
    let calls = model_requests(&sent);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        target(calls[0]),
        "/v1/projects/test-project-123/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        target(calls[1]),
        "/v1/projects/test-project-123/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    );
    for call in &calls {
        assert_eq!(
            header(call, "authorization"),
            Some("Bearer ya29.stream-token")
        );
        assert_eq!(header(call, "accept"), Some("text/event-stream"));
    }
    let claude_body: Value = serde_json::from_slice(&calls[1].body).unwrap();
    assert_eq!(claude_body["stream"], true);
    assert_eq!(claude_body["anthropic_version"], "vertex-2023-10-16");
    assert!(claude_body.get("model").is_none());
}

#[tokio::test]
async fn a_token_near_its_expiry_is_refreshed_and_a_fresh_one_reused() {
    // expires_in 30 s is inside the 60 s refresh margin: each call exchanges anew.
    let server = MockServer::start().await;
    let path = format!("{}/{GEMINI}:generateContent", models("google"));
    mount_post(&server, &path, json_fixture(200, "gemini/text.json"), None).await;
    let (client, _key) = sa_client(&server, &[("ya29.short-1", 30), ("ya29.short-2", 30)]).await;
    client.complete(&hello(GEMINI)).await.unwrap();
    client.complete(&hello(GEMINI)).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(token_requests(&sent).len(), 2);
    let auth: Vec<_> = model_requests(&sent)
        .iter()
        .map(|r| header(r, "authorization").unwrap().to_owned())
        .collect();
    assert_eq!(auth, ["Bearer ya29.short-1", "Bearer ya29.short-2"]);

    // An hour-long token serves both calls.
    let server = MockServer::start().await;
    mount_post(&server, &path, json_fixture(200, "gemini/text.json"), None).await;
    let (client, _key) = sa_client(&server, &[("ya29.long", 3600), ("ya29.unused", 3600)]).await;
    client.complete(&hello(GEMINI)).await.unwrap();
    client.complete(&hello(GEMINI)).await.unwrap();
    let sent = requests(&server).await;
    assert_eq!(token_requests(&sent).len(), 1);
    for call in model_requests(&sent) {
        assert_eq!(header(call, "authorization"), Some("Bearer ya29.long"));
    }
}

#[tokio::test]
async fn token_endpoint_failures_are_typed_and_hold_no_secret() {
    let cases = [
        (
            503,
            json!({"error": "backend_error"}),
            LlmErrorKind::Transient,
        ),
        (
            429,
            json!({"error": "rate_limit_exceeded"}),
            LlmErrorKind::Transient,
        ),
        (
            400,
            json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}),
            LlmErrorKind::Permanent,
        ),
        (
            401,
            json!({"error": "unauthorized_client"}),
            LlmErrorKind::Permanent,
        ),
    ];
    for (status, reply, kind) in cases {
        let server = MockServer::start().await;
        mount_post(
            &server,
            TOKEN_PATH,
            ResponseTemplate::new(status).set_body_json(&reply),
            None,
        )
        .await;
        let (file, _key) = test_account(&server);
        let account = GcpServiceAccount::from_json(&file).unwrap();
        let client =
            VertexClient::new(&options(&server).with_gcp_service_account(account)).unwrap();
        let error = client.complete(&hello(GEMINI)).await.unwrap_err();
        assert_eq!(error.kind, kind, "{status}");
        assert_eq!(error.status, Some(status));
        assert!(
            error.message.contains(&status.to_string()),
            "{}",
            error.message
        );
        assert!(error.message.contains(reply["error"].as_str().unwrap()));
        let sent = requests(&server).await;
        assert_eq!(
            model_requests(&sent).len(),
            0,
            "no model call without a token"
        );
        // Neither the key nor the assertion is in the message.
        let pem: Value = serde_json::from_str(&file).unwrap();
        let pem = pem["private_key"].as_str().unwrap();
        let key_line = pem.lines().nth(1).unwrap();
        assert!(!error.message.contains(key_line));
        let fields = form(token_requests(&sent)[0]);
        assert!(!error.message.contains(&fields[1].1));
    }
}

#[tokio::test]
async fn missing_settings_fail_at_build_naming_what_is_missing_with_no_request_sent() {
    let server = MockServer::start().await;
    let message = |options: &ProviderOptions| match VertexClient::new(options) {
        Err(agent_core::ConfigError::InvalidProvider { model, message }) => {
            assert_eq!(model, "vertex");
            message
        }
        other => panic!("{other:?}"),
    };
    let no_credentials = message(&options(&server));
    assert!(
        no_credentials.contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{no_credentials}"
    );
    let no_project = ProviderOptions::default()
        .with_gcp_location(LOCATION)
        .with_bearer_token("ya29.x");
    assert!(message(&no_project).contains("GOOGLE_CLOUD_PROJECT"));
    let no_location = ProviderOptions::default()
        .with_gcp_project(PROJECT)
        .with_bearer_token("ya29.x");
    assert!(message(&no_location).contains("GOOGLE_CLOUD_LOCATION"));
    let bad_location = options(&server)
        .with_gcp_location("us-central1/../x")
        .with_bearer_token("ya29.x");
    assert!(message(&bad_location).contains("location"));
    assert!(requests(&server).await.is_empty());

    // A bad key file is an error when read, naming no key material.
    let (file, _key) = test_account(&server);
    let mut bad: Value = serde_json::from_str(&file).unwrap();
    bad["private_key"] = json!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let error = GcpServiceAccount::from_json(&bad.to_string()).unwrap_err();
    assert!(error.contains("not an RSA PKCS#8 key"), "{error}");
    let user = json!({"type": "authorized_user", "client_id": "x", "refresh_token": "r"});
    let error = GcpServiceAccount::from_json(&user.to_string()).unwrap_err();
    assert!(error.contains("authorized_user"), "{error}");
    assert!(requests(&server).await.is_empty());
}

#[tokio::test]
async fn debug_output_shows_no_key_and_no_token() {
    let server = MockServer::start().await;
    let (file, _key) = test_account(&server);
    let account = GcpServiceAccount::from_json(&file).unwrap();
    let parsed: Value = serde_json::from_str(&file).unwrap();
    let key_line = parsed["private_key"]
        .as_str()
        .unwrap()
        .lines()
        .nth(1)
        .unwrap();
    let options = options(&server).with_gcp_service_account(account.clone());
    let with_token = options.clone().with_bearer_token("ya29.secret-token-value");
    let client = VertexClient::new(&with_token).unwrap();
    for text in [
        format!("{account:?}"),
        format!("{options:?}"),
        format!("{with_token:?}"),
        format!("{client:?}"),
    ] {
        assert!(!text.contains(key_line), "{text}");
        assert!(!text.contains("ya29.secret-token-value"), "{text}");
    }
    assert!(format!("{account:?}").contains(EMAIL));
}
