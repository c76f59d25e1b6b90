"""``export_chat(..., sealed=True)``: the export holds none of the chat's text, imports back
into its namespace as the chat was, refuses any sealed value moved to another record or from
another export, and never opens once its owner is erased (``KeyUnavailableError``).

On the embedded store, a redis-server and the Cluster, through the sync and the async shell.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxstore.errors import (
    ConfigurationError,
    CorruptionError,
    KeyUnavailableError,
    ValidationError,
)
from tests.support.sealing import fill

#: What differs between a chat and its import under another id.
_RENEWED = ("id", "created_at", "updated_at")


def comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An export's records, without what an import renews (the chat's id and times); a
    generated id of the source is the import's chosen id, the same text."""
    return [
        {k: v for k, v in r.items() if r["type"] != "chat" or k not in _RENEWED} for r in records
    ]


def test_a_sealed_export_holds_no_text_and_imports_back_as_the_chat_was(sealed: Any) -> None:
    fill(sealed)
    exported = list(sealed.export_chat("c1", sealed=True))
    assert "MARK" not in json.dumps(exported)
    assert exported[0]["sealed"]["incarnation"]
    assert "title" not in exported[0]
    assert "message" not in exported[1]
    sealed.import_chat(exported, chat_id="c2")
    assert comparable(list(sealed.export_chat("c2"))) == comparable(list(sealed.export_chat("c1")))
    scoped = sealed.for_user("alice")
    assert "MARK" not in json.dumps(list(scoped.export_chat("c1", sealed=True)))


@pytest.mark.parametrize(
    "tamper",
    [
        "swap two messages",
        "a summary's value on a message",
        "another chat's message",
        "another export's message",
    ],
)
def test_a_sealed_value_moved_does_not_open_and_nothing_is_imported(
    sealed: Any, snap: Any, tamper: str
) -> None:
    fill(sealed)
    fill(sealed, chat_id="c9")
    records = list(sealed.export_chat("c1", sealed=True))
    other = list(sealed.export_chat("c9", sealed=True))
    again = list(sealed.export_chat("c1", sealed=True))
    messages = [index for index, r in enumerate(records) if r["type"] == "message"]
    summary = next(r for r in records if r["type"] == "summary")
    one, two = messages[1], messages[2]
    if tamper == "swap two messages":
        records[one]["sealed"], records[two]["sealed"] = (
            records[two]["sealed"],
            records[one]["sealed"],
        )
    elif tamper == "a summary's value on a message":
        records[one]["sealed"] = summary["sealed"]
    elif tamper == "another chat's message":
        records[one]["sealed"] = other[one]["sealed"]
    else:  # the same chat, the same message: an export of another time (before a redaction)
        records[one]["sealed"] = again[one]["sealed"]
    before = snap()
    with pytest.raises(CorruptionError, match="does not open where it stands"):
        sealed.import_chat(records, chat_id="c2")
    assert snap() == before


def test_a_sealed_export_never_opens_once_its_owner_is_erased(sealed: Any, snap: Any) -> None:
    fill(sealed)
    exported = list(sealed.export_chat("c1", sealed=True))
    sealed.erase_user("alice")
    before = snap()
    with pytest.raises(KeyUnavailableError) as raised:
        sealed.import_chat(exported, chat_id="c2")
    assert raised.value.details["subject"] == "alice"
    assert raised.value.details["key_id"]
    assert snap() == before


def test_sealing_an_export_needs_encryption_and_so_does_opening_one(
    sealed: Any, plain: Any, snap: Any
) -> None:
    fill(sealed)
    fill(plain, chat_id="p1")
    exported = list(sealed.export_chat("c1", sealed=True))
    before = snap()
    with pytest.raises(ConfigurationError, match="encryption"):
        list(plain.export_chat("p1", sealed=True))
    with pytest.raises(ConfigurationError, match="encryption"):
        plain.import_chat(exported, chat_id="c2")
    assert snap() == before


def test_a_record_in_the_clear_in_a_sealed_export_is_refused(sealed: Any, snap: Any) -> None:
    fill(sealed)
    records = list(sealed.export_chat("c1", sealed=True))
    clear = list(sealed.export_chat("c1"))
    index = next(i for i, r in enumerate(records) if r["type"] == "message")
    records[index] = clear[index]
    before = snap()
    with pytest.raises(ValidationError, match="in the clear, in a sealed export"):
        sealed.import_chat(records, chat_id="c2")
    clear[index] = list(sealed.export_chat("c1", sealed=True))[index]
    with pytest.raises(ValidationError, match="is sealed, in an export that is not"):
        sealed.import_chat(clear, chat_id="c3")
    assert snap() == before


@pytest.mark.parametrize("tamper", ["a value in the clear beside", "cut short"])
def test_a_sealed_export_altered_in_the_clear_is_refused(
    sealed: Any, snap: Any, tamper: str
) -> None:
    fill(sealed)
    records = list(sealed.export_chat("c1", sealed=True))
    assert "counts" not in records[0]  # sealed with the title: a cut is seen
    if tamper == "a value in the clear beside":
        message = next(r for r in records if r["type"] == "message")
        message["metadata"] = {"forged": "in the clear"}
        expected = "in the clear, in a sealed export"
    else:  # the summary left out: the counts it would be edited in are sealed
        records = [r for r in records if r["type"] != "summary"]
        expected = "holds 0 summaries where its chat record says 1"
    before = snap()
    with pytest.raises(ValidationError, match=expected):
        sealed.import_chat(records, chat_id="c2")
    assert snap() == before


def test_a_sealed_export_imports_for_its_owner_only(sealed: Any, snap: Any) -> None:
    """A user's handle (or an operator's override of the owner) given another user's sealed
    export: refused, nothing opened or written; the plain export moves a chat to another user."""
    fill(sealed)
    exported = list(sealed.export_chat("c1", sealed=True))
    before = snap()
    with pytest.raises(ValidationError, match="for its owner only"):
        sealed.for_user("bob").import_chat(exported, chat_id="c2")
    with pytest.raises(ValidationError, match="for its owner only"):
        sealed.import_chat(exported, chat_id="c2", user_id="bob")
    assert snap() == before
    assert sealed.for_user("alice").import_chat(exported, chat_id="c2").user_id == "alice"
