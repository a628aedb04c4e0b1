//! Provider batch APIs (OpenAI Batch API, Anthropic Message Batches): the options of a
//! batched [`run_batch`](crate::eval::run_batch) ([`ProviderBatch`], `options.rs`), what it
//! did ([`BatchReport`]), and, crate-private, the wire of each provider's batch endpoints
//! ([`BatchWire`], `wire.rs`; the adapters' own files implement it), their HTTP calls
//! (`fetch.rs`), the gate that gathers the runs' LLM calls into one job per round
//! (`gate.rs`; its public handle, [`BatchGate`] and [`BatchSeat`], in `handle.rs`, for
//! runs beyond one `run_batch`: a queue worker's), the wait on one submitted job
//! (`job.rs`), and the wait of a resumed run's call on the job an earlier process put it
//! in (`resume.rs`, [`BatchedCall`]). The rules are in `docs/batch.md`.

mod fetch;
mod gate;
mod handle;
mod job;
mod options;
mod resume;
mod wire;

// Used by the OpenAI and Anthropic adapters' batch wires only.
#[cfg_attr(
    not(any(feature = "openai", feature = "anthropic")),
    allow(unused_imports)
)]
pub(crate) use fetch::{Fetcher, jsonl_lines};
pub(crate) use gate::{Gated, Seat};
pub use handle::{BatchGate, BatchSeat};
pub use options::{BatchFallback, BatchReport, ProviderBatch};
pub(crate) use resume::BatchedCall;
#[cfg_attr(
    not(any(feature = "openai", feature = "anthropic")),
    allow(unused_imports)
)]
pub(crate) use wire::{BatchFuture, BatchWire, JobState, ResultLine, request_line};
