# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Three jobs with durations d run on one machine without overlap; minimise the makespan. Print start times, end
times (start + duration) and the makespan.
"""

import json

import cpmpy as cp

# Data
d = [3, 2, 4]
# End of data
start = cp.intvar(0, 20, shape=len(d), name="start")
makespan = cp.intvar(0, 20, name="makespan")
model = cp.Model(cp.NoOverlap(start, d, start + d))
model += [start[i] + d[i] <= makespan for i in range(len(d))]
model.minimize(makespan)
model.solve()
out = {}
out["start"] = [int(s) for s in start.value()]
out["end"] = [int(s) + di for s, di in zip(start.value(), d, strict=True)]
out["makespan"] = int(makespan.value())
print(json.dumps(out))
