# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
A 3x3 magic square of the numbers 1..9 (rows, columns and both diagonals sum alike), with 2 in the top-left
corner and 7 right of it. Print the square and its magic sum.
"""

import json

import cpmpy as cp
import numpy as np

sq = cp.intvar(1, 9, shape=(3, 3), name="sq")
s = 15
model = cp.Model(cp.AllDifferent(sq), sq[0, 0] == 2, sq[0, 1] == 7)
model += [cp.sum(sq[i, :]) == s for i in range(3)]
model += [cp.sum(sq[:, j]) == s for j in range(3)]
model += cp.sum([sq[i, i] for i in range(3)]) == s
model += cp.sum([sq[i, 2 - i] for i in range(3)]) == s
model.solve()
vals = np.array(sq.value())
print(json.dumps({"square": vals.tolist(), "magic_sum": int(np.sum(vals[0]))}))
