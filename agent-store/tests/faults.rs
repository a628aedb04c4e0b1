//! Faults an operator meets, with servers and files of the test's own: an SQLite file
//! deleted or replaced under an open store while a batch writes to it (C42), and a
//! PostgreSQL cluster of this test's own (`initdb` on a free port) killed with SIGKILL
//! and restarted in the middle of a batch. Without the PostgreSQL binaries the
//! PostgreSQL test is skipped with a message, except under `CI=true`, where that is a
//! failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::store::{
    EvalExample, EvalFilter, Feedback, FeedbackStore, RunQuery, RunRecord, StoreFuture, StoreKind,
    TraceRecord, TraceStore,
};
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, Ending, eval::run_batch, observe::RunEvent, store::StoreError};
use agent_store::{Store, StoreOptions};

/// One `StoreFailed` event: (trace id, store, error).
type Failure = (String, StoreKind, StoreError);

/// What happens to the file at the `at`-th record call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `rm runs.db runs.db-wal runs.db-shm`.
    Delete,
    /// The three files moved to `moved.db*`, and a new store's file put at the path.
    Replace,
}

/// The store under test, which does the fault to its file at the `at`-th record call
/// and notes, for every write, whether it began after the fault and whether it was
/// reported stored.
struct Faulty {
    store: Store,
    dir: PathBuf,
    fault: Fault,
    at: usize,
    calls: AtomicUsize,
    done: AtomicBool,
    /// (trace id, store, began after the fault, reported stored).
    writes: Mutex<Vec<(String, StoreKind, bool, bool)>>,
}

fn files(dir: &Path, stem: &str) -> [PathBuf; 3] {
    ["", "-wal", "-shm"].map(|suffix| dir.join(format!("{stem}.db{suffix}")))
}

impl Faulty {
    async fn fault(&self) {
        let [db, wal, shm] = files(&self.dir, "runs");
        match self.fault {
            Fault::Delete => {
                for file in [&db, &wal, &shm] {
                    std::fs::remove_file(file).unwrap();
                }
            }
            Fault::Replace => {
                let moved = files(&self.dir, "moved");
                for (from, to) in [&db, &wal, &shm].into_iter().zip(&moved) {
                    std::fs::rename(from, to).unwrap();
                }
                // Another database at the path (made and closed by another store).
                let other = Store::open(db.to_str().unwrap()).await.unwrap();
                other.close().await.unwrap();
            }
        }
        self.done.store(true, Ordering::SeqCst);
    }

    async fn noted(
        &self,
        id: &str,
        kind: StoreKind,
        write: impl Future<Output = Result<(), StoreError>>,
    ) -> Result<(), StoreError> {
        let after = self.done.load(Ordering::SeqCst);
        let outcome = write.await;
        self.writes
            .lock()
            .unwrap()
            .push((id.to_owned(), kind, after, outcome.is_ok()));
        outcome
    }
}

impl FeedbackStore for Faulty {
    fn record<'a>(&'a self, run: &'a RunRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
                self.fault().await;
            }
            self.noted(&run.trace_id, StoreKind::Feedback, self.store.record(run))
                .await
        })
    }
    fn attach_feedback<'a>(&'a self, id: &'a str, f: &'a Feedback) -> StoreFuture<'a, ()> {
        self.store.attach_feedback(id, f)
    }
    fn run<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        self.store.run(id)
    }
    fn runs<'a>(&'a self, query: &'a RunQuery) -> StoreFuture<'a, Vec<RunRecord>> {
        self.store.runs(query)
    }
    fn eval_set<'a>(&'a self, filter: &'a EvalFilter) -> StoreFuture<'a, Vec<EvalExample>> {
        self.store.eval_set(filter)
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        FeedbackStore::flush(&self.store)
    }
}

impl TraceStore for Faulty {
    fn record_trace<'a>(&'a self, trace: &'a TraceRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.noted(
                &trace.trace_id,
                StoreKind::Trace,
                self.store.record_trace(trace),
            )
            .await
        })
    }
    fn trace<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<TraceRecord>> {
        self.store.trace(id)
    }
    fn flush(&self) -> StoreFuture<'_, u64> {
        TraceStore::flush(&self.store)
    }
}

/// Runs 2,000 runs (64 at a time) on a fresh SQLite store whose file meets `fault` at
/// the 500th record, and checks what every case of the kind must show: every run
/// answered; no write that began after the fault reported stored; every write not
/// reported stored counted as a store failure, whose message says what happened to
/// the file. Returns the store, its directory and the writes.
async fn batch_through(fault: Fault) -> (Arc<Faulty>, common::Place, Vec<Failure>) {
    let place = common::sqlite_place();
    let common::Place::Sqlite { dir, .. } = &place else {
        unreachable!()
    };
    let store = place.open().await;
    let faulty = Arc::new(Faulty {
        store,
        dir: dir.clone(),
        fault,
        at: 500,
        calls: AtomicUsize::new(0),
        done: AtomicBool::new(false),
        writes: Mutex::new(Vec::new()),
    });
    let failures: Arc<Mutex<Vec<Failure>>> = Arc::default();
    let seen = Arc::clone(&failures);
    let config: AgentConfig<String> = AgentConfig::builder("c42")
        .llm(TestModel::new())
        .feedback_store(faulty.clone())
        .trace_store(faulty.clone())
        .observer(move |event: &RunEvent<'_>| {
            if let RunEvent::StoreFailed {
                trace_id,
                store,
                error,
                ..
            } = event
            {
                seen.lock()
                    .unwrap()
                    .push(((*trace_id).to_owned(), *store, (*error).clone()));
            }
        })
        .build()
        .unwrap();
    let batch = run_batch(&config, (0..2000).map(|i| format!("ticket {i}")), 64).await;
    assert_eq!(batch.receipt.count(Ending::Answered), 2000);
    assert!(faulty.done.load(Ordering::SeqCst), "the fault happened");

    let writes = faulty.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 4000, "a record and a trace per run");
    let late_stored: Vec<_> = writes.iter().filter(|w| w.2 && w.3).collect();
    assert!(
        late_stored.is_empty(),
        "{} writes begun after the fault were reported stored, as {:?}",
        late_stored.len(),
        late_stored.first()
    );
    let failed: Vec<_> = writes.iter().filter(|w| !w.3).collect();
    assert!(failed.len() >= 2 * 1500, "{} writes failed", failed.len());

    // Every failure is counted: in the runs, the receipt and the observer, once each.
    let failures = failures.lock().unwrap().clone();
    let per_run: u64 = batch
        .results
        .iter()
        .map(|r| u64::from(r.store_failures))
        .sum();
    assert_eq!(per_run, failed.len() as u64);
    assert_eq!(batch.receipt.store_failures, per_run);
    assert_eq!(failures.len(), failed.len());
    let counted: HashSet<(String, StoreKind)> =
        failures.iter().map(|(id, k, _)| (id.clone(), *k)).collect();
    for (id, kind, ..) in &failed {
        assert!(counted.contains(&(id.clone(), *kind)), "{id} {kind:?}");
    }
    // Replaced: while the path has no file (between the move and the new file) a
    // write may see it gone.
    let said: &[&str] = match fault {
        Fault::Delete => &["is gone (deleted)"],
        Fault::Replace => &["was replaced by another file", "is gone (deleted)"],
    };
    for (id, _, error) in &failures {
        assert!(
            matches!(error, StoreError::Unavailable { message }
                if said.iter().any(|s| message.contains(s)) && message.contains("runs.db")),
            "{id}: {error}"
        );
    }
    assert!(
        failures
            .iter()
            .any(|(_, _, e)| e.to_string().contains(said[0])),
        "no failure says {:?}",
        said[0]
    );
    (faulty, place, failures)
}

/// C42: `rm runs.db runs.db-wal runs.db-shm` while 2,000 runs write to the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c42_a_deleted_sqlite_file_takes_no_write_reported_stored() {
    let (faulty, place, _) = batch_through(Fault::Delete).await;
    let common::Place::Sqlite { file, .. } = &place else {
        unreachable!()
    };
    // Reads say so too, and nothing made a new file at the path.
    for error in [
        faulty.store.run("anything").await.unwrap_err(),
        faulty.store.stats().await.unwrap_err(),
    ] {
        assert!(
            matches!(&error, StoreError::Unavailable { message } if message.contains("is gone")),
            "{error}"
        );
    }
    assert!(!file.exists(), "a file reappeared at {}", file.display());
    faulty.store.close().await.unwrap();
    // Opening the path again starts a new file, and says nothing is missing from it.
    let reopened = place.open().await;
    assert_eq!(reopened.stats().await.unwrap().runs, 0);
    reopened.close().await.unwrap();
    place.remove().await;
}

/// C42, the sibling: the files are moved away and another database is put at the
/// path. Every record reported stored is in the file it was written to (a read finds
/// it); the database now at the path got none of the later writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c42_a_replaced_sqlite_file_takes_no_write_and_every_reported_record_is_readable() {
    let (faulty, place, _) = batch_through(Fault::Replace).await;
    let common::Place::Sqlite { dir, file } = &place else {
        unreachable!()
    };
    let stored: Vec<String> = faulty
        .writes
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.1 == StoreKind::Feedback && w.3)
        .map(|w| w.0.clone())
        .collect();
    assert!(
        stored.len() >= 400,
        "{} records stored before the fault",
        stored.len()
    );
    faulty.store.close().await.unwrap();

    let moved = Store::open(dir.join("moved.db").to_str().unwrap())
        .await
        .unwrap();
    for id in &stored {
        assert!(
            moved.run(id).await.unwrap().is_some(),
            "{id} reported stored, not found"
        );
    }
    moved.close().await.unwrap();
    let at_path = Store::open(file.to_str().unwrap()).await.unwrap();
    assert_eq!(at_path.stats().await.unwrap().runs, 0);
    at_path.close().await.unwrap();
    place.remove().await;
}

/// A PostgreSQL cluster of this test's own: `initdb` in a temporary directory (owned by
/// the `postgres` user when the test runs as root), a free port, `pg_ctl` to start it.
/// Killed (SIGKILL) and restarted at will; stopped and removed on drop.
struct PgCluster {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    as_postgres: bool,
}

impl PgCluster {
    /// `None` (with a message) when the binaries are missing and `CI` is not `true`.
    fn start() -> Option<PgCluster> {
        let bin = std::env::var("PG_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from("/usr/lib/postgresql/15/bin"));
        if !bin.join("initdb").exists() || !bin.join("pg_ctl").exists() {
            let why = format!("no initdb and pg_ctl in {} (set PG_BIN)", bin.display());
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("the PostgreSQL fault test needs its binaries under CI=true: {why}");
            }
            eprintln!("skipped: {why}");
            return None;
        }
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(common::unique("agent_store_pg"));
        std::fs::create_dir_all(&dir).unwrap();
        if as_postgres {
            run(std::process::Command::new("chown").args(["postgres", dir.to_str().unwrap()]));
        }
        let port = free_port();
        let cluster = PgCluster {
            dir,
            port,
            bin,
            as_postgres,
        };
        let data = cluster.data();
        run(&mut cluster.command(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "-N"],
        ));
        cluster.up();
        Some(cluster)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn command(&self, tool: &str, args: &[&str]) -> std::process::Command {
        let exe = self.bin.join(tool).display().to_string();
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--", &exe]);
            c
        } else {
            std::process::Command::new(exe)
        };
        command
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        command
    }

    /// Starts the server and waits until it accepts connections (`pg_ctl -w`). Right
    /// after a crash the start can be refused (the old shared memory not yet released):
    /// it is tried again, 50 times at most, then the test fails with the server's log.
    fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log").display().to_string();
        for _ in 0..50 {
            let started = self
                .command(
                    "pg_ctl",
                    &[
                        "-D",
                        &self.data(),
                        "-o",
                        &options,
                        "-l",
                        &log,
                        "-w",
                        "start",
                    ],
                )
                .status()
                .unwrap();
            if started.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        panic!("PostgreSQL does not start again; its log ends: {tail:?}");
    }

    /// SIGKILL to the postmaster and every process it started (a crash: no shutdown,
    /// no checkpoint), then waits until all are gone.
    fn kill(&self) {
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap();
        let pid: u32 = pid.lines().next().unwrap().trim().parse().unwrap();
        let mut pids = children_of(pid);
        pids.push(pid);
        for pid in &pids {
            // Some die with the postmaster before their turn.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
        while pids.iter().any(|pid| alive(*pid)) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl", &["-D", &self.data(), "-m", "immediate", "stop"])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the process runs (exists and is not a zombie waiting for its parent).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// The processes whose parent is `parent` (from `/proc`).
fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces, so split after its `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            found.push(pid);
        }
    }
    found
}

fn run(command: &mut std::process::Command) {
    let status = command.status().unwrap();
    assert!(status.success(), "{command:?}: {status}");
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// A port nothing listens on now (the OS's pick for a bound port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// PostgreSQL killed (SIGKILL to the postmaster) and restarted while 2,000 runs
/// write: every run answers, every write that failed is counted (in the runs, the
/// receipt, the observer) as `Unavailable`, every record reported stored is read back,
/// and the pool reconnects by itself: the runs after the restart are all stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_and_restarted_mid_batch_every_failure_counted_pool_reconnects() {
    let Some(cluster) = PgCluster::start() else {
        return;
    };
    let options = StoreOptions::new().connect_timeout(Duration::from_millis(500));
    let store = Store::open_with(&cluster.url(), options).await.unwrap();
    let cluster = Arc::new(Mutex::new(cluster));
    let failures: Arc<Mutex<Vec<Failure>>> = Arc::default();
    let seen = Arc::clone(&failures);
    let records = Arc::new(AtomicUsize::new(0));
    let config: AgentConfig<String> = AgentConfig::builder("pg_crash")
        .llm(TestModel::new())
        .feedback_store(store.clone())
        .trace_store(store.clone())
        .observer(move |event: &RunEvent<'_>| {
            if let RunEvent::StoreFailed {
                trace_id,
                store,
                error,
                ..
            } = event
            {
                seen.lock()
                    .unwrap()
                    .push(((*trace_id).to_owned(), *store, (*error).clone()));
            }
        })
        .build()
        .unwrap();
    // The crash: once 500 runs are stored, kill the server, let 100 more runs fail,
    // and start it again.
    let crash = {
        let store = store.clone();
        let failures = Arc::clone(&failures);
        let cluster = Arc::clone(&cluster);
        let records = Arc::clone(&records);
        tokio::spawn(async move {
            while store.stats().await.map_or(0, |s| s.runs) < 500 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let c = Arc::clone(&cluster);
            tokio::task::spawn_blocking(move || c.lock().unwrap().kill())
                .await
                .unwrap();
            while failures.lock().unwrap().len() < 100 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let c = Arc::clone(&cluster);
            tokio::task::spawn_blocking(move || c.lock().unwrap().up())
                .await
                .unwrap();
            records.store(1, Ordering::SeqCst);
        })
    };
    let first = run_batch(&config, (0..2000).map(|i| format!("ticket {i}")), 32).await;
    crash.await.unwrap();
    assert_eq!(
        records.load(Ordering::SeqCst),
        1,
        "the server was restarted"
    );
    assert_eq!(first.receipt.count(Ending::Answered), 2000);
    let failures = failures.lock().unwrap().clone();
    assert!(failures.len() >= 100, "{}", failures.len());
    let per_run: u64 = first
        .results
        .iter()
        .map(|r| u64::from(r.store_failures))
        .sum();
    assert_eq!(first.receipt.store_failures, per_run);
    assert_eq!(failures.len() as u64, per_run);
    for (id, _, error) in &failures {
        assert!(
            matches!(error, StoreError::Unavailable { .. }),
            "{id}: {error}"
        );
    }
    // Every run whose record was not counted as failed is stored.
    let lost: HashSet<&str> = failures
        .iter()
        .filter(|(_, k, _)| *k == StoreKind::Feedback)
        .map(|(id, ..)| id.as_str())
        .collect();
    for result in &first.results {
        let stored = store.run(&result.trace_id).await.unwrap();
        assert_eq!(
            stored.is_some(),
            !lost.contains(result.trace_id.as_str()),
            "{}",
            result.trace_id
        );
    }
    // The pool reconnected by itself: a batch after the restart is stored whole.
    let before = store.stats().await.unwrap().runs;
    let second = run_batch(&config, (0..200).map(|i| format!("after {i}")), 32).await;
    assert_eq!(second.receipt.store_failures, 0, "{}", second.receipt);
    assert_eq!(store.stats().await.unwrap().runs, before + 200);
    store.close().await.unwrap();
}
