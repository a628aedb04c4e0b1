//! MCP tools over stdio, against the tests' own MCP server: this test binary, started
//! again with `AGENT_MCP_TEST_SERVER=stdio`, serves `common::TestServer` on its stdin and
//! stdout. That is why this target has its own `main` (no libtest harness): libtest
//! would write to stdout. Pass a substring to run only the matching cases (and `--skip`
//! substrings to leave some out).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::pin::Pin;
use std::time::Duration;

use agent_core::testing::ScriptedModel;
use agent_core::{AgentConfig, run_agent};
use agent_mcp::{McpError, McpServer, McpTools};
use common::{Answer, TestServer, results_of};
use rmcp::ServiceExt;
use serde_json::json;

const SERVE: &str = "AGENT_MCP_TEST_SERVER";

/// One test case: an async fn with no arguments.
type Case = fn() -> Pin<Box<dyn Future<Output = ()>>>;

/// `(name, case)` pairs from the case fns' names.
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        [$((stringify!($case), (|| -> Pin<Box<dyn Future<Output = ()>>> { Box::pin($case()) }) as Case)),*]
    };
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match std::env::var(SERVE).as_deref() {
        Ok("stdio") => return runtime.block_on(serve(None)),
        Ok("changing") => return runtime.block_on(serve(Some(Default::default()))),
        // A server that exits at once, and one that never answers.
        Ok("agent") => return runtime.block_on(serve_agents()),
        Ok("exit") => return,
        Ok("silent") => return std::thread::sleep(Duration::from_secs(30)),
        _ => {}
    }
    let (filter, skip) = filters();
    let cases: [(&str, Case); 12] = cases![
        stdio_python_client_calls_the_served_agents_after_a_handshake,
        stdio_python_client_calls_the_served_agents_after_discover,
        stdio_served_bad_input_is_answered_and_the_server_lives,
        stdio_tools_are_listed_across_pages_with_legal_names,
        stdio_run_calls_mcp_tools_and_ends_with_a_validated_value,
        stdio_is_error_and_bad_arguments_come_back_as_tool_errors,
        stdio_server_killed_mid_run_gives_tool_errors_and_a_typed_ending,
        stdio_slow_call_times_out_as_a_tool_error,
        stdio_missing_program_is_a_spawn_error,
        stdio_program_that_exits_is_an_initialize_error,
        stdio_silent_program_is_a_connect_timeout,
        c36_stdio_a_change_announced_before_a_result_is_offered_in_the_next_llm_call,
    ];
    let mut ran = 0;
    for (name, case) in cases {
        if filter.as_deref().is_some_and(|f| !name.contains(f))
            || skip.iter().any(|s| name.contains(s.as_str()))
        {
            println!("test {name} ... filtered out");
            continue;
        }
        println!("test {name} ...");
        runtime.block_on(case());
        println!("test {name} ... ok");
        ran += 1;
    }
    println!("test result: ok. {ran} passed");
}

/// The name filter and the `--skip` filters among libtest-style arguments (other flags,
/// and the values of `--test-threads`, `--color`, `--format` and `--logfile`, are
/// ignored).
fn filters() -> (Option<String>, Vec<String>) {
    let mut filter = None;
    let mut skip = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--skip" => skip.extend(args.next()),
            "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" => {
                let _ = args.next();
            }
            flag if flag.starts_with('-') => {}
            _ => filter = Some(arg),
        }
    }
    (filter, skip)
}

async fn serve(changes: Option<std::sync::Arc<common::Changes>>) {
    let server = TestServer {
        page_size: 2,
        exit_tool: true,
        changes,
    };
    let running = server.serve(rmcp::transport::stdio()).await.unwrap();
    let _ = running.waiting().await;
}

/// Serves `common::served::service` on stdin and stdout, its run endings appended to
/// the file named by `AGENT_MCP_TEST_EVENTS` (the key is found in the environment).
async fn serve_agents() {
    let events = std::env::var(EVENTS).unwrap();
    common::served::service(std::path::Path::new(&events), false)
        .serve_stdio()
        .await
        .unwrap();
}

const EVENTS: &str = "AGENT_MCP_TEST_EVENTS";

/// The official Python SDK's client starts this binary as the served agents and checks
/// them (see `common::served::check`).
async fn python_client_over_stdio(mode: &'static str, protocol: &str) {
    use common::served::{KEY, KEY_VAR, check, events, events_path, python, run_python};
    let Some(python) = python() else { return };
    let path = events_path(&format!("stdio-{mode}"));
    let exe = std::env::current_exe().unwrap();
    let serve = format!("{SERVE}=agent");
    let events_env = format!("{EVENTS}={}", path.display());
    let key = format!("{KEY_VAR}={KEY}");
    let args = [
        mode,
        "--stdio",
        exe.to_str().unwrap(),
        "--env",
        &serve,
        "--env",
        &events_env,
        "--env",
        &key,
    ];
    let report = run_python(&python, "serve_client.py", &args);
    let lines = events(&path, 4);
    let _ = std::fs::remove_file(&path);
    check(&report, &lines, protocol);
}

async fn stdio_python_client_calls_the_served_agents_after_a_handshake() {
    python_client_over_stdio("legacy", "2025-11-25").await;
}

async fn stdio_python_client_calls_the_served_agents_after_discover() {
    python_client_over_stdio("auto", "2026-07-28").await;
}

/// Malformed JSON-RPC, an oversize line, an unknown method, an unknown tool and
/// schema-invalid arguments, written raw: each answered with a JSON-RPC error (a line
/// that is not JSON, or is over the size limit, is dropped: its id cannot be read), and
/// the server answers the next call.
async fn stdio_served_bad_input_is_answered_and_the_server_lives() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let path = common::served::events_path("stdio-raw");
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env(SERVE, "agent")
        .env(EVENTS, &path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |line: String| {
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    send(initialize.to_string()).await;
    let reply: serde_json::Value =
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25", "{reply}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()).await;
    send("{this is not json".to_owned()).await;
    send(r#"{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "bad"}"#.to_owned())
        .await;
    let huge = "x".repeat(agent_mcp::DEFAULT_MAX_REQUEST_BYTES + 1);
    send(
        json!({"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 1, "b": 2, "pad": huge}}})
        .to_string(),
    )
    .await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}).to_string()).await;
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "nope", "arguments": {}}})
        .to_string(),
    )
    .await;
    send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": "one", "b": 2}}})
        .to_string(),
    )
    .await;
    send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 40, "b": 2}}})
        .to_string(),
    )
    .await;
    let mut replies = Vec::new();
    while replies.len() < 5 {
        let line = lines.next_line().await.unwrap().unwrap();
        replies.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
    }
    let by_id = |id: serde_json::Value| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply with id {id}: {replies:?}"))
            .clone()
    };
    // Valid JSON that is no request: -32600 (with no id: none could be read). A line
    // that is not JSON at all, like the oversize one, gets no reply.
    let invalid = replies.iter().find(|r| r["id"].is_null()).unwrap();
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    assert_eq!(by_id(json!(2))["error"]["code"], -32601);
    assert_eq!(
        by_id(json!(3))["error"],
        json!({"code": -32602, "message": "unknown tool: \"nope\""})
    );
    let invalid = by_id(json!(4));
    assert_eq!(invalid["error"]["code"], -32602);
    assert!(
        invalid["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/a: \"one\" is not of type \"integer\""),
        "{invalid}"
    );
    assert_eq!(by_id(json!(5))["result"]["content"][0]["text"], "42");
    assert!(replies.iter().all(|r| r["id"] != 90), "{replies:?}");
    child.kill().await.unwrap();
    let _ = std::fs::remove_file(&path);
}

fn server() -> McpServer {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command.env(SERVE, "stdio");
    McpServer::stdio(command)
}

async fn connect(prefix: &str) -> McpTools {
    server().prefix(prefix).connect().await.unwrap()
}

fn config(model: &ScriptedModel, tools: &McpTools) -> AgentConfig<Answer> {
    AgentConfig::builder("mcp-stdio")
        .llm(model.clone())
        .tools(tools.registry())
        .build()
        .unwrap()
}

async fn stdio_tools_are_listed_across_pages_with_legal_names() {
    let tools = connect("t").await;
    // Seven tools on four pages of two.
    assert_eq!(
        tools.names().collect::<Vec<_>>(),
        [
            "t_add",
            "t_weather_lookup",
            "t_tags_set",
            "t_sleep",
            "t_slow",
            "t_screenshot",
            "t_crash"
        ]
    );
    assert_eq!(
        tools.mcp_name("t_weather_lookup").as_deref(),
        Some("weather.lookup")
    );
    assert_eq!(
        tools.label(),
        std::env::current_exe()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    let registry = tools.registry();
    let add = registry.definitions().next().unwrap();
    assert_eq!(add.description, "Adds two integers.");
    assert_eq!(add.parameters["required"], json!(["a", "b"]));
    tools.close();
}

async fn stdio_run_calls_mcp_tools_and_ends_with_a_validated_value() {
    let tools = connect("t").await;
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("t_add", json!({"a": 2, "b": 3})),
        model.call("t_weather_lookup", json!({"city": "Oslo"})),
    ];
    let model = model
        .tool_calls(calls)
        .submit(json!({"summary": "5, sunny"}));
    let result = run_agent(&config(&model, &tools), "add and look up").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "5, sunny");
    let requests = model.requests();
    // The MCP tools were offered with their MCP schemas.
    let offered: Vec<_> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(offered.contains(&"t_weather_lookup"), "{offered:?}");
    let results = results_of(&requests, 1);
    assert_eq!(results.len(), 2);
    assert_eq!(
        (
            results[0].call_id.as_str(),
            results[0].content.as_str(),
            results[0].is_error
        ),
        ("call_1", r#"{"sum":5}"#, false)
    );
    assert_eq!(
        (
            results[1].call_id.as_str(),
            results[1].content.as_str(),
            results[1].is_error
        ),
        ("call_2", "sunny in Oslo", false)
    );
    assert_eq!(result.usage.tool_calls, 2);
    tools.close();
}

async fn stdio_is_error_and_bad_arguments_come_back_as_tool_errors() {
    let tools = connect("t").await;
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("t_weather_lookup", json!({"city": "Atlantis"})),
        // Breaks the MCP schema (minLength 1): the runner rejects it, the server never
        // sees it.
        model.call("t_weather_lookup", json!({"city": ""})),
    ];
    let model = model
        .tool_calls(calls)
        .submit(json!({"summary": "no such city"}));
    let result = run_agent(&config(&model, &tools), "weather in Atlantis").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "no such city");
    let results = results_of(&model.requests(), 1);
    assert_eq!(results.len(), 2);
    assert!(results[0].is_error);
    assert_eq!(
        results[0].content,
        "t_weather_lookup failed: no such city: Atlantis"
    );
    assert!(results[1].is_error);
    assert!(
        results[1].content.contains("/city"),
        "{}",
        results[1].content
    );
    tools.close();
}

async fn stdio_server_killed_mid_run_gives_tool_errors_and_a_typed_ending() {
    let tools = connect("t").await;
    let model = ScriptedModel::new();
    let crash = vec![
        model.call("t_crash", json!({})),
        model.call("t_weather_lookup", json!({"city": "Oslo"})),
    ];
    let after = vec![model.call("t_add", json!({"a": 1, "b": 1}))];
    let model = model
        .tool_calls(crash)
        .tool_calls(after)
        .submit(json!({"summary": "server gone"}));
    let result = run_agent(&config(&model, &tools), "crash the server").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "server gone");
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // The crashing call is answered with an error (the process exited under it).
    let first = results_of(&requests, 1);
    assert_eq!(
        first.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(),
        ["call_1", "call_2"]
    );
    assert!(first[0].is_error, "{:?}", first[0]);
    assert!(
        first[0].content.contains("is not reachable"),
        "{}",
        first[0].content
    );
    // A call after the death is a tool error naming the cause, not a hang or a crash.
    let second = results_of(&requests, 2);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].call_id, "call_3");
    assert!(second[0].is_error);
    assert!(
        second[0].content.contains("is not reachable"),
        "{}",
        second[0].content
    );
}

async fn stdio_slow_call_times_out_as_a_tool_error() {
    let tools = server()
        .prefix("t")
        .call_timeout(Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("t_sleep", json!({"ms": 30_000}))
        .tool_call("t_add", json!({"a": 20, "b": 22}))
        .submit(json!({"summary": "42"}));
    let result = run_agent(&config(&model, &tools), "sleep").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "42");
    let requests = model.requests();
    let slow = results_of(&requests, 1);
    assert!(slow[0].is_error);
    assert!(
        slow[0].content.contains("did not answer within 100 ms"),
        "{}",
        slow[0].content
    );
    // The server is still usable after a timed-out call.
    let next = results_of(&requests, 2);
    assert_eq!(
        (next[0].content.as_str(), next[0].is_error),
        (r#"{"sum":42}"#, false)
    );
    tools.close();
}

/// C36 over stdio: the notification and the call's result share the server's stdout,
/// in that order, so the LLM call right after the call offers the new list; a call to
/// the removed tool is answered by the runner (the server would answer "old_tool ran").
async fn c36_stdio_a_change_announced_before_a_result_is_offered_in_the_next_llm_call() {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command.env(SERVE, "changing");
    let tools = McpServer::stdio(command)
        .prefix("t")
        .connect()
        .await
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("t_swap", json!({}))
        .tool_call("t_old_tool", json!({}))
        .tool_call("t_new_tool", json!({}))
        .submit(json!({"summary": "swapped"}));
    let result = run_agent(&config(&model, &tools), "swap").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "swapped");
    let requests = model.requests();
    let offered =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|d| d.name.clone()).collect() };
    assert!(offered(0).contains(&"t_old_tool".to_owned()));
    assert!(!offered(0).contains(&"t_new_tool".to_owned()));
    for i in 1..4 {
        assert!(offered(i).contains(&"t_new_tool".to_owned()), "{i}");
        assert!(!offered(i).contains(&"t_old_tool".to_owned()), "{i}");
    }
    let removed = &results_of(&requests, 2)[0];
    assert!(removed.is_error);
    assert!(
        removed.content.starts_with("Unknown tool \"t_old_tool\"."),
        "{}",
        removed.content
    );
    assert_eq!(results_of(&requests, 3)[0].content, "new_tool ran");
    tools.close();
}

async fn stdio_missing_program_is_a_spawn_error() {
    let command = tokio::process::Command::new("/nonexistent/agent-mcp-no-such-server");
    let error = McpServer::stdio(command).connect().await.unwrap_err();
    assert!(
        matches!(&error, McpError::Spawn { server, .. } if server == "agent-mcp-no-such-server"),
        "{error:?}"
    );
}

async fn stdio_program_that_exits_is_an_initialize_error() {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command.env(SERVE, "exit");
    let error = McpServer::stdio(command).connect().await.unwrap_err();
    assert!(matches!(error, McpError::Initialize { .. }), "{error:?}");
}

async fn stdio_silent_program_is_a_connect_timeout() {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command.env(SERVE, "silent");
    let error = McpServer::stdio(command)
        .connect_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            McpError::Timeout {
                step: "initialize",
                after_ms: 200,
                ..
            }
        ),
        "{error:?}"
    );
}
