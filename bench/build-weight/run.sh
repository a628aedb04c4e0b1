#!/usr/bin/env bash
# The build weight of a one-file crate on agent-core against one on rig-core, side by
# side in one run (issue 48): crates in the dependency tree, and the wall and CPU time
# (user + sys) of `cargo build --release` from an empty target directory.
#
#   bench/build-weight/run.sh            # one build of each, agent-core first
#   ROUNDS=2 bench/build-weight/run.sh   # A B A B: interleaved, to see the machine's drift
#
# Both crates call OpenAI (`gpt-5-mini`) the way each project's README says:
# - agent-core with its default features (path dependency on this checkout), tokio;
# - rig-core 0.44 with its defaults plus `reqwest`, the feature its README installs
#   (`cargo add rig-core --features reqwest`): rig-core's defaults alone have no HTTP
#   client, and a provider client then needs one of yours. Its crate count without
#   `reqwest` is printed too.
# The crates are written to a temporary directory and removed; no rig code is kept here.
# Sources are fetched before the clock starts (network is not timed); `-j 2`, release
# profile defaults, CARGO_INCREMENTAL unset (release does not use it).
# Crates: `cargo tree -e normal --prefix none`, deduplicated: the package itself and
# every normal (runtime) dependency, each name+version once. "Compiling" counts every
# unit cargo compiled (build scripts' and proc macros' dependencies included).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${ROUNDS:-1}"
jobs="${JOBS:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

crate() { # name, dependency lines, main.rs
  mkdir -p "$work/$1/src"
  printf '[package]\nname = "%s"\nversion = "0.1.0"\nedition = "2024"\n\n[dependencies]\n%s\ntokio = { version = "1", features = ["macros", "rt-multi-thread"] }\n\n[workspace]\n' \
    "$1" "$2" >"$work/$1/Cargo.toml"
  printf '%s\n' "$3" >"$work/$1/src/main.rs"
}

crate ac "agent-core = { path = \"$repo/agent-core\" }" '
use agent_core::{AgentConfig, agent_output, run_agent};

/// One answer.
#[agent_output]
#[derive(Debug)]
pub struct Answer {
    pub text: String,
}

#[tokio::main]
async fn main() -> Result<(), agent_core::ConfigError> {
    let config: AgentConfig<Answer> = AgentConfig::builder("hello")
        .model("gpt-5-mini")
        .build()?;
    let result = run_agent(&config, "Who are you?").await;
    println!("{:?}", result.outcome);
    Ok(())
}'

crate rig 'rig-core = { version = "0.44", features = ["reqwest"] }' '
use rig_core::{
    completion::CompletionRequest,
    providers::openai::{self, OpenAI},
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = OpenAI::from_env()?.completion(openai::GPT_5_2);
    let response = model.call(CompletionRequest::new("Who are you?")).await?;
    println!("{}", response.text());
    Ok(())
}'

count() { # directory, extra cargo tree flags
  (cd "$1" && cargo tree -e normal --prefix none "${@:2}" | sed 's/ (\*)$//; s/ (proc-macro)//' | sort -u | wc -l)
}

for c in ac rig; do (cd "$work/$c" && cargo fetch -q); done
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores  rustc: $(rustc --version)"
echo "agent-core: $(git -C "$repo" rev-parse --short HEAD)  rig-core: $(cd "$work/rig" && cargo tree -e normal --depth 1 | grep -o 'rig-core v[0-9.]*')"
echo
echo "crates (cargo tree -e normal, the root crate included):"
echo "  agent-core, default features:                  $(count "$work/ac")"
echo "  agent-core, defaults + bedrock:                $(count "$work/ac" -F agent-core/bedrock)"
sed -i 's|agent-core = { path = "\([^"]*\)" }|agent-core = { path = "\1", default-features = false, features = ["openai"] }|' "$work/ac/Cargo.toml"
echo "  agent-core, default-features = false, openai:  $(count "$work/ac")"
sed -i 's|, default-features = false, features = \["openai"\] }| }|' "$work/ac/Cargo.toml"
echo "  rig-core 0.44, defaults + reqwest (its README): $(count "$work/rig")"
sed -i 's/features = \["reqwest"\]/features = []/' "$work/rig/Cargo.toml"
echo "  rig-core 0.44, defaults alone (no HTTP client): $(count "$work/rig")"
sed -i 's/features = \[\]/features = ["reqwest"]/' "$work/rig/Cargo.toml"
echo
printf '%-5s %-6s %10s %8s %8s %8s %10s  %s\n' round crate compiled wall_s user_s sys_s cpu_s load_before
for round in $(seq 1 "$rounds"); do
  for c in ac rig; do
    rm -rf "$work/$c/target"
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$work/$c" && /usr/bin/time -f '%e %U %S' -o "$work/time" \
      cargo build --release -j "$jobs" 2>"$work/log") || { cat "$work/log"; exit 1; }
    read -r wall user sys <"$work/time"
    compiled="$(grep -c '^ *Compiling ' "$work/log")"
    cpu="$(echo "$user + $sys" | bc)"
    printf '%-5s %-6s %10s %8s %8s %8s %10s  %s\n' "$round" "$c" "$compiled" "$wall" "$user" "$sys" "$cpu" "$load"
  done
done
