//! [`CheckpointStore`]: a run's state at every transition boundary and its tool-effect
//! ledger, so a run survives the process that runs it (see `docs/durable.md`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::output::OutputMode;
use crate::store::{StoreError, StoreFuture};

/// Where runs keep their checkpoints and their tool-effect ledger.
///
/// With `.checkpoints(store)` on the builder, the runner saves the run's state (one row
/// per run, replaced in place) before every LLM call, before the tools of a turn run,
/// and when the run ends; and records each tool execution in the ledger before it
/// starts and after it returns. It writes through
/// [`save_boundary`](Self::save_boundary) (a checkpoint with the ledger entries that go
/// with it; its default calls [`save_fenced`](Self::save_fenced),
/// [`record_tool_fenced`](Self::record_tool_fenced) and
/// [`record_tool`](Self::record_tool)). Every call is awaited before the run goes on,
/// bounded by `store_timeout`; a call that fails is counted in
/// [`AgentResult::store_failures`](crate::AgentResult::store_failures) and the run goes
/// on (its crash guarantee then degrades: see `docs/durable.md`).
/// [`resume_agent`](crate::resume_agent) reads both back.
///
/// A store keeps the record and the entries as given: it never interprets
/// [`CheckpointRecord::header`] or [`CheckpointRecord::state`] (JSON text the runner
/// writes and reads). `agent-store` implements it on SQLite and PostgreSQL;
/// [`InMemoryCheckpoints`] keeps everything in the process (tests).
pub trait CheckpointStore: Send + Sync {
    /// Stores the run's latest checkpoint, replacing the one stored under its run id
    /// (an upsert). Resolves once the checkpoint is durable.
    ///
    /// # Errors
    /// A [`StoreError`] when it cannot be stored.
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()>;

    /// Stores the run's checkpoint only if the run is still the writer's
    /// ([`CheckpointRecord::writer`]): nothing is stored under its run id, or the stored
    /// checkpoint's `seq` is `taken_at` (the checkpoint this writer took the run over
    /// from; 0 for a fresh run, which no stored checkpoint has), or the stored one was
    /// written by the same writer. Check and write are one atomic step: of two writers
    /// that took the run over from the same checkpoint, exactly one stores its next
    /// one, and the other is [`SaveOutcome::Fenced`] from then on (the stored writer is
    /// no longer its own, and `seq` only grows). The runner saves through this method
    /// (see `docs/durable.md`, "One process per run").
    ///
    /// # Errors
    /// A [`StoreError`] when it cannot be stored or the condition cannot be checked
    /// (then it may or may not have been stored). A refused save is not an error.
    fn save_fenced<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
        taken_at: u64,
    ) -> StoreFuture<'a, SaveOutcome>;

    /// Stores a ledger entry (as [`record_tool`](Self::record_tool)) only if no
    /// checkpoint is stored under its run id or the stored one was written by `writer`;
    /// atomically with respect to [`save_fenced`](Self::save_fenced): a save that takes
    /// the run over either comes first (and this entry is [`SaveOutcome::Fenced`]) or
    /// after it (and the ledger read that follows the take-over sees this entry). The
    /// runner writes `started` through it, so a process that lost the run starts no
    /// more tools.
    ///
    /// # Errors
    /// A [`StoreError`] when it cannot be stored or the condition cannot be checked.
    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome>;

    /// The latest checkpoint of the run, if any.
    ///
    /// # Errors
    /// A [`StoreError`] when the store cannot be read.
    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>>;

    /// Stores a ledger entry, replacing the one stored under its run id and call id (an
    /// upsert: `started`, then `completed`). Resolves once it is durable.
    ///
    /// # Errors
    /// A [`StoreError`] when it cannot be stored.
    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()>;

    /// Stores the writes of one boundary together: first the `entries` that finished
    /// (completed or deferred: stored whatever the fence, as
    /// [`record_tool`](Self::record_tool)), then the `checkpoint` when there is one
    /// (with its `taken_at`, fenced as [`save_fenced`](Self::save_fenced)), then the
    /// entries that started (fenced as [`record_tool_fenced`](Self::record_tool_fenced)
    /// with `writer`). Returns [`SaveOutcome::Fenced`] when the checkpoint or a started
    /// entry was refused. The runner writes through it, so that a tool turn costs two
    /// awaited writes instead of four: the turn's `tools_pending` checkpoint goes with
    /// the first `started` entry, and the last `completed` entry with the next
    /// checkpoint (see `docs/durable.md`, "Writes per turn").
    ///
    /// The default makes the calls above one after the other and stops at the first
    /// error or refusal; a store that can should make them one atomic step (one
    /// transaction: a refused checkpoint then stores no started entry), as
    /// `agent-store` does.
    ///
    /// # Errors
    /// A [`StoreError`] when a write fails (the writes before it may be stored; in an
    /// atomic store, none is).
    fn save_boundary<'a>(
        &'a self,
        checkpoint: Option<(&'a CheckpointRecord, u64)>,
        entries: &'a [LedgerEntry],
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        Box::pin(async move {
            let started = |e: &&LedgerEntry| e.status == LedgerStatus::Started;
            for entry in entries.iter().filter(|e| !started(e)) {
                self.record_tool(entry).await?;
            }
            if let Some((checkpoint, taken_at)) = checkpoint
                && self.save_fenced(checkpoint, taken_at).await? == SaveOutcome::Fenced
            {
                return Ok(SaveOutcome::Fenced);
            }
            for entry in entries.iter().filter(started) {
                if self.record_tool_fenced(entry, writer).await? == SaveOutcome::Fenced {
                    return Ok(SaveOutcome::Fenced);
                }
            }
            Ok(SaveOutcome::Saved)
        })
    }

    /// Moves the lease of the run on to `until_ms` ([`CheckpointRecord::lease_until_ms`])
    /// if its stored checkpoint is still `writer`'s, running (not finished) and held
    /// (a lease above 0: a paused run holds none); else stores nothing and returns
    /// [`SaveOutcome::Fenced`]. The runner calls it every third of the lease while a
    /// run is between writes. The default stores nothing and returns
    /// [`SaveOutcome::Saved`] (a store without leases: a run's lease then moves only
    /// with its saves).
    ///
    /// # Errors
    /// A [`StoreError`] when it cannot be stored.
    fn renew_lease<'a>(
        &'a self,
        run_id: &'a str,
        writer: &'a str,
        until_ms: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        let _ = (run_id, writer, until_ms);
        Box::pin(async { Ok(SaveOutcome::Saved) })
    }

    /// The checkpoints of runs that have not finished (running, interrupted or
    /// paused), at most `limit`, most recently saved first.
    ///
    /// # Errors
    /// A [`StoreError`] when the store cannot be read.
    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>>;

    /// Every ledger entry of the run, in any order.
    ///
    /// # Errors
    /// A [`StoreError`] when the store cannot be read.
    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>>;
}

/// One run's checkpoint as stored: a few columns a store may index, and two JSON texts
/// the runner writes and reads back.
///
/// Size: `header` is written once per run and does not grow (the input, the system
/// prompt, the output schema, every tool's parameter schema); `state` holds the whole
/// transcript so far, so it grows with the turns (about the size of the messages, plus
/// a few hundred bytes of counters), and each save rewrites it: a run of `n` turns
/// writes `O(n²)` bytes over its life, one row at any time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CheckpointRecord {
    /// The run id (see [`RunOptions::run_id`](crate::RunOptions::run_id)).
    pub run_id: String,
    /// The boundary number: 1 for the first save of the run, one more per save.
    pub seq: u64,
    /// Whether the run has ended (`state` then holds its result).
    pub finished: bool,
    /// The fingerprint of the config that ran it ([`AgentConfig::fingerprint`](crate::AgentConfig::fingerprint)).
    pub fingerprint: String,
    /// When this checkpoint was saved (ms since the Unix epoch).
    pub updated_at_ms: u64,
    /// Who wrote it: a random token (32 hex digits) that each process running the run
    /// draws when it starts or resumes it; what [`CheckpointStore::save_fenced`] checks.
    /// Empty for checkpoints written without one (before fencing).
    /// [`record_decisions`](crate::durable::record_decisions) writes under a token of
    /// its own, so its write is stored only if the checkpoint is still the one it read.
    #[serde(default)]
    pub writer: String,
    /// Until when the writer holds the run (ms since the Unix epoch): each save of a
    /// running run sets it to the save's time plus the run's lease
    /// ([`LEASE`](crate::durable::LEASE)), so a process that stops writing loses it after
    /// that long; 0 for a run no process holds (paused, finished, or written before
    /// leases). A sweeper takes over only runs whose lease lapsed; a process whose run
    /// was taken over is fenced at its next write whatever its lease said.
    #[serde(default)]
    pub lease_until_ms: u64,
    /// What does not change during the run (JSON; the runner's own format, versioned).
    pub header: String,
    /// The run's state at this boundary (JSON; the runner's own format, versioned).
    pub state: String,
}

/// What a fenced write did ([`CheckpointStore::save_fenced`],
/// [`CheckpointStore::record_tool_fenced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaveOutcome {
    /// Stored: the run is still this writer's.
    Saved,
    /// Not stored: another writer took the run over (it stored a checkpoint of its own
    /// since this writer's last one).
    Fenced,
}

/// One tool execution in the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LedgerEntry {
    /// The run id.
    pub run_id: String,
    /// The call id (unique within the run).
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// 16 lowercase hex digits: FNV-1a 64 of the call's canonical arguments (keys
    /// sorted, no whitespace).
    pub arguments_hash: String,
    /// Started, or completed with its result.
    pub status: LedgerStatus,
}

/// Where a tool execution got to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LedgerStatus {
    /// Written before the tool's code starts.
    Started,
    /// Written after it returned (or failed, panicked, timed out): what the model was
    /// given.
    Completed {
        /// The tool result's content (after truncation to `max_tool_result_bytes`).
        content: String,
        /// Whether the result is an error.
        is_error: bool,
        /// Whether the tool said it cannot safely continue (`ToolError::fatal`).
        fatal: bool,
    },
    /// Written after the tool returned [`ToolError::deferred`](crate::ToolError::deferred):
    /// its result comes from outside, and the run pauses for it. The tool does not run
    /// again; the result comes with the decisions of a resume.
    Deferred {
        /// What the tool said about where the result comes from.
        note: String,
    },
}

impl LedgerStatus {
    /// `started`, `completed` or `deferred`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LedgerStatus::Started => "started",
            LedgerStatus::Completed { .. } => "completed",
            LedgerStatus::Deferred { .. } => "deferred",
        }
    }
}

/// Why [`resume_agent`](crate::resume_agent) could not continue a run. Nothing was sent
/// and nothing was written.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// Another process took the run over between this resume's read of the checkpoint
    /// and its claim (the first fenced save, which makes the run this process's): the
    /// run goes on there; this resume ran nothing. From
    /// [`record_decisions`](crate::durable::record_decisions): other writes came between
    /// each of its 8 reads and its write; nothing was recorded.
    #[error("run {run_id} was taken over by another process while this one resumed it")]
    Fenced {
        /// The run id.
        run_id: String,
    },
    /// The config has no checkpoint store (`.checkpoints(..)` on the builder).
    #[error("the config has no checkpoint store; set one with .checkpoints(..)")]
    NoCheckpointStore,
    /// No checkpoint is stored under this run id.
    #[error("no checkpoint is stored for run {run_id}")]
    UnknownRun {
        /// The run id asked for.
        run_id: String,
    },
    /// The checkpoint or the ledger could not be read, or the claim that takes the run
    /// over could not be written (the store failed or timed out).
    #[error("the checkpoint of run {run_id} cannot be read: {error}")]
    Unreadable {
        /// The run id.
        run_id: String,
        /// The store's failure.
        error: StoreError,
    },
    /// The stored checkpoint does not decode (written by another version, or damaged).
    #[error("the checkpoint of run {run_id} is unusable: {message}")]
    Corrupt {
        /// The run id.
        run_id: String,
        /// What is wrong.
        message: String,
    },
    /// Decisions were given (or recorded) for a run that is not paused: it is running,
    /// finished, or a resume already took its decisions (resuming twice).
    #[error("run {run_id} is not paused, so it takes no decisions")]
    NotPaused {
        /// The run id.
        run_id: String,
    },
    /// The decisions do not fit the paused run's pending calls; nothing ran and nothing
    /// was stored.
    #[error("the decisions for run {run_id} cannot be applied: {}", Joined(.problems))]
    Decisions {
        /// The run id.
        run_id: String,
        /// Every problem found: unknown call ids, wrong kinds and invalid edits in the
        /// order of the call ids, then the pending calls without a decision.
        problems: Vec<crate::pause::DecisionProblem>,
    },
    /// The config differs from the one that ran the run in its output contract or its
    /// tools, so the stored transcript cannot be continued with it.
    #[error("run {run_id} cannot be resumed with this config: {}", Joined(.differences))]
    ConfigMismatch {
        /// The run id.
        run_id: String,
        /// Every difference found, output first, then tools by name.
        differences: Vec<ConfigDifference>,
    },
}

/// One way the resuming config differs from the checkpoint's.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigDifference {
    /// The output's JSON Schema differs (`None`: compat mode, no schema).
    OutputSchema {
        /// The checkpoint's.
        stored: Option<Value>,
        /// The config's.
        current: Option<Value>,
    },
    /// The resolved output mode differs.
    OutputMode {
        /// The checkpoint's.
        stored: OutputMode,
        /// The config's.
        current: OutputMode,
    },
    /// The checkpoint's run had this tool; the config has not.
    ToolRemoved {
        /// The tool's name.
        name: String,
    },
    /// The config has this tool; the checkpoint's run had not.
    ToolAdded {
        /// The tool's name.
        name: String,
    },
    /// Both have the tool, with different parameter schemas.
    ToolParameters {
        /// The tool's name.
        name: String,
    },
    /// The run had handed the conversation to this agent, and the config no longer
    /// hands off to it (on the path of the run's handoffs).
    HandoffRemoved {
        /// The agent's name.
        agent: String,
    },
    /// The run had switched to this fallback model, and the config no longer lists
    /// that many models.
    ModelRemoved {
        /// The index of the model the run was on (0 the primary, `i` fallback `i - 1`).
        route: usize,
    },
}

impl fmt::Display for ConfigDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigDifference::OutputSchema { .. } => f.write_str("the output schema differs"),
            ConfigDifference::OutputMode { stored, current } => {
                write!(
                    f,
                    "the output mode differs ({stored:?} then, {current:?} now)"
                )
            }
            ConfigDifference::ToolRemoved { name } => write!(f, "tool {name} was removed"),
            ConfigDifference::ToolAdded { name } => write!(f, "tool {name} was added"),
            ConfigDifference::ToolParameters { name } => {
                write!(f, "tool {name} has other parameters")
            }
            ConfigDifference::HandoffRemoved { agent } => write!(
                f,
                "the run had handed the conversation to the {agent} agent, which the config \
                 no longer hands off to"
            ),
            ConfigDifference::ModelRemoved { route } => write!(
                f,
                "the run was on fallback model {route}, which the config no longer lists"
            ),
        }
    }
}

/// Items shown one after the other, separated by `; `.
struct Joined<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for Joined<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// A [`CheckpointStore`] in the process's memory (for tests and examples: nothing
/// survives the process). Cheap to clone; clones share the contents.
#[derive(Clone, Default)]
pub struct InMemoryCheckpoints {
    inner: Arc<Mutex<Contents>>,
}

#[derive(Default)]
struct Contents {
    checkpoints: HashMap<String, CheckpointRecord>,
    ledger: HashMap<(String, String), LedgerEntry>,
    saves: u64,
}

impl InMemoryCheckpoints {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many saves and ledger writes it took so far.
    pub fn writes(&self) -> u64 {
        self.lock().saves
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Contents> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for InMemoryCheckpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.lock();
        f.debug_struct("InMemoryCheckpoints")
            .field("runs", &c.checkpoints.len())
            .field("ledger", &c.ledger.len())
            .finish()
    }
}

impl CheckpointStore for InMemoryCheckpoints {
    fn save<'a>(&'a self, checkpoint: &'a CheckpointRecord) -> StoreFuture<'a, ()> {
        let mut c = self.lock();
        c.saves += 1;
        c.checkpoints
            .insert(checkpoint.run_id.clone(), checkpoint.clone());
        Box::pin(async { Ok(()) })
    }

    fn save_fenced<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
        taken_at: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        let mut c = self.lock();
        c.saves += 1;
        let ours = c
            .checkpoints
            .get(&checkpoint.run_id)
            .is_none_or(|stored| stored.seq == taken_at || (stored.writer == checkpoint.writer));
        let outcome = if ours {
            c.checkpoints
                .insert(checkpoint.run_id.clone(), checkpoint.clone());
            SaveOutcome::Saved
        } else {
            SaveOutcome::Fenced
        };
        Box::pin(async move { Ok(outcome) })
    }

    fn record_tool_fenced<'a>(
        &'a self,
        entry: &'a LedgerEntry,
        writer: &'a str,
    ) -> StoreFuture<'a, SaveOutcome> {
        let mut c = self.lock();
        c.saves += 1;
        let ours = c
            .checkpoints
            .get(&entry.run_id)
            .is_none_or(|stored| stored.writer == writer);
        let outcome = if ours {
            c.ledger
                .insert((entry.run_id.clone(), entry.call_id.clone()), entry.clone());
            SaveOutcome::Saved
        } else {
            SaveOutcome::Fenced
        };
        Box::pin(async move { Ok(outcome) })
    }

    fn renew_lease<'a>(
        &'a self,
        run_id: &'a str,
        writer: &'a str,
        until_ms: u64,
    ) -> StoreFuture<'a, SaveOutcome> {
        let mut c = self.lock();
        let outcome = match c.checkpoints.get_mut(run_id) {
            Some(stored)
                if stored.writer == writer && !stored.finished && stored.lease_until_ms > 0 =>
            {
                stored.lease_until_ms = until_ms;
                SaveOutcome::Saved
            }
            _ => SaveOutcome::Fenced,
        };
        Box::pin(async move { Ok(outcome) })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<CheckpointRecord>> {
        let found = self.lock().checkpoints.get(run_id).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn record_tool<'a>(&'a self, entry: &'a LedgerEntry) -> StoreFuture<'a, ()> {
        let mut c = self.lock();
        c.saves += 1;
        c.ledger
            .insert((entry.run_id.clone(), entry.call_id.clone()), entry.clone());
        Box::pin(async { Ok(()) })
    }

    fn unfinished<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<CheckpointRecord>> {
        let mut found: Vec<CheckpointRecord> = self
            .lock()
            .checkpoints
            .values()
            .filter(|c| !c.finished)
            .cloned()
            .collect();
        found.sort_by_key(|c| std::cmp::Reverse(c.updated_at_ms));
        found.truncate(limit);
        Box::pin(async move { Ok(found) })
    }

    fn ledger<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<LedgerEntry>> {
        let entries = self
            .lock()
            .ledger
            .values()
            .filter(|e| e.run_id == run_id)
            .cloned()
            .collect();
        Box::pin(async move { Ok(entries) })
    }
}
