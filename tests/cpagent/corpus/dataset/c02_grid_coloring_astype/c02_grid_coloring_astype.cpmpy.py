# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Colour an r x c grid with k colours so that horizontally and vertically adjacent cells differ and cell (0, 0)
has colour 0; every colour is used exactly r*c/k times. Print the grid as rows.
"""

import json

import cpmpy as cp

# Data
r = 2
c = 3
k = 3
# End of data
g = cp.intvar(0, k - 1, shape=(r, c), name="g")
model = cp.Model(g[0, 0] == 0)
for i in range(r):
    for j in range(c):
        if i + 1 < r:
            model += g[i, j] != g[i + 1, j]
        if j + 1 < c:
            model += g[i, j] != g[i, j + 1]
for col in range(k):
    model += cp.Count(g.flatten(), col) == r * c // k
if model.solve():
    print(json.dumps({"grid": g.value().astype(int).tolist()}))
