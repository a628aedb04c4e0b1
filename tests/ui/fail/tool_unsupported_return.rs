use agent_core::tool;

/// Says hello.
#[tool]
async fn hello() -> &'static str {
    "hello"
}

/// Says goodbye.
#[tool]
async fn goodbye() -> impl std::fmt::Display {
    "goodbye"
}

fn main() {}
