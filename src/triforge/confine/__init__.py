"""Running untrusted code: the isolation policy, the launcher, seccomp, limits, the process tree, one-shot runs.

A service for everything that runs code a model wrote: the sandbox's kernels (`triforge.sandbox`), the CP
grader's programs and references (`triforge.cpagent`), astra's GPU worker. `isolation` says what the code may
reach and how this machine can hold it; `run.run_isolated` runs one program under it; `proc.run` is the
subprocess with a deadline that everything here is built on.
"""
