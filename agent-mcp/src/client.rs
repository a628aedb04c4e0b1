//! The client side's answers to a server's own requests during a tool call: sampling
//! (`sampling/createMessage`, answered by a model the user allows) and elicitation
//! (`elicitation/create`, answered by an in-process handler).

#![allow(deprecated)] // rmcp marks the sampling types deprecated (SEP-2577); MCP 2025-11-25 has them.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_core::durable::Decision;
use agent_core::llm::LlmClient;
use agent_core::{AgentConfig, Tool, ToolContext};
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, Role, SamplingMessage,
    SamplingMessageContentBlock,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};

use crate::elicit::{Asking, Question, Ready};
use serde_json::{Value, json};

/// The model that answers an MCP server's sampling requests (`sampling/createMessage`,
/// MCP 2025-11-25, <https://modelcontextprotocol.io/specification/2025-11-25/client/sampling>)
/// made during a tool call. Give it to [`McpServer::sampling`](crate::McpServer::sampling);
/// without one, the client does not declare the `sampling` capability and a server's
/// request gets a JSON-RPC error (`-32601`, "sampling is not allowed by this client").
///
/// Each request is answered by one run of a small agent (`mcp-sampling`, output
/// `String`, at most one LLM call) on this model, started as a child of the run whose
/// tool call the server is serving, the way an agent used as a tool is: its tokens and
/// cost count in that run's usage (listed in `Usage::children`, tool `mcp_sampling`) and
/// it shares that run's token and cost caps and deadline.
///
/// ```
/// use agent_mcp::{McpSampling, McpServer};
///
/// let server = McpServer::stdio(tokio::process::Command::new("my-mcp-server"))
///     .sampling(McpSampling::model("claude-haiku-4-5"));
/// # let _ = server;
/// ```
#[derive(Clone)]
pub struct McpSampling {
    model: String,
    llm: Option<Arc<dyn LlmClient>>,
}

impl McpSampling {
    /// The model, routed by its name like a config's `.model(..)` (`claude-...`,
    /// `gpt-...`, `ollama/NAME`, ..., reading that provider's environment); its name is
    /// the `model` of every answer. An unroutable name or a missing key makes each
    /// request fail with a JSON-RPC error naming the problem (never the key).
    pub fn model(name: impl Into<String>) -> Self {
        Self {
            model: name.into(),
            llm: None,
        }
    }

    /// Sends the requests to this client instead of routing the model's name (which is
    /// still sent as the request's `model` and named in the answer); for tests
    /// (`agent_core::testing::ScriptedModel`) and custom clients.
    #[must_use]
    pub fn llm(mut self, client: impl LlmClient + 'static) -> Self {
        self.llm = Some(Arc::new(client));
        self
    }
}

impl fmt::Debug for McpSampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSampling")
            .field("model", &self.model)
            .field("custom_llm", &self.llm.is_some())
            .finish()
    }
}

/// The answer of an elicitation handler (see [`McpServer::elicitation`](crate::McpServer::elicitation)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Elicitation {
    /// The values asked for: a JSON object matching the requested schema. One that does
    /// not match is sent as `decline` (and logged as a warning), never as given.
    Accept(Value),
    /// The request was seen and refused.
    Decline,
    /// The request was dismissed without a choice.
    Cancel,
}

/// The future an elicitation handler returns.
pub type ElicitationFuture = Pin<Box<dyn Future<Output = Elicitation> + Send>>;

/// An elicitation handler: the request's message and requested schema (a JSON object
/// schema) in, the answer out.
pub(crate) type ElicitationHandler = Arc<dyn Fn(String, Value) -> ElicitationFuture + Send + Sync>;

/// The tool calls in flight on one connection, with their contexts and elicitation
/// state: a server's request is served for the run whose call it is serving.
#[derive(Default)]
pub(crate) struct Calls {
    list: Mutex<Vec<(u64, ToolContext, Arc<Asking>)>>,
    next: AtomicU64,
}

impl Calls {
    /// Registers a call until the guard drops.
    pub(crate) fn enter(self: &Arc<Self>, context: ToolContext, asking: Arc<Asking>) -> CallGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, context, asking));
        CallGuard {
            calls: Arc::clone(self),
            id,
        }
    }

    /// The context of the call in flight: the earliest one when several calls of one
    /// run are; an error when none is, or when calls of several runs are (MCP does not
    /// say which call a server's request belongs to on every transport).
    fn current(&self) -> Result<(ToolContext, Arc<Asking>), &'static str> {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((_, first, asking)) = list.first() else {
            return Err("no tool call is in flight on this connection");
        };
        if list
            .iter()
            .any(|(_, c, _)| c.trace_id() != first.trace_id())
        {
            return Err(
                "calls of several runs are in flight on this connection, and the \
                        request does not say which one it serves",
            );
        }
        Ok((first.clone(), Arc::clone(asking)))
    }
}

/// Removes a call from [`Calls`] when it ends.
pub(crate) struct CallGuard {
    calls: Arc<Calls>,
    id: u64,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.calls
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _, _)| *id != self.id);
    }
}

/// The connection's rmcp client handler.
#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) label: String,
    pub(crate) sampling: Option<McpSampling>,
    pub(crate) elicitation: Option<ElicitationHandler>,
    pub(crate) calls: Arc<Calls>,
}

fn refused(what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("{what} is not allowed by this client"),
        None,
    )
}

fn invalid(message: String) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message, None)
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = serde_json::Map::new();
        if self.sampling.is_some() {
            capabilities.insert("sampling".to_owned(), json!({}));
        }
        // Form elicitation is always taken: a handler answers at once, or the run
        // pauses for a person (see `elicit.rs`).
        capabilities.insert("elicitation".to_owned(), json!({"form": {}}));
        let mut info = ClientConfig::default();
        info.capabilities =
            serde_json::from_value::<ClientCapabilities>(Value::Object(capabilities))
                .unwrap_or_default();
        info
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(sampling) = &self.sampling else {
            return Err(refused("sampling"));
        };
        let (call, _) = self
            .calls
            .current()
            .map_err(|why| invalid(format!("sampling refused: {why}")))?;
        let (system, input) = prompt(&params)?;
        let mut builder = AgentConfig::<String>::builder("mcp-sampling")
            .model(sampling.model.clone())
            .max_tokens(params.max_tokens)
            .max_llm_calls(1);
        if let Some(client) = &sampling.llm {
            builder = builder.llm(Arc::clone(client));
        }
        if !system.is_empty() {
            builder = builder.system_prompt(system);
        }
        let config = builder
            .build()
            .map_err(|e| invalid(format!("sampling cannot run: {e}")))?;
        let tool = config.as_tool(
            "mcp_sampling",
            format!("answers sampling requests of MCP server {}", self.label),
        );
        let answer = tool
            .call(json!({ "input": input }), call)
            .await
            .map_err(|e| {
                ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!("sampling failed: {}", e.message()),
                    None,
                )
            })?;
        // A `String` answer comes back as a JSON string.
        let text = serde_json::from_str::<String>(&answer).unwrap_or(answer);
        let mut result = CreateMessageResult::new(
            SamplingMessage::new(Role::Assistant, SamplingMessageContentBlock::text(text)),
            sampling.model.clone(),
        );
        result.stop_reason = Some(CreateMessageResult::STOP_REASON_END_TURN.to_owned());
        Ok(result)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Err(refused("URL elicitation"));
        };
        let schema = serde_json::to_value(&requested_schema)
            .map_err(|e| invalid(format!("the requested schema is not JSON: {e}")))?;
        // The call this request serves: the answers it was resumed with come first.
        let asking = self.calls.current().ok().map(|(_, asking)| asking);
        let mut question = None;
        if let Some(asking) = &asking {
            let (id, ready) = asking.next(&message, &schema);
            if let Ready::Answer(decision) = ready {
                return Ok(self.answered(&schema, decision_answer(decision)));
            }
            question = Some(id);
        }
        let answer = match (&self.elicitation, asking, question) {
            (Some(handler), _, _) => handler(message, schema.clone()).await,
            (None, Some(asking), Some(id)) => {
                // Nobody here can answer: the call ends and the run pauses on it.
                let question = Question {
                    id,
                    message,
                    schema,
                };
                let why = if asking.pause(question) {
                    "the client's run pauses for a person's answer; this tool call is \
                     cancelled and will be made again with the answer"
                } else {
                    "this tool call already waits on another question"
                };
                return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None));
            }
            _ => {
                return Err(invalid(
                    "elicitation refused: no tool call is in flight on this connection".to_owned(),
                ));
            }
        };
        Ok(self.answered(&schema, answer))
    }
}

/// A decision (given on resume) as an elicitation answer: a `result` accepts its
/// value, `deny` declines, `dismiss` cancels (any other: decline).
fn decision_answer(decision: Decision) -> Elicitation {
    match decision {
        Decision::Result { value } => Elicitation::Accept(value),
        Decision::Dismiss => Elicitation::Cancel,
        _ => Elicitation::Decline,
    }
}

impl Client {
    /// The answer as sent: accepted values checked against the schema first (one that
    /// does not match is sent as `decline`, with a warning naming where).
    fn answered(&self, schema: &Value, answer: Elicitation) -> ElicitResult {
        match answer {
            Elicitation::Accept(value) => match check(schema, &value) {
                Ok(()) => {
                    let mut result = ElicitResult::new(ElicitationAction::Accept);
                    result.content = Some(value);
                    result
                }
                Err(why) => {
                    tracing::warn!(
                        server = %self.label,
                        reason = %why,
                        "an elicitation answer does not match the requested schema; declined"
                    );
                    ElicitResult::new(ElicitationAction::Decline)
                }
            },
            Elicitation::Decline => ElicitResult::new(ElicitationAction::Decline),
            Elicitation::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        }
    }
}

/// Whether `value` matches `schema`; the first problem otherwise (its path and kind,
/// never the value).
fn check(schema: &Value, value: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("the requested schema cannot be used: {e}"))?;
    match validator.iter_errors(value).next() {
        None => Ok(()),
        Some(error) => Err(format!(
            "at '{}': {:?}",
            error.instance_path(),
            error.kind()
        )),
    }
}

/// The request's messages as the sampling run's system prompt and input: the input is
/// the last message (a user's), the earlier ones a transcript after the request's
/// `systemPrompt`. Text content only.
fn prompt(params: &CreateMessageRequestParams) -> Result<(String, String), ErrorData> {
    let mut texts = Vec::with_capacity(params.messages.len());
    for message in &params.messages {
        let mut text = Vec::new();
        for block in message.content.clone().into_vec() {
            match block {
                SamplingMessageContentBlock::Text(t) => text.push(t.text),
                _ => {
                    return Err(invalid(
                        "sampling supports text content only (no images, audio or tools)"
                            .to_owned(),
                    ));
                }
            }
        }
        texts.push((message.role.clone(), text.join("\n")));
    }
    let Some((role, input)) = texts.pop() else {
        return Err(invalid("sampling needs at least one message".to_owned()));
    };
    if role != Role::User {
        return Err(invalid(
            "the last sampling message must be the user's".to_owned(),
        ));
    }
    let mut system = params.system_prompt.clone().unwrap_or_default();
    if !texts.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str("The conversation so far:");
        for (role, text) in texts {
            let who = if role == Role::User {
                "user"
            } else {
                "assistant"
            };
            system.push_str(&format!("\n{who}: {text}"));
        }
    }
    Ok((system, input))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use agent_core::durable::Decisions;
    use agent_core::tool::StateMap;

    fn request(value: Value) -> CreateMessageRequestParams {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_last_user_message_is_the_input_and_earlier_ones_a_transcript() {
        let params = request(json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Q1"}},
                {"role": "assistant", "content": {"type": "text", "text": "A1"}},
                {"role": "user", "content": [{"type": "text", "text": "Q2"},
                    {"type": "text", "text": "more"}]}
            ],
            "systemPrompt": "Be brief.",
            "maxTokens": 10
        }));
        let (system, input) = prompt(&params).unwrap();
        assert_eq!(
            system,
            "Be brief.\n\nThe conversation so far:\nuser: Q1\nassistant: A1"
        );
        assert_eq!(input, "Q2\nmore");
        let alone = request(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
            "maxTokens": 10
        }));
        assert_eq!(prompt(&alone).unwrap(), (String::new(), "Hi".to_owned()));
    }

    #[test]
    fn images_an_assistant_last_and_no_messages_are_invalid_params() {
        let image = request(json!({
            "messages": [{"role": "user", "content": {"type": "image", "data": "AAAA",
                "mimeType": "image/png"}}],
            "maxTokens": 10
        }));
        let error = prompt(&image).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("text content only"));
        let last = request(json!({
            "messages": [{"role": "assistant", "content": {"type": "text", "text": "A"}}],
            "maxTokens": 10
        }));
        assert!(prompt(&last).unwrap_err().message.contains("user's"));
        let none = request(json!({"messages": [], "maxTokens": 10}));
        assert!(prompt(&none).unwrap_err().message.contains("at least one"));
    }

    #[test]
    fn answers_are_checked_against_the_schema_without_showing_the_value() {
        let schema = json!({"type": "object", "properties": {
            "guests": {"type": "integer", "minimum": 1}}, "required": ["guests"]});
        assert_eq!(check(&schema, &json!({"guests": 2})), Ok(()));
        let why = check(&schema, &json!({"guests": "s3cr3t"})).unwrap_err();
        assert!(why.starts_with("at '/guests'"), "{why}");
        assert!(!why.contains("s3cr3t"), "{why}");
        assert!(check(&schema, &json!({})).is_err());
    }

    fn context(trace: &str) -> ToolContext {
        ToolContext::new("call_1", "t", Arc::from(trace), Arc::new(StateMap::new()))
    }

    #[test]
    fn a_request_belongs_to_the_one_run_with_calls_in_flight() {
        let calls = Arc::new(Calls::default());
        assert!(calls.current().unwrap_err().contains("no tool call"));
        let asking = || Asking::new(Decisions::new()).0;
        let first = calls.enter(context("trace-a"), asking());
        let second = calls.enter(context("trace-a"), asking());
        assert_eq!(calls.current().unwrap().0.trace_id(), "trace-a");
        let other = calls.enter(context("trace-b"), asking());
        assert!(calls.current().unwrap_err().contains("several runs"));
        drop((first, second));
        assert_eq!(calls.current().unwrap().0.trace_id(), "trace-b");
        drop(other);
        assert!(calls.current().is_err());
    }
}
