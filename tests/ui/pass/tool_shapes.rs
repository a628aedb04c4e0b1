// Every supported #[tool] shape compiles: state, context, optional and attributed
// parameters, raw identifiers, unit and plain returns, visibility, paths in tools![..].
use std::fmt;

use agent_core::{State, ToolContext, tool, tools};

pub struct Db {
    pub rows: Vec<String>,
}

#[derive(Debug)]
pub enum DbError {
    Missing,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("missing")
    }
}

/// Finds a row.
#[tool(params(r#type = "The row type.", limit = "At most this many rows."))]
pub async fn find(
    db: State<Db>,
    ctx: ToolContext,
    r#type: String,
    #[schemars(range(min = 1, max = 10))] limit: Option<u8>,
    mut offset: u32,
) -> Result<Vec<String>, DbError> {
    offset += 1;
    let _ = (ctx.call_id(), r#type, limit, offset);
    db.rows.first().cloned().map(|r| vec![r]).ok_or(DbError::Missing)
}

/// Does nothing.
#[tool(name = "no-op")]
async fn nothing() {}

pub mod nested {
    /// Counts.
    #[agent_core::tool(description = "Counts to n.")]
    pub(crate) async fn count(n: u32) -> u32 {
        n
    }
}

fn main() {
    let registry = tools![find, nothing, nested::count];
    assert_eq!(registry.names().collect::<Vec<_>>(), ["find", "no-op", "count"]);
    let empty = tools![];
    assert!(empty.is_empty());
}
