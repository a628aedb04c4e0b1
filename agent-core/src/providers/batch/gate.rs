//! The gate: the runs of one batched `run_batch` each hold a [`Seat`]; a run's LLM call
//! waits at the gate, and when every active run has a call waiting (or the first one
//! waited `collect_window`), the gate sends them all as one provider job, polls it with
//! backoff until it ends or passes its deadline, and hands each call its answer. A
//! durable run learns which job and line its call is in once the job is accepted
//! ([`Ticket::accepted`]); a resumed run's call that is in a job already waits on it
//! (`resume.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::job::{self, Reply, Waited, as_transient};
use super::options::{BatchFallback, BatchReport, ProviderBatch};
use super::resume::{BatchedCall, Stored};
use super::wire::{BatchWire, ResultLine};
use crate::llm::{LlmClient, LlmError, LlmRequest, LlmResponse};

/// How many times a job's submission is tried on transient failures.
const SUBMIT_ATTEMPTS: u32 = 5;

/// The outcome of a gated LLM call: an answer or a failure, as a live call's; or
/// `Err(limit)` when its job passed the batch's deadline (the run ends
/// `deadline_exceeded`).
pub(crate) type Gated = Result<Result<LlmResponse, LlmError>, Duration>;

/// A call waiting for the next job.
struct Queued {
    custom_id: String,
    line: Vec<u8>,
    reply: oneshot::Sender<Reply>,
    /// Told where the call is once its job is accepted.
    accepted: oneshot::Sender<BatchedCall>,
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
    /// Drawn per gate, in every `custom_id` it writes (`{nonce}-s{seat}-q{n}`): ids
    /// never repeat those of a job an earlier process submitted.
    nonce: String,
    /// The jobs an earlier process submitted that resumed calls wait on.
    stored: Stored,
}

impl Gate {
    /// A gate over `wire`.
    pub(crate) fn new(wire: Arc<dyn BatchWire>, options: ProviderBatch) -> Arc<Self> {
        Arc::new(Self {
            wire,
            options,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            nonce: format!("{:08x}", fastrand::u32(..)),
            stored: Stored::default(),
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
        self.stored.close();
    }

    /// What the jobs did so far (the stored jobs' included).
    pub(crate) fn report(&self) -> BatchReport {
        let mut report = self.lock().report.clone();
        report.absorb(&self.stored.report());
        report
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

    /// Runs the jobs until [`close`](Self::close) and an empty queue, and polls the
    /// stored jobs resumed calls wait on.
    pub(crate) async fn drive(&self) {
        let rounds = async {
            while let Some(round) = self.next_round().await {
                self.run_job(round).await;
                // Calls that came while the job was in flight get their window from
                // now: the runs the job answered have it to join them.
                let mut s = self.lock();
                if s.first_at.is_some() {
                    s.first_at = Some(Instant::now());
                }
            }
        };
        futures::join!(rounds, self.stored.drive(&*self.wire, &self.options));
    }

    /// Waits for a round: every active run has a call queued (or waits on a stored
    /// job), or the first queued call waited `collect_window`. `None` once closed with
    /// nothing queued.
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
                        let ready = s.queued.len() + self.stored.waiting();
                        if ready >= s.active || Instant::now() >= due {
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
        let mut accepted = Vec::with_capacity(round.len());
        for q in round {
            lines.push(q.line);
            accepted.push((q.custom_id.clone(), q.accepted));
            waiting.insert(q.custom_id, q.reply);
        }
        let count = lines.len();
        {
            let mut s = self.lock();
            s.report.jobs += 1;
            s.report.requests += count as u64;
        }
        let submitted_at_ms = crate::store::now_ms();
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
        // Durable runs record where their call is (see `resume.rs`).
        for (custom_id, tell) in accepted {
            let _ = tell.send(BatchedCall {
                provider: self.wire.provider().to_owned(),
                job: job.clone(),
                custom_id,
                submitted_at_ms,
                requests: count as u64,
            });
        }
        let (results, note) = match job::wait(&*self.wire, &self.options.poll, &job, due).await {
            Waited::Ended { results, note } => (results, note),
            Waited::Deadline => return self.deadline_passed(waiting, Some(&job)).await,
            Waited::Failed(error) => return self.unanswered(waiting, &error),
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
        // The job failed as a whole: its requests may succeed sent again.
        let error = as_transient(error);
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
            job::cancel(&*self.wire, job).await;
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

/// A call at the gate: queued for the next job, or waiting on a stored one. Dropped
/// before its answer (its run was cut off), it takes the call back if still queued.
pub(crate) struct Ticket<'s> {
    seat: &'s Seat,
    custom_id: String,
    /// The stored job the call waits on (a resumed call).
    stored: Option<String>,
    accepted: Option<oneshot::Receiver<BatchedCall>>,
    reply: oneshot::Receiver<Reply>,
    done: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        match &self.stored {
            Some(job) => self.seat.gate.stored.withdraw(job, &self.custom_id),
            None => self.seat.gate.withdraw(self.seat.id, &self.custom_id),
        }
    }
}

impl Seat {
    /// Whether this seat's gate sends to `wire` (the model the call goes to).
    pub(crate) fn serves(&self, wire: &Arc<dyn BatchWire>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.gate.wire), Arc::as_ptr(wire))
    }

    /// One LLM call through the gate: queued for the next job, or, when `stored` names
    /// a job of this gate's provider that holds the call already (a resumed run's),
    /// waiting on that job.
    ///
    /// # Errors
    /// A permanent [`LlmError`] when the request cannot be encoded as a line.
    pub(crate) fn send(
        &self,
        request: &LlmRequest,
        stored: Option<&BatchedCall>,
    ) -> Result<Ticket<'_>, LlmError> {
        let gate = &self.gate;
        // One lock from the check to the queueing: a gate that stopped takes no call
        // (nothing would ever answer it).
        let mut s = gate.lock();
        if s.stopped {
            return Err(LlmError::transient("the batch gate was closed and stopped"));
        }
        if let Some(call) = stored.filter(|c| c.provider == gate.wire.provider()) {
            let reply = gate.stored.wait(call);
            drop(s);
            gate.changed.notify_one();
            return Ok(Ticket {
                seat: self,
                custom_id: call.custom_id.clone(),
                stored: Some(call.job.clone()),
                accepted: None,
                reply,
                done: false,
            });
        }
        let (custom_id, reply, accepted) = {
            let n = s.next_request;
            s.next_request += 1;
            let custom_id = format!("{}-s{}-q{n}", gate.nonce, self.id);
            let line = gate.wire.line(&custom_id, request)?;
            let (reply, reply_rx) = oneshot::channel();
            let (accepted, accepted_rx) = oneshot::channel();
            s.queue.push(Queued {
                custom_id: custom_id.clone(),
                line,
                reply,
                accepted,
            });
            *s.queued.entry(self.id).or_insert(0) += 1;
            if s.first_at.is_none() {
                s.first_at = Some(Instant::now());
            }
            (custom_id, reply_rx, accepted_rx)
        };
        drop(s);
        gate.changed.notify_one();
        Ok(Ticket {
            seat: self,
            custom_id,
            stored: None,
            accepted: Some(accepted),
            reply,
            done: false,
        })
    }
}

impl Ticket<'_> {
    /// Waits until the provider accepted the job the call is in and returns where it
    /// is; `None` for a call waiting on a stored job (recorded already) or one whose
    /// job was never accepted (its answer follows at once).
    pub(crate) async fn accepted(&mut self) -> Option<BatchedCall> {
        self.accepted.take()?.await.ok()
    }

    /// The call's answer; `live` serves it when its job does not and the fallback is
    /// [`BatchFallback::Live`].
    pub(crate) async fn answer(mut self, request: &LlmRequest, live: &dyn LlmClient) -> Gated {
        let reply = (&mut self.reply).await;
        self.done = true;
        let gate = &self.seat.gate;
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
