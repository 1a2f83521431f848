# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Choose items (weights w, values v) within capacity cap maximising value. Print the indices of the chosen items
in increasing order and the value.
"""

import json

import cpmpy as cp

# Data
w = [2, 3, 4, 5]
v = [3, 4, 5, 6]
cap = 5
# End of data
take = cp.boolvar(shape=len(w), name="take")
model = cp.Model(cp.sum(take * w) <= cap)
model.maximize(cp.sum(take * v))
model.solve()
print(json.dumps({"items": [i for i in range(len(w)) if take[i].value()], "value": int(model.objective_value())}))
