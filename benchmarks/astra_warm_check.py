"""`triforge astra check` from the CLI, one process per check: with a worker for that check only (--no-warm)
and through the warm lab worker (the first call starts it), plus the device's roofline from the lab's probe.

    python benchmarks/astra_warm_check.py --out FILE.json [--repeats 5] [--src TREE/src] [--no-roofline]

--src: the triforge source tree the CLI runs from (default this checkout's), so an older tree can be timed
beside this one in the same device call.

Every figure is the wall time of the whole CLI process, as a user waits for it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = [str(ROOT / "src")]
sys.path[:0] = SRC

from triforge.astra.corpus.holes.outside_view import cases  # noqa: E402


def cli(args: list[str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "triforge.cli.app", "astra", *args], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC[0], os.environ.get("PYTHONPATH", "")])})
    return time.perf_counter() - t0, r.returncode, (r.stdout + r.stderr)[-1500:]


def roofline() -> dict:
    from triforge.astra import gpu
    from triforge.astra.roofline import measure
    from triforge.astra.timing import copy_bandwidth_gbs

    gpu.init_context()
    peak = 2 * gpu.device_attribute("MEMORY_CLOCK_RATE") * 1e3 * gpu.device_attribute("GLOBAL_MEMORY_BUS_WIDTH") / 8 / 1e9
    r = measure(peak)
    return {"copy_gbs": r.copy_gbs, "read_gbs": r.read_gbs, "achievable_gbs": r.achievable_gbs, "peak_gbs": peak,
            "copy_config": r.copy_config, "read_config": r.read_config, "torch_copy_gbs": copy_bandwidth_gbs(),
            "tried": r.tried}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--src", default=None)
    ap.add_argument("--no-roofline", action="store_true")
    args = ap.parse_args()
    if args.src:
        SRC[0] = str(Path(args.src).resolve())
    vec = next(c for c in cases() if c.name == "vectorised-with-a-scalar-tail")
    kernel = Path(tempfile.mkdtemp()) / "silu_vec.cu"
    kernel.write_text(vec.source)
    base = ["check", "--task", vec.task, "--kernel", str(kernel)]
    out: dict = {"kernel": vec.name, "task": vec.task, "src": SRC[0]}
    import torch

    out["device"] = torch.cuda.get_device_name()
    cli(["stop-worker"])
    t, rc, text = cli(base + ["--no-warm"])
    out["cold_no_warm_s"] = t
    out["cold_output"] = text
    print(f"--no-warm: {t:.2f} s rc={rc}\n{text[-1200:]}", flush=True)
    t, rc, text = cli(base)
    out["warm_first_s"] = t
    print(f"warm, first (starts the worker): {t:.2f} s rc={rc}", flush=True)
    times = []
    for _ in range(args.repeats):
        t, rc, text = cli(base + ["--json", str(kernel.with_suffix(".json"))])
        times.append(t)
        print(f"warm: {t:.2f} s rc={rc}", flush=True)
    out["warm_s"] = times
    out["warm_p50_s"] = statistics.median(times)
    out["warm_output"] = text
    res = json.loads(kernel.with_suffix(".json").read_text())
    out["warm_split"] = {k: res.get(k) for k in ("compile_s", "oracle_s", "timing_s", "checks", "verdict")}
    out["timings"] = res.get("timings")
    t, rc, text = cli(["check", "--task", vec.task, "--kernel", str(kernel), "--no-timing"])
    out["warm_no_timing_s"] = t
    cli(["stop-worker"])
    if not args.no_roofline:
        out["roofline"] = roofline()
    print(json.dumps({k: v for k, v in out.items() if k not in ("cold_output", "warm_output", "timings")}, indent=1,
                     default=str)[:3000])
    print(text[-1500:])
    Path(args.out).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
