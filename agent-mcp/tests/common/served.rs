//! The agents and tools the serving tests offer to the official MCP Python SDK's client,
//! and the helpers that run that client.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agent_core::observe::RunEvent;
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, ToolError, tool, tools};
use agent_mcp::McpService;
use serde_json::{Value, json};

use super::Answer;

/// The environment variable holding a fake provider key while the tests serve: no error
/// text may show its value.
pub(crate) const KEY_VAR: &str = "SERVED_TEST_PROVIDER_API_KEY";
/// Its value.
pub(crate) const KEY: &str = "sk-served-test-0123456789abcdef";

/// Sleeps 50 ms and says so.
#[tool]
async fn nap() -> String {
    tokio::time::sleep(Duration::from_millis(50)).await;
    "rested".to_owned()
}

/// Never answers.
#[tool]
async fn wait_forever() -> String {
    std::future::pending::<()>().await;
    String::new()
}

/// Fails fatally, quoting the provider key.
#[tool]
async fn leak() -> Result<String, ToolError> {
    Err(ToolError::fatal(format!(
        "the upstream answered 401 for key {KEY}"
    )))
}

/// Adds two integers.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Appends one line per ended run (`agent ending category`) to `events`.
fn recorder(
    events: PathBuf,
    agent: &'static str,
) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
    move |event| {
        if let RunEvent::RunEnded {
            ending, category, ..
        } = event
        {
            let line = format!("{agent} {ending} {}\n", category.unwrap_or("-"));
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&events)
                .unwrap();
            file.write_all(line.as_bytes()).unwrap();
        }
    }
}

/// The served tools: `triage` (answers an `Answer` after calling `nap`), `exhausted`
/// (every answer rejected), `stuck` (its tool never answers), `leaky` (its
/// tool fails fatally quoting the key) and the plain tool `add`. Every run's ending is
/// appended to `events`. With `secret`, the key is named as a secret (the stdio server
/// finds it in its environment instead).
pub(crate) fn service(events: &Path, secret: bool) -> McpService {
    let builder = |name: &'static str, registry| {
        AgentConfig::<Answer>::builder(name)
            .model("test")
            .llm(TestModel::new().calling_tools_first())
            .tools(registry)
            .observer(recorder(events.to_path_buf(), name))
    };
    let agent = |name: &'static str, registry| builder(name, registry).build().unwrap();
    // Every answer is rejected, so the run ends `exhausted` after its parse retries.
    let exhausted = builder("exhausted", tools![nap])
        .output_validator(|_| Err("/summary: never good enough".to_owned()))
        .build()
        .unwrap();
    let service = McpService::new("agent-mcp-tests")
        .instructions("Test agents.")
        .agent(
            "triage",
            "Triages one ticket.",
            agent("triage", tools![nap]),
        )
        .agent("exhausted", "Never answers well enough.", exhausted)
        .agent(
            "stuck",
            "Never answers.",
            agent("stuck", tools![wait_forever]),
        )
        .agent(
            "leaky",
            "Fails quoting a key.",
            agent("leaky", tools![leak]),
        )
        .tools(tools![add]);
    if secret { service.secret(KEY) } else { service }
}

/// The Python interpreter of the venv with the official SDKs, or `None` (with a note)
/// when it cannot be made (no network to PyPI on first use).
pub(crate) fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(root.join("scripts/python-peers.sh"))
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "skipped: scripts/python-peers.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Runs `tests/python/<script>` with `args` and the JSON report it prints.
pub(crate) fn run_python(python: &Path, script: &str, args: &[&str]) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let out = Command::new(python).arg(path).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("{script} printed no JSON report ({e}):\n{stdout}\nstderr: {stderr}")
    })
}

/// The lines of the events file, once it has `want` of them (runs end on the server's
/// own tasks, a moment after the client's last answer; bounded at 30 s).
pub(crate) fn events(path: &Path, want: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for _ in 0..300 {
        lines = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if lines.len() >= want {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    lines.sort();
    lines
}

/// A fresh path for an events file.
pub(crate) fn events_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "agent-mcp-{name}-{}-{:x}.events",
        std::process::id(),
        fastrand::u64(..)
    ))
}

/// What every transport and connect mode must show: the tools with their schemas, the
/// structured answer, progress, each failure as `isError` naming its category, protocol
/// errors for bad calls, the cancelled run, and no key anywhere.
pub(crate) fn check(report: &Value, events: &[String], protocol: &str) {
    let text = report.to_string();
    assert_eq!(report["protocol_version"], protocol);
    assert!(!text.contains(KEY), "the key leaked: {text}");
    assert_eq!(report["server_name"], "agent-mcp-tests", "{text}");

    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["triage", "exhausted", "stuck", "leaky", "add"]);
    let triage = &tools[0];
    assert_eq!(triage["inputSchema"]["required"], json!(["input"]));
    assert_eq!(
        triage["inputSchema"]["properties"]["input"]["type"],
        "string"
    );
    assert_eq!(
        triage["outputSchema"],
        json!({
            "type": "object",
            "properties": {"summary": {"type": "string", "description": "What the agent found."}},
            "required": ["summary"]
        })
    );
    assert_eq!(tools[4]["inputSchema"]["required"], json!(["a", "b"]));
    assert!(tools[4].get("outputSchema").is_none());

    let answer = &report["answer"];
    assert_eq!(answer["isError"], false);
    assert_eq!(answer["structuredContent"], json!({"summary": "example"}));
    assert_eq!(answer["content"][0]["text"], r#"{"summary":"example"}"#);
    assert_eq!(answer["_meta"]["agent-core/ending"], "answered");
    assert_eq!(
        answer["_meta"]["agent-core/trace_id"]
            .as_str()
            .unwrap()
            .len(),
        32
    );
    let progress: Vec<(f64, &str)> = report["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["progress"].as_f64().unwrap(),
                p["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [
            (1.0, "LLM call 1"),
            (2.0, "tool nap answered"),
            (3.0, "LLM call 2")
        ]
    );

    let exhausted = &report["exhausted"];
    assert_eq!(exhausted["isError"], true);
    assert_eq!(
        exhausted["_meta"]["agent-core/category"],
        "schema_validation_failed"
    );
    assert_eq!(exhausted["_meta"]["agent-core/ending"], "exhausted");
    assert!(exhausted.get("structuredContent").is_none());
    let message = exhausted["content"][0]["text"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the exhausted agent did not answer (schema_validation_failed, ending exhausted):"
        ),
        "{message}"
    );
    let leaky = &report["leaky"];
    assert_eq!(leaky["isError"], true);
    assert_eq!(leaky["_meta"]["agent-core/category"], "tool_fatal");
    let message = leaky["content"][0]["text"].as_str().unwrap();
    assert!(message.ends_with("for key <redacted>"), "{message}");

    assert_eq!(report["add"]["content"][0]["text"], "5");
    assert_eq!(report["add"]["isError"], false);

    let errors = &report["errors"];
    assert_eq!(
        errors["unknown_tool"],
        json!({"code": -32602, "message": "unknown tool: \"no_such_tool\""})
    );
    assert_eq!(
        errors["wrong_type"],
        json!({"code": -32602, "message": "the arguments of triage do not match its \
            inputSchema: /input: 7 is not of type \"string\""})
    );
    assert_eq!(
        errors["missing"],
        json!({"code": -32602, "message": "the arguments of triage do not match its \
            inputSchema: /: \"input\" is a required property"})
    );
    assert_eq!(errors["not_integer"]["code"], -32602);

    // The abandoned call never returned; its run ended cancelled; the server went on.
    assert_eq!(report["cancelled"]["returned"], false);
    assert_eq!(report["after"]["content"][0]["text"], "42");
    assert_eq!(
        events,
        [
            "exhausted exhausted schema_validation_failed",
            "leaky failed tool_fatal",
            "stuck exhausted cancelled",
            "triage answered -",
        ]
    );
}
