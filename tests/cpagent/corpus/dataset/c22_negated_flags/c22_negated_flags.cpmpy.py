# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Five switches, exactly two closed, switch 1 and switch 3 open, switch 0 closed. Print for each switch whether
it is open.
"""

import json

import cpmpy as cp

closed = cp.boolvar(shape=5, name="closed")
model = cp.Model(cp.sum(closed) == 2, ~closed[1], ~closed[3], closed[0], closed[2] | closed[4], ~(closed[2] & closed[4]), closed[2])
model.solve()
print(json.dumps({"open": [not bool(c) for c in closed.value()]}))
