"""The agent and its accounting: the LLM client and config, the adapter and tools, the ReAct loop and its
policies, the budget, cache, trace, provenance and run directories, and the seams the packages above plug
into (`providers`, `entry_points`). Core imports nothing above it."""
