# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
A 0/1 knapsack: weights w, values v, capacity cap. Maximise the total value. Print `take` (a boolean per item)
and `value` (the total value).
"""

import json

import cpmpy as cp

# Data
w = [3, 4, 5, 9]
v = [4, 5, 6, 11]
cap = 12
# End of data
take = cp.boolvar(shape=len(w), name="take")
model = cp.Model(cp.sum(take * w) <= cap)
model.maximize(cp.sum(take * v))
model.solve()
print(json.dumps({"take": [bool(t) for t in take.value()], "value": model.objective_value()}))
