//! The runs a store recorded (`triage --store runs.db`): list them, show one, attach
//! feedback, export an eval set, replay one on another model, diff two.
//!
//! ```text
//! cargo run --release --example triage -- --store runs.db
//! cargo run --example runs -- --store runs.db list --limit 10
//! cargo run --example runs -- --store runs.db show TRACE_ID
//! cargo run --example runs -- --store runs.db feedback TRACE_ID --rating -1 \
//!     --correct '{"severity":3,"queue":"billing","order_id":null,"summary":"...","claims_match_records":null}'
//! cargo run --example runs -- --store runs.db export --out eval.jsonl
//! cargo run --example runs -- --store runs.db replay TRACE_ID --model dispatch/gemma
//! cargo run --example runs -- --store runs.db diff TRACE_A TRACE_B
//! cargo run --release --example triage -- --store runs.db --approve lookup_order
//! cargo run --example runs -- --store runs.db pending
//! cargo run --example runs -- --store runs.db approve RUN_ID CALL_ID
//! cargo run --example runs -- --store runs.db deny RUN_ID CALL_ID --reason "not this one"
//! cargo run --example runs -- --store runs.db resume RUN_ID --approve lookup_order
//! ```
//!
//! `--store` takes an SQLite file (default `runs.db`) or a `postgres://` URL.

use std::process::ExitCode;

use agent_core::store::{
    EvalFilter, Feedback, FeedbackStore, RunDiff, RunQuery, TraceRecord, TraceStore,
};
use agent_core::{
    AgentError, Ending, Value,
    durable::{Decisions, paused_runs, record_decisions},
    llm::Message,
    resume_agent,
};
use agent_examples::model::ModelChoice;
use agent_examples::triage::{self, data_dir};
use agent_store::Store;

const USAGE: &str = "usage: runs [--store PATH_OR_URL] COMMAND
  list [--limit N] [--agent NAME] [--ending answered|escalated|exhausted|stuck|failed|paused]
  show TRACE_ID
  feedback TRACE_ID [--rating N] [--correct JSON] [--note TEXT]
  export [--out FILE] [--agent NAME] [--min-rating N]
  replay TRACE_ID [--model NAME]
  diff TRACE_A TRACE_B
  pending [--limit N]                 paused runs and the calls they wait on
  approve RUN CALL                    record an approval
  deny RUN CALL --reason TEXT         record a denial (the model reads the reason)
  edit RUN CALL --args JSON           approve with other arguments
  result RUN CALL --value JSON        give a deferred call its result
  resume RUN [--model NAME] [--approve TOOL]...
                                      continue a paused or interrupted run";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The command line: the store, the command, its positional arguments and flags.
struct Command {
    store: String,
    name: String,
    positional: Vec<String>,
    flags: Vec<(String, String)>,
}

impl Command {
    fn parse() -> Result<Option<Self>, String> {
        use lexopt::prelude::*;
        let text = |e: lexopt::Error| e.to_string();
        let mut parser = lexopt::Parser::from_env();
        let mut store = "runs.db".to_owned();
        let mut words = Vec::new();
        let mut flags = Vec::new();
        while let Some(arg) = parser.next().map_err(text)? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("store") => store = parser.value().map_err(text)?.string().map_err(text)?,
                Long(flag) => {
                    let flag = flag.to_owned();
                    let value = parser.value().map_err(text)?.string().map_err(text)?;
                    flags.push((flag, value));
                }
                Value(word) => words.push(word.string().map_err(text)?),
                other => return Err(other.unexpected().to_string()),
            }
        }
        let mut words = words.into_iter();
        let Some(name) = words.next() else {
            return Ok(None);
        };
        Ok(Some(Self {
            store,
            name,
            positional: words.collect(),
            flags,
        }))
    }

    fn flag(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
    }

    fn arg(&self, i: usize, what: &str) -> Result<&str, String> {
        self.positional
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("{} needs {what}", self.name))
    }
}

async fn run() -> Result<(), String> {
    let Some(cmd) = Command::parse()? else {
        println!("{USAGE}");
        return Ok(());
    };
    let store = Store::open(&cmd.store)
        .await
        .map_err(|e| format!("cannot open {:?}: {e}", cmd.store))?;
    let outcome = match cmd.name.as_str() {
        "list" => list(&store, &cmd).await,
        "show" => show(&store, cmd.arg(0, "a trace id")?).await,
        "feedback" => feedback(&store, &cmd).await,
        "export" => export(&store, &cmd).await,
        "replay" => replay(&store, &cmd).await,
        "diff" => {
            diff(
                &store,
                cmd.arg(0, "two trace ids")?,
                cmd.arg(1, "two trace ids")?,
            )
            .await
        }
        "pending" => pending(&store, &cmd).await,
        "approve" | "deny" | "edit" | "result" => decide(&store, &cmd).await,
        "resume" => resume(&store, &cmd).await,
        other => Err(format!("unknown command {other:?}")),
    };
    store.close().await.map_err(|e| e.to_string())?;
    outcome
}

async fn list(store: &Store, cmd: &Command) -> Result<(), String> {
    let mut query = RunQuery::new();
    if let Some(limit) = cmd.flag("limit") {
        query = query.limit(limit.parse().map_err(|e| format!("--limit: {e}"))?);
    }
    if let Some(agent) = cmd.flag("agent") {
        query = query.agent(agent);
    }
    if let Some(ending) = cmd.flag("ending") {
        let ending = Ending::ALL
            .into_iter()
            .find(|e| e.as_str() == ending)
            .ok_or_else(|| format!("--ending: unknown ending {ending:?}"))?;
        query = query.ending(ending);
    }
    let runs = store.runs(&query).await.map_err(|e| e.to_string())?;
    println!(
        "{:<32}  {:<19}  {:<10}  {:>5}  {:>7}  {:<6}  input",
        "trace id", "started (UTC)", "ending", "calls", "ms", "rated"
    );
    for run in &runs {
        let rating = run
            .feedback
            .as_ref()
            .map(|f| match (f.rating, &f.corrected_output) {
                (_, Some(_)) => "fixed".to_owned(),
                (Some(r), None) => r.to_string(),
                (None, None) => "note".to_owned(),
            })
            .unwrap_or_default();
        println!(
            "{:<32}  {:<19}  {:<10}  {:>5}  {:>7}  {:<6}  {}",
            run.trace_id,
            utc(run.started_at_ms),
            run.ending.as_str(),
            run.usage.llm_calls,
            run.duration_ms,
            rating,
            one_line(&run.input, 60)
        );
    }
    eprintln!("{} runs", runs.len());
    Ok(())
}

async fn show(store: &Store, trace_id: &str) -> Result<(), String> {
    let run = store
        .run(trace_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no run {trace_id}"))?;
    println!(
        "{}",
        serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?
    );
    if let Some(trace) = store.trace(trace_id).await.map_err(|e| e.to_string())? {
        println!("\ntranscript:");
        print_transcript(&trace);
    }
    Ok(())
}

fn print_transcript(trace: &TraceRecord) {
    for message in trace.history.iter().chain(&trace.transcript) {
        match message {
            Message::User { content, .. } => println!("  user: {}", one_line(content, 100)),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                if !reasoning.is_empty() {
                    println!("  reasoning: {}", one_line(reasoning, 100));
                }
                if !text.is_empty() {
                    println!("  assistant: {}", one_line(text, 100));
                }
                for call in tool_calls {
                    println!(
                        "  call {}({})",
                        call.name,
                        one_line(&call.arguments.to_string(), 90)
                    );
                }
            }
            Message::Tool { results } => {
                for r in results {
                    let mark = if r.is_error { "error" } else { "result" };
                    println!("  {mark} {}: {}", r.name, one_line(&r.content, 90));
                }
            }
            _ => {}
        }
    }
}

async fn feedback(store: &Store, cmd: &Command) -> Result<(), String> {
    let trace_id = cmd.arg(0, "a trace id")?;
    let mut feedback = Feedback::new();
    if let Some(rating) = cmd.flag("rating") {
        feedback = feedback.rating(rating.parse().map_err(|e| format!("--rating: {e}"))?);
    }
    if let Some(json) = cmd.flag("correct") {
        let value: Value = serde_json::from_str(json).map_err(|e| format!("--correct: {e}"))?;
        feedback = feedback.corrected_output(value);
    }
    if let Some(note) = cmd.flag("note") {
        feedback = feedback.note(note);
    }
    store
        .attach_feedback(trace_id, &feedback)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("feedback attached to {trace_id}");
    Ok(())
}

async fn export(store: &Store, cmd: &Command) -> Result<(), String> {
    let mut filter = EvalFilter::new();
    if let Some(agent) = cmd.flag("agent") {
        filter = filter.agent(agent);
    }
    if let Some(min) = cmd.flag("min-rating") {
        filter = filter.min_rating(min.parse().map_err(|e| format!("--min-rating: {e}"))?);
    }
    let lines = match cmd.flag("out") {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
            store
                .export_jsonl(&filter, std::io::BufWriter::new(file))
                .await
        }
        None => store.export_jsonl(&filter, std::io::stdout().lock()).await,
    }
    .map_err(|e| e.to_string())?;
    eprintln!("{lines} examples");
    Ok(())
}

async fn replay(store: &Store, cmd: &Command) -> Result<(), String> {
    let trace_id = cmd.arg(0, "a trace id")?;
    let choice = ModelChoice::resolve(cmd.flag("model").map(str::to_owned));
    eprintln!("{}", choice.banner());
    let config = triage::triage_config(&data_dir(), &choice)?
        .with_(|b| {
            b.feedback_store(store.clone())
                .trace_store(store.clone())
                .variant("replay")
        })
        .map_err(|e| e.to_string())?;
    let result = store
        .replay(trace_id, &config)
        .await
        .map_err(|e| e.to_string())?;
    println!("replayed as {}: {}", result.trace_id, result.ending());
    let diff = store
        .diff(trace_id, &result.trace_id)
        .await
        .map_err(|e| e.to_string())?;
    println!("\n{diff}");
    Ok(())
}

async fn pending(store: &Store, cmd: &Command) -> Result<(), String> {
    let limit = match cmd.flag("limit") {
        Some(n) => n.parse().map_err(|e| format!("--limit: {e}"))?,
        None => 20,
    };
    let runs = paused_runs(store, limit).await.map_err(|e| e.to_string())?;
    if runs.is_empty() {
        println!("no paused runs");
    }
    for run in runs {
        println!(
            "{}  {}  {}",
            run.run_id,
            run.agent,
            one_line(&run.input, 60)
        );
        for call in &run.pending {
            let decided = run
                .decided
                .get(&call.call_id)
                .map_or("waiting", |d| d.as_str());
            println!(
                "  {}  {}({})  {}  [{decided}]",
                call.call_id,
                call.tool,
                one_line(&call.arguments.to_string(), 80),
                call.reason.as_str()
            );
        }
    }
    Ok(())
}

async fn decide(store: &Store, cmd: &Command) -> Result<(), String> {
    let run_id = cmd.arg(0, "a run id and a call id")?;
    let call_id = cmd.arg(1, "a run id and a call id")?;
    let json = |flag: &str| -> Result<Value, String> {
        let text = cmd
            .flag(flag)
            .ok_or_else(|| format!("{} needs --{flag}", cmd.name))?;
        serde_json::from_str(text).map_err(|e| format!("--{flag} is not JSON: {e}"))
    };
    let decisions = match cmd.name.as_str() {
        "approve" => Decisions::new().approve(call_id),
        "deny" => {
            let reason = cmd.flag("reason").ok_or("deny needs --reason")?;
            Decisions::new().deny(call_id, reason)
        }
        "edit" => Decisions::new().edit(call_id, json("args")?),
        _ => Decisions::new().result(call_id, json("value")?),
    };
    let left = record_decisions(store, run_id, decisions)
        .await
        .map_err(|e| e.to_string())?;
    if left.is_empty() {
        println!("recorded; run {run_id} can resume: runs resume {run_id}");
    } else {
        let ids: Vec<&str> = left.iter().map(|c| c.call_id.as_str()).collect();
        println!("recorded; still waiting: {}", ids.join(", "));
    }
    Ok(())
}

async fn resume(store: &Store, cmd: &Command) -> Result<(), String> {
    let run_id = cmd.arg(0, "a run id")?;
    let choice = ModelChoice::resolve(cmd.flag("model").map(str::to_owned));
    eprintln!("{}", choice.banner());
    let approve: Vec<String> = cmd
        .flags
        .iter()
        .filter(|(f, _)| f == "approve")
        .map(|(_, v)| v.clone())
        .collect();
    let config = triage::triage_config(&data_dir(), &choice)?
        .with_(|b| {
            let b = b.feedback_store(store.clone()).trace_store(store.clone());
            triage::with_approvals(b, store, &approve)
        })
        .map_err(|e| e.to_string())?;
    let result = resume_agent(&config, run_id)
        .await
        .map_err(|e| e.to_string())?;
    match &result.outcome {
        Ok(_) => println!("{run_id}: answered: {}", one_line(&result.output, 200)),
        Err(AgentError::Paused { pending, .. }) => {
            let ids: Vec<String> = pending.iter().map(ToString::to_string).collect();
            println!("{run_id}: paused again, waiting on {}", ids.join(", "));
        }
        Err(e) => println!("{run_id}: {}: {e}", result.ending()),
    }
    Ok(())
}

async fn diff(store: &Store, a: &str, b: &str) -> Result<(), String> {
    let diff: RunDiff = store.diff(a, b).await.map_err(|e| e.to_string())?;
    println!("{diff}");
    Ok(())
}

/// The text on one line, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of a Unix time in ms.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
