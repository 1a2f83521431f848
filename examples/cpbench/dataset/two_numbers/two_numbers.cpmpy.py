#!/usr/bin/python3
# Category: triforge_examples
# Source: written for triforge (an example in the DCP-Bench-Open layout)

"""
Two non-negative integers x and y add up to `total`, and x is larger than y by exactly `diff`.
Find x and y.

Print the two numbers (x, y).
"""

# Data
total = 12  # the sum x + y
diff = 2  # the difference x - y
# End of data

# Import libraries
from cpmpy import *
import json

# Decision variables
x = intvar(0, total, name="x")
y = intvar(0, total, name="y")

# Model
model = Model([x + y == total, x - y == diff])

# Solve the model
model.solve()

# Print the solution
solution = {"x": x.value(), "y": y.value()}
print(json.dumps(solution))
# End of CPMPy script
