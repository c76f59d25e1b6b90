"""Exact ``o200k_base`` token counts without loading tiktoken: the cold path of a first save.

tiktoken takes about 220 ms to open ``o200k_base`` (125 ms to parse its 3.6 MB of base64
ranks into a dict, 90 ms to build its Rust encoder): for a serverless function, most of the
cold start its users see before the first save returns. This module counts the same tokens
from a compact table shipped with ctxstore (``o200k_base.ranks``, made from tiktoken's own
ranks by ``python -m ctxstore.messages.rank_table``), opened in about a millisecond: the
tokens sorted by their bytes, found by binary search, and tiktoken's algorithm (the
encoding's split pattern, then byte-pair merges, lowest rank first, leftmost on a tie) in
Python. A test compares it with tiktoken on generated and hand-picked texts, and the table with
tiktoken's ranks.

It is slower per text than tiktoken (a few microseconds a lookup), so a store uses it only
until tiktoken has loaded in a background thread, started once a save has returned
(:class:`ctxstore.messages.tokens.MessageCounting`), and only for texts up to
:data:`MAX_COMPACT_CHARACTERS`; both count the same, so nothing a reader sees depends on
which one counted.

The file: ``CTXRANK1``, the token count N (uint32, little-endian), N + 1 offsets into the
token bytes (uint32), the N ranks (uint32), then the tokens' bytes end to end, sorted.
"""

from __future__ import annotations

import array
import heapq
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: The table ctxstore ships, beside this module.
TABLE_PATH = Path(__file__).with_name("o200k_base.ranks")
#: The longest text counted here before tiktoken is open; longer ones wait for it.
MAX_COMPACT_CHARACTERS = 8_000
#: The longest piece (bytes, after the split) counted here before tiktoken is open: merging
#: costs a few lookups a byte, each a few microseconds, where tiktoken takes nanoseconds.
MAX_COMPACT_PIECE_BYTES = 256
#: The most pieces remembered (each at most MAX_COMPACT_PIECE_BYTES): words repeat.
_KNOWN_PIECES = 16_384
_MAGIC = b"CTXRANK1"
_HEADER = len(_MAGIC) + 4

#: ``o200k_base``'s split pattern (tiktoken_ext.openai_public; a test compares the two).
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)


def table_bytes(ranks: Mapping[bytes, int]) -> bytes:
    """The file's bytes for ``ranks`` (token bytes -> rank)."""
    tokens = sorted(ranks)
    offsets = array.array("I", [0])
    for token in tokens:
        offsets.append(offsets[-1] + len(token))
    numbers = array.array("I", [ranks[token] for token in tokens])
    if sys.byteorder != "little":
        offsets.byteswap()
        numbers.byteswap()
    count = len(tokens).to_bytes(4, "little")
    return _MAGIC + count + offsets.tobytes() + numbers.tobytes() + b"".join(tokens)


class RankTable:
    """The ranks of one encoding's tokens, looked up by binary search over the file's bytes
    (mapped, not read: a lookup touches a few of its pages)."""

    __slots__ = ("_base", "_count", "_data", "_offsets", "_ranks")

    def __init__(self, data: Any) -> None:
        """``data``: the file's bytes, or a mapping of the file."""
        if bytes(data[: len(_MAGIC)]) != _MAGIC:
            raise ValueError("not a ctxstore rank table")
        count = int.from_bytes(data[len(_MAGIC) : _HEADER], "little")
        offsets_end = _HEADER + 4 * (count + 1)
        ranks_end = offsets_end + 4 * count
        view = memoryview(data)
        self._offsets: Any
        self._ranks: Any
        if sys.byteorder == "little" and array.array("I").itemsize == 4:
            self._offsets = view[_HEADER:offsets_end].cast("I")
            self._ranks = view[offsets_end:ranks_end].cast("I")
        else:  # a copy, in this machine's order
            self._offsets, self._ranks = array.array("L"), array.array("L")
            for numbers, start, end in ((self._offsets, _HEADER, offsets_end),
                                        (self._ranks, offsets_end, ranks_end)):  # fmt: skip
                numbers.extend(
                    int.from_bytes(view[at : at + 4], "little") for at in range(start, end, 4)
                )
        self._data, self._base, self._count = data, ranks_end, count
        if self._offsets[count] != len(data) - ranks_end:
            raise ValueError("a rank table cut short")

    @classmethod
    def load(cls, path: Path = TABLE_PATH) -> RankTable:
        import mmap

        with path.open("rb") as file:
            return cls(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))

    def __len__(self) -> int:
        return self._count

    def rank(self, token: bytes) -> int | None:
        """The rank of ``token``, or None when it is no token."""
        offsets, data, base = self._offsets, self._data, self._base
        low, high = 0, self._count
        while low < high:
            middle = (low + high) // 2
            if data[base + offsets[middle] : base + offsets[middle + 1]] < token:
                low = middle + 1
            else:
                high = middle
        if low < self._count and data[base + offsets[low] : base + offsets[low + 1]] == token:
            return int(self._ranks[low])
        return None


def merged_count(piece: bytes, rank: Callable[[bytes], int | None]) -> int:
    """How many tokens byte-pair merging makes of ``piece``, as tiktoken's ``byte_pair_merge``
    merges: the adjacent pair of lowest rank first, the leftmost of equals. The pairs wait in a
    heap ordered by (rank, start), so a piece of n bytes costs O(n log n) and about 3n
    lookups, whatever its bytes (a scan for the lowest pair after each merge is O(n²))."""
    size = len(piece)
    if size == 1:
        return 1
    following = list(range(1, size + 1))  # where the part starting at i ends
    preceding = list(range(-1, size - 1))  # where the part before it starts (-1: none)
    alive = [True] * size
    pairs = []
    for start in range(size - 1):
        found = rank(piece[start : start + 2])
        if found is not None:
            pairs.append((found, start, start + 1, start + 2))
    heapq.heapify(pairs)
    parts = size
    while pairs:
        _rank, start, middle, end = heapq.heappop(pairs)
        # A pair is still there while both its parts are, unchanged since it was pushed.
        if not alive[start] or following[start] != middle or following[middle] != end:
            continue
        alive[middle] = False
        following[start] = end
        if end < size:
            preceding[end] = start
        parts -= 1
        before = preceding[start]
        if before >= 0:
            found = rank(piece[before:end])
            if found is not None:
                heapq.heappush(pairs, (found, before, start, end))
        if end < size:
            after = following[end]
            found = rank(piece[start:after])
            if found is not None:
                heapq.heappush(pairs, (found, start, end, after))
    return parts


class CompactCounter:
    """Exact token counts of texts in ``o200k_base`` (what tiktoken's ``encode_ordinary``
    returns the length of), from the shipped table."""

    def __init__(self, table: RankTable, pattern: Any) -> None:
        self._table = table
        self._split = pattern.findall
        self._known: dict[bytes, int] = {}  # pieces counted before: words repeat

    def __call__(self, text: str) -> int:
        """The tokens of ``text``, however long its pieces."""
        counted = self.count(text, bounded=False)
        assert counted is not None
        return counted

    def count(self, text: str, *, bounded: bool = True) -> int | None:
        """The tokens of ``text``; None, when ``bounded``, for a text with a piece longer than
        :data:`MAX_COMPACT_PIECE_BYTES` (tiktoken counts it faster than its opening costs)."""
        total = 0
        known, rank = self._known, self._table.rank
        for piece in self._split(text):
            try:
                encoded = piece.encode("utf-8")
            except (
                UnicodeEncodeError
            ):  # lone surrogates: replaced in the whole text, as tiktoken does
                fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
                return self.count(fixed, bounded=bounded)
            found = known.get(encoded)
            if found is None:
                if len(encoded) > MAX_COMPACT_PIECE_BYTES:
                    if bounded:
                        return None
                    found = 1 if rank(encoded) is not None else merged_count(encoded, rank)
                else:
                    found = 1 if rank(encoded) is not None else merged_count(encoded, rank)
                    if len(known) < _KNOWN_PIECES:
                        known[encoded] = found
            total += found
        return total


def compact_counter() -> CompactCounter | None:
    """The counter of the shipped table, or None where it cannot run (no ``regex`` module,
    which tiktoken itself needs; no table)."""
    try:
        import regex
    except ImportError:
        return None
    try:
        table = RankTable.load()
    except (OSError, ValueError):
        return None
    return CompactCounter(table, regex.compile(O200K_PATTERN))


def main() -> None:
    """Write the table from tiktoken's ``o200k_base`` (run after a tiktoken that changes it)."""
    from ctxstore.messages.tokens import _load_encoding

    encoding = _load_encoding("o200k_base")
    if encoding is None:
        raise SystemExit("tiktoken's o200k_base is not available here")
    TABLE_PATH.write_bytes(table_bytes(encoding._mergeable_ranks))
    print(f"wrote {TABLE_PATH} ({TABLE_PATH.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
