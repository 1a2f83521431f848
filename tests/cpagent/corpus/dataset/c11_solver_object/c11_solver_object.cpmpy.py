# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Find digits a, b, c (0..9) with a + b + c = 12, a * b = c + 2 and a < b < c. Print the three.
"""

import json

import cpmpy as cp

a, b, c = cp.intvar(0, 9, shape=3, name="abc")
model = cp.Model(a + b + c == 12, a * b == c + 2, a < b, b < c)
s = cp.SolverLookup.get("ortools", model)
if s.solve():
    print(json.dumps({"a": a.value(), "b": b.value(), "c": int(c.value())}))
