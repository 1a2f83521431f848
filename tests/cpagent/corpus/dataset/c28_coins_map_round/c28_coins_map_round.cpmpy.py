# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Pay amount A with coins of values cv using as few coins as possible. Print the count of each coin and the
number of coins.
"""

import json

import cpmpy as cp

# Data
A = 37
cv = [1, 5, 10, 25]
# End of data
cnt = cp.intvar(0, 40, shape=len(cv), name="cnt")
model = cp.Model(cp.sum(cnt * cv) == A)
model.minimize(cp.sum(cnt))
model.solve()
print(json.dumps({"counts": list(map(int, cnt.value())), "coins": int(round(model.objective_value()))}))
