//! Images, documents and audio through the loop: an input's parts reach the model in
//! its user message; a part the model cannot take ends the run typed before any request
//! (a fallback chain skips such a model, and says so); a tool's parts reach the model
//! in its result, or in a user message naming the call; the test model sees them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use agent_core::content::{Input, Kind, Part};
use agent_core::llm::{
    COMMON_IMAGES, ContentCapabilities, LlmClient, LlmFuture, LlmRequest, LlmResponse, Message,
};
use agent_core::testing::ScriptedModel;
use agent_core::tool::{ContentFuture, ToolContent, ToolDefinition, ToolFuture};
use agent_core::{AgentConfig, AgentError, Tool, ToolContext, Value, json, run_agent};

use crate::common::{Triage, valid};

/// A 1x1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

fn png() -> Part {
    Part::from_base64(PNG_B64, "image/png").unwrap()
}

fn pdf() -> Part {
    Part::from_bytes_as(
        b"%PDF-1.4\n1 0 obj << /Type /Page >>\n".to_vec(),
        "application/pdf",
    )
    .unwrap()
}

/// A client with given content capabilities that answers with the output, recording
/// what it was sent.
#[derive(Clone)]
struct Seeing {
    caps: ContentCapabilities,
    sent: Arc<Mutex<Vec<LlmRequest>>>,
}

impl Seeing {
    fn new(caps: ContentCapabilities) -> Self {
        Self {
            caps,
            sent: Arc::default(),
        }
    }
}

impl LlmClient for Seeing {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        self.sent.lock().unwrap().push(request.clone());
        Box::pin(async {
            Ok(LlmResponse::tool_calls(vec![
                agent_core::llm::ToolCall::new("s1", "submit_output", valid()),
            ]))
        })
    }

    fn provider(&self) -> &str {
        "seeing"
    }

    fn content_capabilities(&self, _model: &str) -> ContentCapabilities {
        self.caps
    }
}

fn images_only() -> ContentCapabilities {
    let mut caps = ContentCapabilities::TEXT_ONLY;
    caps.image_types = COMMON_IMAGES;
    caps
}

#[tokio::test]
async fn an_inputs_parts_reach_the_model_in_its_user_message() {
    let model = ScriptedModel::new().submit(valid());
    let config = AgentConfig::<Triage>::builder("see")
        .llm(model.clone())
        .build()
        .unwrap();
    let input = Input::text("The unit arrived cracked.")
        .part(png())
        .part(pdf());
    let result = run_agent(&config, input).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let sent = &model.requests()[0];
    let Message::User { content, parts } = &sent.messages[0] else {
        panic!("{:?}", sent.messages[0]);
    };
    assert_eq!(content, "The unit arrived cracked.");
    let kinds: Vec<Kind> = parts.iter().map(Part::kind).collect();
    assert_eq!(kinds, [Kind::Image, Kind::Document]);
    // The transcript keeps them, and a record of it loads back the same.
    let json = serde_json::to_string(&result.transcript).unwrap();
    let back: Vec<Message> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, result.transcript);
}

#[tokio::test]
async fn a_part_the_model_cannot_take_ends_the_run_before_any_request() {
    let client = Seeing::new(images_only());
    let config = AgentConfig::<Triage>::builder("see")
        .llm(client.clone())
        .model("text-and-images")
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("invoice").part(png()).part(pdf())).await;
    match &result.outcome {
        Err(AgentError::UnsupportedContent {
            model,
            index,
            kind,
            media_type,
            reason,
        }) => {
            assert_eq!(model, "text-and-images");
            assert_eq!(*index, 1);
            assert_eq!(*kind, Kind::Document);
            assert_eq!(media_type, "application/pdf");
            assert_eq!(reason, "the model takes no documents");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(result.category(), Some("invalid_run"));
    assert!(
        client.sent.lock().unwrap().is_empty(),
        "no request was sent"
    );
    assert_eq!(result.usage.llm_calls, 0);
    // A URL to a model that takes bytes only: refused the same way.
    let url = Part::from_url("https://example.test/a.png", "image/png").unwrap();
    let result = run_agent(&config, Input::text("look").part(url)).await;
    assert!(
        matches!(&result.outcome, Err(AgentError::UnsupportedContent { reason, .. }) if reason.contains("pass the bytes")),
        "{:?}",
        result.outcome
    );
    // A text-only client (the default) takes no image, and the error says so.
    let text_only = ScriptedModel::new();
    struct Plain(ScriptedModel);
    impl LlmClient for Plain {
        fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
            self.0.complete(request)
        }
    }
    let config = AgentConfig::<Triage>::builder("plain")
        .llm(Plain(text_only.clone()))
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("look").part(png())).await;
    assert!(matches!(
        &result.outcome,
        Err(AgentError::UnsupportedContent {
            kind: Kind::Image,
            ..
        })
    ));
    assert!(text_only.requests().is_empty());
}

/// `screenshot`: returns a PNG with its text.
struct Screenshot(AtomicU32);

impl Tool for Screenshot {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "screenshot",
            "Take a screenshot.",
            json!({"type": "object"}),
        )
    }

    fn call<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok("a screenshot".to_owned()) })
    }

    fn call_content<'a>(&'a self, _arguments: Value, _context: ToolContext) -> ContentFuture<'a> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(ToolContent::text("the checkout page").part(png())) })
    }
}

/// A client taking images but none in tool results: the two-turn script of a
/// screenshot then the answer, recording requests.
#[derive(Clone)]
struct NoPartsInResults(Arc<Mutex<Vec<LlmRequest>>>);

impl LlmClient for NoPartsInResults {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let mut sent = self.0.lock().unwrap();
        sent.push(request.clone());
        let first = sent.len() == 1;
        Box::pin(async move {
            let call = if first {
                agent_core::llm::ToolCall::new("c1", "screenshot", json!({}))
            } else {
                agent_core::llm::ToolCall::new("s1", "submit_output", valid())
            };
            Ok(LlmResponse::tool_calls(vec![call]))
        })
    }

    fn content_capabilities(&self, _model: &str) -> ContentCapabilities {
        images_only()
    }
}

#[tokio::test]
async fn a_tools_parts_reach_the_model_in_its_result_or_right_after_it() {
    // A model that takes parts in results gets them there.
    let model = ScriptedModel::new()
        .tool_call("screenshot", json!({}))
        .submit(valid());
    let config = AgentConfig::<Triage>::builder("shots")
        .llm(model.clone())
        .tool(Screenshot(AtomicU32::new(0)))
        .build()
        .unwrap();
    let result = run_agent(&config, "why does checkout fail?").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let second = &model.requests()[1];
    let Some(Message::Tool { results }) = second.messages.last() else {
        panic!("{:?}", second.messages);
    };
    assert_eq!(results[0].content, "the checkout page");
    assert_eq!(results[0].parts, [png()]);
    // One that takes none in results gets them in a user message naming the call.
    let sent = NoPartsInResults(Arc::default());
    let config = AgentConfig::<Triage>::builder("shots")
        .llm(sent.clone())
        .tool(Screenshot(AtomicU32::new(0)))
        .build()
        .unwrap();
    let result = run_agent(&config, "why does checkout fail?").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let requests = sent.0.lock().unwrap();
    let messages = &requests[1].messages;
    let Message::Tool { results } = &messages[2] else {
        panic!("{messages:?}");
    };
    assert!(results[0].parts.is_empty());
    let Message::User { content, parts } = &messages[3] else {
        panic!("{messages:?}");
    };
    assert!(content.contains("call c1: screenshot"), "{content}");
    assert_eq!(parts, &[png()]);
}

#[tokio::test]
async fn the_test_model_says_which_parts_it_saw() {
    let config = AgentConfig::<Triage>::builder("offline")
        .model("test")
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("photo").part(png()).part(pdf())).await;
    let answer = result.outcome.unwrap();
    assert!(
        answer.summary.ends_with("(saw image/png, application/pdf)"),
        "{}",
        answer.summary
    );
}

/// An answer whose first string field is an enum and whose next has a length cap.
#[agent_core::agent_output]
#[derive(Debug)]
struct Routed {
    /// Where it goes.
    queue: Queue,
    /// A code of at most 12 characters.
    #[schemars(length(max = 12))]
    code: String,
    /// Free text.
    note: String,
}

#[agent_core::agent_type]
#[derive(Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Queue {
    Billing,
    Shipping,
}

#[tokio::test]
async fn the_test_model_notes_parts_only_in_a_field_that_takes_any_text() {
    let config = AgentConfig::<Routed>::builder("offline")
        .model("test")
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("photo").part(png())).await;
    let answer = result.outcome.unwrap();
    assert!(answer.code.chars().count() <= 12, "{}", answer.code);
    assert!(!answer.code.contains("saw"), "{}", answer.code);
    assert!(answer.note.ends_with(" (saw image/png)"), "{}", answer.note);
    assert!(matches!(answer.queue, Queue::Billing | Queue::Shipping));
}
