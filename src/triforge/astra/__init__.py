"""astra: make existing CUDA kernels faster and keep them correct. The lab (task, compile, evaluate, check, lab:
each imports only those before it) checks and times a kernel in a confined worker; `agents` iterate on one."""
