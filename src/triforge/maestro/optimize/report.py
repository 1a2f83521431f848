"""report.md and a self-contained report.html (score-vs-rollouts curve as inline SVG, final graph as Mermaid text)."""

from __future__ import annotations

import html
from typing import Any

from triforge.maestro.optimize.proposals import Proposal
from triforge.maestro.program import Program
from triforge.maestro.render import to_mermaid, to_text


def summary_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    sp = s["spent"]
    return [
        ("optimizer", s["optimizer_label"]),
        ("stop", s["stop_reason"]),
        ("validation score (best)", f"{s['best_val']:.3f}"),
        ("test score: seed -> best", f"{s['test_seed']:.3f} -> {s['test_best']:.3f} {_test_note(s)}"),
        ("rollouts: train / train+val (--max-rollouts)", f"{sp['rollouts']['train']} / {sp['search_rollouts']} "
                                                         f"({s['budget'] if s['budget'] is not None else 'none'})"),
        ("rollouts: final test (apart from --max-rollouts)", str(sp["rollouts"]["test"])),
        ("LLM calls: task / reflection (sent to an endpoint)", f"{sp['calls']['task']} / {sp['calls']['reflection']} "
                                                             f"({sp['sent']})"),
        ("LLM calls: search + final test (--max-calls)",
         f"{s.get('search_calls', '?')} + {s.get('test_calls', '?')} "
         f"({s['max_calls'] if s.get('max_calls') is not None else 'none'})"),
        ("tokens in / out", f"{sp['input_tokens']} / {sp['output_tokens']}"),
        ("USD", f"{sp['usd']:.4f}"),
        ("proposals (accepted)", f"{s['proposals']} ({s['accepted']})"),
        ("wall time", f"{s['wall_s']:.1f} s"),
    ]


def _test_note(s: dict[str, Any]) -> str:
    if not s.get("test_stop"):
        return f"({s['n_test']} examples)"
    return (f"(over {s.get('n_test_seed', 0)} / {s.get('n_test_best', 0)} of {s['n_test']} examples: the final test "
            f"evaluation was stopped by the call cap: {s['test_stop']})")


def report_md(s: dict[str, Any], proposals: list[Proposal], best: Program) -> str:
    lines = [f"# maestro optimize: {s['program']} on {s['bench']}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary_rows(s)]
    lines += ["", "## Proposals", "", "| # | step | move | module | parent | minibatch parent -> child | verdict | val |",
              "|---|---|---|---|---|---|---|---|"]
    for p in proposals:
        mb = f"{sum(p.parent_scores):g} -> {sum(p.child_scores):g}" if p.child_scores else ""
        verdict = p.verdict.replace("|", "\\|")[:120]
        val = f"{p.val_score:.3f}" if p.val_score is not None else ""
        lines.append(f"| {p.index} | {p.step} | {p.move} | {p.module or ''} | {p.parent_id} | {mb} | {verdict} | {val} |")
    lines += ["", "## Best program", "", "```", to_text(best).rstrip(), "```", "",
              "```mermaid", to_mermaid(best).rstrip(), "```", ""]
    return "\n".join(lines)


def curve_svg(curve: list[tuple[int, float]], width: int = 560, height: int = 240) -> str:
    pad = 36
    xmax = max([x for x, _ in curve] + [1])
    ys = [y for _, y in curve] or [0.0]
    ymin, ymax = min(0.0, *ys), max(1.0, *ys)

    def sx(x: float) -> float:
        return pad + (width - 2 * pad) * x / xmax

    def sy(y: float) -> float:
        return height - pad - (height - 2 * pad) * (y - ymin) / ((ymax - ymin) or 1)

    pts: list[str] = []
    last = None
    for x, y in curve:  # a step curve: the best score holds until the next improvement
        if last is not None:
            pts.append(f"{sx(x):.1f},{sy(last):.1f}")
        pts.append(f"{sx(x):.1f},{sy(y):.1f}")
        last = y
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="best validation score against rollouts">'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#555"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#555"/>'
            f'<text x="{width / 2}" y="{height - 6}" text-anchor="middle" font-size="12">rollouts (train + val)'
            f' 0..{xmax}</text>'
            f'<text x="4" y="{pad - 8}" font-size="12">val score {ymin:g}..{ymax:g}</text>'
            f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{" ".join(pts)}"/></svg>')


def report_html(s: dict[str, Any], proposals: list[Proposal], best: Program, curve: list[tuple[int, float]]) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary_rows(s))
    props = "".join(
        f"<tr><td>{p.index}</td><td>{p.step}</td><td>{p.move}</td><td>{html.escape(p.module or '')}</td>"
        f"<td>{html.escape(p.verdict)}</td><td>{'' if p.val_score is None else f'{p.val_score:.3f}'}</td>"
        f"<td><details><summary>diff</summary><pre>{html.escape(p.diff)}</pre>"
        f"<p>{html.escape(p.rationale)}</p></details></td></tr>" for p in proposals)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>maestro optimize {html.escape(s['program'])}"
            "</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto}td,th{border:1px solid #ccc;"
            "padding:3px;text-align:left;vertical-align:top}table{border-collapse:collapse}pre{white-space:pre-wrap}"
            f"</style></head><body><h1>maestro optimize: {html.escape(s['program'])} on {html.escape(s['bench'])}</h1>"
            f"<table>{rows}</table><h2>Best validation score against rollouts</h2>{curve_svg(curve)}"
            f"<h2>Final graph (Mermaid)</h2><pre class='mermaid'>{html.escape(to_mermaid(best))}</pre>"
            f"<h2>Proposals</h2><table><tr><th>#</th><th>step</th><th>move</th><th>module</th><th>verdict</th>"
            f"<th>val</th><th>diff</th></tr>{props}</table></body></html>\n")
