//! Which database a store uses.

/// Which database a store uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// An SQLite file (WAL mode), embedded in the process.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}
