"""A simulated test bed for maestro's search mechanics: six tasks, each with one planted structural defect.

It is a test bed for the algorithm, never a benchmark: the task model (`SimLM`) follows fixed rules,
and `SimReflection` (in `sim_reflection`) is a scripted stand-in for the reflection model.

How `SimLM` answers one `llm` node (it reads the node's instruction, its input blocks and its output
fields from the request, exactly as a real endpoint receives them):

* context window: when the inputs exceed `CONTEXT_CHARS` characters, the reply is a truncation notice
  with no fields (the node fails to parse);
* `entity`: the name after "directed by" in the inputs;  `unit`: the unit named in "in <unit>" of the
  question;  `kind`: "math" when the question holds "N times M" or "N plus M", else "lookup";
  `notes`: the first sentence of the question (facts kept, the request dropped);  `done`: always false;
* `query`: the `entity` input when the node has one, else the question verbatim;
* `answer` (and any other field), first rule that applies:
  a `result` input, verbatim; arithmetic ("N plus M" exactly, "N times M" off by a multiple of 10 when
  the product exceeds 1000), unless the instruction mentions "fact"; "X is N kilometers long": N
  kilometers, converted only when a `unit` input names miles or meters; "P was born in C" where P is
  the director named in the inputs: C; "capital of X is Y": Y, upper-cased when the question asks for
  uppercase and either a `problem` input is present or the example is one of the 30 % the model gets
  right unprompted; otherwise "unknown". Unless the instruction contains "only" or "short", the answer
  is wrapped as "The answer is ...".
* the metric scores an exact answer 1, the right answer wrapped in extra words 0.5, anything else 0,
  and its feedback names the cause the task planted (as a benchmark's own feedback does).
* demos, the model alias and the temperature change nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from triforge.core.config import ModelConfig
from triforge.core.llm import Completion, Usage
from triforge.maestro.benchmarks.base import Example, MetricResult
from triforge.maestro.interpreter import ProgramRun
from triforge.maestro.nodes import Cond
from triforge.maestro.program import Program, ProgramBuilder

CONTEXT_CHARS = 1400
_BLOCK = re.compile(r"<(\w+)>\n(.*?)\n</\1>", re.S)


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _parse_request(messages: list[dict[str, Any]]) -> tuple[str, dict[str, str], list[tuple[str, str]], bool]:
    system = str(messages[0]["content"])
    instruction = system.split("\n\nInputs:")[0]
    outs_part = system.split("Outputs:\n", 1)[1].split("\n\n", 1)[0]
    outputs = [(m.group(1), m.group(2)) for m in re.finditer(r"^- (\w+) \(([^)]+)\)", outs_part, re.M)]
    inputs = {m.group(1): m.group(2) for m in _BLOCK.finditer(str(messages[-1]["content"]))}
    return instruction, inputs, outputs, "Reply with one JSON object" in system


def _arith(q: str) -> tuple[int, int, str] | None:
    m = re.search(r"(\d+) (plus|times) (\d+)", q)
    return (int(m.group(1)), int(m.group(3)), m.group(2)) if m else None


def _answer(instruction: str, inp: dict[str, str]) -> str:
    text = "\n".join(inp.values())
    question = inp.get("question", "")
    low = instruction.lower()
    if inp.get("result", "").strip():
        return inp["result"].strip()
    ar = _arith(question)
    if ar and "fact" not in low:
        a, b, op = ar
        if op == "plus":
            return str(a + b)
        return str(a * b + (10 * (a % 7 + 1) if a * b > 1000 else 0))
    if "comput" in low or "arithmetic" in low:
        return "unknown"
    km = re.search(r"is (\d+) kilometers long", text)
    if km:
        n, unit = int(km.group(1)), inp.get("unit", "").strip().lower()
        if unit == "miles":
            return f"{round(n * 0.621371)} miles"
        if unit == "meters":
            return f"{n * 1000} meters"
        return f"{n} kilometers"
    director = re.search(r"directed by ([A-Z]\w+ [A-Z]\w+)", text)
    if director:
        born = re.search(re.escape(director.group(1)) + r" was born in ([A-Z]\w+)", text)
        return born.group(1) if born else "unknown"
    cap = re.search(r"capital of \w+ is ([A-Z]\w+)", text)
    if cap:
        y = cap.group(1)
        if "uppercase" in question and ("problem" in inp or _h(question) % 10 < 3):
            return y.upper()
        return y
    return "unknown"


def sim_reply(instruction: str, inp: dict[str, str], outputs: list[tuple[str, str]]) -> dict[str, Any] | None:
    if sum(len(v) for v in inp.values()) > CONTEXT_CHARS:
        return None
    question = inp.get("question", "")
    low = instruction.lower()
    out: dict[str, Any] = {}
    for name, type_ in outputs:
        if name == "entity":
            m = re.search(r"directed by ([A-Z]\w+ [A-Z]\w+)", "\n".join(inp.values()))
            out[name] = m.group(1) if m else ""
        elif name == "unit":
            m = re.search(r"\bin (miles|meters|kilometers)\b", question)
            out[name] = m.group(1) if m else ""
        elif name == "kind":
            out[name] = "math" if _arith(question) else "lookup"
        elif name == "notes":
            out[name] = question.split(". ")[0] + "."
        elif name == "query":
            out[name] = inp["entity"] if inp.get("entity", "").strip() else question
        elif type_ == "bool":
            out[name] = False
        elif name == "reasoning":
            out[name] = "I read the inputs."
        elif name == "thoughts":
            out[name] = "More material may help: " + question
        else:
            ans = _answer(instruction, inp)
            out[name] = ans if ("only" in low or "short" in low) else f"The answer is {ans}."
    return out


class SimLM:
    """The simulated task model: an in-process LLM following the rules in this module's docstring."""

    def __init__(self, alias: str = "sim", price_in_per_mtok: float = 0.0, price_out_per_mtok: float = 0.0) -> None:
        self.alias = alias
        self.config = ModelConfig(model="sim", base_url="sim://", price_in_per_mtok=price_in_per_mtok,
                                  price_out_per_mtok=price_out_per_mtok)
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        self.calls += 1
        instruction, inp, outputs, as_json = _parse_request(messages)
        values = sim_reply(instruction, inp, outputs)
        if values is None:
            size = sum(len(v) for v in inp.values())
            content = f"<<context overflow: the input was {size} characters, over the {CONTEXT_CHARS}-character window>>"
        elif as_json:
            content = json.dumps(values)
        else:
            content = "\n".join(f"<{k}>\n{v}\n</{k}>" for k, v in values.items())
        n_in = sum(len(str(m.get("content", ""))) for m in messages) // 4
        return Completion(content=content, usage=Usage(n_in, len(content) // 4), model="sim", finish_reason="stop")


# --- tools and validators the edit library may use -------------------------------------------------
def calculator(text: str) -> str:
    """The exact result of the first "N plus M" or "N times M" in the text ('' when there is none)."""
    ar = _arith(text)
    if ar is None:
        return ""
    a, b, op = ar
    return str(a + b if op == "plus" else a * b)


def word_count(text: str) -> int:
    """How many words the text has."""
    return len(text.split())


def check_uppercase(answer: str) -> tuple[bool, str]:
    """The answer must be written in uppercase letters."""
    ok = answer == answer.upper()
    return ok, "" if ok else f"the answer {answer!r} must be written in uppercase letters"


TOOLS = {"triforge.maestro.sim_bed:calculator": "calculator(text) -> exact arithmetic result",
         "triforge.maestro.sim_bed:word_count": "word_count(text) -> number of words"}
VALIDATORS = {"triforge.maestro.sim_bed:check_uppercase": "check_uppercase(answer): the answer is in uppercase"}


class SimRetriever:
    """Word overlap with the text plus with the title; ties go to the earlier document."""

    STOP = {"the", "of", "a", "is", "was", "in", "where", "what", "who", "by", "to", "it", "film"}

    def __init__(self, docs: list[tuple[str, str]]) -> None:
        self.docs = docs

    def search(self, query: str, k: int) -> list[tuple[str, str]]:
        words = set(re.findall(r"\w+", query.lower())) - self.STOP
        def overlap(doc: tuple[str, str]) -> int:  # words of the text, and again those of the title
            return sum(len(words & set(re.findall(r"\w+", part.lower()))) for part in (doc[1], doc[0]))

        scored = sorted(enumerate(self.docs), key=lambda d: (-overlap(d[1]), d[0]))
        return [doc for _, doc in scored[:k]]


# --- the six tasks ----------------------------------------------------------------------------------
_SYL = ["ka", "lo", "mir", "ten", "sar", "vol", "dun", "rei", "pa", "zu", "bel", "nor"]


def _name(i: int, salt: int) -> str:
    a, b = _SYL[(i * 5 + salt) % 12], _SYL[(i * 7 + salt * 3 + 1) % 12]
    return (a + b).capitalize()


@dataclass
class SimTask:
    name: str
    defect: str
    program: Program
    examples: list[Example]
    docs: list[tuple[str, str]] = field(default_factory=list)

    def split(self, name: str) -> list[Example]:
        n = len(self.examples)
        return {"train": self.examples[: n // 2], "val": self.examples[n // 2: 3 * n // 4],
                "test": self.examples[3 * n // 4:]}[name]

    def retrievers(self) -> dict[str, SimRetriever]:
        return {"default": SimRetriever(self.docs)}

    def metric(self, example: Example, run: ProgramRun) -> MetricResult:
        got, gold = str(run.outputs.get("answer", "")).strip(), str(example.gold["answer"])
        if got == gold:
            return MetricResult(1.0, f"Correct: {gold!r}.")
        bare = re.sub(r"^The answer is (.*)\.$", r"\1", got)
        notes = [f"Wrong answer {got!r}; the gold answer is {gold!r}."]
        if bare != got:
            notes.append("The answer has extra words around it; it must be the bare answer.")
        notes += _explain(self.defect, bare, gold)
        return MetricResult(0.5 if bare == gold else 0.0, " ".join(notes))


def _explain(defect: str, bare: str, gold: str) -> list[str]:
    if bare == gold:
        return []
    if defect == "validator" and bare.upper() == gold:
        return ["The answer must be written in uppercase letters as the question asks."]
    if defect == "calculator" and bare.isdigit():
        return ["The arithmetic is wrong: the model multiplied large numbers incorrectly."]
    if defect == "state_field" and "kilometers" in bare:
        return [f"The answer uses the wrong unit: the question asks for {gold.split()[-1]}, and the module "
                "that answers never saw the requested unit."]
    if defect == "bridge":
        return ["The passage that states where the person was born was never retrieved."]
    return []


def _examples(prefix: str, items: list[tuple[dict[str, Any], str]]) -> list[Example]:
    return [Example(f"{prefix}-{i:02d}", inputs, {"answer": gold}) for i, (inputs, gold) in enumerate(items)]


def bridge_task(n: int = 24) -> SimTask:
    docs, items = [], []
    for i in range(n):
        film, person, city = f"{_name(i, 1)} {_name(i, 2)}", f"{_name(i, 3)} {_name(i, 4)}", _name(i, 5) + "ton"
        film, person = f"{film} {i}", f"{person.split()[0]} {person.split()[1]}{_SYL[i % 12]}"
        docs += [(film, f"{film} is a film directed by {person}."), (person, f"{person} was born in {city}.")]
        items.append(({"question": f"Where was the director of the film {film} born?"}, city))
    b = ProgramBuilder("sim_bridge", inputs=["question"], outputs=["answer"])
    b.retrieve("hop1", query="question", passages="passages_1", k=1)
    b.llm("create_query", inputs={"question": "question", "passages": "passages_1"}, outputs=["query"],
          instruction="Write a search query for the missing information.")
    b.retrieve("hop2", query="query", passages="passages_2", k=1)
    b.llm("answer", inputs=["question", "passages_1", "passages_2"], outputs=["answer"],
          instruction="Answer with only the short answer.")
    return SimTask("bridge", "bridge", b.build(), _examples("bridge", items), docs)


def validator_task(n: int = 24) -> SimTask:
    items = []
    for i in range(n):
        country, capital = _name(i, 6) + "land", _name(i, 7) + "burg"
        items.append(({"question": f"The capital of {country} is {capital}. Write the capital of {country} in "
                                   f"uppercase letters."}, capital.upper()))
    b = ProgramBuilder("sim_validator", inputs=["question"], outputs=["answer"])
    b.llm("answer", inputs=["question"], outputs=["answer"], instruction="Answer with only the short answer.")
    return SimTask("validator", "validator", b.build(), _examples("upper", items))


def state_field_task(n: int = 24) -> SimTask:
    items = []
    for i in range(n):
        km, unit = 40 + 13 * i, ("miles", "meters")[i % 2]
        gold = f"{round(km * 0.621371)} miles" if unit == "miles" else f"{km * 1000} meters"
        items.append(({"question": f"The road from {_name(i, 8)} to {_name(i, 9)} is {km} kilometers long. How "
                                   f"long is it in {unit}?"}, gold))
    b = ProgramBuilder("sim_state_field", inputs=["question"], outputs=["answer"])
    b.llm("summarize", inputs=["question"], outputs=["notes"], instruction="Write down the facts.")
    b.llm("answer", inputs=["notes"], outputs=["answer"], instruction="Answer the question from the notes.")
    return SimTask("state_field", "state_field", b.build(), _examples("road", items))


def calculator_task(n: int = 24) -> SimTask:
    items = [({"question": f"What is {120 + 37 * i} times {23 + i}?"}, str((120 + 37 * i) * (23 + i))) for i in range(n)]
    b = ProgramBuilder("sim_calculator", inputs=["question"], outputs=["answer"])
    b.llm("answer", inputs=["question"], outputs=["answer"], instruction="Answer the question.")
    return SimTask("calculator", "calculator", b.build(), _examples("calc", items))


def routing_task(n: int = 24) -> SimTask:
    items = []
    for i in range(n):
        if i % 2:
            items.append(({"question": f"What is {3 + i} plus {40 + 2 * i}?"}, str(43 + 3 * i)))
        else:
            country, capital = _name(i, 10) + "ia", _name(i, 11) + "grad"
            items.append(({"question": f"The capital of {country} is {capital}. What is the capital of {country}?"},
                          capital))
    b = ProgramBuilder("sim_routing", inputs=["question"], outputs=["answer"])
    b.llm("classify", inputs=["question"], outputs=["kind"], instruction="Say whether this is math or lookup.")
    b.router("route")
    b.llm("math_answer", inputs=["question"], outputs=["answer"], after=None,
          instruction="Compute the arithmetic result; reply with only the number.")
    b.llm("fact_answer", inputs=["question"], outputs=["answer"], after=None,
          instruction="Answer from the facts given; reply with only the short answer.")
    b.edge("route", "fact_answer", Cond("kind", "eq", "math"))  # the planted defect: the branches are swapped
    b.edge("route", "math_answer", Cond("kind", "eq", "lookup"))
    return SimTask("routing", "routing", b.build(), _examples("route", items))


def overflow_task(n: int = 24) -> SimTask:
    docs, items = [], []
    for i in range(n):
        country, capital = _name(i, 2) + "stan", _name(i, 4) + "ville"
        docs.append((country, f"The capital of {country} is {capital}. " + "It has old streets and markets. " * 3))
        items.append(({"question": f"What is the capital of {country}?"}, capital))
    b = ProgramBuilder("sim_overflow", inputs=["question"], outputs=["answer"], max_steps=120)
    b.retrieve("search", query="question", passages="passages", k=2)
    b.llm("reason", inputs=["question", "passages"], outputs=["thoughts", "done"], max_visits=40,
          instruction="Think about whether the passages suffice.")
    b.field("done", "bool")
    b.code("expand", "triforge.maestro.sim_bed:expand", inputs=["passages", "thoughts"], outputs=["passages"],
           max_visits=40, after=None)
    b.llm("answer", inputs=["question", "passages"], outputs=["answer"], after=None,
          instruction="Answer with only the short answer.")
    b.edges.insert(1, b.edges.pop())  # keep order: search -> reason, then the conditional exits
    b.edge("reason", "answer", Cond("done", "truthy")).edge("reason", "expand").edge("expand", "reason")
    return SimTask("overflow", "overflow", b.build(), _examples("loop", items), docs)


def expand(passages: list[str], thoughts: str) -> list[str]:
    """Appends the latest thoughts to the material (the loop that grows the context without bound)."""
    return [*passages, thoughts + " " + "(notes) " * 20]


def sim_tasks() -> list[SimTask]:
    return [bridge_task(), validator_task(), state_field_task(), calculator_task(), routing_task(), overflow_task()]
