//! The stores beside the run loop (the layer below the runner).

/// The metadata key the records of a child run (an agent used as a tool,
/// [`AgentTool`](crate::AgentTool)) carry: its parent run's trace id.
pub const META_PARENT_TRACE_ID: &str = "parent_trace_id";
/// The metadata key the records of a child run carry: the parent's tool call id.
pub const META_PARENT_CALL_ID: &str = "parent_call_id";

mod checkpoint;
mod diff;
mod feedback;
mod memory;
mod retrieval;
mod shared;
mod trace;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use checkpoint::{
    CheckpointRecord, CheckpointStore, ConfigDifference, InMemoryCheckpoints, LedgerEntry,
    LedgerStatus, ResumeError, SaveOutcome,
};
pub use diff::{FieldDiff, RunDiff};
pub use feedback::{
    EvalExample, EvalFilter, ExpectedSource, Feedback, FeedbackStore, RunQuery, RunRecord,
    write_jsonl,
};
pub use memory::{Memory, MemoryWindow, ThreadEntry, ThreadState, ThreadSummary, estimate_tokens};
pub use retrieval::{
    EmbedFuture, Embedder, HashEmbedder, Retrieved, Retriever, context_section, cosine, normalize,
};
pub use trace::{TraceEvent, TraceRecord, TraceStore};

pub(crate) use retrieval::{fnv1a64, with_context};
pub(crate) use trace::ms;

use crate::llm::LlmError;

/// The future a store method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Which store a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreKind {
    /// The conversation memory ([`Memory`]).
    Memory,
    /// Document retrieval ([`Retriever`]).
    Retriever,
    /// Run records ([`FeedbackStore`]).
    Feedback,
    /// Transcripts and events ([`TraceStore`]).
    Trace,
    /// Checkpoints and the tool-effect ledger ([`CheckpointStore`]).
    Checkpoint,
}

impl StoreKind {
    /// The stable name: `memory`, `retriever`, `feedback`, `trace` or `checkpoint`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Retriever => "retriever",
            StoreKind::Feedback => "feedback",
            StoreKind::Trace => "trace",
            StoreKind::Checkpoint => "checkpoint",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a store call failed. Messages never hold a password or key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or cannot take the write now: a refused connection, a
    /// locked SQLite file, a stopped writer. Trying later may work.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// The backend refused the statement (a full disk, a constraint, a failed migration).
    #[error("store error: {message}")]
    Backend {
        /// What the backend said.
        message: String,
    },
    /// Nothing is stored under this key.
    #[error("not found: {what}")]
    NotFound {
        /// What was looked up (for example `run 4bf9…`).
        what: String,
    },
    /// The input cannot be stored (an id with a NUL byte, vectors of the wrong length).
    #[error("invalid store input: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// The call ran past the config's `store_timeout`.
    #[error("store call timed out after {} ms", .limit.as_millis())]
    Timeout {
        /// The timeout.
        limit: Duration,
    },
    /// The store's code panicked; the panic was caught.
    #[error("store panicked: {message}")]
    Panicked {
        /// The panic message.
        message: String,
    },
    /// The embedding model failed.
    #[error("embedding failed: {error}")]
    Embedding {
        /// The provider failure.
        error: LlmError,
    },
}

impl StoreError {
    /// An [`Unavailable`](Self::Unavailable) error.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable {
            message: message.into(),
        }
    }

    /// A [`Backend`](Self::Backend) error.
    pub fn backend(message: impl Into<String>) -> Self {
        Self::Backend {
            message: message.into(),
        }
    }

    /// An [`Invalid`](Self::Invalid) error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid {
            message: message.into(),
        }
    }

    /// A [`NotFound`](Self::NotFound) error.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }
}

/// The store settings of a config (builder: `memory`, `retriever`, `feedback_store`,
/// `trace_store`, `memory_window`, `max_thread_llm_calls`, `retrieve_top_k`,
/// `store_timeout`, `variant`).
#[derive(Clone)]
pub(crate) struct StoreSettings {
    pub(crate) memory: Option<Arc<dyn Memory>>,
    pub(crate) window: MemoryWindow,
    pub(crate) max_thread_llm_calls: Option<u64>,
    pub(crate) retriever: Option<Arc<dyn Retriever>>,
    pub(crate) top_k: usize,
    pub(crate) feedback: Option<Arc<dyn FeedbackStore>>,
    pub(crate) trace: Option<Arc<dyn TraceStore>>,
    pub(crate) checkpoints: Option<Arc<dyn CheckpointStore>>,
    pub(crate) timeout: Duration,
    pub(crate) variant: Option<String>,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            memory: None,
            window: MemoryWindow::default(),
            max_thread_llm_calls: None,
            retriever: None,
            top_k: 4,
            feedback: None,
            trace: None,
            checkpoints: None,
            timeout: Duration::from_secs(5),
            variant: None,
        }
    }
}

impl StoreSettings {
    /// Whether any store is set (else the runner skips the store hooks entirely).
    pub(crate) fn any(&self) -> bool {
        self.memory.is_some()
            || self.retriever.is_some()
            || self.feedback.is_some()
            || self.trace.is_some()
    }
}

impl fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreSettings")
            .field("memory", &self.memory.is_some())
            .field("window", &self.window)
            .field("max_thread_llm_calls", &self.max_thread_llm_calls)
            .field("retriever", &self.retriever.is_some())
            .field("top_k", &self.top_k)
            .field("feedback", &self.feedback.is_some())
            .field("trace", &self.trace.is_some())
            .field("checkpoints", &self.checkpoints.is_some())
            .field("timeout", &self.timeout)
            .field("variant", &self.variant)
            .finish()
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
