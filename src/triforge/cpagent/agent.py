"""The cpagent: a general Python coding agent (ReAct over a persistent IPython kernel) for CPMpy models.

The loop and the tools know no constraint programming. CPMpy-specific knowledge lives in three places:
the project prompt (`prompts/project.md.j2`, replaceable with `--project-prompt`), the tools that run
CPMpy code for the model (`sandbox_tools`: unsat core, optimality proof), and the hints added to a cell's
result after a CPMpy error or an install command (`cell_hints`, `CPAgentConfig.cell_hints`).
The harness adds checks around the agent: a fresh-run check of every submission, an unsat-core
explanation on request, and an optimality proof for optimisation problems. Aids for weak models are
opt-in (`CPAgentConfig.small_model`, `cpagent.small_model_aids`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from triforge.confine.proc import ProcResult
from triforge.core import context
from triforge.core.errors import FormatError, Submitted, UserError
from triforge.core.llm import LLM
from triforge.core.react import Agent, AgentConfig, AgentLimits, AgentResult
from triforge.core.tools import Tool, ToolSet, tool
from triforge.cpagent.cell_hints import error_hint, install_note, strip_installs
from triforge.cpagent.output import OutputError, key_errors, parse_solution
from triforge.cpagent.program_run import Limits, run_python
from triforge.cpagent.sandbox_tools import explain_code, prove_code
from triforge.cpagent.small_model_aids import SmallModelAids
from triforge.cpagent.task import CPTask, system_prompt, task_prompt
from triforge.sandbox.kernel_sandbox import ExecResult, KernelSandbox


@dataclass
class CPAgentConfig:
    """What the agent needs with a capable model. CPMpy-specific hints: the project prompt and `cell_hints`."""

    limits: AgentLimits = field(default_factory=lambda: AgentLimits(max_steps=30))
    project_prompt: str | Path | None = None  # a Jinja template replacing the built-in CPMpy guide
    fresh_check: bool = True  # run a submission fresh before accepting it (off only for ablations)
    # After a cell: install commands not run, CPMpy errors followed by how CPMpy writes it (cpagent.cell_hints)
    cell_hints: bool = True
    kernel_preamble: str = ""  # run in the kernel before the first step (e.g. small_model_aids.PRELOAD_IMPORTS)
    cell_timeout_s: float = 60.0
    sandbox_options: dict[str, Any] = field(default_factory=dict)
    temperature: float | None = None
    sample: int = 0
    small_model: SmallModelAids | None = None  # opt-in aids for weak models (`--profile small-model`)
    model_check: str = "sample"  # grading's model-level check: off | sample | full (cpagent.model_check)

    def settings(self) -> dict[str, Any]:
        """Everything here that can change a run's result, as plain data (for run records)."""
        return {"limits": asdict(self.limits), "fresh_check": self.fresh_check, "cell_hints": self.cell_hints,
                "kernel_preamble": self.kernel_preamble, "cell_timeout_s": self.cell_timeout_s,
                "project_prompt": str(self.project_prompt or "built-in"), "temperature": self.temperature,
                "sample": self.sample, "small_model": asdict(self.small_model) if self.small_model else None,
                "model_check": self.model_check}


@dataclass
class FreshRun:
    ok: bool
    reason: str
    stdout: str = ""
    solution: dict[str, Any] | None = None
    duration_s: float = 0.0
    isolation: str = ""
    timeout_s: float = 0.0


def fresh_run(code: str, task: CPTask, timeout_s: float | None = None) -> FreshRun:
    """Run a program as the grader does (new process, temp dir, rlimits, scrubbed env, no network);
    it must print one JSON object with the required keys."""
    limit = timeout_s or max(task.time_limit_s, 10.0)
    res, isolation = run_python(code, Limits(wall_s=limit))
    fr = _judge(res, task, limit)
    fr.isolation, fr.timeout_s = isolation, limit
    return fr


def _judge(res: ProcResult, task: CPTask, limit: float) -> FreshRun:
    if res.timed_out:
        return FreshRun(False, f"the program did not finish within {limit:g} s", res.stdout, None, res.duration_s)
    if res.returncode != 0:
        tail = res.stderr.strip().splitlines()[-12:]
        return FreshRun(False, f"the program exited with code {res.returncode}:\n" + "\n".join(tail),
                        res.stdout, None, res.duration_s)
    try:
        sol = parse_solution(res.stdout)
    except OutputError as e:
        return FreshRun(False, f"its output is not one JSON object: {e}. Output was: {res.stdout[:500]!r}",
                        res.stdout, None, res.duration_s)
    if task.output_keys and (errs := key_errors(sol, task.output_keys)):
        return FreshRun(False, "; ".join(errs) + f" (required keys: {', '.join(task.output_keys)})",
                        res.stdout, sol, res.duration_s)
    return FreshRun(True, "ok", res.stdout, sol, res.duration_s)


def describe(res: ExecResult) -> str:
    """An execution result as the model will read it."""
    parts = []
    if res.stdout:
        parts.append(res.stdout.rstrip())
    if res.result is not None:
        parts.append(f"Out: {res.result}")
    if res.stderr.strip():
        parts.append(f"[stderr]\n{res.stderr.rstrip()}")
    if res.error is not None:
        tb = res.error.traceback.strip().splitlines()[-15:]
        parts.append(f"{res.error.name}: {res.error.value}\n" + "\n".join(tb))
    if res.timed_out:
        parts.append("[the cell hit its time limit and was interrupted]")
    if res.restarted:
        parts.append("[the kernel was restarted: every variable and import is gone; re-run your setup]")
    if res.notice:
        parts.append(f"[{res.notice}]")
    return "\n".join(parts) if parts else "(no output)"


class CPAgentTools:
    """The agent's tools, bound to one task and one sandbox."""

    def __init__(self, task: CPTask, sandbox: KernelSandbox, config: CPAgentConfig) -> None:
        self.task = task
        self.sandbox = sandbox
        self.config = config
        self.fresh_checks: list[FreshRun] = []
        self.last_cell: ExecResult | None = None  # the latest python_exec result (for policies)

    def solution_shaped(self, res: ExecResult) -> bool:
        """The cell ran cleanly and printed exactly one JSON object with exactly the required keys."""
        if not (self.task.output_keys and res.ok and res.stdout.strip()):
            return False
        try:
            solution = parse_solution(res.stdout)
        except OutputError:
            return False
        return not key_errors(solution, self.task.output_keys)

    def hand_in(self, code: str, auto: bool = False) -> str:
        """Submit `code`: raises Submitted when accepted. A rejected explicit submission raises FormatError;
        a rejected automatic one returns a note for the cell's result and the run goes on."""
        how = "auto-submitted (the cell printed a solution-shaped JSON object)" if auto else "submitted"
        if not self.config.fresh_check:
            raise Submitted({"code": code, "fresh_run": None, "auto": auto}, f"{how}, unchecked")
        fr = fresh_run(code, self.task)
        self.fresh_checks.append(fr)
        if fr.ok:
            raise Submitted({"code": code, "auto": auto,
                             "fresh_run": {"solution": fr.solution, "duration_s": fr.duration_s,
                                           "stdout": fr.stdout, "timeout_s": fr.timeout_s}},
                            f"{how} after a clean fresh run")
        if not auto:
            raise FormatError(f"submission not accepted: {fr.reason}. Fix the program and submit again.")
        return ("\n[The harness tried to hand in this cell as your whole program, but run fresh in a clean "
                f"process it failed: {fr.reason}. Put every import, the data block and the model in one "
                "cell that prints only the JSON line.]")

    def run_preamble(self) -> None:
        """Run the configured preamble in the kernel (at the start, and again after a restart)."""
        pre = self.sandbox.execute(self.config.kernel_preamble, timeout=self.config.cell_timeout_s)
        if not pre.ok:
            raise UserError(f"the kernel preamble failed ({describe(pre).splitlines()[-1][:200]}); is cpmpy "
                            "installed in the environment triforge runs in?")

    def execute(self, code: str, timeout: float) -> tuple[ExecResult, str]:
        """A cell's result and the text the model reads; a kernel that had to restart gets its preamble back.
        The cell is cut at the run's wall-time limit when that comes first."""
        left = context.remaining_s()
        if left is not None:
            timeout = max(1.0, min(timeout, left))
        res = self.sandbox.execute(code, timeout=timeout)
        text = describe(res)
        if res.restarted and self.config.kernel_preamble:
            self.run_preamble()
            text += "\n[the preamble (the imports named in your instructions) was run again]"
        return res, text

    def tools(self) -> list[Tool]:
        task, cfg = self.task, self.config

        @tool
        def python_exec(code: str) -> str:
            """Run Python code in your persistent IPython kernel and see what it prints.

            Args:
                code: Python source; variables and imports persist between calls
            """
            self.last_cell = None  # set only once this cell has a result: a failed call leaves none
            ran, removed = strip_installs(code) if cfg.cell_hints else (code, [])
            res, text = self.execute(ran, cfg.cell_timeout_s)
            if removed:
                text = install_note(removed) + "\n" + text
            if cfg.cell_hints and res.error is not None:
                text += error_hint(res.error.name, res.error.value)
            self.last_cell = res
            return text

        @tool
        def explain_infeasible() -> str:
            """Explain why your current CPMpy model (the variable `model`) has no solution.

            Returns a minimal subset of its constraints that cannot all hold together.
            """
            return self.execute(explain_code(min(cfg.cell_timeout_s, 60)), cfg.cell_timeout_s + 30)[1]

        @tool
        def prove_optimal() -> str:
            """Check that your optimisation model (the variable `model`) is solved to a proven optimum.

            Solves it, then asks whether a strictly better objective value exists.
            """
            return self.execute(prove_code(min(cfg.cell_timeout_s, 120)), cfg.cell_timeout_s * 2 + 30)[1]

        @tool
        def submit(code: str) -> str:
            """Hand in your final, complete program. It is run fresh and must print only the JSON solution.

            Args:
                code: the whole self-contained Python program
            """
            return self.hand_in(code)  # raises: Submitted, or FormatError when rejected

        tools = [python_exec, explain_infeasible, submit]
        if task.is_optimization:
            tools.insert(2, prove_optimal)
        return tools


def run_cpagent(
    llm: LLM,
    task: CPTask,
    *,
    config: CPAgentConfig | None = None,
    run_dir: str | Path | None = None,
    sandbox: KernelSandbox | None = None,
) -> tuple[AgentResult, CPAgentTools]:
    """Run the agent on one task; the sandbox is created (and closed) here unless one is given."""
    config = config or CPAgentConfig()
    own = sandbox is None
    sb = sandbox or KernelSandbox(**{"timeout": config.cell_timeout_s, **config.sandbox_options})
    try:
        bound = CPAgentTools(task, sb, config)
        system = system_prompt(task, config.project_prompt)
        if config.kernel_preamble:
            bound.run_preamble()
            system += ("\n\nYour kernel has already run:\n```python\n" + config.kernel_preamble + "\n```\n"
                       "A submitted program runs in a fresh process and must do its own imports.")
        agent = Agent(
            llm,
            ToolSet(bound.tools(), code_tool="python_exec"),
            AgentConfig(system=system, limits=config.limits, temperature=config.temperature, sample=config.sample),
            name="cpagent",
            run_dir=run_dir,
            policy=config.small_model.policy(bound) if config.small_model else None,
        )
        return agent.run(task_prompt(task)), bound
    finally:
        if own:
            sb.close()
