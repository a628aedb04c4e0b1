//! An agent served as one MCP tool: its run, its progress and its ending as a result.

use agent_core::observe::{Observer, RunEvent};
use agent_core::schema::SchemaValidator;
use agent_core::{AgentConfig, AgentOutput, RunOptions, run_agent_with};
use rmcp::model::{CallToolResult, ContentBlock, MetaObject, ProgressNotificationParam};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::call::{Call, CallFuture, Entry, Served, Shared, object};

/// The run metadata key of the MCP request id a served run answers.
const META_REQUEST_ID: &str = "mcp.request_id";

pub(crate) struct ServedAgent<T> {
    name: String,
    description: String,
    config: AgentConfig<T>,
}

impl<T: AgentOutput + Sync> ServedAgent<T> {
    pub(crate) fn new(name: String, description: String, config: AgentConfig<T>) -> Self {
        Self {
            name,
            description,
            config,
        }
    }

    pub(crate) fn entry(self) -> Result<Entry, String> {
        let schema = agent_core::tool::agent_input_schema();
        let validator = SchemaValidator::new(&schema)
            .map_err(|e| format!("the input schema of {}: {e}", self.name))?;
        let input = object(schema).ok_or_else(|| format!("{}: schema", self.name))?;
        let mut tool = rmcp::model::Tool::new(self.name.clone(), self.description.clone(), input);
        if let Some(output) = T::output_tool() {
            let mut parameters = output.parameters;
            agent_core::schema::normalize(&mut parameters);
            match object(parameters) {
                Some(schema) => tool = tool.with_raw_output_schema(schema),
                None => {
                    return Err(format!(
                        "the output schema of {} is not an object",
                        self.name
                    ));
                }
            }
        }
        Ok(Entry {
            tool,
            validator,
            served: std::sync::Arc::new(self),
        })
    }
}

/// Sends each progress-worthy run event's message to the task that notifies the client.
struct Progress {
    sender: mpsc::UnboundedSender<Option<String>>,
}

impl Observer for Progress {
    fn on_event(&self, event: &RunEvent<'_>) {
        let message = match event {
            RunEvent::TurnStarted { llm_call, .. } => format!("LLM call {llm_call}"),
            RunEvent::ToolFinished { tool, is_error, .. } => {
                if *is_error {
                    format!("tool {tool} failed")
                } else {
                    format!("tool {tool} answered")
                }
            }
            RunEvent::RetryScheduled {
                llm_call, delay, ..
            } => format!(
                "LLM call {llm_call} failed for now; again in {} ms",
                delay.as_millis()
            ),
            RunEvent::Handoff { to, .. } => format!("handed off to {to}"),
            RunEvent::ModelSwitched { to, .. } => format!("switched to model {to}"),
            _ => return,
        };
        let _ = self.sender.send(Some(message));
    }
}

impl<T: AgentOutput + Sync> Served for ServedAgent<T> {
    fn call<'a>(&'a self, arguments: Value, call: Call, shared: &'a Shared) -> CallFuture<'a> {
        Box::pin(async move {
            let input = arguments
                .get("input")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let mut options = RunOptions::new()
                .cancellation(call.cancel.clone())
                .metadata(META_REQUEST_ID, call.request_id.clone());
            // Progress goes through a channel to a task that sends it in order, and
            // every notification is sent before the result (the `None` at the end).
            let mut forward = None;
            let mut done = None;
            if let Some((peer, token)) = call.progress {
                let (sender, mut receiver) = mpsc::unbounded_channel::<Option<String>>();
                done = Some(sender.clone());
                options = options.observer(Progress { sender });
                forward = Some(tokio::spawn(async move {
                    let mut sent = 0_u32;
                    while let Some(Some(message)) = receiver.recv().await {
                        sent += 1;
                        let param = ProgressNotificationParam::new(token.clone(), f64::from(sent))
                            .with_message(message);
                        if peer.notify_progress(param).await.is_err() {
                            break;
                        }
                    }
                }));
            }
            let result = run_agent_with(&self.config, input, options).await;
            if let Some(done) = done {
                let _ = done.send(None);
            }
            if let Some(forward) = forward {
                let _ = forward.await;
            }
            let ending = result.ending();
            let mut meta = MetaObject(serde_json::Map::new());
            meta.insert(super::call::META_ENDING.to_owned(), json!(ending.as_str()));
            meta.insert(
                super::call::META_TRACE_ID.to_owned(),
                json!(result.trace_id),
            );
            let answer = self.config.answer_json(&result);
            match result.outcome {
                Ok(_) => {
                    let value = answer.unwrap_or(Value::Null);
                    let result = if T::output_tool().is_some() {
                        CallToolResult::structured(value)
                    } else {
                        let text = match value {
                            Value::String(text) => text,
                            other => other.to_string(),
                        };
                        CallToolResult::success(vec![ContentBlock::text(text)])
                    };
                    result.with_meta(Some(meta))
                }
                Err(error) => {
                    let category = error.category();
                    meta.insert(super::call::META_CATEGORY.to_owned(), json!(category));
                    let text = shared.scrub(format!(
                        "the {} agent did not answer ({category}, ending {ending}): {error}",
                        self.name
                    ));
                    CallToolResult::error(vec![ContentBlock::text(text)]).with_meta(Some(meta))
                }
            }
        })
    }
}
