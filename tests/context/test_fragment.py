"""The Fragment type, copying, and materializing lazy data."""

from __future__ import annotations

import asyncio
import datetime
import enum
import uuid
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

import pytest

from ctxstore import Fragment, ValidationError
from ctxstore.prompt import fragment
from ctxstore.prompt.fragment import amaterialize, copy_fragment, is_lazy, materialize


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": ""},
        {"name": "  "},
        {"name": 3},
        {"name": "x", "kind": "note"},
        {"name": "x", "id": ""},
    ],
)
def test_bad_fragments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Fragment(**kwargs)


def test_fragment_helper_makes_a_list_of_children() -> None:
    built = fragment("rules", "a", Fragment("hint", "b"))
    assert built == Fragment("rules", ["a", Fragment("hint", "b")])
    assert not built.is_message
    assert Fragment("user", {"role": "user"}, id="m", kind="message").is_message


def test_copy_is_deep_for_plain_data_and_shares_lazy_values() -> None:
    producer = lambda: "lazy"  # noqa: E731
    source = Fragment("f", {"items": [1, {"n": 2}], "later": producer}, metadata={"k": [1]})
    copied = copy_fragment(source)
    source.data["items"][1]["n"] = 99
    source.metadata["k"].append(2)  # type: ignore[index]
    assert copied.data["items"] == [1, {"n": 2}]
    assert copied.metadata == {"k": [1]}
    assert copied.data["later"] is producer


def test_materialize_resolves_every_kind_of_lazy_value() -> None:
    async def coroutine_function() -> str:
        return "from coroutine"

    async def agen() -> AsyncIterator[int]:
        yield 1
        yield 2

    def gen() -> Iterator[str]:
        yield "x"

    def nested() -> Any:
        return lambda: ["deep", gen()]

    source = Fragment(
        "f",
        {
            "call": lambda: "called",
            "coro_fn": coroutine_function,
            "agen": agen(),
            "gen": gen(),
            "nested": nested,
            "child": Fragment("c", lambda: {"k": (1, 2)}),
        },
    )
    result = materialize(source)
    assert result.data == {
        "call": "called",
        "coro_fn": "from coroutine",
        "agen": [1, 2],
        "gen": ["x"],
        "nested": ["deep", ["x"]],
        "child": Fragment("c", {"k": [1, 2]}),
    }
    assert not any(is_lazy(value) for value in result.data.values())


def test_amaterialize_awaits_on_the_running_loop() -> None:
    async def value() -> str:
        await asyncio.sleep(0)
        return "awaited"

    async def main() -> Fragment:
        return await amaterialize(Fragment("f", [value, value()]))

    assert asyncio.run(main()).data == ["awaited", "awaited"]


def test_sync_materialize_inside_a_running_loop_cannot_await() -> None:
    async def value() -> str:
        return "never"

    async def main() -> None:
        with pytest.raises(ValidationError, match="AsyncContextEngine"):
            materialize(Fragment("f", value))

    asyncio.run(main())


class Color(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Color.RED, "red"),
        (datetime.date(2026, 11, 22), "2026-11-22"),
        (datetime.datetime(2026, 11, 22, 8, 30), "2026-11-22T08:30:00"),
        (Decimal("1.50"), "1.50"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (PurePosixPath("/a/b"), "/a/b"),
    ],
)
def test_common_values_get_their_text_form(value: object, expected: str) -> None:
    assert materialize(Fragment("f", value)).data == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({1: "x"}, "keys must be strings"),
        (object(), "not supported"),
        ({"s": {1, 2}}, "not supported"),
    ],
)
def test_unsupported_data_is_a_clear_error(data: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        materialize(Fragment("f", data))


def test_lazy_data_that_never_settles_is_refused() -> None:
    def forever() -> Any:
        return forever

    with pytest.raises(ValidationError, match="kept returning lazy data"):
        materialize(Fragment("f", forever))
