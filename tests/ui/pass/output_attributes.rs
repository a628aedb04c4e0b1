// The user's #[serde] and #[schemars] attributes keep working; no serde or schemars
// dependency is needed in the user's crate.
use agent_core::{AgentOutput, agent_output};

/// The queue a ticket goes to.
#[agent_output]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Routing {
    /// Where the ticket goes.
    #[schemars(length(min = 1, max = 40))]
    pub target_queue: String,
    #[serde(default)]
    pub priority: u8,
    #[schemars(skip)]
    #[serde(skip)]
    pub internal: Vec<u8>,
}

fn check_routing(routing: &CheckedRouting) -> Result<(), String> {
    if routing.target_queue == "void" {
        return Err("the void queue is closed".to_owned());
    }
    Ok(())
}

#[agent_output(description = "Submit the routing.", validate = check_routing)]
pub struct CheckedRouting {
    pub target_queue: String,
}

fn check_plain(_: &Plain) -> Result<(), std::convert::Infallible> {
    Ok(())
}

#[agent_output(validate = check_plain)]
pub struct Plain {
    pub note: Option<String>,
}

fn main() {
    let def = Routing::output_tool().unwrap();
    assert!(def.parameters["properties"].get("targetQueue").is_some());
    assert_eq!(CheckedRouting::output_tool().unwrap().description, "Submit the routing.");
    let _ = check_routing;
    let _ = Plain::output_tool();
}
