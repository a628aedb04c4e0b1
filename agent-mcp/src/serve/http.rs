//! Streamable HTTP: rmcp's `StreamableHttpService` mounted at `/mcp` in an axum router.

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{Handler, McpService};
use crate::error::McpError;

/// The `Host` values streamable HTTP accepts by default: loopback only (`localhost`,
/// `127.0.0.1`, `::1`, any port), against DNS rebinding (rmcp's default).
pub const DEFAULT_ALLOWED_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

pub(super) fn router(
    service: McpService,
    shutdown: CancellationToken,
) -> Result<axum::Router, McpError> {
    let (handler, limits) = service.into_handler()?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(limits.allowed_hosts)
        .with_max_request_body_bytes(limits.max_request_bytes)
        .with_cancellation_token(shutdown);
    let service: StreamableHttpService<Handler, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Default::default(), config);
    Ok(axum::Router::new().nest_service("/mcp", service))
}
