use agent_core::tool;

/// Echoes its input.
#[tool]
async fn echo<T: Clone>(value: T) -> T {
    value
}

fn main() {}
