//! agent-core in the peer benchmarks.
//!
//! - In-process: a stateless [`LlmClient`] answers turn 1 (no tool result in the
//!   request yet) with a `lookup_order` call and turn 2 with a valid `submit_output`
//!   call; `run_agent` does everything else (argument validation, the tool, the
//!   submission's validation and deserialization).
//! - HTTP: `.model("dispatch/mock")` against the mock server (`AGENT_DISPATCH_URL`,
//!   also passed as `base_url`), through the OpenAI-compatible adapter.
//!
//! - HTTP on the Anthropic wire (`PEERS_WIRE=anthropic`, reported as `ours-anthropic`
//!   and `ours-stream-anthropic`): `.model("claude-sonnet-4-5")` with the mock's URL as
//!   `base_url` and a dummy API key, through the Messages API adapter (`POST
//!   /v1/messages`).
//!
//! - Streamed (`ours-stream-bench`): the same runs through `run_agent_stream`, every
//!   event consumed; over HTTP the adapter asks for `stream: true` and reads the
//!   mock's server-sent events.
//!
//! The output type and the tool are made by `#[agent_output]` and `#[tool]`, as a user
//! would write them.

use agent_core::providers::ProviderOptions;
use std::sync::Arc;

use agent_core::{AgentConfig, OutputMode, agent_output, agent_type, run_agent, run_agent_stream, tool, tools, llm::{LlmClient, LlmFuture, LlmRequest, LlmResponse, Message, TokenUsage, ToolCall}, output::SUBMIT_OUTPUT, stream::StreamEvent};
use peers_common::{
    INPUT, OUTPUT_ARGS, SYSTEM_PROMPT, TOOL_ARGS, TOOL_NAME, check_triage, parse_cli, run_scenario,
};
use serde_json::Value;

/// The queue that handles the ticket.
#[agent_type]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Queue {
    /// Payments and invoices.
    Billing,
    /// Deliveries.
    Shipping,
    /// Product faults.
    Technical,
    /// Anything else.
    Other,
}

/// Triage decision for one support ticket.
#[agent_output]
#[derive(Debug)]
struct Output {
    /// Severity from 1 (lowest) to 4 (critical).
    #[schemars(range(min = 1, max = 4))]
    severity: u8,
    /// The queue that handles the ticket.
    queue: Queue,
    /// A one-sentence summary of the ticket.
    summary: String,
}

impl Output {
    fn to_common(&self) -> peers_common::Triage {
        let queue = match self.queue {
            Queue::Billing => peers_common::Queue::Billing,
            Queue::Shipping => peers_common::Queue::Shipping,
            Queue::Technical => peers_common::Queue::Technical,
            Queue::Other => peers_common::Queue::Other,
        };
        peers_common::Triage {
            severity: self.severity,
            queue,
            summary: self.summary.clone(),
        }
    }
}

/// Look up an order by its id.
#[tool(params(order_id = "The order id, for example `A-1001`."))]
async fn lookup_order(order_id: String) -> peers_common::Order {
    peers_common::lookup_order(order_id)
}

/// The stateless two-turn model: a tool call first, a valid submission once the
/// request holds a tool result.
struct TwoTurnModel {
    tool_args: Value,
    output_args: Value,
}

impl TwoTurnModel {
    fn new() -> Result<Self, serde_json::Error> {
        Ok(Self {
            tool_args: serde_json::from_str(TOOL_ARGS)?,
            output_args: serde_json::from_str(OUTPUT_ARGS)?,
        })
    }
}

impl LlmClient for TwoTurnModel {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        let has_result = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        let call = if has_result {
            ToolCall::new("call_2", SUBMIT_OUTPUT, self.output_args.clone())
        } else {
            ToolCall::new("call_1", TOOL_NAME, self.tool_args.clone())
        };
        let response = LlmResponse::tool_calls(vec![call]).with_usage(TokenUsage::new(120, 24));
        Box::pin(std::future::ready(Ok(response)))
    }

    fn provider(&self) -> &str {
        "bench"
    }
}

async fn one_run(config: &AgentConfig<Output>, stream: bool) -> Result<(), String> {
    let result = if stream {
        let mut events = run_agent_stream(config, INPUT);
        let mut last = None;
        while let Some(event) = events.next().await {
            if let StreamEvent::Finished(result) = event {
                last = Some(*result);
            }
        }
        last.ok_or("the stream ended without a result")?
    } else {
        run_agent(config, INPUT).await
    };
    match result.outcome {
        Ok(output) => check_triage(&output.to_common()),
        Err(e) => Err(format!("{e} ({})", e.category())),
    }
}

/// Runs the scenario of the command line; `stream`: through `run_agent_stream`,
/// reported as `ours-stream`.
///
/// # Errors
/// A bad command line or config.
pub fn main_for(stream: bool) -> Result<(), Box<dyn std::error::Error>> {
    let anthropic = std::env::var("PEERS_WIRE").is_ok_and(|w| w == "anthropic");
    let name = match (stream, anthropic) {
        (false, false) => "ours",
        (true, false) => "ours-stream",
        (false, true) => "ours-anthropic",
        (true, true) => "ours-stream-anthropic",
    };
    let scenario = parse_cli()?;
    let inproc_config: AgentConfig<Output> = AgentConfig::builder("triage")
        .llm(TwoTurnModel::new()?)
        .system_prompt(SYSTEM_PROMPT)
        .tools(tools![lookup_order])
        .build()?;
    run_scenario(
        name,
        &scenario,
        Some(|| one_run(&inproc_config, stream)),
        |url| {
            let options = ProviderOptions::default().with_base_url(url);
            let (model, options) = if anthropic {
                ("claude-sonnet-4-5", options.with_api_key("sk-ant-mock"))
            } else {
                ("dispatch/mock", options)
            };
            let config = AgentConfig::<Output>::builder("triage")
                .model(model)
                .provider(options)
                // The scenario is the output tool; `dispatch/` would pick native output.
                .output_mode(OutputMode::Tool)
                .system_prompt(SYSTEM_PROMPT)
                .tools(tools![lookup_order])
                .build()
                .map_err(|e| format!("agent-core config: {e}"))?;
            if std::env::var_os("PEERS_SIZES").is_some() {
                // The memory breakdown of a parked run: the sizes of its state and
                // futures (bytes), to stderr.
                let mut sizes = agent_core::__bench::run_sizes(&config);
                sizes.push((
                    "one_run future",
                    std::mem::size_of_val(&one_run(&config, stream)),
                ));
                for (what, bytes) in sizes {
                    eprintln!("size {what}: {bytes}");
                }
            }
            let config = Arc::new(config);
            Ok(move || {
                let config = Arc::clone(&config);
                async move { one_run(&config, stream).await }
            })
        },
    )?;
    Ok(())
}
