"""The cpagent with scripted models (fixtures, not results): solve, unsat core, rejected submissions,
hostile cells, endpoint faults with resume, budget stops."""

from __future__ import annotations

import json

import pytest

from triforge.core.budget import Budget, BudgetLimits
from triforge.core.config import ModelConfig
from triforge.core.llm import OpenAICompatLLM
from triforge.core.react import AgentLimits
from triforge.cpagent.agent import CPAgentConfig, fresh_run, run_cpagent
from triforge.cpagent.small_model_aids import SmallModelAids, apply_profile
from triforge.cpagent.solve import solve_task
from triforge.cpagent.task import CPTask, task_from_file
from triforge.testing.fake_server import FakeOpenAIServer
from triforge.testing.scripted import ScriptedLLM, call

TASK = CPTask(
    id="pick",
    description="Choose integers x and y in 0..9 with x + y == 12 and x - y == 2.",
    data="total = 12\ndiff = 2",
    output_keys=("x", "y"),
)
GOOD = """# Data
total = 12
diff = 2
# End of data
import json
import cpmpy as cp
x, y = cp.intvar(0, 9, shape=2, name=["x", "y"])
model = cp.Model(x + y == total, x - y == diff)
assert model.solve()
print(json.dumps({"x": int(x.value()), "y": int(y.value())}))
"""
INFEASIBLE = "import cpmpy as cp\nx, y = cp.intvar(0, 9, shape=2, name=['x','y'])\n" \
             "model = cp.Model(x + y == 12, x - y == 2, x < 5)\nprint(model.solve())"


def tool_outputs(res):
    return [m["content"] for m in res.messages if m["role"] == "tool"]


def test_clean_solve(tmp_path):
    llm = ScriptedLLM([call("python_exec", code=GOOD), call("submit", code=GOOD)])
    rec = solve_task(TASK, llm, tmp_path / "run")
    assert rec["status"] == "submitted" and rec["solution"] == {"x": 7, "y": 5}
    assert rec["grade"]["status"] == "ungraded"
    for f in ("solution.py", "solution.json", "trace.jsonl", "trace.html", "report.md", "results.json"):
        assert (tmp_path / "run" / f).is_file(), f
    assert json.loads((tmp_path / "run" / "solution.json").read_text()) == {"x": 7, "y": 5}
    assert "`solution.py`, `solution.json`" in (tmp_path / "run" / "report.md").read_text()
    llm.assert_done()


def test_state_persists_between_cells():
    llm = ScriptedLLM([call("python_exec", code="secret = 41"), call("python_exec", code="secret + 1"),
                       call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK)
    assert "Out: 42" in tool_outputs(res)[1]


def test_infeasible_model_explained_then_fixed():
    llm = ScriptedLLM([call("python_exec", code=INFEASIBLE), call("explain_infeasible"),
                       call("python_exec", code=GOOD), call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK)
    outs = tool_outputs(res)
    assert outs[0].strip() == "False"
    assert "unsatisfiable" in outs[1] and "x < 5" in outs[1]
    assert res.submitted


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (GOOD.replace('print(json.dumps({"x"', 'print("answer:"); print(json.dumps({"x"'), "wrapped in other output"),
        (GOOD.replace('"y": int(y.value())', '"z": int(y.value())'), "missing key(s): y"),
        (GOOD.replace("import json\n", "import json\nraise SystemExit(3)\n"), "exited with code 3"),
        (GOOD.replace("print(json.dumps", "pass  # print(json.dumps"), "no output"),
        ("import time\ntime.sleep(30)\n", "did not finish"),
    ],
)
def test_submission_failing_fresh_run_is_rejected_then_corrected(bad, reason):
    llm = ScriptedLLM([call("submit", code=bad), call("submit", code=GOOD)])
    task = CPTask(**{**TASK.__dict__, "time_limit_s": 3.0}) if "sleep" in bad else TASK
    res, bound = run_cpagent(llm, task, config=CPAgentConfig())
    assert res.submitted and res.output["fresh_run"]["solution"] == {"x": 7, "y": 5}
    rejection = tool_outputs(res)[0]
    assert rejection.startswith("Rejected: submission not accepted") and reason in rejection
    assert [f.ok for f in bound.fresh_checks] == [False, True]


def test_ablation_accepts_unchecked_submission():
    bad = GOOD.replace('"y": int', '"z": int')
    llm = ScriptedLLM([call("submit", code=bad)])
    res, bound = run_cpagent(llm, TASK, config=CPAgentConfig(fresh_check=False))
    assert res.submitted and bound.fresh_checks == []


def test_hostile_cell_is_survived():
    llm = ScriptedLLM([call("python_exec", code="while True:\n    pass"), call("python_exec", code="print('alive')"),
                       call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK, config=CPAgentConfig(cell_timeout_s=1.5))
    outs = tool_outputs(res)
    assert "time limit" in outs[0]
    assert "alive" in outs[1] and res.submitted


def test_optimisation_tools_and_prompt():
    task = CPTask(id="opt", description="Minimise x subject to x >= 3, x in 0..9.", output_keys=("x",),
                  is_optimization=True)
    code = "import cpmpy as cp\nx = cp.intvar(0, 9, name='x')\nmodel = cp.Model(x >= 3)\nmodel.minimize(x)"
    llm = ScriptedLLM([call("python_exec", code=code), call("prove_optimal"),
                       call("submit", code=code + "\nmodel.solve()\nimport json\nprint(json.dumps({'x': int(x.value())}))")])
    res, _ = run_cpagent(llm, task)
    assert "Proven optimal: objective 3" in tool_outputs(res)[1]
    assert "prove_optimal" in llm.requests[0]["messages"][0]["content"]
    assert "prove_optimal" in [t["function"]["name"] for t in llm.requests[0]["tools"]]


def test_budget_stop_keeps_run_dir(tmp_path):
    llm = ScriptedLLM([call("python_exec", code="1")] * 3)
    rec = solve_task(TASK, llm, tmp_path / "r", budget=Budget(BudgetLimits(max_calls=2)))
    assert rec["status"] == "budget_exceeded" and rec["grade"]["status"] == "not_submitted"
    assert (tmp_path / "r" / "trace.jsonl").is_file() and (tmp_path / "r" / "results.json").is_file()


def test_endpoint_fault_mid_run_then_resume(tmp_path):
    out = tmp_path / "run"
    script = [call("python_exec", code="x = 1"), {"fault": "500"}, {"fault": "500"}, call("submit", code=GOOD)]
    with FakeOpenAIServer(script) as srv:  # one endpoint: the endpoint is part of the settings a resume keeps
        llm = OpenAICompatLLM("fake", ModelConfig(model="fake-model", base_url=srv.base_url, max_retries=1),
                              sleep=lambda s: None)
        rec = solve_task(TASK, llm, out)
        assert rec["status"] == "endpoint_error" and "gave up after 2 attempts" in rec["message"]
        assert json.loads((out / "results.json").read_text())["status"] == "endpoint_error"
        assert (out / "trace.jsonl").read_text().count('"kind": "tool"') == 1
        rec = solve_task(TASK, llm, out)
        assert rec["status"] == "submitted"
        again = solve_task(TASK, llm, out)  # finished: a resume does nothing
    assert again == rec and len(srv.requests) == 4


def test_problem_file_without_output_format(tmp_path):
    f = tmp_path / "p.md"
    f.write_text("Find a number between 1 and 3.")
    task = task_from_file(f)
    assert task.output_keys == () and not task.gradable
    code = "import json\nprint(json.dumps({'n': 2}))"
    rec = solve_task(task, ScriptedLLM([call("submit", code=code)]), tmp_path / "r")
    assert rec["status"] == "submitted" and rec["grade"]["status"] == "ungraded"
    assert "could not be graded" in (tmp_path / "r" / "report.md").read_text()


def test_problem_file_keys_from_line_or_json_example(tmp_path):
    f = tmp_path / "a.md"
    f.write_text("Maximize profit.\n\nOutput keys: plan, profit\n")
    t = task_from_file(f)
    assert t.output_keys == ("plan", "profit") and t.is_optimization
    f.write_text('Colour the map.\n```json\n{"colors": [1, 2], "k": 2}\n```\n')
    assert task_from_file(f).output_keys == ("colors", "k")


def test_fresh_run_is_isolated_from_the_kernel(tmp_path):
    fr = fresh_run("import json\nprint(json.dumps({'x': secret}))", TASK)
    assert not fr.ok and "NameError" in fr.reason


def test_limits_from_config():
    llm = ScriptedLLM([call("python_exec", code="1")] * 2)
    res, _ = run_cpagent(llm, TASK, config=CPAgentConfig(limits=AgentLimits(max_steps=2)))
    assert res.status == "limits_exceeded"


BUMP = "n = globals().get('n', 0) + 1\nprint('run', n)\nraise ValueError('still wrong')"
AIDS = SmallModelAids(auto_submit=False, resample_repeats=0)


def _three_sends_then_ask_n() -> ScriptedLLM:
    return ScriptedLLM([call("python_exec", code=BUMP), call("python_exec", code=BUMP + "\n"),
                        call("python_exec", code=BUMP),
                        lambda msgs, tools: call("python_exec", code="print('n is', n)"), call("submit", code=GOOD)])


def test_with_the_small_model_aids_a_cell_sent_a_third_time_is_not_run_and_leaves_the_context(tmp_path):
    llm = _three_sends_then_ask_n()
    rec = solve_task(TASK, llm, tmp_path / "run", config=CPAgentConfig(small_model=AIDS))
    assert rec["status"] == "submitted" and rec["forgotten"] == 1
    assert json.loads((tmp_path / "run" / "config.json").read_text())["small_model"]["forget_repeats"] is True
    context = llm.requests[3]["messages"]
    assert not any("still wrong" in json.dumps(m) for m in context[2:]), "no result of a call that did not run"
    assert context[-1]["role"] == "user" and "sent the same call 3 times" in context[-1]["content"]
    assert "not run" in context[-1]["content"]
    traj = json.loads((tmp_path / "run" / "cpagent.trajectory.json").read_text())["messages"]
    assert "n is 2" in json.dumps(traj), "the third send must not have run"
    llm.assert_done()


def test_by_default_every_send_runs_and_nothing_is_flagged_or_forgotten(tmp_path):
    """A capable model gets no small-model aid: no repeat flag, no forgetting, no re-asking."""
    llm = _three_sends_then_ask_n()
    rec = solve_task(TASK, llm, tmp_path / "run")
    assert rec["status"] == "submitted" and "forgotten" not in rec and "resampled" not in rec
    assert json.loads((tmp_path / "run" / "config.json").read_text())["small_model"] is None
    traj = json.loads((tmp_path / "run" / "cpagent.trajectory.json").read_text())["messages"]
    assert "n is 3" in json.dumps(traj) and "[Same code" not in json.dumps(traj)
    llm.assert_done()


def test_text_protocol_with_fenced_code_solves_and_submits(tmp_path):
    """How the local 1.5B model works best: code in python fences, the program in a ```submit fence."""
    llm = ScriptedLLM([f"Let me model it.\n```python\n{GOOD}```\nThat prints the solution.",
                       f"It works; submitting.\n```submit\n{GOOD}```"], native_tools=False)
    rec = solve_task(TASK, llm, tmp_path / "run")
    assert rec["status"] == "submitted" and rec["solution"] == {"x": 7, "y": 5} and rec["format_errors"] == 0
    traj = json.loads((tmp_path / "run" / "cpagent.trajectory.json").read_text())
    msgs = traj["messages"] if isinstance(traj, dict) else traj
    assert "```python block calls python_exec" in msgs[0]["content"]
    assert any('{"x": 7, "y": 5}' in str(m["content"]) for m in msgs if m["role"] == "user")


def test_a_solution_shaped_output_is_not_handed_in_by_default():
    llm = ScriptedLLM([call("python_exec", code=GOOD), call("submit", code=GOOD)])
    res, bound = run_cpagent(llm, TASK)
    assert res.submitted and res.output["auto"] is False
    assert tool_outputs(res)[0].strip() == '{"x": 7, "y": 5}'  # the cell's output alone: no reminder, no flag


def test_auto_submit_hands_in_a_self_contained_cell_after_its_fresh_run(tmp_path):
    llm = ScriptedLLM([call("python_exec", code="import json"), call("python_exec", code=GOOD)])
    rec = solve_task(TASK, llm, tmp_path / "run", config=CPAgentConfig(small_model=SmallModelAids()))
    assert rec["status"] == "submitted" and rec["auto_submitted"] and rec["solution"] == {"x": 7, "y": 5}
    assert (tmp_path / "run" / "solution.py").read_text() == GOOD
    llm.assert_done()


def test_auto_submit_refuses_a_cell_that_leans_on_the_kernel_and_says_why():
    """The cell prints a solution-shaped object only because an earlier cell defined `answer`: run fresh it
    fails, so nothing is handed in; the model is told why and its later explicit submit goes through."""
    llm = ScriptedLLM([call("python_exec", code="import json\nanswer = {'x': 7, 'y': 5}"),
                       call("python_exec", code="print(json.dumps(answer))"), call("submit", code=GOOD)])
    res, bound = run_cpagent(llm, TASK, config=CPAgentConfig(small_model=SmallModelAids()))
    note = tool_outputs(res)[1]
    assert '{"x": 7, "y": 5}' in note and "failed" in note and "NameError" in note
    assert res.submitted and res.output["auto"] is False
    assert [f.ok for f in bound.fresh_checks] == [False, True]


def test_auto_submit_ignores_outputs_that_are_not_solution_shaped():
    llm = ScriptedLLM([call("python_exec", code='print(\'{"x": 7}\')'),
                       call("python_exec", code='print("x=7"); print(\'{"x": 7, "y": 5}\')'), call("submit", code=GOOD)])
    res, bound = run_cpagent(llm, TASK, config=CPAgentConfig(small_model=SmallModelAids()))
    assert res.submitted and res.output["auto"] is False and len(bound.fresh_checks) == 1


def test_auto_submit_without_the_fresh_check_takes_the_cell_as_written():
    """The ablation arm: the kernel-dependent cell is handed in unchecked (and would fail when graded)."""
    llm = ScriptedLLM([call("python_exec", code="import json\nanswer = {'x': 7, 'y': 5}"),
                       call("python_exec", code="print(json.dumps(answer))")])
    res, bound = run_cpagent(llm, TASK, config=CPAgentConfig(small_model=SmallModelAids(), fresh_check=False))
    assert res.submitted and res.output == {"code": "print(json.dumps(answer))", "fresh_run": None, "auto": True}
    assert bound.fresh_checks == []


def test_preloaded_imports_are_in_the_kernel_and_named_in_the_prompt_but_not_in_the_fresh_run():
    from triforge.cpagent.small_model_aids import PRELOAD_IMPORTS

    cell = "print(json.dumps({'x': 7, 'y': 5}))"  # leans on the preloaded json
    llm = ScriptedLLM([call("python_exec", code=cell), call("submit", code=GOOD)])
    res, bound = run_cpagent(llm, TASK, config=CPAgentConfig(small_model=SmallModelAids(), kernel_preamble=PRELOAD_IMPORTS))
    assert "import cpmpy as cp" in res.messages[0]["content"] and "must do its own imports" in res.messages[0]["content"]
    assert "NameError" in tool_outputs(res)[0]  # the auto hand-in ran fresh, without the preamble
    assert [f.ok for f in bound.fresh_checks] == [False, True]


def test_a_kernel_restart_gets_the_preamble_back():
    from triforge.cpagent.small_model_aids import PRELOAD_IMPORTS

    llm = ScriptedLLM([call("python_exec", code="import os; os._exit(1)"), call("python_exec", code="print(cp.__name__)"),
                       call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK, config=CPAgentConfig(kernel_preamble=PRELOAD_IMPORTS))
    outs = tool_outputs(res)
    assert "state is lost" in outs[0] and "preamble" in outs[0] and "was run again" in outs[0]
    assert outs[1].strip() == "cpmpy" and res.submitted


def test_a_failing_preamble_stops_before_the_first_step():
    from triforge.core.errors import UserError

    with pytest.raises(UserError, match="preamble failed .*ModuleNotFoundError"):
        run_cpagent(ScriptedLLM([]), TASK, config=CPAgentConfig(kernel_preamble="import no_such_module_here"))


def test_report_of_a_run_without_submission_lists_no_solution_files(tmp_path):
    llm = ScriptedLLM([call("python_exec", code="1")])
    solve_task(TASK, llm, tmp_path / "run", config=CPAgentConfig(limits=AgentLimits(max_steps=1)))
    report = (tmp_path / "run" / "report.md").read_text()
    assert "not_submitted" in report and "solution.py" not in report and "`trace.html`" in report


def test_install_commands_are_not_run_and_the_rest_of_the_cell_is():
    """Seen on the main job: the 1.5B model read `cp.Eq`'s AttributeError as a broken install and spent its
    last 9 steps on `!pip install --upgrade cpmpy`, each waiting out pip's retries without a network."""
    cell = "!pip install --upgrade cpmpy==1.3.0\nfor i in range(1):\n    %pip install -q ortools\nprint('after')"
    llm = ScriptedLLM([call("python_exec", code=cell), call("python_exec", code="import cpmpy as cp\ncp.Eq(1, 2)"),
                       call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK)
    installed, missing = tool_outputs(res)[:2]
    assert installed.startswith("[Not run: `!pip install --upgrade cpmpy==1.3.0`, `%pip install -q ortools`")
    assert "cpmpy " in installed and installed.rstrip().endswith("after")
    assert "Retrying" not in installed and "Requirement" not in installed
    assert "AttributeError" in missing and "CPMpy has no `cp.Eq`" in missing and "x + y == total" in missing


def test_an_if_on_a_decision_variable_is_answered_with_the_constraint_forms():
    cell = "import cpmpy as cp\nx = cp.intvar(0, 3, name='x')\nif x > 1:\n    print('big')"
    llm = ScriptedLLM([call("python_exec", code=cell), call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK)
    out = tool_outputs(res)[0]
    assert "ValueError" in out and "__bool__" in out and "`cp.IfThenElse(cond, a, b)`" in out


def test_cell_hints_can_be_switched_off():
    llm = ScriptedLLM([call("python_exec", code="import cpmpy as cp\ncp.Eq(1, 2)"), call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK, config=CPAgentConfig(cell_hints=False))
    out = tool_outputs(res)[0]
    assert "AttributeError" in out and "CPMpy has no" not in out


def test_profiles():
    from triforge.core.errors import UserError
    from triforge.cpagent.small_model_aids import PRELOAD_IMPORTS

    assert apply_profile(CPAgentConfig(), "default") == CPAgentConfig()
    small = apply_profile(CPAgentConfig(), "small-model")
    assert small.small_model == SmallModelAids() and small.kernel_preamble == PRELOAD_IMPORTS
    with pytest.raises(UserError, match="unknown profile 'tiny'"):
        apply_profile(CPAgentConfig(), "tiny")


def test_auto_submit_never_judges_a_call_by_an_earlier_cell_s_output(monkeypatch):
    """A python_exec call that fails in the harness has no cell result: the policy must not hand in its code on
    the strength of the previous cell's solution-shaped output."""
    from triforge.sandbox.kernel_sandbox import KernelSandbox

    real = KernelSandbox.execute

    def flaky(self, code, timeout=None):
        if "BROKEN" in code:
            raise RuntimeError("the sandbox failed")
        return real(self, code, timeout=timeout)

    monkeypatch.setattr(KernelSandbox, "execute", flaky)
    llm = ScriptedLLM([call("python_exec", code="answer = {'x': 7, 'y': 5}"),
                       call("python_exec", code="import json\nprint(json.dumps(answer))"),
                       call("python_exec", code="# BROKEN\nprint(1)"), call("submit", code=GOOD)])
    res, bound = run_cpagent(llm, TASK, config=CPAgentConfig(small_model=SmallModelAids()))
    refused, broken = tool_outputs(res)[1:3]
    assert "tried to hand in this cell" in refused  # leans on the kernel: refused, and the run went on
    assert "RuntimeError: the sandbox failed" in broken and "tried to hand in" not in broken
    assert len(bound.fresh_checks) == 2 and res.submitted and res.output["auto"] is False


def test_a_forgotten_cell_is_never_answered_with_a_stale_result():
    """Issue 17 item 3 in the real kernel: the cell printed `x = 1` twice, then x became 2; its third send is
    not run, and the model must not read `x = 1` as if it were that send's result."""
    show = "print('x =', x)"
    seen: list[str] = []

    def look(msgs, tools):
        seen.append(json.dumps(msgs))
        return call("python_exec", code=show + "  # again, changed")

    llm = ScriptedLLM([call("python_exec", code="x = 0 + 1"), call("python_exec", code=show),
                       call("python_exec", code=show), call("python_exec", code="x = 0 + 2"),
                       call("python_exec", code=show), look, call("submit", code=GOOD)])
    res, _ = run_cpagent(llm, TASK, config=CPAgentConfig(small_model=AIDS))
    assert res.submitted and res.policy["forgotten"] == 1
    assert "x = 1" not in seen[0] and "not run" in seen[0]
    assert tool_outputs(res)[-1].strip() == "x = 2"  # a changed cell runs, and shows the state as it is
