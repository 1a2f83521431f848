#!/usr/bin/env bash
# Sets up .venv with pinned dependencies, then runs the linter and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
