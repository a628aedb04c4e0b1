//! The triage agent served over A2A 1.0 (JSON-RPC over HTTP, agent-interop): the agent
//! card at `/.well-known/agent-card.json`, `SendMessage`, `SendStreamingMessage`,
//! `GetTask`, `CancelTask` at `/`. On the built-in test model without a key, so it runs
//! offline; `AGENT_MODEL` or a provider key picks a real model (see the `triage`
//! example).
//!
//! ```sh
//! cargo run --example serve_a2a                 # 127.0.0.1:8700
//! cargo run --example serve_a2a -- 0.0.0.0:9000 tasks.db
//! curl -s localhost:8700/.well-known/agent-card.json
//! curl -s localhost:8700/ -H 'content-type: application/json' -d '{"jsonrpc": "2.0",
//!   "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m1",
//!   "role": "ROLE_USER", "parts": [{"text": "My parcel NW-10231 never came."}]}}}'
//! ```
//!
//! With a second argument, tasks and checkpoints live in that SQLite file (or
//! PostgreSQL URL): a task survives a restart.

use agent_examples::model::ModelChoice;
use agent_examples::triage::{base_config, data_dir};
use agent_interop::a2a::A2aServer;

/// The A2A routes of the triage agent; with `store` (a SQLite path or a PostgreSQL URL)
/// its tasks and checkpoints live there.
pub async fn app(store: Option<String>) -> Result<axum::Router, Box<dyn std::error::Error>> {
    let choice = ModelChoice::resolve(None);
    eprintln!("{}", choice.banner());
    let builder = choice.apply(base_config(&data_dir())?);
    let server = match store {
        Some(target) => {
            let store = agent_store::Store::open(&target).await?;
            A2aServer::new(builder.checkpoints(store.clone()).build()?).tasks(store)
        }
        None => A2aServer::new(builder.build()?),
    };
    Ok(server.router())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8700".to_owned());
    let app = app(args.next()).await?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("serving the triage agent over A2A at http://{addr}/");
    axum::serve(listener, app).await?;
    Ok(())
}
