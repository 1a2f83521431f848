# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Order the four runners by finishing place (1 = first): Ada finishes before Ben, Cy finishes right after Ada,
Dot finishes last, and the places differ. Print each runner's place (1-based) in the order Ada, Ben, Cy, Dot.
"""

import json

import cpmpy as cp

place = cp.intvar(0, 3, shape=4, name="place")
model = cp.Model(cp.AllDifferent(place), place[0] < place[1], place[2] == place[0] + 1, place[3] == 3)
model.solve()
solution = {"places": place.value()}
# The dict literal reads like `<expr>.value()`, but what is printed is changed after it was built.
solution["places"] = [int(v) + 1 for v in solution["places"]]
print(json.dumps(solution))
