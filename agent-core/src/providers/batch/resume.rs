//! Calls resumed inside a job an earlier process submitted: a durable run records in its
//! checkpoint which job and line its waiting LLM call is in ([`BatchedCall`], written
//! right after the provider accepted the job); after a crash, the resumed run's call
//! waits on that job instead of being sent again. [`Stored`] polls each such job once
//! (the gate's backoff, the deadline counted from the job's submission), reads its
//! results once, and hands each resumed call the line with its `custom_id`; a call the
//! job does not answer follows the batch's fallback as any other (see `docs/batch.md`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::job::{self, Reply, Waited, as_transient};
use super::options::{BatchReport, ProviderBatch};
use super::wire::{BatchWire, JobState, ResultLine};
use crate::llm::{LlmError, LlmResponse};

/// Where a durable run's waiting LLM call is: the job the provider accepted with it and
/// its line's `custom_id`. Kept in the run's checkpoint from the job's acceptance until
/// the call's answer is applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BatchedCall {
    /// The provider of the job (`gen_ai.provider.name`): a resumed call waits on it
    /// only through a gate to the same provider.
    pub(crate) provider: String,
    /// The provider's job id.
    pub(crate) job: String,
    /// The call's line in the job.
    pub(crate) custom_id: String,
    /// When the job was submitted (ms since the Unix epoch, read just before the
    /// submission): the batch's deadline counts from it.
    pub(crate) submitted_at_ms: u64,
    /// How many lines the job holds: bounds the read of its results.
    pub(crate) requests: u64,
}

/// Where a stored job stands.
enum Stage {
    /// Being polled: the calls waiting on it, by `custom_id`.
    Waiting(HashMap<String, oneshot::Sender<Reply>>),
    /// Its results were read: the lines no call claimed yet (for calls resumed later),
    /// and the provider's word on why requests went unanswered.
    Read {
        lines: HashMap<String, Result<LlmResponse, LlmError>>,
        note: Option<String>,
    },
    /// It failed as a whole (unknown to the provider, its results unreadable).
    Failed(LlmError),
    /// It passed the deadline (this limit) and was cancelled.
    Deadline(Duration),
}

struct Job {
    submitted_at_ms: u64,
    requests: u64,
    stage: Stage,
}

#[derive(Default)]
struct Inner {
    jobs: HashMap<String, Job>,
    /// Jobs a call waits on that are not polled yet.
    fresh: Vec<String>,
    /// Calls waiting on a stored job.
    waiting: usize,
    /// Every run of the batch ended.
    closed: bool,
    report: BatchReport,
}

/// The stored jobs of one gate (see the module docs).
#[derive(Default)]
pub(crate) struct Stored {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl Stored {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many calls wait on a stored job now.
    pub(crate) fn waiting(&self) -> usize {
        self.lock().waiting
    }

    /// What the stored jobs did so far (`resumed_jobs`, `answered`, `unanswered`,
    /// `unknown_results`, `deadline_cancelled`).
    pub(crate) fn report(&self) -> BatchReport {
        self.lock().report.clone()
    }

    /// Every run ended: [`drive`](Self::drive) returns.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_one();
    }

    /// The call `call` names waits on its job: polled from now if no call waited on it
    /// yet; answered at once if its results were read already.
    pub(crate) fn wait(&self, call: &BatchedCall) -> oneshot::Receiver<Reply> {
        let (reply, receiver) = oneshot::channel();
        let mut s = self.lock();
        let Inner {
            jobs,
            fresh,
            waiting,
            report,
            ..
        } = &mut *s;
        let job = match jobs.entry(call.job.clone()) {
            Entry::Occupied(job) => job.into_mut(),
            Entry::Vacant(slot) => {
                fresh.push(call.job.clone());
                self.changed.notify_one();
                slot.insert(Job {
                    submitted_at_ms: call.submitted_at_ms,
                    requests: call.requests,
                    stage: Stage::Waiting(HashMap::new()),
                })
            }
        };
        if let Stage::Waiting(calls) = &mut job.stage {
            if calls.insert(call.custom_id.clone(), reply).is_none() {
                *waiting += 1;
            }
        } else {
            let _ = reply.send(claim(&call.job, &mut job.stage, &call.custom_id, report));
        }
        receiver
    }

    /// Takes back a call that stopped waiting on `job` (its run was cut off).
    pub(crate) fn withdraw(&self, job: &str, custom_id: &str) {
        let mut s = self.lock();
        if let Some(Job {
            stage: Stage::Waiting(calls),
            ..
        }) = s.jobs.get_mut(job)
            && calls.remove(custom_id).is_some()
        {
            s.waiting = s.waiting.saturating_sub(1);
        }
    }

    /// Polls each stored job a call waits on, until [`close`](Self::close).
    pub(crate) async fn drive(&self, wire: &dyn BatchWire, options: &ProviderBatch) {
        let mut polls = FuturesUnordered::new();
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let fresh = {
                let mut s = self.lock();
                if s.closed {
                    return;
                }
                std::mem::take(&mut s.fresh)
            };
            for job in fresh {
                polls.push(self.poll_one(wire, options, job));
            }
            if polls.is_empty() {
                notified.await;
            } else {
                tokio::select! {
                    _ = polls.next() => {}
                    () = &mut notified => {}
                }
            }
        }
    }

    /// One stored job: waits until it ends (or passes the deadline, counted from its
    /// submission; a job past it is read if it ended, else cancelled), reads its
    /// results, and answers the calls waiting on it.
    async fn poll_one(&self, wire: &dyn BatchWire, options: &ProviderBatch, job: String) {
        let (submitted_at_ms, requests) = {
            let mut s = self.lock();
            s.report.resumed_jobs += 1;
            match s.jobs.get(&job) {
                Some(j) => (j.submitted_at_ms, j.requests),
                None => return,
            }
        };
        let age = crate::store::now_ms().saturating_sub(submitted_at_ms);
        let left = options.deadline.saturating_sub(Duration::from_millis(age));
        tracing::info!(
            gen_ai.provider.name = wire.provider(),
            batch.job = %job,
            "waiting on a provider batch job submitted before the resume"
        );
        let waited = if left.is_zero() {
            match wire.poll(&job).await {
                Ok(JobState::Ended { results, note }) => Waited::Ended { results, note },
                Ok(JobState::Running) => Waited::Deadline,
                Err(error) if error.is_transient() => Waited::Deadline,
                Err(error) => Waited::Failed(error),
            }
        } else {
            job::wait(wire, &options.poll, &job, Instant::now() + left).await
        };
        let stage = match waited {
            Waited::Ended { results, note } => {
                let cap = wire
                    .max_response_bytes()
                    .saturating_mul(usize::try_from(requests.max(1)).unwrap_or(usize::MAX));
                match wire.results(&results, cap).await {
                    Ok(lines) => self.lines(&job, lines, note),
                    Err(error) => Stage::Failed(as_transient(&error)),
                }
            }
            Waited::Deadline => {
                job::cancel(wire, &job).await;
                self.lock().report.deadline_cancelled += 1;
                Stage::Deadline(options.deadline)
            }
            Waited::Failed(error) => Stage::Failed(as_transient(&error)),
        };
        let mut s = self.lock();
        let Inner {
            jobs,
            waiting,
            report,
            ..
        } = &mut *s;
        let Some(entry) = jobs.get_mut(&job) else {
            return;
        };
        let Stage::Waiting(calls) = std::mem::replace(&mut entry.stage, stage) else {
            return;
        };
        *waiting = waiting.saturating_sub(calls.len());
        for (custom_id, reply) in calls {
            let _ = reply.send(claim(&job, &mut entry.stage, &custom_id, report));
        }
    }

    /// A job's result lines by `custom_id`; a line naming no id, or repeating one, is
    /// counted in `unknown_results` and ignored.
    fn lines(&self, job: &str, lines: Vec<ResultLine>, note: Option<String>) -> Stage {
        let mut by_id = HashMap::with_capacity(lines.len());
        let mut unknown = 0;
        for line in lines {
            if line.custom_id.is_empty() || by_id.contains_key(&line.custom_id) {
                unknown += 1;
                tracing::warn!(
                    batch.job = %job,
                    "a result line of the job names no request (no or a repeated custom_id): ignored"
                );
                continue;
            }
            by_id.insert(line.custom_id, line.outcome);
        }
        self.lock().report.unknown_results += unknown;
        Stage::Read { lines: by_id, note }
    }
}

/// The reply of the call with `custom_id` from an ended stage (counted in `report`): its
/// line (taken), or why it has none.
fn claim(job: &str, stage: &mut Stage, custom_id: &str, report: &mut BatchReport) -> Reply {
    let reply = match stage {
        Stage::Read { lines, note } => match lines.remove(custom_id) {
            Some(Ok(mut response)) => {
                response.usage = response.usage.with_batch(true);
                Reply::Answer(response)
            }
            Some(Err(error)) => Reply::Unanswered(error),
            None => {
                let why = note
                    .as_deref()
                    .map_or_else(String::new, |n| format!(" ({n})"));
                Reply::Unanswered(LlmError::transient(format!(
                    "the provider batch job {job} gave no result for request {custom_id}{why}"
                )))
            }
        },
        Stage::Failed(error) => Reply::Unanswered(error.clone()),
        Stage::Deadline(limit) => Reply::Deadline(*limit),
        // Not ended: never called so.
        Stage::Waiting(_) => Reply::Unanswered(LlmError::transient(format!(
            "the provider batch job {job} has not ended"
        ))),
    };
    match &reply {
        Reply::Answer(_) => report.answered += 1,
        _ => report.unanswered += 1,
    }
    reply
}
