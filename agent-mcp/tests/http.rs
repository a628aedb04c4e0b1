//! MCP tools over streamable HTTP, against the tests' MCP server served in-process on
//! 127.0.0.1:0 (rmcp's `StreamableHttpService` in axum), and the schema path of MCP
//! tools through the provider transforms.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use agent_core::providers::{AnthropicClient, GeminiClient, OpenAiClient, ProviderOptions};
use agent_core::schema::{
    anthropic_violations, for_anthropic, for_gemini, for_openai, for_openai_strict,
    gemini_violations, openai_strict_violations, openai_violations,
};
use agent_core::testing::ScriptedModel;
use agent_core::{
    AgentConfig, State,
    llm::{LlmClient, LlmRequest, Message},
    run_agent, tool,
    tool::ToolDefinition,
    tools,
};
use agent_mcp::{McpError, McpServer, McpTools};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use common::{Answer, TestServer, results_of};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "s3cr3t-mcp-token";

/// A running test server; dropping it does not stop it, [`Running::kill`] does.
pub(crate) struct Running {
    pub(crate) url: String,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    /// Stops accepting connections and ends every session.
    pub(crate) fn kill(&self) {
        self.cancel.cancel();
        self.task.abort();
    }
}

async fn require_token(request: Request, next: Next) -> Result<Response, StatusCode> {
    let expected = format!("Bearer {TOKEN}");
    let auth = request.headers().get("authorization");
    if auth.and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return Err(StatusCode::UNAUTHORIZED);
    }
    Ok(next.run(request).await)
}

pub(crate) async fn start() -> Running {
    let cancel = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(None)
        .with_cancellation_token(cancel.child_token());
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || {
                Ok(TestServer {
                    page_size: 3,
                    exit_tool: false,
                    changes: None,
                })
            },
            Default::default(),
            config,
        );
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(require_token));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let shutdown = cancel.clone();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await;
    });
    Running { url, cancel, task }
}

pub(crate) async fn connect(server: &Running) -> McpTools {
    McpServer::http(&server.url)
        .bearer_token(TOKEN)
        .prefix("web")
        .connect()
        .await
        .unwrap()
}

fn config(model: &ScriptedModel, tools: &McpTools) -> AgentConfig<Answer> {
    AgentConfig::builder("mcp-http")
        .llm(model.clone())
        .tools(tools.registry())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_run_with_a_bearer_token_calls_mcp_tools_and_ends_with_a_validated_value() {
    let server = start().await;
    let tools = connect(&server).await;
    assert_eq!(
        tools.names().collect::<Vec<_>>(),
        [
            "web_add",
            "web_weather_lookup",
            "web_tags_set",
            "web_sleep",
            "web_slow",
            "web_screenshot"
        ]
    );
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("web_add", json!({"a": 40, "b": 2})),
        model.call("web_tags_set", json!({"tags": {"a": "1", "b": "2"}})),
        model.call("web_weather_lookup", json!({"city": "Atlantis"})),
    ];
    let model = model.tool_calls(calls).submit(json!({"summary": "42"}));
    let result = run_agent(&config(&model, &tools), "add").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "42");
    let results = results_of(&model.requests(), 1);
    let shown: Vec<_> = results
        .iter()
        .map(|r| (r.call_id.as_str(), r.content.as_str(), r.is_error))
        .collect();
    assert_eq!(
        shown,
        [
            ("call_1", r#"{"sum":42}"#, false),
            ("call_2", "2 tags set", false),
            (
                "call_3",
                "web_weather_lookup failed: no such city: Atlantis",
                true
            ),
        ]
    );
    tools.close();
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_without_the_token_fails_to_connect_and_no_secret_is_shown() {
    let server = start().await;
    let error = McpServer::http(&server.url)
        .header("X-Api-Key", "s3cr3t-header-value")
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::Initialize { .. }), "{error:?}");
    let with_token = McpServer::http(format!("{}?key=s3cr3t-query", server.url))
        .bearer_token(TOKEN)
        .header("X-Api-Key", "s3cr3t-header-value");
    for shown in [
        format!("{error:?}"),
        error.to_string(),
        format!("{with_token:?}"),
    ] {
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
    // Nothing listens on port 1: the SDK's error names the URL, whose query is a secret.
    let refused = McpServer::http("http://127.0.0.1:1/mcp?key=s3cr3t-query")
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(refused, McpError::Initialize { .. }),
        "{refused:?}"
    );
    assert!(
        !format!("{refused:?} {refused}").contains("s3cr3t"),
        "{refused}"
    );
    let bad = McpServer::http(&server.url)
        .header("X Bad Name", "s3cr3t-value")
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(&bad, McpError::InvalidHeader { name, .. } if name == "X Bad Name"),
        "{bad:?}"
    );
    assert!(!format!("{bad:?} {bad}").contains("s3cr3t"));
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_gone_before_the_run_gives_tool_errors_and_a_typed_ending() {
    let server = start().await;
    let tools = connect(&server).await;
    let model = ScriptedModel::new();
    let calls = vec![
        model.call("web_add", json!({"a": 1, "b": 2})),
        model.call("web_weather_lookup", json!({"city": "Oslo"})),
    ];
    let model = model
        .tool_calls(calls)
        .submit(json!({"summary": "server gone"}));
    let config = config(&model, &tools);
    server.kill();
    let result = run_agent(&config, "call a dead server").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "server gone");
    let results = results_of(&model.requests(), 1);
    assert_eq!(
        results
            .iter()
            .map(|r| r.call_id.as_str())
            .collect::<Vec<_>>(),
        ["call_1", "call_2"]
    );
    for r in &results {
        assert!(r.is_error, "{r:?}");
        assert!(r.content.contains("is not reachable"), "{}", r.content);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_schemas_take_the_provider_transforms_and_degrade_from_strict_as_ours_do() {
    let server = start().await;
    let tools = connect(&server).await;
    let registry = tools.registry();
    let defs: Vec<_> = registry.definitions().cloned().collect();
    // The canonical parameters: root type object ensured, `$schema` and `title` gone.
    let tags = defs.iter().find(|d| d.name == "web_tags_set").unwrap();
    assert_eq!(tags.parameters["type"], "object");
    assert!(tags.parameters.get("title").is_none());
    let weather = defs
        .iter()
        .find(|d| d.name == "web_weather_lookup")
        .unwrap();
    assert!(weather.parameters.get("$schema").is_none());
    for def in &defs {
        let p = &def.parameters;
        assert_eq!(
            anthropic_violations(&for_anthropic(p)),
            Vec::<String>::new(),
            "{}",
            def.name
        );
        assert_eq!(
            openai_violations(&for_openai(p)),
            Vec::<String>::new(),
            "{}",
            def.name
        );
        assert_eq!(
            gemini_violations(&for_gemini(p)),
            Vec::<String>::new(),
            "{}",
            def.name
        );
    }
    // `add` is strict-expressible; `tags.set` (an open map) is not, so an adapter that
    // checks falls back to non-strict for it, as for a local tool with a map field.
    let add = defs.iter().find(|d| d.name == "web_add").unwrap();
    assert!(openai_strict_violations(&for_openai_strict(&add.parameters)).is_empty());
    assert!(!openai_strict_violations(&for_openai_strict(&tags.parameters)).is_empty());
    // Gemini gets the nullable string as `nullable`, with no type array.
    let gemini = for_gemini(&tags.parameters);
    assert_eq!(gemini["properties"]["note"]["nullable"], true);
    assert_eq!(gemini["properties"]["note"]["type"], "string");
    tools.close();
    server.kill();
}

/// The request body `client` sends for a request offering `defs` (the mock answers 400;
/// only the request matters).
async fn wire_body(
    client: impl LlmClient,
    server: &wiremock::MockServer,
    defs: &[ToolDefinition],
) -> Value {
    let request = LlmRequest::new("m")
        .with_message(Message::user("hi"))
        .with_tools(defs.to_vec());
    let _ = client.complete(&request).await;
    let received = server.received_requests().await.unwrap();
    serde_json::from_slice(&received.last().unwrap().body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_schemas_reach_each_provider_wire_through_its_transform() {
    let server = start().await;
    let tools = connect(&server).await;
    let defs: Vec<_> = tools.registry().definitions().cloned().collect();
    let tags = defs.iter().find(|d| d.name == "web_tags_set").unwrap();
    let mock = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(400))
        .mount(&mock)
        .await;
    let options = ProviderOptions::default()
        .with_api_key("test-key")
        .with_base_url(mock.uri());

    let body = wire_body(AnthropicClient::new(&options).unwrap(), &mock, &defs).await;
    let sent = body["tools"].as_array().unwrap();
    assert_eq!(sent.len(), defs.len());
    let sent = sent.iter().find(|t| t["name"] == "web_tags_set").unwrap();
    assert_eq!(sent["input_schema"], for_anthropic(&tags.parameters));

    let openai = options.clone().with_base_url(format!("{}/v1", mock.uri()));
    let body = wire_body(OpenAiClient::openai(&openai).unwrap(), &mock, &defs).await;
    let sent = body["tools"].as_array().unwrap();
    let sent = sent
        .iter()
        .find(|t| t["function"]["name"] == "web_tags_set")
        .unwrap();
    assert_eq!(sent["function"]["parameters"], for_openai(&tags.parameters));

    let body = wire_body(GeminiClient::new(&options).unwrap(), &mock, &defs).await;
    let declarations = body["tools"][0]["functionDeclarations"].as_array().unwrap();
    let sent = declarations
        .iter()
        .find(|d| d["name"] == "web_tags_set")
        .unwrap();
    assert_eq!(sent["parameters"], for_gemini(&tags.parameters));
    assert_eq!(sent["parameters"]["properties"]["note"]["nullable"], true);
    tools.close();
    server.kill();
}

/// Stops the test server from inside a run.
struct Killer {
    cancel: CancellationToken,
    task: tokio::task::AbortHandle,
}

/// Stops the MCP server.
#[tool]
async fn kill_server(killer: State<Killer>) -> String {
    killer.cancel.cancel();
    killer.task.abort();
    "killed".to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_killed_between_turns_beside_a_local_tool_gives_tool_errors() {
    let server = start().await;
    let mcp = connect(&server).await;
    let mut tools = tools![kill_server];
    tools.extend(mcp.registry());
    let model = ScriptedModel::new()
        .tool_call("web_add", json!({"a": 1, "b": 2}))
        .tool_call("kill_server", json!({}))
        .tool_call("web_add", json!({"a": 3, "b": 4}))
        .submit(json!({"summary": "3, then gone"}));
    let config: AgentConfig<Answer> = AgentConfig::builder("mcp-http-kill")
        .llm(model.clone())
        .tools(tools)
        .state(Killer {
            cancel: server.cancel.clone(),
            task: server.task.abort_handle(),
        })
        .build()
        .unwrap();
    let result = run_agent(&config, "add, kill, add").await;
    assert_eq!(result.outcome.as_ref().unwrap().summary, "3, then gone");
    let requests = model.requests();
    let before = results_of(&requests, 1);
    assert_eq!(
        (before[0].content.as_str(), before[0].is_error),
        (r#"{"sum":3}"#, false)
    );
    assert_eq!(results_of(&requests, 2)[0].content, "killed");
    let after = results_of(&requests, 3);
    assert_eq!(after.len(), 1);
    assert!(after[0].is_error);
    assert!(
        after[0].content.contains("is not reachable"),
        "{}",
        after[0].content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destructive_mcp_tool_is_listed_as_irreversible_in_the_handover() {
    let server = start().await;
    let tools = connect(&server).await;
    // The script ends after two tool turns: the run fails (the scripted model has no
    // more answers) and hands over.
    let model = ScriptedModel::new()
        .tool_call("web_tags_set", json!({"tags": {"vip": "yes"}}))
        .tool_call("web_add", json!({"a": 1, "b": 1}));
    let result = run_agent(&config(&model, &tools), "tag the customer").await;
    assert!(result.outcome.is_err());
    let handover = result.handover.as_ref().unwrap();
    let irreversible: Vec<_> = handover
        .irreversible_actions()
        .map(|c| c.tool.as_str())
        .collect();
    assert_eq!(irreversible, ["web_tags_set"]);
    assert_eq!(handover.calls.len(), 2);
    tools.close();
    server.kill();
}
