"""Readers of a run's trace: a per-agent/per-model summary and a self-contained HTML view."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triforge.confine.record import EVENT, NOT_ISOLATED, held_in
from triforge.core.errors import UserError
from triforge.core.trace import CorruptTrace, read_spans, trace_path


@dataclass
class Row:
    calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0  # reasoning tokens included
    cost_usd: float = 0.0
    seconds: float = 0.0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0  # part of input_tokens


def run_dir_of(run: str | Path) -> Path:
    """The run directory of `run`, which names either the directory or its trace file."""
    p = Path(run)
    return p.parent if p.is_file() else p


def _spans_or_fail(run: str | Path, dropped: list[int] | None = None) -> list[dict[str, Any]]:
    path = trace_path(run)
    if not path.is_file():
        missing = "" if Path(run).exists() else " (no such file or directory)"
        inner = sorted(Path(run).glob("**/trace.jsonl")) if Path(run).is_dir() else []
        if inner:  # a bench's folder: each problem's run has its own trace
            more = f" and {len(inner) - 1} more" if len(inner) > 1 else ""
            raise UserError(f"{run} has no trace.jsonl of its own; the runs inside it have theirs: pass one of "
                            f"them, e.g. {inner[0].parent}{more}")
        raise UserError(f"{run} has no trace.jsonl{missing}; pass a run directory written by triforge "
                        f"(or its trace.jsonl)")
    not_a_trace = UserError(f"{run} is not a trace: pass a run directory or its trace.jsonl "
                            f"(the one in {run_dir_of(run)} is {run_dir_of(run) / 'trace.jsonl'})")
    if path.suffix != ".jsonl":  # report.md, results.json, ...: the wrong file, not a corrupt trace
        raise not_a_trace
    ours = path.name == "trace.jsonl"
    try:
        spans = read_spans(path, strict=True, dropped=dropped)
    except CorruptTrace as e:
        if not ours and not read_spans(path):  # not one span in it: another JSON-lines file (results.jsonl)
            raise not_a_trace from None
        raise UserError(f"{e}: the trace is corrupt; re-run to write a new one") from None
    if not spans and not ours and path.stat().st_size:
        raise not_a_trace
    return spans


def dropped_lines(run: str | Path) -> list[int]:
    """Numbers of the trace's lines that could not be read: a last line cut mid-write by a crash."""
    dropped: list[int] = []
    _spans_or_fail(run, dropped)
    return dropped


def _by_start(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(spans, key=lambda s: (s.get("start") or 0, s.get("end") or 0))


def runs_in(run: str | Path) -> list[tuple[str, float]]:
    """The runs appended to one trace file (trace id, first start), oldest first: a resumed run adds one."""
    first: dict[str, float] = {}
    for s in _spans_or_fail(run):
        tid, start = str(s.get("trace_id") or "-"), float(s.get("start") or 0)
        first[tid] = min(first.get(tid, start), start)
    return sorted(first.items(), key=lambda kv: kv[1])


def runs_note(run: str | Path) -> str | None:
    """One line when the trace holds several runs (the totals cover all of them), else None."""
    import time

    runs = runs_in(run)
    if len(runs) < 2:
        return None
    when = ", ".join(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) for _, t in runs)
    return f"this trace holds {len(runs)} runs appended one after another (started {when} UTC); totals cover all"


def isolation_held(run: str | Path) -> list[str]:
    """What isolation held for the run's untrusted code, from its `isolation` events (empty: none recorded)."""
    return held_in(_by_start(_spans_or_fail(run)))


def summarize(run: str | Path) -> dict[str, dict[str, Row]]:
    """Totals per agent and per model alias; a tool call counts for the model whose reply asked for it
    (the agent's latest LLM call before it)."""
    spans = _by_start(_spans_or_fail(run))
    by: dict[str, dict[str, Row]] = {"agent": defaultdict(Row), "model": defaultdict(Row)}
    last_model: dict[str, str] = {}
    for s in spans:
        if s.get("kind") in ("event", EVENT):  # a point in the run (Tracer.event): nothing to count
            continue
        a = s.get("attributes", {})
        agent = s.get("agent") or "-"
        keys = {"agent": agent}
        if s.get("kind") == "llm":
            keys["model"] = last_model[agent] = a.get("triforge.model_alias") or a.get("gen_ai.request.model") or "-"
        elif s.get("kind") == "tool" and agent in last_model:
            keys["model"] = last_model[agent]
        for dim, key in keys.items():
            row = by[dim][key]
            if s.get("kind") == "llm":
                row.calls += 1
                row.input_tokens += int(a.get("gen_ai.usage.input_tokens") or 0)
                row.output_tokens += int(a.get("gen_ai.usage.output_tokens") or 0)
                row.reasoning_tokens += int(a.get("gen_ai.usage.reasoning.output_tokens") or 0)
                row.cached_input_tokens += int(a.get("gen_ai.usage.cache_read.input_tokens") or 0)
                row.cost_usd += float(a.get("triforge.cost_usd") or 0.0)
                row.seconds += float(s.get("duration_s") or 0.0)
            elif s.get("kind") == "tool":
                row.tool_calls += 1
                row.seconds += float(s.get("duration_s") or 0.0)
    return {k: dict(v) for k, v in by.items()}


def token_details_shown(summary: dict[str, dict[str, Row]]) -> bool:
    """Whether any call reported reasoning or cached input tokens (their columns are shown only then)."""
    return any(r.reasoning_tokens or r.cached_input_tokens for rows in summary.values() for r in rows.values())


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:70em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}
details{border-left:4px solid #bbb;margin:.3em 0;padding:.2em .6em;background:#fafafa}
details.llm{border-color:#4a7bd0}details.tool{border-color:#3a9a5b}details.step{border-color:#c9922e}
details.err{background:#fff0f0;border-color:#d0533f}details.thinking{border-color:#9a7fc9;background:#f7f4fc}details.done{background:#f0fff3}summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #eee;padding:.4em;max-height:30em;
overflow:auto}pre.code{background:#f6f8fa;font-family:ui-monospace,monospace}.meta{color:#666;font-size:90%}
.badge{display:inline-block;padding:.1em .6em;border-radius:.8em;color:#fff;font-weight:bold}
.ok{background:#3a9a5b}.bad{background:#d0533f}.other{background:#888}header p{margin:.2em 0}
button{margin:.2em .4em .6em 0}
"""
_CODE_KEYS = {"code", "program", "source", "script", "cell"}
# Expand-all / collapse-all buttons (and `trace.html#expand-all` opens everything); the page's CSP allows
# this one script by its hash, so no other script can run.
_SCRIPT = ("const all=o=>document.querySelectorAll('details').forEach(d=>{d.open=o});"
           "document.getElementById('open-all').addEventListener('click',()=>all(true));"
           "document.getElementById('close-all').addEventListener('click',()=>all(false));"
           "if(location.hash==='#expand-all')all(true);")


def _esc(x: Any) -> str:
    if not isinstance(x, str):
        x = json.dumps(x, indent=1, ensure_ascii=False, default=str)
    return html.escape(x, quote=True)


def _arguments_html(args: Any) -> str:
    """Tool arguments: code-like strings (multi-line, or under a code key) as code, the rest as JSON."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return f"<pre class=code>{_esc(args)}</pre>"
    if not isinstance(args, dict):
        return f"<pre>{_esc(args)}</pre>"
    code = {k: v for k, v in args.items() if isinstance(v, str) and (k in _CODE_KEYS or "\n" in v)}
    rest = {k: v for k, v in args.items() if k not in code}
    parts = [f"<div class=meta>{_esc(k)}</div><pre class=code>{_esc(v)}</pre>" for k, v in code.items()]
    if rest:
        parts.append(f"<pre>{_esc(rest)}</pre>")
    return "".join(parts) or "<pre>{}</pre>"


def _message_html(m: Any) -> str:
    if not isinstance(m, dict):
        return f"<pre>{_esc(m)}</pre>"
    parts = [f"<div class=meta>{_esc(str(m.get('role')))}</div>"]
    thought = m.get("reasoning_content") or m.get("reasoning")
    if thought:  # folded: the model's thinking, kept but never run
        parts.append(f"<details class=thinking><summary>thinking ({len(str(thought)):,} characters)</summary>"
                     f"<pre>{_esc(thought)}</pre></details>")
    if m.get("content"):
        parts.append(f"<pre>{_esc(m.get('content'))}</pre>")
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function", tc) if isinstance(tc, dict) else {}
        parts.append(f"<div class=meta>calls <b>{_esc(str(fn.get('name')))}</b></div>"
                     + _arguments_html(fn.get("arguments")))
    return "".join(parts)


def _key(m: Any) -> str:
    """A message as the conversation knows it; thinking is left out (the client may not send it back)."""
    if isinstance(m, dict):
        m = {k: v for k, v in m.items() if k not in ("reasoning_content", "reasoning")}
    return json.dumps(m, sort_keys=True, default=str)


def _new_messages(msgs: list[Any], before: list[Any]) -> tuple[int, list[Any]]:
    """How many leading messages equal the conversation so far, and the messages after them."""
    k = 0
    while k < min(len(msgs), len(before)) and _key(msgs[k]) == _key(before[k]):
        k += 1
    return k, msgs[k:]


def _status(s: dict[str, Any]) -> tuple[str, str]:
    """(css class, label) of a span's ending; handing in the answer is a success, not an error."""
    st = str(s.get("status", "ok"))
    if st == "submitted" or st.startswith("error: Submitted"):
        return "done", "submitted"
    return ("", st) if st == "ok" else ("err", st)


class _Conversations:
    """The conversation so far of each agent run, to show an LLM call's input as what is new in it.

    A conversation is one agent in one run (trace id) under its nearest enclosing span that is not a step
    (e.g. one example of a benchmark), so parallel runs of one agent are not mixed.
    """

    def __init__(self, spans: list[dict[str, Any]]) -> None:
        self.by_id = {s.get("span_id"): s for s in spans}
        self.seen: dict[tuple[str, str, str], list[Any]] = {}

    def key(self, s: dict[str, Any]) -> tuple[str, str, str]:
        parent = self.by_id.get(s.get("parent_id"))
        while parent is not None and parent.get("kind") == "step":
            parent = self.by_id.get(parent.get("parent_id"))
        scope = str(parent.get("span_id")) if parent is not None else "-"
        return str(s.get("agent") or "-"), str(s.get("trace_id") or "-"), scope


def _span_html(s: dict[str, Any], children: dict[str | None, list[dict[str, Any]]], convs: _Conversations) -> str:
    a = s.get("attributes", {})
    kind = s.get("kind", "internal")
    cls, label = _status(s)
    name = f"step {a['triforge.step']}" if kind == "step" and "triforge.step" in a else str(s.get("name", ""))
    head = f"{_esc(name)} <span class=meta>{float(s.get('duration_s') or 0):.2f}s {_esc(label)}"
    if kind == "llm":
        head += f" · in {a.get('gen_ai.usage.input_tokens')} out {a.get('gen_ai.usage.output_tokens')} tok"
        if a.get("gen_ai.usage.reasoning.output_tokens"):
            head += f" ({a['gen_ai.usage.reasoning.output_tokens']} reasoning)"
        if a.get("gen_ai.usage.cache_read.input_tokens"):
            head += f" · {a['gen_ai.usage.cache_read.input_tokens']} cached in"
        conv = convs.key(s)
        msgs = a.get("gen_ai.input.messages") if isinstance(a.get("gen_ai.input.messages"), list) else []
        out = a.get("gen_ai.output.messages") if isinstance(a.get("gen_ai.output.messages"), list) else []
        same, new = _new_messages(msgs, convs.seen.get(conv, []))
        convs.seen[conv] = msgs + out
        note = (f"<div class=meta>{same} earlier message{'s' * (same != 1)} as in the previous call, not repeated"
                "</div>") if same else ""
        body = (f"<b>new input</b>{note}" + "".join(_message_html(m) for m in new)
                + "<b>output</b>" + "".join(_message_html(m) for m in out))
    elif kind == "tool":
        head += f" · {_esc(_short(a.get('gen_ai.tool.call.result')))}"
        body = (f"<b>arguments</b>{_arguments_html(a.get('gen_ai.tool.call.arguments'))}"
                f"<b>result</b><pre>{_esc(a.get('gen_ai.tool.call.result'))}</pre>")
    else:
        shown = {k: v for k, v in a.items() if k != "triforge.step"}
        body = f"<pre>{_esc(shown)}</pre>" if shown else ""
    body += "".join(_span_html(c, children, convs) for c in children.get(s.get("span_id"), []))
    return f"<details class='{_esc(kind)} {cls}'><summary>{head}</span></summary>{body}</details>"


def _short(x: Any, width: int = 60) -> str:
    one = " ".join(str(x if x is not None else "").split())
    return one if len(one) <= width else one[: width - 1] + "…"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _header_html(run_dir: Path, spans: list[dict[str, Any]]) -> str:
    """What ran (task or problem, model) and how it ended (grade or status), from the run's own files."""
    cfg, res = _read_json(run_dir / "config.json"), _read_json(run_dir / "results.json")
    raw = cfg.get("model")
    model = raw if isinstance(raw, dict) else {"alias": raw} if isinstance(raw, str) else {}
    if not model:
        llm = next((s.get("attributes", {}) for s in spans if s.get("kind") == "llm"), {})
        model = {"alias": llm.get("triforge.model_alias"), "model": llm.get("gen_ai.request.model")}
    task = res.get("problem") or cfg.get("task") or run_dir.name
    lines = [f"<h1>{_esc(str(task))}</h1>"]
    alias, served = model.get("alias") or model.get("model"), model.get("model")
    if alias:
        extra = f" <span class=meta>{_esc(str(served))}</span>" if served and served != alias else ""
        lines.append(f"<p>model <b>{_esc(str(alias))}</b>{extra}</p>")
    grade = res.get("grade") if isinstance(res.get("grade"), dict) else {}
    outcome = grade.get("status") or ({True: "correct", False: "incorrect"}.get(res["correct"])
                                      if isinstance(res.get("correct"), bool) else None) or res.get("status")
    if outcome:
        tone = "ok" if outcome in ("correct", "submitted") else "bad" if outcome in ("incorrect", "not_submitted",
                                                                                   "harness_error") else "other"
        bits = [f"agent {res['status']}"] if res.get("status") and res.get("status") != outcome else []
        if res.get("steps") is not None:
            bits.append(f"{res['steps']} steps")
        if res.get("answer") is not None:
            bits.append(f"answer {res['answer']}")
        lines.append(f"<p>ended: <span class='badge {tone}'>{_esc(str(outcome))}</span> "
                     f"<span class=meta>{_esc(', '.join(bits))}</span></p>")
        for r in (grade.get("reasons") or [])[:3]:
            lines.append(f"<p class=meta>{_esc(_short(r, 200))}</p>")
    else:
        lines.append("<p>ended: <span class='badge other'>no result recorded</span></p>")
    for held in held_in(spans):
        tone = "bad" if held == NOT_ISOLATED else "ok"
        lines.append(f"<p>isolation: <span class='badge {tone}'>{'NOT isolated' if tone == 'bad' else 'held'}"
                     f"</span> <span class=meta>{_esc(held)}</span></p>")
    lines.append(f"<p class=meta>run directory {_esc(str(run_dir))} · {len(spans)} spans</p>")
    note = runs_note(run_dir)
    if note:
        lines.append(f"<p class=meta>{_esc(note)}</p>")
    return "<header>" + "".join(lines) + "</header>"


def render_html(run: str | Path, out: str | Path | None = None) -> Path:
    """Write one self-contained `trace.html`: no fetches, all text escaped, one hashed script (expand all)."""
    run_dir = run_dir_of(run)
    spans = _by_start(_spans_or_fail(run))
    summary = summarize(run)
    rows = []
    extra = token_details_shown(summary)
    for dim, table in summary.items():
        rows.append(f"<h3>per {dim}</h3><table><tr><th>{dim}</th><th>LLM calls</th><th>tool calls</th>"
                    "<th>input tok</th><th>output tok</th>"
                    + ("<th>of which reasoning</th><th>input cached</th>" if extra else "")
                    + "<th>USD</th><th>seconds</th></tr>")
        for key, r in sorted(table.items()):
            details = f"<td>{r.reasoning_tokens}</td><td>{r.cached_input_tokens}</td>" if extra else ""
            rows.append(f"<tr><td>{_esc(key)}</td><td>{r.calls}</td><td>{r.tool_calls}</td><td>{r.input_tokens}</td>"
                        f"<td>{r.output_tokens}</td>{details}<td>{r.cost_usd:.4f}</td><td>{r.seconds:.2f}</td></tr>")
        rows.append("</table>")
    ids = {s.get("span_id") for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for s in spans:
        children[s.get("parent_id") if s.get("parent_id") in ids else None].append(s)
    convs = _Conversations(spans)
    body = "".join(_span_html(s, children, convs) for s in children.get(None, []))
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'\"><title>triforge trace {_esc(run_dir.name)}</title><style>{_CSS}</style>"
        "</head><body>" + _header_html(run_dir, spans) + "".join(rows)
        + "<h2>spans</h2><button id=open-all>expand all</button><button id=close-all>collapse all</button>"
        + body + f"<script>{_SCRIPT}</script></body></html>"
    )
    target = Path(out) if out else run_dir / "trace.html"
    target.write_text(doc, encoding="utf-8")
    return target
