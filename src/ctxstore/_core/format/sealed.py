"""Sealed values of a chat: what their associated data binds them to, and how a record's
payload and metadata are sealed and opened (stores with encryption; docs/encryption.md).

A record of a sealed chat (format :data:`~ctxstore._core.format.versions.SEALED_FORMAT`) keeps
its layout (:mod:`ctxstore._core.format.records`); its payload and its metadata are each a
msgpack ``bin`` holding a sealed value (:mod:`ctxstore.crypto.seal`), so the scripts, which
never read payloads, treat it as any record. What the scripts compute over stays in the clear:
the parent, the time, the chosen id, the tag, the token entries.

The associated data of a record's value is its kind (payload or metadata), the namespace (the
tenant; not the key prefix, a deployment's setting), the chat id, the chat's incarnation, the
record's log position and its parent's position: the same bytes moved to another position,
another parent, another chat or a chat created again under the same id do not open, and the
read raises ``CorruptionError`` naming the key and position.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

import msgpack

from ctxstore._base.bounded import BoundedMap
from ctxstore._core.format.fields import corrupt
from ctxstore._core.keyring import OwnerKeys
from ctxstore.crypto.aead import NONCE_BYTES, TAG_BYTES, UnauthenticError
from ctxstore.crypto.seal import SealingKey, value_key_id
from ctxstore.errors import ConfigurationError, CorruptionError, CtxStoreError

#: A message id of the generated form: position, incarnation, tag.
GENERATED_ID = re.compile(r"([0-9]+)\.([a-z2-7]+)\.([a-z2-7]+)")
#: A record's parent meaning "the position before mine" (``records.PREVIOUS``).
PREVIOUS_PARENT = -2
#: The kinds of value a record holds, first in their associated data.
PAYLOAD = b"p"
METADATA = b"m"
#: The kind of a chat's title (a chat-level value: sealed at position 0 under parent 0).
TITLE = b"t"


class MissingDataKeyError(Exception):
    """A sealed value names a data key the keys at hand do not hold: the caller reads the
    user's keys again once (another process may have made them), then reports it."""

    def __init__(self, key_id: str) -> None:
        super().__init__(key_id)
        self.key_id = key_id


def summary_kind(message_id: str) -> bytes:
    """The kind of a summary's sealed value: the summary, and the message it covers (its id;
    a summary is sealed before the script finds that message's position)."""
    named = message_id.encode("utf-8")
    return b"s%d:%s" % (len(named), named)


def chat_metadata_kind(name: str) -> bytes:
    """The kind of the value of the chat's metadata key ``name`` (its name in the clear): a
    value moved to another key does not open."""
    named = name.encode("utf-8")
    return b"c%d:%s" % (len(named), named)


class ResealNeededError(CtxStoreError):
    """An append sealed its records for a place they would not land in (another log length,
    parent, or incarnation than the client knew): the script wrote nothing and answered where
    they land, ``layout`` (see ``lua/append.lua``'s ``call.seal``); the append seals them for it
    and sends them again. Internal: it never reaches a caller."""

    def __init__(self, layout: str, **details: Any) -> None:
        super().__init__(f"the records must be sealed for {layout!r}", layout=layout, **details)
        self.layout = layout


def sealed_chat_error(chat_id: object) -> ConfigurationError:
    """What a store without encryption says of a write to a sealed chat."""
    return ConfigurationError(
        f"chat {chat_id!r} is sealed (a store with encryption wrote it): this store has no "
        "encryption; connect with encryption=<the KeyProvider> (docs/encryption.md)",
        chat_id=chat_id,
    )


def plain_chat_error(key: str, chat_id: object) -> CorruptionError:
    """What a store with encryption says of a chat written without it (until
    ``ctxstore migrate --encrypt`` seals it)."""
    return CorruptionError(
        f"corrupt data at {key} field 'fmt': chat {chat_id!r} was written without encryption, "
        "which a store with encryption refuses (ctxstore migrate --encrypt seals it; "
        "docs/encryption.md)",
        key=key,
        field="fmt",
        chat_id=chat_id,
        reason="written without encryption",
    )


class ChatSeal:
    """Seals and opens the record values of one chat incarnation under its owner's keys."""

    __slots__ = ("_place", "keys")

    def __init__(
        self, keys: OwnerKeys, namespace: str | None, chat_id: str, incarnation: str
    ) -> None:
        self.keys = keys
        chat = chat_id.encode("utf-8")
        self._place = b"ctxstore\x00%s\x00%d:%s\x00%s\x00" % (
            (namespace or "").encode("utf-8"),
            len(chat),
            chat,
            incarnation.encode("ascii"),
        )

    def aad(self, kind: bytes, position: int, parent: int) -> bytes:
        """The associated data of a record's value of ``kind`` at ``position`` under
        ``parent`` (-1: a root)."""
        return b"%s%s%d\x00%d" % (kind, self._place, position, parent)

    def keys_current_seal(
        self, kind: bytes, plaintext: bytes, position: int = 0, parent: int = 0
    ) -> bytes:
        """``plaintext`` sealed as a value of ``kind`` (whose name says what it belongs to: a
        record's payload, a summary's message, a stream) at ``position`` under ``parent`` (a
        stream piece: its write number), as the raw sealed bytes."""
        current = self.keys.current
        if current is None:  # pragma: no cover - a write reads or makes the keys first
            raise AssertionError("sealing needs the owner's current data key")
        return current.seal(plaintext, self.aad(kind, position, parent))

    def open_text(self, kind: bytes, value: bytes, position: int, *, key: str, field: str) -> str:
        """The text :meth:`keys_current_seal` sealed in ``value``; ``CorruptionError`` naming
        ``key`` and ``field`` when it does not open there (or is not UTF-8)."""
        plaintext = self._plaintext(kind, value, position, 0, key, field)
        try:
            return plaintext.decode("utf-8")
        except UnicodeDecodeError:
            raise corrupt(key, field, f"the sealed {_WHAT[kind]} is not UTF-8 text") from None

    def seal_title(self, title: str) -> str:
        """A chat's title sealed, as the text the chat hash holds (base64: every script reads
        a title as UTF-8 text, and a chat has one)."""
        sealed = self.keys_current_seal(TITLE, title.encode("utf-8"))
        return base64.b64encode(sealed).decode("ascii")

    def open_title(self, raw: str, *, key: str) -> str:
        """The title :meth:`seal_title` sealed in ``raw``; ``CorruptionError`` naming ``key``'s
        ``title`` field when it is not one sealed for this chat."""
        try:
            value = base64.b64decode(raw.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error):
            raise corrupt(key, "title", "not a sealed title, in a chat whose values are") from None
        return self.open_text(TITLE, value, 0, key=key, field="title")

    def seal_metadata(self, name: str, packed: bytes) -> bytes:
        """The msgpack value of metadata key ``name`` sealed, as the msgpack ``bin`` its
        ``m:<name>`` field holds."""
        return self.seal(chat_metadata_kind(name), packed, 0, 0)

    def open_metadata(self, name: str, value: object, *, key: str) -> Any:
        """The value of metadata key ``name`` that :meth:`seal_metadata` sealed (``value`` as
        decoded from its field); ``CorruptionError`` naming the field otherwise."""
        field = f"m:{name}"
        plaintext = self._plaintext(chat_metadata_kind(name), value, 0, 0, key, field)
        try:
            return msgpack.unpackb(plaintext, raw=False, strict_map_key=False)
        except Exception:  # msgpack raises several unrelated types for bad input
            raise corrupt(key, field, "the sealed metadata value is not valid msgpack") from None

    def seal(self, kind: bytes, plaintext: bytes, position: int, parent: int) -> bytes:
        """``plaintext`` sealed for its place, as the msgpack ``bin`` a record holds."""
        packed: bytes = msgpack.packb(
            self.keys_current_seal(kind, plaintext, position, parent), use_bin_type=True
        )
        return packed

    def open(
        self, kind: bytes, value: object, position: int, parent: int, *, key: str
    ) -> dict[str, Any]:
        """The map sealed in ``value`` (a record's payload or metadata as decoded); see
        :meth:`open_all`."""
        return self.open_all(kind, [(value, position, parent)], key=key)[0]

    def open_all(
        self, kind: bytes, items: list[tuple[object, int, int]], *, key: str
    ) -> list[dict[str, Any]]:
        """The maps sealed in ``items`` (a value as decoded, its position, its parent), decoded
        with one msgpack call. A value in the clear, one that does not open where it stands
        and one whose plaintext is no map are ``CorruptionError`` naming ``key`` and the
        position; a key the provider cannot unwrap is its ``KeyUnavailableError``; a key the
        owner's keys do not hold is :class:`MissingDataKeyError`."""
        plaintexts = [
            self._plaintext(kind, value, position, parent, key) for value, position, parent in items
        ]
        return self._maps(kind, plaintexts, [position for _value, position, _parent in items], key)

    def open_payloads(
        self, records: list[Any], positions: list[int], *, key: str
    ) -> list[tuple[list[Any], int, int]]:
        """The payloads of a chain's decoded records opened in place (as :meth:`open_all`),
        those under the owner's current key in one tight loop: a chain's cold read opens
        thousands. Returns (record, position, parent) of each record that carries metadata;
        records of another shape are left for the caller's checks to refuse."""
        current = self.keys.current
        refused: type[Exception] = UnauthenticError
        decrypt: Any = None
        if current is None:
            header, size = b"\xff", 0
        else:
            header, size = current.header, len(current.header)
            decrypt, refused = current.raw_decrypt()
        prefix = header + PAYLOAD + self._place
        shortest = size + NONCE_BYTES + TAG_BYTES
        plaintexts: list[bytes] = []
        opened: list[list[Any]] = []
        places: list[int] = []
        with_metadata: list[tuple[list[Any], int, int]] = []
        for record, position in zip(records, positions, strict=True):
            if type(record) is not list or len(record) not in (5, 6):
                continue
            if type(record[0]) is not int:  # no place to open it at: not a message record
                record[2] = None
                continue
            parent = position - 1 if record[0] == PREVIOUS_PARENT else record[0]
            value = record[2]
            if (
                decrypt is not None
                and type(value) is bytes
                and value.startswith(header)
                and (len(value) >= shortest)
            ):
                try:
                    plaintexts.append(
                        decrypt(
                            value[size : size + NONCE_BYTES],
                            value[size + NONCE_BYTES :],
                            b"%s%d\x00%d" % (prefix, position, parent),
                        )
                    )
                except refused:
                    raise _unopened(key, position, PAYLOAD, header[4:].decode()) from None
            else:  # in the clear, another key's, malformed: the general path says which
                plaintexts.append(self._plaintext(PAYLOAD, value, position, parent, key))
            opened.append(record)
            places.append(position)
            if len(record) == 6:
                with_metadata.append((record, position, parent))
        for record, found in zip(opened, self._maps(PAYLOAD, plaintexts, places, key), strict=True):
            record[2] = found
        return with_metadata

    def _plaintext(
        self,
        kind: bytes,
        value: object,
        position: int,
        parent: int,
        key: str,
        field: str | None = None,
    ) -> bytes:
        """The plaintext of one sealed value (``field``, the position by default, names it in
        an error)."""
        if type(value) is not bytes:
            raise corrupt(
                key,
                str(position) if field is None else field,
                f"the {_WHAT[kind]}{_at(position, field)} is not sealed, in a chat whose "
                "values are",
            )
        sealing = self._key_of(value, position, key, kind, field)
        bound = sealing.header + kind + self._place + b"%d\x00%d" % (position, parent)
        try:
            return sealing.open_bound(value, bound)
        except UnauthenticError:
            raise _unopened(key, position, kind, sealing.key_id, field) from None

    def _maps(
        self, kind: bytes, plaintexts: list[bytes], positions: list[int], key: str
    ) -> list[dict[str, Any]]:
        """The plaintexts decoded, with one msgpack call (each on its own to name a bad one)."""
        try:
            found = msgpack.unpackb(
                array_header(len(plaintexts)) + b"".join(plaintexts),
                raw=False,
                strict_map_key=False,
            )
        except Exception:  # msgpack raises several unrelated types for bad input
            found = None
        if found is None or len(found) != len(plaintexts):  # a plaintext not of one value
            found = [
                _unpacked(plain, key, position, kind)
                for plain, position in zip(plaintexts, positions, strict=True)
            ]
        for value, position in zip(found, positions, strict=True):
            if type(value) is not dict:
                raise corrupt(key, str(position), f"the sealed {_WHAT[kind]} is not a map")
        return list(found)

    def _key_of(
        self, value: bytes, position: int, key: str, kind: bytes, field: str | None = None
    ) -> SealingKey:
        """The owner's key a value names."""
        key_id = value_key_id(value)
        if key_id is None:
            raise corrupt(
                key,
                str(position) if field is None else field,
                f"the {_WHAT[kind]}{_at(position, field)} is not a sealed value",
            )
        sealing = self.keys.by_id.get(key_id)
        if sealing is None:
            refused = self.keys.unavailable.get(key_id)
            if refused is not None:
                raise refused
            raise MissingDataKeyError(key_id)
        return sealing


class ClosedSeal(ChatSeal):
    """What a store without encryption reads a sealed chat with when it is told to show what is
    in the clear and leave the rest (``StoreState.show_closed``: the web console started
    without keys): a sealed value reads as an empty one of its kind (a payload
    :data:`CLOSED_PAYLOAD`, metadata ``{}``, a summary's text ``""``); a value in the clear in
    it is corruption, as for a store with the keys. It holds no key: nothing opens, nothing is
    sealed."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(OwnerKeys("", "", None, {}), None, "", "")

    def open_all(
        self, kind: bytes, items: list[tuple[object, int, int]], *, key: str
    ) -> list[dict[str, Any]]:
        return [
            self._closed(kind, value, position, parent, key) for value, position, parent in items
        ]

    def open_payloads(
        self, records: list[Any], positions: list[int], *, key: str
    ) -> list[tuple[list[Any], int, int]]:
        with_metadata: list[tuple[list[Any], int, int]] = []
        for record, position in zip(records, positions, strict=True):
            if type(record) is not list or len(record) not in (5, 6) or type(record[0]) is not int:
                continue
            parent = position - 1 if record[0] == PREVIOUS_PARENT else record[0]
            record[2] = self._closed(PAYLOAD, record[2], position, parent, key)
            if len(record) == 6:
                with_metadata.append((record, position, parent))
        return with_metadata

    def open_text(self, *_args: object, **_kwargs: object) -> str:
        return ""

    def keys_current_seal(self, *_args: object, **_kwargs: object) -> bytes:
        raise ConfigurationError("a store without encryption seals nothing")

    def _closed(self, kind: bytes, value: object, position: int, parent: int, key: str) -> Any:
        """A sealed value, left closed: empty of its kind (one in the clear is refused)."""
        if type(value) is not bytes:
            self._plaintext(kind, value, position, parent, key)  # raises: it is not sealed
        if kind == PAYLOAD:
            return dict(CLOSED_PAYLOAD)
        if kind[:1] == b"s":
            return {"content": "", "metadata": {}}
        return {}


#: A sealed message's payload as a store without keys shows it (:class:`ClosedSeal`).
CLOSED_PAYLOAD: dict[str, Any] = {"role": "sealed", "content": ""}


class _What(dict[bytes, str]):
    """What a kind of sealed value is called in an error."""

    def __missing__(self, kind: bytes) -> str:
        return {b"s": "summary", b"d": "piece", b"c": "metadata value"}.get(kind[:1], "value")


_WHAT = _What({PAYLOAD: "payload", METADATA: "metadata", TITLE: "title"})


def array_header(count: int) -> bytes:
    """The msgpack header of an array of ``count`` values."""
    if count < 16:
        return bytes((0x90 + count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def _unopened(
    key: str, position: int, kind: bytes, key_id: str, field: str | None = None
) -> CorruptionError:
    where = _at(position, field)
    field = str(position) if field is None else field
    return CorruptionError(
        f"corrupt data at {key} field {field!r}: the sealed {_WHAT[kind]}{where} does not "
        "open where it stands (moved from another place, altered, or sealed for another "
        f"chat), key {key_id!r}",
        key=key,
        field=field,
        key_id=key_id,
        reason="does not open where it stands",
    )


def _at(position: int, field: str | None) -> str:
    """Where a value stands, in an error: a record's position (a chat-level value, named by
    its field, has none)."""
    return f" at position {position}" if field is None else ""


def _unpacked(plaintext: bytes, key: str, position: int, kind: bytes) -> Any:
    """One plaintext decoded on its own (a chain whose joined plaintexts did not decode:
    which one is bad)."""
    try:
        return msgpack.unpackb(plaintext, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise corrupt(
            key, str(position), f"the sealed {_WHAT[kind]} is not valid msgpack ({exc})"
        ) from exc


@dataclass(frozen=True)
class Layout:
    """Where the records of an append land: the chat's incarnation, the first log position,
    and each record's parent position (-1: a root). ``field()`` is ``lua/append.lua``'s
    ``call.seal``: the script refuses records sealed for another place (RESEAL) and says the
    right one, which :meth:`parse` reads."""

    incarnation: str
    first: int
    parents: tuple[int, ...]

    def field(self) -> str:
        head = f"{self.incarnation}:{self.first}:{self.parents[0]}"
        rest = [
            f":{index + 1}={parent}"
            for index, parent in enumerate(self.parents)
            if index and parent != self.first + index - 1
        ]
        return head + "".join(rest)

    @classmethod
    def parse(cls, text: str, count: int) -> Layout:
        incarnation, first, *parents = text.split(":")
        start = int(first)
        found = [start + index - 1 for index in range(count)]
        found[0] = int(parents[0])
        for item in parents[1:]:
            index, parent = item.split("=")
            found[int(index) - 1] = int(parent)
        return cls(incarnation, start, tuple(found))


@dataclass(frozen=True)
class Place:
    """What this process last learned of a sealed chat's log: its incarnation, its length and
    its newest head (id and position): what the next append predicts its layout from."""

    incarnation: str
    length: int
    head_id: str
    head_position: int


class Places(BoundedMap[str, Place]):
    """Chat id -> :class:`Place`. A wrong prediction costs one more round trip (the script's
    RESEAL), never a wrong seal."""

    def remember(self, chat_id: str, place: Place) -> None:
        self.put(chat_id, place)

    def forget(self, chat_id: str) -> None:
        self.pop(chat_id)


def predicted_layout(
    place: Place | None, incarnation: str | None, expected_head: str | None, count: int
) -> Layout:
    """Where an append of ``count`` records onto ``expected_head`` most likely lands: after
    the log's end as this process last saw it, or after the head when its generated id names
    its position (``<position>.<incarnation>.<tag>``)."""
    known = (incarnation or "").partition("#")[0]
    generated = GENERATED_ID.fullmatch(expected_head or "")
    if not known:
        known = place.incarnation if place is not None else ""
        if not known and generated is not None:
            known = generated.group(2)
    head = -1
    if generated is not None and generated.group(2) == known:
        head = int(generated.group(1))
    elif place is not None and expected_head == place.head_id:
        head = place.head_position
    first = head + 1
    if place is not None and place.incarnation == known:
        first = max(first, place.length)
    parents = (head, *range(first, first + count - 1))
    return Layout(known, first, parents)
