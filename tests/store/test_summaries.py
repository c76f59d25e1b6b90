"""Graph-native summaries: attached to a message, shared by the branches through it, written
once, and the read that starts after the newest one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from tests.support.counting import letters, tokens_of, user


@pytest.fixture
def sstore(backend: str, namespace: str) -> Iterator[Any]:
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    store.upsert_chat("s", "alice")
    yield store
    store.close()


def fill(store: Any, count: int, branch: str = "main", head: str | None = None) -> list[str]:
    ids = []
    for i in range(count):
        head = store.append("s", branch, [user(f"m{i}")], expected_head=head).head_message_id
        assert head is not None
        ids.append(head)
    return ids


def contents(messages: list[Any]) -> list[Any]:
    return [m["message"]["content"] for m in messages]


def test_a_read_after_the_summary_returns_it_and_the_newer_messages(sstore: Any) -> None:
    ids = fill(sstore, 6)
    written = sstore.write_summary("s", ids[3], "m0 to m3, briefly", metadata={"covered": 4})
    assert written["written"] is True
    assert written["covered_messages"] == 4
    assert written["covered_tokens"] == 4 * tokens_of(user("m0"))
    read = sstore.load_branch("s", after_summary=True)
    assert read.summary is not None
    assert read.summary["content"] == "m0 to m3, briefly"
    assert read.summary["message_id"] == ids[3]
    assert read.summary["metadata"] == {"covered": 4, "type": "context-summary"}
    summary_tokens = tokens_of({"role": "assistant", "content": "m0 to m3, briefly"})
    assert read.summary["tokens"] == summary_tokens
    assert contents(read.messages) == ["m4", "m5"]
    assert read.messages[0]["parent_id"] == ids[3]
    after = 2 * tokens_of(user("m0"))
    assert read.tokens == read.context_tokens == summary_tokens + after
    size = sstore.branch_size("s")
    assert (size.messages, size.context_tokens, size.summary_message_id) == (
        6,
        summary_tokens + after,
        ids[3],
    )
    # Without after_summary the whole chain, as ever.
    assert contents(sstore.load_branch("s").messages) == [f"m{i}" for i in range(6)]


def test_branches_after_the_message_share_it_branches_before_do_not(sstore: Any) -> None:
    ids = fill(sstore, 5)
    sstore.create_branch("s", ids[1], name="early", activate=False)
    sstore.create_branch("s", ids[3], name="late", activate=False)
    sstore.write_summary("s", ids[2], "first three")
    fill(sstore, 1, "early", ids[1])
    fill(sstore, 1, "late", ids[3])
    assert sstore.load_branch("s", "early", after_summary=True).summary is None
    late = sstore.load_branch("s", "late", after_summary=True)
    assert late.summary is not None
    assert late.summary["content"] == "first three"
    assert contents(late.messages) == ["m3", "m0"]


def test_a_summary_is_written_once(sstore: Any) -> None:
    ids = fill(sstore, 3)
    sstore.write_summary("s", ids[1], "first")
    again = sstore.write_summary("s", ids[1], "second")
    assert again["written"] is False
    assert again["summary"]["content"] == "first"
    assert sstore.load_branch("s", after_summary=True).summary["content"] == "first"


def test_a_later_summary_rolls_over_the_earlier_one(sstore: Any) -> None:
    ids = fill(sstore, 8)
    sstore.write_summary("s", ids[2], "up to m2")
    sstore.write_summary("s", ids[5], "up to m5, including the first summary")
    read = sstore.load_branch("s", after_summary=True)
    assert read.summary["content"].startswith("up to m5")
    assert contents(read.messages) == ["m6", "m7"]
    # Rewinding to a message before the newer summary resolves with the older one.
    sstore.create_branch("s", ids[4], name="rewound")
    rewound = sstore.load_branch("s", "rewound", after_summary=True)
    assert rewound.summary["content"] == "up to m2"
    assert contents(rewound.messages) == ["m3", "m4"]
    sstore.create_branch("s", ids[1], name="before-all")
    assert sstore.load_branch("s", "before-all", after_summary=True).summary is None


def test_messages_appended_while_summarizing_stay_after_the_summary(sstore: Any) -> None:
    ids = fill(sstore, 4)
    covered = ids[2]  # the summarizer read up to here ...
    more = fill(sstore, 2, head=ids[-1])  # ... while another worker appended
    sstore.write_summary("s", covered, "m0-m2")
    read = sstore.load_branch("s", after_summary=True)
    assert contents(read.messages) == ["m3", "m0", "m1"]
    assert read.branch.head_message_id == more[-1]


def test_a_window_after_a_summary_counts_the_summary(sstore: Any) -> None:
    ids = fill(sstore, 10)
    sstore.write_summary("s", ids[4], "s" * 30)
    summary_tokens = tokens_of({"role": "assistant", "content": "s" * 30})
    per = tokens_of(user("m0"))
    read = sstore.load_branch("s", after_summary=True, max_tokens=summary_tokens + 2 * per)
    assert contents(read.messages) == ["m8", "m9"]
    assert read.tokens == summary_tokens + 2 * per
    # The window never reaches behind the summary, however large.
    read = sstore.load_branch("s", after_summary=True, max_tokens=10_000)
    assert contents(read.messages) == ["m5", "m6", "m7", "m8", "m9"]


def test_bad_summaries_write_nothing(sstore: Any) -> None:
    ids = fill(sstore, 2)
    with pytest.raises(ctxstore.ValidationError):
        sstore.write_summary("s", ids[0], "   ")
    with pytest.raises(ctxstore.ValidationError):
        sstore.write_summary("s", ids[0], "text", tokens=-1)
    with pytest.raises(ctxstore.errors.MessageNotFoundError):
        sstore.write_summary("s", "no-such-message", "text")
    with pytest.raises(ctxstore.ChatNotFoundError):
        sstore.write_summary("nochat", ids[0], "text")
    assert sstore.load_branch("s", after_summary=True).summary is None


def test_deleting_a_chat_deletes_its_summaries(sstore: Any, backend: str, namespace: str) -> None:
    from tests.support.keyspace import raw_client

    ids = fill(sstore, 2)
    sstore.write_summary("s", ids[0], "one")
    assert sstore.delete_chat("s")
    client = raw_client(backend)
    keys = sstore.state.keyspace.chat("s")
    assert client.exists(keys.key("summary"), keys.key("tok")) == 0
    client.close()
