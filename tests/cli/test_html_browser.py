"""trace.html and a bench's report.html, opened in a real headless browser (Chromium from the distribution).

Skipped, with the reason, where no chromium binary is installed (scripts/test.sh installs it as root).
"""

from __future__ import annotations

import re
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
