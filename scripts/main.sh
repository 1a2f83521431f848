#!/usr/bin/env bash
# Sets up .venv with pinned dependencies, installs the embedded local model (Qwen2.5-Coder-1.5B-Instruct,
# Q4_K_M, served by llama.cpp; the first run builds llama-cpp-python from source, ~10 min on 2 cores),
# then runs the main job offline: cpagent solves an example constraint problem with that model, and the
# strict grader checks the result on every instance. Leaves runs/main (report.md, trace.html, ...).
# Arguments go to `triforge cpagent solve` (`bash scripts/main.sh --fresh` runs afresh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/triforge local install
echo "The model is Qwen2.5-Coder-1.5B-Instruct (1.5B parameters, 4-bit), running on this machine's CPU."
echo "It is small and often writes broken CPMpy: an 'incorrect' grade is an honest result, not a crash."
echo "Tool calls use triforge's text protocol (code in python fences) with at most 768 tokens per reply."
rc=0
TRIFORGE_LOCAL_TOOLS=text .venv/bin/triforge cpagent solve --data examples/cpbench --problem two_numbers --model local \
  --out runs/main --max-steps 12 --max-wall 900 --profile small-model "$@" || rc=$?
.venv/bin/triforge trace summary runs/main
echo "run directory: runs/main (report.md, trace.html, results.json, solution.py if the agent submitted)"
# 1 means the run finished but the answer was not correct; anything else is a real failure.
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]
