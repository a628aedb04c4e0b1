use agent_core::agent_type;

#[agent_type(rename = "x")]
pub struct Thing {
    pub a: u8,
}

fn main() {}
