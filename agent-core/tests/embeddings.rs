//! The OpenAI-compatible embeddings client against wiremock (and, ignored by default,
//! the local llama.cpp server).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use agent_core::providers::{EmbeddingClient, ProviderOptions};
use agent_core::{config::Backoff, llm::LlmErrorKind, store::Embedder};
use providers_support::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

fn client(server: &MockServer, key: Option<&str>) -> EmbeddingClient {
    let mut options = ProviderOptions::default().with_base_url(format!("{}/v1", server.uri()));
    if let Some(key) = key {
        options = options.with_api_key(key);
    }
    EmbeddingClient::compatible("dispatch", "gemma", &options)
        .unwrap()
        .backoff(Backoff::none())
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn vectors_come_back_in_input_order_and_the_key_is_a_bearer_token() {
    let server = MockServer::start().await;
    let body = json!({
        "object": "list",
        "model": "gemma",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 1.0, 0.5]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0, 0.25]}
        ],
        "usage": {"prompt_tokens": 4, "total_tokens": 4}
    });
    mount_post(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(200).set_body_json(body),
        None,
    )
    .await;
    let c = client(&server, Some("sk-embed"));
    assert_eq!(c.model(), "gemma");
    let vectors = c.embed(&texts(&["first", "second"])).await.unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0, 0.25], vec![0.0, 1.0, 0.5]]);
    let sent = requests(&server).await;
    assert_eq!(header(&sent[0], "authorization"), Some("Bearer sk-embed"));
    let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({"model": "gemma", "input": ["first", "second"]})
    );
}

#[tokio::test]
async fn a_transient_failure_is_retried_and_a_permanent_one_is_not() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(503).set_body_string("busy"),
        Some(1),
    )
    .await;
    mount_post(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(200)
            .set_body_json(json!({"data": [{"index": 0, "embedding": [0.5, 0.5]}]})),
        None,
    )
    .await;
    let vectors = client(&server, None).embed(&texts(&["x"])).await.unwrap();
    assert_eq!(vectors, vec![vec![0.5, 0.5]]);
    assert_eq!(requests(&server).await.len(), 2);

    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "bad key sk-embed"}})),
        None,
    )
    .await;
    let error = client(&server, Some("sk-embed"))
        .embed(&texts(&["x"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Permanent);
    assert_eq!(error.status, Some(401));
    assert!(!error.message.contains("sk-embed"), "{}", error.message);
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_wrong_count_or_ragged_vectors_are_permanent_errors() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(200)
            .set_body_json(json!({"data": [{"index": 0, "embedding": [0.5, 0.5]}]})),
        None,
    )
    .await;
    let error = client(&server, None)
        .embed(&texts(&["a", "b"]))
        .await
        .unwrap_err();
    assert_eq!(error.kind, LlmErrorKind::Permanent);
    assert!(
        error.message.contains("sent 2 texts, got 1 vectors"),
        "{}",
        error.message
    );

    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/embeddings",
        ResponseTemplate::new(200).set_body_json(json!({"data": [
            {"index": 0, "embedding": [0.5, 0.5]},
            {"index": 1, "embedding": [0.5]}
        ]})),
        None,
    )
    .await;
    let error = client(&server, None)
        .embed(&texts(&["a", "b"]))
        .await
        .unwrap_err();
    assert!(
        error.message.contains("different or zero lengths"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn many_texts_go_in_batches_of_64() {
    let server = MockServer::start().await;
    // Echo server: answers each request with one vector per input, numbered.
    struct Echo;
    impl wiremock::Respond for Echo {
        fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            let data: Vec<_> = body["input"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let n: f32 = t.as_str().unwrap().parse().unwrap();
                    json!({"index": i, "embedding": [n, 1.0]})
                })
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({"data": data}))
        }
    }
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/embeddings"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    let inputs: Vec<String> = (0..150).map(|i| i.to_string()).collect();
    let vectors = client(&server, None).embed(&inputs).await.unwrap();
    assert_eq!(vectors.len(), 150);
    assert!(vectors.iter().enumerate().all(|(i, v)| v[0] == i as f32));
    assert_eq!(requests(&server).await.len(), 3);
}

/// The local llama.cpp server on 127.0.0.1:8080 (`scripts/local-llm.sh`, any of its
/// models).
#[tokio::test]
#[ignore = "needs the local llama.cpp server on 127.0.0.1:8080"]
async fn live_llama_cpp_embeddings() {
    let options = ProviderOptions::default().with_base_url("http://127.0.0.1:8080/v1");
    let c = EmbeddingClient::route_with("dispatch/gemma", &options).unwrap();
    let vectors = c
        .embed(&texts(&[
            "my parcel is late",
            "where is my parcel",
            "refund my invoice",
        ]))
        .await
        .unwrap();
    assert_eq!(vectors.len(), 3);
    // The model's width: 640 for the script's Gemma 3 270M, 1,536 for Qwen 2.5 1.5B.
    let width = vectors[0].len();
    assert!(width >= 64, "a vector of {width} numbers");
    assert!(
        vectors.iter().all(|v| v.len() == width),
        "one width for every input"
    );
    let near = agent_core::store::cosine(&vectors[0], &vectors[1]);
    let far = agent_core::store::cosine(&vectors[0], &vectors[2]);
    assert!(near > far, "{near} vs {far}");
}
