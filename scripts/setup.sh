#!/usr/bin/env bash
# Creates .venv and installs triforge with pinned dependencies (requirements.lock). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "error: triforge needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1))" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.triforge-installed
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing triforge and its pinned dependencies into .venv with pip (quiet; a line every 30 s)"
  t0=$SECONDS
  ( while sleep 30 </dev/null >/dev/null 2>&1; do echo "setup: pip is still installing ($((SECONDS - t0)) s)"; done ) &
  beat=$!
  trap 'kill "$beat" 2>/dev/null || true' EXIT
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[${TRIFORGE_EXTRAS:-all}]"
  kill "$beat" 2>/dev/null || true
  echo "$want" > "$stamp"
  echo "setup: done in $((SECONDS - t0)) s"
fi
