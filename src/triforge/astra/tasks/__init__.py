"""Kernel tasks: one subpackage per operator, each with `TASK` (a TaskSpec) and `baseline.cu`."""
