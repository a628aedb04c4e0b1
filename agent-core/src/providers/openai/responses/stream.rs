//! Responses API streaming: semantic server-sent events, each a JSON object whose
//! `type` names it (source: Responses API reference, "Streaming events",
//! <https://platform.openai.com/docs/api-reference/responses-streaming>).
//!
//! Read: `response.output_item.added` (a `function_call` item opens a call, with its
//! `call_id` and `name`), `response.output_text.delta` (text),
//! `response.function_call_arguments.delta` (a piece of a call's arguments, keyed by
//! `output_index`), `response.function_call_arguments.done` (the whole arguments),
//! `response.reasoning_summary_text.delta` (reasoning), `response.output_item.done`
//! (the finished item), then the end:
//! `response.completed` or `response.incomplete`, carrying the whole `response` object,
//! which is decoded as a non-streamed reply. `response.failed` (its `response.error`)
//! and `error` (`code`, `message`, `param` at the top level) are error events. The
//! stream has no `[DONE]`: a stream that stops before one of the end events was cut.
//! Other events (`response.created`, `.in_progress`, `.content_part.*`, the text
//! `.done` events) carry nothing the assembled reply needs. Arguments that arrive only
//! in the `.done` events (no deltas) are previewed from them, and a call missing from
//! the end event's `output` is built from its events (C60).

use serde_json::{Map, Value, json};

use super::wire::WireResponse;
use crate::llm::{StreamDelta, StreamSink};
use crate::providers::sse::{Assembler, Step};

/// A function call seen in the stream.
struct Open {
    output_index: u64,
    /// Its index among the turn's calls.
    index: usize,
    /// The item as `response.output_item.added` gave it.
    item: Value,
    /// The arguments handed to the sink so far.
    previewed: String,
    /// The whole arguments, from a `.done` event.
    done: Option<String>,
}

/// The reply so far.
#[derive(Default)]
pub(crate) struct EventAssembler {
    /// The calls opened, in order.
    calls: Vec<Open>,
    /// The finished output items, by `output_index`.
    items: Vec<(u64, Value)>,
    /// The `response` of the end event.
    last: Option<WireResponse>,
}

impl EventAssembler {
    /// The call at `output_index`.
    fn call_at(&mut self, output_index: u64) -> Option<&mut Open> {
        self.calls
            .iter_mut()
            .find(|c| c.output_index == output_index)
    }

    /// A call's whole arguments (from `response.function_call_arguments.done` or the
    /// finished item): what the deltas did not preview yet goes to the sink (C60: some
    /// servers send the arguments only in the `.done` events), and the call keeps them.
    fn settle(&mut self, output_index: u64, arguments: &str, sink: &mut dyn StreamSink) {
        let Some(call) = self.call_at(output_index) else {
            return;
        };
        if let Some(rest) = arguments.strip_prefix(call.previewed.as_str())
            && !rest.is_empty()
        {
            sink.on_delta(StreamDelta::ToolCallArguments {
                index: call.index,
                json: rest,
            });
            call.previewed.push_str(rest);
        }
        call.done = Some(arguments.to_owned());
    }

    fn on_json(
        &mut self,
        event: &Value,
        sink: &mut dyn StreamSink,
    ) -> Result<Step, serde_json::Error> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let output_index = event
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let delta = event.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.output_item.added" => {
                let item = event.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                    let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                    let index = self.calls.len();
                    sink.on_delta(StreamDelta::ToolCallStarted { index, id, name });
                    self.calls.push(Open {
                        output_index,
                        index,
                        item: item.clone(),
                        previewed: String::new(),
                        done: None,
                    });
                    // A server that sends the arguments with the item itself.
                    if let Some(arguments) = item.get("arguments").and_then(Value::as_str)
                        && !arguments.is_empty()
                    {
                        self.settle(output_index, arguments, sink);
                    }
                }
            }
            "response.output_text.delta" if !delta.is_empty() => {
                sink.on_delta(StreamDelta::Text(delta));
            }
            "response.reasoning_summary_text.delta" if !delta.is_empty() => {
                sink.on_delta(StreamDelta::Reasoning(delta));
            }
            "response.function_call_arguments.delta" if !delta.is_empty() => {
                if let Some(call) = self.call_at(output_index) {
                    call.previewed.push_str(delta);
                    let index = call.index;
                    sink.on_delta(StreamDelta::ToolCallArguments { index, json: delta });
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(arguments) = event.get("arguments").and_then(Value::as_str) {
                    self.settle(output_index, arguments, sink);
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.get("item") {
                    if let Some(arguments) = item.get("arguments").and_then(Value::as_str)
                        && item.get("type").and_then(Value::as_str) == Some("function_call")
                    {
                        self.settle(output_index, arguments, sink);
                    }
                    self.items.push((output_index, item.clone()));
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                self.last = Some(serde_json::from_value(response)?);
                return Ok(Step::End);
            }
            "response.failed" => {
                let error = event
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .filter(|e| !e.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"message": "the response failed (response.failed)"}));
                return Ok(Step::Failed(error));
            }
            "error" => {
                let mut error = Map::new();
                for field in ["code", "message", "param"] {
                    if let Some(value) = event.get(field).filter(|v| !v.is_null()) {
                        error.insert(field.to_owned(), value.clone());
                    }
                }
                // A nested `error` object (seen on proxies) wins.
                let error = match event.get("error") {
                    Some(nested @ Value::Object(_)) => nested.clone(),
                    _ => Value::Object(error),
                };
                return Ok(Step::Failed(error));
            }
            _ => {}
        }
        Ok(Step::More)
    }
}

/// Gives `output` every call the stream opened, with its arguments (C60): a
/// `function_call` item of the output with empty arguments takes the ones the stream
/// sent; a call the output lacks (no `output_item.done`, and an end event with an
/// empty `output`) is built from its `output_item.added` item and its arguments, at its
/// `output_index`.
fn with_calls(output: &mut Vec<Value>, calls: Vec<Open>) {
    for call in calls {
        let arguments = call.done.unwrap_or(call.previewed);
        let call_id = call.item.get("call_id").cloned();
        let found = output.iter_mut().find(|item| {
            item.get("type").and_then(Value::as_str) == Some("function_call")
                && item.get("call_id").cloned() == call_id
        });
        match found {
            Some(item) => {
                let empty = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty);
                if empty && !arguments.is_empty() {
                    item["arguments"] = Value::String(arguments);
                }
            }
            None => {
                let mut item = call.item;
                if let Some(map) = item.as_object_mut() {
                    map.insert("arguments".to_owned(), Value::String(arguments));
                }
                let at = usize::try_from(call.output_index)
                    .map_or(output.len(), |i| i.min(output.len()));
                output.insert(at, item);
            }
        }
    }
}

impl Assembler for EventAssembler {
    type Output = WireResponse;

    fn on_event(&mut self, _event: &str, data: &str, sink: &mut dyn StreamSink) -> Step {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Step::More;
        }
        let parsed: Value = match serde_json::from_str(data) {
            Ok(Value::Object(map)) => Value::Object(map),
            Ok(_) => {
                let e = <serde_json::Error as serde::de::Error>::custom(
                    "an event is not a JSON object",
                );
                return Step::Undecodable(e);
            }
            Err(e) => return Step::Undecodable(e),
        };
        match self.on_json(&parsed, sink) {
            Ok(step) => step,
            Err(e) => Step::Undecodable(e),
        }
    }

    /// The end event's response; its `output`, when empty or missing, is made of the
    /// items the stream finished (`response.output_item.done`), in output order; every
    /// call the stream opened is in it, with its arguments (see [`with_calls`]).
    fn finish(mut self) -> WireResponse {
        let mut response = self.last.take().unwrap_or_default();
        if response.output.as_ref().is_none_or(Vec::is_empty) && !self.items.is_empty() {
            self.items.sort_by_key(|(at, _)| *at);
            response.output = Some(self.items.into_iter().map(|(_, item)| item).collect());
        }
        if !self.calls.is_empty() {
            with_calls(response.output.get_or_insert_with(Vec::new), self.calls);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;

    use super::EventAssembler;
    use crate::llm::StreamDelta;
    use crate::providers::sse::{Assembler, Step};

    fn step(assembler: &mut EventAssembler, data: &str, deltas: &mut Vec<String>) -> Step {
        let mut sink = |delta: StreamDelta<'_>| {
            deltas.push(match delta {
                StreamDelta::Text(t) => format!("text {t}"),
                StreamDelta::ToolCallStarted { index, id, name } => {
                    format!("start {index} {id} {name}")
                }
                StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
                StreamDelta::Reasoning(r) => format!("reasoning {r}"),
            });
        };
        assembler.on_event("", data, &mut sink)
    }

    #[test]
    fn calls_are_keyed_by_output_index_and_the_items_stand_in_for_an_empty_output() {
        let mut assembler = EventAssembler::default();
        let mut deltas = Vec::new();
        let events = [
            json!({"type": "response.output_item.added", "output_index": 1,
                   "item": {"type": "function_call", "call_id": "call_b", "name": "g", "arguments": ""}}),
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"y\":"}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"}),
            // A delta for no open call, and an empty one, are nothing.
            json!({"type": "response.function_call_arguments.delta", "output_index": 7, "delta": "x"}),
            json!({"type": "response.output_text.delta", "output_index": 2, "delta": ""}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 3, "delta": "hm"}),
            json!({"type": "response.output_item.done", "output_index": 1,
                   "item": {"type": "function_call", "call_id": "call_b", "name": "g", "arguments": "{\"y\":1}"}}),
            json!({"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": "{}"}}),
        ];
        for event in &events {
            assert!(matches!(
                step(&mut assembler, &event.to_string(), &mut deltas),
                Step::More
            ));
        }
        let end = json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}});
        assert!(matches!(
            step(&mut assembler, &end.to_string(), &mut deltas),
            Step::End
        ));
        assert_eq!(
            deltas,
            [
                "start 0 call_b g",
                "start 1 call_a f",
                "args 0 {\"y\":",
                "args 1 {}",
                "reasoning hm",
                // The finished item completes the preview (C60).
                "args 0 1}",
            ]
        );
        let response = assembler.finish();
        let ids: Vec<&str> = response
            .output
            .as_ref()
            .unwrap()
            .iter()
            .map(|i| i["call_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["call_a", "call_b"], "in output order");
        assert_eq!(response.id.as_deref(), Some("resp_1"));
    }

    #[test]
    fn error_events_and_malformed_events_are_told_apart() {
        let mut assembler = EventAssembler::default();
        let mut deltas = Vec::new();
        let error = r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":3}"#;
        assert!(matches!(
            step(&mut assembler, error, &mut deltas),
            Step::Failed(e) if e == json!({"code": "rate_limit_exceeded", "message": "slow down"})
        ));
        let failed = r#"{"type":"response.failed","response":{"status":"failed","error":null}}"#;
        assert!(matches!(
            step(&mut assembler, failed, &mut deltas),
            Step::Failed(e) if e["message"].as_str().is_some()
        ));
        for bad in [
            "[1, 2]",
            "{\"type\":",
            r#"{"type":"response.completed","response":{"output":"none"}}"#,
        ] {
            assert!(
                matches!(step(&mut assembler, bad, &mut deltas), Step::Undecodable(_)),
                "{bad}"
            );
        }
        // Unknown events and keep-alive noise are nothing.
        for other in [r#"{"type":"response.queued"}"#, "", "[DONE]"] {
            assert!(matches!(
                step(&mut assembler, other, &mut deltas),
                Step::More
            ));
        }
        assert!(deltas.is_empty());
    }
}
