# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Choose x[0..5] in 0..3 with sum 6, x[i] <= x[i+1], x[0] = x[1] = x[2] = 0 and x[5] = 3. Print x and how many
entries are positive.
"""

import json

import cpmpy as cp

x = cp.intvar(0, 3, shape=6, name="x")
model = cp.Model(cp.sum(x) == 6, [x[i] <= x[i + 1] for i in range(5)], x[0] == 0, x[5] == 3, x[1] == 0, x[2] == 0)
model.solve()
xs = x.value().tolist()
print(json.dumps({"x": xs, "positive": sum(1 for v in xs if v > 0)}))
