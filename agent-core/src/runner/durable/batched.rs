//! The checkpoint a batched LLM call writes once the provider accepted its job: the
//! run's last `before_call` checkpoint again, with the job and line the call is in
//! (`RunState::batch_call`). A run resumed from it goes through the same steps to the
//! same call, which then waits on that job instead of being sent again (see
//! `providers/batch/resume.rs`).
//!
//! The state is the one saved before the call, not the one at its acceptance: the call
//! is counted, the conversation compacted, and so on, again on resume, as for a run
//! resumed before its call.

use crate::providers::batch::BatchedCall;
use crate::runner::state::RunState;

use super::snapshot::bare_text;
use super::{Durable, Phase, Reporter, report};

impl Durable {
    /// Keeps the text of each `before_call` checkpoint (without its messages: those
    /// are in the transcript's cache) for [`save_batched`](Self::save_batched): set for
    /// a run with a provider batch seat.
    pub(crate) fn keep_before_call(&mut self) {
        self.keeps_before_call = true;
    }

    /// Keeps the `before_call` checkpoint just written (the state's text without its
    /// messages and batched call).
    pub(super) fn remember_before_call(&mut self, state: &mut RunState) {
        self.before_call = match bare_text(state, &Phase::BeforeCall) {
            Ok(bare) => Some((self.seq, bare)),
            Err(error) => {
                tracing::warn!(%error, "the checkpoint does not encode");
                None
            }
        };
    }

    /// Writes the last `before_call` checkpoint again with `call` (once per call: the
    /// kept text is taken). Nothing is written when no checkpoint was saved since that
    /// one; a failed write is counted and the run goes on (a refused one marks it
    /// fenced, which its next save reports).
    pub(crate) async fn save_batched(
        &mut self,
        call: &BatchedCall,
        (observers, trace_id): Reporter<'_>,
    ) {
        let Some((seq, bare)) = self.before_call.take() else {
            return;
        };
        if seq != self.seq {
            return;
        }
        let Some(text) = self.with_call(&bare, call) else {
            tracing::warn!("the batched call's checkpoint does not encode");
            return;
        };
        #[cfg(debug_assertions)]
        debug_assert!(
            super::Snapshot::from_text(&text).is_ok_and(|s| s.state.batch_call.is_some()),
            "the batched call's checkpoint does not read back"
        );
        if let Err(error) = self.write(false, true, text).await {
            self.failures = self.failures.saturating_add(1);
            report(observers, trace_id, "save", &error);
        }
    }

    /// `bare` (a `before_call` state's text without messages or batched call) with
    /// `call` as its batched call and the cached messages in place.
    fn with_call(&self, bare: &str, call: &BatchedCall) -> Option<String> {
        let phase = serde_json::to_string(&Phase::BeforeCall).ok()?;
        let suffix = format!("}},\"phase\":{phase}}}");
        let state = bare.strip_suffix(&suffix)?;
        let call = serde_json::to_string(call).ok()?;
        self.transcript
            .splice(&format!("{state},\"batch_call\":{call}{suffix}"))
    }
}
