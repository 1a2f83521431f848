#!/usr/bin/env bash
# Sets up .venv with pinned dependencies, then runs triforge's main job offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/triforge demo --out runs/demo
