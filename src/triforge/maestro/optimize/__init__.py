"""maestro's optimizer: graph and config steps guided by traces, a Pareto pool, the rollout budget, and the
baselines it is compared with (GEPA through its adapter, our MIPROv2)."""
