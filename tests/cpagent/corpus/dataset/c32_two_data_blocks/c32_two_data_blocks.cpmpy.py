# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Reach the target T as a sum of distinct numbers from `pool`, using exactly k of them, maximising the largest
one used. Print the use flags (0/1) and the largest.
"""

import json

import cpmpy as cp

# Data
pool = [1, 2, 4, 6, 9]
T = 12
# End of data

# Data
k = 3
# End of data
take = cp.boolvar(shape=len(pool), name="take")
model = cp.Model(cp.sum(take * pool) == T, cp.sum(take) == k)
largest = cp.max([take[i] * pool[i] for i in range(len(pool))])
model.maximize(largest)
model.solve()
print(json.dumps({"use": [int(t) for t in take.value()], "largest": int(model.objective_value())}))
