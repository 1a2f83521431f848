# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
A 2x3 0/1 matrix with row sums [2, 1] and column sums [1, 1, 1], and m[0][0] = 1, m[1][1] = 1. Print it
flattened row by row.
"""

import json

import cpmpy as cp

m = cp.intvar(0, 1, shape=(2, 3), name="m")
model = cp.Model(cp.sum(m[0, :]) == 2, cp.sum(m[1, :]) == 1, m[0, 0] == 1, m[1, 1] == 1)
model += [cp.sum(m[:, j]) == 1 for j in range(3)]
model.solve()
print(json.dumps({"cells": m.value().flatten().tolist()}))
