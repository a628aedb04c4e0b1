//! What every Rust peer benchmark shares: the scenario's types (the output struct,
//! the tool's arguments and result, the prompt) and the harness that measures one
//! framework in one scenario and prints one JSON line.
//!
//! The command line of every benchmark binary (the Python one mirrors it):
//!
//! ```text
//! BIN inproc --runs N [--warmup N]
//! BIN http   --url URL --concurrency C [--seconds S] [--warmup-seconds S] [--runs N]
//! BIN parked --url URL --runs N [--warmup-url URL]
//! ```
//!
//! A *run* is the whole scenario: turn 1 (the model calls `lookup_order`), the tool's
//! execution, turn 2 (the model calls the output tool with valid arguments), and the
//! validation of those arguments into a [`Triage`]. Each run's value is checked with
//! [`check_triage`], so a run that did not really happen cannot be counted.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The system prompt every framework sends.
pub const SYSTEM_PROMPT: &str =
    "You triage support tickets. Look the order up, then submit your decision.";

/// The user input of every run.
pub const INPUT: &str = "Ticket #4821: my order A-1001 has not arrived yet, where is it?";

/// The user tool's name.
pub const TOOL_NAME: &str = "lookup_order";

/// The user tool's description.
pub const TOOL_DESCRIPTION: &str = "Look up an order by its id.";

/// The output type's description (agent-core's `submit_output` description).
pub const OUTPUT_DESCRIPTION: &str = "Triage decision for one support ticket.";

/// The arguments the scripted model gives `lookup_order` (JSON text).
pub const TOOL_ARGS: &str = r#"{"order_id":"A-1001"}"#;

/// The valid output arguments the scripted model submits (JSON text); the mock server
/// sends the same.
pub const OUTPUT_ARGS: &str = r#"{"severity":2,"queue":"shipping","summary":"Order A-1001 is late; the customer asks when it will arrive."}"#;

/// Triage decision for one support ticket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Triage {
    /// Severity from 1 (lowest) to 4 (critical).
    #[schemars(range(min = 1, max = 4))]
    pub severity: u8,
    /// The queue that handles the ticket.
    pub queue: Queue,
    /// A one-sentence summary of the ticket.
    pub summary: String,
}

/// The support queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Queue {
    /// Payments and invoices.
    Billing,
    /// Deliveries.
    Shipping,
    /// Product faults.
    Technical,
    /// Anything else.
    Other,
}

/// The arguments of `lookup_order`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LookupOrderArgs {
    /// The order id, for example `A-1001`.
    pub order_id: String,
}

/// What `lookup_order` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Order {
    /// The order id.
    pub order_id: String,
    /// The delivery status.
    pub status: String,
    /// The carrier.
    pub carrier: String,
    /// Days until the expected delivery.
    pub eta_days: u32,
    /// The order's total (cents).
    pub total_cents: u64,
}

/// The tool's body: a fixed order for any id.
pub fn lookup_order(order_id: String) -> Order {
    Order {
        order_id,
        status: "in_transit".to_owned(),
        carrier: "DHL".to_owned(),
        eta_days: 2,
        total_cents: 4599,
    }
}

/// The JSON Schema of [`Triage`], as schemars derives it.
pub fn triage_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(Triage)).unwrap_or_else(|_| json!({}))
}

/// The JSON Schema of [`LookupOrderArgs`], as schemars derives it.
pub fn lookup_order_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(LookupOrderArgs)).unwrap_or_else(|_| json!({}))
}

/// Checks that a run ended with the value the scripted model submitted.
///
/// # Errors
/// A message naming what differs.
pub fn check_triage(triage: &Triage) -> Result<(), String> {
    if triage.severity == 2 && triage.queue == Queue::Shipping && !triage.summary.is_empty() {
        Ok(())
    } else {
        Err(format!("unexpected output {triage:?}"))
    }
}

/// A counting global allocator (feature `count-alloc`): the bytes and blocks live on
/// the heap, for the parked scenario's heap bytes per run. Built only with
/// `--features peers-common/count-alloc`; the binaries measured by `run.sh` use the
/// system allocator unwrapped.
#[cfg(feature = "count-alloc")]
pub mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Bytes asked for and not yet freed.
    static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
    /// The same in glibc malloc chunks: `max(32, size + 8 rounded up to 16)` each.
    static LIVE_CHUNK: AtomicUsize = AtomicUsize::new(0);
    /// Blocks allocated and not yet freed.
    static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
    /// The most `LIVE_CHUNK` has been since [`reset_peak`].
    static PEAK_CHUNK: AtomicUsize = AtomicUsize::new(0);

    /// What glibc's malloc takes for a block of `size` bytes (64-bit).
    fn chunk(size: usize) -> usize {
        ((size + 8 + 15) & !15).max(32)
    }

    fn added(size: usize) {
        LIVE_BYTES.fetch_add(size, Relaxed);
        LIVE_BLOCKS.fetch_add(1, Relaxed);
        let live = LIVE_CHUNK.fetch_add(chunk(size), Relaxed) + chunk(size);
        PEAK_CHUNK.fetch_max(live, Relaxed);
    }

    fn removed(size: usize) {
        LIVE_BYTES.fetch_sub(size, Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Relaxed);
        LIVE_CHUNK.fetch_sub(chunk(size), Relaxed);
    }

    /// The system allocator, counted.
    pub struct Counting;

    // SAFETY: every call is forwarded to `System` unchanged; only counters are added.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract is `System`'s.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                added(layout.size());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: as `alloc`.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                added(layout.size());
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: as `alloc`.
            unsafe { System.dealloc(ptr, layout) };
            removed(layout.size());
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: as `alloc`.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                removed(layout.size());
                added(new_size);
            }
            p
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// `(bytes, glibc chunk bytes, blocks)` live now.
    pub fn live() -> (usize, usize, usize) {
        (
            LIVE_BYTES.load(Relaxed),
            LIVE_CHUNK.load(Relaxed),
            LIVE_BLOCKS.load(Relaxed),
        )
    }

    /// Starts a new peak at the chunk bytes live now.
    pub fn reset_peak() {
        PEAK_CHUNK.store(LIVE_CHUNK.load(Relaxed), Relaxed);
    }

    /// The most chunk bytes live since [`reset_peak`].
    pub fn peak_chunk() -> usize {
        PEAK_CHUNK.load(Relaxed)
    }
}

/// One scenario, from the command line.
#[derive(Clone, Debug)]
pub enum Scenario {
    /// Sequential in-process runs on a current-thread runtime.
    Inproc {
        /// Timed runs.
        runs: u64,
        /// Untimed runs first.
        warmup: u64,
    },
    /// Closed-loop HTTP runs against the mock server.
    Http {
        /// The base URL, ending in `/v1`.
        url: String,
        /// Runs in flight at once.
        concurrency: u64,
        /// The measured window (s).
        seconds: f64,
        /// The unmeasured window before it (s).
        warmup_seconds: f64,
        /// Exactly this many runs instead of the windows (no warm-up): for counting
        /// instructions per run by two lengths.
        runs: Option<u64>,
    },
    /// `runs` runs started at once against the slow mock server.
    Parked {
        /// The base URL, ending in `/v1`.
        url: String,
        /// Runs started at once.
        runs: u64,
        /// A fast server for one untimed run before the idle memory is read, so lazy
        /// initialization (first connection, first request) is not counted per run.
        warmup_url: Option<String>,
    },
}

impl Scenario {
    /// The scenario's name as printed.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Inproc { .. } => "inproc",
            Self::Http { .. } => "http",
            Self::Parked { .. } => "parked",
        }
    }

    /// The base URL of an HTTP scenario.
    pub fn url(&self) -> Option<&str> {
        match self {
            Self::Inproc { .. } => None,
            Self::Http { url, .. } | Self::Parked { url, .. } => Some(url),
        }
    }
}

/// Parses `inproc|http|parked` and its flags from `std::env::args`.
///
/// # Errors
/// A usage message.
pub fn parse_cli() -> Result<Scenario, String> {
    let mut args = std::env::args().skip(1);
    let kind = args.next().ok_or("usage: BIN inproc|http|parked [flags]")?;
    let mut runs = None;
    let mut warmup = None;
    let mut url = None;
    let mut concurrency = None;
    let mut seconds = None;
    let mut warmup_seconds = None;
    let mut warmup_url = None;
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        let float = |v: &str| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--runs" => runs = Some(num(&value)?),
            "--warmup" => warmup = Some(num(&value)?),
            "--url" => url = Some(value),
            "--concurrency" => concurrency = Some(num(&value)?),
            "--seconds" => seconds = Some(float(&value)?),
            "--warmup-seconds" => warmup_seconds = Some(float(&value)?),
            "--warmup-url" => warmup_url = Some(value),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    match kind.as_str() {
        "inproc" => {
            let runs = runs.unwrap_or(10_000);
            Ok(Scenario::Inproc {
                runs,
                warmup: warmup.unwrap_or(runs / 10),
            })
        }
        "http" => Ok(Scenario::Http {
            url: url.ok_or("http needs --url")?,
            concurrency: concurrency.unwrap_or(1),
            seconds: seconds.unwrap_or(3.0),
            warmup_seconds: warmup_seconds.unwrap_or(1.0),
            runs,
        }),
        "parked" => Ok(Scenario::Parked {
            url: url.ok_or("parked needs --url")?,
            runs: runs.unwrap_or(10_000),
            warmup_url,
        }),
        other => Err(format!("unknown scenario {other}")),
    }
}

/// The runtime a scenario runs on: current-thread for in-process runs (one run at a
/// time, no cross-thread wake-ups), multi-thread with one worker per core otherwise.
///
/// # Errors
/// The runtime could not be built.
pub fn runtime(scenario: &Scenario) -> std::io::Result<tokio::runtime::Runtime> {
    match scenario {
        Scenario::Inproc { .. } => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}

/// `(VmRSS, VmHWM)` of this process (KiB), from `/proc/self/status`.
pub fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Prints one result line: `{"framework":..,"scenario":..,<fields>}`.
pub fn report(framework: &str, scenario: &Scenario, mut fields: Value) {
    if let Value::Object(map) = &mut fields {
        map.insert("framework".to_owned(), json!(framework));
        map.insert("scenario".to_owned(), json!(scenario.name()));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{fields}");
    let _ = out.flush();
}

/// Prints a "pending" result (the framework cannot run this scenario yet).
pub fn report_pending(framework: &str, scenario: &Scenario, why: &str) {
    report(framework, scenario, json!({"pending": why}));
}

/// Times `runs` sequential runs after `warmup` untimed ones.
///
/// Returns `{"runs", "us_per_run", "errors", "first_error"}`.
pub async fn inproc<F, Fut>(runs: u64, warmup: u64, run: F) -> Value
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut errors = 0_u64;
    let mut first_error = None;
    for _ in 0..warmup {
        if let Err(e) = run().await {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    let started = Instant::now();
    for _ in 0..runs {
        if let Err(e) = run().await {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    let elapsed = started.elapsed();
    json!({
        "runs": runs,
        "us_per_run": elapsed.as_secs_f64() * 1e6 / runs.max(1) as f64,
        "errors": errors,
        "first_error": first_error,
    })
}

/// Closed-loop load: `concurrency` workers each start a new run as soon as the last
/// ends; runs finished in the measured window are counted.
///
/// Returns `{"concurrency", "runs", "seconds", "runs_per_s", "errors", "first_error"}`.
pub async fn http<F, Fut>(concurrency: u64, seconds: f64, warmup_seconds: f64, run: F) -> Value
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (run, done, errors, first_error, stop) = (
            run.clone(),
            Arc::clone(&done),
            Arc::clone(&errors),
            Arc::clone(&first_error),
            Arc::clone(&stop),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match run().await {
                    Ok(()) => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                        // Do not spin on a broken setup.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(warmup_seconds)).await;
    let (start_count, started) = (done.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    let (end_count, elapsed) = (done.load(Ordering::Relaxed), started.elapsed());
    stop.store(true, Ordering::Relaxed);
    for worker in &workers {
        worker.abort();
    }
    let runs = end_count - start_count;
    let first_error = first_error.lock().ok().and_then(|e| e.clone());
    json!({
        "concurrency": concurrency,
        "runs": runs,
        "seconds": elapsed.as_secs_f64(),
        "runs_per_s": runs as f64 / elapsed.as_secs_f64(),
        "errors": errors.load(Ordering::Relaxed),
        "first_error": first_error,
    })
}

/// Closed-loop load, as [`http`], for exactly `runs` runs (no warm-up): the same
/// fields.
pub async fn http_runs<F, Fut>(concurrency: u64, runs: u64, run: F) -> Value
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let claimed = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (run, claimed, errors, first_error) = (
            run.clone(),
            Arc::clone(&claimed),
            Arc::clone(&errors),
            Arc::clone(&first_error),
        );
        workers.push(tokio::spawn(async move {
            while claimed.fetch_add(1, Ordering::Relaxed) < runs {
                if let Err(e) = run().await {
                    errors.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut slot) = first_error.lock() {
                        slot.get_or_insert(e);
                    }
                }
            }
        }));
    }
    for worker in workers {
        let _ = worker.await;
    }
    let elapsed = started.elapsed();
    let errors = errors.load(Ordering::Relaxed);
    let first_error = first_error.lock().ok().and_then(|e| e.clone());
    json!({
        "concurrency": concurrency,
        "runs": runs - errors.min(runs),
        "seconds": elapsed.as_secs_f64(),
        "runs_per_s": runs as f64 / elapsed.as_secs_f64(),
        "errors": errors,
        "first_error": first_error,
    })
}

/// Starts `runs` runs at once (against the slow server they all park on their
/// request), waits for all, and reports this process's memory.
///
/// Returns `{"runs", "ok", "errors", "first_error", "wall_s", "idle_kib",
/// "peak_kib"}`: `idle_kib` is VmRSS just before the runs start (the client or agent
/// is built, nothing in flight), `peak_kib` is VmHWM after they all ended.
pub async fn parked<F, Fut>(runs: u64, run: F) -> Value
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let (idle_kib, _) = rss_kib();
    #[cfg(feature = "count-alloc")]
    let (heap_idle, sampler) = {
        heap::reset_peak();
        let idle = heap::live();
        // Every 100 ms, the live heap; the sample with the most bytes is kept (its
        // blocks are the blocks live at the peak).
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let sampler = tokio::spawn(async move {
            let mut best = heap::live();
            while !flag.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = heap::live();
                if now.1 > best.1 {
                    best = now;
                }
            }
            best
        });
        (idle, (stop, sampler))
    };
    let started = Instant::now();
    let first = run();
    // The task's future: what each parked run holds inline (in the task's allocation).
    let future_bytes = std::mem::size_of_val(&first);
    let tasks: Vec<_> = std::iter::once(first)
        .chain((1..runs).map(|_| run()))
        .take(usize::try_from(runs).unwrap_or(usize::MAX))
        .map(tokio::spawn)
        .collect();
    let mut ok = 0_u64;
    let mut errors = 0_u64;
    let mut first_error = None;
    for task in tasks {
        match task.await {
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(format!("task failed: {e}"));
            }
        }
    }
    let wall = started.elapsed();
    let (_, peak_kib) = rss_kib();
    #[allow(unused_mut)]
    let mut fields = json!({
        "runs": runs,
        "ok": ok,
        "errors": errors,
        "first_error": first_error,
        "wall_s": wall.as_secs_f64(),
        "idle_kib": idle_kib,
        "peak_kib": peak_kib,
        "future_bytes": future_bytes,
    });
    #[cfg(feature = "count-alloc")]
    {
        let (stop, sampler) = sampler;
        stop.store(true, Ordering::Relaxed);
        let sample = sampler.await.unwrap_or_default();
        let per_run = |now: usize, idle: usize| (now as f64 - idle as f64) / runs.max(1) as f64;
        if let Value::Object(map) = &mut fields {
            map.insert(
                "heap".to_owned(),
                json!({
                    "idle_bytes": heap_idle.0,
                    "idle_chunk_bytes": heap_idle.1,
                    "idle_blocks": heap_idle.2,
                    "peak_chunk_bytes": heap::peak_chunk(),
                    "peak_chunk_bytes_per_run": per_run(heap::peak_chunk(), heap_idle.1),
                    "sample_bytes_per_run": per_run(sample.0, heap_idle.0),
                    "sample_chunk_bytes_per_run": per_run(sample.1, heap_idle.1),
                    "sample_blocks_per_run": per_run(sample.2, heap_idle.2),
                }),
            );
        }
    }
    fields
}

/// Runs the scenario with the given run factories and prints the report; the usual
/// `main` of a benchmark binary.
///
/// `inproc` is `None` for a framework measured over HTTP only (the bare client).
///
/// # Errors
/// The runtime could not be built.
pub fn run_scenario<I, IFut, H, HFut>(
    framework: &str,
    scenario: &Scenario,
    inproc_run: Option<I>,
    http_run: impl Fn(&str) -> Result<H, String>,
) -> std::io::Result<()>
where
    I: Fn() -> IFut,
    IFut: Future<Output = Result<(), String>>,
    H: Fn() -> HFut + Clone + Send + Sync + 'static,
    HFut: Future<Output = Result<(), String>> + Send + 'static,
{
    let rt = runtime(scenario)?;
    match scenario {
        Scenario::Inproc { runs, warmup } => match inproc_run {
            Some(run) => {
                let fields = rt.block_on(inproc(*runs, *warmup, run));
                report(framework, scenario, fields);
            }
            None => report_pending(framework, scenario, "no in-process mode"),
        },
        Scenario::Http {
            url,
            concurrency,
            seconds,
            warmup_seconds,
            runs,
        } => {
            let _guard = rt.enter();
            match http_run(url) {
                Ok(run) => {
                    let fields = match runs {
                        Some(runs) => rt.block_on(http_runs(*concurrency, *runs, run)),
                        None => rt.block_on(http(*concurrency, *seconds, *warmup_seconds, run)),
                    };
                    report(framework, scenario, fields);
                }
                Err(why) => report_pending(framework, scenario, &why),
            }
        }
        Scenario::Parked {
            url,
            runs,
            warmup_url,
        } => {
            let _guard = rt.enter();
            let warmup = warmup_url.as_deref().map(&http_run);
            match http_run(url) {
                Ok(run) => {
                    if let Some(Ok(warm)) = warmup
                        && let Err(e) = rt.block_on(warm())
                    {
                        eprintln!("warm-up run failed: {e}");
                    }
                    let fields = rt.block_on(parked(*runs, run));
                    report(framework, scenario, fields);
                }
                Err(why) => report_pending(framework, scenario, &why),
            }
        }
    }
    Ok(())
}
