//! [`Queue`]: the JetStream streams and the consumer the workers share.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer, stream};

use crate::error::QueueError;
use crate::job::Job;

/// Where and how the queue lives. Every name derives from `namespace`, so several
/// queues (or test runs) share one server without seeing each other.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct QueueOptions {
    /// The NATS server (default `nats://127.0.0.1:4222`).
    pub url: String,
    /// The prefix of every subject and stream (letters, digits, `_`, `-`; default
    /// `agents`). Subjects: `<ns>.jobs`, `<ns>.results`, `<ns>.dead`; streams:
    /// `<NS>_JOBS` (work-queue retention) and `<NS>_EVENTS` (results and dead letters).
    pub namespace: String,
    /// How long a delivered job may go unacknowledged before JetStream delivers it
    /// again (default 30 s). A worker that is still running the job says so every
    /// third of it (an in-progress ack), so only a dead or stalled worker loses it.
    /// It is set on the workers' consumer when the first connection creates it; later
    /// connections use the consumer's value.
    pub ack_wait: Duration,
    /// Deliveries after which a job that was never acked is dead-lettered instead of
    /// run (default 3): a run that crashes its worker each time crashes at most this
    /// many workers. Each worker applies its own setting: give them all the same.
    pub max_deliveries: u64,
    /// How long results and dead letters are kept in the events stream (default 24 h).
    pub events_max_age: Duration,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            url: "nats://127.0.0.1:4222".to_owned(),
            namespace: "agents".to_owned(),
            ack_wait: Duration::from_secs(30),
            max_deliveries: 3,
            events_max_age: Duration::from_secs(24 * 3600),
        }
    }
}

impl QueueOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The NATS server URL.
    #[must_use]
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// The namespace of subjects and streams.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The ack wait (at least 100 ms).
    #[must_use]
    pub fn ack_wait(mut self, wait: Duration) -> Self {
        self.ack_wait = wait.max(Duration::from_millis(100));
        self
    }

    /// Deliveries before a job is dead-lettered (at least 1).
    #[must_use]
    pub fn max_deliveries(mut self, n: u64) -> Self {
        self.max_deliveries = n.max(1);
        self
    }
}

/// One event of the queue's events stream (see [`Queue::events`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum QueueEvent {
    /// A job's result was stored.
    Done(crate::Done),
    /// A job was set aside without a result.
    Dead(crate::DeadLetter),
}

/// A connection to the queue: submit jobs, or take them as a worker. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Queue {
    pub(crate) js: jetstream::Context,
    pub(crate) options: QueueOptions,
}

/// The durable consumer every worker pulls from.
const CONSUMER: &str = "workers";

impl Queue {
    /// Connects and creates the streams and the workers' consumer if missing.
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for a bad namespace; [`QueueError::Nats`] when the server
    /// cannot be reached or refuses the streams.
    pub async fn connect(options: QueueOptions) -> Result<Self, QueueError> {
        let ns = &options.namespace;
        if ns.is_empty()
            || !ns
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(QueueError::invalid(format!(
                "namespace {ns:?}: use letters, digits, '_' and '-'"
            )));
        }
        let client = async_nats::connect(options.url.as_str())
            .await
            .map_err(QueueError::nats)?;
        let js = jetstream::new(client);
        let queue = Self { js, options };
        queue.ensure().await?;
        Ok(queue)
    }

    async fn ensure(&self) -> Result<(), QueueError> {
        let jobs = self
            .js
            .get_or_create_stream(stream::Config {
                name: self.stream_name("JOBS"),
                subjects: vec![self.subject("jobs")],
                retention: stream::RetentionPolicy::WorkQueue,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await
            .map_err(QueueError::nats)?;
        self.js
            .get_or_create_stream(stream::Config {
                name: self.stream_name("EVENTS"),
                subjects: vec![self.subject("results"), self.subject("dead")],
                max_age: self.options.events_max_age,
                ..Default::default()
            })
            .await
            .map_err(QueueError::nats)?;
        jobs.get_or_create_consumer(
            CONSUMER,
            consumer::pull::Config {
                durable_name: Some(CONSUMER.to_owned()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: self.options.ack_wait,
                // Unlimited here: the workers count deliveries themselves and
                // dead-letter a job past `max_deliveries` (so it is reported).
                max_deliver: -1,
                max_ack_pending: 100_000,
                ..Default::default()
            },
        )
        .await
        .map_err(QueueError::nats)?;
        Ok(())
    }

    /// The options the queue was opened with.
    pub fn options(&self) -> &QueueOptions {
        &self.options
    }

    /// `<namespace>.<leaf>`.
    pub fn subject(&self, leaf: &str) -> String {
        format!("{}.{leaf}", self.options.namespace)
    }

    /// `<NAMESPACE>_<leaf>` (stream names take no dots).
    pub fn stream_name(&self, leaf: &str) -> String {
        format!(
            "{}_{leaf}",
            self.options
                .namespace
                .to_ascii_uppercase()
                .replace('-', "_")
        )
    }

    /// Puts one job on the queue and waits for JetStream to store it. The run id is
    /// also the message id, so submitting the same job again within two minutes is a
    /// no-op (JetStream's duplicate window).
    ///
    /// # Errors
    /// [`QueueError::Invalid`] for an empty run id; [`QueueError::Nats`] when the
    /// server does not store it.
    pub async fn submit(&self, job: &Job) -> Result<(), QueueError> {
        self.submit_many(std::slice::from_ref(job)).await
    }

    /// Puts the job of a paused run back on the queue once its decisions are recorded
    /// (`agent_core::durable::record_decisions`), so that a worker continues the run from its
    /// checkpoint. Unlike [`submit`](Self::submit) it is never dropped as a duplicate:
    /// its message id is the run id with a `:resume:` suffix unique to this call. A
    /// resume sent twice, or for a run that is not paused, is harmless: the worker
    /// finds the stored result and only acks; one sent before every pending call has
    /// a decision is acked without running ([`WorkerReport::waiting`](crate::WorkerReport::waiting)).
    ///
    /// The job must name the agent that ran it; its input is not used (the
    /// checkpoint's is). A paused record holds both: `Job::new(record.agent,
    /// record.input, record.trace_id)`.
    ///
    /// # Errors
    /// As [`submit`](Self::submit).
    pub async fn resume(&self, job: &Job) -> Result<(), QueueError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!("{}:resume:{nanos:x}:{:x}", job.run_id, fastrand::u32(..));
        let mut outcomes = self.publish(&[(job, Some(id))]).await;
        outcomes.pop().map_or(Ok(()), |o| o.map(drop))
    }

    /// Puts the job of an unfinished run the sweeper found back on the queue, under
    /// the message id `<run id>:sweep:<lease end>`: workers that find the same lapsed
    /// lease at once put it back once (JetStream's duplicate window).
    pub(crate) async fn sweep(&self, job: &Job, lease_until_ms: u64) -> Result<(), QueueError> {
        let id = format!("{}:sweep:{lease_until_ms}", job.run_id);
        let mut outcomes = self.publish(&[(job, Some(id))]).await;
        outcomes.pop().map_or(Ok(()), |o| o.map(drop))
    }

    /// Puts many jobs on the queue (pipelined: up to 256 awaiting their store
    /// acknowledgement at once) and waits until every one is stored.
    ///
    /// # Errors
    /// As [`submit`](Self::submit) (the first failure); the other jobs may be on the
    /// queue.
    pub async fn submit_many(&self, jobs: &[Job]) -> Result<(), QueueError> {
        let refs: Vec<&Job> = jobs.iter().collect();
        for outcome in self.publish_jobs(&refs).await {
            outcome?;
        }
        Ok(())
    }

    /// Publishes each job (pipelined as in [`submit_many`](Self::submit_many)); one
    /// outcome per job, in order: whether JetStream dropped it as a duplicate of a
    /// message id it had seen within its window, or why it failed.
    pub(crate) async fn publish_jobs(&self, jobs: &[&Job]) -> Vec<Result<bool, QueueError>> {
        let with_ids: Vec<(&Job, Option<String>)> = jobs.iter().map(|job| (*job, None)).collect();
        self.publish(&with_ids).await
    }

    /// As [`publish_jobs`](Self::publish_jobs), each job under its message id (the
    /// run id when `None`).
    async fn publish(&self, jobs: &[(&Job, Option<String>)]) -> Vec<Result<bool, QueueError>> {
        use futures::StreamExt;
        let subject = self.subject("jobs");
        // Futures made up front (see `run_jobs_queued`).
        let publishes: Vec<_> = jobs
            .iter()
            .map(|(job, id)| {
                let subject = subject.clone();
                async move {
                    if job.run_id.is_empty() || job.run_id.contains('\0') {
                        return Err(QueueError::invalid(
                            "a run id must be non-empty, without NUL",
                        ));
                    }
                    let payload = serde_json::to_vec(job)
                        .map_err(|e| QueueError::invalid(format!("job does not encode: {e}")))?;
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert("Nats-Msg-Id", id.as_deref().unwrap_or(&job.run_id));
                    let ack = self
                        .js
                        .publish_with_headers(subject, headers, payload.into())
                        .await
                        .map_err(QueueError::nats)?;
                    ack.await.map_err(QueueError::nats).map(|a| a.duplicate)
                }
            })
            .collect();
        futures::stream::iter(publishes)
            .buffered(256)
            .collect()
            .await
    }

    /// Jobs not yet done: waiting on the queue, or delivered to a worker and not yet
    /// acked (the workers' consumer's pending and ack-pending counts). A job the
    /// consumer has acked is not counted even when the server still holds its message
    /// (after a `kill -9`, JetStream may keep acked messages of a work queue that it
    /// never delivers again). A job whose result is stored but whose ack was lost is
    /// counted until its redelivery is acked (within the ack wait).
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the stream or its consumer cannot be read.
    pub async fn pending(&self) -> Result<u64, QueueError> {
        let consumer = self.consumer().await?;
        let info = consumer.cached_info();
        Ok(info.num_pending + info.num_ack_pending as u64)
    }

    /// Messages the jobs stream holds, acked or not (see [`pending`](Self::pending)).
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the stream cannot be read.
    pub async fn stored_jobs(&self) -> Result<u64, QueueError> {
        let mut stream = self
            .js
            .get_stream(self.stream_name("JOBS"))
            .await
            .map_err(QueueError::nats)?;
        let info = stream.info().await.map_err(QueueError::nats)?;
        Ok(info.state.messages)
    }

    pub(crate) async fn consumer(
        &self,
    ) -> Result<consumer::Consumer<consumer::pull::Config>, QueueError> {
        self.js
            .get_consumer_from_stream(CONSUMER, self.stream_name("JOBS"))
            .await
            .map_err(QueueError::nats)
    }

    /// The events published from now on: each [`Done`](crate::Done) on `<ns>.results`
    /// and [`DeadLetter`](crate::DeadLetter) on `<ns>.dead`, in order (an ordered
    /// consumer of the events stream, starting after its last message). Open it before
    /// submitting the job whose end it waits for. Events that do not decode are
    /// skipped; the stream ends when the connection does.
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the events stream cannot be read.
    pub async fn events(
        &self,
    ) -> Result<impl futures::Stream<Item = QueueEvent> + Send + Unpin + use<>, QueueError> {
        use futures::StreamExt;
        let consumer = self
            .js
            .create_consumer_on_stream(
                consumer::pull::OrderedConfig {
                    deliver_policy: consumer::DeliverPolicy::New,
                    ..Default::default()
                },
                self.stream_name("EVENTS"),
            )
            .await
            .map_err(QueueError::nats)?;
        let messages = consumer.messages().await.map_err(QueueError::nats)?;
        let dead = self.subject("dead");
        let events = messages.filter_map(move |message| {
            let event = message.ok().and_then(|m| {
                if m.subject.as_str() == dead {
                    serde_json::from_slice(&m.payload)
                        .ok()
                        .map(QueueEvent::Dead)
                } else {
                    serde_json::from_slice(&m.payload)
                        .ok()
                        .map(QueueEvent::Done)
                }
            });
            std::future::ready(event)
        });
        Ok(Box::pin(events))
    }

    /// Deletes the queue's streams (and so its jobs, results and dead letters) and its
    /// rate limiters' bucket. For tests and tear-down.
    ///
    /// # Errors
    /// [`QueueError::Nats`] when the server refuses.
    pub async fn delete(&self) -> Result<(), QueueError> {
        for leaf in ["JOBS", "EVENTS"] {
            self.js
                .delete_stream(self.stream_name(leaf))
                .await
                .map_err(QueueError::nats)?;
        }
        // The rate limiters' bucket, when one was opened.
        let _ = self
            .js
            .delete_stream(format!("KV_{}", self.stream_name("RATE")))
            .await;
        Ok(())
    }
}
