"""Fan-out behind one seam: `local.Executor`, with a thread or process pool on this machine (`local.LocalPool`)
and a Ray cluster beyond it (`ray_executor.RayExecutor`, extra `ray`). Problems, rollouts and candidates are
all mapped through it, and the run's budget is hosted by the executor so that workers share one ledger.
"""
