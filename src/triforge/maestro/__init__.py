"""maestro: optimize an LLM agent's graph (its modules and how they connect) and its config together, under one
budget: programs, their interpreter, benchmarks and metrics, the optimizer and its baselines."""
