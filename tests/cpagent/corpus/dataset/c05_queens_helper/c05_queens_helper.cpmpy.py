# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Place n queens on an n x n board, one per row, none attacking another; the queen of row 0 is in a column left
of the queen of row 1. Print `queens`: the column of each row's queen.
"""

import json

import cpmpy as cp

# Data
n = 6
# End of data
def column_list(arr):
    return [int(v.value()) for v in arr]

q = cp.intvar(0, n - 1, shape=n, name="q")
model = cp.Model(cp.AllDifferent(q), cp.AllDifferent([q[i] + i for i in range(n)]),
                 cp.AllDifferent([q[i] - i for i in range(n)]), q[0] < q[1])
model.solve()
print(json.dumps({"queens": column_list(q)}))
