#!/usr/bin/env bash
# One device call: install the carried wheels (.whl), then the astra GPU tests, the isolation benchmark and the
# one-GPU rows of the multi-GPU benchmark. Writes logs under $OUT. Usage on the device: bash benchmarks/device_gpu_check.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/wl .whl/*.whl > "$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD/src:/tmp/wl PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/gpu.txt"
python3 -c "import torch,platform;print('torch',torch.__version__,'python',platform.python_version())" | tee -a "$OUT/gpu.txt"
python3 benchmarks/device_cuda_confined_probe.py --out "$OUT/cuda-confined-probe.json"
t0=$(date +%s)
timeout ${TESTS_S:-330} python3 -m pytest -v -rf -p no:cacheprovider -m gpu tests/astra ${TESTS_EXTRA:-} > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? in $(( $(date +%s)-t0 )) s"; tail -30 "$OUT/gpu-tests.log"
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout 120 python3 benchmarks/astra_isolation.py --out "$OUT/astra-isolation.json" > "$OUT/astra-isolation.log" 2>&1
  echo "isolation bench rc=$?"; tail -15 "$OUT/astra-isolation.log"
  timeout 150 python3 benchmarks/astra_multi_gpu.py --gpus 1 --executors local --kind nvidia-h200 --no-profile --out "$OUT" > "$OUT/multi.log" 2>&1
  echo "multi-gpu rc=$?"; tail -30 "$OUT/multi.log"
fi
