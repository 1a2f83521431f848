"""astra's agents: testing, profiling, planning and coding roles on the core loop, and the optimize loop."""

from triforge.astra.agents.evaluator import Deferred, EvalJob, EvaluationPending, Evaluator, GpuPool
from triforge.astra.agents.loop import KernelOptimizeSettings, Optimizer, Outcome
from triforge.astra.agents.roles import ROLES, SINGLE, Plan

__all__ = ["ROLES", "SINGLE", "Deferred", "EvalJob", "EvaluationPending", "Evaluator", "GpuPool",
           "KernelOptimizeSettings", "Optimizer", "Outcome", "Plan"]
