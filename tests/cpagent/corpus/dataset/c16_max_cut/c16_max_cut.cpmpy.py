# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Split the vertices of a graph (edges e) into two sides maximising the number of edges across; vertex 0 is on
side 0. Print each vertex's side and the cut size.
"""

import json

import cpmpy as cp

# Data
n = 5
e = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 0], [0, 2]]
# End of data
side = cp.boolvar(shape=n, name="side")
cut = cp.sum([side[a] != side[b] for a, b in e])
model = cp.Model(side[0] == 0)
model.maximize(cut)
model.solve()
print(json.dumps({"side": [int(s) for s in side.value()], "cut": model.objective_value()}))
