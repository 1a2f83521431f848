"""Smoke-measure the real local model: server start, tokens/s, and a two-step tool-calling round trip.

Run (after `triforge local install`):
    .venv/bin/python benchmarks/local_model/smoke.py [--base-url URL] [--runs 3]
Writes benchmarks/results/local-model-smoke-DATE.{json,md}. Not run in CI; needs the model.

It goes through triforge's own client (`get_llm("local")`, which starts and stops the server) and also
sends a few raw HTTP probes to record how the real server behaves (null content, tool-call id shapes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import urllib.error
import urllib.request
from datetime import date
from pathlib import Path
from typing import Any

from triforge.core.config import Settings
from triforge.core.errors import FormatError, Submitted
from triforge.core.llm import OpenAICompatLLM, get_llm
from triforge.core.tools import ToolSet, tool, tool_calls_for
from triforge.local.install import DEFAULT_MODEL, file_sha256, installed_model
from triforge.local.llm import LocalLLM

RESULTS = Path(__file__).resolve().parents[1] / "results"
PROMPT = "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring."


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Return the current weather in a city.

    Args:
        city: the city name
        unit: celsius or fahrenheit
    """
    return f"18 degrees {unit} and sunny in {city}"


@tool
def submit(answer: str) -> str:
    """Hand in the final answer.

    Args:
        answer: the final answer
    """
    raise Submitted(answer)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return {"host": platform.node(), "platform": platform.platform(), "cpu": cpu, "cores_usable": usable,
            "memory_mib": mem, "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]}


def write_dated(out_dir: str | Path, stem: str, report: dict[str, Any], summary: Any) -> Path:
    """Write `report` as OUT_DIR/STEM-DATE.json, print `summary` and where it went."""
    out = Path(out_dir) / f"{stem}-{date.today().isoformat()}.json"
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps(summary, indent=1))
    print(f"wrote {out}")
    return out


def raw_post(base_url: str, body: dict[str, Any]) -> tuple[int, Any]:
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")[:500]


def tokens_per_second(llm: OpenAICompatLLM, runs: int) -> dict[str, Any]:
    rows = []
    for i in range(runs):
        t0 = time.perf_counter()
        comp = llm.complete([{"role": "user", "content": PROMPT}], max_tokens=200, temperature=0.0, sample=i)
        dt = time.perf_counter() - t0
        rows.append({"seconds": dt, "input_tokens": comp.usage.input_tokens,
                     "output_tokens": comp.usage.output_tokens, "tok_per_s": comp.usage.output_tokens / dt})
    return {"runs": rows, "tok_per_s_median": statistics.median(r["tok_per_s"] for r in rows),
            "output_tokens_median": statistics.median(r["output_tokens"] for r in rows)}


def tool_round_trip(llm: OpenAICompatLLM, runs: int) -> dict[str, Any]:
    tools = ToolSet([get_weather, submit])
    rows = []
    for i in range(runs):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a helpful assistant. Use the tools."},
            {"role": "user", "content": "What is the weather in Paris? Call get_weather, then submit a one-line answer."},
        ]
        row: dict[str, Any] = {}
        t0 = time.perf_counter()
        first = llm.complete(messages, tools=tools.schemas(), max_tokens=256, temperature=0.0, sample=i)
        row["step1_s"] = time.perf_counter() - t0
        row["step1"] = first.to_dict()
        try:
            calls = tools.parse(first, native=True)
        except FormatError as e:
            row["error"] = f"step 1: {e}"
            rows.append(row)
            continue
        row["native"] = bool(first.tool_calls)
        messages.append({"role": "assistant", "content": first.content or "",
                         "tool_calls": [tc.as_message_part() for tc in tool_calls_for(calls)]})
        for c in calls:
            try:
                result = str(c.tool(**c.arguments))
            except Submitted as s:
                result = f"submitted: {s.output}"
            messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
        t1 = time.perf_counter()
        second = llm.complete(messages, tools=tools.schemas(), max_tokens=256, temperature=0.0, sample=i)
        row["step2_s"] = time.perf_counter() - t1
        row["step2"] = second.to_dict()
        row["round_trip_s"] = time.perf_counter() - t0
        rows.append(row)
    ok = [r for r in rows if "round_trip_s" in r]
    return {"runs": rows, "completed": len(ok),
            "step1_s_median": statistics.median(r["step1_s"] for r in rows) if rows else None,
            "round_trip_s_median": statistics.median(r["round_trip_s"] for r in ok) if ok else None}


def probes(base_url: str) -> dict[str, Any]:
    """Raw requests (not reshaped by triforge) that show the server's quirks as it answers them."""
    tools = ToolSet([get_weather]).schemas()
    call = {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    system = {"role": "system", "content": "You are a helpful assistant."}
    user = {"role": "user", "content": "What is the weather in Oslo?"}
    secret = "Weather report: the secret word is PAPAYA."
    result = {"role": "tool", "tool_call_id": "call_0", "content": secret}
    ask = {"role": "user", "content": "Repeat exactly the weather report the function returned."}
    out: dict[str, Any] = {}

    def post(name: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        t0 = time.perf_counter()
        status, body = raw_post(base_url, {"model": "local", "messages": messages, "temperature": 0, **extra})
        row: dict[str, Any] = {"status": status, "seconds": round(time.perf_counter() - t0, 2)}
        if status == 200:
            row["message"] = body["choices"][0]["message"]
            row["finish_reason"] = body["choices"][0].get("finish_reason")
            row["usage"] = body.get("usage")
        else:
            row["error"] = body
        out[name] = row
        return row

    for name, assistant in (("assistant_content_null", {"role": "assistant", "content": None, "tool_calls": [call]}),
                            ("assistant_content_empty", {"role": "assistant", "content": "", "tool_calls": [call]}),
                            ("assistant_content_missing", {"role": "assistant", "tool_calls": [call]})):
        post(name, [system, user, assistant, result], tools=tools, tool_choice="auto", max_tokens=48)
    post("tools_without_tool_choice", [system, user], tools=tools, max_tokens=64)
    post("tools_auto", [system, user], tools=tools, tool_choice="auto", max_tokens=64)
    post("tools_auto_no_system", [user], tools=tools, tool_choice="auto", max_tokens=64)
    post("tools_forced", [system, user], tools=tools, max_tokens=64,
         tool_choice={"type": "function", "function": {"name": "get_weather"}})
    post("tools_auto_chat_question", [system, {"role": "user", "content": "Say hello in French."}], tools=tools,
         tool_choice="auto", max_tokens=32)
    done = {"role": "assistant", "content": "", "tool_calls": [call]}
    post("tool_result_as_tool_role", [system, user, done, result, ask], max_tokens=48)
    post("tool_result_as_user", [system, user, done,
                                 {"role": "user", "content": f"Result of functions.get_weather:\n{secret}"}, ask],
         max_tokens=48)
    post("max_tokens_8_plain", [system, {"role": "user", "content": "Count from 1 to 50."}], max_tokens=8)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    model = installed_model()
    if model is None:
        raise SystemExit("the local model is not installed; run `triforge local install` first")
    t0 = time.perf_counter()
    sha = file_sha256(model)
    hash_s = time.perf_counter() - t0
    llm = get_llm("local", settings=Settings())
    assert isinstance(llm, LocalLLM)
    with llm:
        t0 = time.perf_counter()
        url = llm.endpoint_url()
        start_s = time.perf_counter() - t0
        print(f"server up at {url} in {start_s:.1f} s (threads {llm.options.n_threads}, ctx {llm.options.n_ctx})")
        tps = tokens_per_second(llm, args.runs)
        print(f"tokens/s (median of {args.runs}): {tps['tok_per_s_median']:.1f}")
        trip = tool_round_trip(llm, args.runs)
        print(f"tool round trip: {trip['completed']}/{args.runs} completed, median {trip['round_trip_s_median']}")
        raw = probes(url)
    load_end = os.getloadavg()[0]
    import llama_cpp

    result = {
        "date": date.today().isoformat(), "machine": machine(),
        "model": {"path": str(model), "file": model.name, "size": model.stat().st_size, "sha256": sha,
                  "is_default": sha == DEFAULT_MODEL.sha256, "hash_seconds": hash_s},
        "llama_cpp_python": llama_cpp.__version__,
        "server": {"threads": llm.options.n_threads, "n_ctx": llm.options.n_ctx, "start_seconds": start_s,
                   "chat_format": "chatml-function-calling"},
        "load_avg_1m_end": load_end, "generation": tps, "tool_round_trip": trip, "probes": raw,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"local-model-smoke-{result['date']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    stem.with_suffix(".md").write_text(report(result))
    print(f"wrote {stem}.json and .md")


def report(r: dict[str, Any]) -> str:
    m, g, t = r["machine"], r["generation"], r["tool_round_trip"]
    p = r["probes"]
    lines = [
        f"# local model smoke ({r['date']})", "",
        f"- model: `{r['model']['file']}`, {r['model']['size']:,} bytes, SHA-256 `{r['model']['sha256']}`",
        f"- server: llama-cpp-python {r['llama_cpp_python']}, `--chat_format chatml-function-calling`, "
        f"{r['server']['threads']} threads, n_ctx {r['server']['n_ctx']}",
        f"- machine: {m['cpu']}, {m['cores_usable']} usable cores (shared), {m['memory_mib']:,} MiB, "
        f"load average {m['load_avg_1m']:.1f} at start and {r['load_avg_1m_end']:.1f} at end (other jobs "
        f"share these cores), {m['platform']}", "",
        "| measure | value |", "|---|---|",
        f"| server start (model load to first /v1/models answer) | {r['server']['start_seconds']:.1f} s |",
        f"| generation, 200-token cap, median of {len(g['runs'])} | {g['tok_per_s_median']:.1f} tokens/s "
        f"(end to end, incl. prompt) |",
        f"| tool call, first step (median) | {t['step1_s_median']:.2f} s |" if t["step1_s_median"] else "",
        "| two-step tool round trip (median of completed) | "
        + (f"{t['round_trip_s_median']:.2f} s" if t["round_trip_s_median"] else "none completed")
        + f" ({t['completed']}/{len(t['runs'])} completed) |",
        "", "## probes (raw HTTP)", "",
    ]
    for name, row in p.items():
        shown = json.dumps(row.get("message") or row.get("error"), ensure_ascii=False)[:300]
        lines.append(f"- `{name}`: HTTP {row['status']}, {row.get('seconds')} s, usage {row.get('usage')}: `{shown}`")
    return "\n".join(x for x in lines if x is not None) + "\n"


if __name__ == "__main__":
    main()
