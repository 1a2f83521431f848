#!/usr/bin/env bash
# Issue 40 on the device, in parts chosen by PARTS (default "budget warm"; also "fi" and "tests"):
#   budget: where check's timing time goes and whether the flush works (benchmarks/astra_timing_budget.py), this tree
#           and the tree in .bench-old/src (the path before, carried beside it) when present
#   flush:  only whether the lab's flush empties the L2 (astra_timing_budget.py --flush-only), this tree
#   warm:   `astra check` from the CLI, warm worker, this tree and .bench-old (benchmarks/astra_warm_check.py)
#   fi:     `astra compare` with FlashInfer's kernels built from the headers carried in .fi-include
#   tests:  the GPU tests named in TESTS through the confined worker
# Carry: .whl (wheels the image lacks), .bench-old, .fi-include. Writes logs and JSON under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PARTS=${PARTS:-budget warm}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/wl .whl/*.whl > "$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD/src:/tmp/wl PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/gpu.txt"
python3 -c "import torch,platform;print('torch',torch.__version__,'python',platform.python_version())" | tee -a "$OUT/gpu.txt"
old() { [ -d .bench-old/src ]; }
for part in $PARTS; do
  t0=$(date +%s)
  case $part in
    budget)
      timeout 200 python3 benchmarks/astra_timing_budget.py --out "$OUT/budget-new.json" --evals 3 > "$OUT/budget-new.log" 2>&1
      echo "budget (this tree) rc=$?"; tail -8 "$OUT/budget-new.log"
      if old && [ -z "${BUDGET_NEW_ONLY:-}" ]; then
        PYTHONPATH=$PWD/.bench-old/src:/tmp/wl timeout 150 python3 benchmarks/astra_timing_budget.py \
          --out "$OUT/budget-old.json" --evals 2 > "$OUT/budget-old.log" 2>&1
        echo "budget (before) rc=$?"; tail -6 "$OUT/budget-old.log"
      fi ;;
    flush)
      timeout 120 python3 benchmarks/astra_timing_budget.py --flush-only --out "$OUT/flush.json" > "$OUT/flush.log" 2>&1
      echo "flush probe rc=$?"; tail -12 "$OUT/flush.log" ;;
    warm)
      if old; then
        timeout 150 python3 benchmarks/astra_warm_check.py --src .bench-old/src --no-roofline --repeats 3 --out "$OUT/warm-old.json" \
          > "$OUT/warm-old.log" 2>&1
        echo "warm check (before) rc=$?"; grep -E "^(--no-warm|warm)" "$OUT/warm-old.log"
      fi
      timeout 200 python3 benchmarks/astra_warm_check.py --out "$OUT/warm-new.json" > "$OUT/warm-new.log" 2>&1
      echo "warm check (this tree) rc=$?"; grep -E "^(--no-warm|warm)" "$OUT/warm-new.log"; tail -12 "$OUT/warm-new.log" ;;
    fi)
      for t in ${FI_TASKS:-silu_and_mul rmsnorm fused_add_rmsnorm gelu_tanh_and_mul}; do
        extra=--no-compile; [ "$t" = silu_and_mul ] && extra=
        timeout 240 python3 -m triforge.cli.app astra compare --task "$t" $extra --flashinfer-include .fi-include \
          --json "$OUT/compare-$t.json" > "$OUT/compare-$t.log" 2>&1
        echo "compare $t rc=$? ($(( $(date +%s)-t0 )) s so far)"; tail -22 "$OUT/compare-$t.log" | cut -c1-170
      done ;;
    tests)
      [ -d .fi-include ] && export TRIFORGE_FLASHINFER_INCLUDE=$PWD/.fi-include
      timeout ${TESTS_S:-300} python3 -m pytest -v -rf -p no:cacheprovider -m gpu \
        ${TESTS:-tests/astra/test_lab_holes.py tests/astra/test_flashinfer_headers.py} \
        > "$OUT/gpu-tests.log" 2>&1
      echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|Error" "$OUT/gpu-tests.log" | tail -15 ;;
  esac
  echo "part $part: $(( $(date +%s)-t0 )) s"
done
