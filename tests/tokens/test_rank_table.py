"""The compact o200k_base counter of a cold start: the same counts as tiktoken, from the table
ctxstore ships, and a store that switches to tiktoken once it has loaded in the background."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.messages import count_tokens, rank_table
from ctxstore.messages.rank_table import (
    MAX_COMPACT_CHARACTERS,
    MAX_COMPACT_PIECE_BYTES,
    O200K_PATTERN,
    RankTable,
    compact_counter,
    merged_count,
    table_bytes,
)
from ctxstore.messages.tokens import _load_encoding, message_counter

tiktoken = pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def encoding() -> object:
    found = _load_encoding("o200k_base")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def compact() -> rank_table.CompactCounter:
    counter = compact_counter()
    assert counter is not None
    return counter


def test_the_shipped_table_is_tiktokens_ranks(encoding: object) -> None:
    """Byte for byte what ``python -m ctxstore.messages.rank_table`` writes from tiktoken."""
    ranks = encoding._mergeable_ranks  # type: ignore[attr-defined]
    assert rank_table.TABLE_PATH.read_bytes() == table_bytes(ranks)
    table = RankTable.load()
    assert len(table) == len(ranks)
    for token in (b"hello", b" world", b"\x00", b"\xe6\x97\xa5", max(ranks, key=len)):
        assert table.rank(token) == ranks[token]
    assert table.rank(b"not a token at all, surely") is None


def test_the_split_pattern_is_tiktokens() -> None:
    import tiktoken_ext.openai_public as public

    assert public.o200k_base()["pat_str"] == O200K_PATTERN


CASES = [
    "",
    "hello world",
    "Plan a day in Porto.",
    "日本語のテキストです。東京は大きい都市です",
    "   spaces   and\n\n\nnewlines\r\n\t tabs",
    "def f(x):\n    return x**2  # a comment\n",
    "😀🎉 emoji 👩\u200d👩\u200d👧\u200d👦 and flags 🇵🇹",
    "1234567890 3.14159 ============ ------",
    "ÀÉÎÕÜ ñ ß ẞ İstanbul ǅ",
    "x" * 500,
    "ab" * 300,
    "Ünïcödé wörds, 'quotes', it's we'll THEY'RE",
    "\x00\x01\t\x7f control",
    "a lone surrogate \ud800 in a text",
    '{"json": [1, 2, {"nested": true}], "url": "https://example.com/a?b=c"}',
    "Ελληνικά, русский, العربية, עברית, हिन्दी, ไทย",
]


@pytest.mark.parametrize("text", CASES)
def test_it_counts_what_tiktoken_counts(
    text: str, encoding: object, compact: rank_table.CompactCounter
) -> None:
    assert compact(text) == len(encoding.encode_ordinary(text))  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_it_counts_what_tiktoken_counts_for_any_text(text: str) -> None:
    encoding = _load_encoding("o200k_base")
    counter = compact_counter()
    assert counter is not None
    assert counter(text) == len(encoding.encode_ordinary(text))


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=40))
def test_merging_a_piece_matches_tiktokens_merge(piece: bytes) -> None:
    """Byte-pair merging alone, on any bytes (what the split never hands it, too)."""
    encoding = _load_encoding("o200k_base")
    table = RankTable.load()
    assert merged_count(piece, table.rank) == len(encoding._encode_single_piece(piece))


def test_a_store_counts_with_the_table_until_tiktoken_has_loaded() -> None:
    """In a fresh process: creating the chat starts nothing, the first save counts with the
    table and the store then opens tiktoken in the background and counts with it; the counts
    stored are tiktoken's either way."""
    code = textwrap.dedent(
        """
        import sys, time
        import ctxstore
        base = ctxstore.connect("memory://")
        store = base.for_user("alice")
        from ctxstore.messages.tokens import warming
        store.upsert_chat("c1")
        assert warming() is None, "a call that counted nothing started the open"
        text = "Plan three days in Lisbon: neighbourhoods, food and day trips. " * 3
        head = store.append("c1", "main", [{"role": "user", "content": text}],
                            expected_head=None).head_message_id
        # The save counted with the table (only that starts the open, once it has returned).
        assert warming() is not None, "the first save did not count with the table"
        first = store.branch_size("c1").tokens
        deadline = time.monotonic() + 60
        while warming() is None or warming().is_alive():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert "tiktoken.core" in sys.modules
        store.append("c1", "main", [{"role": "user", "content": text}], expected_head=head)
        print(first, store.branch_size("c1").tokens)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = map(int, done.stdout.split())
    text = "Plan three days in Lisbon: neighbourhoods, food and day trips. " * 3
    exact = count_tokens({"role": "user", "content": text})
    assert (first, second) == (exact, 2 * exact)


def test_an_async_store_opens_tiktoken_only_after_a_call_that_counted() -> None:
    """In a fresh process: the async store loads its counter before its first call, but only
    a save that counted with the table starts the background open."""
    code = textwrap.dedent(
        """
        import asyncio
        import ctxstore
        from ctxstore.messages.tokens import warming

        async def main():
            store = ctxstore.connect_async("memory://").for_user("alice")
            await store.upsert_chat("c1")
            before = warming() is None
            await store.append("c1", "main", [{"role": "user", "content": "Hi!"}],
                               expected_head=None)
            print(before, warming() is not None)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]


def test_preload_opens_tiktoken_so_no_call_opens_it_later() -> None:
    """In a fresh process: ``preload()`` opens tiktoken itself (its encoder holds the GIL while
    it builds: at a server's start, not under its traffic), and a save after it starts no
    background thread."""
    code = textwrap.dedent(
        """
        import ctxstore
        from ctxstore.messages.tokens import warming
        ctxstore.preload(llm=False)
        import sys
        assert "tiktoken.core" in sys.modules, "preload did not open tiktoken"
        store = ctxstore.connect("memory://").for_user("alice")
        store.upsert_chat("c1")
        store.append("c1", "main", [{"role": "user", "content": "Hi!"}], expected_head=None)
        print(warming() is None, store.branch_size("c1").tokens)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", str(count_tokens({"role": "user", "content": "Hi!"}))]


def test_a_long_text_waits_for_tiktoken() -> None:
    counting = message_counter()
    counting.load()
    text = "word " * (MAX_COMPACT_CHARACTERS // 5 + 10)
    assert counting({"role": "user", "content": text}) == count_tokens(
        {"role": "user", "content": text}
    )


def test_a_callers_counter_is_never_replaced() -> None:
    counting = message_counter(estimate_tokens=len)
    assert counting({"role": "user", "content": "four"}) == 3 + len("user") + 4
    counting.warm()
    assert counting({"role": "user", "content": "four"}) == 3 + len("user") + 4


def test_merging_a_long_piece_costs_a_few_lookups_a_byte() -> None:
    """A run of one character is one piece: merging it looks up each pair once, and the two
    new pairs of each merge (lookups are what the merge spends its time on)."""
    table = RankTable.load()
    looked_up = 0

    def counted(token: bytes) -> int | None:
        nonlocal looked_up
        looked_up += 1
        return table.rank(token)

    piece = ("日" * 2000).encode()
    encoding = _load_encoding("o200k_base")
    assert merged_count(piece, counted) == len(encoding._encode_single_piece(piece))  # type: ignore[union-attr]
    assert looked_up <= 4 * len(piece)


def test_a_text_with_a_long_piece_waits_for_tiktoken(compact: rank_table.CompactCounter) -> None:
    text = "see " + "=" * (MAX_COMPACT_PIECE_BYTES + 1) + " here"
    assert compact.count(text) is None  # bounded: tiktoken counts it faster than it opens
    assert compact(text) == compact.count(text, bounded=False)
    counting = message_counter()
    counting.load()
    assert counting({"role": "user", "content": text}) == count_tokens(
        {"role": "user", "content": text}
    )
