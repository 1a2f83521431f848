"""maestro interpreter: per-node overhead with the scripted model, and 16-way parallel evaluation.

Run: .venv/bin/python benchmarks/maestro_exec.py   (writes benchmarks/results/maestro-exec-DATE.{json,md})
Targets (issue 5): interpreter overhead per node p50 <= 1 ms; 16-way parallel evaluation against a fake
server taking 200 ms per reply >= 10x faster than serial, with identical results.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.maestro.bench import open_benchmark
from triforge.maestro.evaluate import EvalReport, evaluate
from triforge.maestro.interpreter import Interpreter
from triforge.maestro.placeholder_replies import reply
from triforge.maestro.program import Program, ProgramBuilder
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import ScriptedLLM

RESULTS = Path(__file__).resolve().parent / "results"


def llm_chain(n: int) -> Program:
    b = ProgramBuilder("chain", inputs=["x0"], outputs=[f"x{n}"])
    for i in range(n):
        b.llm(f"n{i}", inputs={"text": f"x{i}"}, outputs={"out": f"x{i + 1}"}, instruction="Rewrite the text.")
    return b.build()


def code_chain(n: int) -> Program:
    b = ProgramBuilder("code_chain", inputs=["x0"], outputs=[f"x{n}"])
    for i in range(n):
        b.code(f"n{i}", "builtins:str", inputs={"object": f"x{i}"}, outputs={"out": f"x{i + 1}"})
    return b.build()


def per_node_overhead(prog: Program, nodes: int, runs: int = 300) -> list[float]:
    """Seconds per node, one sample per program run (scripted replies cost nothing)."""
    out_field = prog.outputs[0]
    llm = ScriptedLLM([lambda m, t: json.dumps({"out": "some text of a few words"})] * (nodes * (runs + 20)))
    ex = Interpreter(prog, llm)
    for _ in range(20):
        ex.run({"x0": "start"})
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run = ex.run({"x0": "start"})
        samples.append((time.perf_counter() - t0) / nodes)
        assert run.ok and out_field in run.outputs, run.error
    return samples


def _comparable(rep: EvalReport) -> list[dict[str, Any]]:
    return [{**r.to_dict(), "duration_s": 0, "trace": [{**t, "duration_s": 0} for t in r.trace]}
            for r in rep.results]


def parallel_eval(n: int = 16, delay: float = 0.2) -> dict[str, Any]:
    bench = open_benchmark("hotpotqa")
    examples = bench.examples("all")[:n]
    prog, retrievers = bench.seed_program(), bench.retrievers()
    with FakeOpenAIServer(reply, delay_s=delay) as srv:
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_concurrency=16))
        llm.complete([{"role": "user", "content": "warm up"}])
        serial = evaluate(prog, examples, bench.metric, llm, retrievers=retrievers, jobs=1)
        parallel = evaluate(prog, examples, bench.metric, llm, retrievers=retrievers, jobs=16)
        calls = len(srv.requests) - 1
    return {"examples": n, "llm_calls": calls, "delay_s": delay, "serial_s": serial.wall_s,
            "parallel_s": parallel.wall_s, "speedup": serial.wall_s / parallel.wall_s,
            "identical": _comparable(serial) == _comparable(parallel)}


def main() -> None:
    llm_nodes = per_node_overhead(llm_chain(10), 10)
    code_nodes = per_node_overhead(code_chain(10), 10)
    par = parallel_eval()
    p50 = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    p90 = lambda xs: statistics.quantiles(xs, n=10)[-1] * 1e3  # noqa: E731
    date = time.strftime("%Y-%m-%d")
    machine = f"{platform.machine()} python {platform.python_version()}"
    data = {"date": date, "machine": machine,
            "llm_node_overhead_ms": {"p50": p50(llm_nodes), "p90": p90(llm_nodes)},
            "code_node_overhead_ms": {"p50": p50(code_nodes), "p90": p90(code_nodes)},
            "parallel": par}
    rows = [
        ("interpreter overhead per llm node, scripted model (p50)", f"{p50(llm_nodes):.3f} ms", "<= 1 ms"),
        ("interpreter overhead per llm node, scripted model (p90)", f"{p90(llm_nodes):.3f} ms", ""),
        ("interpreter overhead per code node (p50)", f"{p50(code_nodes):.3f} ms", ""),
        (f"HotpotQA seed, {par['examples']} examples x 4 llm nodes, {par['delay_s'] * 1e3:.0f} ms/reply: serial",
         f"{par['serial_s']:.2f} s", ""),
        ("same, 16-way parallel", f"{par['parallel_s']:.2f} s", ""),
        ("parallel speedup", f"{par['speedup']:.1f}x", ">= 10x"),
        ("parallel results identical to serial", str(par["identical"]), "True"),
    ]
    md = [f"# maestro interpreter ({date}, {machine})", "", "| measure | value | target |", "|---|---|---|"]
    md += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"maestro-exec-{date}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"maestro-exec-{date}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
