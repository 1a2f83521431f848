# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Four tasks with durations d start in 0..10, each after the previous one ends (a chain), the first at 0, the
second and third right after their predecessor, the last ending exactly at 12. Print starts and ends.
"""

import json

import cpmpy as cp

# Data
d = [2, 3, 1, 4]
# End of data
st = cp.intvar(0, 10, shape=len(d), name="st")
model = cp.Model([st[i] + d[i] <= st[i + 1] for i in range(len(d) - 1)], st[-1] + d[-1] == 12, st[0] == 0)
model += st[1] == st[0] + d[0]
model += st[2] == st[1] + d[1]
model.solve()
starts = [int(s.value()) for s in st]
print(json.dumps({"starts": starts, "ends": [s + di for s, di in zip(starts, d, strict=True)]}))
