"""A second oracle run under different scheduling, to expose global-memory races.

compute-sanitizer's racecheck sees shared memory only, and a race between blocks through global
memory can be deterministic on an idle GPU (same dispatch order, same timing every run). The oracle
therefore runs each input set twice, the second time with the candidate on its own stream while a side
stream keeps a random part of the GPU busy with matrix products, so its blocks start on fewer SMs, in
other groups and at other times; the two outputs must be bit-identical.

Known limit: the hardware still dispatches blocks in increasing index order, so a kernel whose blocks
depend on earlier blocks having *started* (not finished) can stay deterministic under this too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any


class Perturber:
    def __init__(self, seed: int) -> None:
        import torch

        self.rng = random.Random(seed)
        self.run_stream = torch.cuda.Stream()
        self.load_stream = torch.cuda.Stream()
        self.a = torch.randn(4096, 256, device="cuda")
        self.b = torch.randn(256, 4096, device="cuda")

    def launch(self, launch_on: Callable[[int], Callable[[dict[str, Any]], None]], inputs: dict[str, Any]) -> None:
        """Launch on the run stream with a random amount of concurrent load started just before."""
        import torch

        here = torch.cuda.current_stream()
        self.load_stream.wait_stream(here)
        self.run_stream.wait_stream(here)
        with torch.cuda.stream(self.load_stream):
            rows = self.rng.choice((256, 1024, 4096))
            for _ in range(self.rng.randint(1, 4)):
                self.a[:rows] @ self.b
        launch_on(self.run_stream.cuda_stream)(inputs)
        here.wait_stream(self.run_stream)
        here.wait_stream(self.load_stream)
