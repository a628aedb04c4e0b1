//! [`Planned`]: a model whose every turn is a closure of the run's input and the round
//! trip, so a batch or a sweep can mix endings and round-trip counts by input.

use agent_core::llm::{
    LlmClient, LlmError, LlmFuture, LlmRequest, LlmResponse, Message, TokenUsage, ToolCall,
};
use serde_json::{Value, json};

/// What the model does on one round trip.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Calls `lookup` with an order id new to this turn (`A<turn>`).
    Lookup,
    /// Calls `submit_output` with these arguments.
    Submit(Value),
    /// Answers in plain text.
    Text,
    /// Fails permanently (HTTP 400).
    Fail,
}

/// A model that asks `plan(input, turn)` (turn 0-based) what to do; every successful
/// turn reports 10 input and 2 output tokens.
pub(crate) struct Planned<F>(pub F);

impl<F> LlmClient for Planned<F>
where
    F: Fn(&str, usize) -> Step + Send + Sync,
{
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let input = match &request.messages[0] {
            Message::User { content, .. } => content.clone(),
            other => panic!("the first message is the input: {other:?}"),
        };
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let call = |name: &str, args: Value| {
            LlmResponse::tool_calls(vec![ToolCall::new(format!("c{turn}"), name, args)])
        };
        let out = match (self.0)(&input, turn) {
            Step::Lookup => Ok(call("lookup", json!({"order_id": format!("A{turn}")}))),
            Step::Submit(args) => Ok(call("submit_output", args)),
            Step::Text => Ok(LlmResponse::text("no idea")),
            Step::Fail => Err(LlmError::permanent("bad request").with_status(400)),
        };
        Box::pin(async move { out.map(|r| r.with_usage(TokenUsage::new(10, 2))) })
    }
}

/// The plan "look up until round trip `k` (1-based), then submit `answer`".
pub(crate) fn answer_at(k: usize, turn: usize, answer: Value) -> Step {
    if turn + 1 >= k {
        Step::Submit(answer)
    } else {
        Step::Lookup
    }
}
