# Category: triforge-corpus
# Source: written for the triforge grader tests (2026-12-04)
"""
Digits for the letters of SEND + MORE = MONEY (all different, S and M not 0). Print one key per letter.
"""

import json

import cpmpy as cp

letters = "SENDMORY"
v = cp.intvar(0, 9, shape=len(letters), name="v")
L = dict(zip(letters, v, strict=True))
def word(w):
    return cp.sum([L[ch] * 10 ** (len(w) - 1 - i) for i, ch in enumerate(w)])
model = cp.Model(cp.AllDifferent(v), L["S"] > 0, L["M"] > 0, word("SEND") + word("MORE") == word("MONEY"))
model.solve()
solution = {}
solution["S"] = int(L["S"].value())
solution["E"] = int(L["E"].value())
solution["N"] = int(L["N"].value())
solution["D"] = int(L["D"].value())
solution["M"] = int(L["M"].value())
solution["O"] = int(L["O"].value())
solution["R"] = int(L["R"].value())
solution["Y"] = int(L["Y"].value())
print(json.dumps(solution))
