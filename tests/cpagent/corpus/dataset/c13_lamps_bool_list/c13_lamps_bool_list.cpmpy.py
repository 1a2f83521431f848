# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Six lamps in a row; exactly three are on, no two neighbours are both on, lamp 0 is on. Print `on` as booleans.
"""

import json

import cpmpy as cp

on = cp.boolvar(shape=6, name="on")
model = cp.Model(cp.sum(on) == 3, on[0])
model += [~(on[i] & on[i + 1]) for i in range(5)]
model += on[5] == 0
model.solve()
print(json.dumps({"on": [bool(v) for v in on.value()]}))
