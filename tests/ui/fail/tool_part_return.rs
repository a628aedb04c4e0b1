use agent_core::content::Part;
use agent_core::tool;

/// Takes a screenshot.
#[tool]
async fn screenshot() -> Result<Part, String> {
    Err("no screen".to_owned())
}

/// Takes screenshots.
#[tool]
async fn screenshots() -> Vec<Part> {
    Vec::new()
}

fn main() {}
