#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::EventAssembler;
use crate::llm::{StreamDelta, StreamSink, TokenUsage};
use crate::providers::sse::{Assembler, Step};

/// Records the deltas as text, and the last usage.
#[derive(Default)]
struct Record {
    deltas: Vec<String>,
    usage: Option<TokenUsage>,
}

impl StreamSink for Record {
    fn on_delta(&mut self, delta: StreamDelta<'_>) {
        self.deltas.push(match delta {
            StreamDelta::Text(t) => format!("text {t}"),
            StreamDelta::ToolCallStarted { index, id, name } => {
                format!("start {index} {id} {name}")
            }
            StreamDelta::ToolCallArguments { index, json } => format!("args {index} {json}"),
            StreamDelta::Reasoning(r) => format!("reasoning {r}"),
        });
    }

    fn on_usage(&mut self, usage: TokenUsage) {
        self.usage = Some(usage);
    }
}

/// Feeds `events` (data) to an assembler, each expected to be read; returns the sink and
/// the assembled reply.
fn assemble(events: &[&str]) -> (Record, Value) {
    let mut assembler = EventAssembler::default();
    let mut sink = Record::default();
    for data in events {
        match assembler.on_event("", data, &mut sink) {
            Step::More | Step::End => {}
            Step::Failed(e) => panic!("error event {e}"),
            Step::Undecodable(e) => panic!("undecodable {e}: {data}"),
        }
    }
    (sink, assembler.finish())
}

#[test]
fn escaped_text_and_partial_json_are_unescaped_once() {
    let (sink, reply) = assemble(&[
        r#"{"type":"message_start","message":{"id":"msg_\u0031","model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"say \"hi\"\n"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"caf\u00e9 \\ done"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_\"1\"","name":"f","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"a\\\"b"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\\u00e9\"}"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    assert_eq!(
        sink.deltas,
        [
            "text say \"hi\"\n",
            "text café \\ done",
            "start 0 toolu_\"1\" f",
            "args 0 {\"q\": \"a\\\"b",
            // The JSON text's own escape stays: it is JSON for the input.
            "args 0 \\u00e9\"}",
        ]
    );
    assert_eq!(
        reply,
        json!({
            "id": "msg_1",
            "model": "claude-x",
            "content": [
                {"type": "text", "text": "say \"hi\"\ncafé \\ done"},
                {"type": "tool_use", "id": "toolu_\"1\"", "name": "f",
                 "input": "{\"q\": \"a\\\"b\\u00e9\"}"},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 9},
        })
    );
    let input: Value =
        serde_json::from_str(reply["content"][1]["input"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"q": "a\"bé"}));
    assert_eq!(sink.usage, Some(TokenUsage::new(3, 9)));
}

#[test]
fn type_after_other_fields_and_unknown_things_are_read_as_before() {
    let (sink, reply) = assemble(&[
        // `type` not first.
        r#"{"message":{"id":"m","model":null},"type":"message_start"}"#,
        r#"{"index":0,"content_block":{"text":"","type":"text"},"type":"content_block_start"}"#,
        r#"{"delta":{"text":"a","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
        // Unknown event types, block types and delta types are ignored or kept whole.
        r#"{"type":"future_event","index":"x","delta":5}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"future_block","x":[1]}}"#,
        // Fields of another type than a string are no text; a delta that is no object
        // is no delta.
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":null}"#,
        r#"{"type":"content_block_delta","index":0,"delta":["text_delta"]}"#,
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":7,"name":{"n":1}}}"#,
        // A block that is not an object is kept as it is.
        r#"{"type":"content_block_start","index":3,"content_block":"odd"}"#,
        r#"{"type":"content_block_stop","index":0}"#,
    ]);
    assert_eq!(sink.deltas, ["text a", "start 0  "]);
    assert_eq!(
        reply["content"],
        json!([
            {"type": "text", "text": "a"},
            {"type": "future_block", "x": [1]},
            {"type": "tool_use", "id": "", "name": "", "input": null},
            "odd",
        ])
    );
    assert_eq!(reply["model"], Value::Null);
    assert_eq!(reply["usage"], json!({}));
}

#[test]
fn thinking_deltas_are_appended_to_the_block_kept_whole() {
    let (sink, reply) = assemble(&[
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"a","signature":5}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"b\"c"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s1"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s2"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xyz"}}"#,
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\":"}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"x\"}"}}"#,
    ]);
    assert_eq!(sink.deltas, ["reasoning b\"c"]);
    assert_eq!(
        reply["content"],
        json!([
            {"type": "thinking", "thinking": "ab\"c", "signature": "s1s2"},
            {"type": "redacted_thinking", "data": "xyz"},
            {"type": "server_tool_use", "id": "s", "name": "web_search",
             "input": "{\"query\":\"x\"}"},
        ])
    );
}

#[test]
fn usage_nulls_errors_and_malformed_events() {
    let (sink, reply) = assemble(&[
        r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":null,"output_tokens":1}}}"#,
        r#"{"type":"message_delta","delta":null,"usage":{"output_tokens":4,"input_tokens":null,"cache_creation_input_tokens":2}}"#,
    ]);
    assert_eq!(
        reply["usage"],
        json!({"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": null,
               "cache_creation_input_tokens": 2})
    );
    assert_eq!(sink.usage, Some(TokenUsage::new(12, 4).with_cache(0, 2)));

    let mut assembler = EventAssembler::default();
    let mut sink = Record::default();
    let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert!(matches!(
        assembler.on_event("", error, &mut sink),
        Step::Failed(e) if e["type"] == "overloaded_error"
    ));
    assert!(matches!(
        assembler.on_event("", " \n", &mut sink),
        Step::More
    ));
    for bad in [
        "{}",
        r#"{"index":0}"#,
        r#"{"type":5}"#,
        r#"{"type":"content_block_delta","delta":{}}"#,
        r#"{"type":"content_block_delta","index":"0","delta":{}}"#,
        r#"{"type":"content_block_start","index":0}"#,
        r#"{"type":"message_start"}"#,
        // A usage count that is not a count: undecodable at once. (Read into a `Value`,
        // the event passed and the assembled reply failed to decode at the end, also
        // as undecodable.)
        r#"{"type":"message_start","message":{"usage":{"input_tokens":"many"}}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":1}}"#,
        r#"{"type":"error"}"#,
        r#"{"type":"ping"} x"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"text":"a"}"#,
    ] {
        assert!(
            matches!(assembler.on_event("", bad, &mut sink), Step::Undecodable(_)),
            "{bad}"
        );
    }
}
