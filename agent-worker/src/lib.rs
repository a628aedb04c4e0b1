//! # agent-worker
//!
//! Scale-out for agent-core over NATS JetStream: a work queue of runs, stateless
//! workers, one stored result per run id however often a job is delivered, dead letters
//! for runs that keep crashing workers, `run_batch` over the queue with the same
//! [`Receipt`](agent_core::Receipt), and pipelines of typed agents. See
//! `docs/scale-out.md` for the design.

mod batch;
pub mod demo;
mod error;
mod job;
mod limits;
mod pipeline;
mod queue;
mod receipt;
mod registry;
mod worker;

pub use batch::{BatchOptions, QueuedBatch, run_batch_queued, run_jobs_queued};
pub use error::QueueError;
pub use job::{DeadLetter, Done, Job};
pub use limits::{RateLimited, RateLimiter};
pub use pipeline::{Pipeline, PipelineReceipt, PipelineRun, Step, StepReceipt, Verdict};
pub use queue::{Queue, QueueOptions};
pub use receipt::receipt_of;
pub use registry::{
    META_DELIVERY, META_MAX_LLM_CALLS, META_PARTIAL, META_STORE_FAILURES, META_TRACE_ID, Registry,
    record_of,
};
pub use worker::{Worker, WorkerOptions, WorkerReport};
