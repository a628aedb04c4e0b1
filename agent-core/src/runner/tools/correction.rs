//! Corrections: the texts the runner shows the model when a turn cannot be accepted.

use crate::config::OutputPlan;
use crate::message::ToolCall;
use crate::output::SUBMIT_OUTPUT;
use crate::validate::ValidationErrors;

pub(crate) fn rejected_submission(errors: &ValidationErrors) -> String {
    let mut text = format!("{SUBMIT_OUTPUT} was rejected:");
    for message in errors.messages() {
        text.push_str("\n- ");
        text.push_str(message);
    }
    text.push_str("\nFix these and call submit_output again, alone.");
    text
}

/// The feedback for a rejected answer in native or prompted mode (a user message);
/// `cut` is the output cap when the reply stopped at it.
pub(crate) fn rejected_answer(errors: &ValidationErrors, cut: Option<u32>) -> String {
    let mut text = String::from("Your answer was rejected:");
    for message in errors.messages() {
        text.push_str("\n- ");
        text.push_str(message);
    }
    if let Some(cap) = cut {
        text.push_str(&format!(
            "\nYour reply was cut off at the output limit (max_tokens, {cap} tokens): keep \
             every string short."
        ));
    }
    text.push_str("\nReply again with only the corrected JSON object, and no other text.");
    text
}

pub(crate) fn unusable_arguments(tool: &str, error: &str) -> String {
    format!("{tool} was not run: {error}. Call it again with a complete JSON object as arguments.")
}

/// The nudge after a plain-text turn in tool mode; `cut` is the output cap when the
/// reply stopped at it.
pub(crate) fn plain_text_nudge(cut: Option<u32>) -> String {
    let mut text = match cut {
        Some(cap) => format!(
            "Your reply was cut off at the output limit (max_tokens, {cap} tokens) before it \
             held an answer. "
        ),
        None => "You answered in text. ".to_owned(),
    };
    text.push_str(&format!(
        "To finish, call the {SUBMIT_OUTPUT} tool once, alone in its turn, with arguments \
         that match its schema."
    ));
    text
}

/// Why a call cut off by the output cap was not run (shown to the model, and the
/// attempt's message when it was `submit_output`).
pub(crate) fn cut_call(cap: u32) -> String {
    format!(
        "the output hit max_tokens ({cap} tokens) while this call was being written, so its \
         arguments are truncated; send it again with shorter arguments"
    )
}

fn call_names(calls: &[ToolCall]) -> String {
    calls
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The feedback for each call of an ambiguous turn (a terminal call with others).
pub(crate) fn ambiguous(call: &ToolCall, calls: &[ToolCall], terminal: &str) -> String {
    let names = call_names(calls);
    if call.name == terminal {
        format!(
            "Not accepted: {terminal} must be the only tool call in its turn, made exactly once; \
             this turn had {} calls ({names}). Make one {terminal} call, alone; call any other \
             tools in an earlier turn.",
            calls.len()
        )
    } else {
        format!(
            "Not executed: this turn also called {terminal}, which must be alone in its turn \
             ({names}). Call this tool in its own turn if you still need it."
        )
    }
}

pub(crate) fn unknown_tool(name: &str, available: &str) -> String {
    format!("Unknown tool {name:?}. The available tools are: {available}.")
}

/// Added to an unknown tool's correction with tool search on.
pub(crate) fn search_first() -> String {
    format!(
        " Other tools are listed only once {} finds them: call it with words for what \
         you need, then call the tool it lists.",
        crate::config::SEARCH_TOOLS
    )
}

pub(crate) fn invalid_tool_arguments(tool: &str, errors: &ValidationErrors) -> String {
    format!("{tool} was not run: invalid arguments: {errors}")
}

pub(crate) fn tool_limit(limit: u32, output: &OutputPlan) -> String {
    format!(
        "Not executed: the tool call limit ({limit}) is reached. {}",
        answer_now(output)
    )
}

/// The correction after a lookup repeated with the same result, when the run goes on to
/// the answering turn (native output on a grammar server).
pub(crate) fn repeated_lookup(tool: &str) -> String {
    format!(
        "{tool} returned the same result again: you have what it can tell you. Reply now \
         with only your answer as a JSON object."
    )
}

/// How to give the answer now, per output plan.
fn answer_now(output: &OutputPlan) -> String {
    match output {
        OutputPlan::Text => "Give your final answer now, in text.".to_owned(),
        OutputPlan::Tool => format!("Call {SUBMIT_OUTPUT} now with your answer."),
        OutputPlan::Json(_) => "Reply now with only your answer as a JSON object.".to_owned(),
    }
}

pub(crate) fn stopped(reason: &str) -> String {
    format!("Not executed: the run stopped ({reason}).")
}

pub(crate) fn wrap_up_only(output: &OutputPlan) -> String {
    match output {
        OutputPlan::Tool => format!(
            "Not executed: this was the last LLM call, and only {SUBMIT_OUTPUT} was \
             available. Call {SUBMIT_OUTPUT} with your answer."
        ),
        other => format!(
            "Not executed: this was the last LLM call, and no tool could run. {}",
            answer_now(other)
        ),
    }
}
