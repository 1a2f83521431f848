"""Aids for small models, as one opt-in policy on the agent loop (`--profile small-model`).

Each aid answers a failure seen in a real small model's trajectories (docs/local.md records which, and what
each one measurably changed). None of them is on unless this policy is chosen.

* `stop_strings`: a small code model may follow its code with a made-up ```output block (a notebook habit)
  and then act on it; the reply is cut there, as at the text protocol's own `<tool_response`.
* re-asking a repeated reply: at temperature 0 a small model answers the same context with the same
  reply; a reply identical to an earlier one in the run is asked for again at `resample_temperature`,
  with its own sample index (so the response cache keeps both).
* explaining a reply cut at the token limit: told only "no tool call", the model wrote the same cut
  reply again; it is told where and why its reply stopped.
* forgetting a call sent a third time: a small model copies code it can still see. The third send of
  the same calls is not run; every earlier exchange that sent them leaves the context, and one note
  says that the call was not run. The note claims nothing about results or state: in a persistent kernel
  the same code can give another result now, and a restart may have cleared what it defined.
* reading bare arguments: a model may hand in a tool's arguments alone (often in a ```json block) and,
  told to wrap them in a call, copy the error's example instead. A reply whose only JSON object has exactly
  the parameters of one tool (all its required ones, none unknown) is taken as the call to that tool; with
  two such tools it stays a format error.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from triforge.core.adapter import CODE_BLOCK
from triforge.core.errors import FormatError
from triforge.core.llm import Completion
from triforge.core.policy import LoopPolicy
from triforge.core.tools import Call, ToolSet

RESAMPLE_OFFSET = 1000  # re-asked replies use sample index: the run's sample + RESAMPLE_OFFSET * attempt
OUTPUT_BLOCK = "```output"  # the invented result block a notebook-trained model writes after its code


def bare_arguments_call(comp: Completion, tools: ToolSet) -> list[Call] | None:
    """The call to the one tool whose parameters the reply's only JSON object has (see the module's note)."""
    text = (comp.content or "").strip()
    fenced = [body for tag, body in CODE_BLOCK.findall(text) if tag in ("", "json")]
    pieces = [text] if not fenced else fenced
    if len(pieces) != 1:
        return None
    try:
        obj = json.loads(pieces[0])
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not obj or "name" in obj and "arguments" in obj:
        return None
    keys = set(obj)
    fits = [t for t in tools.tools.values()
            if keys <= set(t.args_model.model_fields)
            and {k for k, f in t.args_model.model_fields.items() if f.is_required()} <= keys]
    if len(fits) != 1:
        return None
    try:
        return [tools.make_call("bare_0", fits[0].name, obj)]
    except FormatError:
        return None


def calls_key(calls: list[Call]) -> str:
    """What makes two replies send the same calls (surrounding whitespace in string arguments aside)."""
    return json.dumps([(c.tool.name, {k: v.strip() if isinstance(v, str) else v for k, v in c.arguments.items()})
                       for c in calls], sort_keys=True, default=str)


def reply_signature(comp: Completion) -> str:
    """What makes two replies the same: the text and the tool calls, ignoring surrounding whitespace."""
    return json.dumps([(comp.content or "").strip(), [(tc.name, tc.arguments) for tc in comp.tool_calls]])


def forget_note(times: int) -> str:
    """What the model reads instead of a call it sent `times` times: that it was not run, and no result."""
    return (f"[You sent the same call {times} times. It was not run this time, and its earlier sends and their "
            "results were taken out of this conversation. Write a different call.]")


def length_cut_message(limit: int | None) -> str:
    at = f"the limit of {limit} tokens per reply" if limit else "the server's token limit"
    return (f"Format error: your reply was cut at {at} before it was complete, so nothing ran. "
            "Write shorter replies: split the work over several calls, and do not repeat data or code "
            "that an earlier call already defined.")


class SmallModelPolicy(LoopPolicy):
    def __init__(self, *, resample_repeats: int = 1, resample_temperature: float = 0.8,
                 forget_repeats: bool = True, explain_length_cut: bool = True, cut_output_blocks: bool = True,
                 read_bare_arguments: bool = False) -> None:
        self.read_bare_arguments = read_bare_arguments
        self.resample_repeats = resample_repeats
        self.resample_temperature = resample_temperature
        self.forget_repeats = forget_repeats
        self.explain_length_cut = explain_length_cut
        self.cut_output_blocks = cut_output_blocks
        self.start()

    def start(self) -> None:
        self._seen: set[str] = set()
        self._sends: Counter[str] = Counter()
        # id of each assistant message in the context -> the calls it sent; of each forget note -> its calls
        # (ids are dropped with their messages: a freed dict's id can come back for another)
        self._calls_of: dict[int, str] = {}
        self._pending: str | None = None
        self.resampled = self.forgotten = self.bare_arguments = 0

    def stop_strings(self) -> tuple[str, ...]:
        return (OUTPUT_BLOCK,) if self.cut_output_blocks else ()

    def choose(self, comp: Completion, ask: Callable[[float | None, int], Completion]) -> Completion:
        for attempt in range(1, self.resample_repeats + 1):
            if reply_signature(comp) not in self._seen:
                break
            self.resampled += 1
            comp = ask(self.resample_temperature, RESAMPLE_OFFSET * attempt)
        self._seen.add(reply_signature(comp))
        return comp

    def recover(self, comp: Completion, tools: ToolSet, error: FormatError) -> list[Call] | None:
        calls = bare_arguments_call(comp, tools) if self.read_bare_arguments else None
        self.bare_arguments += calls is not None
        return calls

    def format_error(self, error: FormatError, comp: Completion, limit: int | None) -> str | None:
        if self.explain_length_cut and comp.finish_reason == "length":
            return length_cut_message(limit)
        return None

    def before_calls(self, messages: list[dict[str, Any]], calls: list[Call]) -> bool:
        key = calls_key(calls)
        self._sends[key] += 1
        self._pending = key
        if not (self.forget_repeats and self._sends[key] >= 3):
            return True
        self._forget(messages, key)
        return False

    def after_step(self, messages: list[dict[str, Any]], first: int) -> None:
        if self._pending is not None and first < len(messages) and messages[first]["role"] == "assistant":
            self._calls_of[id(messages[first])] = self._pending
        self._pending = None

    def _forget(self, messages: list[dict[str, Any]], key: str) -> None:
        """Take every exchange that sent the calls `key` out of the context, and an earlier note for them;
        one note at the end says how often they were sent and that this send was not run."""
        kept: list[dict[str, Any]] = []
        dropping = False
        for m in messages:
            calls = self._calls_of.get(id(m))
            if m["role"] == "assistant" or calls is not None:  # a reply starts an exchange, a note is one alone
                dropping = calls == key
            if dropping:
                self._calls_of.pop(id(m), None)
            else:
                kept.append(m)
        messages[:] = kept
        self.forgotten += 1
        note = {"role": "user", "content": forget_note(self._sends[key])}
        self._calls_of[id(note)] = key
        messages.append(note)
        self._pending = None

    def counts(self) -> dict[str, int]:
        return {"resampled": self.resampled, "forgotten": self.forgotten, "bare_arguments": self.bare_arguments}
