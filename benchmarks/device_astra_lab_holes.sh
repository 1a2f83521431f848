#!/usr/bin/env bash
# One device call for issues 42 and 40 (parts 3-4): install the carried wheels (.whl), time `astra check` from the
# CLI cold and warm and measure the roofline (benchmarks/astra_warm_check.py), judge the corpus of the five classes
# and every baseline with the lab (benchmarks/astra_lab_holes.py), then the GPU tests named in TESTS. Writes logs and JSON under $OUT. Usage on the device: bash benchmarks/device_astra_lab_holes.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/wl .whl/*.whl > "$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD/src:/tmp/wl PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/gpu.txt"
python3 -c "import torch,platform;print('torch',torch.__version__,'python',platform.python_version())" | tee -a "$OUT/gpu.txt"
if [ -z "${SKIP_HOLES:-}" ]; then
  t0=$(date +%s)
  timeout ${HOLES_S:-330} python3 benchmarks/astra_lab_holes.py --out "$OUT/lab-holes.json" --runs ${RUNS:-100} \
    ${CLASSES:+--classes $CLASSES} > "$OUT/lab-holes.log" 2>&1
  echo "lab holes rc=$? in $(( $(date +%s)-t0 )) s"; tail -25 "$OUT/lab-holes.log"
fi
if [ -z "${SKIP_WARM:-}" ]; then  # issue 40: CLI check cold and warm, and the roofline probe
  t0=$(date +%s)
  timeout ${WARM_S:-150} python3 benchmarks/astra_warm_check.py --out "$OUT/warm-check.json" > "$OUT/warm-check.log" 2>&1
  echo "warm check rc=$? in $(( $(date +%s)-t0 )) s"; tail -40 "$OUT/warm-check.log"
fi
if [ -n "${TESTS:-}" ]; then
  t0=$(date +%s)
  timeout ${TESTS_S:-200} python3 -m pytest -v -rf -p no:cacheprovider -m gpu $TESTS > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$? in $(( $(date +%s)-t0 )) s"; grep -E "passed|failed|FAILED|Error" "$OUT/gpu-tests.log" | tail -30
fi
