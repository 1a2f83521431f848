#!/usr/bin/env bash
# Sets up .venv with pinned dependencies, installs the embedded local model (Qwen2.5-Coder-1.5B-Instruct,
# Q4_K_M, served by llama.cpp; the first run builds llama-cpp-python from source, ~10-15 min on 2 cores),
# then runs the main job offline: cpagent solves an example constraint problem with that model, and the
# strict grader checks the result on every instance. Leaves runs/main (report.md, trace.html, ...).
# Arguments go to `triforge cpagent solve` (`bash scripts/main.sh --fresh` runs afresh).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "[main.sh $((SECONDS - start)) s] $*"; }
step "1/3 setting up .venv with the pinned dependencies (the first time: pip, a few minutes; later: at once)"
bash scripts/setup.sh
step "2/3 installing the local model and llama.cpp (the first time: a 1.1 GB download and a 10-15 min build on 2 cores; later: at once)"
.venv/bin/triforge local install
step "3/3 running cpagent on examples/cpbench two_numbers with the local model (at most 900 s of agent time)"
echo "The model is Qwen2.5-Coder-1.5B-Instruct (1.5B parameters, 4-bit), running on this machine's CPU."
echo "It is small and often writes broken CPMpy: an 'incorrect' grade is an honest result, not a crash."
echo "Tool calls use the text protocol of triforge (code in python fences) with at most 768 tokens per reply."
rc=0
TRIFORGE_LOCAL_TOOLS=text .venv/bin/triforge cpagent solve --data examples/cpbench --problem two_numbers --model local \
  --out runs/main --max-steps 12 --max-wall 900 --profile small-model "$@" || rc=$?
.venv/bin/triforge trace summary runs/main
echo "run directory: runs/main (report.md, trace.html, results.json, solution.py if the agent submitted)"
step "done. triforge is not on PATH: run it as .venv/bin/triforge (e.g. .venv/bin/triforge trace view runs/main),"
echo "or activate the environment first: source .venv/bin/activate"
# 1 means the run finished but the answer was not correct; anything else is a real failure.
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]
