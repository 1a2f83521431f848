"""Readers of a run's trace: a per-agent/per-model summary and a self-contained HTML view."""

from __future__ import annotations

import html
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.core.trace import read_spans


@dataclass
class Row:
    calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


def _spans_or_fail(run_dir: Path) -> list[dict[str, Any]]:
    if not (run_dir / "trace.jsonl").is_file():
        raise UserError(f"{run_dir} has no trace.jsonl; pass a run directory written by triforge")
    return read_spans(run_dir)


def summarize(run_dir: str | Path) -> dict[str, dict[str, Row]]:
    """Totals per agent and per model alias."""
    spans = _spans_or_fail(Path(run_dir))
    by: dict[str, dict[str, Row]] = {"agent": defaultdict(Row), "model": defaultdict(Row)}
    for s in spans:
        a = s.get("attributes", {})
        keys = {"agent": s.get("agent") or "-"}
        if s.get("kind") == "llm":
            keys["model"] = a.get("triforge.model_alias") or a.get("gen_ai.request.model") or "-"
        for dim, key in keys.items():
            row = by[dim][key]
            if s.get("kind") == "llm":
                row.calls += 1
                row.input_tokens += int(a.get("gen_ai.usage.input_tokens") or 0)
                row.output_tokens += int(a.get("gen_ai.usage.output_tokens") or 0)
                row.cost_usd += float(a.get("triforge.cost_usd") or 0.0)
                row.seconds += float(s.get("duration_s") or 0.0)
            elif s.get("kind") == "tool":
                row.tool_calls += 1
                row.seconds += float(s.get("duration_s") or 0.0)
    return {k: dict(v) for k, v in by.items()}


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}
details{border-left:4px solid #bbb;margin:.3em 0;padding:.2em .6em;background:#fafafa}
details.llm{border-color:#4a7bd0}details.tool{border-color:#3a9a5b}details.step{border-color:#c9922e}
details.err{background:#fff0f0}summary{cursor:pointer}pre{white-space:pre-wrap;word-break:break-word;
background:#fff;border:1px solid #eee;padding:.4em;max-height:30em;overflow:auto}.meta{color:#666;font-size:90%}
"""


def _esc(x: Any) -> str:
    if not isinstance(x, str):
        x = json.dumps(x, indent=1, ensure_ascii=False, default=str)
    return html.escape(x, quote=True)


def _messages_html(msgs: Any) -> str:
    if not isinstance(msgs, list):
        return f"<pre>{_esc(msgs)}</pre>"
    parts = []
    for m in msgs:
        if not isinstance(m, dict):
            parts.append(f"<pre>{_esc(m)}</pre>")
            continue
        body = m.get("content") or ""
        if m.get("tool_calls"):
            body += "\n" + json.dumps(m["tool_calls"], indent=1, ensure_ascii=False)
        parts.append(f"<div class=meta>{_esc(str(m.get('role')))}</div><pre>{_esc(body)}</pre>")
    return "".join(parts)


def _span_html(s: dict[str, Any]) -> str:
    a = s.get("attributes", {})
    kind = s.get("kind", "internal")
    err = not str(s.get("status", "ok")).startswith("ok")
    head = f"{_esc(s.get('name', ''))} <span class=meta>agent={_esc(str(s.get('agent') or '-'))} " \
           f"{float(s.get('duration_s') or 0):.3f}s {_esc(str(s.get('status')))}</span>"
    if kind == "llm":
        head += f" <span class=meta>in={a.get('gen_ai.usage.input_tokens')} out={a.get('gen_ai.usage.output_tokens')}</span>"
        body = "<b>input</b>" + _messages_html(a.get("gen_ai.input.messages")) + \
               "<b>output</b>" + _messages_html(a.get("gen_ai.output.messages"))
    elif kind == "tool":
        body = f"<b>arguments</b><pre>{_esc(a.get('gen_ai.tool.call.arguments'))}</pre>" \
               f"<b>result</b><pre>{_esc(a.get('gen_ai.tool.call.result'))}</pre>"
    else:
        body = f"<pre>{_esc(a)}</pre>"
    cls = f"{_esc(kind)}{' err' if err else ''}"
    return f"<details class='{cls}'><summary>{head}</summary>{body}</details>"


def render_html(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write one self-contained `trace.html` (no scripts, no network fetches; all text escaped)."""
    run_dir = Path(run_dir)
    spans = _spans_or_fail(run_dir)
    spans.sort(key=lambda s: (s.get("end") or 0))
    summary = summarize(run_dir)
    rows = []
    for dim, table in summary.items():
        rows.append(f"<h3>per {dim}</h3><table><tr><th>{dim}</th><th>LLM calls</th><th>tool calls</th>"
                    "<th>input tok</th><th>output tok</th><th>USD</th><th>seconds</th></tr>")
        for key, r in sorted(table.items()):
            rows.append(f"<tr><td>{_esc(key)}</td><td>{r.calls}</td><td>{r.tool_calls}</td><td>{r.input_tokens}</td>"
                        f"<td>{r.output_tokens}</td><td>{r.cost_usd:.4f}</td><td>{r.seconds:.2f}</td></tr>")
        rows.append("</table>")
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>triforge trace {_esc(run_dir.name)}</title><style>{_CSS}</style></head><body>"
        f"<h1>triforge trace: {_esc(str(run_dir))}</h1><p class=meta>{len(spans)} spans</p>"
        + "".join(rows) + "<h2>spans</h2>" + "".join(_span_html(s) for s in spans) + "</body></html>"
    )
    target = Path(out) if out else run_dir / "trace.html"
    target.write_text(doc, encoding="utf-8")
    return target
