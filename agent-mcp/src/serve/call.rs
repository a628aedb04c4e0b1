//! What the served tools share: one entry per tool, the call's context, the service's
//! shared state (split from `mod.rs` so that the tool kinds and the handler import it
//! without a module cycle).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agent_core::schema::SchemaValidator;
use agent_core::tool::StateMap;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ProgressToken};
use rmcp::service::Peer;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The `_meta` key of a failed agent call's error category (`budget_exhausted`, ...).
pub const META_CATEGORY: &str = "agent-core/category";
/// The `_meta` key of a served run's ending (`answered`, `exhausted`, `paused`, ...).
pub const META_ENDING: &str = "agent-core/ending";
/// The `_meta` key of a served run's trace id (32 lowercase hex digits).
pub const META_TRACE_ID: &str = "agent-core/trace_id";

/// One served tool: what `tools/list` shows, its argument validator, and its call.
pub(crate) struct Entry {
    pub(super) tool: rmcp::model::Tool,
    pub(super) validator: SchemaValidator,
    pub(super) served: Arc<dyn Served>,
}

/// The future of one served call: always a result (a failure is `isError: true`).
pub(crate) type CallFuture<'a> = Pin<Box<dyn Future<Output = CallToolResult> + Send + 'a>>;

/// A served tool's call, after the arguments validated.
pub(crate) trait Served: Send + Sync + 'static {
    fn call<'a>(&'a self, arguments: Value, call: Call, shared: &'a Shared) -> CallFuture<'a>;
}

/// What a served call knows of its request.
pub(crate) struct Call {
    /// The JSON-RPC request id, as text.
    pub(crate) request_id: String,
    /// Cancelled when the client sends `notifications/cancelled` for the request.
    pub(crate) cancel: CancellationToken,
    /// Where progress goes, when the client asked for it.
    pub(crate) progress: Option<(Peer<RoleServer>, ProgressToken)>,
}

/// What every call of one service shares.
pub(crate) struct Shared {
    pub(crate) state: Arc<StateMap>,
    pub(crate) secrets: Vec<String>,
}

impl Shared {
    /// `message` with every secret replaced by `<redacted>`.
    pub(crate) fn scrub(&self, message: String) -> String {
        crate::server::scrub(message, &self.secrets)
    }
}

/// A JSON object schema as rmcp's `Arc<JsonObject>`; `None` for another value.
pub(crate) fn object(schema: Value) -> Option<Arc<serde_json::Map<String, Value>>> {
    match schema {
        Value::Object(map) => Some(Arc::new(map)),
        _ => None,
    }
}
