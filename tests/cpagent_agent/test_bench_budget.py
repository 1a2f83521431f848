"""`cpagent bench --budget-usd`: no call reaches the endpoint once the dollars are spent, counted at the server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from triforge.cpagent.reference_replies import reference_submitter
from triforge.testing.fake_server import FakeOpenAIServer

IDS = ["abbots_puzzle", "among", "added_corners"]


@pytest.mark.parametrize(("usd", "calls"), [(0.5, 1), (1.5, 2), (2.5, 3)])
def test_budget_usd_stops_the_calls_sent(tmp_path, usd, calls):
    from triforge.cpagent.dataset import load_problem

    reply = reference_submitter([load_problem(None, pid) for pid in IDS])

    def priced(body):  # every reply costs exactly 1 USD: one output token at 1 USD a token
        step = reply(body)
        step = {"content": step} if isinstance(step, str) else dict(step)
        return {**step, "usage": {"input_tokens": 0, "output_tokens": 1}}

    with FakeOpenAIServer(priced) as srv:
        cfg = tmp_path / "triforge.toml"
        cfg.write_text(f'[models.priced]\nmodel = "fake-model"\nbase_url = "{srv.base_url}"\nmax_retries = 0\n'
                       "price_in_per_mtok = 0.0\nprice_out_per_mtok = 1000000.0\n")
        problems = [x for p in IDS for x in ("--problem", p)]
        args = [sys.executable, "-m", "triforge.cli.app", "cpagent", "bench", *problems,
                "--model", "priced", "--budget-usd", str(usd), "--jobs", "1", "--out", str(tmp_path / "b")]
        r = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                           env={**os.environ, "TRIFORGE_CONFIG": str(cfg)})
        sent = len(srv.requests)
    assert sent == calls, (sent, r.stdout, r.stderr)  # the call that reached the cap was the last one sent
    assert r.returncode == 1 and "budget" in r.stderr, r.stderr
    report = (tmp_path / "b" / "report.md").read_text()
    assert "stopped by the budget" in report or "not run (the budget was spent)" in report
