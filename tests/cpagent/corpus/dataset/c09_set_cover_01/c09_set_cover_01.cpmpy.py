# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Choose the fewest sets so that every element 0..m-1 is covered; sets[s] lists the elements of set s. Print
`chosen` as 0/1 per set and `count`.
"""

import json

import cpmpy as cp

# Data
m = 5
sets = [[0, 1], [1, 2, 3], [3, 4], [0, 4], [2]]
# End of data
x = cp.boolvar(shape=len(sets), name="x")
model = cp.Model([cp.any([x[s] for s in range(len(sets)) if e in sets[s]]) for e in range(m)])
model.minimize(cp.sum(x))
model.solve()
print(json.dumps({"chosen": x.value().astype(int).tolist(), "count": int(model.objective_value())}))
