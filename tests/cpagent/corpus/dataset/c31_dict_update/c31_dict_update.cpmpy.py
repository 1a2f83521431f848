# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Seat 4 guests around a table of 4 seats: guest 0 in seat 0, guests 1 and 2 not adjacent (seats i and i+1 mod 4
are adjacent), guest 3 in a seat with a higher number than guest 1. Print seats and the seat of guest 3
separately.
"""

import json

import cpmpy as cp

seat = cp.intvar(0, 3, shape=4, name="seat")
model = cp.Model(cp.AllDifferent(seat), seat[0] == 0, seat[3] > seat[1])
model += [(seat[1] + 1) % 4 != seat[2], (seat[2] + 1) % 4 != seat[1]]
model.solve()
sol = {"seats": [int(s) for s in seat.value()]}
sol.update(guest3=int(seat[3].value()))
print(json.dumps(sol))
