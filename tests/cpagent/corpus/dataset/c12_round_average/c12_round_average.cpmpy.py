# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Split 4 tasks of the given loads between 2 machines, minimising the larger machine load. Print each task's
machine, the larger load, and the average load per task (rounded to 2 decimals).
"""

import json

import cpmpy as cp

# Data
loads = [5, 3, 4, 6]
# End of data
m_of = cp.boolvar(shape=4, name="m_of")
load1 = cp.sum(m_of * loads)
load0 = sum(loads) - load1
top = cp.intvar(0, sum(loads), name="top")
model = cp.Model(top >= load0, top >= load1, m_of[0] == 0)
model.minimize(top)
model.solve()
print(json.dumps({"machine": [int(v) for v in m_of.value()], "max_load": int(top.value()),
                  "average": round(float(sum(loads)) / 4, 2)}))
