//! rig in the peer benchmarks.
//!
//! The mapping of the scenario onto rig 0.44 (rig-core + rig-agent):
//! - the agent: `AgentBuilder` with the system prompt as preamble, `lookup_order` as a
//!   rig tool (`PortableTool`: rig deserializes the arguments into
//!   `LookupOrderArgs`), and the output type offered as rig's synthetic output tool
//!   (`output_schema::<Triage>()` + `OutputMode::Tool`; rig names it `final_result`);
//!   `default_max_turns(5)` (rig's default is 1 model call).
//! - a run: `agent.prompt(INPUT).run()`; the run ends when the model calls
//!   `final_result`, whose arguments are the response's output text; we deserialize
//!   it into `Triage` with serde, as rig's own typed runs do (rig does not validate
//!   tool or output arguments against their schema: serde is its validation).
//! - in-process: rig's equivalent of a custom `CompletionModel` in 0.44 is a
//!   `driver::Transport` for a completion wire; ours answers for rig's scripted wire
//!   (`test_utils::MockScript`) statelessly: a `lookup_order` call when the request
//!   holds no tool result, else a `final_result` call with valid arguments.
//! - HTTP: rig's OpenAI client (`OpenAIConfig::with_base_url`), Chat Completions wire.

use std::convert::Infallible;
use std::sync::Arc;

use peers_common::{
    INPUT, LookupOrderArgs, OUTPUT_ARGS, Order, SYSTEM_PROMPT, TOOL_ARGS, TOOL_DESCRIPTION,
    TOOL_NAME, Triage, check_triage, lookup_order, lookup_order_schema, parse_cli, run_scenario,
};
use rig_agent::agent::OutputMode;
use rig_agent::{Agent, AgentBuilder};
use rig_core::DynModel;
use rig_core::completion::{AssistantContent, CompletionRequest, CompletionResponse, Usage};
use rig_core::driver::{Exchange, Model, Opened, Opening, Transport};
use rig_core::message::{Message, Origin, ToolCall, ToolFunction, ToolName, UserContent};
use rig_core::operation::Completion;
use rig_core::providers::openai::OpenAIConfig;
use rig_core::test_utils::{MOCK_API, MOCK_PROVIDER, MockFrame, MockScript};
use rig_core::tool::PortableTool;
use serde_json::Value;

/// `lookup_order` as a rig tool.
struct LookupOrder;

impl PortableTool for LookupOrder {
    const NAME: &'static str = TOOL_NAME;
    type Args = LookupOrderArgs;
    type Output = Order;
    type Error = Infallible;

    fn description(&self) -> String {
        TOOL_DESCRIPTION.to_owned()
    }

    fn parameters(&self) -> Value {
        lookup_order_schema()
    }

    async fn call(&self, arguments: LookupOrderArgs) -> Result<Order, Infallible> {
        Ok(lookup_order(arguments.order_id))
    }
}

/// The stateless two-turn model, as a transport of rig's scripted completion wire.
#[derive(Clone)]
struct TwoTurnRuntime {
    tool_args: Value,
    output_args: Value,
}

fn has_tool_result(request: &CompletionRequest) -> bool {
    request.chat_history.iter().any(|m| match m {
        Message::User { content, .. } => content
            .iter()
            .any(|c| matches!(c, UserContent::ToolResult(_))),
        _ => false,
    })
}

impl Transport<MockScript> for TwoTurnRuntime {
    fn send(&self, request: CompletionRequest, _exchange: Exchange) -> Opening<MockFrame> {
        let (name, arguments) = if has_tool_result(&request) {
            // rig names its output tool `final_result` (or `final_result_N` on a clash).
            let output = request
                .tools
                .iter()
                .map(|t| t.name.to_string())
                .find(|n| n.starts_with("final_result"))
                .unwrap_or_else(|| "final_result".to_owned());
            (output, self.output_args.clone())
        } else {
            (TOOL_NAME.to_owned(), self.tool_args.clone())
        };
        let call_id = if arguments == self.tool_args {
            "call_1"
        } else {
            "call_2"
        };
        let name = match ToolName::new(name) {
            Ok(name) => name,
            Err(e) => {
                return Opening::failed(rig_core::ProviderError::Provider(e.to_string()));
            }
        };
        let content = AssistantContent::ToolCall(ToolCall::from_wire(
            call_id,
            ToolFunction::new(name, arguments),
        ));
        let usage = Usage::default().input_tokens(120).output_tokens(24);
        let response = CompletionResponse::new(
            vec![content],
            usage,
            Origin::new(MOCK_API, MOCK_PROVIDER, ""),
            Value::Null,
        );
        Opening::ready(Opened::new(futures::stream::iter([Ok(
            MockFrame::Response(Box::new(response)),
        )])))
    }
}

fn agent(model: impl Into<DynModel<Completion>>) -> Agent {
    AgentBuilder::new(model)
        .preamble(SYSTEM_PROMPT)
        .output_schema::<Triage>()
        .output_mode(OutputMode::Tool)
        .default_max_turns(5)
        .tool(LookupOrder)
        .build()
}

async fn one_run(agent: &Agent) -> Result<(), String> {
    let response = agent
        .prompt(INPUT)
        .run()
        .await
        .map_err(|e| format!("run: {e}"))?;
    let triage: Triage =
        serde_json::from_str(&response.output()).map_err(|e| format!("output: {e}"))?;
    check_triage(&triage)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scenario = parse_cli()?;
    let runtime = TwoTurnRuntime {
        tool_args: serde_json::from_str(TOOL_ARGS)?,
        output_args: serde_json::from_str(OUTPUT_ARGS)?,
    };
    let inproc_agent = scenario
        .url()
        .is_none()
        .then(|| agent(Model::new(MockScript::default(), runtime)));
    run_scenario(
        "rig",
        &scenario,
        inproc_agent.as_ref().map(|a| move || one_run(a)),
        |url| {
            let model = OpenAIConfig::new("sk-bench")
                .with_base_url(url)
                .client()
                .chat("mock");
            let agent = Arc::new(agent(model));
            Ok(move || {
                let agent = Arc::clone(&agent);
                async move { one_run(&agent).await }
            })
        },
    )?;
    Ok(())
}
