"""The run directory's state: every step's output is stored as it finishes, so a re-run resumes.

A step is memoized under a key ("r1/plans", "r2/code/k0"...): on resume the stored value is returned
and the model is not asked again. Verdicts live beside each candidate (`candidates/<id>/result.json`).
A run directory holding a different run (task, start kernel, roles, models, K) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from triforge.core.errors import UserError
from triforge.core.rundir import write_json_atomic


class RunState:
    def __init__(self, run_dir: Path, fingerprint: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "state.json"
        try:
            self.data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.data = {}
        except json.JSONDecodeError:
            raise UserError(f"{self.path} is damaged; move it away or use a new --out") from None
        old = self.data.get("fingerprint")
        if old is not None and old != fingerprint:
            diff = [k for k in sorted(set(old) | set(fingerprint)) if old.get(k) != fingerprint.get(k)]
            k = diff[0]
            raise UserError(f"run directory {run_dir} holds a different run: {k} was {old.get(k)!r}, now "
                            f"{fingerprint.get(k)!r}; re-run with the same settings to resume, or use a new --out")
        self.data["fingerprint"] = fingerprint
        self.data.setdefault("steps", {})
        self.data.setdefault("candidates", {})
        self.data.setdefault("rounds", [])

    @property
    def resumed(self) -> bool:
        return bool(self.data["steps"]) or bool(self.data["candidates"])

    def save(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.data)

    def step(self, key: str, compute: Callable[[], Any], encode: Callable[[Any], Any] = lambda v: v,
             decode: Callable[[Any], Any] = lambda v: v) -> Any:
        if key in self.data["steps"]:
            return decode(self.data["steps"][key])
        value = compute()
        self.data["steps"][key] = encode(value)
        self.save()
        return value

    def candidate(self, cid: str) -> dict[str, Any] | None:
        return self.data["candidates"].get(cid)

    def put_candidate(self, cid: str, record: dict[str, Any], save: bool = True) -> None:
        self.data["candidates"][cid] = record
        if save:
            self.save()
