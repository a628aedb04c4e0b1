//! The gate: the runs of one batched `run_batch` each hold a [`Seat`]; a run's LLM call
//! waits at the gate, and when every active run has a call waiting (or the first one
//! waited `collect_window`), the gate sends them all as one provider job, polls it with
//! backoff until it ends or passes its deadline, and hands each call its answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::options::{BatchFallback, BatchReport, ProviderBatch};
use super::wire::{BatchWire, JobState, ResultLine};
use crate::llm::{LlmClient, LlmError, LlmRequest, LlmResponse};

/// How many times a job's submission is tried on transient failures.
const SUBMIT_ATTEMPTS: u32 = 5;

/// What a call waiting at the gate gets back.
enum Reply {
    /// The job's answer (its usage marked batch-priced).
    Answer(LlmResponse),
    /// The job did not answer it: transient (expired, cancelled, missing, the job
    /// failed) or the request's own permanent error.
    Unanswered(LlmError),
    /// The job passed the batch's deadline and was cancelled.
    Deadline(Duration),
}

/// The outcome of a gated LLM call: an answer or a failure, as a live call's; or
/// `Err(limit)` when its job passed the batch's deadline (the run ends
/// `deadline_exceeded`).
pub(crate) type Gated = Result<Result<LlmResponse, LlmError>, Duration>;

/// A call waiting for the next job.
struct Queued {
    custom_id: String,
    line: Vec<u8>,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct State {
    next_seat: u64,
    next_request: u64,
    /// The runs started and not ended.
    active: usize,
    queue: Vec<Queued>,
    /// Calls in `queue`, per seat.
    queued: HashMap<u64, u32>,
    /// When the queue's first call came.
    first_at: Option<Instant>,
    /// Every run of the batch ended: the gate stops once its queue is empty.
    closed: bool,
    /// The driver returned: a call made now fails at once instead of waiting forever.
    stopped: bool,
    report: BatchReport,
}

/// The gate of one batched `run_batch` (see the module docs).
pub(crate) struct Gate {
    wire: Arc<dyn BatchWire>,
    options: ProviderBatch,
    state: Mutex<State>,
    changed: Notify,
}

impl Gate {
    /// A gate over `wire`.
    pub(crate) fn new(wire: Arc<dyn BatchWire>, options: ProviderBatch) -> Arc<Self> {
        Arc::new(Self {
            wire,
            options,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A seat for a run that starts now (it counts as active until dropped).
    pub(crate) fn seat(self: &Arc<Self>) -> Seat {
        let mut s = self.lock();
        let id = s.next_seat;
        s.next_seat += 1;
        s.active += 1;
        drop(s);
        Seat {
            gate: Arc::clone(self),
            id,
        }
    }

    /// Every run ended: [`drive`](Self::drive) returns once nothing waits.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_one();
    }

    /// What the jobs did so far.
    pub(crate) fn report(&self) -> BatchReport {
        self.lock().report.clone()
    }

    fn leave(&self, seat: u64) {
        let mut s = self.lock();
        s.active = s.active.saturating_sub(1);
        s.queued.remove(&seat);
        drop(s);
        self.changed.notify_one();
    }

    /// Takes back a call that stopped waiting (its run was cut off) if it is still
    /// queued; a call already in a job just loses its answer.
    fn withdraw(&self, seat: u64, custom_id: &str) {
        let mut s = self.lock();
        if let Some(at) = s.queue.iter().position(|q| q.custom_id == custom_id) {
            s.queue.remove(at);
            if let Some(n) = s.queued.get_mut(&seat) {
                *n -= 1;
                if *n == 0 {
                    s.queued.remove(&seat);
                }
            }
            if s.queue.is_empty() {
                s.first_at = None;
            }
        }
    }

    /// Runs the jobs until [`close`](Self::close) and an empty queue.
    pub(crate) async fn drive(&self) {
        while let Some(round) = self.next_round().await {
            self.run_job(round).await;
            // Calls that came while the job was in flight get their window from now:
            // the runs the job answered have it to join them.
            let mut s = self.lock();
            if s.first_at.is_some() {
                s.first_at = Some(Instant::now());
            }
        }
    }

    /// Waits for a round: every active run has a call queued, or the first queued call
    /// waited `collect_window`. `None` once closed with nothing queued.
    async fn next_round(&self) -> Option<Vec<Queued>> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let until = {
                let mut s = self.lock();
                match s.first_at {
                    None if s.closed => {
                        s.stopped = true;
                        return None;
                    }
                    None => None,
                    Some(first) => {
                        let due = first + self.options.collect_window;
                        if s.queued.len() >= s.active || Instant::now() >= due {
                            s.first_at = None;
                            s.queued.clear();
                            return Some(std::mem::take(&mut s.queue));
                        }
                        Some(due)
                    }
                }
            };
            match until {
                Some(due) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(due) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// One job: submit, poll until it ends or passes the deadline, answer each call.
    async fn run_job(&self, round: Vec<Queued>) {
        let deadline = self.options.deadline;
        let due = Instant::now() + deadline;
        let mut lines = Vec::with_capacity(round.len());
        let mut waiting: HashMap<String, oneshot::Sender<Reply>> = HashMap::new();
        for q in round {
            lines.push(q.line);
            waiting.insert(q.custom_id, q.reply);
        }
        let count = lines.len();
        {
            let mut s = self.lock();
            s.report.jobs += 1;
            s.report.requests += count as u64;
        }
        let job = match self.submit(&lines, due).await {
            Ok(job) => job,
            Err(None) => return self.deadline_passed(waiting, None).await,
            Err(Some(error)) => return self.unanswered(waiting, &error),
        };
        drop(lines);
        tracing::info!(
            gen_ai.provider.name = self.wire.provider(),
            batch.job = %job,
            batch.requests = count,
            "provider batch job submitted"
        );
        let mut attempt = 0;
        let (results, note) = loop {
            let delay = self.options.poll.delay(attempt, None);
            attempt = attempt.saturating_add(1);
            if Instant::now() + delay >= due {
                tokio::time::sleep_until(due).await;
                return self.deadline_passed(waiting, Some(&job)).await;
            }
            tokio::time::sleep(delay).await;
            match self.wire.poll(&job).await {
                Ok(JobState::Running) => {}
                Ok(JobState::Ended { results, note }) => break (results, note),
                Err(error) if error.is_transient() => {
                    tracing::debug!(batch.job = %job, error = %error.message, "batch poll failed");
                }
                Err(error) => return self.unanswered(waiting, &error),
            }
        };
        let cap = self.wire.max_response_bytes().saturating_mul(count.max(1));
        match self.wire.results(&results, cap).await {
            Ok(lines) => self.answer(&job, waiting, lines, note.as_deref()),
            Err(error) => self.unanswered(waiting, &error),
        }
    }

    /// Submits a job, trying again on transient failures; `Err(None)` when the deadline
    /// passed first.
    async fn submit(&self, lines: &[Vec<u8>], due: Instant) -> Result<String, Option<LlmError>> {
        let mut attempt = 0;
        loop {
            let outcome = tokio::select! {
                outcome = self.wire.submit(lines) => outcome,
                () = tokio::time::sleep_until(due) => return Err(None),
            };
            match outcome {
                Ok(job) => return Ok(job),
                Err(e) if e.is_transient() && attempt + 1 < SUBMIT_ATTEMPTS => {
                    let delay = self.options.poll.delay(attempt, e.retry_after);
                    attempt += 1;
                    if Instant::now() + delay >= due {
                        return Err(None);
                    }
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(Some(e)),
            }
        }
    }

    /// Hands each call its result line; a line naming no call is counted and ignored,
    /// a call with no line is unanswered.
    fn answer(
        &self,
        job: &str,
        mut waiting: HashMap<String, oneshot::Sender<Reply>>,
        lines: Vec<ResultLine>,
        note: Option<&str>,
    ) {
        let (mut answered, mut failed, mut unknown) = (0u64, 0u64, 0u64);
        for line in lines {
            let Some(reply) = waiting.remove(&line.custom_id) else {
                unknown += 1;
                tracing::warn!(
                    batch.job = %job,
                    "a result line of the job names no request waiting in it (unknown or repeated custom_id): ignored"
                );
                continue;
            };
            let sent = match line.outcome {
                Ok(mut response) => {
                    answered += 1;
                    response.usage = response.usage.with_batch(true);
                    Reply::Answer(response)
                }
                Err(error) => {
                    failed += 1;
                    Reply::Unanswered(error)
                }
            };
            let _ = reply.send(sent);
        }
        for (id, reply) in waiting {
            failed += 1;
            let why = note.map_or_else(String::new, |n| format!(" ({n})"));
            let error = LlmError::transient(format!(
                "the provider batch job {job} gave no result for request {id}{why}"
            ));
            let _ = reply.send(Reply::Unanswered(error));
        }
        let mut s = self.lock();
        s.report.answered += answered;
        s.report.unanswered += failed;
        s.report.unknown_results += unknown;
    }

    fn unanswered(&self, waiting: HashMap<String, oneshot::Sender<Reply>>, error: &LlmError) {
        let mut s = self.lock();
        s.report.unanswered += waiting.len() as u64;
        drop(s);
        let mut error = error.clone();
        // The job failed as a whole: its requests may succeed sent again.
        error.kind = crate::llm::LlmErrorKind::Transient;
        for (_, reply) in waiting {
            let _ = reply.send(Reply::Unanswered(error.clone()));
        }
    }

    async fn deadline_passed(
        &self,
        waiting: HashMap<String, oneshot::Sender<Reply>>,
        job: Option<&str>,
    ) {
        if let Some(job) = job {
            tracing::warn!(batch.job = %job, "provider batch job passed its deadline: cancelled");
            if let Err(error) = self.wire.cancel(job).await {
                tracing::warn!(batch.job = %job, error = %error.message, "cancelling the batch job failed");
            }
        }
        let mut s = self.lock();
        s.report.deadline_cancelled += 1;
        s.report.unanswered += waiting.len() as u64;
        drop(s);
        for (_, reply) in waiting {
            let _ = reply.send(Reply::Deadline(self.options.deadline));
        }
    }
}

/// A run's place at the gate: active until dropped.
pub(crate) struct Seat {
    gate: Arc<Gate>,
    id: u64,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.gate.leave(self.id);
    }
}

/// Takes a queued call back if its run stops waiting for it.
struct Waiting<'a> {
    seat: &'a Seat,
    custom_id: String,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.seat.gate.withdraw(self.seat.id, &self.custom_id);
        }
    }
}

impl Seat {
    /// Whether this seat's gate sends to `wire` (the model the call goes to).
    pub(crate) fn serves(&self, wire: &Arc<dyn BatchWire>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.gate.wire), Arc::as_ptr(wire))
    }

    /// One LLM call through the gate; `live` serves it when its job does not and the
    /// fallback is [`BatchFallback::Live`].
    pub(crate) async fn complete(&self, request: &LlmRequest, live: &dyn LlmClient) -> Gated {
        let gate = &self.gate;
        let (custom_id, receiver) = {
            let mut s = gate.lock();
            if s.stopped {
                return Ok(Err(LlmError::transient(
                    "the batch gate was closed and stopped",
                )));
            }
            let n = s.next_request;
            s.next_request += 1;
            let custom_id = format!("s{}-q{n}", self.id);
            let line = match gate.wire.line(&custom_id, request) {
                Ok(line) => line,
                Err(error) => return Ok(Err(error)),
            };
            let (reply, receiver) = oneshot::channel();
            s.queue.push(Queued {
                custom_id: custom_id.clone(),
                line,
                reply,
            });
            *s.queued.entry(self.id).or_insert(0) += 1;
            if s.first_at.is_none() {
                s.first_at = Some(Instant::now());
            }
            (custom_id, receiver)
        };
        gate.changed.notify_one();
        let mut waiting = Waiting {
            seat: self,
            custom_id,
            done: false,
        };
        let reply = receiver.await;
        waiting.done = true;
        match reply {
            Ok(Reply::Answer(response)) => Ok(Ok(response)),
            Ok(Reply::Deadline(limit)) => Err(limit),
            Ok(Reply::Unanswered(error)) if !error.is_transient() => Ok(Err(error)),
            Ok(Reply::Unanswered(error)) => match gate.options.fallback {
                BatchFallback::Live => {
                    {
                        let mut s = gate.lock();
                        s.report.sent_live += 1;
                    }
                    Ok(live.complete(request).await)
                }
                BatchFallback::Fail => Ok(Err(error)),
            },
            Err(_) => Ok(Err(LlmError::transient(
                "the batch gate stopped before the job answered",
            ))),
        }
    }
}
