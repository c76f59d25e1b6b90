"""The portable form's values and lines: what JSON holds exactly goes as JSON, the rest as
msgpack; every record is one line for any line splitter."""

from __future__ import annotations

import json
import math
from typing import Any

import msgpack
import pytest

from ctxstore._core.format.portable import (
    MAX_JSON_DEPTH,
    MISSING,
    dumps_line,
    json_exact,
    loads_line,
    put_value,
    take_value,
)
from ctxstore.errors import ValidationError


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        {"role": "user", "content": "caf\u00e9\nline two", "n": 2**64 - 1, "f": -0.0},
        {"a": [1, 2.5, True, None, {"b": "c"}]},
        nested(MAX_JSON_DEPTH),
    ],
)
def test_values_json_holds_exactly_go_as_json(value: Any) -> None:
    assert json_exact(value)
    record: dict[str, Any] = {}
    put_value(record, "message", value)
    assert list(record) == ["message"]
    back = json.loads(dumps_line(record))["message"]
    assert msgpack.packb(back, use_bin_type=True) == msgpack.packb(value, use_bin_type=True)


@pytest.mark.parametrize(
    "value",
    [
        {"raw": b"\x00\xff"},
        {"nan": math.nan},
        {"inf": [math.inf]},
        {"inner": {1: "int key"}},
        nested(MAX_JSON_DEPTH + 1),
    ],
)
def test_other_values_go_as_msgpack_and_come_back_as_the_same_bytes(value: Any) -> None:
    assert not json_exact(value)
    record: dict[str, Any] = {}
    put_value(record, "message", value)
    assert list(record) == ["message_msgpack"]
    back = take_value(json.loads(dumps_line(record)), "message", "record 2", required=True)
    assert msgpack.packb(back, use_bin_type=True) == msgpack.packb(value, use_bin_type=True)


def test_taking_a_value_refuses_both_forms_bad_base64_and_reports_a_missing_one() -> None:
    with pytest.raises(ValidationError, match="record 3 has both"):
        take_value(
            {"metadata": {}, "metadata_msgpack": "gA=="}, "metadata", "record 3", required=False
        )
    with pytest.raises(ValidationError, match="record 3 'metadata_msgpack' is not base64"):
        take_value({"metadata_msgpack": "%%"}, "metadata", "record 3", required=False)
    with pytest.raises(ValidationError, match="not a msgpack value"):
        take_value({"metadata_msgpack": "wQ=="}, "metadata", "record 3", required=False)
    with pytest.raises(ValidationError, match="record 3 has no 'message'"):
        take_value({}, "message", "record 3", required=True)
    assert take_value({}, "metadata", "record 3", required=False) is MISSING


def test_a_line_is_one_line_whatever_the_text_holds() -> None:
    text = "a\nb\r\nc\u2028d\u2029e\x85f\x0bg\x1ch \u00e9\u2600"
    line = dumps_line({"type": "message", "message": {"role": "user", "content": text}})
    assert line.endswith("\n")
    assert line[:-1].splitlines() == [line[:-1]]
    assert loads_line(line.encode("utf-8"), 1)["message"]["content"] == text
    assert "\u00e9\u2600" in line  # UTF-8, not escaped


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"{not json", "record 7 is not a JSON object"),
        (b"[1, 2]", "record 7 is not a JSON object"),
        (b"\xff\xfe", "record 7 is not a JSON object"),
        (b'{"x": NaN}', "record 7 is not a JSON object"),
        (b"", "record 7 is not a JSON object"),
    ],
)
def test_a_line_that_is_no_json_object_is_refused_by_number(line: bytes, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        loads_line(line, 7)
