//! Deterministic demo agents: the `agent-worker` binary's `--demo` agents, and what the
//! tests compare in-process and queued runs with. No network, no randomness: the same
//! input gives the same ending, output and token counts in any process.

use agent_core::{
    AgentConfig, ConfigError,
    eval::{FnGrader, Scores},
    llm::{
        LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, StopReason, TokenUsage,
    },
};

use crate::registry::Registry;

/// A model whose answer depends on the last user message only: the first number in it
/// picks the outcome. A number ending in 7 is a permanent provider error (the run ends
/// `failed`, category `llm_permanent_error`); anything else is the text
/// `<prefix><input>`. Token usage is the request's estimate (bytes / 4) and the
/// answer's.
#[derive(Clone, Debug)]
pub struct DemoModel {
    prefix: String,
}

impl DemoModel {
    /// Answers `<prefix><input>`.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }
}

/// The first run of ASCII digits in `text`, as a number (0 when there is none).
pub fn number_in(text: &str) -> u64 {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn last_user(request: &LlmRequest) -> &str {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .unwrap_or("")
}

impl LlmClient for DemoModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let input = last_user(request);
        let result = if number_in(input) % 10 == 7 {
            Err(LlmError::permanent(
                "demo: inputs whose number ends in 7 fail",
            ))
        } else {
            let response = LlmResponse::text(format!("{}{input}", self.prefix))
                .with_stop_reason(StopReason::EndTurn);
            let usage = TokenUsage::new(
                request.estimated_input_tokens(),
                response.estimated_output_tokens(),
            );
            Ok(response.with_usage(usage))
        };
        Box::pin(async move { result })
    }

    fn provider(&self) -> &str {
        "demo"
    }
}

/// The `echo` agent: answers `echo: <input>` (fails on numbers ending in 7).
///
/// # Errors
/// A [`ConfigError`] if the config does not build (not expected).
pub fn echo() -> Result<AgentConfig<String>, ConfigError> {
    agent("echo", "echo: ")
}

fn agent(name: &str, prefix: &str) -> Result<AgentConfig<String>, ConfigError> {
    AgentConfig::builder(name)
        .llm(DemoModel::new(prefix))
        .system_prompt("Answer in one line.")
        .build()
}

/// The demo agents (all `String` output, compat mode):
///
/// - `echo`: answers `echo: <input>`;
/// - `generate`: answers `draft <input>`;
/// - `check`: answers `checked <input>`, with a grader giving `ok` = 0 when the
///   input's number is a multiple of 3, else 1;
/// - `promote`: answers `promoted <input>`.
///
/// # Errors
/// A [`ConfigError`] if a config does not build (not expected).
pub fn registry() -> Result<Registry, ConfigError> {
    let check = AgentConfig::builder("check")
        .llm(DemoModel::new("checked "))
        .system_prompt("Answer in one line.")
        .grader(FnGrader(|_output: &String, input: &str| {
            let ok = if number_in(input).is_multiple_of(3) {
                0.0
            } else {
                1.0
            };
            Ok(Scores::from([("ok".to_owned(), ok)]))
        }))
        .build()?;
    Ok(Registry::new()
        .with(echo()?)
        .with(agent("generate", "draft ")?)
        .with(check)
        .with(agent("promote", "promoted ")?))
}
