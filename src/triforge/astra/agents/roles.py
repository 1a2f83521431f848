"""The four roles (testing, profiling, planning, coding) and the single agent, each on the core ReAct loop.

A role is a prompt template (`prompts/<role>.md.j2`), a few typed tools and a model alias. Its output
is typed (shapes, an analysis, plans, a kernel); a role that stops without handing one in yields nothing,
and the loop goes on without it. A spent budget ends the role and is re-raised for the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from triforge.astra import lab
from triforge.astra.check_host import precheck
from triforge.astra.task import TaskSpec, shape_label
from triforge.core.errors import BudgetExceeded, FormatError, Submitted
from triforge.core.llm import LLM
from triforge.core.policy import LoopPolicy
from triforge.core.react import Agent, AgentConfig, AgentLimits
from triforge.core.small_model_policy import SmallModelPolicy
from triforge.core.tools import Tool

ROLES = ("testing", "profiling", "planning", "coding")
SINGLE = "single"
_ENV = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "prompts")), undefined=StrictUndefined,
                   keep_trailing_newline=True)


@dataclass
class Plan:
    title: str
    change: str
    predicted_effect: str

    @classmethod
    def parse(cls, d: Any) -> Plan:
        if not isinstance(d, dict):
            raise FormatError(f"each plan must be an object with title, change, predicted_effect; got {d!r:.80}")
        missing = [k for k in ("title", "change", "predicted_effect") if not str(d.get(k, "")).strip()]
        if missing:
            raise FormatError(f"plan {d.get('title', '?')!r} lacks {', '.join(missing)}")
        return cls(str(d["title"]).strip(), str(d["change"]).strip(), str(d["predicted_effect"]).strip())


@dataclass
class Seen:
    """What the roles are shown: the task, the current best kernel and its measured result."""

    task: TaskSpec
    best_id: str
    best_source: str
    best_result: dict[str, Any]
    extra_shapes: list[dict[str, int]] = field(default_factory=list)
    history: list[str] = field(default_factory=list)


def render(template: str, seen: Seen, **extra: Any) -> str:
    t = seen.task
    return _ENV.get_template(template).render(
        task=t, shape_keys=list(t.train[0]), timing_shapes=[shape_label(s) for s in t.timing],
        kernel=seen.best_source.strip(), best_id=seen.best_id, history=seen.history, **extra)


def timings_text(result: dict[str, Any]) -> str:
    res = lab.CheckResult.from_dict(result)
    if not res.timings:
        return "no timings measured for this kernel"
    roof = res.roofline()
    lines = [f"copy bandwidth (read + write) {res.copy_gbs:.0f} GB/s" if res.copy_gbs else "copy bandwidth not measured"]
    for i, t in enumerate(res.timings):
        frac = f", {100 * roof[i]:.0f}% of the copy roofline" if roof else ""
        lines.append(f"{t.shape}: {t.candidate_us:.2f} us (task baseline {t.baseline_us:.2f} us, speedup "
                     f"{t.speedup:.3f}, A/A noise {100 * t.aa_spread:.2f}%), {t.candidate_gbs:.0f} GB/s{frac}")
    return "\n".join(lines)


def profile_text(result: dict[str, Any]) -> str:
    p = result.get("profile") or {}
    if "digest" in p:
        return f"profile on {p.get('shape')}:\n{p['digest']}"
    return f"no profile available: {p.get('absent', 'not measured')}"


def small_model_policy() -> LoopPolicy:
    """`--profile small-model`: the core's aids for weak models, and bare arguments read as the call."""
    return SmallModelPolicy(read_bare_arguments=True)


class Roles:
    """Runs each role's agent with its own model; trajectories go to `run_dir/agents/`."""

    def __init__(self, models: dict[str, LLM], run_dir: Path, ledger: Any, *, max_steps: int = 12,
                 max_tokens_per_call: int | None = None, max_shapes: int = 4,
                 policy: Callable[[], LoopPolicy] | None = None) -> None:
        self.models = models
        self.policy = policy  # a fresh opt-in loop policy per agent run (`--profile small-model`)
        self.run_dir = run_dir / "agents"
        self.ledger = ledger
        self.max_steps = max_steps
        self.max_tokens_per_call = max_tokens_per_call
        self.max_shapes = max_shapes
        self.statuses: dict[str, str] = {}

    def _run(self, role: str, name: str, tools: list[Any], task_text: str) -> Any:
        system = _ENV.get_template("system.md.j2").render(role=role)
        cfg = AgentConfig(system=system, limits=AgentLimits(max_steps=self.max_steps),
                          max_tokens_per_call=self.ledger.output_cap(self.max_tokens_per_call))
        res = Agent(self.models[role], tools, cfg, name=name, run_dir=self.run_dir,
                    policy=self.policy() if self.policy else None).run(task_text)
        self.statuses[name] = res.status if res.submitted else f"{res.status}: {res.message}"
        if res.status == "budget_exceeded":
            raise BudgetExceeded(res.message)
        return res.output if res.submitted else None

    # --- tools shared by several roles -------------------------------------------------------------
    def _shape_tools(self, seen: Seen, added: list[dict[str, int]]) -> list[Any]:
        max_shapes = self.max_shapes

        def add_test_shape(shape: dict[str, int], why: str = "") -> str:
            """Add one test shape to every later candidate's correctness check.

            Args:
                shape: the shape, e.g. {"num_tokens": 3, "d": 4099}: exactly the task's shape keys.
                why: what this shape could expose.
            """
            if len(added) >= max_shapes:
                raise FormatError(f"at most {max_shapes} shapes per run of this agent")
            try:
                s = lab.validate_shape(seen.task, shape)
            except ValueError as exc:
                raise FormatError(str(exc)) from None
            if s in seen.task.train + seen.task.fuzz + seen.extra_shapes + added:
                return f"{shape_label(s)} is already checked"
            added.append(s)
            return f"added {shape_label(s)}"

        return [add_test_shape]

    def _measure_tools(self, seen: Seen) -> list[Any]:
        def timings() -> str:
            """Measured times of the current best kernel on the timing shapes, with the copy roofline."""
            return timings_text(seen.best_result)

        def profile() -> str:
            """The profiler digest (ncu, ptxas) of the current best kernel on the first timing shape."""
            return profile_text(seen.best_result)

        return [timings, profile]

    def _precheck_tool(self, seen: Seen) -> Any:
        name = seen.task.name

        def precheck_kernel(code: str) -> str:
            """Check a kernel's interface, launch lines and the static anti-hack rules (no GPU, no timing).

            Args:
                code: the complete .cu file.
            """
            bad = precheck(name, code)
            return "passes the interface and static checks" if bad is None else f"{bad['verdict']}: {'; '.join(bad['reasons'])}"

        return Tool.from_function(precheck_kernel, name="precheck")

    # --- the roles ---------------------------------------------------------------------------------
    def testing(self, seen: Seen, name: str) -> list[dict[str, int]]:
        added: list[dict[str, int]] = []

        def finish_tests(summary: str = "") -> str:
            """Done adding shapes.

            Args:
                summary: one line on what the shapes test.
            """
            raise Submitted(list(added))

        checked = [shape_label(s) for s in seen.task.train + seen.task.fuzz + seen.extra_shapes]
        out = self._run("testing", name, self._shape_tools(seen, added) + [finish_tests],
                        render("testing.md.j2", seen, checked_shapes=checked, max_shapes=self.max_shapes))
        return out if out is not None else added  # shapes added before a stop still count

    def profiling(self, seen: Seen, name: str) -> str | None:
        def submit_analysis(analysis: str) -> str:
            """Hand in the bottleneck analysis.

            Args:
                analysis: a few lines: achieved bandwidth vs copy bandwidth, occupancy, what limits the kernel.
            """
            if not analysis.strip():
                raise FormatError("the analysis is empty")
            raise Submitted(analysis.strip())

        return self._run("profiling", name, self._measure_tools(seen) + [submit_analysis],
                         render("profiling.md.j2", seen))

    def planning(self, seen: Seen, analysis: str, k: int, name: str) -> list[Plan]:
        def submit_plans(plans: list[dict[str, Any]]) -> str:
            """Hand in the ranked plans, best first.

            Args:
                plans: objects with title, change and predicted_effect.
            """
            parsed = [Plan.parse(p) for p in plans]
            if not parsed:
                raise FormatError("give at least one plan")
            raise Submitted(parsed[:k])

        out = self._run("planning", name, self._measure_tools(seen) + [submit_plans],
                        render("planning.md.j2", seen, analysis=analysis, max_plans=k))
        return list(out or [])

    def coding(self, seen: Seen, plan: Plan, name: str, previous: str | None = None, verdict: str = "",
               reasons: list[str] | None = None, role: str = "coding") -> str | None:
        """One kernel for `plan` (a repair when `previous` is given); `role` picks the model (the single agent's
        repairs use its own)."""
        task_name = seen.task.name

        def submit_kernel(code: str) -> str:
            """Hand in the complete candidate kernel (it must pass precheck).

            Args:
                code: the complete .cu file.
            """
            bad = precheck(task_name, code)
            if bad is not None:
                raise FormatError(f"not handed in: {bad['verdict']}: {'; '.join(bad['reasons'])}")
            raise Submitted(code)

        # without native tool calls a kernel is handed in as a fenced block (```submit_kernel): no JSON escaping
        fenced = not getattr(self.models[role].config, "native_tools", True)
        text = render("coding.md.j2", seen, plan=plan, previous=previous, verdict=verdict, reasons=reasons or [],
                      fenced=fenced)
        return self._run(role, name, [self._precheck_tool(seen), submit_kernel], text)

    def single(self, seen: Seen, k: int, name: str) -> tuple[list[dict[str, int]], list[tuple[Plan, str]]]:
        added: list[dict[str, int]] = []
        task_name = seen.task.name

        def submit_candidates(candidates: list[dict[str, Any]]) -> str:
            """Hand in up to K complete kernels, each with its plan.

            Args:
                candidates: objects with title, change, predicted_effect and source (the complete .cu file).
            """
            out = []
            for c in candidates[:k]:
                plan = Plan.parse(c)
                bad = precheck(task_name, str(c.get("source", "")))
                if bad is not None:
                    raise FormatError(f"candidate {plan.title!r} not handed in: {bad['verdict']}: {'; '.join(bad['reasons'])}")
                out.append((plan, str(c["source"])))
            if not out:
                raise FormatError("give at least one candidate")
            raise Submitted(out)

        tools = self._shape_tools(seen, added) + self._measure_tools(seen) + [self._precheck_tool(seen), submit_candidates]
        out = self._run(SINGLE, name, tools, render("single.md.j2", seen, max_plans=k))
        return added, list(out or [])
