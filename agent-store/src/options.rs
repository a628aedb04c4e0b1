//! How a store opens: [`StoreOptions`].

use std::time::Duration;

/// How a [`Store`](crate::Store) opens.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StoreOptions {
    /// PostgreSQL: the schema for every table (created if missing); default: the
    /// server's search path (usually `public`). 1 to 63 letters, digits, underscores.
    pub schema: Option<String>,
    /// Connections per pool (default 8; SQLite readers, PostgreSQL connections).
    pub max_connections: u32,
    /// How long a call waits for a connection (default 5 s); a server that refuses
    /// fails after this.
    pub connect_timeout: Duration,
    /// SQLite: how long a write waits for another process's lock (default 5 s).
    pub busy_timeout: Duration,
    /// SQLite: extra `PRAGMA`s run on every connection (for example `max_page_count`
    /// to cap the file's size).
    pub pragmas: Vec<(String, String)>,
    /// Open without connecting (PostgreSQL) or creating the file (SQLite): the first
    /// call connects and migrates, and a failure there is that call's error. Default
    /// off: [`Store::open_with`](crate::Store::open_with) connects and migrates before it returns.
    pub lazy: bool,
    /// The writer's queue (records waiting for a commit; default 4,096).
    pub queue: usize,
    /// The most records one commit takes (default 256).
    pub max_batch: usize,
    /// Write-behind (default off): `record` and `record_trace` return once the row is
    /// queued instead of committed. Runs do not wait for commits, so commits are
    /// larger and recording is cheaper; a failed write is then a `tracing` warning and
    /// a count returned by the next [`Store::flush`](crate::Store::flush) (which `run_batch` adds to the
    /// receipt), not an error of its run, and a run's record is durable after the next
    /// flush rather than when the run returns.
    pub write_behind: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            schema: None,
            max_connections: 8,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            busy_timeout: Duration::from_secs(5),
            pragmas: Vec::new(),
            lazy: false,
            queue: 4096,
            max_batch: 256,
            write_behind: false,
        }
    }
}

impl StoreOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// PostgreSQL: put every table in `schema` (created if missing).
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Connections per pool (at least 1).
    #[must_use]
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// How long a call waits for a connection.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// SQLite: how long a write waits for another process's lock.
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// SQLite: a `PRAGMA key = value` run on every connection.
    #[must_use]
    pub fn pragma(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.pragmas.push((key.into(), value.into()));
        self
    }

    /// Connect and migrate on first use instead of in `open_with`.
    #[must_use]
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }

    /// The writer's queue length (at least 1).
    #[must_use]
    pub fn queue(mut self, n: usize) -> Self {
        self.queue = n.max(1);
        self
    }

    /// The most records one commit takes (at least 1).
    #[must_use]
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }

    /// Write-behind: records and traces return once queued (see the field's docs).
    #[must_use]
    pub fn write_behind(mut self, on: bool) -> Self {
        self.write_behind = on;
        self
    }
}

/// How long to wait for a connection before a call fails (see `StoreOptions`).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
