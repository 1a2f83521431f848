# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Assign n workers to n tasks (a permutation) minimising the total cost c[w][t]. Print for each worker its task
numbered from 1, and the total cost.
"""

import json

import cpmpy as cp

# Data
c = [[4, 1, 3], [2, 0, 5], [3, 2, 2]]
# End of data
n = len(c)
task = cp.intvar(0, n - 1, shape=n, name="task")
cost = cp.sum([cp.cpm_array(c[w])[task[w]] for w in range(n)])
model = cp.Model(cp.AllDifferent(task), minimize=cost)
model.solve()
print(json.dumps({"task": [int(t) + 1 for t in task.value()], "cost": int(round(model.objective_value()))}))
