"""Strict reading of printed solutions: no data set needed."""

from __future__ import annotations

import pytest

from triforge.cpagent.output import OutputError, key_errors, parse_solution, shape_errors


def test_one_object_is_read():
    assert parse_solution('  {"x": [1, 2], "y": 3}\n') == {"x": [1, 2], "y": 3}


def test_pretty_printed_object_is_one_object():
    assert parse_solution('{\n  "x": 1\n}\n') == {"x": 1}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no output"),
        ("   \n", "no output"),
        ("hello", "no JSON object"),
        ('Solution: {"x": 1}', "wrapped"),
        ('{"x": 1}\nsolved in 0.1 s', "wrapped"),
        ('{"x": 1}\n{"x": 2}', "2 JSON objects"),
        ("[1, 2]", "list"),
        ('{"x": NaN}', "NaN"),
        ('{"x": 1, "x": 2}', "duplicate"),
        ("{'x': 1}", "no JSON object"),
    ],
)
def test_bad_outputs_are_rejected_with_a_reason(text, why):
    with pytest.raises(OutputError, match=why):
        parse_solution(text)


def test_key_errors_name_missing_and_extra_keys():
    assert key_errors({"a": 1, "c": 2}, ("a", "b")) == ["missing key(s): b", "unexpected key(s): c"]
    assert key_errors({"a": 1, "b": 2}, ("a", "b")) == []


@pytest.mark.parametrize(
    ("value", "template", "ok"),
    [
        (3, 1, True),
        (True, 1, False),  # a boolean is not an integer
        ("3", 1, False),
        (3.0, 1, False),
        (1, True, False),  # an integer is not a boolean
        ([1, 2], [5, 6], True),
        ([1, 2, 3], [5, 6], False),
        ([[1], [2, 3]], [[1, 2], [3, 4]], False),
        ([[1, 2], [3, True]], [[1, 2], [3, 4]], False),
        (None, 1, False),
    ],
)
def test_shape_errors(value, template, ok):
    assert (shape_errors(value, template, "k") == []) is ok


def test_shape_error_messages_name_what_was_found():
    assert shape_errors([None, [1]], [[1], [2]], "x") == ["x[0]: expected list, got null"]
    assert shape_errors([[1], 3], [[1], [2]], "x") == ["x[1]: expected list, got integer 3"]
