//! The dashboard's settings: [`Config`] from the command line, and its start-up checks.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The environment variable that holds the write token when `--token` is not given.
pub const TOKEN_ENV: &str = "AGENT_DASHBOARD_TOKEN";

const HELP: &str = "\
agent-dashboard: a web dashboard over stored runs

USAGE: agent-dashboard --store PATH_OR_URL [OPTIONS]

  --store PATH_OR_URL     an SQLite file (runs.db) or a postgres:// URL (required)
  --schema NAME           PostgreSQL: the schema of the store's tables
  --listen ADDR           where to listen (default 127.0.0.1:8080); an address other
                          than loopback needs a token
  --token TOKEN           the token that unlocks the pages and writes (feedback,
                          approvals); default: $AGENT_DASHBOARD_TOKEN. Without one the
                          dashboard is read-only and only listens on loopback
  --read-only             no writes, even with a token
  --trace-url TEMPLATE    link trace ids to an OpenTelemetry backend, {trace_id} replaced
                          (for example 'https://otel.example/trace/{trace_id}')
  --sweeps DIR            a directory of sweep comparisons (Comparison::write_json files)
  --escalated-max [AGENT=]RATE
                          the escalated rate's threshold (0..1, default 0.20), for one
                          agent or, without AGENT=, for every agent; repeatable
  --stuck-max [AGENT=]RATE
                          the stuck rate's threshold (0..1, default 0.05); as above
  --help                  this text
";

/// Why the dashboard cannot start: a bad flag, or an unsafe setting (a public address
/// without a token). The message says what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ConfigError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The escalated-rate and stuck-rate thresholds (fractions of runs, `0.0..=1.0`): a
/// default for every agent and overrides per agent.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Thresholds {
    /// The escalated rate above which the overview says so (default 0.20).
    pub escalated: f64,
    /// The stuck rate above which the overview says so (default 0.05).
    pub stuck: f64,
    /// Per agent: `(escalated, stuck)` overrides.
    pub per_agent: BTreeMap<String, (Option<f64>, Option<f64>)>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            escalated: 0.20,
            stuck: 0.05,
            per_agent: BTreeMap::new(),
        }
    }
}

impl Thresholds {
    /// The escalated-rate threshold of `agent` (a fraction of its runs).
    pub fn escalated_for(&self, agent: &str) -> f64 {
        self.per_agent
            .get(agent)
            .and_then(|(e, _)| *e)
            .unwrap_or(self.escalated)
    }

    /// The stuck-rate threshold of `agent` (a fraction of its runs).
    pub fn stuck_for(&self, agent: &str) -> f64 {
        self.per_agent
            .get(agent)
            .and_then(|(_, s)| *s)
            .unwrap_or(self.stuck)
    }

    fn set(&mut self, value: &str, stuck: bool) -> Result<(), ConfigError> {
        let (agent, rate) = match value.rsplit_once('=') {
            Some((agent, rate)) => (Some(agent), rate),
            None => (None, value),
        };
        let rate: f64 = rate
            .trim()
            .parse()
            .ok()
            .filter(|r: &f64| (0.0..=1.0).contains(r))
            .ok_or_else(|| {
                ConfigError::new(format!("a threshold is a rate from 0 to 1, not {rate:?}"))
            })?;
        match agent {
            None if stuck => self.stuck = rate,
            None => self.escalated = rate,
            Some(agent) => {
                let entry = self.per_agent.entry(agent.to_owned()).or_default();
                if stuck {
                    entry.1 = Some(rate);
                } else {
                    entry.0 = Some(rate);
                }
            }
        }
        Ok(())
    }
}

/// How the dashboard runs (the command line's flags; see `--help`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The store: an SQLite path or a `postgres://` URL (never shown in a page).
    pub store: String,
    /// PostgreSQL: the schema of the store's tables.
    pub schema: Option<String>,
    /// Where to listen (default `127.0.0.1:8080`; port 0 picks a free port).
    pub listen: SocketAddr,
    /// The token that unlocks pages and writes; `None`: read-only, loopback only.
    pub token: Option<String>,
    /// No writes even with a token.
    pub read_only: bool,
    /// A link template for trace ids, `{trace_id}` replaced.
    pub trace_url: Option<String>,
    /// The directory of stored sweep comparisons (JSON).
    pub sweeps: Option<PathBuf>,
    /// The rate thresholds.
    pub thresholds: Thresholds,
}

impl Config {
    /// The defaults for `store`: listen on `127.0.0.1:8080`, no token (read-only), no
    /// trace links, no sweeps, default thresholds.
    pub fn new(store: impl Into<String>) -> Self {
        Self {
            store: store.into(),
            schema: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            read_only: false,
            trace_url: None,
            sweeps: None,
            thresholds: Thresholds::default(),
        }
    }

    /// Whether feedback and approval forms write (a token is set and not `--read-only`).
    pub fn writes(&self) -> bool {
        self.token.is_some() && !self.read_only
    }

    /// The command line (and `AGENT_DASHBOARD_TOKEN`); `Ok(None)` after `--help`.
    ///
    /// # Errors
    /// A [`ConfigError`] for an unknown or malformed flag, a missing `--store`, or a
    /// setting [`check`](Self::check) refuses.
    pub fn from_env_args() -> Result<Option<Self>, ConfigError> {
        let env_token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
        let config = Self::parse(std::env::args_os().skip(1), env_token)?;
        if let Some(config) = &config {
            config.check()?;
        }
        Ok(config)
    }

    /// Parses flags (without the program name); `env_token` is the token from the
    /// environment. `Ok(None)` after `--help` (printed).
    ///
    /// # Errors
    /// A [`ConfigError`] for an unknown or malformed flag or a missing `--store`.
    pub fn parse(
        args: impl IntoIterator<Item = std::ffi::OsString>,
        env_token: Option<String>,
    ) -> Result<Option<Self>, ConfigError> {
        use lexopt::prelude::*;
        let err = |e: lexopt::Error| ConfigError::new(e.to_string());
        let mut parser = lexopt::Parser::from_args(args);
        let mut config = Config::new(String::new());
        config.token = env_token;
        let mut store = None;
        fn value_of(parser: &mut lexopt::Parser) -> Result<String, ConfigError> {
            parser
                .value()
                .map_err(|e| ConfigError::new(e.to_string()))?
                .into_string()
                .map_err(|_| ConfigError::new("a flag's value is not UTF-8"))
        }
        while let Some(arg) = parser.next().map_err(err)? {
            match arg {
                Long("store") => store = Some(value_of(&mut parser)?),
                Long("schema") => config.schema = Some(value_of(&mut parser)?),
                Long("listen") => {
                    let text = value_of(&mut parser)?;
                    config.listen = text.parse().map_err(|_| {
                        ConfigError::new(format!(
                            "--listen {text:?}: use an address and port such as 127.0.0.1:8080"
                        ))
                    })?;
                }
                Long("token") => {
                    config.token = Some(value_of(&mut parser)?).filter(|t| !t.is_empty())
                }
                Long("read-only") => config.read_only = true,
                Long("trace-url") => config.trace_url = Some(value_of(&mut parser)?),
                Long("sweeps") => config.sweeps = Some(PathBuf::from(value_of(&mut parser)?)),
                Long("escalated-max") => config.thresholds.set(&value_of(&mut parser)?, false)?,
                Long("stuck-max") => config.thresholds.set(&value_of(&mut parser)?, true)?,
                Long("help") | Short('h') => {
                    print!("{HELP}");
                    return Ok(None);
                }
                other => return Err(err(other.unexpected())),
            }
        }
        config.store = store.ok_or_else(|| {
            ConfigError::new(
                "--store PATH_OR_URL is required (an SQLite file or a postgres:// URL)",
            )
        })?;
        Ok(Some(config))
    }

    /// The start-up checks: an address other than loopback needs a token, a trace link
    /// template needs `{trace_id}`.
    ///
    /// # Errors
    /// A [`ConfigError`] saying what to change.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            return Err(ConfigError::new(format!(
                "refusing to listen on {} without a token: anyone who reaches it would read \
                 every transcript. Set --token TOKEN or {TOKEN_ENV}, or listen on 127.0.0.1",
                self.listen
            )));
        }
        if let Some(url) = &self.trace_url
            && !url.contains("{trace_id}")
        {
            return Err(ConfigError::new(
                "--trace-url needs {trace_id} where the trace id goes",
            ));
        }
        Ok(())
    }
}
