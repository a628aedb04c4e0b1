//! The floor of the HTTP scenarios: a bare reqwest client that sends the same two
//! Chat Completions requests a framework sends (system + user message and both tool
//! definitions; then the same plus the assistant's tool call and the tool result),
//! parses each reply into typed structs, runs the tool and deserializes the
//! submitted arguments. No agent loop, no schema validation, no retries: the least
//! work that produces the same traffic.

use std::sync::Arc;

use peers_common::{
    INPUT, OUTPUT_DESCRIPTION, SYSTEM_PROMPT, TOOL_DESCRIPTION, TOOL_NAME, Triage, check_triage,
    lookup_order, lookup_order_schema, parse_cli, run_scenario, triage_schema,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<OutMessage<'a>>,
    tools: &'a Value,
    tool_choice: &'a str,
    max_tokens: u32,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum OutMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        tool_calls: &'a [WireToolCall],
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Deserialize)]
struct ChatReply {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Serialize, Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    function: WireFunction,
}

#[derive(Serialize, Deserialize)]
struct WireFunction {
    name: String,
    arguments: String,
}

struct Bare {
    client: reqwest::Client,
    endpoint: String,
    tools: Value,
}

impl Bare {
    async fn send(&self, body: &ChatBody<'_>) -> Result<Vec<WireToolCall>, String> {
        let bytes = self
            .client
            .post(&self.endpoint)
            .bearer_auth("sk-bench")
            .json(body)
            .send()
            .await
            .map_err(|e| format!("send: {e}"))?
            .error_for_status()
            .map_err(|e| format!("status: {e}"))?
            .bytes()
            .await
            .map_err(|e| format!("body: {e}"))?;
        let reply: ChatReply = serde_json::from_slice(&bytes).map_err(|e| format!("reply: {e}"))?;
        reply
            .choices
            .into_iter()
            .next()
            .map(|c| c.message.tool_calls)
            .ok_or_else(|| "no choice".to_owned())
    }

    async fn run(&self) -> Result<(), String> {
        let mut messages = vec![
            OutMessage::System {
                content: SYSTEM_PROMPT,
            },
            OutMessage::User { content: INPUT },
        ];
        let body = ChatBody {
            model: "mock",
            messages,
            tools: &self.tools,
            tool_choice: "auto",
            max_tokens: 4096,
        };
        let calls = self.send(&body).await?;
        messages = body.messages;
        let call = calls.first().ok_or("turn 1 has no tool call")?;
        if call.function.name != TOOL_NAME {
            return Err(format!("turn 1 called {}", call.function.name));
        }
        let args: peers_common::LookupOrderArgs =
            serde_json::from_str(&call.function.arguments).map_err(|e| format!("args: {e}"))?;
        let result =
            serde_json::to_string(&lookup_order(args.order_id)).map_err(|e| e.to_string())?;
        messages.push(OutMessage::Assistant {
            content: None,
            tool_calls: &calls,
        });
        messages.push(OutMessage::Tool {
            tool_call_id: &call.id,
            content: &result,
        });
        let body = ChatBody {
            model: "mock",
            messages,
            tools: &self.tools,
            tool_choice: "auto",
            max_tokens: 4096,
        };
        let calls = self.send(&body).await?;
        let submit = calls.first().ok_or("turn 2 has no tool call")?;
        let triage: Triage =
            serde_json::from_str(&submit.function.arguments).map_err(|e| format!("output: {e}"))?;
        check_triage(&triage)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scenario = parse_cli()?;
    run_scenario(
        "bare",
        &scenario,
        None::<fn() -> std::future::Ready<Result<(), String>>>,
        |url| {
            let client = reqwest::Client::builder()
                .no_proxy()
                .build()
                .map_err(|e| e.to_string())?;
            let bare = Arc::new(Bare {
                client,
                endpoint: format!("{}/chat/completions", url.trim_end_matches('/')),
                tools: json!([
                    {"type": "function", "function": {
                        "name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                        "parameters": lookup_order_schema()}},
                    {"type": "function", "function": {
                        "name": "submit_output", "description": OUTPUT_DESCRIPTION,
                        "parameters": triage_schema()}},
                ]),
            });
            Ok(move || {
                let bare = Arc::clone(&bare);
                async move { bare.run().await }
            })
        },
    )?;
    Ok(())
}
