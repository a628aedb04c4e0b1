//! `agent-dashboard --store runs.db`: the dashboard's binary (see the crate docs and
//! `--help`).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let config = match agent_dashboard::Config::from_env_args() {
        Ok(Some(config)) => config,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-dashboard: {e}");
            return ExitCode::from(2);
        }
    };
    match agent_dashboard::serve(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-dashboard: {e}");
            ExitCode::FAILURE
        }
    }
}
