# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Numbers a < b < c in 1..10 with a^2 + b^2 = c^2 and a + b + c = 24. Print them in a list `triple`.
"""

import json

import cpmpy as cp


def solve():
    t = cp.intvar(1, 10, shape=3, name="t")
    m = cp.Model(t[0] < t[1], t[1] < t[2], t[0] * t[0] + t[1] * t[1] == t[2] * t[2], cp.sum(t) == 24)
    assert m.solve()
    return {"triple": list(map(int, t.value()))}

if __name__ == "__main__":
    print(json.dumps(solve()))
