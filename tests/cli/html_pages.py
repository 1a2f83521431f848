"""Helpers for checking triforge's HTML pages in headless Chromium, and for the screenshots in docs/.

`scripted_bench(out)` runs `cpagent bench` on the example problem with two seeds against the fake server,
with a scripted model (one correct hand-in, one wrong): it exercises the real bench, grader and reports.
Run as a script to refresh docs/screenshots/: `python tests/cli/html_pages.py docs/screenshots`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from triforge.testing.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "cpbench"
PROGRAM = ("# Data\ntotal = 12\ndiff = 2\n# End of data\nimport json\nimport cpmpy as cp\n"
           "x, y = cp.intvar(0, total, shape=2, name=['x', 'y'])\nm = cp.Model(x + y == total, x - y == diff)\n"
           "assert m.solve()\nprint(json.dumps({'x': int(x.value()), 'y': int(y.value())}))\n")
WRONG = PROGRAM.replace("x - y == diff", "x - y == diff + 2")


def chromium() -> str | None:
    return next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)


def browser(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run headless Chromium (as root it needs --no-sandbox); stderr carries the page's console messages."""
    exe = chromium()
    assert exe, "no chromium binary"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
           "--v=0", "--user-data-dir=" + str(Path(args[-1].split("#")[0].removeprefix("file://")).parent
                                             / ".chromium-profile"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def scripted_model() -> Any:
    """Looks at the data in a cell, then hands in: the first run the right program, later runs a wrong one."""
    handed_in = [0]
    lock = threading.Lock()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if not any(m.get("role") == "tool" for m in body.get("messages", [])):
            return {"content": "Let me check the numbers first.",
                    "tool_calls": [{"name": "python_exec", "arguments": {"code": "print(12 + 2, 12 - 2)"}}]}
        with lock:
            handed_in[0] += 1
            first = handed_in[0] == 1
        return {"content": "x + y = 12 and x - y = 2; handing in the model.",
                "tool_calls": [{"name": "submit", "arguments": {"code": PROGRAM if first else WRONG}}]}

    return reply


def scripted_bench(out: Path) -> subprocess.CompletedProcess:
    with FakeOpenAIServer(scripted_model()) as srv:
        return subprocess.run(
            [sys.executable, "-m", "triforge.cli.app", "cpagent", "bench", "--data", str(EXAMPLES), "--seeds", "2",
             "--jobs", "1", "--max-steps", "4", "--model", "scripted", "--base-url", srv.base_url, "--out", str(out)],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def screenshot(page: Path, png: Path, *, width: int = 1100, height: int = 1400, fragment: str = "") -> Path:
    r = browser(f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri() + fragment)
    assert png.is_file(), r.stderr[-2000:]
    return png


if __name__ == "__main__":
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "screenshots")
    work = dest / ".work"
    shutil.rmtree(work, ignore_errors=True)
    r = scripted_bench(work / "bench")
    print(r.stdout[-1500:], r.stderr[-1500:])
    screenshot(work / "bench" / "report.html", dest / "bench_report.png", height=700)
    screenshot(work / "bench" / "problems" / "two_numbers" / "seed0" / "trace.html", dest / "cpagent_trace.png",
               height=1800, fragment="#expand-all")
    shutil.rmtree(work)
    print("wrote", dest / "bench_report.png", dest / "cpagent_trace.png")
