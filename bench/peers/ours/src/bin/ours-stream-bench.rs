//! `ours-stream-bench`: the same runs as `ours-bench`, through `run_agent_stream`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    ours::main_for(true)
}
