//! `AgentConfig`: `build()` and `with_` reject malformed configs before any request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use agent_core::providers::ProviderOptions;
use agent_core::testing::{ScriptedModel, TestModel};
use agent_core::{
    AgentConfig, ConfigError, State, Tool, ToolContext, run_agent,
    tool::{StateRequirement, ToolDefinition, ToolFuture},
};
use common::*;
use serde_json::{Value, json};

struct Named(&'static str, Value);

impl Tool for Named {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(self.0, "A tool.", self.1.clone())
    }
    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok(String::new()) })
    }
}

fn object() -> Value {
    json!({"type": "object"})
}

#[test]
fn tool_names_must_be_unique_legal_and_not_reserved() {
    let model = ScriptedModel::new();
    let b = || builder(&model, &[]);
    let err = b()
        .tool(Named("a", object()))
        .tool(Named("a", object()))
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::DuplicateTool { name: "a".into() });
    for bad in ["", "has space", "dot.name", &"x".repeat(65)] {
        let name: &'static str = Box::leak(bad.to_owned().into_boxed_str());
        let err = b().tool(Named(name, object())).build().unwrap_err();
        assert_eq!(err, ConfigError::InvalidToolName { name: bad.into() });
    }
    assert!(
        b().tool(Named(Box::leak("x".repeat(64).into_boxed_str()), object()))
            .build()
            .is_ok()
    );
    for reserved in ["submit_output", "escalate_to_human"] {
        let err = b().tool(Named(reserved, object())).build().unwrap_err();
        assert_eq!(
            err,
            ConfigError::ReservedToolName {
                name: reserved.into()
            }
        );
    }
}

#[test]
fn tool_schemas_must_be_compilable_objects() {
    let model = ScriptedModel::new();
    let err = builder(&model, &[])
        .tool(Named("t", json!({"type": "string"})))
        .build()
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::InvalidSchema { ref tool, .. } if tool == "t"),
        "{err}"
    );
    let err = builder(&model, &[])
        .tool(Named(
            "t",
            json!({"type": "object", "properties": {"a": {"type": 7}}}),
        ))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("invalid JSON Schema"), "{err}");
}

struct NeedsDb;
struct Db;

impl Tool for NeedsDb {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new("query", "Query the db.", object())
    }
    fn call<'a>(&'a self, _arguments: Value, context: ToolContext) -> ToolFuture<'a> {
        let found = context.state::<Db>().is_some();
        Box::pin(async move { Ok(format!("db present: {found}")) })
    }
    fn required_state(&self) -> Vec<StateRequirement> {
        vec![StateRequirement::of::<Db>()]
    }
}

#[tokio::test]
async fn tools_needing_state_are_rejected_without_it_and_get_it_with_it() {
    let model = ScriptedModel::new()
        .tool_call("query", json!({}))
        .submit(valid());
    let err = builder(&model, &[]).tool(NeedsDb).build().unwrap_err();
    assert!(
        matches!(err, ConfigError::MissingState { ref tool, type_name } if tool == "query" && type_name.ends_with("Db")),
        "{err}"
    );
    let config = builder(&model, &[])
        .tool(NeedsDb)
        .state(Db)
        .build()
        .unwrap();
    let r = run_agent(&config, "t").await;
    assert!(r.is_ok());
    assert_eq!(
        last_results(&model.requests()[1])[0].content,
        "db present: true"
    );
    let _ = State(std::sync::Arc::new(Db));
}

#[test]
fn models_are_routed_by_prefix_and_unknown_ones_rejected() {
    let err = AgentConfig::<Triage>::builder("x")
        .model("llama-3")
        .build()
        .unwrap_err();
    match &err {
        ConfigError::UnknownModel { model, prefixes } => {
            assert_eq!(model, "llama-3");
            assert!(prefixes.contains("claude-") && prefixes.contains("dispatch/"));
        }
        other => panic!("{other:?}"),
    }
    let err = AgentConfig::<Triage>::builder("x").build().unwrap_err();
    assert!(matches!(err, ConfigError::MissingModel { .. }));
    let config = AgentConfig::<Triage>::builder("x")
        .model("test")
        .build()
        .unwrap();
    assert_eq!(config.provider(), "test");
    assert_eq!(config.model(), "test");
}

#[tokio::test]
async fn with_derives_a_checked_variant_that_keeps_the_output_type() {
    let model = ScriptedModel::new().submit(valid());
    let base = builder(&model, &[]).max_llm_calls(20).build().unwrap();
    let cheaper: AgentConfig<Triage> = base.with_(|b| b.model("test").max_llm_calls(5)).unwrap();
    assert_eq!((base.max_llm_calls(), cheaper.max_llm_calls()), (20, 5));
    assert_eq!(cheaper.name(), "test-agent");
    let err = base.with_(|b| b.max_llm_calls(0)).unwrap_err();
    assert!(matches!(
        err,
        ConfigError::InvalidSetting {
            setting: "max_llm_calls",
            ..
        }
    ));
    // The base is untouched and still runs.
    assert!(run_agent(&base, "t").await.is_ok());
    let clone = base.clone();
    assert_eq!(format!("{clone:?}"), format!("{base:?}"));
}

#[test]
fn config_debug_never_shows_the_api_key() {
    let model = ScriptedModel::new();
    let config = builder(&model, &[])
        .provider(ProviderOptions::default().with_api_key("sk-secret-123"))
        .build()
        .unwrap();
    let text = format!("{config:?}");
    assert!(!text.contains("sk-secret-123"), "{text}");
    assert!(text.contains("redacted"), "{text}");
}

#[tokio::test]
async fn the_test_model_answers_any_schema_without_a_script() {
    let config = AgentConfig::<Triage>::builder("t")
        .model("test")
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    let value = r.outcome.unwrap();
    assert!((1..=4).contains(&value.severity));
    assert_eq!(r.usage.llm_calls, 1);
    assert!(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);

    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = AgentConfig::<Triage>::builder("t")
        .llm(TestModel::new().calling_tools_first())
        .tool(lookup.clone())
        .build()
        .unwrap();
    let r = run_agent(&config, "ticket").await;
    assert!(r.is_ok());
    assert_eq!(
        (r.usage.llm_calls, r.usage.tool_calls, lookup.runs()),
        (2, 1, 1)
    );

    let config = AgentConfig::<String>::builder("t")
        .model("test")
        .build()
        .unwrap();
    let r = run_agent(&config, "hello").await;
    assert_eq!(
        r.outcome.as_deref(),
        Ok("This is the built-in test model's answer.")
    );
}

#[test]
fn fingerprints_are_stable_across_releases() {
    // Fingerprints are stored with every run record: the same settings must hash to
    // the same value in every release (these were computed before the settings table).
    let plain: AgentConfig<String> = AgentConfig::builder("pin")
        .llm(TestModel::new())
        .build()
        .unwrap();
    assert_eq!(plain.fingerprint(), "e7c3e42b98787ac9");
    let tuned: AgentConfig<String> = AgentConfig::builder("pin")
        .llm(TestModel::new())
        .system_prompt("Be brief.")
        .max_llm_calls(7)
        .temperature(0.5)
        .deadline(std::time::Duration::from_millis(1500))
        .max_total_tokens(1234)
        .escalation(true)
        .grader_timeout(std::time::Duration::from_secs(3))
        .build()
        .unwrap();
    assert_eq!(tuned.fingerprint(), "128975db40cdbe58");
    // A setting outside the fingerprint (a timeout of the grader) changes nothing.
    let graded = tuned
        .with_(|b| b.grader_timeout(std::time::Duration::from_secs(9)))
        .unwrap();
    assert_eq!(graded.fingerprint(), tuned.fingerprint());
}

#[test]
fn every_budget_is_checked_with_its_name() {
    let rejected = |f: fn(
        agent_core::AgentConfigBuilder<String>,
    ) -> agent_core::AgentConfigBuilder<String>| {
        match f(AgentConfig::builder("b").llm(TestModel::new())).build() {
            Err(ConfigError::InvalidSetting { setting, .. }) => setting,
            other => panic!("expected InvalidSetting, got {other:?}"),
        }
    };
    assert_eq!(rejected(|b| b.max_llm_calls(0)), "max_llm_calls");
    assert_eq!(rejected(|b| b.temperature(3.0)), "temperature");
    assert_eq!(
        rejected(|b| b.deadline(std::time::Duration::ZERO)),
        "deadline"
    );
    assert_eq!(rejected(|b| b.max_cost_usd(-1.0)), "max_cost_usd");
    assert_eq!(
        rejected(|b| b.repeated_call_limit(1)),
        "repeated_call_limit"
    );
    let mut jitter = agent_core::config::Backoff::default();
    jitter.jitter = 2.0;
    let built = AgentConfig::<String>::builder("b")
        .llm(TestModel::new())
        .backoff(jitter)
        .build();
    assert!(
        matches!(
            built,
            Err(ConfigError::InvalidSetting {
                setting: "backoff.jitter",
                ..
            })
        ),
        "{built:?}"
    );
}

// The root paths of names that moved to their modules in 0.2 still compile, as
// deprecated aliases (types, enums with their variants, constants) and hidden
// re-exports (traits, functions), naming the same items as the new paths.
#[test]
#[allow(deprecated)]
fn old_root_paths_still_name_the_moved_items() {
    let request: agent_core::LlmRequest = agent_core::llm::LlmRequest::new("m");
    assert_eq!(request.model, "m");
    let reason: agent_core::StopReason = agent_core::StopReason::ToolUse;
    assert_eq!(reason, agent_core::llm::StopReason::ToolUse);
    assert_eq!(agent_core::SUBMIT_OUTPUT, agent_core::output::SUBMIT_OUTPUT);
    let decisions = agent_core::Decisions::new().approve("c1");
    assert_eq!(
        decisions,
        agent_core::durable::Decisions::new().approve("c1")
    );
    fn takes_client(_: &dyn agent_core::LlmClient) {}
    takes_client(&agent_core::testing::ScriptedModel::new());
    let limits: agent_core::config::Limits = agent_core::Limits::default();
    assert_eq!(limits.max_llm_calls, 50);
}
