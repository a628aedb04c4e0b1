//! A sweep: the triage config and `with_` variants of it (another model, other output
//! modes, a tighter `max_llm_calls`) over the labeled tickets, graded against
//! `examples/data/labels.json`; one table, a JSON file and an SVG chart.
//!
//! ```text
//! cargo run --release --example sweep                   # the built-in test model
//! AGENT_DISPATCH_URL=$(scripts/local-llm.sh --model qwen-1.5b) \
//!   cargo run --release --example sweep -- --model dispatch/qwen
//! cargo run --release --example sweep -- --model claude-sonnet-4-5 --alt-model claude-haiku-4-5
//! ```
//!
//! On a hosted model the variants are: the base (output mode `auto`), another model, one
//! other output mode (`--alt-mode`) and a tighter `max_llm_calls`. On a local model
//! (`dispatch/`, `ollama/`), where each run costs seconds of the machine's CPU, they are
//! the output modes themselves: the base (`auto`, which these routes resolve to
//! `native`), `tool` (`--modes` to choose others), and the placeholder test model (a
//! constant answer: the line a model's accuracy must clear); no budget variant unless
//! `--tight-calls N` asks for one. With `--prompts` the variants are the triage prompts
//! instead, in one output mode (`--prompt-mode`, default `tool`): the config without its
//! order check, the default config, and the default with the severity rule in the system
//! prompt; `--runs N` runs every ticket N times per variant (a local server is not
//! deterministic at temperature 0, so one run is not a measurement):
//!
//! ```text
//! AGENT_DISPATCH_URL=$(scripts/local-llm.sh --model qwen-1.5b) \
//!   cargo run --release --example sweep -- --model dispatch/qwen --prompts --runs 2 --concurrency 2
//! ```
//!
//! The grader is `GroundTruth`: the queue exact (1 or 0), the order id exact (null where
//! the label names none), the severity 1 when exact, 0.5 when one step off, 0 otherwise;
//! the overall score is their mean, and a ticket without
//! an answer scores 0. The table gives each variant's answered rate and mean score with
//! 95% bootstrap intervals, paired wins and losses against the base on the same tickets,
//! tokens, cost, round trips and latency, and a suggested `max_llm_calls` (the p95 of the
//! answered runs' round trips, plus one).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent_core::eval::{GroundTruth, Match, Sample, SweepEvent, SweepOptions, Variant, sweep};
use agent_core::testing::TestModel;
use agent_core::{AgentConfig, OutputMode, Value, json};
use agent_examples::labels;
use agent_examples::model::ModelChoice;
use agent_examples::triage::{self, Triage, data_dir};
use indicatif::{ProgressBar, ProgressStyle};

const USAGE: &str = "usage: sweep [FLAGS]

  --model NAME          the base model (default: AGENT_MODEL, else the first provider
                        key set, else the built-in test model)
  --alt-model NAME      the model of the model variant (default: claude -> claude-haiku-4-5,
                        gpt -> gpt-5-nano, a local model -> test, the placeholder model)
  --alt-mode MODE       the output mode of the mode variant (default: prompted, or tool
                        when the base is prompted)
  --modes M1,M2         one variant per output mode (auto, tool, native, prompted) instead
                        of --alt-mode's one (default on dispatch/ and ollama/: tool)
  --prompts             compare the triage prompts instead of models and modes: as
                        before (no order check), the order check (the default config),
                        and the order check with the severity rule, all in --prompt-mode
  --prompt-mode MODE    the output mode of the --prompts variants (default tool)
  --runs N              run every ticket N times per variant (default 1; llama.cpp with
                        two slots is not deterministic at temperature 0)
  --tight-calls N       max_llm_calls of the budget variant; 0: none (default 2, and 0 on
                        dispatch/ and ollama/)
  --concurrency N       runs at a time over all variants (default 4)
  --limit N             only the first N tickets
  --max-tokens N        output-token cap per LLM call
  --seed N              the bootstrap's seed (default 24301)
  --out DIR             where comparison.json and comparison.svg go (default target/sweep)
  -h, --help            this text";

struct Args {
    model: Option<String>,
    alt_model: Option<String>,
    alt_mode: Option<OutputMode>,
    modes: Option<Vec<OutputMode>>,
    tight_calls: Option<u32>,
    prompts: bool,
    prompt_mode: OutputMode,
    runs: usize,
    concurrency: usize,
    limit: Option<usize>,
    max_tokens: Option<u32>,
    seed: u64,
    out: PathBuf,
}

fn parse() -> Result<Option<Args>, String> {
    use lexopt::prelude::*;
    let mut args = Args {
        model: None,
        alt_model: None,
        alt_mode: None,
        modes: None,
        tight_calls: None,
        prompts: false,
        prompt_mode: OutputMode::Tool,
        runs: 1,
        concurrency: 4,
        limit: None,
        max_tokens: None,
        seed: 0x5eed,
        out: PathBuf::from("target/sweep"),
    };
    let mut parser = lexopt::Parser::from_env();
    let text = |e: lexopt::Error| e.to_string();
    while let Some(arg) = parser.next().map_err(text)? {
        match arg {
            Long("model") => {
                args.model = Some(parser.value().map_err(text)?.string().map_err(text)?)
            }
            Long("alt-model") => {
                args.alt_model = Some(parser.value().map_err(text)?.string().map_err(text)?);
            }
            Long("alt-mode") => {
                let value = parser.value().map_err(text)?.string().map_err(text)?;
                args.alt_mode = Some(value.parse()?);
            }
            Long("modes") => {
                let value = parser.value().map_err(text)?.string().map_err(text)?;
                let modes = value
                    .split(',')
                    .map(|m| m.trim().parse::<OutputMode>())
                    .collect::<Result<Vec<_>, _>>()?;
                args.modes = Some(modes);
            }
            Long("tight-calls") => {
                args.tight_calls = Some(parser.value().map_err(text)?.parse().map_err(text)?);
            }
            Long("prompts") => args.prompts = true,
            Long("prompt-mode") => {
                let value = parser.value().map_err(text)?.string().map_err(text)?;
                args.prompt_mode = value.parse()?;
            }
            Long("runs") => args.runs = parser.value().map_err(text)?.parse().map_err(text)?,
            Long("concurrency") => {
                args.concurrency = parser.value().map_err(text)?.parse().map_err(text)?;
            }
            Long("limit") => {
                args.limit = Some(parser.value().map_err(text)?.parse().map_err(text)?)
            }
            Long("max-tokens") => {
                args.max_tokens = Some(parser.value().map_err(text)?.parse().map_err(text)?);
            }
            Long("seed") => args.seed = parser.value().map_err(text)?.parse().map_err(text)?,
            Long("out") => args.out = parser.value().map_err(text)?.into(),
            Short('h') | Long("help") => return Ok(None),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if args.concurrency == 0 {
        return Err("--concurrency must be at least 1".into());
    }
    Ok(Some(args))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse() {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The model variant's model: a cheaper sibling for the hosted providers, the
/// placeholder test model for a local one (is the model better than a constant answer?).
fn alt_model(choice: &ModelChoice, flag: Option<String>) -> String {
    flag.unwrap_or_else(|| match choice {
        ModelChoice::Named { model, .. } if model.starts_with("claude-") => {
            "claude-haiku-4-5".into()
        }
        ModelChoice::Named { model, .. } if model.starts_with("gpt-") => "gpt-5-nano".into(),
        _ => "test".into(),
    })
}

/// The grader: queue exact; the order id exact (null where the label has none);
/// severity 1 when exact, 0.5 when one step off.
fn grader() -> GroundTruth {
    GroundTruth::new()
        .field("queue", Match::Exact)
        .field("order_id", Match::Exact)
        .field(
            "severity",
            Match::custom(
                |got: &Value, want: &Value| match (got.as_i64(), want.as_i64()) {
                    (Some(g), Some(w)) if g == w => (1.0, format!("{g} as labeled")),
                    (Some(g), Some(w)) if (g - w).abs() == 1 => (0.5, format!("{g}, labeled {w}")),
                    _ => (0.0, format!("{got}, labeled {want}")),
                },
            ),
        )
}

/// The prompts compared by `--prompts`, all in `mode`: the triage config as it was
/// before the order check (no output validator), the default config (the order check:
/// an empty `order_id` after a lookup found the order is fed back), and the default
/// with [`triage::SEVERITY_RULE`] added to the system prompt.
fn prompt_variants(
    base: &AgentConfig<Triage>,
    mode: OutputMode,
) -> Result<Vec<Variant<Triage>>, String> {
    let checked = base
        .with_(|b| b.output_mode(mode))
        .map_err(|e| format!("invalid config for mode {mode}: {e}"))?;
    let unchecked = checked
        .with_(|b| b.output_validator(|_: &Triage| Ok(())))
        .map_err(|e| format!("invalid config: {e}"))?;
    let severity = checked
        .with_(|b| {
            b.system_prompt(format!(
                "{}{}",
                triage::SYSTEM_PROMPT,
                triage::SEVERITY_RULE
            ))
        })
        .map_err(|e| format!("invalid config: {e}"))?;
    Ok(vec![
        Variant::new(format!("no order check ({mode})"), unchecked),
        Variant::new(format!("order check ({mode})"), checked),
        Variant::new(format!("order check + severity rule ({mode})"), severity),
    ])
}

/// Whether the model runs on this machine (`dispatch/`, `ollama/`): each run costs
/// seconds of CPU, so the sweep compares output modes and skips the budget variant.
fn is_local(choice: &ModelChoice) -> bool {
    matches!(choice, ModelChoice::Named { model, .. }
        if model.starts_with("dispatch/") || model.starts_with("ollama/"))
}

async fn run(args: Args) -> Result<(), String> {
    let choice = ModelChoice::resolve(args.model.clone());
    eprintln!("{}", choice.banner());
    let local = is_local(&choice);
    let base: AgentConfig<Triage> = triage::triage_config(&data_dir(), &choice)?
        .with_(|b| match args.max_tokens {
            Some(n) => b.max_tokens(n),
            None => b,
        })
        .map_err(|e| format!("invalid config: {e}"))?;
    let alt = alt_model(&choice, args.alt_model.clone());
    if matches!(choice, ModelChoice::Fallback) && alt != "test" {
        return Err(format!(
            "--alt-model {alt} needs --model: the base runs on the built-in test model's client"
        ));
    }
    let model_variant = base
        .with_(|b| {
            let b = b.model(alt.clone());
            if alt == "test" {
                // The plain test model: submits a placeholder at once, no tool calls.
                b.llm(TestModel::new())
            } else {
                b
            }
        })
        .map_err(|e| format!("invalid config for --alt-model {alt}: {e}"))?;
    let modes = match (&args.modes, args.alt_mode) {
        (Some(modes), _) => modes.clone(),
        (None, Some(mode)) => vec![mode],
        (None, None) if local => vec![OutputMode::Tool],
        (None, None) => vec![match base.output_mode() {
            OutputMode::Prompted => OutputMode::Tool,
            _ => OutputMode::Prompted,
        }],
    };
    // An attachment goes with its ticket only when both models take it (the other
    // variants share the base's model), so every variant sees the same input.
    let caps = [
        base.content_capabilities(),
        model_variant.content_capabilities(),
    ];
    let variants = if args.prompts {
        prompt_variants(&base, args.prompt_mode)?
    } else {
        let mut variants = vec![
            Variant::new(format!("base (auto: {})", base.output_mode()), base.clone()),
            Variant::new(format!("model {}", model_variant.model()), model_variant),
        ];
        for mode in modes {
            let variant = base
                .with_(|b| b.output_mode(mode))
                .map_err(|e| format!("invalid config for mode {mode}: {e}"))?;
            variants.push(Variant::new(format!("mode {mode}"), variant));
        }
        let tight_calls = args.tight_calls.unwrap_or(if local { 0 } else { 2 });
        if tight_calls > 0 {
            let tight = base
                .with_(|b| b.max_llm_calls(tight_calls))
                .map_err(|e| format!("invalid config: {e}"))?;
            variants.push(Variant::new(format!("max_llm_calls {tight_calls}"), tight));
        }
        variants
    };

    let mut tickets = triage::load_tickets(&data_dir().join("tickets"))?;
    if let Some(limit) = args.limit {
        tickets.truncate(limit);
    }
    let labels = labels::load(&data_dir().join("labels.json"))?;
    let samples: Vec<Sample> = (1..=args.runs)
        .flat_map(|run| tickets.iter().map(move |t| (run, t)))
        .map(|(run, t)| {
            // A repeat's id names its run, so the paired comparison pairs like with like.
            let id = if run == 1 {
                t.name.clone()
            } else {
                format!("{}#{run}", t.name)
            };
            let sample = Sample::new(id, t.input(&caps));
            match labels.get(&t.name) {
                Some(l) => sample.expected(
                    json!({"severity": l.severity, "queue": l.queue, "order_id": l.order_id}),
                ),
                None => sample,
            }
        })
        .collect();

    let bar = ProgressBar::new((variants.len() * samples.len()) as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs {msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    let progress = bar.clone();
    // Without a terminal (a log, CI) the bar is hidden: one line per run instead.
    let lines = !std::io::stderr().is_terminal();
    let options = SweepOptions::new()
        .grader(grader())
        .concurrency(args.concurrency)
        .seed(args.seed)
        .observer(move |event: &SweepEvent<'_, Triage>| {
            if let SweepEvent::RunFinished {
                variant,
                sample,
                result,
                grade,
                done,
                total,
                ..
            } = event
            {
                progress.set_message(format!("{variant}: {}", sample.id));
                progress.inc(1);
                if lines {
                    let score = match grade {
                        Some(Ok(g)) => format!("score {:.2}", g.score),
                        Some(Err(e)) => format!("grade failed: {e}"),
                        None => String::new(),
                    };
                    eprintln!(
                        "[{done}/{total}] {variant}: {} {} {score} ({:.1} s)",
                        sample.id,
                        result.category().unwrap_or("answered"),
                        result.duration.as_secs_f64()
                    );
                }
            }
        });
    let comparison = sweep(&variants, &samples, &options)
        .await
        .map_err(|e| e.to_string())?;
    bar.finish_and_clear();

    println!("{comparison}\n");
    for v in &comparison.variants {
        let t = &v.turns;
        match (t.answered_p95, t.suggested_max_llm_calls) {
            (Some(p95), Some(s)) => println!(
                "{}: 95% of answered runs took at most {p95} LLM call(s); suggested max_llm_calls {s} \
                 (now {}, {} runs hit it)",
                v.name, v.max_llm_calls, t.hit_cap
            ),
            _ => println!("{}: no answered run, no suggestion", v.name),
        }
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let json_path = args.out.join("comparison.json");
    comparison
        .write_json(&json_path)
        .map_err(|e| format!("{}: {e}", json_path.display()))?;
    let svg_path = args.out.join("comparison.svg");
    comparison
        .write_svg(&svg_path)
        .map_err(|e| format!("{}: {e}", svg_path.display()))?;
    println!("\nwrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
}
