use agent_core::agent_output;

/// Either a number or a flag.
#[agent_output]
pub union Bits {
    number: u32,
    flag: bool,
}

fn main() {}
