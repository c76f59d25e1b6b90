"""How a store is set up: one frozen :class:`Settings` value, built once, checked at once.

``ctxstore.connect(url, settings=..., **overrides)`` and ``connect_async`` take the same
arguments: a :class:`Settings` (or none, for the defaults) and keyword overrides of its fields;
the redis-py client's own options go in ``redis_options={...}``, and any other keyword is a
``TypeError`` at the call (see :mod:`ctxstore.store.options`). A web app builds its settings
once at start-up and hands them to every store it makes::

    settings = ctxstore.Settings(namespace="acme", ttl=timedelta(days=30))
    store = ctxstore.connect("redis://cache:6379", settings=settings)

Every field is checked when the value is built (a typo'd namespace or an impossible durability
fails before any client exists); what depends on the server (whether it has ``WAITAOF``, its
eviction policy) is checked by the first operation.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal, get_args

from ctxstore._base.ids import check_key_prefix
from ctxstore.crypto.provider import KeyProvider
from ctxstore.errors import ConfigurationError, ValidationError
from ctxstore.messages.redaction import DEFAULT_REDACTION_MARKER
from ctxstore.messages.tokens import TokenCounter

#: The longest retention a chat takes (about 100 years): longer is surely a unit mistake.
MAX_TTL_SECONDS: Final = 100 * 365 * 24 * 3600

#: A retention in seconds (a number or a timedelta); None for no expiry.
TTL = float | int | timedelta | None

#: What a write waits for before it is acknowledged: a replica (``WAIT``) or the local fsync of
#: the append-only file (``WAITAOF``, Redis 7.2 or later).
DurabilityMode = Literal["replica", "aof"]
DURABILITY_MODES: tuple[str, ...] = get_args(DurabilityMode)
#: Seconds a write waits for its confirmation unless ``durability_timeout`` says otherwise.
DEFAULT_DURABILITY_TIMEOUT = 1.0
#: Bytes of the process cache of chains read, unless ``cache_bytes`` says otherwise.
DEFAULT_CACHE_BYTES = 32 << 20


class StoreDefault:
    """The ``ttl=`` default of ``upsert_chat``: the store's own (``connect(ttl=)``); callers
    test for it with ``isinstance``, so one instance, ``STORE_DEFAULT``, is all there is."""

    def __repr__(self) -> str:
        return "STORE_DEFAULT"


STORE_DEFAULT: Final = StoreDefault()


def ttl_ms(ttl: TTL, name: str = "ttl") -> int | None:
    """Milliseconds (at least 1) of a retention given in seconds or as a timedelta; None stays
    None (no expiry). Refused when not a finite positive duration of at most about 100 years."""
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValidationError(
            f"{name} must be seconds (a number or a timedelta) or None, got {ttl!r}"
        )
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TTL_SECONDS):
        raise ValidationError(
            f"{name} must be a positive duration of at most 100 years, got {ttl!r}"
        )
    return max(1, round(seconds * 1000))


#: How calls reach the server's Lua: ``"auto"`` (functions where the server has them, else
#: scripts), ``"functions"`` (functions only), ``"scripts"`` (``EVALSHA`` only).
ScriptingMode = Literal["auto", "functions", "scripts"]
SCRIPTING_MODES: Final[tuple[str, ...]] = get_args(ScriptingMode)
#: The environment variable a store's ``scripting`` comes from when its settings leave it out.
SCRIPTING_ENV: Final = "CTXSTORE_SCRIPTING"


def check_scripting(
    mode: object, source: str = "scripting", *, allow_none: bool = False
) -> ScriptingMode:
    """``mode`` if it is one of :data:`SCRIPTING_MODES` (or None with ``allow_none``), else a
    ConfigurationError."""
    if mode not in SCRIPTING_MODES and not (allow_none and mode is None):
        raise ConfigurationError(
            f"{source} must be one of {', '.join(map(repr, SCRIPTING_MODES))}, got {mode!r}"
        )
    return mode  # type: ignore[return-value]  # checked just above


def scripting_of(setting: ScriptingMode | None) -> ScriptingMode:
    """The mode a store runs with: its setting, else :data:`SCRIPTING_ENV`, else ``"auto"``."""
    if setting is not None:
        return setting
    return check_scripting(os.environ.get(SCRIPTING_ENV) or "auto", SCRIPTING_ENV)


#: The most metadata keys ``Limits.max_metadata_keys`` may allow: a write sends two arguments a
#: key (field, value), and a managed service (ElastiCache Serverless) takes at most 3,999
#: arguments in one command.
METADATA_KEYS_CEILING = 1_900


@dataclass(frozen=True)
class Limits:
    """Safety bounds. Each turns a runaway input into a clear error instead of a stuck Redis."""

    #: Largest encoded message record or metadata value.
    max_message_bytes: int = 1 << 20
    #: Longest chain a walk follows; a longer one is a LimitExceededError.
    max_chain_depth: int = 100_000
    #: Most messages in one append.
    max_batch: int = 10_000
    #: Most messages get_graph returns.
    max_graph_messages: int = 100_000
    #: Most records a read script returns itself. Every record passed through Lua costs Redis
    #: about half a microsecond, five times a plain LRANGE, so longer reads come back as ranges
    #: that the client reads with LRANGE (one more round trip, much less Redis time).
    read_inline_messages: int = 128
    #: Most records one LRANGE of a long read asks for: Redis serves other clients between them.
    read_chunk_messages: int = 1024
    #: Most metadata keys a chat holds, counting what it has and what an update merges in.
    #: Every chat read returns the whole metadata (a listing page returns it for each chat),
    #: so it is meant for a handful of labels and ids, not for data. At most
    #: :data:`METADATA_KEYS_CEILING`.
    max_metadata_keys: int = 256
    #: Most bytes of a chat's metadata as stored: every ``m:<key>`` field name and msgpack
    #: value together (64 KiB: a listing page of 50 chats at the bound is 3.2 MiB).
    max_metadata_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in (
            "max_message_bytes",
            "max_chain_depth",
            "max_batch",
            "max_graph_messages",
            "read_inline_messages",
            "read_chunk_messages",
            "max_metadata_keys",
            "max_metadata_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if self.max_metadata_keys > METADATA_KEYS_CEILING:
            raise ConfigurationError(
                f"max_metadata_keys must be at most {METADATA_KEYS_CEILING:,}, got "
                f"{self.max_metadata_keys!r}: a write sends two arguments a key, and managed "
                "services take at most 3,999 in one command"
            )


#: The longest redaction marker (it stands in for message text and titles).
MAX_MARKER_CHARS = 256


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a store is set up with besides its URL (see the module docstring).

    ``namespace`` fences a tenant: its keys are ``<prefix>:<namespace>:...``, which a Redis ACL
    key pattern enforces (``deploy/acl.conf``). ``limits`` bounds message sizes, chain depths,
    batch sizes, reads and metadata (:class:`Limits`). ``clock`` returns epoch milliseconds
    (tests pass a fake one; None: the wall clock). ``cache_bytes`` bounds the process cache of
    chains read (None: 32 MiB; 0 turns it off; stores of one URL share one cache, the first
    store's bound holds until another sets one). ``token_model`` / ``estimate_tokens`` count
    the tokens stored with each message appended (default: ``o200k_base``; see
    :mod:`ctxstore.messages.tokens`). ``durability`` (``"replica"`` / ``"aof"``) acknowledges a
    write only once a replica / the local fsync confirmed it within ``durability_timeout``
    seconds, else ``DurabilityError``. ``ttl`` (seconds or a timedelta; None: never) makes the
    chats a store creates expire whole that long after their last write. ``pause_gc`` pauses
    Python's cyclic garbage collector while a long chain (256 messages or more) is decoded, a
    sixth of a 10,000-message cold read (process-wide, counted across threads; False leaves the
    collector alone). ``redaction_marker`` is the text a redacted message (and a title made
    from it) shows instead (:meth:`~ctxstore.store.Store.redact_message`). ``redis_options`` go
    to the redis-py client a store makes from its URL (``socket_timeout``, ``password``...),
    checked against that client's signature by ``connect()``. ``trace_chat_ids`` puts chat ids
    on the OpenTelemetry spans (``ctxstore.chat``, ``gen_ai.conversation.id``); without it a
    span carries an HMAC-SHA256 of the id under ``trace_key`` (bytes or text), or no chat at
    all when no key is set (docs/observability.md). ``encryption`` (a
    :class:`~ctxstore.crypto.KeyProvider`) seals message payloads and metadata on the client,
    each under its owner's data key and bound to its place, in chats of the sealed format
    (docs/encryption.md); None stores them in the clear. ``scripting`` says how calls reach
    the server's Lua: ``"auto"`` (Redis Functions where the server has them, else ``EVALSHA``
    scripts, decided once per server), ``"functions"`` (never scripts), ``"scripts"`` (never
    functions); None: the ``CTXSTORE_SCRIPTING`` environment variable, else ``"auto"``
    (docs/speed.md).
    """

    namespace: str | None = None
    prefix: str = "ctx"
    limits: Limits = field(default_factory=Limits)
    clock: Callable[[], int] | None = None
    cache_bytes: int | None = None
    token_model: str | None = None
    estimate_tokens: TokenCounter | None = None
    durability: DurabilityMode | None = None
    durability_timeout: float = DEFAULT_DURABILITY_TIMEOUT
    ttl: TTL = None
    pause_gc: bool = True
    redaction_marker: str = DEFAULT_REDACTION_MARKER
    redis_options: Mapping[str, Any] = field(default_factory=dict)
    trace_chat_ids: bool = False
    trace_key: str | bytes | None = field(default=None, repr=False)
    encryption: KeyProvider | None = None
    scripting: ScriptingMode | None = None

    def __post_init__(self) -> None:
        check_key_prefix(self.prefix, "prefix", allow_colon=True)
        if self.namespace is not None:
            check_key_prefix(self.namespace, "namespace", allow_colon=False)
        if not isinstance(self.limits, Limits):
            raise ConfigurationError(f"limits must be a Limits, got {self.limits!r}")
        if self.clock is not None and not callable(self.clock):
            raise ConfigurationError(f"clock must return epoch milliseconds, got {self.clock!r}")
        if self.cache_bytes is not None and (
            isinstance(self.cache_bytes, bool)
            or not isinstance(self.cache_bytes, int)
            or self.cache_bytes < 0
        ):
            raise ConfigurationError(
                f"cache_bytes must be a non-negative integer, got {self.cache_bytes!r}"
            )
        if self.token_model is not None and not isinstance(self.token_model, str):
            raise ValidationError(f"model must be a model name or None, got {self.token_model!r}")
        if self.estimate_tokens is not None and not callable(self.estimate_tokens):
            raise ValidationError(
                f"estimate_tokens must be a function of a text, got {self.estimate_tokens!r}"
            )
        timeout = self.durability_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise ConfigurationError(
                f"durability_timeout must be a number of seconds, got {timeout!r}"
            )
        if not math.isfinite(timeout) or timeout <= 0:
            raise ConfigurationError(
                f"durability_timeout must be positive and finite, got {timeout!r}"
            )
        if self.durability is not None and self.durability not in DURABILITY_MODES:
            raise ConfigurationError(
                f"durability must be None, 'replica' or 'aof', got {self.durability!r}"
            )
        ttl_ms(self.ttl)
        if not isinstance(self.pause_gc, bool):
            raise ConfigurationError(f"pause_gc must be True or False, got {self.pause_gc!r}")
        check_marker(self.redaction_marker)
        if not isinstance(self.redis_options, Mapping):
            raise ConfigurationError(f"redis_options must be a mapping, got {self.redis_options!r}")
        check_trace_options(self.trace_chat_ids, self.trace_key)
        check_scripting(self.scripting, allow_none=True)
        if self.encryption is not None and not isinstance(self.encryption, KeyProvider):
            raise ConfigurationError(
                "encryption must be a KeyProvider (current_key_id, wrap, unwrap, destroy), such "
                f"as ctxstore.crypto.LocalKeyProvider, got {self.encryption!r}"
            )

    @property
    def ttl_ms(self) -> int | None:
        """The retention of the chats a store creates, in milliseconds (None: never)."""
        return ttl_ms(self.ttl)

    def replace(self, **overrides: Any) -> Settings:
        """These settings with the fields in ``overrides`` replaced; a name that is no field is
        a ``TypeError``."""
        unknown = sorted(set(overrides) - SETTINGS_FIELDS)
        if unknown:
            raise TypeError(f"Settings has no field {unknown[0]!r}")
        return dataclasses.replace(self, **overrides) if overrides else self


def check_trace_options(trace_chat_ids: object, trace_key: object) -> None:
    """``trace_chat_ids`` a bool; ``trace_key`` None or a non-empty string or bytes (it is
    never shown: a repr of the settings leaves it out)."""
    if not isinstance(trace_chat_ids, bool):
        raise ConfigurationError(f"trace_chat_ids must be True or False, got {trace_chat_ids!r}")
    if trace_key is not None and (not isinstance(trace_key, (str, bytes)) or not trace_key):
        raise ConfigurationError("trace_key must be a non-empty string or bytes, or None")


def check_marker(marker: object) -> str:
    """A redaction marker: one line of 1 to ``MAX_MARKER_CHARS`` characters."""
    if not isinstance(marker, str) or not 0 < len(marker) <= MAX_MARKER_CHARS:
        raise ConfigurationError(
            f"redaction_marker must be a string of 1 to {MAX_MARKER_CHARS} characters, "
            f"got {marker!r}"
        )
    if any(ord(char) < 32 or 127 <= ord(char) < 160 for char in marker):
        raise ConfigurationError(
            f"redaction_marker must be one line without control characters: {marker!r}"
        )
    return marker


#: The names of :class:`Settings`' fields: what ``connect(**overrides)`` may name.
SETTINGS_FIELDS: Final = frozenset(item.name for item in dataclasses.fields(Settings))


def settings_of(settings: Settings | None, overrides: Mapping[str, Any]) -> Settings:
    """What ``connect(settings=..., **overrides)`` stands for: ``settings`` (or the defaults)
    with the overrides (fields only) applied."""
    if settings is not None and not isinstance(settings, Settings):
        raise ConfigurationError(f"settings must be a ctxstore.Settings, got {settings!r}")
    return (settings or Settings()).replace(**overrides)
