# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Integers x, y, z in 0..6 with x + y + z = 10, x = y + 1, z odd, maximising z. Print them as numbers (floats).
"""

import json

import cpmpy as cp

x, y, z = cp.intvar(0, 6, shape=3, name="xyz")
zh = cp.intvar(0, 3, name="zh")
model = cp.Model(x + y + z == 10, x == y + 1, z == 2 * zh + 1)
model.maximize(z)
model.solve()
print(json.dumps({"x": float(x.value()), "y": float(y.value()), "z": float(z.value())}))
