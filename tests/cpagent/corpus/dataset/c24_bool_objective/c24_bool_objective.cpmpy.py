# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Pick boolean features f (6 of them) maximising the sum of gains g of the picked ones, at most 3 picked,
features 0 and 1 not both. Print `picked` (booleans) and `gain`.
"""

import json

import cpmpy as cp

# Data
g = [5, 4, 3, 3, 2, 1]
# End of data
f = cp.boolvar(shape=len(g), name="f")
model = cp.Model(cp.sum(f) <= 3, ~(f[0] & f[1]))
model.maximize(cp.sum(f * g))
model.solve()
print(json.dumps({"picked": f.value().tolist(), "gain": int(model.objective_value())}))
