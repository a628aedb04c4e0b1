use agent_core::tool;

/// Echoes its input.
#[tool]
async fn echo(value: impl Into<String>) -> String {
    value.into()
}

fn main() {}
