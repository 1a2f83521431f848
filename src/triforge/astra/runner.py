"""In-process entry points for tools that wrap a Python process (compute-sanitizer, ncu).

    python -m triforge.astra.runner check --task T --kernel F.cu [--shapes sanitize]
    python -m triforge.astra.runner launch --task T --kernel F.cu [--timing-index 0] [--dtype bf16]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from triforge.astra import gpu
from triforge.astra.candidate import Candidate
from triforge.astra.evaluate import EvalOptions, _compile_load, evaluate
from triforge.astra.task import get_task


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="triforge.astra.runner")
    ap.add_argument("mode", choices=["check", "launch"])
    ap.add_argument("--task", required=True)
    ap.add_argument("--kernel")
    ap.add_argument("--shapes", default="sanitize")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--timing-index", type=int, default=0)
    ap.add_argument("--fast-math", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)

    task = get_task(args.task)
    source = Path(args.kernel).read_text() if args.kernel else task.baseline_source()
    gpu.init_context()
    if args.mode == "check":
        opts = EvalOptions(shapes=args.shapes, timing=False, base_seed=args.seed, fast_math=args.fast_math,
                           dtypes=[args.dtype])
        res = evaluate(args.task, source, opts).to_dict()
        print(json.dumps({k: res[k] for k in ("verdict", "reasons", "checks")}))
        return 0 if res["verdict"] == "correct" else 1
    res, kernel = _compile_load(task, Candidate.from_source(source), args.fast_math)
    if kernel is None:
        print(res.log, file=sys.stderr)
        return 2
    shape = task.timing[args.timing_index]
    inputs = task.make_inputs(shape, args.dtype, args.seed)
    kernel.launcher(shape, args.dtype)(inputs)
    gpu.synchronize()
    print(json.dumps({"launched": task.entry, "shape": shape, "dtype": args.dtype}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
