//! The builder's store settings: memory, retrieval, feedback and trace stores.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{AgentConfigBuilder, ConfigError, invalid};
use crate::output::AgentOutput;
use crate::store::{
    CheckpointStore, FeedbackStore, Memory, MemoryWindow, Retriever, StoreSettings, TraceStore,
};

impl<T: AgentOutput> AgentConfigBuilder<T> {
    /// Conversation memory: runs that name a thread
    /// ([`RunOptions::thread`](crate::RunOptions::thread)) start from the thread's earlier
    /// messages, trimmed by [`memory_window`](Self::memory_window), and append their
    /// own (see [`Memory`]).
    #[must_use]
    pub fn memory(mut self, memory: impl Memory + 'static) -> Self {
        self.settings.stores.memory = Some(Arc::new(memory));
        self
    }

    /// A shared store: the same as [`memory`](Self::memory), which takes an `Arc` too.
    #[must_use]
    #[deprecated(note = "pass the Arc to `memory` (every store trait is implemented for Arc)")]
    pub fn memory_arc(mut self, memory: Arc<dyn Memory>) -> Self {
        self.settings.stores.memory = Some(memory);
        self
    }

    /// How much of a thread a run sees (default 40 messages, 8,000 estimated tokens; see
    /// [`MemoryWindow`] for the trimming rule).
    #[must_use]
    pub fn memory_window(mut self, window: MemoryWindow) -> Self {
        self.settings.stores.window = window;
        self
    }

    /// A cap on the LLM calls of all runs of one memory thread (at least 1; default
    /// none). A run of a thread whose earlier runs used `limit` or more ends at once with
    /// `budget_exhausted` ([`Budget::ThreadLlmCalls`](crate::error::Budget::ThreadLlmCalls)),
    /// before any request. A run that starts under the cap is bounded by
    /// `max_llm_calls` as usual, so a thread can pass the cap by less than one run's
    /// LLM calls.
    #[must_use]
    pub fn max_thread_llm_calls(mut self, limit: u64) -> Self {
        self.settings.stores.max_thread_llm_calls = Some(limit);
        self
    }

    /// Document retrieval: before each run, the `retrieve_top_k` documents most
    /// relevant to the input are appended to the system prompt (see
    /// [`context_section`](crate::store::context_section)).
    #[must_use]
    pub fn retriever(mut self, retriever: impl Retriever + 'static) -> Self {
        self.settings.stores.retriever = Some(Arc::new(retriever));
        self
    }

    /// A shared store: the same as [`retriever`](Self::retriever), which takes an `Arc` too.
    #[must_use]
    #[deprecated(note = "pass the Arc to `retriever` (every store trait is implemented for Arc)")]
    pub fn retriever_arc(mut self, retriever: Arc<dyn Retriever>) -> Self {
        self.settings.stores.retriever = Some(retriever);
        self
    }

    /// How many documents are retrieved per run (default 4; at least 1).
    #[must_use]
    pub fn retrieve_top_k(mut self, k: usize) -> Self {
        self.settings.stores.top_k = k;
        self
    }

    /// Records every run (input, output, ending, usage, scores, ...) for feedback and
    /// eval sets (see [`FeedbackStore`]).
    #[must_use]
    pub fn feedback_store(mut self, store: impl FeedbackStore + 'static) -> Self {
        self.settings.stores.feedback = Some(Arc::new(store));
        self
    }

    /// A shared store: the same as [`feedback_store`](Self::feedback_store), which takes an `Arc` too.
    #[must_use]
    #[deprecated(
        note = "pass the Arc to `feedback_store` (every store trait is implemented for Arc)"
    )]
    pub fn feedback_store_arc(mut self, store: Arc<dyn FeedbackStore>) -> Self {
        self.settings.stores.feedback = Some(store);
        self
    }

    /// Records every run's transcript and events, for replay and diff (see
    /// [`TraceStore`]).
    #[must_use]
    pub fn trace_store(mut self, store: impl TraceStore + 'static) -> Self {
        self.settings.stores.trace = Some(Arc::new(store));
        self
    }

    /// A shared store: the same as [`trace_store`](Self::trace_store), which takes an `Arc` too.
    #[must_use]
    #[deprecated(note = "pass the Arc to `trace_store` (every store trait is implemented for Arc)")]
    pub fn trace_store_arc(mut self, store: Arc<dyn TraceStore>) -> Self {
        self.settings.stores.trace = Some(store);
        self
    }

    /// Durable runs: the run's state is saved at every transition boundary and every
    /// tool execution is recorded before it starts and after it returns, so
    /// [`resume_agent`](crate::resume_agent) can continue the run after a crash (see
    /// [`CheckpointStore`] and `docs/durable.md`).
    #[must_use]
    pub fn checkpoints(mut self, store: impl CheckpointStore + 'static) -> Self {
        self.settings.stores.checkpoints = Some(Arc::new(store));
        self
    }

    /// A shared store: the same as [`checkpoints`](Self::checkpoints), which takes an `Arc` too.
    #[must_use]
    #[deprecated(note = "pass the Arc to `checkpoints` (every store trait is implemented for Arc)")]
    pub fn checkpoints_arc(mut self, store: Arc<dyn CheckpointStore>) -> Self {
        self.settings.stores.checkpoints = Some(store);
        self
    }

    /// How long one store call may take (default 5 s; more than zero). A call that runs
    /// over counts as a store failure; the run goes on.
    #[must_use]
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.settings.stores.timeout = timeout;
        self
    }

    /// A label recorded with every run of this config (for example the name of a
    /// `with_` variant in a sweep); not part of the fingerprint.
    #[must_use]
    pub fn variant(mut self, name: impl Into<String>) -> Self {
        self.settings.stores.variant = Some(name.into());
        self
    }
}

/// Checks the store settings.
pub(crate) fn check(s: &StoreSettings) -> Result<(), ConfigError> {
    if s.timeout.is_zero() {
        return Err(invalid("store_timeout", "0 s", "a store call needs time"));
    }
    if s.top_k == 0 {
        return Err(invalid(
            "retrieve_top_k",
            0,
            "retrieve at least one document",
        ));
    }
    if s.window.max_messages == 0 {
        return Err(invalid(
            "memory_window.max_messages",
            0,
            "load at least one message (or set no memory)",
        ));
    }
    if s.window.max_tokens == 0 {
        return Err(invalid(
            "memory_window.max_tokens",
            0,
            "load at least one token (or set no memory)",
        ));
    }
    if s.max_thread_llm_calls == Some(0) {
        return Err(invalid(
            "max_thread_llm_calls",
            0,
            "a thread needs at least one LLM call",
        ));
    }
    Ok(())
}
