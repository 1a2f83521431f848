"""The persistent IPython kernel that agents think in, and a pool of pre-started kernels.

`kernel_sandbox.KernelSandbox` is what an agent holds: it runs cells, never raises for what a cell does, and is
interrupted, then restarted, when a cell runs past its deadline. The kernel process itself is confined by
`triforge.confine` (the same policy that holds graded programs and astra's GPU worker).
"""
