# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Pick integers x and y in 0..9 with x + y = 10 and x < y, maximising 2x + y. Print x (1-based: x + 1), y and
the objective as `best`.
"""

import json

import cpmpy as cp

x = cp.intvar(0, 9, name="x")
y = cp.intvar(0, 9, name="y")
model = cp.Model(x + y == 10, x < y)
model.maximize(2 * x + y)
model.solve()
print(json.dumps({"x": int(x.value()) + 1, "y": int(y.value()), "best": int(model.objective_value())}))
