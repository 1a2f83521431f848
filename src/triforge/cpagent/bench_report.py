"""Summaries and reports (Markdown and self-contained HTML with a chart) of a cpagent benchmark."""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path
from typing import Any


def _correct(rec: dict[str, Any] | None) -> bool:
    return bool(rec) and rec.get("grade", {}).get("status") == "correct"


def model_result(rec: dict[str, Any] | None) -> str:
    """A run's model-level result (cpagent.model_check): `unsound` (its printed solution was right, its model
    admits one the reference rejects), `not checked`, `sound` (with `, over-constrained` where the model rules
    out the reference's solution), or `-` where no check ran (off, or the printed solution was already wrong)."""
    checks = [v["model_check"] for v in (rec or {}).get("grade", {}).get("instances", []) if v.get("model_check")]
    if not checks:
        return "-"
    if any(c.get("soundness") == "unsound" for c in checks):
        return "unsound"
    if any(c.get("soundness") != "sound" for c in checks):
        return "not checked"
    return "sound, over-constrained" if any(c.get("completeness") == "over-constrained" for c in checks) else "sound"


def summarize(runs: dict[str, Any], problem_ids: list[str], seeds: int) -> dict[str, Any]:
    per_problem = {}
    for pid in problem_ids:
        recs = [runs.get(f"{pid}#seed{s}") for s in range(seeds)]
        done = [r for r in recs if r]
        per_problem[pid] = {
            "pass_at_1": sum(_correct(r) for r in recs) / seeds,
            "pass_all": all(_correct(r) for r in recs),
            "runs": len(done),
            "grades": [r.get("grade", {}).get("status") if r else "missing" for r in recs],
            "model": [model_result(r) if r else "missing" for r in recs],
            "steps": sum(r.get("steps", 0) for r in done),
            "input_tokens": sum(r.get("input_tokens", 0) for r in done),
            "output_tokens": sum(r.get("output_tokens", 0) for r in done),
            "cost_usd": sum(r.get("cost_usd", 0.0) for r in done),
            "wall_s": sum(r.get("wall_s", 0.0) for r in done),
            "reasons": sorted({x for r in done if not _correct(r) for x in r.get("grade", {}).get("reasons", [])})[:5],
        }
    n = max(len(problem_ids), 1)
    grades = Counter(g for p in per_problem.values() for g in p["grades"])
    models = Counter(m for p in per_problem.values() for m in p["model"])
    return {
        "problems": len(problem_ids),
        "seeds": seeds,
        "pass_at_1": sum(p["pass_at_1"] for p in per_problem.values()) / n,
        f"pass^{seeds}": sum(p["pass_all"] for p in per_problem.values()) / n,
        "grades": dict(grades),
        "model_check": dict(models),
        # runs whose printed solution the reference accepts while their model admits one it rejects
        "printed_right_model_wrong": models.get("unsound", 0),
        "steps": sum(p["steps"] for p in per_problem.values()),
        "input_tokens": sum(p["input_tokens"] for p in per_problem.values()),
        "output_tokens": sum(p["output_tokens"] for p in per_problem.values()),
        "cost_usd": sum(p["cost_usd"] for p in per_problem.values()),
        "wall_s_total": sum(p["wall_s"] for p in per_problem.values()),
        "per_problem": per_problem,
    }


def _md(summary: dict[str, Any], model: str, out: Path | None = None) -> str:
    k = summary["seeds"]
    lines = [
        f"# cpagent benchmark: model `{model}`", "",
        f"{summary['problems']} problems x {k} seeds: pass@1 **{summary['pass_at_1']:.1%}**, "
        f"pass^{k} **{summary[f'pass^{k}']:.1%}**; grades {summary['grades']}; "
        f"{summary['input_tokens']} input / {summary['output_tokens']} output tokens, ${summary['cost_usd']:.4f}.",
        "", f"Model-level check: {summary.get('model_check', {})}; printed right but model wrong: "
        f"**{summary.get('printed_right_model_wrong', 0)}**.",
        "", "| problem | pass@1 | grades | model | steps | tokens in/out | wall s | why not |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for pid, p in summary["per_problem"].items():
        why = "; ".join(p["reasons"])[:160].replace("|", "/")
        link = trace_link(out, pid, 0) if out is not None else None
        name = f"[{pid}]({link})" if link else pid
        lines.append(f"| {name} | {p['pass_at_1']:.2f} | {' '.join(map(str, p['grades']))} | "
                     f"{' / '.join(p.get('model', []))} | {p['steps']} | "
                     f"{p['input_tokens']}/{p['output_tokens']} | {p['wall_s']:.1f} | {why} |")
    return "\n".join(lines) + "\n"


_COLORS = {"correct": "#3a9a5b", "incorrect": "#d0533f", "not_submitted": "#c9922e", "ungraded": "#888",
           "harness_error": "#6b3fa0", "missing": "#ccc"}


def _chart(summary: dict[str, Any]) -> str:
    grades = summary["grades"]
    total = max(sum(grades.values()), 1)
    x, bars, legend = 0.0, [], []
    for i, (g, n) in enumerate(sorted(grades.items())):
        w = 600 * n / total
        color = _COLORS.get(g, "#999")
        bars.append(f"<rect x='{x:.1f}' y='0' width='{w:.1f}' height='30' fill='{color}'/>")
        legend.append(f"<rect x='{i * 150}' y='40' width='12' height='12' fill='{color}'/>"
                      f"<text x='{i * 150 + 16}' y='51' font-size='12'>{html.escape(g)}: {n}</text>")
        x += w
    return f"<svg width='620' height='60' xmlns='http://www.w3.org/2000/svg'>{''.join(bars + legend)}</svg>"


def trace_link(out: Path, pid: str, seed: int) -> str | None:
    """The run's trace.html relative to the benchmark folder (where the report lives), when it exists."""
    rel = Path("problems") / pid / f"seed{seed}" / "trace.html"
    return rel.as_posix() if (out / rel).is_file() else None


def _grades_html(out: Path, pid: str, grades: list[Any]) -> str:
    cells = []
    for seed, g in enumerate(grades):
        color = _COLORS.get(str(g), "#999")
        text = f"<span style='color:{color}'>{html.escape(str(g))}</span>"
        link = trace_link(out, pid, seed)
        title = html.escape(f"trace of {pid} seed {seed}", quote=True)
        cells.append(f"<a href='{html.escape(link, quote=True)}' title='{title}'>{text}</a>" if link else text)
    return " ".join(cells)


def render_reports(out: Path, summary: dict[str, Any], runs: dict[str, Any], model: str) -> None:
    """report.md and report.html; in the HTML each problem and each of its grades links to the run's trace."""
    (out / "report.md").write_text(_md(summary, model, out), encoding="utf-8")
    k = summary["seeds"]
    rows = []
    for pid, p in summary["per_problem"].items():
        first = next((lk for s in range(k) if (lk := trace_link(out, pid, s))), None)
        name = (f"<a href='{html.escape(first, quote=True)}'>{html.escape(pid)}</a>" if first else html.escape(pid))
        rows.append(
            f"<tr><td>{name}</td><td>{p['pass_at_1']:.2f}</td><td>{_grades_html(out, pid, p['grades'])}"
            f"</td><td>{html.escape(' / '.join(p.get('model', [])))}</td><td>{p['steps']}</td><td>{p['input_tokens']}/{p['output_tokens']}</td><td>{p['wall_s']:.1f}</td>"
            f"<td>{html.escape('; '.join(p['reasons'])[:300])}</td></tr>")
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'><title>cpagent benchmark</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2em .5em}a{text-decoration:none}a:hover{text-decoration:underline}"
        "</style></head><body>"
        f"<h1>cpagent benchmark: {html.escape(model)}</h1>"
        f"<p>{summary['problems']} problems x {k} seeds: pass@1 <b>{summary['pass_at_1']:.1%}</b>, "
        f"pass^{k} <b>{summary[f'pass^{k}']:.1%}</b>. A problem's name and each grade link to the run's trace. "
        f"Model-level check: {html.escape(str(summary.get('model_check', {})))}; printed right but model wrong: "
        f"<b>{summary.get('printed_right_model_wrong', 0)}</b>.</p>"
        f"{_chart(summary)}"
        "<table><tr><th>problem</th><th>pass@1</th><th>grades</th><th>model</th><th>steps</th><th>tokens in/out</th>"
        f"<th>wall s</th><th>why not</th></tr>{''.join(rows)}</table></body></html>"
    )
    (out / "report.html").write_text(doc, encoding="utf-8")
