# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Pack items of sizes s into bins of capacity cap using as few bins as possible; item 0 goes into bin 0. Print
each item's bin and the number of bins used.
"""

import json

import cpmpy as cp

# Data
s = [4, 3, 3, 2, 2]
cap = 7
# End of data
def main():
    n = len(s)
    b = cp.intvar(0, n - 1, shape=n, name="bin")
    used = cp.intvar(1, n, name="used")
    m = cp.Model(b[0] == 0)
    for k in range(n):
        m += cp.sum([s[i] * (b[i] == k) for i in range(n)]) <= cap
    m += [b[i] < used for i in range(n)]
    m.minimize(used)
    if m.solve():
        print(json.dumps({"bins": [int(x.value()) for x in b], "n_bins": int(m.objective_value())}))

main()
