#!/usr/bin/env bash
# Sets up .venv with pinned dependencies, then runs the linter and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The HTML pages are checked in headless Chromium. As root (CI) it is installed from the distribution when
# missing (about 110 MB, 1-2 min once); TRIFORGE_NO_BROWSER=1 skips that, and the browser tests then skip.
if [ "$(id -u)" = 0 ] && [ -z "${TRIFORGE_NO_BROWSER:-}" ] && command -v apt-get >/dev/null \
   && ! command -v chromium >/dev/null; then
  echo "installing chromium for the browser tests (TRIFORGE_NO_BROWSER=1 skips this)" >&2
  { DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends chromium \
    || { timeout 300 apt-get update -q && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends chromium; }; } \
    >/dev/null 2>&1 || echo "note: chromium could not be installed; the browser tests will be skipped" >&2
fi
.venv/bin/ruff check src tests benchmarks
# Test files are spread over up to 4 worker processes (one per core; TRIFORGE_TEST_WORKERS=0 runs them in
# this process): most tests wait on subprocesses, so 2 workers on 2 cores cut the wall time by about a third.
workers=${TRIFORGE_TEST_WORKERS:-$(n=$(nproc); echo $((n < 4 ? n : 4)))}
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile "$@"
