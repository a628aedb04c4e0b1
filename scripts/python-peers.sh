#!/usr/bin/env bash
# The Python side of the protocol tests: a venv with the official MCP and A2A SDKs and
# the AG-UI types, from PyPI, pinned in scripts/python-peers.txt. Idempotent and safe to
# run from several test processes at once (a lock); prints the venv's python on stdout.
#
#   scripts/python-peers.sh            # create or reuse, print the interpreter path
#
# Environment:
#   AGENT_PEERS_HOME   where the venv lives (default: <repo>/target/python-peers)
#   PYTHON             the interpreter that makes the venv (default: python3, 3.10 or later)
#
# Needs network access to PyPI the first time (about a minute); later runs reuse the venv
# until python-peers.txt changes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
home=${AGENT_PEERS_HOME:-$root/target/python-peers}
reqs=$root/scripts/python-peers.txt
python=${PYTHON:-python3}
mkdir -p "$home"
exec 9>"$home/.lock"
flock 9
stamp=$(sha256sum "$reqs" | cut -d' ' -f1)
venv=$home/venv
if [[ ! -x $venv/bin/python || "$(cat "$home/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$reqs" >&2
  echo "$stamp" >"$home/.stamp"
fi
echo "$venv/bin/python"
