"""`open_run`: the run's services installed for the block and closed after it, whatever happens inside."""

from __future__ import annotations

import pytest

from triforge.core import context
from triforge.core.budget import BudgetLimits
from triforge.core.errors import BudgetExceeded
from triforge.core.run import open_run
from triforge.testing.scripted import ScriptedLLM


class Closing(ScriptedLLM):
    closed = 0

    def close(self) -> None:
        Closing.closed += 1


def test_services_are_installed_for_the_block_and_closed_after(tmp_path):
    llm = ScriptedLLM(["one", "two"])
    with open_run(tmp_path / "run", llm=llm, cache="rw", cache_path=tmp_path / "c.sqlite",
                  limits=BudgetLimits(max_calls=1), trace=True, isolation={"held": "test"}) as run:
        assert run.out.is_dir() and run.model is llm and run.models(None) is llm
        assert context.budget() is run.budget and context.cache() is run.cache and context.tracer() is run.tracer
        assert context.endpoint_limits() is not None and run.isolation == {"held": "test"}
        llm.complete([{"role": "user", "content": "hi"}])
        with pytest.raises(BudgetExceeded):
            llm.complete([{"role": "user", "content": "again"}])
        cache = run.cache
    assert context.budget() is None and context.cache() is None and context.tracer() is None
    assert cache is not None and cache._db is None  # closed
    assert (tmp_path / "run" / "trace.jsonl").is_file()


def test_no_limits_means_no_budget_and_a_failure_inside_still_closes(tmp_path):
    Closing.closed = 0
    with pytest.raises(RuntimeError), open_run(tmp_path, llm=Closing([]), cache="off",
                                               limits=BudgetLimits()) as run:
        assert run.budget is None and run.cache is None and run.tracer is None
        raise RuntimeError("inside")
    assert Closing.closed == 0  # a client the caller gave is the caller's to close
    assert context.budget() is None
