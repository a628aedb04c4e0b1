use agent_core::{ToolContext, tool};

/// Reports the call id.
#[tool]
async fn whoami(#[serde(default)] ctx: ToolContext) -> String {
    ctx.call_id().to_owned()
}

fn main() {}
