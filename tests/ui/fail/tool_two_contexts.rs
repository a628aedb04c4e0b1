use agent_core::{ToolContext, tool};

/// Reports the call id.
#[tool]
async fn whoami(ctx: ToolContext, again: ToolContext) -> String {
    let _ = again;
    ctx.call_id().to_owned()
}

fn main() {}
