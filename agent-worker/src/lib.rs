//! # agent-worker
//!
//! Scale-out for agent-core over NATS JetStream: a work queue of runs, stateless
//! workers, one stored result per run id however often a job is delivered, dead letters
//! for runs that keep crashing workers, a request rate per provider shared by every
//! worker, `run_batch` over the queue with the same [`Receipt`](agent_core::eval::Receipt), and
//! pipelines of agents; agents with `.provider_batch(..)` have their calls sent in
//! provider batch jobs (one gate per agent per worker, `docs/batch.md`). `docs/scale-out.md` has the design and the guarantees.
//!
//! ```no_run
//! use std::sync::Arc;
//! use agent_core::CancellationToken;
//! use agent_store::Store;
//! use agent_worker::{BatchOptions, Queue, QueueOptions, Worker, WorkerOptions, demo, run_batch_queued};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::open("postgres://postgres@127.0.0.1:5432/test").await?;
//! let queue = Queue::connect(QueueOptions::new().namespace("support")).await?;
//!
//! // A worker (usually its own process): the agents it serves, by name.
//! let worker = Worker::new(queue.clone(), Arc::new(store.clone()), demo::registry()?, WorkerOptions::new());
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn({
//!     let shutdown = shutdown.clone();
//!     async move { worker.run(shutdown).await }
//! });
//!
//! // The producer: results come back from the store, with agent-core's receipt.
//! let inputs = (0..100).map(|i| format!("ticket {i}"));
//! let batch = run_batch_queued(&queue, &store, "echo", inputs, &BatchOptions::new()).await?;
//! println!("{}", batch.receipt);
//!
//! shutdown.cancel(); // drain: finish held jobs, take no more
//! running.await??;
//! # Ok(())
//! # }
//! ```

mod batch;
pub mod demo;
mod error;
mod gates;
mod job;
mod limits;
mod pipeline;
mod queue;
mod receipt;
mod registry;
mod sweeper;
mod worker;

pub use batch::{
    BatchOptions, DEFAULT_STALL_TIMEOUT, QueuedBatch, run_batch_queued, run_jobs_queued,
};
pub use error::QueueError;
pub use job::{DeadLetter, Done, Job};
pub use limits::{RateLimited, RateLimiter};
pub use pipeline::{Pipeline, PipelineReceipt, PipelineRun, Step, StepReceipt, Verdict};
pub use queue::{Queue, QueueEvent, QueueOptions};
pub use receipt::receipt_of;
pub use registry::{
    META_DELIVERY, META_MAX_LLM_CALLS, META_OUTCOME_UNKNOWN, META_PARTIAL, META_RESUME_ERROR,
    META_RESUMED, META_STORE_FAILURES, META_TRACE_ID, Registry, record_of,
};
pub use worker::{Worker, WorkerOptions, WorkerReport};
