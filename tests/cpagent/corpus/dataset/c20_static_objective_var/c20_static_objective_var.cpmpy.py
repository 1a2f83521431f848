# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Minimise cost = 3a + 2b subject to a + b >= 5, a <= 3, with a, b in 0..10. Print a, b and cost. (Written the
way the static reading understands: every key is `<expr>.value()`.)
"""

import json

import cpmpy as cp

a = cp.intvar(0, 10, name="a")
b = cp.intvar(0, 10, name="b")
cost = cp.intvar(0, 100, name="cost")
model = cp.Model(a + b >= 5, a <= 3, cost == 3 * a + 2 * b)
model.minimize(cost)
model.solve()
solution = {"a": a.value(), "b": b.value(), "cost": cost.value()}
print(json.dumps(solution))
