//! [`McpServer`]: where an MCP server is and how to talk to it, before connecting.

use std::fmt;
use std::time::Duration;

use tokio::process::Command;

/// A string that never shows in `Debug` (bearer tokens, header values).
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How to reach the server.
pub(crate) enum Transport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio(Command),
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL, like `https://example.com/mcp`.
        url: String,
        /// Sent as `Authorization: Bearer <token>`.
        bearer: Option<Secret>,
        /// Extra headers sent with every request.
        headers: Vec<(String, Secret)>,
    },
}

/// An MCP server to connect to, over stdio or streamable HTTP, and how its tools are
/// offered to the model.
///
/// Build one with [`McpServer::stdio`] or [`McpServer::http`], set options, then
/// [`connect`](Self::connect) to get the server's tools as [`McpTools`](crate::McpTools).
///
/// ```no_run
/// # async fn demo() -> Result<(), agent_mcp::McpError> {
/// use agent_mcp::McpServer;
///
/// let files = McpServer::stdio(tokio::process::Command::new("my-mcp-server"))
///     .prefix("fs")
///     .connect()
///     .await?;
/// let search = McpServer::http("https://search.example/mcp")
///     .bearer_token(std::env::var("SEARCH_TOKEN").unwrap_or_default())
///     .connect()
///     .await?;
/// # let _ = (files, search);
/// # Ok(())
/// # }
/// ```
///
/// `Debug` shows the label, never a token or header value.
pub struct McpServer {
    pub(crate) transport: Transport,
    pub(crate) prefix: Option<String>,
    pub(crate) call_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) sampling: Option<crate::client::McpSampling>,
    pub(crate) elicitation: Option<crate::client::ElicitationHandler>,
}

/// The default [`McpServer::call_timeout`]: 30 s.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The default [`McpServer::connect_timeout`]: 30 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

impl McpServer {
    /// A server run as a child process that speaks MCP on its stdin and stdout (the
    /// stdio transport). Its stderr goes to this process's stderr. The process
    /// is started by [`connect`](Self::connect) and killed when the last handle to its
    /// tools is dropped, or by [`McpTools::close`](crate::McpTools::close).
    pub fn stdio(command: Command) -> Self {
        Self::with_transport(Transport::Stdio(command))
    }

    /// A server reached over streamable HTTP at `url` (the MCP endpoint, like
    /// `https://example.com/mcp`). Put secrets in [`bearer_token`](Self::bearer_token) or
    /// [`header`](Self::header), not in the URL: the URL's host and path appear in error
    /// messages.
    pub fn http(url: impl Into<String>) -> Self {
        Self::with_transport(Transport::Http {
            url: url.into(),
            bearer: None,
            headers: Vec::new(),
        })
    }

    fn with_transport(transport: Transport) -> Self {
        Self {
            transport,
            prefix: None,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            sampling: None,
            elicitation: None,
        }
    }

    /// Lets the server ask for LLM completions during its tool calls
    /// (`sampling/createMessage`), answered by `model` and counted in the calling run's
    /// usage and caps (see [`McpSampling`](crate::McpSampling)). Declares the `sampling`
    /// capability at the handshake. Without it (the default) no capability is declared
    /// and every request gets a JSON-RPC error saying sampling is not allowed.
    #[must_use]
    pub fn sampling(mut self, model: crate::McpSampling) -> Self {
        self.sampling = Some(model);
        self
    }

    /// Lets the server ask for input during its tool calls (`elicitation/create`, form
    /// mode, MCP 2025-11-25), answered at once by `handler`: it gets the request's message
    /// and requested schema (a JSON object schema) and returns
    /// [`Elicitation::Accept`](crate::Elicitation::Accept) with the values,
    /// `Decline` or `Cancel`. An accepted value is checked against the requested schema
    /// before it is sent; one that does not match is sent as `decline` (and logged as
    /// a warning). Declares the `elicitation` capability (`form`) at the handshake.
    /// Without a handler (the default) nothing is declared and every request gets a
    /// JSON-RPC error saying elicitation is not allowed; URL-mode requests always do.
    #[must_use]
    pub fn elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(String, serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = crate::Elicitation> + Send + 'static,
    {
        self.elicitation = Some(std::sync::Arc::new(move |message, schema| {
            Box::pin(handler(message, schema)) as crate::client::ElicitationFuture
        }));
        self
    }

    /// Names the server's tools `prefix_<name>` for the model, to keep them apart from
    /// local tools and other servers' tools. Calls still use the server's own names.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// How long one `tools/call` may go without a result or a progress notification
    /// before the model gets a tool error saying so (default [`DEFAULT_CALL_TIMEOUT`]):
    /// an idle timeout, started again by each `notifications/progress` carrying the
    /// call's `progressToken` (C37). The run's deadline and the config's own tool
    /// timeout bound the whole call, progress or not.
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How long starting the server, the MCP handshake and listing the tools may take in
    /// all (default [`DEFAULT_CONNECT_TIMEOUT`]).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sends `Authorization: Bearer <token>` with every HTTP request (streamable HTTP
    /// only; ignored for stdio). The token never appears in `Debug` or in errors.
    #[must_use]
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        if let Transport::Http { bearer, .. } = &mut self.transport {
            *bearer = Some(Secret(token.into()));
        }
        self
    }

    /// Sends this header with every HTTP request (streamable HTTP only; ignored for
    /// stdio). The value never appears in `Debug` or in errors; an illegal name or value
    /// makes [`connect`](Self::connect) fail with
    /// [`McpError::InvalidHeader`](crate::McpError::InvalidHeader).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Transport::Http { headers, .. } = &mut self.transport {
            headers.push((name.into(), Secret(value.into())));
        }
        self
    }

    /// The server's label in messages: the program's file name (stdio), or the URL's
    /// host and path without its query (HTTP).
    pub fn label(&self) -> String {
        match &self.transport {
            Transport::Stdio(command) => {
                let program = command.as_std().get_program();
                std::path::Path::new(program)
                    .file_name()
                    .unwrap_or(program)
                    .to_string_lossy()
                    .into_owned()
            }
            Transport::Http { url, .. } => url_label(url),
        }
    }
}

impl McpServer {
    /// The strings no message may show: the bearer token, header values, and the URL's
    /// query, fragment and user info (empty ones left out).
    pub(crate) fn secrets(&self) -> Vec<String> {
        let Transport::Http {
            url,
            bearer,
            headers,
        } = &self.transport
        else {
            return Vec::new();
        };
        let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let user_info = authority.rsplit_once('@').map(|(info, _)| info);
        let query = rest.split_once(['?', '#']).map(|(_, query)| query);
        bearer
            .iter()
            .chain(headers.iter().map(|(_, value)| value))
            .map(|secret| secret.0.as_str())
            .chain(user_info)
            .chain(query)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// `message` with every one of `secrets` replaced by `<redacted>`.
pub(crate) fn scrub(message: String, secrets: &[String]) -> String {
    secrets.iter().fold(message, |message, secret| {
        if message.contains(secret.as_str()) {
            message.replace(secret.as_str(), "<redacted>")
        } else {
            message
        }
    })
}

/// `https://user:pw@host:8080/mcp?key=x` -> `host:8080/mcp`.
fn url_label(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    rest.to_owned()
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("McpServer");
        match &self.transport {
            Transport::Stdio(_) => s.field("transport", &"stdio"),
            Transport::Http {
                bearer, headers, ..
            } => s
                .field("transport", &"streamable-http")
                .field("bearer_token", bearer)
                .field(
                    "headers",
                    &headers.iter().map(|(n, v)| (n, v)).collect::<Vec<_>>(),
                ),
        };
        s.field("label", &self.label())
            .field("prefix", &self.prefix)
            .field("call_timeout", &self.call_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("sampling", &self.sampling)
            .field("elicitation", &self.elicitation.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn debug_never_shows_tokens_or_header_values() {
        let server = McpServer::http("https://u:pw@mcp.example:8443/mcp?key=s3cr3t-q")
            .bearer_token("s3cr3t-token")
            .header("X-Api-Key", "s3cr3t-header")
            .prefix("search");
        let shown = format!("{server:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(!shown.contains("pw"), "{shown}");
        assert!(shown.contains("X-Api-Key"), "{shown}");
        assert!(shown.contains("mcp.example:8443/mcp"), "{shown}");
        assert_eq!(server.label(), "mcp.example:8443/mcp");
    }

    #[test]
    fn secrets_cover_token_headers_query_and_user_info_and_are_scrubbed() {
        let server = McpServer::http("https://u:pw@h/mcp?key=q1#frag")
            .bearer_token("tok")
            .header("X-Key", "hv");
        let secrets = server.secrets();
        assert_eq!(secrets, ["tok", "hv", "u:pw", "key=q1#frag"]);
        assert_eq!(
            scrub(
                "GET https://u:pw@h/mcp?key=q1#frag with tok".to_owned(),
                &secrets
            ),
            "GET https://<redacted>@h/mcp?<redacted> with <redacted>"
        );
        assert!(McpServer::http("http://h/mcp").secrets().is_empty());
    }

    #[test]
    fn stdio_label_is_the_program_file_name() {
        let mut command = Command::new("/usr/local/bin/files-server");
        command.arg("--token=abc");
        let server = McpServer::stdio(command);
        assert_eq!(server.label(), "files-server");
        assert!(!format!("{server:?}").contains("abc"));
    }
}
