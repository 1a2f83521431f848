# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Choose x[0..4] in 0..5, strictly increasing, with x[4] - x[0] = 4, minimising the sum. Print x and the total.
"""

import json

import cpmpy as cp
import numpy as np

x = cp.intvar(0, 5, shape=5, name="x")
model = cp.Model([x[i] < x[i + 1] for i in range(4)], x[4] - x[0] == 4)
model.minimize(cp.sum(x))
model.solve()
vals = np.asarray(x.value())
print(json.dumps({"x": vals.tolist(), "total": int(np.sum(vals))}))
