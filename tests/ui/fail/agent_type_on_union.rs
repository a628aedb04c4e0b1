use agent_core::agent_type;

#[agent_type]
pub union Bits {
    pub a: u32,
    pub b: f32,
}

fn main() {}
