#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::super::response::{self, Assembled};
use super::EventAssembler;
use crate::llm::{StreamDelta, StreamSink, TokenUsage};
use crate::providers::sse::{self, Assembler, Step};

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
fn assemble_typed(events: &[&str]) -> (Record, Assembled) {
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

/// The assembled reply as the JSON body of a non-streamed reply (the usage counts that
/// came).
fn body(reply: &Assembled) -> Value {
    let mut usage = serde_json::Map::new();
    for (key, count) in [
        ("input_tokens", reply.usage.input_tokens),
        ("output_tokens", reply.usage.output_tokens),
        (
            "cache_creation_input_tokens",
            reply.usage.cache_creation_input_tokens,
        ),
        (
            "cache_read_input_tokens",
            reply.usage.cache_read_input_tokens,
        ),
    ] {
        if let Some(count) = count {
            usage.insert(key.to_owned(), json!(count));
        }
    }
    json!({
        "id": reply.id,
        "model": reply.model,
        "content": reply.content.iter().map(|b| b.to_value()).collect::<Vec<_>>(),
        "stop_reason": reply.stop_reason,
        "usage": usage,
    })
}

/// [`assemble_typed`], the reply as its JSON body.
fn assemble(events: &[&str]) -> (Record, Value) {
    let (sink, reply) = assemble_typed(events);
    let body = body(&reply);
    (sink, body)
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
        // `cache_read_input_tokens: null` is no count.
        json!({"input_tokens": 10, "output_tokens": 4, "cache_creation_input_tokens": 2})
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

/// The streams of the tests above and more: each assembled reply, normalized, is the
/// response that its JSON body gets from the non-streamed `decode` (which streamed
/// replies went through before they were normalized typed).
#[test]
fn a_typed_reply_decodes_as_its_json_body_does() {
    let streams: &[&[&str]] = &[
        &[
            r#"{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":5,"cache_creation_input_tokens":null}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"say \"hi\"\n"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"caf\u00e9"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"a\\\"b"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\\u00e9\"}"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            r#"{"type":"message_stop"}"#,
        ],
        // Thinking before calls: the blocks go with the first call; calls without an
        // id, without input, with input that is not an object, double-encoded.
        &[
            r#"{"type":"message_start","message":{"id":"m2","model":"claude-sonnet-4-5","usage":{"input_tokens":10}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me see"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xyz"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"","name":"a"}}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t3","name":"b","input":{"k":[1,2.5]}}}"#,
            r#"{"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"t4","name":"c","input":{}}}"#,
            r#"{"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":"[1]"}}"#,
            r#"{"type":"content_block_start","index":5,"content_block":{"type":"tool_use","id":"t5","name":"d","input":{}}}"#,
            r#"{"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"\"{\\\"x\\\":1}\""}}"#,
            r#"{"type":"content_block_start","index":6,"content_block":{"type":"tool_use","id":"t6","name":"e","input":{}}}"#,
            r#"{"type":"content_block_delta","index":6,"delta":{"type":"input_json_delta","partial_json":"{\"cut"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20,"cache_creation_input_tokens":7}}"#,
            r#"{"type":"message_stop"}"#,
        ],
        // A paused turn: every block goes back, inputs parsed.
        &[
            r#"{"type":"message_start","message":{"id":"m3","model":"claude-x","usage":{"input_tokens":1,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"searching"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"u"}]}}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}"#,
            r#"{"type":"content_block_start","index":4,"content_block":"odd"}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"pause_turn"},"usage":{"output_tokens":3}}"#,
            r#"{"type":"message_stop"}"#,
        ],
        // Other stop reasons; no usage, id or model; text and type oddities.
        &[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":5}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":7,"name":{"n":1}}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"future_block","text":"no"}}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"thinking","thinking":5}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"refusal"}}"#,
        ],
        &[r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}"#],
        &[r#"{"type":"message_delta","delta":{"stop_reason":"model_context_window_exceeded"}}"#],
        &[r#"{"type":"message_delta","delta":{"stop_reason":"something_new"}}"#],
        &[r#"{"type":"message_delta","delta":{"stop_reason":"stop_sequence"}}"#],
        &[],
    ];
    for with_id in [false, true] {
        let mut headers = reqwest::header::HeaderMap::new();
        if with_id {
            headers.insert("request-id", "req_9".parse().unwrap());
        }
        for events in streams {
            let (_, reply) = assemble_typed(events);
            let json = body(&reply);
            let expected =
                response::decode(&sse::reply(200, headers.clone(), &json), None).unwrap();
            let mut got = response::decode_assembled(reply, &headers);
            // Ids synthesised for calls without one are random.
            for (got, expected) in got.tool_calls.iter_mut().zip(&expected.tool_calls) {
                if got.id.starts_with("call_") && expected.id.starts_with("call_") {
                    got.id.clone_from(&expected.id);
                }
            }
            assert_eq!(got, expected, "{json}");
        }
    }
}
