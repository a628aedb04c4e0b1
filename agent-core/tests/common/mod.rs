//! Shared support for the loop tests: a hand-written output type and tools (the macros
//! are tested in the `tests` package), and transcript checks.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub(crate) mod by_turn;
pub(crate) mod planned;
pub(crate) mod traced;

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, AgentConfigBuilder, AgentOutput, Tool, ToolContext, ToolError,
    config::Backoff,
    llm::{LlmRequest, Message},
    schema::{SchemaValidator, ValidationErrors},
    tool::{ToolDefinition, ToolFuture},
};
use serde_json::{Value, json};

/// The output type of most tests: a ticket triage.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub(crate) struct Triage {
    pub severity: u8,
    pub summary: String,
}

pub(crate) fn triage_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "severity": {"type": "integer", "minimum": 1, "maximum": 4},
            "summary": {"type": "string", "minLength": 1}
        },
        "required": ["severity", "summary"],
        "additionalProperties": false
    })
}

impl AgentOutput for Triage {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            "submit_output",
            "Submit the triage.",
            triage_schema(),
        ))
    }

    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        static VALIDATOR: OnceLock<SchemaValidator> = OnceLock::new();
        VALIDATOR
            .get_or_init(|| SchemaValidator::new(&triage_schema()).unwrap())
            .validate_into(arguments)
    }
}

pub(crate) fn valid() -> Value {
    json!({"severity": 2, "summary": "parcel late"})
}

pub(crate) fn invalid() -> Value {
    json!({"severity": 9, "summary": "parcel late"})
}

/// What a tool does when called.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Behaviour {
    /// Returns `{"order_id": .., "status": "shipped"}`.
    Echo,
    /// Returns a tool error.
    Fail,
    /// Returns a fatal tool error: the run stops after the turn.
    Fatal,
    /// Panics.
    Panic,
    /// Sleeps this long, then echoes.
    Sleep(Duration),
    /// Returns this text whatever the arguments.
    Fixed(&'static str),
}

/// A tool with a name, a behaviour, and a shared execution counter.
#[derive(Clone)]
pub(crate) struct TestTool {
    pub name: &'static str,
    pub behaviour: Behaviour,
    pub runs: Arc<AtomicU32>,
}

impl TestTool {
    pub(crate) fn new(name: &'static str, behaviour: Behaviour) -> Self {
        Self {
            name,
            behaviour,
            runs: Arc::new(AtomicU32::new(0)),
        }
    }

    pub(crate) fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }
}

impl Tool for TestTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            "Look up an order by its id.",
            json!({
                "type": "object",
                "properties": {"order_id": {"type": "string", "minLength": 1}},
                "required": ["order_id"],
                "additionalProperties": false
            }),
        )
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let behaviour = self.behaviour;
        Box::pin(async move {
            let id = arguments["order_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match behaviour {
                Behaviour::Echo => Ok(json!({"order_id": id, "status": "shipped"}).to_string()),
                Behaviour::Fail => Err(ToolError::new(format!("order {id} not found"))),
                Behaviour::Fatal => Err(ToolError::fatal(format!("order {id}: state unknown"))),
                Behaviour::Panic => panic!("lookup exploded on {id}"),
                Behaviour::Fixed(text) => Ok(text.to_owned()),
                Behaviour::Sleep(d) => {
                    tokio::time::sleep(d).await;
                    Ok(json!({"order_id": id, "slept_ms": d.as_millis() as u64}).to_string())
                }
            }
        })
    }
}

/// A builder for `Triage` with the scripted model, no backoff, and these tools.
pub(crate) fn builder(model: &ScriptedModel, tools: &[&TestTool]) -> AgentConfigBuilder<Triage> {
    let mut b = AgentConfig::<Triage>::builder("test-agent")
        .llm(model.clone())
        .backoff(Backoff::none())
        .wrap_up(false);
    for t in tools {
        b = b.tool((*t).clone());
    }
    b
}

pub(crate) fn order(id: &str) -> Value {
    json!({"order_id": id})
}

/// Checks every request is well-formed for Anthropic and OpenAI: every assistant turn
/// with tool calls is immediately followed by one tool message answering each call id
/// exactly once, in emission order; ids are unique within a turn.
pub(crate) fn assert_well_formed(messages: &[Message]) {
    for (i, m) in messages.iter().enumerate() {
        if let Message::Assistant { tool_calls, .. } = m {
            if tool_calls.is_empty() {
                continue;
            }
            let ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
            let mut unique = ids.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), ids.len(), "duplicate call ids in {ids:?}");
            assert!(ids.iter().all(|id| !id.is_empty()), "empty call id");
            match messages.get(i + 1) {
                Some(Message::Tool { results }) => {
                    let answered: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
                    assert_eq!(
                        answered, ids,
                        "results must answer each call once, in order"
                    );
                }
                // The last assistant turn of a finished run may go unanswered: it is never sent.
                None => {}
                Some(other) => panic!("tool calls not followed by results: {other:?}"),
            }
        }
    }
}

/// `assert_well_formed` on every recorded request; also: no request ends with an
/// assistant turn whose calls are unanswered.
pub(crate) fn assert_requests_well_formed(requests: &[LlmRequest]) {
    for r in requests {
        assert_well_formed(&r.messages);
        if let Some(Message::Assistant { tool_calls, .. }) = r.messages.last() {
            assert!(
                tool_calls.is_empty(),
                "a request ends with unanswered calls"
            );
        }
    }
}

/// The tool results of the last tool message of a request.
pub(crate) fn last_results(request: &LlmRequest) -> Vec<agent_core::llm::ToolResult> {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Tool { results } => Some(results.clone()),
            _ => None,
        })
        .expect("a tool message")
}

/// Silences the panic messages of the deliberately panicking test tool (they are caught
/// by the runner; printing thousands of them hides real failures).
pub(crate) fn quiet_tool_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info.to_string();
            if !text.contains("lookup exploded") {
                default(info);
            }
        }));
    });
}
