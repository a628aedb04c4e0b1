//! agent-core in the peer benchmarks.
//!
//! - In-process: a stateless [`LlmClient`] answers turn 1 (no tool result in the
//!   request yet) with a `lookup_order` call and turn 2 with a valid `submit_output`
//!   call; `run_agent` does everything else (argument validation, the tool, the
//!   submission's validation and deserialization).
//! - HTTP: `.model("dispatch/mock")` against the mock server (`AGENT_DISPATCH_URL`,
//!   also passed as `base_url`). Until the OpenAI-compatible adapter lands on main,
//!   `build()` rejects the model name and the scenario reports itself as pending.
//!
//! The `#[agent_output]` and `#[tool]` macros are written on another branch; the
//! impls below are what they generate at run time (schema compiled once, validation,
//! then serde), written by hand.
//!
//! TODO(lead, after the providers merge): nothing to change here if `dispatch/`
//! routes to the OpenAI-compatible adapter and honours `base_url`; re-run
//! `bench/peers/run.sh` and fill the ours-HTTP rows of BENCHMARKS.md.

use std::sync::{Arc, OnceLock};

use agent_core::{
    AgentConfig, AgentOutput, LlmClient, LlmFuture, LlmRequest, LlmResponse, Message,
    SUBMIT_OUTPUT, SchemaValidator, TokenUsage, Tool, ToolCall, ToolContext, ToolDefinition,
    ToolError, ToolFuture, ValidationErrors, run_agent, tools,
};
use peers_common::{
    INPUT, LookupOrderArgs, OUTPUT_ARGS, OUTPUT_DESCRIPTION, SYSTEM_PROMPT, TOOL_ARGS,
    TOOL_DESCRIPTION, TOOL_NAME, Triage, check_triage, lookup_order, lookup_order_schema,
    parse_cli, run_scenario, triage_schema,
};
use serde_json::Value;

/// The run's output: `Triage`, as `#[agent_output]` would make it.
struct Output(Triage);

fn output_validator() -> &'static Result<SchemaValidator, String> {
    static VALIDATOR: OnceLock<Result<SchemaValidator, String>> = OnceLock::new();
    VALIDATOR.get_or_init(|| SchemaValidator::new(&triage_schema()))
}

impl AgentOutput for Output {
    fn output_tool() -> Option<ToolDefinition> {
        Some(ToolDefinition::new(
            SUBMIT_OUTPUT,
            OUTPUT_DESCRIPTION,
            triage_schema(),
        ))
    }

    fn from_arguments(arguments: &Value) -> Result<Self, ValidationErrors> {
        match output_validator() {
            Ok(validator) => validator.validate_into::<Triage>(arguments).map(Output),
            Err(e) => Err(ValidationErrors::one(format!("/: {e}"))),
        }
    }
}

/// `lookup_order` as `#[tool]` would make it: serde in, the async fn, serde out.
struct LookupOrder;

impl Tool for LookupOrder {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(TOOL_NAME, TOOL_DESCRIPTION, lookup_order_schema())
    }

    fn call<'a>(&'a self, arguments: Value, _context: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: LookupOrderArgs = serde_json::from_value(arguments)
                .map_err(|e| ToolError::new(format!("invalid arguments: {e}")))?;
            let order = lookup_order(args.order_id);
            serde_json::to_string(&order).map_err(|e| ToolError::new(e.to_string()))
        })
    }
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

async fn one_run(config: &AgentConfig<Output>) -> Result<(), String> {
    let result = run_agent(config, INPUT).await;
    match result.outcome {
        Ok(Output(triage)) => check_triage(&triage),
        Err(e) => Err(format!("{e} ({})", e.category())),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scenario = parse_cli()?;
    let inproc_config: AgentConfig<Output> = AgentConfig::builder("triage")
        .llm(TwoTurnModel::new()?)
        .system_prompt(SYSTEM_PROMPT)
        .tools(tools![LookupOrder])
        .build()?;
    run_scenario("ours", &scenario, Some(|| one_run(&inproc_config)), |url| {
        let config = AgentConfig::<Output>::builder("triage")
                .model("dispatch/mock")
                .base_url(url)
                .system_prompt(SYSTEM_PROMPT)
                .tools(tools![LookupOrder])
                .build()
                .map_err(|e| {
                    format!(
                        "agent-core cannot route dispatch/mock yet ({e}); the OpenAI-compatible adapter is pending"
                    )
                })?;
        let config = Arc::new(config);
        Ok(move || {
            let config = Arc::clone(&config);
            async move { one_run(&config).await }
        })
    })?;
    Ok(())
}
