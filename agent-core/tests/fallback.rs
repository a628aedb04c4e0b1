//! Fallback models (`fallback_models`, `fallback_model_with`) end to end over wiremock:
//! which failures send the turn to the next model (C49), the typed error listing every
//! model, the usage per model, and the transcript across providers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::providers_support;

use std::sync::{Arc, Mutex};

use agent_core::providers::ProviderOptions;
use agent_core::{
    AgentError, ConfigError, Ending, llm::LlmErrorCause, observe::RunEvent, pricing::ModelPrice,
    run_agent,
};
use providers_support::*;
use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

const OPENAI_PATH: &str = "/v1/chat/completions";
const GEMINI_PATH: &str = "/v1beta/models/gemini-2.5-flash:generateContent";

fn openai_base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// Fallback options pointing at a mock server.
fn at(base: String) -> ProviderOptions {
    ProviderOptions::default()
        .with_api_key(KEY)
        .with_base_url(base)
}

fn server_error(status: u16) -> ResponseTemplate {
    json_fixture(status, "openai/error_server.json")
}

fn not_found() -> ResponseTemplate {
    ResponseTemplate::new(404).set_body_json(json!({"error": {
        "message": "The model `gpt-5-mini` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": null, "code": "model_not_found"}}))
}

/// One `ModelSwitched` event: (llm call, from, to, status, cause).
type Switch = (u32, String, String, Option<u16>, Option<LlmErrorCause>);

/// Every `ModelSwitched` event of a run.
#[derive(Clone, Default)]
struct Switches(Arc<Mutex<Vec<Switch>>>);

impl Switches {
    fn observer(&self) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
        let seen = Arc::clone(&self.0);
        move |event| {
            if let RunEvent::ModelSwitched {
                llm_call,
                from,
                to,
                error,
                ..
            } = event
            {
                seen.lock().unwrap().push((
                    *llm_call,
                    (*from).to_owned(),
                    (*to).to_owned(),
                    error.status,
                    error.cause,
                ));
            }
        }
    }

    fn get(&self) -> Vec<Switch> {
        self.0.lock().unwrap().clone()
    }
}

// C49: transient failures past max_llm_retries send the same turn to the fallback,
// which gets it with its own wire (Gemini's schema transform and tool encoding);
// usage and cost are counted per model.
#[tokio::test]
async fn c49_primary_503s_past_max_llm_retries_then_the_fallback_answers() {
    let openai = MockServer::start().await;
    mount_post(&openai, OPENAI_PATH, server_error(503), None).await;
    let gemini = MockServer::start().await;
    mount_post(
        &gemini,
        GEMINI_PATH,
        json_fixture(200, "gemini/submit.json"),
        None,
    )
    .await;
    let switches = Switches::default();
    let config = triage("gpt-5-mini", &openai_base(&openai))
        .fallback_model_with("gemini-2.5-flash", at(gemini.uri()))
        .price("gemini-2.5-flash", ModelPrice::new(1.0, 10.0))
        .price("gpt-5-mini", ModelPrice::new(2.0, 20.0))
        .observer(switches.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "My parcel A-1001 is a week late.").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(
        requests(&openai).await.len(),
        3,
        "max_llm_retries (3) to the primary"
    );
    assert_eq!(requests(&gemini).await.len(), 1);
    assert_eq!(
        switches.get(),
        [(
            3,
            "gpt-5-mini".to_owned(),
            "gemini-2.5-flash".to_owned(),
            Some(503),
            None
        )]
    );
    // The fallback's own encoding: Gemini's function declarations and schema subset.
    let body = &bodies(&gemini).await[0];
    let declared = &body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declared["name"], "submit_output");
    assert!(
        declared["parameters"].get("additionalProperties").is_none(),
        "{declared}"
    );
    assert_eq!(
        body["contents"][0]["parts"][0]["text"],
        "My parcel A-1001 is a week late."
    );
    // Usage per model: the primary's failed calls cost nothing; Gemini's 611 + 72.
    let usage = &result.usage;
    assert_eq!(usage.llm_calls, 4);
    assert_eq!(usage.input_tokens, 611);
    assert_eq!(usage.output_tokens, 72);
    let primary = usage.of_model("gpt-5-mini").unwrap();
    assert_eq!((primary.llm_calls, primary.total_tokens()), (3, 0));
    assert_eq!(primary.cost_usd, None);
    let fallback = usage.of_model("gemini-2.5-flash").unwrap();
    assert_eq!(fallback.llm_calls, 1);
    assert_eq!((fallback.input_tokens, fallback.output_tokens), (611, 72));
    let cost = (611.0 * 1.0 + 72.0 * 10.0) / 1e6;
    assert!((fallback.cost_usd.unwrap() - cost).abs() < 1e-12);
    assert!((usage.cost_usd.unwrap() - cost).abs() < 1e-12);
    assert_eq!(usage.by_model.len(), 2);
}

// C49: a model that does not exist (404) falls back at once, without retries.
#[tokio::test]
async fn c49_a_404_model_not_found_falls_back_at_once() {
    let primary = MockServer::start().await;
    mount_post(&primary, OPENAI_PATH, not_found(), None).await;
    let backup = MockServer::start().await;
    let submit = json_fixture(200, "openai/c5_stop_with_tool_calls.json");
    mount_post(&backup, OPENAI_PATH, submit, None).await;
    let switches = Switches::default();
    let config = triage("gpt-5-mini", &openai_base(&primary))
        .fallback_model_with("dispatch/backup", at(openai_base(&backup)))
        .observer(switches.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(requests(&primary).await.len(), 1, "not retried");
    let sent = bodies(&backup).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["model"], "backup", "the fallback's wire model");
    assert_eq!(
        switches.get(),
        [(
            1,
            "gpt-5-mini".to_owned(),
            "dispatch/backup".to_owned(),
            Some(404),
            Some(LlmErrorCause::ModelNotFound)
        )]
    );
    assert_eq!(
        result
            .usage
            .of_model("dispatch/backup")
            .unwrap()
            .input_tokens,
        140
    );
}

// C49: a 400 about our own request does not fall back: the next provider would reject
// it for the same reason.
#[tokio::test]
async fn c49_a_400_does_not_fall_back() {
    let primary = MockServer::start().await;
    let invalid = json_fixture(400, "openai/error_invalid_request.json");
    mount_post(&primary, OPENAI_PATH, invalid, None).await;
    let backup = MockServer::start().await;
    let submit = json_fixture(200, "openai/c5_stop_with_tool_calls.json");
    mount_post(&backup, OPENAI_PATH, submit, None).await;
    let switches = Switches::default();
    let config = triage("gpt-5-mini", &openai_base(&primary))
        .fallback_model_with("dispatch/backup", at(openai_base(&backup)))
        .observer(switches.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(AgentError::LlmPermanent { error }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.status, Some(400));
    assert!(!error.falls_back());
    assert_eq!(requests(&primary).await.len(), 1);
    assert_eq!(
        requests(&backup).await.len(),
        0,
        "never sent to the fallback"
    );
    assert!(switches.get().is_empty());
}

// C49: when every model fails, the typed error lists each model with its failures.
#[tokio::test]
async fn c49_every_model_failing_gives_a_typed_error_listing_all() {
    let openai = MockServer::start().await;
    mount_post(&openai, OPENAI_PATH, server_error(503), None).await;
    let gemini = MockServer::start().await;
    let quota = json_fixture(429, "gemini/error_quota_daily.json");
    mount_post(&gemini, GEMINI_PATH, quota, None).await;
    let backup = MockServer::start().await;
    mount_post(&backup, OPENAI_PATH, server_error(500), None).await;
    let switches = Switches::default();
    let config = triage("gpt-5-mini", &openai_base(&openai))
        .fallback_model_with("gemini-2.5-flash", at(gemini.uri()))
        .fallback_model_with("dispatch/backup", at(openai_base(&backup)))
        .observer(switches.observer())
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    let Err(error @ AgentError::ModelsFailed { models }) = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert_eq!(error.category(), "models_failed");
    assert_eq!(result.ending(), Ending::Failed);
    let summary: Vec<(&str, &str, Vec<Option<u16>>)> = models
        .iter()
        .map(|m| {
            let statuses = m.failures.iter().map(|f| f.status).collect();
            (m.model.as_str(), m.provider.as_str(), statuses)
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("gpt-5-mini", "openai", vec![Some(503); 3]),
            ("gemini-2.5-flash", "gemini", vec![Some(429)]),
            ("dispatch/backup", "dispatch", vec![Some(500); 3]),
        ]
    );
    assert_eq!(
        models[1].failures[0].cause,
        Some(LlmErrorCause::QuotaExhausted)
    );
    let text = error.to_string();
    assert!(
        text.contains("gemini-2.5-flash (gemini): 1 failed calls"),
        "{text}"
    );
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(switches.get().len(), 2);
    assert_eq!(result.usage.llm_calls, 7);
    let calls: Vec<(String, u32)> = result
        .usage
        .by_model
        .iter()
        .map(|m| (m.model.clone(), m.llm_calls))
        .collect();
    assert_eq!(
        calls,
        [
            ("gpt-5-mini".to_owned(), 3),
            ("gemini-2.5-flash".to_owned(), 1),
            ("dispatch/backup".to_owned(), 3)
        ]
    );
}

// C49: a switch after a tool turn keeps the transcript valid on the next provider:
// the call and its result go with the same id, and Gemini gets its placeholder
// signature for a call it did not sign.
#[tokio::test]
async fn c49_a_switch_mid_run_with_a_tool_turn_keeps_every_call_id_answered() {
    let openai = MockServer::start().await;
    let call = json_fixture(200, "openai/tool_call.json");
    mount_post(&openai, OPENAI_PATH, call, Some(1)).await;
    mount_post(&openai, OPENAI_PATH, server_error(503), None).await;
    let gemini = MockServer::start().await;
    mount_post(
        &gemini,
        GEMINI_PATH,
        json_fixture(200, "gemini/submit.json"),
        None,
    )
    .await;
    let lookup = CountingTool::lookup_order();
    let config = triage("gpt-5-mini", &openai_base(&openai))
        .tool(lookup.clone())
        .fallback_model_with("gemini-2.5-flash", at(gemini.uri()))
        .build()
        .unwrap();
    let result = run_agent(&config, "ticket").await;
    assert_eq!(result.outcome, Ok(expected_triage()));
    assert_eq!(lookup.calls(), 1, "the tool ran once, before the switch");
    assert_eq!(
        requests(&openai).await.len(),
        4,
        "the tool turn, then 3 failures"
    );
    let body = &bodies(&gemini).await[0];
    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    let id = "call_Xh0N8aWZm4ZJWeV1J4V9PnaQ";
    let call_part = &contents[1]["parts"][0];
    assert_eq!(call_part["functionCall"]["id"], id);
    assert_eq!(
        call_part["functionCall"]["args"],
        json!({"order_id": "A-1001"})
    );
    assert_eq!(
        call_part["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    let answer = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(answer["id"], id);
    assert_eq!(answer["name"], "lookup_order");
    // Every call of the final transcript is answered exactly once.
    let calls: Vec<String> = result
        .transcript
        .iter()
        .filter_map(|m| match m {
            agent_core::llm::Message::Assistant { tool_calls, .. } => Some(tool_calls.clone()),
            _ => None,
        })
        .flatten()
        .filter(|c| c.name == "lookup_order")
        .map(|c| c.id)
        .collect();
    let answered: Vec<String> = result
        .transcript
        .iter()
        .filter_map(|m| match m {
            agent_core::llm::Message::Tool { results } => Some(results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| r.call_id)
        .collect();
    assert_eq!(calls, [id]);
    assert!(answered.starts_with(&[id.to_owned()]), "{answered:?}");
}

// C49: a fallback is checked at build(), before any request.
#[test]
fn c49_fallbacks_are_checked_at_build() {
    let unknown = triage("gpt-5-mini", "http://127.0.0.1:9/v1")
        .fallback_models(["mistral-large"])
        .build();
    assert!(
        matches!(&unknown, Err(ConfigError::UnknownModel { model, .. }) if model == "mistral-large"),
        "{unknown:?}"
    );
    let no_key = triage("gpt-5-mini", "http://127.0.0.1:9/v1")
        .fallback_model_with(
            "gemini-2.5-flash",
            ProviderOptions::default().with_base_url("http://127.0.0.1:9"),
        )
        .build();
    // The environment may hold a Gemini key; the explicit options hold none.
    if std::env::var("GEMINI_API_KEY").is_err() {
        assert!(
            matches!(&no_key, Err(ConfigError::MissingEnv { var, .. }) if var == "GEMINI_API_KEY"),
            "{no_key:?}"
        );
    }
    let twice = triage("gpt-5-mini", "http://127.0.0.1:9/v1")
        .fallback_models(["gpt-5-mini"])
        .build();
    assert!(matches!(
        twice,
        Err(ConfigError::InvalidSetting {
            setting: "fallback_models",
            ..
        })
    ));
    let unpriced = triage("gpt-5-mini", "http://127.0.0.1:9/v1")
        .max_cost_usd(1.0)
        .fallback_model_with("dispatch/backup", at("http://127.0.0.1:9/v1".to_owned()))
        .build();
    assert!(
        matches!(&unpriced, Err(ConfigError::MissingPrice { model }) if model == "dispatch/backup"),
        "{unpriced:?}"
    );
    let priced = triage("gpt-5-mini", "http://127.0.0.1:9/v1")
        .max_cost_usd(1.0)
        .price("dispatch/", ModelPrice::new(0.0, 0.0))
        .fallback_model_with("dispatch/backup", at("http://127.0.0.1:9/v1".to_owned()))
        .build()
        .unwrap();
    assert_ne!(
        priced.fingerprint(),
        triage("gpt-5-mini", "http://127.0.0.1:9/v1")
            .max_cost_usd(1.0)
            .price("dispatch/", ModelPrice::new(0.0, 0.0))
            .build()
            .unwrap()
            .fingerprint(),
        "the fallbacks are part of the fingerprint"
    );
}
