use std::borrow::Cow;

use agent_core::agent_output;

/// Triage decision.
#[agent_output]
pub struct Triage<'a> {
    pub summary: Cow<'a, str>,
}

fn main() {}
