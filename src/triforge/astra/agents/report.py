"""report.md and report.html of an optimize run, from results.json alone (self-contained HTML, inline SVG)."""

from __future__ import annotations

import difflib
import html
from pathlib import Path
from typing import Any


def _cell(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None:
        return "-"
    return fmt.format(v) if isinstance(v, int | float) else str(v)


def _speedups(res: dict[str, Any] | None) -> str:
    if not res or not res.get("timings"):
        return "-"
    return " / ".join(f"x{t['speedup']:.2f}" for t in res["timings"])


def _roofline(res: dict[str, Any] | None) -> str:
    """The first timing shape's time at copy bandwidth over its measured time."""
    if not res or not res.get("timings") or not res.get("copy_gbs"):
        return "-"
    t = res["timings"][0]
    return f"{t['min_bytes'] / (res['copy_gbs'] * 1e9) / (t['candidate_us'] * 1e-6):.0%}"


def placement(results: dict[str, Any]) -> dict[str, str]:
    """The GPU that evaluated each candidate (as CUDA_VISIBLE_DEVICES names it; host/GPU when several
    hosts took part); "-" where the result names none (not evaluated, or by an older triforge)."""
    res = {cid: c.get("result") or {} for cid, c in results["candidates"].items()}
    hosts = {r["host"] for r in res.values() if r.get("host")}
    return {cid: "-" if r.get("gpu") is None else f"{r['host']}/{r['gpu']}" if len(hosts) > 1 and r.get("host")
            else str(r["gpu"]) for cid, r in res.items()}


def round_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    gpus = placement(results)
    for cid, c in sorted(results["candidates"].items(), key=lambda kv: (str(kv[1].get("round")), kv[0])):
        if str(cid).startswith("final-"):
            continue
        res = c.get("result") or {}
        d = c.get("decision") or {}
        verdict = res.get("verdict") or c.get("status", "")
        why = d.get("reason") or "; ".join(res.get("reasons", [])[:1]) or c.get("note", "")
        timed = res if verdict == "correct" else None  # a hack's or a wrong kernel's times mean nothing
        rows.append([str(c.get("round")), cid, gpus[cid], c.get("plan", {}).get("title", ""), verdict, _speedups(timed), _roofline(timed),
                     "accepted" if d.get("accepted") else ("start" if cid == "r0-start" else "rejected"), why[:200]])
    return rows


def chart_svg(results: dict[str, Any], width: int = 480, height: int = 200) -> str:
    """Best speedup over the start kernel by round (geometric mean over the timing shapes)."""
    pts = [(0, 1.0)] + [(r["round"], r["best_gain"]) for r in results.get("rounds", [])]
    top = max(p[1] for p in pts) * 1.1
    n = max(1, len(pts) - 1)
    pad = 40

    def xy(r: float, g: float) -> tuple[float, float]:
        return pad + r * (width - 2 * pad) / n, height - pad - g * (height - 2 * pad) / top

    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(r, g) for r, g in pts))
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3"/><text x="{x:.1f}" y="{y - 8:.1f}" font-size="10" '
                   f'text-anchor="middle">x{g:.2f}</text>' for (r, g), (x, y) in zip(pts, (xy(r, g) for r, g in pts), strict=True))
    labels = "".join(f'<text x="{xy(r, 0)[0]:.1f}" y="{height - pad + 14}" font-size="10" text-anchor="middle">{r}</text>'
                     for r, _ in pts)
    y1 = xy(0, 1.0)[1]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">'
            f'<title>best speedup over the start kernel by round</title>'
            f'<line x1="{pad}" y1="{y1:.1f}" x2="{width - pad}" y2="{y1:.1f}" stroke="#bbb" stroke-dasharray="4"/>'
            f'<polyline fill="none" stroke="#2a6" stroke-width="2" points="{line}"/>{dots}{labels}'
            f'<text x="{width / 2}" y="{height - 6}" font-size="11" text-anchor="middle">round</text></svg>')


def _kernel(run_dir: Path, cid: str | None) -> str:
    p = run_dir / "candidates" / str(cid) / "kernel.cu"
    return p.read_text(encoding="utf-8") if cid and p.is_file() else ""


def _diff(run_dir: Path, best: str | None) -> str:
    a, b = _kernel(run_dir, "r0-start"), _kernel(run_dir, best)
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), "start.cu", f"{best}.cu")) or "(no change)"


def _comparator_rows(final: dict[str, Any]) -> list[list[str]]:
    return [[r["shape"], "winner" if r["comparator"] == "candidate" else r["comparator"], _cell(r["median_us"]),
             _cell(r.get("copy_fraction"), "{:.0%}"), _cell(r.get("speedup_vs_baseline"), "x{:.2f}"), str(r.get("verified"))]
            for r in final.get("comparators", [])]


def _heldout_rows(final: dict[str, Any]) -> list[list[str]]:
    return [[r["shape"], _cell(r["baseline_us"]), _cell(r["start_us"]), _cell(r["winner_us"]),
             _cell(r["winner_vs_start"], "x{:.3f}"), _cell(r.get("winner_roofline"), "{:.0%}")]
            for r in final.get("heldout", [])]


ROUND_HEAD = ["round", "candidate", "GPU", "plan", "verdict", "speedup vs task baseline per timing shape",
              "of copy roofline (first timing shape)", "decision", "why"]
COMP_HEAD = ["shape", "comparator", "median us", "of copy roofline", "vs task baseline", "verified"]
HELD_HEAD = ["held-out shape", "task baseline us", "start us", "winner us", "winner vs start", "winner of roofline"]


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|").replace("\n", " ") for c in r] for r in rows]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in esc])


def _summary(results: dict[str, Any]) -> list[str]:
    final = results.get("final") or {}
    best = results.get("best")
    gain = next((r["best_gain"] for r in reversed(results.get("rounds", []))), 1.0)
    lines = [f"task `{results['task']}`, start: {results['start']}; best `{best}` (lineage "
             f"{' -> '.join(results.get('lineage', []))}), x{gain:.3f} over the start on the timing shapes",
             f"spend: {results['spend']}; limits: { {k: v for k, v in results['limits'].items() if v is not None} }"]
    if results.get("stopped"):
        lines.append(f"stopped early: {results['stopped']}")
    if final.get("verdict"):
        gpus = placement(results)
        on = ", ".join(f"{cid} on GPU {g}" for cid, g in sorted(gpus.items()) if cid.startswith("final-") and g != "-")
        lines.append(f"final check on held-out shapes: {final['verdict']}" + (f" ({on})" if on else ""))
    lines += [f"note: {n}" for n in final.get("notes", [])]
    return lines


def write_reports(run_dir: Path, results: dict[str, Any], title_note: str = "") -> None:
    final = results.get("final") or {}
    md = [f"# astra optimize: {results['task']}", ""] + ([title_note, ""] if title_note else [])
    md += [f"- {s}" for s in _summary(results)]
    md += ["", "## Candidates", "", _md_table(ROUND_HEAD, round_rows(results))]
    if final.get("heldout"):
        md += ["", "## Final check (held-out shapes)", "", _md_table(HELD_HEAD, _heldout_rows(final))]
    if final.get("comparators"):
        md += ["", f"## Comparators (copy bandwidth {_cell(final.get('copy_gbs'), '{:.0f}')} GB/s, {final.get('device', '')})",
               "", _md_table(COMP_HEAD, _comparator_rows(final))]
    md += ["", "## Final kernel: diff against the start", "", "```diff", _diff(run_dir, results.get("best")), "```", ""]
    (run_dir / "report.md").write_text("\n".join(md), encoding="utf-8")

    def table(head: list[str], rows: list[list[str]]) -> str:
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{th}</tr>{trs}</table>"

    parts = [f"<h1>astra optimize: {html.escape(results['task'])}</h1>"]
    if title_note:
        parts.append(f"<p><b>{html.escape(title_note)}</b></p>")
    parts.append("<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in _summary(results)) + "</ul>")
    parts += ["<h2>Best speedup by round</h2>", chart_svg(results), "<h2>Candidates</h2>", table(ROUND_HEAD, round_rows(results))]
    if final.get("heldout"):
        parts += ["<h2>Final check (held-out shapes)</h2>", table(HELD_HEAD, _heldout_rows(final))]
    if final.get("comparators"):
        parts += ["<h2>Comparators</h2>", table(COMP_HEAD, _comparator_rows(final))]
    parts += ["<h2>Final kernel</h2>", f"<pre>{html.escape(_kernel(run_dir, results.get('best')))}</pre>",
              "<h2>Diff against the start</h2>", f"<pre>{html.escape(_diff(run_dir, results.get('best')))}</pre>"]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;font-size:13px}"
             "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}pre{background:#f6f6f6;padding:8px;overflow:auto}")
    (run_dir / "report.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>astra optimize</title>"
                                         f"<style>{style}</style></head><body>{''.join(parts)}</body></html>", encoding="utf-8")
