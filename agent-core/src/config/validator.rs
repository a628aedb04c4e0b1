//! What an output validator may read of its run: [`OutputContext`], the conversation so
//! far (see the builder's `output_validator_with`).

use std::sync::Arc;

use crate::message::{Message, ToolResult};

/// A check on a validated value that also reads the run so far (see
/// `AgentConfigBuilder::output_validator_with`); an `Err(message)` is fed back to the
/// model like a schema error.
pub(crate) type ContextValidator<T> =
    Arc<dyn Fn(&T, &OutputContext<'_>) -> Result<(), String> + Send + Sync>;

/// The run an answer comes from, as an output validator sees it: the conversation so far
/// (the input, every model turn, every tool result), so a check can
/// hold the answer to what the tools found ("the lookup found order NW-10231, but
/// `order_id` is empty"). Borrowed for the check only.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct OutputContext<'a> {
    messages: &'a [Message],
}

impl<'a> OutputContext<'a> {
    /// A context over these messages (for testing a validator outside a run).
    pub fn new(messages: &'a [Message]) -> Self {
        Self { messages }
    }

    /// The conversation so far, oldest first: the run's input, model turns and tool
    /// results. It may end with the answering turn itself (a text answer in native or
    /// prompted mode) or not (a `submit_output` call, which goes in after its check).
    pub fn messages(&self) -> &'a [Message] {
        self.messages
    }

    /// Every tool result of the run so far, oldest first, errors included
    /// ([`ToolResult::is_error`]): what the tools returned, as the model saw it.
    pub fn tool_results(&self) -> impl Iterator<Item = &'a ToolResult> + 'a {
        self.messages.iter().flat_map(|m| match m {
            Message::Tool { results } => results.as_slice(),
            _ => &[],
        })
    }

    /// The successful results of the tool named `name` (as the model called it), oldest
    /// first.
    pub fn results_of(&self, name: &'a str) -> impl Iterator<Item = &'a ToolResult> + 'a {
        self.tool_results()
            .filter(move |r| r.name == name && !r.is_error)
    }
}

impl std::fmt::Debug for OutputContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Messages hold user content: their count only.
        f.debug_struct("OutputContext")
            .field("messages", &self.messages.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_results_are_read_in_order_and_filtered_by_name() {
        let messages = vec![
            Message::user("ticket"),
            Message::tool_results(vec![
                ToolResult::ok("1", "lookup_order", r#"{"order_id":"NW-10231"}"#),
                ToolResult::error("2", "refund_status", "no order"),
            ]),
            Message::tool_results(vec![ToolResult::error("3", "lookup_order", "not found")]),
        ];
        let ctx = OutputContext::new(&messages);
        let all: Vec<&str> = ctx.tool_results().map(|r| r.call_id.as_str()).collect();
        assert_eq!(all, ["1", "2", "3"]);
        let found: Vec<&str> = ctx
            .results_of("lookup_order")
            .map(|r| r.content.as_str())
            .collect();
        assert_eq!(found, [r#"{"order_id":"NW-10231"}"#]);
        assert_eq!(format!("{ctx:?}"), "OutputContext { messages: 3 }");
    }
}
