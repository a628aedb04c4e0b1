//! A run's [`StreamEvent`]s as AG-UI 1.0 events (JSON objects, camelCase members, as
//! the AG-UI schema <https://ag-ui.com/spec/1.0/schema.json> names them).

use agent_core::durable::{Decision, PendingCall};
use agent_core::output::SUBMIT_OUTPUT;
use agent_core::stream::StreamEvent;
use agent_core::{AgentError, AgentResult};
use serde_json::{Value, json};

use crate::ids::{fresh_id, now_ms};

/// The AG-UI protocol version the events follow (`protocolVersion` of `RUN_STARTED`).
pub const AG_UI_VERSION: &str = "1.0";

/// Turns one run's stream into AG-UI events. Stateful: it opens and closes text
/// messages around the model's text.
///
/// | agent-core | AG-UI |
/// |---|---|
/// | the run starts | `RUN_STARTED` (`threadId`, `runId`, `protocolVersion` 1.0) |
/// | `TextDelta` | `TEXT_MESSAGE_START` (role `assistant`, once per turn's text), `TEXT_MESSAGE_CONTENT`; `TEXT_MESSAGE_END` when the text ends (a tool call, the next turn, a retry, the end) |
/// | `ToolCallFinished` (not `submit_output`) | `TOOL_CALL_START`, `TOOL_CALL_ARGS` (the arguments' JSON text, whole), `TOOL_CALL_END` |
/// | `ToolResult` (not `submit_output`) | `TOOL_CALL_RESULT` (role `tool`) |
/// | `PartialOutput` | `STATE_SNAPSHOT`: the typed output so far |
/// | `Finished`, answered | `STATE_SNAPSHOT` (the validated value), `RUN_FINISHED` with `result` = the value, outcome `success` |
/// | `Finished`, paused | `RUN_FINISHED`, outcome `interrupt`: one interrupt per pending call (see [`interrupt`]) |
/// | `Finished`, cancelled | `RUN_FINISHED`, outcome `cancelled` |
/// | `Finished`, any other failure | `RUN_ERROR`: `code` = the category, `message` = `CATEGORY: error` |
#[derive(Debug)]
pub struct Mapper {
    thread_id: String,
    run_id: String,
    open_message: Option<String>,
}

fn event(kind: &str, mut body: Value) -> Value {
    body["type"] = json!(kind);
    body["timestamp"] = json!(now_ms());
    body
}

/// The interrupt for a pending call: `id` and `toolCallId` = the call id, `reason` =
/// `approval` or `deferred`, `message` naming the call, `responseSchema` = what a
/// resume entry's `payload` may be, `metadata` = `{"tool", "arguments"}`.
pub fn interrupt(call: &PendingCall) -> Value {
    json!({
        "id": call.call_id,
        "reason": call.reason.as_str(),
        "message": format!("{call}"),
        "toolCallId": call.call_id,
        "responseSchema": decision_schema(),
        "metadata": {"tool": call.tool, "arguments": call.arguments},
    })
}

/// The JSON Schema of a resume entry's payload: agent-core's `Decision`.
fn decision_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {"enum": ["approve", "deny", "edit", "result"]},
            "reason": {"type": "string"},
            "arguments": {"type": "object"},
            "value": {}
        },
        "required": ["decision"]
    })
}

/// A resume entry's answer as a decision: `cancelled` denies the call ("the user
/// cancelled it"); `resolved` with a payload that has `decision` is that decision,
/// with no payload it approves, and with any other payload it is the call's `result`.
pub fn decision_of(status: &str, payload: Option<&Value>) -> Result<Decision, String> {
    if status == "cancelled" {
        return serde_json::from_value(
            json!({"decision": "deny", "reason": "the user cancelled it"}),
        )
        .map_err(|e| e.to_string());
    }
    match payload {
        None | Some(Value::Null) => {
            serde_json::from_value(json!({"decision": "approve"})).map_err(|e| e.to_string())
        }
        Some(p) if p.get("decision").is_some() => serde_json::from_value(p.clone())
            .map_err(|e| format!("the payload is no decision: {e}")),
        Some(value) => serde_json::from_value(json!({"decision": "result", "value": value}))
            .map_err(|e| e.to_string()),
    }
}

impl Mapper {
    /// A mapper for AG-UI run `run_id` of thread `thread_id`.
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            open_message: None,
        }
    }

    /// `RUN_STARTED`.
    pub fn started(&self) -> Value {
        event(
            "RUN_STARTED",
            json!({"threadId": self.thread_id, "runId": self.run_id, "protocolVersion": AG_UI_VERSION}),
        )
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(id) = self.open_message.take() {
            out.push(event("TEXT_MESSAGE_END", json!({"messageId": id})));
        }
    }

    /// The AG-UI events of one stream event (none for the events AG-UI has no word
    /// for: `TurnStarted` aside from closing text, `ReasoningDelta`, `ToolCallStarted`).
    pub fn map<T>(&mut self, stream_event: &StreamEvent<T>) -> Vec<Value> {
        let mut out = Vec::new();
        match stream_event {
            StreamEvent::TextDelta { text, .. } => {
                let id = match &self.open_message {
                    Some(id) => id.clone(),
                    None => {
                        let id = fresh_id();
                        out.push(event(
                            "TEXT_MESSAGE_START",
                            json!({"messageId": id, "role": "assistant"}),
                        ));
                        self.open_message = Some(id.clone());
                        id
                    }
                };
                out.push(event(
                    "TEXT_MESSAGE_CONTENT",
                    json!({"messageId": id, "delta": text}),
                ));
            }
            StreamEvent::ToolCallFinished {
                id,
                name,
                arguments,
                ..
            } => {
                self.close_text(&mut out);
                if name != SUBMIT_OUTPUT {
                    out.push(event(
                        "TOOL_CALL_START",
                        json!({"toolCallId": id, "toolCallName": name}),
                    ));
                    out.push(event(
                        "TOOL_CALL_ARGS",
                        json!({"toolCallId": id, "delta": arguments.to_string()}),
                    ));
                    out.push(event("TOOL_CALL_END", json!({"toolCallId": id})));
                }
            }
            StreamEvent::ToolResult {
                id, name, content, ..
            } if name != SUBMIT_OUTPUT => {
                out.push(event(
                    "TOOL_CALL_RESULT",
                    json!({"messageId": fresh_id(), "toolCallId": id, "content": content, "role": "tool"}),
                ));
            }
            StreamEvent::PartialOutput { value, .. } => {
                self.close_text(&mut out);
                out.push(event("STATE_SNAPSHOT", json!({"snapshot": value})));
            }
            StreamEvent::TurnStarted { .. } | StreamEvent::Retrying { .. } => {
                self.close_text(&mut out);
            }
            StreamEvent::Finished(result) => {
                self.close_text(&mut out);
                out.extend(self.finished(result));
            }
            _ => {}
        }
        out
    }

    fn finished<T>(&self, result: &AgentResult<T>) -> Vec<Value> {
        let ids = json!({"threadId": self.thread_id, "runId": self.run_id});
        match &result.outcome {
            Ok(_) => {
                let value = serde_json::from_str::<Value>(&result.output)
                    .unwrap_or_else(|_| Value::String(result.output.clone()));
                let mut finished = ids;
                finished["result"] = value.clone();
                finished["outcome"] = json!({"type": "success"});
                vec![
                    event("STATE_SNAPSHOT", json!({"snapshot": value})),
                    event("RUN_FINISHED", finished),
                ]
            }
            Err(AgentError::Paused { pending, .. }) => {
                let mut finished = ids;
                finished["outcome"] = json!({
                    "type": "interrupt",
                    "interrupts": pending.iter().map(interrupt).collect::<Vec<_>>(),
                });
                vec![event("RUN_FINISHED", finished)]
            }
            Err(AgentError::Cancelled) => {
                let mut finished = ids;
                finished["outcome"] = json!({"type": "cancelled"});
                vec![event("RUN_FINISHED", finished)]
            }
            Err(error) => vec![event(
                "RUN_ERROR",
                json!({"message": format!("{}: {error}", error.category()), "code": error.category()}),
            )],
        }
    }
}
