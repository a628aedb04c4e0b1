//! The triage agent served to MCP clients (an IDE, a desktop assistant, another agent) as
//! one tool, `triage`: input `{"input": "<the ticket>"}`, output the validated `Triage`
//! as structured content (`outputSchema` is its JSON Schema). See `docs/interop.md`.
//!
//! ```text
//! cargo run --example serve_mcp                              # stdio (the client starts it)
//! cargo run --example serve_mcp -- --http 127.0.0.1:8000     # streamable HTTP at /mcp
//! cargo run --example serve_mcp -- --model claude-sonnet-4-5 # a real model
//! ```
//!
//! Without a model named or a provider key in the environment it serves the built-in
//! test model (offline; schema-valid placeholder answers). Logs go to stderr: over
//! stdio, stdout is the protocol's.

use std::net::SocketAddr;
use std::process::ExitCode;

use agent_examples::model::ModelChoice;
use agent_examples::triage::{data_dir, triage_config};
use agent_mcp::McpService;

const USAGE: &str = "usage: serve_mcp [--http ADDR] [--model NAME]";

#[tokio::main]
async fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Vec<String>) -> Result<(), String> {
    let (mut http, mut model) = (None, None);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => http = Some(args.next().ok_or("--http takes an address")?),
            "--model" => model = Some(args.next().ok_or("--model takes a name")?),
            "--help" | "-h" => {
                eprintln!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let choice = ModelChoice::resolve(model);
    eprintln!("{}", choice.banner());
    let config = triage_config(&data_dir(), &choice)?;
    let service = McpService::new("agent-core-triage").agent(
        "triage",
        "Triages one support ticket of the shop: the queue, a severity from 1 to 4, the \
         order it is about (looked up), a summary for the agent who picks it up.",
        config,
    );
    match http {
        Some(addr) => {
            let addr: SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
            eprintln!("serving MCP (streamable HTTP) at http://{addr}/mcp");
            service.serve_http(addr).await
        }
        None => service.serve_stdio().await,
    }
    .map_err(|e| e.to_string())
}
