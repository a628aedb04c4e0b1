//! A tool execution through the run's tool-effect ledger (see `durable/ledger.rs` and
//! `docs/durable.md`, "The ledger"): a call completed before a crash is not run again
//! (its recorded result comes back); a call that started and never completed runs
//! again, unless its tool is irreversible: then its outcome is unknown and the model is
//! told so. Otherwise `started` is written, the tool runs, and `completed` is written.

use std::future::Future;

use crate::handover::CallOutcome;
use crate::message::{ToolCall, ToolResult};
use crate::pause::PauseReason;
use crate::runner::durable::arguments_hash;
use crate::runner::durable::ledger::{Ledger, Prior};
use crate::runner::emit::Observers;
use crate::store::LedgerStatus;

use super::executed::Executed;

/// Runs one tool execution (`run`) through `ledger` (see the module docs). `again`: the
/// call deferred its result before the pause because the child run it started paused,
/// and now runs again to resume it (C64), so its `deferred` entry does not answer it.
pub(super) async fn execute(
    ledger: &Ledger,
    call: &ToolCall,
    (irreversible, again): (bool, bool),
    observers: (&str, &Observers),
    run: impl Future<Output = Executed>,
) -> Executed {
    let hash = arguments_hash(&call.arguments);
    match ledger.prior(call, &hash) {
        Prior::Deferred { .. } if again => {}
        Prior::Completed {
            content,
            is_error,
            fatal,
        } => return recorded(call, content, is_error, fatal),
        Prior::Deferred { note } => {
            let reason = PauseReason::Deferred {
                note: note.to_owned(),
            };
            return Executed::waiting(call, reason);
        }
        Prior::Interrupted if irreversible => return unknown(call),
        Prior::Interrupted | Prior::Unknown => {}
    }
    let Ok(entry) = ledger.begin(call, hash, observers).await else {
        return not_started(call);
    };
    let done = run.await;
    let status = match &done.pause {
        Some(PauseReason::Deferred { note }) => LedgerStatus::Deferred { note: note.clone() },
        _ => LedgerStatus::Completed {
            content: done.result.content.clone(),
            is_error: done.result.is_error,
            fatal: done.fatal,
        },
    };
    ledger.end(entry, status, observers).await;
    done
}

/// A call answered from its `completed` entry.
fn recorded(call: &ToolCall, content: &str, is_error: bool, fatal: bool) -> Executed {
    let (result, outcome) = if is_error {
        (
            ToolResult::error(&call.id, &call.name, content),
            CallOutcome::Failed(content.to_owned()),
        )
    } else {
        (
            ToolResult::ok(&call.id, &call.name, content),
            CallOutcome::Succeeded(content.to_owned()),
        )
    };
    let mut done = Executed::answered(result, outcome);
    done.fatal = fatal;
    done
}

/// A call not started because another process took the run over (the run stops after
/// this turn's calls, with [`AgentError::Fenced`](crate::AgentError::Fenced)).
fn not_started(call: &ToolCall) -> Executed {
    let text = format!(
        "{} was not run: another process took this run over",
        call.name
    );
    Executed::answered(
        ToolResult::error(&call.id, &call.name, text.clone()),
        CallOutcome::NotRun(text),
    )
}

/// An irreversible call that started before a crash and never completed.
fn unknown(call: &ToolCall) -> Executed {
    let text = format!(
        "the outcome of this {} call is unknown: the run was interrupted after the tool \
         started and before its result was recorded, and {} is irreversible, so it was not \
         run again. Do not assume it took effect or not; check before calling it again, or \
         hand the case over.",
        call.name, call.name
    );
    Executed::answered(
        ToolResult::error(&call.id, &call.name, text.clone()),
        CallOutcome::Unknown(text),
    )
}
