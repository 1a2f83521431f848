"""The optimize loop: R rounds of test, profile, plan and code; K candidates a round; the lab decides.

Every step is stored as it finishes (`RunState`), every candidate lands in `candidates/<id>/` with its
kernel, plan and verdict, and every evaluation goes through the `Evaluator` seam, so a killed run or a
deferred evaluation resumes by running the same command again.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from triforge.astra.agents.acceptance import decide
from triforge.astra.agents.evaluator import (
    Deferred,
    EvalJob,
    EvaluationPending,
    Evaluator,
    read_result,
    write_job,
)
from triforge.astra.agents.final import final_check
from triforge.astra.agents.report import write_reports
from triforge.astra.agents.roles import ROLES, SINGLE, Plan, Roles, Seen, small_model_policy
from triforge.astra.agents.state import RunState
from triforge.astra.lab import CheckResult, geomean
from triforge.astra.task import get_task
from triforge.confine.isolation import IsolationPolicy
from triforge.confine.record import trace_isolation
from triforge.core import context
from triforge.core.budget import Budget, BudgetLimits
from triforge.core.errors import BudgetExceeded, UserError
from triforge.core.llm import LLM
from triforge.core.rundir import write_json_atomic
from triforge.core.trace import Tracer

FINAL_RESERVE = 2  # evaluations kept for the final check (the winner and the start on held-out shapes)
REPAIRABLE = ("compile_error", "incorrect", "crash")
START = "r0-start"


@dataclass
class KernelOptimizeSettings:
    task: str
    start_source: str
    start_label: str = "baseline"
    rounds: int = 5
    candidates: int = 3
    repairs: int = 1
    single_agent: bool = False
    task_file: str | None = None  # a copy inside the run directory, relative to it
    profile: bool = True
    models: dict[str, str] = field(default_factory=dict)  # role -> alias, for the record and the fingerprint
    max_steps: int = 12
    max_tokens_per_call: int | None = None
    report_note: str = ""  # a line at the top of the reports (e.g. that the replies were scripted)
    model_profile: str = "default"  # "small-model": every agent runs with the core's SmallModelPolicy

    def fingerprint(self) -> dict[str, Any]:
        return {"task": self.task, "start_sha256": hashlib.sha256(self.start_source.encode()).hexdigest(),
                "single_agent": self.single_agent, "candidates": self.candidates, "repairs": self.repairs,
                "models": dict(sorted(self.models.items())), "task_file": self.task_file,
                **({"model_profile": self.model_profile} if self.model_profile != "default" else {})}


@dataclass
class Outcome:
    status: str  # done | waiting
    waiting: list[str] = field(default_factory=list)
    best_id: str = START
    best_gain: float = 1.0  # geometric mean speedup of the best over the start on the timing shapes
    stopped: str | None = None
    results: dict[str, Any] = field(default_factory=dict)


def _plan_enc(p: list[Plan]) -> list[dict[str, str]]:
    return [asdict(x) for x in p]


def _plan_dec(d: list[dict[str, str]]) -> list[Plan]:
    return [Plan(**x) for x in d]


class Optimizer:
    def __init__(self, settings: KernelOptimizeSettings, models: dict[str, LLM], evaluator: Evaluator, run_dir: Path,
                 limits: BudgetLimits | None = None, on_event: Callable[[str], None] | None = None) -> None:
        need = [SINGLE] if settings.single_agent else list(ROLES)
        missing = [r for r in need if r not in models]
        if missing:
            raise UserError(f"no model for role(s) {', '.join(missing)}")
        self.s = settings
        self.run_dir = Path(run_dir)
        self.state = RunState(self.run_dir, settings.fingerprint())
        # the one budget: LLM calls, tokens and dollars, and GPU evaluations; its spend survives a resume
        self.budget = Budget(limits, self.state.data.get("spend"))
        self.evaluator = evaluator
        self.task = get_task(settings.task)
        self.roles = Roles(models, self.run_dir, self.budget, max_steps=settings.max_steps,
                           max_tokens_per_call=settings.max_tokens_per_call,
                           policy=small_model_policy if settings.model_profile == "small-model" else None)
        self.say = on_event or (lambda _m: None)
        self.records: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}

    # --- evaluation ------------------------------------------------------------------------------------
    def job(self, cid: str, source: str, extra: list[dict[str, int]], **kw: Any) -> EvalJob:
        return EvalJob(cid, self.s.task, source, extra_shapes=[dict(s) for s in extra], task_file=self.s.task_file, **kw)

    def evaluate_batch(self, items: list[tuple[EvalJob, dict[str, Any]]], reserve: int = FINAL_RESERVE) -> None:
        """Write, grant (budget) and evaluate a batch; results land in self.results. Raises EvaluationPending."""
        todo, fresh = [], False
        for job, meta in items:
            rec = self.state.candidate(job.id)
            if rec is None:
                granted = self.budget.grant("evaluations", 1, reserve) == 1
                rec = {**meta, "id": job.id, "status": "waiting" if granted else "skipped",
                       "note": "" if granted else "evaluation budget spent"}
                self.state.put_candidate(job.id, rec, save=False)
                fresh = True
            self.records[job.id] = rec
            if rec["status"] == "skipped":
                continue
            res = read_result(self.run_dir, job.id)
            if res is None:
                todo.append(job)
            else:
                self.results[job.id] = res
        if fresh:  # the grants and the jobs' records, in one write, before anything is evaluated
            self.state.data["spend"] = self._spend()
            self.state.save()
        for job in todo:  # after the grants are stored: a kill in between never charges a job twice
            if not (self.run_dir / "candidates" / job.id / "job.json").is_file():
                write_job(self.run_dir, job)
        if todo:
            tracer = context.tracer()
            with tracer.span("astra.evaluate", kind="evaluation", **{"triforge.candidates": [j.id for j in todo]}) \
                    if tracer else contextlib.nullcontext() as attrs:
                got = self.evaluator.evaluate(todo, self.run_dir)
                if attrs is not None:
                    attrs["triforge.verdicts"] = {k: v.get("verdict") for k, v in got.items()}
            for job in todo:
                if job.id in got:
                    write_json_atomic(self.run_dir / "candidates" / job.id / "result.json", got[job.id])
                    self.results[job.id] = got[job.id]
        waiting = [j.id for j in todo if j.id not in self.results]
        if waiting:
            raise EvaluationPending(waiting)

    # --- the loop --------------------------------------------------------------------------------------
    def run(self, rounds: int | None = None) -> Outcome:
        rounds = self.s.rounds if rounds is None else rounds
        tracer = Tracer(self.run_dir)
        trace_isolation(tracer, self._isolation())
        with context.use(budget=self.budget, tracer=tracer):
            try:
                return self._run(rounds)
            except EvaluationPending as p:
                return Outcome("waiting", waiting=p.waiting, results=self._write_results(rounds, [], None, {}))
            finally:
                self.state.data["spend"] = self._spend()
                self.state.save()

    def _spend(self) -> dict[str, Any]:
        s = self.budget.spent()
        return {"calls": s.calls, "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
                "usd": round(s.usd, 6), "evaluations": s.evaluations, **({"extra": s.extra} if s.extra else {})}

    def _isolation(self) -> dict[str, Any]:
        """The run's isolation record: what confines candidates where this loop evaluates them, or where
        they go instead (deferred: each result.json says what held where it was evaluated)."""
        policy = IsolationPolicy.from_env()
        held = getattr(self.evaluator, "isolation", None)
        if held is None:
            held = ("deferred: candidates run under `triforge astra evaluate` (each result.json records what held)"
                    if isinstance(self.evaluator, Deferred) else "not recorded by this evaluator")
        return {**policy.record(), "held": held}

    def _run(self, rounds: int) -> Outcome:
        self.evaluate_batch([(self.job(START, self.s.start_source, [], profile=self.s.profile),
                         {"round": 0, "plan": {"title": f"start kernel ({self.s.start_label})"}, "parent": None})],
                       reserve=0)
        start = CheckResult.from_dict(self.results[START])
        if not start.correct:
            raise UserError(f"the start kernel is not correct ({start.verdict}): "
                            f"{(start.reasons or ['no reason'])[0][:300]}; fix it before optimizing")
        self.say(f"start kernel: correct, {self._speedups(START)}")
        best, lineage, extra, history, per_round = START, [START], [], [], []
        stopped = None
        for r in range(1, rounds + 1):
            started = any(k.startswith(f"r{r}/") for k in self.state.data["steps"])  # a resumed round replays
            if stopped is None and not started and (why := self.budget.exceeded()):
                stopped = why
            left = self.budget.left("evaluations")
            if stopped is None and not started and left is not None and left <= FINAL_RESERVE:
                stopped = "evaluation budget spent"
            if stopped:
                break
            seen = Seen(self.task, best, self.source_of(best), self.results[best], list(extra), list(history))
            cands, stopped = self._propose(r, seen, extra)
            ids = self._evaluate_round(r, cands, extra, seen)
            decided = [(cid, decide(self.results[cid], self.results[best], best)) for cid in ids if cid in self.results]
            for cid, d in decided:
                self.records[cid]["decision"] = {"accepted": d.accepted, "reason": d.reason, "gain": d.gain}
                history.append(f"{cid} ({self.records[cid]['plan']['title']}): {d.reason}")
            winners = sorted((d.gain or 0.0, cid) for cid, d in decided if d.accepted)
            if winners:
                best = winners[-1][1]
                lineage.append(best)
                self.say(f"round {r}: accepted {best}, {self._speedups(best)}")
            else:
                self.say(f"round {r}: nothing accepted; best stays {best}")
            per_round.append({"round": r, "candidates": ids, "accepted": winners[-1][1] if winners else None,
                              "best": best, "best_gain": self._gain(best)})
            for cid in ids:
                self.state.put_candidate(cid, self.records[cid], save=False)
            self.state.save()
        final = final_check(self, best)
        results = self._write_results(rounds, per_round, stopped, final, best, lineage)
        write_reports(self.run_dir, results, self.s.report_note)
        return Outcome("done", best_id=best, best_gain=self._gain(best), stopped=stopped, results=results)

    def _propose(self, r: int, seen: Seen, extra: list[dict[str, int]]) -> tuple[list[tuple[str, Plan, str, str | None]], str | None]:
        """(id, plan, source, parent) for this round's candidates, and why the run stops (budget) if it does."""
        k, st, out = self.s.candidates, self.state, []
        try:
            if self.s.single_agent:
                shapes, pairs = st.step(f"r{r}/single", lambda: self.roles.single(seen, k, f"r{r}-single"),
                                        lambda v: [v[0], [[asdict(p), s] for p, s in v[1]]],
                                        lambda v: (v[0], [(Plan(**p), s) for p, s in v[1]]))
                extra.extend(shapes)
                return [(f"r{r}-k{i}", p, s, seen.best_id) for i, (p, s) in enumerate(pairs)], None
            shapes = st.step(f"r{r}/tests", lambda: self.roles.testing(seen, f"r{r}-testing"))
            extra.extend(shapes)
            seen.extra_shapes = list(extra)
            if shapes:
                self.say(f"round {r}: testing agent added {len(shapes)} shape(s)")
            analysis = st.step(f"r{r}/analysis", lambda: self.roles.profiling(seen, f"r{r}-profiling"))
            plans = st.step(f"r{r}/plans", lambda: self.roles.planning(seen, analysis or "(no analysis)", k,
                                                                        f"r{r}-planning"), _plan_enc, _plan_dec)
            self.say(f"round {r}: {len(plans)} plan(s)")
            for i, plan in enumerate(plans):
                src = st.step(f"r{r}/code/k{i}", lambda plan=plan, i=i: self.roles.coding(seen, plan, f"r{r}-coding-k{i}"))
                if src:
                    out.append((f"r{r}-k{i}", plan, src, seen.best_id))
        except BudgetExceeded as e:
            return out, str(e)
        return out, None

    def _evaluate_round(self, r: int, cands: list[tuple[str, Plan, str, str | None]], extra: list[dict[str, int]],
                        seen: Seen) -> list[str]:
        ids = []
        batch = [(self.job(cid, src, extra, profile=self.s.profile),
                  {"round": r, "plan": asdict(plan), "parent": parent}) for cid, plan, src, parent in cands]
        self.evaluate_batch(batch)
        ids += [cid for cid, *_ in cands]
        current = {cid: (plan, src) for cid, plan, src, _ in cands}
        for attempt in range(1, self.s.repairs + 1):
            fixes = []
            for cid, (plan, src) in list(current.items()):
                res = self.results.get(cid)
                if res is None or res.get("verdict") not in REPAIRABLE or self.budget.exceeded():
                    continue
                base = cid.split("-fix")[0]
                key = f"r{r}/code/{base.split('-')[1]}/fix{attempt}"
                try:
                    new = self.state.step(key, lambda plan=plan, src=src, res=res, base=base, a=attempt: self.roles.coding(
                        seen, plan, f"{base}-fix{a}", src, res.get("verdict", ""), list(res.get("reasons", []))[:5],
                        SINGLE if self.s.single_agent else "coding"))
                except BudgetExceeded:
                    break
                if new:
                    fixes.append((f"{base}-fix{attempt}", plan, new, cid))
            if not fixes:
                break
            self.evaluate_batch([(self.job(fid, src, extra, profile=self.s.profile),
                             {"round": r, "plan": asdict(plan), "parent": parent}) for fid, plan, src, parent in fixes])
            ids += [fid for fid, *_ in fixes]
            current = {fid: (plan, src) for fid, plan, src, _ in fixes}
        for cid in ids:
            res = self.results.get(cid)
            self.say(f"  {cid} {self.records[cid]['plan']['title'][:60]}: "
                     f"{res['verdict'] if res else self.records[cid]['status']}")
        return ids

    # --- helpers ---------------------------------------------------------------------------------------
    def source_of(self, cid: str) -> str:
        return (self.run_dir / "candidates" / cid / "kernel.cu").read_text(encoding="utf-8")

    def _gain(self, cid: str) -> float:
        """Geometric mean over timing shapes of speedup(cid) / speedup(start)."""
        a, b = CheckResult.from_dict(self.results[cid]), CheckResult.from_dict(self.results[START])
        by = {t.shape: t.speedup for t in b.timings}
        return geomean([t.speedup / by[t.shape] for t in a.timings if t.shape in by]) if a.timings else 1.0

    def _speedups(self, cid: str) -> str:
        res = CheckResult.from_dict(self.results[cid])
        return ", ".join(f"{t.shape} {t.candidate_us:.1f} us (x{t.speedup:.2f} vs task baseline)" for t in res.timings)

    def _write_results(self, rounds: int, per_round: list[dict[str, Any]], stopped: str | None,
                       final: dict[str, Any], best: str | None = None, lineage: list[str] | None = None) -> dict[str, Any]:
        cands = {}
        for cid, rec in self.state.data["candidates"].items():
            cands[cid] = {**rec, **self.records.get(cid, {}), "result": self.results.get(cid) or read_result(self.run_dir, cid)}
        out = {"task": self.s.task, "start": self.s.start_label, "rounds_requested": rounds, "rounds": per_round,
               "best": best, "lineage": lineage or [], "stopped": stopped, "final": final,
               "spend": self._spend(), "limits": self.budget.limits.as_dict(), "settings": asdict(self.s) | {"start_source": None},
               "candidates": cands, "agents": self.roles.statuses}
        write_json_atomic(self.run_dir / "results.json", out)
        return out
