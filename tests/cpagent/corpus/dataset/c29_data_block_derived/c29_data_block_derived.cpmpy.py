# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Give each of the people in `m` (an availability matrix people x slots, 1 = free) a different free slot, person
0 the earliest possible. Print each person's slot.
"""

import json

import cpmpy as cp

# Data
m = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]
n_people = len(m)
n_slots = len(m[0])
# End of data
slot = cp.intvar(0, n_slots - 1, shape=n_people, name="slot")
model = cp.Model(cp.AllDifferent(slot))
model += [slot[p] != s for p in range(n_people) for s in range(n_slots) if not m[p][s]]
model.minimize(slot[0])
model.solve()
print(json.dumps({"slot": slot.value().tolist()}))
