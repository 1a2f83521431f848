# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Fill a 4x4 sudoku (digits 1..4; rows, columns and 2x2 boxes all different) extending the clues (0 = empty).
Print the grid.
"""

import json

import cpmpy as cp

# Data
clues = [[1, 0, 0, 0], [0, 0, 3, 0], [0, 4, 0, 0], [0, 0, 0, 2]]
# End of data
g = cp.intvar(1, 4, shape=(4, 4), name="g")
model = cp.Model()
for i in range(4):
    model += cp.AllDifferent(g[i, :])
    model += cp.AllDifferent(g[:, i])
for bi in (0, 2):
    for bj in (0, 2):
        model += cp.AllDifferent(g[bi:bi + 2, bj:bj + 2])
model += [g[i, j] == clues[i][j] for i in range(4) for j in range(4) if clues[i][j]]
model.solve()
print(json.dumps({"grid": [[int(g[i, j].value()) for j in range(4)] for i in range(4)]}))
