//! Property test of the run loop over random scripts of model behaviour (fatal tool
//! errors, refusals, cut-off turns and a dynamic tool set among them) and random
//! budgets: every run returns; exactly one of value or error; `llm_calls <=
//! max_llm_calls`; tool executions `<= max_tool_calls`; every call id answered in every
//! request; and the error's category is the one the last transition implies, computed by
//! an independent reference model of the tables in `docs/loop.md`.
//!
//! 10,000 cases by default (CI). For 1,000,000:
//!
//! ```text
//! PROPTEST_CASES=1000000 cargo test --release -p agent-core --test integration loop_properties::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::time::Duration;

use agent_core::testing::{ScriptStep, ScriptedModel};
use agent_core::{
    AgentConfig, AgentResult,
    llm::{LlmError, LlmResponse, StopReason, TokenUsage, ToolCall},
    run_agent,
    usage::ChildUsage,
};
use common::*;
use proptest::prelude::*;
use serde_json::json;

/// The tokens every scripted turn reports (input + output).
const TURN_TOKENS: u64 = 10;

/// One call inside a tool-call turn.
#[derive(Clone, Copy, Debug)]
enum Call {
    Echo,
    Failing,
    Panicking,
    Slow,
    Unknown,
    BadArguments,
    /// A tool that fails fatally: the run stops after the turn (`tool_fatal`).
    Fatal,
    /// The agent below in a tree of agents (`AgentConfig::as_tool`, the tool `child`);
    /// an unknown tool for an agent without one.
    Child,
}

impl Call {
    /// Whether the runner executes it in round trip `turn` (given budget left). The
    /// config's `tools_for` offers `slow` only in odd turns: a call to it in an even
    /// turn is answered as unknown.
    fn executes(self, turn: u32, has_child: bool) -> bool {
        match self {
            Call::Echo | Call::Failing | Call::Panicking | Call::Fatal => true,
            Call::Slow => turn % 2 == 1,
            Call::Child => has_child,
            Call::Unknown | Call::BadArguments => false,
        }
    }
}

/// One step of the model's behaviour.
#[derive(Clone, Debug)]
enum Step {
    ValidSubmit,
    InvalidSubmit,
    TruncatedSubmit,
    DoubleSubmit,
    SubmitWithTool,
    Text,
    Empty,
    Tools(Vec<Call>),
    /// A tool turn whose last call was cut by `max_tokens` (C28): the others run.
    CutTools(Vec<Call>),
    /// A valid-looking submission cut by `max_tokens` (C28): a validation retry.
    CutSubmit,
    /// A refusal (C27): the run ends.
    Refusal,
    Transient,
    Permanent,
}

fn call_strategy() -> impl Strategy<Value = Call> {
    prop_oneof![
        4 => Just(Call::Echo),
        2 => Just(Call::Failing),
        1 => Just(Call::Panicking),
        1 => Just(Call::Slow),
        1 => Just(Call::Fatal),
        1 => Just(Call::Unknown),
        1 => Just(Call::BadArguments),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    steps_with(call_strategy().boxed())
}

/// The steps of an agent in a tree: its tool turns call the agent below it too.
fn tree_step_strategy() -> impl Strategy<Value = Step> {
    steps_with(prop_oneof![3 => Just(Call::Child), 4 => call_strategy()].boxed())
}

fn steps_with(call_strategy: BoxedStrategy<Call>) -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::ValidSubmit),
        2 => Just(Step::InvalidSubmit),
        1 => Just(Step::TruncatedSubmit),
        1 => Just(Step::DoubleSubmit),
        1 => Just(Step::SubmitWithTool),
        2 => Just(Step::Text),
        1 => Just(Step::Empty),
        4 => prop::collection::vec(call_strategy.clone(), 1..4).prop_map(Step::Tools),
        1 => prop::collection::vec(call_strategy, 1..3).prop_map(Step::CutTools),
        1 => Just(Step::CutSubmit),
        1 => Just(Step::Refusal),
        2 => Just(Step::Transient),
        1 => Just(Step::Permanent),
    ]
}

#[derive(Clone, Copy, Debug)]
struct Budgets {
    max_llm_calls: u32,
    max_tool_calls: u32,
    max_llm_retries: u32,
    max_parse_retries: u32,
    tool_concurrency: usize,
}

fn budgets_strategy() -> impl Strategy<Value = Budgets> {
    (1u32..10, 0u32..6, 1u32..5, 0u32..4, 1usize..4).prop_map(|(c, t, r, p, k)| Budgets {
        max_llm_calls: c,
        max_tool_calls: t,
        max_llm_retries: r,
        max_parse_retries: p,
        tool_concurrency: k,
    })
}

/// What the reference model expects.
#[derive(Debug, PartialEq)]
struct Expected {
    category: Option<&'static str>,
    llm_calls: u32,
    tool_calls: u32,
}

/// The transition tables and counting rules of `docs/loop.md` (with the wrap-up turn on),
/// written independently of the runner.
fn reference(script: &[Step], b: Budgets) -> Expected {
    let mut agent = RefAgent {
        steps: script.iter(),
        budgets: b,
        child: None,
    };
    reference_run(&mut agent, &mut Vec::new())
}

/// An agent of the reference model: what is left of its script (one script for all its
/// runs, as one scripted model serves them), its budgets, and the agent below it.
struct RefAgent<'a> {
    steps: std::slice::Iter<'a, Step>,
    budgets: Budgets,
    child: Option<Box<RefAgent<'a>>>,
}

/// What the reference model expects of one run in a tree, and of the runs below it
/// in the order they ended (with one tool call at a time, the order of the calls).
#[derive(Debug, PartialEq)]
struct ExpectedRun {
    run: Expected,
    children: Vec<ExpectedRun>,
}

/// One run of `agent`: a child run for each `child` call that executes, pushed to
/// `children`. A child's failure is a tool error for its parent, so it changes nothing
/// in the parent's transitions.
fn reference_run(agent: &mut RefAgent<'_>, children: &mut Vec<ExpectedRun>) -> Expected {
    let RefAgent {
        steps,
        budgets: b,
        child,
    } = agent;
    let b = *b;
    let (mut llm_calls, mut tool_calls, mut failures, mut malformed) = (0u32, 0u32, 0u32, 0u32);
    let end = |category, llm_calls, tool_calls| Expected {
        category,
        llm_calls,
        tool_calls,
    };
    loop {
        if llm_calls >= b.max_llm_calls {
            return end(Some("max_llm_calls"), llm_calls, tool_calls);
        }
        llm_calls += 1;
        let Some(step) = steps.next() else {
            return end(Some("llm_permanent_error"), llm_calls, tool_calls);
        };
        if let Step::Transient = step {
            failures += 1;
            if failures >= b.max_llm_retries {
                return end(Some("max_llm_retries"), llm_calls, tool_calls);
            }
            continue;
        }
        failures = 0;
        let malformed_kind = match step {
            Step::ValidSubmit => return end(None, llm_calls, tool_calls),
            Step::Permanent => return end(Some("llm_permanent_error"), llm_calls, tool_calls),
            Step::Refusal => return end(Some("refused"), llm_calls, tool_calls),
            Step::InvalidSubmit | Step::TruncatedSubmit | Step::CutSubmit => {
                Some("schema_validation_failed")
            }
            Step::DoubleSubmit | Step::SubmitWithTool => Some("ambiguous_tool_turn"),
            Step::Text | Step::Empty => Some("schema_not_called"),
            // The last round trip is a wrap-up turn: only submit_output is offered, and
            // nothing else runs.
            Step::Tools(_) | Step::CutTools(_) if llm_calls == b.max_llm_calls => None,
            // The cut call (the last) never runs; the ones before it are complete.
            Step::Tools(calls) | Step::CutTools(calls) => {
                let runnable = match step {
                    Step::CutTools(_) => &calls[..calls.len() - 1],
                    _ => &calls[..],
                };
                let mut fatal = false;
                for call in runnable {
                    if call.executes(llm_calls, child.is_some()) && tool_calls < b.max_tool_calls {
                        tool_calls += 1;
                        fatal |= matches!(call, Call::Fatal);
                        if let (Call::Child, Some(below)) = (call, child.as_deref_mut()) {
                            let mut grandchildren = Vec::new();
                            let run = reference_run(below, &mut grandchildren);
                            children.push(ExpectedRun {
                                run,
                                children: grandchildren,
                            });
                        }
                    }
                }
                // A fatal error ends the run once the whole turn is answered.
                if fatal {
                    return end(Some("tool_fatal"), llm_calls, tool_calls);
                }
                None
            }
            Step::Transient => unreachable!(),
        };
        if let Some(kind) = malformed_kind {
            malformed += 1;
            if malformed > b.max_parse_retries {
                return end(Some(kind), llm_calls, tool_calls);
            }
        }
    }
}

struct Tools {
    echo: TestTool,
    failing: TestTool,
    panicking: TestTool,
    slow: TestTool,
    fatal: TestTool,
}

fn script_model(script: &[Step]) -> ScriptedModel {
    let model = ScriptedModel::new();
    let mut n = 0u32;
    let mut steps = Vec::new();
    for step in script {
        n += 1;
        let unique = format!("O{n}");
        let response = match step {
            Step::ValidSubmit => {
                LlmResponse::tool_calls(vec![model.call("submit_output", valid())])
            }
            Step::InvalidSubmit => {
                LlmResponse::tool_calls(vec![model.call("submit_output", invalid())])
            }
            Step::TruncatedSubmit => LlmResponse::tool_calls(vec![ToolCall::from_wire(
                format!("t{n}"),
                "submit_output",
                Some(&json!("{\"severity\": 2, \"sum")),
            )]),
            Step::DoubleSubmit => LlmResponse::tool_calls(vec![
                model.call("submit_output", invalid()),
                model.call("submit_output", valid()),
            ]),
            Step::SubmitWithTool => LlmResponse::tool_calls(vec![
                model.call("lookup", order(&unique)),
                model.call("submit_output", valid()),
            ]),
            Step::Text => LlmResponse::text("thinking out loud"),
            Step::Empty => LlmResponse::text(""),
            Step::Tools(calls) => LlmResponse::tool_calls(tool_turn(&model, calls, &unique)),
            Step::CutTools(calls) => LlmResponse::tool_calls(tool_turn(&model, calls, &unique))
                .with_stop_reason(StopReason::MaxTokens),
            Step::CutSubmit => LlmResponse::tool_calls(vec![model.call("submit_output", valid())])
                .with_stop_reason(StopReason::MaxTokens),
            Step::Refusal => {
                LlmResponse::text("I can't help with that.").with_stop_reason(StopReason::Refusal)
            }
            Step::Transient => {
                steps.push(ScriptStep::Fail(
                    LlmError::transient("503 overloaded").with_status(503),
                ));
                continue;
            }
            Step::Permanent => {
                steps.push(ScriptStep::Fail(
                    LlmError::permanent("400 bad request").with_status(400),
                ));
                continue;
            }
        };
        // Every turn costs TURN_TOKENS, so token caps and sums can be checked exactly.
        steps.push(ScriptStep::Respond(
            response.with_usage(TokenUsage::new(TURN_TOKENS - 2, 2)),
        ));
    }
    let scripted = ScriptedModel::from_steps(steps);
    // Keep ids unique across the script: `model` numbered them; `scripted` replays them.
    drop(model);
    scripted
}

fn tool_turn(model: &ScriptedModel, calls: &[Call], unique: &str) -> Vec<ToolCall> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let id = format!("{unique}-{i}");
            match c {
                Call::Echo => model.call("lookup", order(&id)),
                Call::Failing => model.call("failing", order(&id)),
                Call::Panicking => model.call("panicking", order(&id)),
                Call::Slow => model.call("slow", order(&id)),
                Call::Unknown => model.call("no_such_tool", order(&id)),
                Call::BadArguments => model.call("lookup", json!({"id": id})),
                Call::Fatal => model.call("fatal", order(&id)),
                Call::Child => model.call("child", json!({ "input": id })),
            }
        })
        .collect()
}

impl Tools {
    fn new() -> Self {
        Self {
            echo: TestTool::new("lookup", Behaviour::Echo),
            failing: TestTool::new("failing", Behaviour::Fail),
            panicking: TestTool::new("panicking", Behaviour::Panic),
            slow: TestTool::new("slow", Behaviour::Sleep(Duration::from_secs(30))),
            fatal: TestTool::new("fatal", Behaviour::Fatal),
        }
    }

    fn runs(&self) -> u32 {
        self.echo.runs()
            + self.failing.runs()
            + self.panicking.runs()
            + self.slow.runs()
            + self.fatal.runs()
    }
}

/// The config of one agent: the scripted model, the five test tools (and the agent
/// below it as the tool `child`), the budgets, the wrap-up turn, a dynamic tool set.
fn agent_config(
    model: &ScriptedModel,
    tools: &Tools,
    b: Budgets,
    tool_timeout: Duration,
    child: Option<&AgentConfig<Triage>>,
) -> AgentConfig<Triage> {
    let mut builder = builder(
        model,
        &[
            &tools.echo,
            &tools.failing,
            &tools.panicking,
            &tools.slow,
            &tools.fatal,
        ],
    )
    // A dynamic tool set: `slow` is offered in odd round trips only.
    .tools_for(|state, tool| tool.name != "slow" || state.turn % 2 == 1)
    .wrap_up(true)
    .max_llm_calls(b.max_llm_calls)
    .max_tool_calls(b.max_tool_calls)
    .max_llm_retries(b.max_llm_retries)
    .max_parse_retries(b.max_parse_retries)
    .tool_concurrency(b.tool_concurrency)
    .tool_timeout(tool_timeout)
    // Guards are tested on their own (loop_guards.rs); here they stay out of the way.
    .repeated_call_limit(u32::MAX)
    .no_progress_turns(u32::MAX);
    if let Some(child) = child {
        builder = builder.tool(child.as_tool("child", "Asks the agent below."));
    }
    builder.build().unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(future)
}

fn run_case(script: &[Step], b: Budgets) -> (AgentResult<Triage>, ScriptedModel, Tools) {
    quiet_tool_panics();
    let tools = Tools::new();
    let model = script_model(script);
    let config = agent_config(&model, &tools, b, Duration::from_secs(1), None);
    let result = block_on(run_agent(&config, "ticket"));
    (result, model, tools)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_run_ends_typed_within_budgets(
        script in prop::collection::vec(step_strategy(), 0..12),
        b in budgets_strategy(),
    ) {
        let (result, model, tools) = run_case(&script, b);
        let expected = reference(&script, b);

        // Exactly one of value or error, and the category the last transition implies.
        prop_assert_eq!(result.category(), expected.category, "script {:?}", script);
        if let Ok(value) = &result.outcome {
            prop_assert_eq!(value, &Triage { severity: 2, summary: "parcel late".into() });
            prop_assert!(!result.output.is_empty());
        }
        // Budgets.
        prop_assert!(result.usage.llm_calls <= b.max_llm_calls);
        prop_assert!(result.usage.tool_calls <= b.max_tool_calls);
        prop_assert_eq!(result.usage.llm_calls, expected.llm_calls);
        prop_assert_eq!(result.usage.tool_calls, expected.tool_calls);
        prop_assert_eq!(tools.runs(), result.usage.tool_calls);
        prop_assert_eq!(model.request_count() as u32, result.usage.llm_calls);
        // Every call id answered in every request, and in the transcript.
        assert_requests_well_formed(&model.requests());
        assert_well_formed(&result.transcript);
    }
}

#[test]
fn the_reference_model_agrees_with_hand_computed_cases() {
    let b = Budgets {
        max_llm_calls: 5,
        max_tool_calls: 1,
        max_llm_retries: 2,
        max_parse_retries: 1,
        tool_concurrency: 1,
    };
    let e = reference(
        &[
            Step::Text,
            Step::Tools(vec![Call::Echo, Call::Echo]),
            Step::ValidSubmit,
        ],
        b,
    );
    assert_eq!(
        e,
        Expected {
            category: None,
            llm_calls: 3,
            tool_calls: 1
        }
    );
    let e = reference(&[Step::Transient, Step::Transient, Step::ValidSubmit], b);
    assert_eq!(
        e,
        Expected {
            category: Some("max_llm_retries"),
            llm_calls: 2,
            tool_calls: 0
        }
    );
    let e = reference(&[Step::Text, Step::DoubleSubmit], b);
    assert_eq!(
        e,
        Expected {
            category: Some("ambiguous_tool_turn"),
            llm_calls: 2,
            tool_calls: 0
        }
    );
    let e = reference(&[], b);
    assert_eq!(e.category, Some("llm_permanent_error"));
}

// Trees of agents (`AgentConfig::as_tool`): a root whose tool `child` runs an agent,
// which may call one more agent below it in turn.

/// An agent of a generated tree: its script (served to all its runs by one scripted
/// model), its budgets, and the agent below it.
#[derive(Clone, Debug)]
struct Node {
    script: Vec<Step>,
    budgets: Budgets,
    child: Option<Box<Node>>,
}

/// A root with a child, and a grandchild in half the cases.
fn tree_strategy() -> impl Strategy<Value = Node> {
    let script = |max| prop::collection::vec(tree_step_strategy(), 0..max);
    (
        script(10),
        budgets_strategy(),
        script(16),
        budgets_strategy(),
        prop::option::of((script(16), budgets_strategy())),
    )
        .prop_map(|(root, rb, child, cb, grandchild)| Node {
            script: root,
            budgets: rb,
            child: Some(Box::new(Node {
                script: child,
                budgets: cb,
                child: grandchild.map(|(script, budgets)| {
                    Box::new(Node {
                        script,
                        budgets,
                        child: None,
                    })
                }),
            })),
        })
}

/// One agent of a built tree: its model and tools, and the agent below it.
struct Built {
    model: ScriptedModel,
    tools: Tools,
    child: Option<Box<Built>>,
}

/// Long enough that no child meets the deadline its parent's `tool_timeout` sets (the
/// 30 s `slow` tool and every retry fit in it): what is tested here is the tree.
const TREE_TOOL_TIMEOUT: Duration = Duration::from_secs(3600);

fn build_tree(node: &Node, max_total_tokens: Option<u64>) -> (AgentConfig<Triage>, Built) {
    let below = node.child.as_deref().map(|c| build_tree(c, None));
    let model = script_model(&node.script);
    let tools = Tools::new();
    let config = agent_config(
        &model,
        &tools,
        node.budgets,
        TREE_TOOL_TIMEOUT,
        below.as_ref().map(|(config, _)| config),
    );
    let config = match max_total_tokens {
        Some(cap) => config.with_(|b| b.max_total_tokens(cap)).unwrap(),
        None => config,
    };
    let built = Built {
        model,
        tools,
        child: below.map(|(_, built)| Box::new(built)),
    };
    (config, built)
}

fn expected_tree(node: &Node) -> ExpectedRun {
    fn agent(node: &Node) -> RefAgent<'_> {
        RefAgent {
            steps: node.script.iter(),
            budgets: node.budgets,
            child: node.child.as_deref().map(|c| Box::new(agent(c))),
        }
    }
    let mut children = Vec::new();
    let run = reference_run(&mut agent(node), &mut children);
    ExpectedRun { run, children }
}

/// What a run in the tree did, in the reference model's terms.
fn observed(category: Option<&str>, usage: &agent_core::usage::Usage) -> ExpectedRun {
    ExpectedRun {
        run: Expected {
            category: category.map(|c| -> &'static str { c.to_owned().leak() }),
            llm_calls: usage.llm_calls,
            tool_calls: usage.tool_calls,
        },
        children: usage
            .children
            .iter()
            .map(|c: &ChildUsage| observed(c.category.as_deref(), &c.usage))
            .collect(),
    }
}

/// The tokens the scripted models of a tree served: TURN_TOKENS for each turn a model
/// answered (its script's first `request_count` steps that are not failures).
fn served_tokens(node: &Node, built: &Built) -> u64 {
    let answered = node
        .script
        .iter()
        .take(built.model.request_count())
        .filter(|s| !matches!(s, Step::Transient | Step::Permanent))
        .count() as u64;
    let below = match (&node.child, &built.child) {
        (Some(n), Some(b)) => served_tokens(n, b),
        _ => 0,
    };
    answered * TURN_TOKENS + below
}

/// Checks every agent of the tree: its requests are well-formed; its runs, over all its
/// runs, stayed within its own budgets; the tools it ran are its runs' `tool_calls`
/// (an agent tool counts as one execution of its parent).
fn check_agents(node: &Node, built: &Built, runs: &[&agent_core::usage::Usage]) {
    assert_requests_well_formed(&built.model.requests());
    let mut calls = 0;
    let mut below = Vec::new();
    for usage in runs {
        assert!(usage.llm_calls <= node.budgets.max_llm_calls, "{usage:?}");
        assert!(usage.tool_calls <= node.budgets.max_tool_calls, "{usage:?}");
        calls += usage.llm_calls;
        below.extend(usage.children.iter().map(|c| &c.usage));
    }
    assert_eq!(calls as usize, built.model.request_count());
    let tool_calls: u32 = runs.iter().map(|u| u.tool_calls).sum();
    assert_eq!(tool_calls, built.tools.runs() + below.len() as u32);
    match (&node.child, &built.child) {
        (Some(n), Some(b)) => check_agents(n, b, &below),
        _ => assert!(below.is_empty()),
    }
}

fn sequential(mut node: Node) -> Node {
    node.budgets.tool_concurrency = 1;
    node.child = node.child.map(|c| Box::new(sequential(*c)));
    node
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases() / 5,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// One tool call at a time: every run of the tree ends as the reference model
    /// says (a child's failure is a tool error its parent goes on from), with the
    /// counts it says; the tokens of the whole tree are summed exactly at the root.
    #[test]
    fn every_run_of_a_tree_ends_as_the_reference_says(node in tree_strategy()) {
        quiet_tool_panics();
        let node = sequential(node);
        let (config, built) = build_tree(&node, None);
        let result = block_on(run_agent(&config, "ticket"));
        prop_assert_eq!(result.outcome.is_ok(), result.category().is_none());
        prop_assert_eq!(observed(result.category(), &result.usage), expected_tree(&node), "tree {:?}", node);
        prop_assert_eq!(result.usage.total_tokens(), served_tokens(&node, &built));
        check_agents(&node, &built, &[&result.usage]);
        assert_well_formed(&result.transcript);
    }

    /// Calls at once, under a token cap on the root: every run ends typed, no agent
    /// passes its own budgets, the tree's tokens are summed exactly, and the tree
    /// passes the cap by at most one call per run in flight (a run's first call has no
    /// estimate yet; every later call must fit).
    #[test]
    fn a_tree_under_a_token_cap_ends_typed_within_it(
        node in tree_strategy(),
        cap in 1u64..200,
    ) {
        quiet_tool_panics();
        let (config, built) = build_tree(&node, Some(cap));
        let result = block_on(run_agent(&config, "ticket"));
        prop_assert_eq!(result.outcome.is_ok(), result.category().is_none());
        let used = result.usage.total_tokens();
        prop_assert_eq!(used, served_tokens(&node, &built));
        let c = |n: &Node| n.budgets.tool_concurrency as u64;
        let child = node.child.as_deref().unwrap();
        let in_flight = c(&node) * (1 + child.child.as_deref().map_or(0, |_| c(child)));
        prop_assert!(used <= cap + in_flight * TURN_TOKENS, "{} tokens over a cap of {}", used, cap);
        check_agents(&node, &built, &[&result.usage]);
        assert_well_formed(&result.transcript);
    }
}
