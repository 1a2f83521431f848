# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Order the people in `names` on positions 1..n with Ann before Bob, Cid directly after Ann, Dee last. Print a
mapping name -> position.
"""

import json

import cpmpy as cp

# Data
names = ['Ann', 'Bob', 'Cid', 'Dee']
# End of data
n = len(names)
pos = cp.intvar(1, n, shape=n, name="pos")
idx = {name: i for i, name in enumerate(names)}
model = cp.Model(cp.AllDifferent(pos), pos[idx["Ann"]] < pos[idx["Bob"]],
                 pos[idx["Cid"]] == pos[idx["Ann"]] + 1, pos[idx["Dee"]] == n)
model.solve()
print(json.dumps({"position": {name: int(pos[i].value()) for i, name in enumerate(names)}}))
