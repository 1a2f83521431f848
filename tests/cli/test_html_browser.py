"""trace.html and a bench's report.html, opened in a real headless browser (Chromium from the distribution).

Skipped, with the reason, where no chromium binary is installed (scripts/test.sh installs it as root).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from html_pages import browser, chromium, screenshot, scripted_bench

pytestmark = pytest.mark.skipif(chromium() is None, reason="no chromium binary (apt-get install chromium)")


def dom(page: Path, fragment: str = "") -> tuple[str, str]:
    """The page's DOM after its script ran, and the browser's console log."""
    r = browser("--dump-dom", page.resolve().as_uri() + fragment)
    assert r.returncode == 0 and "<html" in r.stdout, r.stderr[-2000:]
    return r.stdout, r.stderr


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "bench"
    r = scripted_bench(out)
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: one seed handed in a wrong program, as scripted
    return out


def test_trace_page_says_what_ran_and_expands_all_under_its_csp(bench):
    page = bench / "problems" / "two_numbers" / "seed0" / "trace.html"
    closed, _ = dom(page)
    opened, log = dom(page, "#expand-all")
    header = re.search(r"<header>(.*?)</header>", opened, re.S).group(1)
    assert "two_numbers" in header and "scripted" in header and ">correct<" in header
    n = opened.count("<details")
    assert n >= 6 and opened.count('open=""') == n and 'open=""' not in closed  # the hashed script ran
    assert "Refused to" not in log and "Content Security Policy" not in log
    assert re.search(r'<details class="step done"', opened)  # the submitting step is not an error
    assert '<pre class="code">print(12 + 2, 12 - 2)</pre>' in opened


def test_trace_page_runs_no_other_script(tmp_path):
    """Text from a model that looks like a script stays text; an inline script added to the page is blocked."""
    from triforge.core.trace import Tracer
    from triforge.ui.trace_view import render_html

    Tracer(tmp_path).tool_span("echo", {"text": "<script>document.title='pwned'</script>"},
                               "<img src=x onerror=\"document.title='pwned'\">", 0.01)
    page = render_html(tmp_path)
    page.write_text(page.read_text().replace("</body>", "<script>document.title='pwned'</script></body>"))
    text, log = dom(page)
    assert "<title>pwned</title>" not in text and "pwned</title>" not in text
    assert "violates the following Content Security Policy" in log  # the CSP, not the escaping, stopped the added one


def test_bench_report_links_each_problem_and_grade_to_its_trace(bench):
    text, _ = dom(bench / "report.html")
    links = re.findall(r'href="([^"]+)"', text)
    assert sorted(set(links)) == ["problems/two_numbers/seed0/trace.html", "problems/two_numbers/seed1/trace.html"]
    for link in set(links):
        target, _ = dom(bench / link)
        assert "two_numbers" in re.search(r"<header>(.*?)</header>", target, re.S).group(1)
    seed1, _ = dom(bench / "problems/two_numbers/seed1/trace.html")
    assert ">incorrect<" in seed1 and "violate" in seed1  # the grade and why, at the top of the wrong run


def test_pages_render_to_screenshots(bench, tmp_path):
    for page in (bench / "report.html", bench / "problems" / "two_numbers" / "seed0" / "trace.html"):
        png = screenshot(page, tmp_path / (page.parent.name + ".png"), height=600)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_thinking_is_shown_folded_and_its_decoy_call_never_ran(tmp_path):
    """A thinking model's <think> block, holding a tool call, comes back over real HTTP: the page shows the
    thinking folded (closed until opened), as text, and only the call after </think> ran."""
    from triforge.core import context
    from triforge.core.config import ModelConfig
    from triforge.core.llm import OpenAICompatLLM
    from triforge.core.react import Agent, AgentConfig
    from triforge.core.tools import tool
    from triforge.core.trace import Tracer
    from triforge.testing.fake_server import FakeOpenAIServer
    from triforge.ui.trace_view import render_html

    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note.

        Args:
            text: the note
        """
        ran.append(text)
        from triforge.core.errors import Submitted

        raise Submitted(text)

    decoy = '<tool_call>{"name": "note", "arguments": {"text": "DECOY <b>x</b>"}}</tool_call>'
    reply = f"<think>Maybe I should call {decoy} ... no.</think>\n" \
            '<tool_call>{"name": "note", "arguments": {"text": "real"}}</tool_call>'
    with FakeOpenAIServer([{"content": reply}]) as srv:
        llm = OpenAICompatLLM("thinker", ModelConfig(model="qwen3", base_url=srv.base_url, native_tools=False))
        with context.use(tracer=Tracer(tmp_path)):
            Agent(llm, [note], AgentConfig()).run("go")
    assert ran == ["real"]
    page = render_html(tmp_path)
    closed, _ = dom(page)
    opened, _ = dom(page, "#expand-all")
    assert re.search(r'<details class="thinking">\s*<summary>thinking \(', closed)  # folded by default
    assert "DECOY &lt;b&gt;x&lt;/b&gt;" in opened and "<b>x</b>" not in opened  # text, never markup
    png = screenshot(page, tmp_path / "thinking.png", height=1500, fragment="#expand-all")
    if (keep := os.environ.get("TRIFORGE_KEEP_SCREENSHOTS")):
        shutil.copy(png, Path(keep) / "trace_thinking.png")
    assert png.stat().st_size > 10_000
