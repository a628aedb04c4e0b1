//! `ours-bench`: agent-core's `run_agent` in the peer benchmarks.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    ours::main_for(false)
}
