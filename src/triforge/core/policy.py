"""The hooks through which an opt-in policy changes the agent loop (`triforge.core.react.Agent(policy=...)`).

The loop itself knows no model's habits; a policy such as `triforge.core.small_model_policy.SmallModelPolicy` adds
them for the models that need them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from triforge.core.errors import FormatError
from triforge.core.llm import Completion
from triforge.core.tools import Call, ToolSet


class LoopPolicy:
    """The hooks through which an opt-in policy changes the loop; each default leaves the loop as it is.

    A policy object serves one run at a time (`start` resets it). Hooks, in the order the loop calls them:

    * `stop_strings()`: extra markers of a result the model writes itself (text protocol only): sent as
      stop strings, and the reply is cut there on the client too.
    * `choose(comp, ask)`: the reply to act on; `ask(temperature, offset)` asks the model again at
      `temperature` with sample index `AgentConfig.sample + offset` (offsets keep re-asks apart in the cache).
    * `recover(comp, tools, error)`: calls read from a reply the protocol refused (`error`), or None: the
      reply stays a format error.
    * `format_error(error, comp, limit)`: the message for a malformed reply, or None for the loop's own.
    * `before_calls(messages, calls)`: False when the policy answered the step itself instead of running
      the calls (it may then edit `messages`, but must never report a result that was not observed).
    * `observation(call, text)`: the tool result as the model reads it (notes may be added; a result that
      was not observed never is).
    * `after_step(messages, first)`: the step's messages are `messages[first:]`.
    * `counts()`: counters for the run's summary.
    """

    def start(self) -> None:
        pass

    def stop_strings(self) -> tuple[str, ...]:
        return ()

    def choose(self, comp: Completion, ask: Callable[[float | None, int], Completion]) -> Completion:
        return comp

    def recover(self, comp: Completion, tools: ToolSet, error: FormatError) -> list[Call] | None:
        return None

    def format_error(self, error: FormatError, comp: Completion, limit: int | None) -> str | None:
        return None

    def before_calls(self, messages: list[dict[str, Any]], calls: list[Call]) -> bool:
        return True

    def observation(self, call: Call, text: str) -> str:
        return text

    def after_step(self, messages: list[dict[str, Any]], first: int) -> None:
        pass

    def counts(self) -> dict[str, int]:
        return {}
