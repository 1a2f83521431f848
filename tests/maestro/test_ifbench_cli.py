"""`triforge maestro score` (mounted from triforge.cli.maestro_score) through typer's CliRunner."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from triforge.cli.maestro_score import score
from triforge.core.errors import UserError
from triforge.data import get, read_text

ROWS = [
    {
        "key": 1,
        "prompt": "List two fruits.",
        "instruction_id_list": ["format:list"],
        "kwargs": [{"sep": "SEP", "N": None}],
    },
    {
        "key": 2,
        "prompt": "Answer yes or no.",
        "instruction_id_list": ["format:options", "format:no_whitespace"],
        "kwargs": [{"options": "yes/no/maybe"}, {}],
    },
]


@pytest.fixture()
def app():
    a = typer.Typer()
    a.command("score")(score)

    @a.command("noop")
    def _noop() -> None:  # a second command keeps "score" as a named subcommand
        pass

    return a


@pytest.fixture()
def data(tmp_path):
    p = tmp_path / "IFBench_test.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return p


def _responses(tmp_path, lines):
    p = tmp_path / "responses.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _run(app, *args):
    return CliRunner().invoke(app, ["score", *args])


def test_scores_each_response_as_one_json_line(app, data, tmp_path):
    resp = _responses(
        tmp_path,
        [
            json.dumps({"prompt": "List two fruits.", "response": "SEP apple\nSEP pear"}),
            "",
            json.dumps({"prompt": " Answer yes or no. ", "response": "Sure:\nyes"}),
        ],
    )
    result = _run(app, "--bench", "ifbench", "--responses", str(resp), "--data", str(data))
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.output.splitlines()]
    assert [o["instruction_id_list"] for o in out] == [
        ["format:list"],
        ["format:options", "format:no_whitespace"],
    ]
    assert out[0]["follow_instruction_list"] == [True]
    assert out[1]["follow_instruction_list"] == [False, False]
    assert out[1]["follow_all_instructions"] is False

    loose = _run(app, "--bench", "ifbench", "--responses", str(resp), "--data", str(data), "--mode", "loose")
    assert loose.exit_code == 0, loose.output
    assert json.loads(loose.output.splitlines()[1])["follow_instruction_list"] == [True, True]


def test_data_from_environment(app, data, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIFORGE_IFBENCH", str(data.parent))
    resp = _responses(tmp_path, [json.dumps({"prompt": "List two fruits.", "response": "x"})])
    result = _run(app, "--bench", "ifbench", "--responses", str(resp))
    assert result.exit_code == 0 and json.loads(result.output)["follow_instruction_list"] == [False]


@pytest.mark.parametrize(
    "lines, needle",
    [
        (['{"prompt": "List two fruits.", "response": "x"}', "{not json"], ":2:"),
        (['{"prompt": "Unknown prompt", "response": "x"}'], ":1: prompt not found"),
        (['{"prompt": "List two fruits."}'], ":1: needs string fields"),
        (["[1, 2]"], ":1: expected a JSON object"),
    ],
)
def test_bad_lines_are_one_line_user_errors_naming_the_line(app, data, tmp_path, lines, needle):
    resp = _responses(tmp_path, lines)
    result = _run(app, "--bench", "ifbench", "--responses", str(resp), "--data", str(data))
    assert isinstance(result.exception, UserError)
    assert needle in str(result.exception) and "\n" not in str(result.exception)
    assert result.output == ""  # nothing printed before the error


def test_unknown_instruction_in_data_is_a_user_error(app, tmp_path):
    data = tmp_path / "IFBench_test.jsonl"
    row = {"key": 9, "prompt": "P", "instruction_id_list": ["made:up"], "kwargs": [{}]}
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    resp = _responses(tmp_path, [json.dumps({"prompt": "P", "response": "x"})])
    result = _run(app, "--bench", "ifbench", "--responses", str(resp), "--data", str(data))
    assert isinstance(result.exception, UserError) and "made:up" in str(result.exception)


def test_missing_files_unknown_bench_and_bad_mode(app, data, tmp_path):
    resp = _responses(tmp_path, [json.dumps({"prompt": "List two fruits.", "response": "x"})])
    cases = [
        ["--bench", "ifbench", "--responses", str(tmp_path / "missing.jsonl"), "--data", str(data)],
        ["--bench", "ifbench", "--responses", str(resp), "--data", str(tmp_path / "nodata")],
        ["--bench", "hotpotqa", "--responses", str(resp), "--data", str(data)],
        ["--bench", "ifbench", "--responses", str(resp), "--data", str(data), "--mode", "lenient"],
    ]
    for args in cases:
        result = _run(app, *args)
        assert isinstance(result.exception, UserError), (args, result.output)
        assert "\n" not in str(result.exception)


@pytest.mark.parametrize("data", [[], ["--data", "ifbench"]], ids=["bundled-default", "by-name"])
def test_scoring_the_official_sample_file_reproduces_its_verdicts(app, tmp_path, data):
    sample = tmp_path / "sample_verdicts.jsonl"  # the bundled file, uncompressed, as a user's responses file
    sample.write_text(read_text(get("ifbench").path("verdicts")), encoding="utf-8")
    official = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
    for mode in ("strict", "loose"):
        result = _run(app, "--bench", "ifbench", "--responses", str(sample), *data, "--mode", mode)
        assert result.exit_code == 0, result.output
        ours = [json.loads(line) for line in result.output.splitlines()]
        assert len(ours) == len(official)
        pairs = [
            (a, b)
            for o, r in zip(ours, official, strict=True)
            for a, b in zip(o["follow_instruction_list"], r[mode], strict=True)
        ]
        agreement = sum(a == b for a, b in pairs) / len(pairs)
        assert agreement >= 0.98
