//! Command-line plumbing shared by the examples: flags, progress, and per-ticket output
//! lines (the model choice is `model.rs`).

use std::path::PathBuf;
use std::time::Duration;

use agent_core::{AgentResult, OutputMode, observe::RunEvent};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

/// The flags of the triage examples.
#[derive(Debug, Clone)]
pub struct Args {
    /// `--model NAME`.
    pub model: Option<String>,
    /// `--concurrency N` (default 4).
    pub concurrency: usize,
    /// `--json`: one JSON object per ticket per line on stdout.
    pub json: bool,
    /// `--tickets DIR` (default `examples/data/tickets`).
    pub tickets: PathBuf,
    /// `--limit N`: only the first N tickets.
    pub limit: Option<usize>,
    /// `--max-tokens N`: the output-token cap per LLM call (tokens; small local
    /// models with a short context need a small one).
    pub max_tokens: Option<u32>,
    /// `--max-llm-calls N`: the LLM-call cap per ticket.
    pub max_llm_calls: Option<u32>,
    /// `--output-mode auto|tool|native|prompted` (default: the config's, `auto`).
    pub output_mode: Option<OutputMode>,
    /// `--labels FILE|none`: expected severity and queue per ticket (default
    /// `examples/data/labels.json`; `none` skips the accuracy report).
    pub labels: Option<PathBuf>,
    /// `--store PATH_OR_URL`: record every run (an SQLite file, created if missing, or a
    /// `postgres://` URL); read it back with the `runs` example.
    pub store: Option<String>,
    /// `--approve TOOL` (repeatable): every call of these tools waits for a person's
    /// approval (the run pauses; needs `--store`, which then keeps checkpoints).
    pub approve: Vec<String>,
}

/// The usage text: every flag.
pub const USAGE: &str = "usage: triage [FLAGS]

  --model NAME          the model, routed by prefix (claude-..., gpt-..., gemini-...,
                        ollama/NAME, dispatch/NAME, test); default: AGENT_MODEL, else the first
                        provider key set, else the built-in test model
  --output-mode MODE    auto (default), tool, native or prompted
  --concurrency N       runs at a time (default 4)
  --json                one JSON object per ticket per line on stdout
  --tickets DIR         the tickets folder (default examples/data/tickets)
  --limit N             only the first N tickets
  --max-tokens N        output-token cap per LLM call
  --max-llm-calls N     LLM-call cap per ticket
  --labels FILE|none    expected severity and queue per ticket, for the accuracy
                        report (default examples/data/labels.json)
  --store PATH_OR_URL   record every run in an SQLite file (created if missing) or a
                        postgres:// URL; read it back with the `runs` example
  --approve TOOL        calls of TOOL wait for a person's approval: the run pauses
                        (needs --store); decide with `runs pending|approve|deny|resume`
  -h, --help            this text";

impl Args {
    /// Parses the process arguments.
    ///
    /// # Errors
    /// A message for an unknown flag or a bad value; `Ok(None)` for `--help`.
    pub fn parse() -> Result<Option<Self>, String> {
        use lexopt::prelude::*;
        let mut args = Args {
            model: None,
            concurrency: 4,
            json: false,
            tickets: crate::triage::data_dir().join("tickets"),
            limit: None,
            max_tokens: None,
            max_llm_calls: None,
            output_mode: None,
            labels: Some(crate::triage::data_dir().join("labels.json")),
            store: None,
            approve: Vec::new(),
        };
        let mut parser = lexopt::Parser::from_env();
        let text = |e: lexopt::Error| e.to_string();
        while let Some(arg) = parser.next().map_err(text)? {
            match arg {
                Long("model") => {
                    args.model = Some(parser.value().map_err(text)?.string().map_err(text)?)
                }
                Long("concurrency") => {
                    args.concurrency = parser.value().map_err(text)?.parse().map_err(text)?;
                }
                Long("json") => args.json = true,
                Long("tickets") => args.tickets = parser.value().map_err(text)?.into(),
                Long("limit") => {
                    args.limit = Some(parser.value().map_err(text)?.parse().map_err(text)?)
                }
                Long("max-tokens") => {
                    args.max_tokens = Some(parser.value().map_err(text)?.parse().map_err(text)?);
                }
                Long("max-llm-calls") => {
                    args.max_llm_calls = Some(parser.value().map_err(text)?.parse().map_err(text)?);
                }
                Long("output-mode") => {
                    let value = parser.value().map_err(text)?.string().map_err(text)?;
                    args.output_mode = Some(value.parse()?);
                }
                Long("labels") => {
                    let value: PathBuf = parser.value().map_err(text)?.into();
                    args.labels = (value.as_os_str() != "none").then_some(value);
                }
                Long("store") => {
                    args.store = Some(parser.value().map_err(text)?.string().map_err(text)?);
                }
                Long("approve") => {
                    args.approve
                        .push(parser.value().map_err(text)?.string().map_err(text)?);
                }
                Short('h') | Long("help") => return Ok(None),
                other => return Err(other.unexpected().to_string()),
            }
        }
        if args.concurrency == 0 {
            return Err("--concurrency must be at least 1".into());
        }
        if !args.approve.is_empty() && args.store.is_none() {
            return Err("--approve needs --store: a paused run is kept there".into());
        }
        Ok(Some(args))
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} tickets {msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// An observer that advances `bar` when a run ends.
pub fn progress_observer(bar: ProgressBar) -> impl Fn(&RunEvent<'_>) + Send + Sync + 'static {
    move |event| {
        if let RunEvent::RunEnded { .. } = event {
            bar.inc(1);
        }
    }
}

/// The JSON line of one ticket: `ticket`, `ending`, `category`, `llm_calls`,
/// `tool_calls`, `output` (the submitted value, or null), `error`, tokens, `duration_ms`
/// and `trace_id`.
pub fn json_line<T>(ticket: &str, result: &AgentResult<T>) -> Value {
    let output = match &result.outcome {
        Ok(_) => answer_json(&result.output),
        Err(_) => Value::Null,
    };
    json!({
        "ticket": ticket,
        "ending": result.ending().as_str(),
        "category": result.category(),
        "llm_calls": result.usage.llm_calls,
        "tool_calls": result.usage.tool_calls,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "output": output,
        "error": result.outcome.as_ref().err().map(ToString::to_string),
        "duration_ms": result.duration.as_millis() as u64,
        "trace_id": result.trace_id,
    })
}

/// A one-line, human-readable summary of one ticket's result; every value is labeled
/// (`severity=2 queue=shipping order=NW-10231 calls=2+1`), `none` where a field is null.
pub fn human_line<T>(ticket: &str, result: &AgentResult<T>) -> String {
    let calls = format!(
        "calls={}+{}",
        result.usage.llm_calls, result.usage.tool_calls
    );
    match &result.outcome {
        Ok(_) => {
            let v = answer_json(&result.output);
            format!(
                "{ticket:<34} answered   severity={} queue={:<9} order={:<9} {calls:<9} summary={}",
                v["severity"],
                v["queue"].as_str().unwrap_or("?"),
                v["order_id"].as_str().unwrap_or("none"),
                v["summary"].as_str().unwrap_or(""),
            )
        }
        Err(e) => format!(
            "{ticket:<34} {:<10} {calls:<9} {e}",
            result.ending().as_str()
        ),
    }
}

/// The answer's JSON: the whole output, or the first JSON object in it (native and
/// prompted answers may be fenced or have text around them); null when there is none.
pub fn answer_json(output: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(output) {
        return v;
    }
    output
        .find('{')
        .and_then(|start| {
            serde_json::Deserializer::from_str(&output[start..])
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
        .unwrap_or(Value::Null)
}

/// The legend printed above the per-ticket lines.
pub const LEGEND: &str = "ticket, ending, then for answers severity/queue/order, calls=<LLM calls>+<tool executions>, summary; for failures the error";
