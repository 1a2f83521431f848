# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Find a, b in 1..20 with a * b = 36, a + b = 13 and a < b. Print them.
"""

import json
import sys

import cpmpy as cp

a = cp.intvar(1, 20, name="a")
b = cp.intvar(1, 20, name="b")
model = cp.Model(a * b == 36, a + b == 13, a < b)
if not model.solve():
    sys.exit("no solution")
result = dict(a=int(a.value()), b=int(b.value()))
print(json.dumps(result))
