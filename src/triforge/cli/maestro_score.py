"""`triforge maestro score`: score existing responses with a benchmark's offline checkers.

The function below is plain; the CLI mounts it with `app.command("score")(score)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from triforge.core.errors import UserError

BENCHES = ("ifbench",)


def _read_responses(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line number, prompt, response) for every non-blank JSONL line of `path`."""
    if not path.is_file():
        raise UserError(f"responses file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read responses file {path}: {exc}") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{lineno}: expected a JSON object with 'prompt' and 'response'")
        prompt, response = row.get("prompt"), row.get("response")
        if not isinstance(prompt, str) or not isinstance(response, str):
            raise UserError(f"{path}:{lineno}: needs string fields 'prompt' and 'response'")
        yield lineno, prompt, response


def score_ifbench_file(
    responses: Path, mode: str = "strict", data: str | Path | None = None
) -> list[dict[str, Any]]:
    """Score every response of a JSONL file; one official-style output record each."""
    from triforge.maestro.benchmarks.ifbench import CHECKERS, load_ifbench, score_response
    from triforge.maestro.benchmarks.ifbench.loader import PromptIndex

    if mode not in ("strict", "loose"):
        raise UserError(f"--mode must be strict or loose, not {mode!r}")
    index = PromptIndex(load_ifbench(data))
    out: list[dict[str, Any]] = []
    for lineno, prompt, response in _read_responses(responses):
        example = index.lookup(prompt)
        if example is None:
            raise UserError(f"{responses}:{lineno}: prompt not found in the IFBench file: {prompt[:60]!r}")
        unknown = [i for i in example.instruction_id_list if i not in CHECKERS]
        if unknown:
            raise UserError(f"{responses}:{lineno}: no checker for instruction(s) {', '.join(unknown)}")
        verdicts = score_response(example, response, mode)
        out.append(
            {
                "key": example.id,
                "prompt": prompt,
                "response": response,
                "instruction_id_list": example.instruction_id_list,
                "follow_instruction_list": verdicts,
                "follow_all_instructions": all(verdicts),
            }
        )
    return out


def score(
    bench: str = typer.Option(..., "--bench", help="Benchmark whose checkers to use: ifbench."),
    responses: Path = typer.Option(
        ..., "--responses", help="JSONL file, one {prompt, response} object per line."
    ),
    mode: str = typer.Option("strict", "--mode", help="strict, or loose (also tries trimmed variants)."),
    data: str = typer.Option(
        None,
        "--data",
        help="A data set name or a data file or folder (default: $TRIFORGE_IFBENCH, else the bundled ifbench).",
    ),
) -> None:
    """Score existing responses; print one JSON line per response with its per-instruction verdicts."""
    if bench != "ifbench":
        raise UserError(f"unknown benchmark {bench!r} for scoring: use one of {', '.join(BENCHES)}")
    for record in score_ifbench_file(responses, mode=mode, data=data):
        typer.echo(json.dumps(record, ensure_ascii=False))
