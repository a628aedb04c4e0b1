//! Retrieval on both backends: top-k by cosine similarity, the context section in the
//! system prompt, replaced and removed documents seen by every handle.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::sync::Arc;

use agent_core::store::{HashEmbedder, context_section};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, RunOptions, Value, json, run_agent_with,
    store::{Embedder, StoreError},
};
use common::Place;

fn embedder() -> Arc<dyn Embedder> {
    Arc::new(HashEmbedder::new(256))
}

async fn seed(place: &Place) -> agent_store::Documents {
    let store = place.open().await;
    let docs = store.documents("faq", embedder());
    docs.add_many(vec![
        (
            "shipping".into(),
            "Parcels ship in 2 days; a late parcel gets tracking from the courier.".into(),
            json!({"team": "shipping"}),
        ),
        (
            "refunds".into(),
            "Refunds go back to the card within 5 days of the return.".into(),
            json!({"team": "billing"}),
        ),
        (
            "password".into(),
            "Reset a forgotten password from the login page.".into(),
            Value::Null,
        ),
        (
            "invoice".into(),
            "Invoices are emailed after each order; ask billing for a copy.".into(),
            Value::Null,
        ),
        (
            "spam".into(),
            "Messages unrelated to the shop are closed without reply.".into(),
            Value::Null,
        ),
    ])
    .await
    .unwrap();
    docs
}

async fn top_k_by_cosine_similarity(place: &Place) {
    let docs = seed(place).await;
    assert_eq!(docs.len().await.unwrap(), 5);
    let found = docs
        .search("my parcel is late, where is the tracking?", 2)
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].id, "shipping");
    assert_eq!(found[0].metadata, json!({"team": "shipping"}));
    assert!(found[0].score > found[1].score);
    // The scores are the cosine similarities of the embedder's vectors.
    let e = HashEmbedder::new(256);
    let expected = agent_core::store::cosine(
        &e.vector("my parcel is late, where is the tracking?"),
        &e.vector(&found[0].text),
    );
    assert!(
        (found[0].score - expected).abs() < 1e-4,
        "{} vs {expected}",
        found[0].score
    );
    let refund = docs.search("refund to my card", 1).await.unwrap();
    assert_eq!(refund[0].id, "refunds");
    assert_eq!(docs.search("anything", 10).await.unwrap().len(), 5);
    assert!(docs.search("anything", 0).await.unwrap().is_empty());

    // Another handle (another process, say) changes the collection: the next search
    // reloads.
    let other = place.open().await.documents("faq", embedder());
    other
        .add(
            "refunds",
            "Card refunds: we never refund to a card.",
            Value::Null,
        )
        .await
        .unwrap();
    assert!(other.remove("spam").await.unwrap());
    assert!(!other.remove("spam").await.unwrap());
    let again = docs.search("refund to my card", 1).await.unwrap();
    assert_eq!(again[0].text, "Card refunds: we never refund to a card.");
    assert_eq!(docs.search("anything", 10).await.unwrap().len(), 4);
    // Another collection and another model see nothing of these.
    let empty = place.open().await.documents("other", embedder());
    assert!(empty.search("parcel", 3).await.unwrap().is_empty());
    let other_model = place
        .open()
        .await
        .documents("faq", Arc::new(HashEmbedder::new(64)));
    assert!(other_model.search("parcel", 3).await.unwrap().is_empty());
    assert!(matches!(
        docs.add("bad\0id", "x", Value::Null).await,
        Err(StoreError::Invalid { .. })
    ));
}

async fn context_is_appended_to_the_system_prompt(place: &Place) {
    let docs = seed(place).await;
    let model = ScriptedModel::new().text("ok").text("ok");
    let config: AgentConfig<String> = AgentConfig::builder("support")
        .llm(model.clone())
        .system_prompt("You answer shop questions.")
        .retriever(docs.clone())
        .retrieve_top_k(2)
        .build()
        .unwrap();
    let input = "How long do refunds to my card take?";
    let result = run_agent_with(&config, input, RunOptions::new()).await;
    assert_eq!(result.outcome.as_deref(), Ok("ok"));
    assert_eq!(result.store_failures, 0);
    let expected_docs = docs.search(input, 2).await.unwrap();
    assert_eq!(expected_docs[0].id, "refunds");
    let system = model.requests()[0].system.clone().unwrap();
    assert_eq!(
        system,
        format!(
            "You answer shop questions.\n\n{}",
            context_section(&expected_docs)
        )
    );
    assert!(
        system.contains("\n[1] refunds\nRefunds go back to the card"),
        "{system}"
    );
    // The input itself is unchanged, and it is the only message.
    assert_eq!(
        model.requests()[0].messages,
        [agent_core::llm::Message::user(input)]
    );

    // Without a system prompt the section is the whole prompt.
    let bare = config.with_(|b| b.system_prompt("")).unwrap();
    let _ = run_agent_with(&bare, input, RunOptions::new()).await;
    let system = model.requests()[1].system.clone().unwrap();
    assert_eq!(system, context_section(&expected_docs));
}

both_backends!(
    top_k_by_cosine_similarity,
    context_is_appended_to_the_system_prompt
);

/// The same search with the local llama.cpp server's embeddings (640 dimensions).
#[tokio::test]
#[ignore = "needs the local llama.cpp server on 127.0.0.1:8080"]
async fn live_llama_cpp_retrieval() {
    let options =
        agent_core::providers::ProviderOptions::default().with_base_url("http://127.0.0.1:8080/v1");
    let embedder =
        agent_core::providers::EmbeddingClient::route_with("dispatch/gemma", &options).unwrap();
    let place = common::sqlite_place();
    let docs = place.open().await.documents("faq", Arc::new(embedder));
    docs.add_many(vec![
        (
            "shipping".into(),
            "Where is my parcel? Late deliveries and tracking.".into(),
            Value::Null,
        ),
        (
            "refunds".into(),
            "Refunds are paid back to the card within 5 days.".into(),
            Value::Null,
        ),
    ])
    .await
    .unwrap();
    let found = docs
        .search("my package has not arrived yet", 1)
        .await
        .unwrap();
    assert_eq!(found[0].id, "shipping");
    place.remove().await;
}
