"""Our implementation of the MIPROv2 method (labelled as ours, not DSPy's code): bootstrapped demos,
proposed instructions, and a Bayesian search over their combinations with optuna's TPE sampler.

1. The seed runs on training examples; the module inputs and outputs of the examples it got right
   become candidate demo sets (plus the empty set).
2. The reflection model proposes instructions per module, grounded on the program, the module's
   observed inputs and outputs, and a varied tip (as MIPROv2 does); the seed's instruction is kept.
3. Each optuna trial picks one instruction and one demo set per module and is scored on a validation
   minibatch; every `FULL_EVERY` trials the best-averaging combination is scored on all of validation.
Every rollout and call goes through the same ledger as maestro's.
"""

from __future__ import annotations

import statistics
from typing import Any

from triforge.core.budget import Budget
from triforge.core.errors import BudgetExceeded, UserError
from triforge.maestro.nodes import LLMNode
from triforge.maestro.optimize.budget import BudgetedLLM
from triforge.maestro.optimize.pareto import Candidate, Pool
from triforge.maestro.optimize.proposals import Proposal, RunLog, program_diff
from triforge.maestro.optimize.reflect import ReplyError, parse_instruction
from triforge.maestro.optimize.rollouts import Rollouts, scores
from triforge.maestro.optimize.search import SearchOutcome
from triforge.maestro.optimize.state import ProgramOptimizeSettings
from triforge.maestro.program import Program
from triforge.maestro.render import to_text

TIPS = ("", "Be concise.", "Be precise about the output format.", "Explain the task step by step.",
        "Name the mistakes to avoid.")
N_INSTRUCTIONS, N_DEMO_SETS, FULL_EVERY = 4, 3, 5


def _configure(seed: Program, choice: dict[str, tuple[int, int]], instr: dict[str, list[str]],
               demos: dict[str, list[list[dict[str, Any]]]]) -> Program:
    p = seed.copy()
    for n in p.nodes:
        if isinstance(n, LLMNode) and n.name in choice:
            i, d = choice[n.name]
            n.instruction, n.demos = instr[n.name][i], list(demos[n.name][d])
    return p


def search_mipro(task: Any, rollouts: Rollouts, ledger: Budget, reflection: BudgetedLLM, settings: ProgramOptimizeSettings,
                 log: RunLog) -> SearchOutcome:
    import optuna

    seed = task.program
    modules = [n for n in seed.nodes if isinstance(n, LLMNode)]
    pool = Pool([e.id for e in task.val])
    stop = "trials done"
    calls = 0
    try:
        pool.add(Candidate(0, seed, [], "seed", scores(rollouts.run(seed, task.val, "val")), 0.0,
                           ledger.spent().rollouts))
        log.point(ledger.spent().rollouts, pool.best().score)
        boot = task.train[: max(settings.minibatch, min(len(task.train), 2 * settings.minibatch))]
        boot_results = rollouts.run(seed, boot, "train")
        good = [r for r in boot_results if r.score >= 1.0]
        demos: dict[str, list[list[dict[str, Any]]]] = {}
        instr: dict[str, list[str]] = {}
        for m in modules:
            steps = [next((t for t in r.trace if t["node"] == m.name and not t.get("error")), None) for r in good]
            pairs = [{**s["inputs"], **s["outputs"]} for s in steps if s is not None]
            sets = [[]] + [pairs[i::N_DEMO_SETS][: settings.max_demos] for i in range(N_DEMO_SETS) if pairs[i::N_DEMO_SETS]]
            demos[m.name] = sets
            observed = [next((t for t in r.trace if t["node"] == m.name), None) for r in boot_results[:3]]
            instr[m.name] = [m.instruction]
            for k in range(1, N_INSTRUCTIONS):
                calls += 1
                prompt = (f"Propose an instruction for the module `{m.name}` of this LLM program.\n\n{to_text(seed)}\n"
                          f"Current instruction:\n```\n{m.instruction}\n```\nWhat the module received and produced on "
                          f"some examples: {[{'inputs': o['inputs'], 'outputs': o['outputs']} for o in observed if o]}\n"
                          f"Tip: {TIPS[k % len(TIPS)] or 'none'}\nReply with the instruction between <instruction> "
                          "and </instruction>.")
                try:
                    instr[m.name].append(parse_instruction(reflection.text(prompt, sample=calls)))
                except ReplyError:
                    continue
        sampler = optuna.samplers.TPESampler(seed=settings.seed)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        mb_size = min(len(task.val), 2 * settings.minibatch)
        trial_scores: dict[str, list[float]] = {}
        programs: dict[str, Program] = {}
        for t in range(settings.max_proposals):
            left = ledger.left("rollouts")
            if left is not None and left < mb_size:
                stop = f"rollout budget: {left} left, fewer than one minibatch"
                break
            trial = study.ask()
            choice = {m.name: (trial.suggest_int(f"{m.name}.instruction", 0, len(instr[m.name]) - 1),
                               trial.suggest_int(f"{m.name}.demos", 0, len(demos[m.name]) - 1)) for m in modules}
            prog = _configure(seed, choice, instr, demos)
            start = (t * mb_size) % len(task.val)
            mb = (task.val + task.val)[start:start + mb_size]
            prop = Proposal(t, "mipro", "trial", 0, module=",".join(m.name for m in modules),
                            minibatch_ids=[e.id for e in mb], diff=program_diff(seed, prog), child_hash=prog.hash)
            res = rollouts.run(prog, mb, "val")
            value = statistics.fmean(r.score for r in res)
            study.tell(trial, value)
            trial_scores.setdefault(prog.hash, []).append(value)
            programs[prog.hash] = prog
            prop.child_scores, prop.verdict = [r.score for r in res], f"minibatch mean {value:.3f}"
            if (t + 1) % FULL_EVERY == 0:
                top = max(trial_scores, key=lambda h: (statistics.fmean(trial_scores[h]), h))
                if pool.by_hash(top) is None:
                    best_before = pool.best().score
                    full = rollouts.run(programs[top], task.val, "val")
                    cand = Candidate(len(pool.candidates), programs[top], [0], "mipro", scores(full), 0.0,
                                     ledger.spent().rollouts)
                    pool.add(cand)
                    prop.child_id, prop.val_score, prop.improved = cand.id, round(cand.score, 6), cand.score > best_before
                    log.point(ledger.spent().rollouts, pool.best().score)
            sp = ledger.spent()
            prop.spent = {"search_rollouts": sp.rollouts, "train_rollouts": sp.kind("rollouts.train"),
                          "calls": sp.calls}
            log.add(prop)
    except BudgetExceeded as e:
        if not pool.candidates:
            raise UserError(f"the seed program's validation does not fit the caps ({e}); raise --max-rollouts") from None
        stop = str(e)
    best = pool.best()
    return SearchOutcome(best.program, best.score, pool, log, stop)
