//! A store shared with `Arc` is a store: every store trait is implemented for `Arc<S>`,
//! forwarding each method (its own and the defaults the inner store overrides) to `S`.
//! So one setter takes a store by value or shared (`.memory(store)`,
//! `.memory(Arc::clone(&store))`, `.memory(arc_dyn_memory)`).

use std::sync::Arc;
use std::time::Duration;

use super::{
    CheckpointRecord, CheckpointStore, EmbedFuture, Embedder, EvalExample, EvalFilter, Feedback,
    FeedbackStore, LedgerEntry, Memory, Retrieved, Retriever, RunQuery, RunRecord, SaveOutcome,
    StoreFuture, ThreadEntry, ThreadState, TraceRecord, TraceStore,
};

impl<S: Memory + ?Sized> Memory for Arc<S> {
    fn load<'a>(&'a self, thread: &'a str, max_messages: usize) -> StoreFuture<'a, ThreadState> {
        (**self).load(thread, max_messages)
    }
    fn append<'a>(&'a self, thread: &'a str, entry: &'a ThreadEntry) -> StoreFuture<'a, ()> {
        (**self).append(thread, entry)
    }
    fn claim<'a>(
        &'a self,
        thread: &'a str,
        run: &'a str,
        lease: Duration,
    ) -> StoreFuture<'a, bool> {
        (**self).claim(thread, run, lease)
    }
    fn release<'a>(&'a self, thread: &'a str, run: &'a str) -> StoreFuture<'a, ()> {
        (**self).release(thread, run)
    }
}

impl<S: Retriever + ?Sized> Retriever for Arc<S> {
    fn retrieve<'a>(&'a self, query: &'a str, k: usize) -> StoreFuture<'a, Vec<Retrieved>> {
        (**self).retrieve(query, k)
    }
}

impl<S: Embedder + ?Sized> Embedder for Arc<S> {
    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        (**self).embed(texts)
    }
    fn model(&self) -> &str {
        (**self).model()
    }
}

impl<S: FeedbackStore + ?Sized> FeedbackStore for Arc<S> {
    fn record<'a>(&'a self, run: &'a RunRecord) -> StoreFuture<'a, ()> {
        (**self).record(run)
    }
    fn attach_feedback<'a>(
        &'a self,
        trace_id: &'a str,
        feedback: &'a Feedback,
    ) -> StoreFuture<'a, ()> {
        (**self).attach_feedback(trace_id, feedback)
    }
    fn run<'a>(&'a self, trace_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        (**self).run(trace_id)
    }
    fn runs<'a>(&'a self, query: &'a RunQuery) -> StoreFuture<'a, Vec<RunRecord>> {
        (**self).runs(query)
    }
    fn eval_set<'a>(&'a self, filter: &'a EvalFilter) -> StoreFuture<'a, Vec<EvalExample>> {
        (**self).eval_set(filter)
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        (**self).flush()
    }
}

impl<S: TraceStore + ?Sized> TraceStore for Arc<S> {
    fn record_trace<'a>(&'a self, trace: &'a TraceRecord) -> StoreFuture<'a, ()> {
        (**self).record_trace(trace)
    }
    fn trace<'a>(&'a self, trace_id: &'a str) -> StoreFuture<'a, Option<TraceRecord>> {
        (**self).trace(trace_id)
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        (**self).flush()
    }
}

impl<S: CheckpointStore + ?Sized> CheckpointStore for Arc<S> {
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        (**self).save(checkpoint)
    }
    fn save_fenced<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
        taken_at: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        (**self).save_fenced(checkpoint, taken_at)
    }
    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        (**self).record_tool_fenced(entry, writer)
    }
    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        (**self).load(run_id)
    }
    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        (**self).record_tool(entry)
    }
    fn save_boundary<'a>(
        &'a self,
        checkpoint: Option<(&'a CheckpointRecord, u64)>,
        entries: &'a [LedgerEntry],
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        (**self).save_boundary(checkpoint, entries, writer)
    }
    fn renew_lease<'a>(
        &'a self,
        run_id: &'a str,
        writer: &'a str,
        until_ms: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        (**self).renew_lease(run_id, writer, until_ms)
    }
    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        (**self).unfinished(limit)
    }
    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        (**self).ledger(run_id)
    }
}
