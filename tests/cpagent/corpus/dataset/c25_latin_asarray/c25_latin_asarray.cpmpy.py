# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
A 3x3 Latin square of 1..3 whose first row is 1 2 3 and whose first column is 1 3 2. Print it.
"""

import json

import cpmpy as cp
import numpy as np

L = cp.intvar(1, 3, shape=(3, 3), name="L")
model = cp.Model([cp.AllDifferent(L[i, :]) for i in range(3)], [cp.AllDifferent(L[:, j]) for j in range(3)])
model += [L[0, j] == j + 1 for j in range(3)]
model += [L[1, 0] == 3, L[2, 0] == 2]
model.solve()
print(json.dumps({"square": np.asarray(L.value(), dtype=int).tolist()}))
