//! `BatchGate`, the public handle of the provider batch gate (`AgentConfig::batch_gate`,
//! `RunOptions::batch_seat`): a gate that outlives one `run_batch`, as a queue worker's
//! does. Waves of runs with seats each make their own rounds, an idle gate sends
//! nothing, closing it lets its driver return, and a call after that fails at once
//! instead of waiting forever. On the fake OpenAI Batch API of `providers_batch`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::Duration;

use agent_core::config::Backoff;
use agent_core::pricing::ModelPrice;
use agent_core::providers::{BatchGate, ProviderBatch, ProviderOptions};
use agent_core::{AgentConfig, AgentError, AgentResult, RunOptions, run_agent_with};

use crate::common::{Behaviour, TestTool};
use crate::providers_support::KEY;
use crate::providers_support::batch_server::{BatchServer, Mode};

/// Three calls a run (the fake's script), each 1,000 + 100 tokens at $2.50 / $10 per
/// MTok, at the batch price.
const BATCH_RUN_USD: f64 = 3.0 * (1000.0 * 2.5 + 100.0 * 10.0) / 1e6 / 2.0;

fn config(fake: &BatchServer, lookup: &TestTool, batched: bool) -> AgentConfig<String> {
    let builder = AgentConfig::<String>::builder("gated")
        .model("gpt-4o-mini")
        .provider(
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url(fake.openai_url()),
        )
        .tool(lookup.clone())
        .price("gpt-4o-mini", ModelPrice::new(2.5, 10.0))
        .backoff(Backoff::none());
    let builder = if batched {
        builder.provider_batch(
            ProviderBatch::new()
                .collect_window(Duration::from_secs(600))
                .poll(Backoff::exponential(
                    Duration::from_millis(1),
                    Duration::from_millis(5),
                )),
        )
    } else {
        builder
    };
    builder.build().unwrap()
}

/// `n` runs, each with a seat at `gate` taken as it starts.
async fn wave(
    config: &AgentConfig<String>,
    gate: &BatchGate,
    from: usize,
    n: usize,
) -> Vec<AgentResult<String>> {
    let runs = (from..from + n).map(|i| {
        let options = RunOptions::new().batch_seat(gate.seat());
        run_agent_with(config, format!("ticket-{i}"), options)
    });
    futures::future::join_all(runs).await
}

fn job_sizes(fake: &BatchServer) -> Vec<usize> {
    fake.state().jobs.iter().map(|j| j.lines.len()).collect()
}

#[tokio::test]
async fn a_gate_outlives_one_batch_each_wave_of_runs_makes_its_own_rounds() {
    let fake = BatchServer::start(Mode::Normal).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    let config = config(&fake, &lookup, true);
    let gate = config.batch_gate().unwrap();
    let driver = tokio::spawn(gate.drive());

    let first = wave(&config, &gate, 0, 4).await;
    // Idle between the waves: no seat, nothing sent.
    tokio::task::yield_now().await;
    assert_eq!(job_sizes(&fake), [4, 4, 4]);
    let second = wave(&config, &gate, 4, 3).await;
    assert_eq!(job_sizes(&fake), [4, 4, 4, 3, 3, 3]);

    for (i, result) in first.iter().chain(&second).enumerate() {
        assert_eq!(
            result.outcome.as_deref(),
            Ok(format!("done: ticket-{i}").as_str())
        );
        let cost = result.usage.cost_usd.unwrap();
        assert!((cost - BATCH_RUN_USD).abs() < 1e-12, "run {i}: {cost} USD");
    }
    let report = gate.report();
    assert_eq!(
        (
            report.jobs,
            report.requests,
            report.answered,
            report.sent_live
        ),
        (6, 21, 21, 0)
    );
    assert_eq!(fake.state().live_calls, 0);

    // Closed: the driver returns; a run seated after that fails fast, sends nothing.
    gate.close();
    driver.await.unwrap();
    let late = wave(&config, &gate, 7, 1).await;
    assert!(
        matches!(late[0].outcome, Err(AgentError::MaxLlmRetries { .. })),
        "{:?}",
        late[0].outcome
    );
    assert_eq!(job_sizes(&fake).len(), 6);
    assert_eq!(fake.state().live_calls, 0);
}

#[tokio::test]
async fn a_config_without_provider_batch_has_no_gate() {
    let fake = BatchServer::start(Mode::Normal).await;
    let lookup = TestTool::new("lookup", Behaviour::Echo);
    assert!(config(&fake, &lookup, false).batch_gate().is_none());
    let gate = config(&fake, &lookup, true).batch_gate().unwrap();
    assert!(format!("{gate:?}").starts_with("BatchGate"));
}
