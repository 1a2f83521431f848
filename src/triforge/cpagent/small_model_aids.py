"""cpagent's aids for weak models: the core small-model policy plus auto-submit (`--profile small-model`).

Off unless chosen: a capable model gets none of them. docs/local.md records what each one measurably
changed with the embedded local model, and which were retired because they changed nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from triforge.core.errors import UserError
from triforge.core.small_model_policy import SmallModelPolicy
from triforge.core.tools import Call

if TYPE_CHECKING:
    from triforge.cpagent.agent import CPAgentConfig, CPAgentTools

PROFILES = ("default", "small-model")
PRELOAD_IMPORTS = "import json\nimport cpmpy as cp\nimport numpy as np"  # the small-model profile's kernel preamble


@dataclass
class SmallModelAids:
    """Which aids are on (all, in the `small-model` profile); the benchmarks turn single ones off."""

    # A cell that prints exactly one solution-shaped JSON object is handed in as the program (after the fresh
    # check, when that is on): a weak model prints its solution and never calls submit.
    auto_submit: bool = True
    resample_repeats: int = 1  # re-ask a reply identical to an earlier one (core.small_model)
    forget_repeats: bool = True  # a call sent a third time is not run and leaves the context (core.small_model)
    explain_length_cut: bool = True  # a reply cut at max_tokens is told so (core.small_model)
    cut_output_blocks: bool = True  # a made-up ```output block ends the reply (core.small_model)

    def policy(self, bound: CPAgentTools) -> CPSmallModelPolicy:
        return CPSmallModelPolicy(bound, self)


class CPSmallModelPolicy(SmallModelPolicy):
    def __init__(self, bound: CPAgentTools, aids: SmallModelAids) -> None:
        super().__init__(resample_repeats=aids.resample_repeats, forget_repeats=aids.forget_repeats,
                         explain_length_cut=aids.explain_length_cut, cut_output_blocks=aids.cut_output_blocks)
        self.bound = bound
        self.auto_submit = aids.auto_submit

    def observation(self, call: Call, text: str) -> str:
        """Hands in a cell that printed a solution (raises Submitted), or says why its fresh run failed."""
        cell = self.bound.last_cell
        if self.auto_submit and call.tool.name == "python_exec" and cell and self.bound.solution_shaped(cell):
            return text + self.bound.hand_in(call.arguments["code"], auto=True)
        return text


def apply_profile(config: CPAgentConfig, profile: str) -> CPAgentConfig:
    """`default`: nothing added. `small-model`: every aid above, and the kernel starts with the imports
    the model needs (a weak model forgets `import cpmpy as cp`, then takes the NameError for a missing package)."""
    if profile not in PROFILES:
        raise UserError(f"unknown profile {profile!r}; use one of: {', '.join(PROFILES)}")
    if profile == "small-model":
        config.small_model = SmallModelAids()
        config.kernel_preamble = config.kernel_preamble or PRELOAD_IMPORTS
    return config

