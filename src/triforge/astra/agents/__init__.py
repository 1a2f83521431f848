"""astra's agents: testing, profiling, planning and coding roles on the core loop, and the optimize loop."""

from triforge.astra.agents.evaluator import Deferred, EvalJob, EvaluationPending, Evaluator, LocalPool
from triforge.astra.agents.ledger import Ledger, LedgerLimits
from triforge.astra.agents.loop import Optimizer, OptimizeSettings, Outcome
from triforge.astra.agents.roles import ROLES, SINGLE, Plan

__all__ = ["ROLES", "SINGLE", "Deferred", "EvalJob", "EvaluationPending", "Evaluator", "Ledger", "LedgerLimits",
           "LocalPool", "OptimizeSettings", "Optimizer", "Outcome", "Plan"]
