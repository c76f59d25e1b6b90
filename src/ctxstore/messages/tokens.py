"""Token counts of texts and chat messages, offline, with the providers' per-message overhead.

Which counter a model gets (:func:`tokenizer_for` names it):

1. a caller's ``estimate_tokens(text) -> int`` overrides everything;
2. OpenAI-family models (``gpt-4o``, ``gpt-4.1``, ``gpt-5``, ``o1``/``o3``/``o4``, ``gpt-4``,
   ``gpt-3.5``, embeddings, ``openai/...`` and ``azure/...`` names) go through tiktoken with
   the model's encoding (``o200k_base`` or ``cl100k_base``), as does ``model=None``
   (``o200k_base``, the encoding of every current OpenAI model);
3. the Claude 1/2 models that litellm tokenizes with its bundled Anthropic tokenizer go
   through ``litellm.token_counter`` (litellm is imported only for them);
4. everything else, and every model when tiktoken or its encoding files are missing, is
   estimated at four characters a token (rounded up), the rule of thumb providers publish.
   litellm's own fallback for unknown models is tiktoken's ``cl100k_base``, which is no better
   an estimate for another vendor's tokenizer and costs far more.

tiktoken downloads its encodings on first use, which fails on closed networks. litellm ships
``cl100k_base``, ``o200k_base`` and ``p50k_base`` in its package: unless the caller set
``TIKTOKEN_CACHE_DIR``, it is pointed there (found without importing litellm).

Per-message overhead follows OpenAI's published recipe for chat models: 3 tokens per message,
1 more when it has a ``name``, the tokens of its role, text, name, tool calls (function name
and arguments, plus 3 per call) and tool-call id, and 3 tokens that prime the reply, once per
request. An image part counts 85 tokens, the price of a low-detail image. A role-less item of
the Responses API (``function_call``, ``function_call_output``, ``reasoning``, ...) costs the
same 3 plus its texts: ``content`` parts, ``name``, ``arguments`` / ``input``, ``call_id``,
``output`` and the ``summary`` parts of a reasoning item.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore.errors import ValidationError
from ctxstore.messages.tool_groups import is_opaque_item
from ctxstore.ui.parts import is_ui_message
from ctxstore.ui.to_model import ui_model_messages

if TYPE_CHECKING:  # opened on the first count of a cold start only
    from ctxstore.messages.rank_table import CompactCounter

__all__ = [
    "DEFAULT_ENCODING",
    "REPLY_PRIMING_TOKENS",
    "MessageCounting",
    "TokenCounter",
    "count_tokens",
    "estimate_from_characters",
    "message_tokens",
    "tokenizer_for",
]

log = logging.getLogger(__name__)

#: The encoding of every current OpenAI model, used when no model is named.
DEFAULT_ENCODING = "o200k_base"
#: Tokens every message costs around its content (OpenAI's recipe for chat models).
MESSAGE_OVERHEAD_TOKENS = 3
#: Tokens a message's ``name`` adds besides its own text.
NAME_OVERHEAD_TOKENS = 1
#: Tokens each tool call adds besides its function name and arguments.
TOOL_CALL_OVERHEAD_TOKENS = 3
#: Tokens that prime the model's reply, once per request.
REPLY_PRIMING_TOKENS = 3
#: What one image part counts (a low-detail image's fixed price).
IMAGE_PART_TOKENS = 85
#: Characters per token of the estimate used where no tokenizer is known.
CHARACTERS_PER_TOKEN = 4

_SHIPPED_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "p50k_base"})
#: Encodings tiktoken names for models whose vocabulary is o200k_base's (plus special tokens).
_ENCODING_ALIASES = {"o200k_harmony": "o200k_base"}
_OPENAI_PREFIXES = ("openai/", "azure/", "azure_ai/", "text-completion-openai/")
_OPENAI_MODEL_PREFIXES = (
    "gpt-",
    "chatgpt-",
    "o1",
    "o3",
    "o4",
    "ft:gpt-",
    "text-embedding-",
    "davinci",
    "babbage",
)
_LITELLM_TOKENIZED_PREFIXES = ("claude-2", "claude-instant")

#: A caller's counter: the tokens of one text.
TokenCounter = Callable[[str], int]

_cache_dir_lock = threading.Lock()


def estimate_from_characters(text: str) -> int:
    """About four characters a token, rounded up: the estimate for models without a tokenizer."""
    return math.ceil(len(text) / CHARACTERS_PER_TOKEN)


def tokenizer_for(model: str | None) -> str:
    """Which counter ``model`` gets: ``tiktoken:<encoding>``, ``litellm`` or ``estimate``."""
    return _counter(model)[0]


def count_tokens(
    text_or_messages: str | Mapping[str, Any] | Iterable[Mapping[str, Any]],
    model: str | None = None,
    *,
    estimate_tokens: TokenCounter | None = None,
) -> int:
    """Tokens of a text, of one chat message, or of a message list as one request.

    A string counts its text alone. A message counts its text with the per-message overhead;
    a list counts each message and the reply priming (what a provider bills as input). A UI
    message counts as the chat-completions messages it becomes, so ``count_tokens(ui_list)``
    equals ``count_tokens(to_model_messages(ui_list))``.
    ``estimate_tokens`` replaces the tokenizer for every text; the overhead is added around it.
    """
    counter = _text_counter(model, estimate_tokens)
    if isinstance(text_or_messages, str):
        return counter(text_or_messages)
    if isinstance(text_or_messages, Mapping):
        return message_tokens(text_or_messages, counter)
    if isinstance(text_or_messages, (bytes, bytearray)):
        raise ValidationError("count_tokens takes a str, a message dict or a list of messages")
    total = REPLY_PRIMING_TOKENS
    for index, message in enumerate(text_or_messages):
        if not isinstance(message, Mapping):
            raise ValidationError(f"messages[{index}] is not a message dict: {message!r}")
        total += message_tokens(message, counter)
    return total


def message_tokens(
    message: Mapping[str, Any], counter: TokenCounter, role_counter: TokenCounter | None = None
) -> int:
    """One message's tokens in a request: its texts through ``counter`` plus the overhead
    (``role_counter``, when given, counts the role: a cache of the few roles there are). A UI
    message counts as the model messages it is sent as (:func:`ctxstore.ui.to_model_messages`):
    its steps, calls and results, not its reasoning or data parts."""
    if "parts" in message and is_ui_message(message):
        tokens = 0
        for converted in ui_model_messages(message):
            tokens += _chat_message_tokens(converted, counter, role_counter)
        return tokens
    return _chat_message_tokens(message, counter, role_counter)


def _chat_message_tokens(
    message: Mapping[str, Any], counter: TokenCounter, role_counter: TokenCounter | None
) -> int:
    if is_opaque_item(message):  # what it holds is unknown: its JSON text, as a model reads
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str)
        return MESSAGE_OVERHEAD_TOKENS + counter(text)
    tokens = MESSAGE_OVERHEAD_TOKENS
    role = message.get("role")
    if isinstance(role, str):
        tokens += (role_counter or counter)(role)
    tokens += _content_tokens(message.get("content"), counter)
    name = message.get("name")
    if isinstance(name, str) and name:
        tokens += NAME_OVERHEAD_TOKENS + counter(name)
    tool_call_id = message.get("tool_call_id")
    if isinstance(tool_call_id, str) and tool_call_id:
        tokens += counter(tool_call_id)
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            tokens += _tool_call_tokens(call, counter)
    function_call = message.get("function_call")  # the legacy single-call spelling
    if isinstance(function_call, Mapping):
        tokens += _function_tokens(function_call, counter)
    if role is None:
        tokens += _item_tokens(message, counter)
    return tokens


#: The text fields of role-less Responses API items: a call's ``arguments`` (``input`` for a
#: custom tool), the ``call_id`` that pairs a call with its output.
_ITEM_TEXT_FIELDS = ("arguments", "input", "call_id")


def _item_tokens(item: Mapping[str, Any], counter: TokenCounter) -> int:
    """The texts of a role-less Responses API item besides ``content`` and ``name``: call
    arguments and ids, an output (a text or a list of content parts) and a reasoning item's
    ``summary`` parts."""
    tokens = 0
    for field in _ITEM_TEXT_FIELDS:
        value = item.get(field)
        if isinstance(value, str):
            tokens += counter(value)
    output = item.get("output")
    if isinstance(output, str):
        tokens += counter(output)
    else:
        tokens += _content_tokens(output, counter)
    tokens += _content_tokens(item.get("summary"), counter)
    return tokens


def _content_tokens(content: object, counter: TokenCounter) -> int:
    if isinstance(content, str):
        return counter(content)
    if not isinstance(content, list):
        return 0
    tokens = 0
    for part in content:
        if isinstance(part, str):
            tokens += counter(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            text = part.get("text")
            if isinstance(text, str):
                tokens += counter(text)
            elif kind in ("image_url", "image", "input_image"):
                tokens += IMAGE_PART_TOKENS
    return tokens


def _tool_call_tokens(call: object, counter: TokenCounter) -> int:
    if not isinstance(call, Mapping):
        return 0
    function = call.get("function")
    tokens = TOOL_CALL_OVERHEAD_TOKENS
    if isinstance(function, Mapping):
        tokens += _function_tokens(function, counter)
    return tokens


def _function_tokens(function: Mapping[str, Any], counter: TokenCounter) -> int:
    tokens = 0
    for field in ("name", "arguments"):
        value = function.get(field)
        if isinstance(value, str):
            tokens += counter(value)
    return tokens


def _text_counter(model: str | None, estimate_tokens: TokenCounter | None) -> TokenCounter:
    if estimate_tokens is None:
        return _counter(model)[1]
    if not callable(estimate_tokens):
        raise ValidationError(
            f"estimate_tokens must be a function of a text, got {estimate_tokens!r}"
        )

    def checked(text: str) -> int:
        value = estimate_tokens(text)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(
                f"estimate_tokens must return a non-negative int, returned {value!r}"
            )
        return value

    return checked


@lru_cache(maxsize=256)
def _counter(model: str | None) -> tuple[str, TokenCounter]:
    if model is not None and not isinstance(model, str):
        raise ValidationError(f"model must be a model name or None, got {model!r}")
    bare = _bare_model(model)
    if bare is not None and bare.startswith(_LITELLM_TOKENIZED_PREFIXES):
        return "litellm", _litellm_counter(model or bare)
    encoding_name = _openai_encoding(bare)
    if encoding_name is None:
        return "estimate", estimate_from_characters
    encoding = _load_encoding(encoding_name)
    if encoding is None:
        return "estimate", estimate_from_characters
    encode = encoding.encode_ordinary
    return f"tiktoken:{encoding_name}", lambda text: len(encode(text))


_warming_lock = threading.Lock()
_warming: list[threading.Thread] = []


def _open_in_background() -> None:
    """Open ``o200k_base`` with tiktoken in a thread of its own, once a process (only where
    the compact counter counts for it: tiktoken not open yet)."""
    if DEFAULT_ENCODING in _OPENED or _compact_counter() is None:
        return
    with _warming_lock:
        if _warming:
            return
        thread = threading.Thread(
            target=_load_encoding, args=(DEFAULT_ENCODING,), name="ctxstore-tokenizer", daemon=True
        )
        _warming.append(thread)
    thread.start()


def _forget_warming() -> None:
    """In a forked child: the parent's thread is not there; the child opens tiktoken itself."""
    _warming.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_warming)


def warming() -> threading.Thread | None:
    """The thread opening tiktoken in the background, if one was started (tests wait on it)."""
    return _warming[0] if _warming else None


@lru_cache(maxsize=1)
def _compact_counter() -> CompactCounter | None:
    """The compact ``o200k_base`` counter, where tiktoken (and so its ``regex``) is installed:
    without tiktoken a process estimates, and a process must count one way throughout."""
    if importlib.util.find_spec("tiktoken") is None:
        return None
    from ctxstore.messages.rank_table import compact_counter

    return compact_counter()


def _bare_model(model: str | None) -> str | None:
    if model is None:
        return None
    lowered = model.strip().lower()
    for prefix in _OPENAI_PREFIXES:
        if lowered.startswith(prefix):
            return lowered[len(prefix) :]
    if lowered.startswith("anthropic/"):
        return lowered[len("anthropic/") :]
    return lowered


def _openai_encoding(bare: str | None) -> str | None:
    """The tiktoken encoding of an OpenAI-family model (None: not one, or not shipped)."""
    if bare is None:
        return DEFAULT_ENCODING
    if not bare.startswith(_OPENAI_MODEL_PREFIXES):
        return None
    try:
        import tiktoken.model
    except ImportError:
        return None
    try:
        name = tiktoken.model.encoding_name_for_model(bare)
    except KeyError:
        # A newer model than this tiktoken knows: every OpenAI chat model since gpt-4o uses
        # o200k_base, the older gpt-4 / gpt-3.5 families cl100k_base.
        old = bare.startswith(("gpt-4-", "gpt-3.5", "gpt-35")) or bare == "gpt-4"
        name = "cl100k_base" if old else DEFAULT_ENCODING
    name = _ENCODING_ALIASES.get(name, name)
    return name if name in _SHIPPED_ENCODINGS else None


#: The encodings this process has opened with tiktoken.
_OPENED: set[str] = set()


@lru_cache(maxsize=8)
def _load_encoding(name: str) -> Any:
    """The tiktoken encoding, read from litellm's bundled files when no cache dir is set."""
    try:
        import tiktoken
    except ImportError:
        log.warning("tiktoken is not installed: token counts are estimated (ctxstore[llm])")
        return None
    _point_tiktoken_at_bundled_encodings()
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as error:  # a download attempted offline fails in many ways
        log.warning("tiktoken encoding %s is unavailable (%s): counts are estimated", name, error)
        return None
    _OPENED.add(name)
    return encoding


def _point_tiktoken_at_bundled_encodings() -> None:
    with _cache_dir_lock:
        if os.environ.get("TIKTOKEN_CACHE_DIR"):
            return
        folder = bundled_encodings_dir()
        if folder is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


def bundled_encodings_dir() -> Path | None:
    """litellm's folder of tiktoken encoding files, found without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


def _litellm_counter(model: str) -> TokenCounter:
    def count(text: str) -> int:
        from ctxstore._base.litellm import import_litellm

        return int(import_litellm().token_counter(model=model, text=text))

    return count


#: Counts one chat message (with its overhead); what a store stores beside each message.
MessageCounter = Callable[[Mapping[str, Any]], int]


class MessageCounting:
    """A :data:`MessageCounter` whose tokenizer loads on the first count, not when it is made:
    a store made at import time of a serverless handler pays nothing yet. ``load()`` loads it
    ahead (an async caller does it in a worker thread); ``loaded`` says whether that is done;
    ``open()`` opens the tokenizer itself, not the compact table (``preload()``).

    For ``o200k_base`` (the default) a process that has not opened tiktoken's encoding yet
    counts with the compact table shipped with ctxstore (:mod:`ctxstore.messages.rank_table`:
    the same counts, opened in milliseconds where tiktoken takes about 220), and ``warm()``,
    which a store calls once a call that counted with it has returned, opens tiktoken in a
    background thread and switches to it. A text longer than the compact counter takes waits
    for tiktoken instead.
    The counts are the same either way: what a chat stores never depends on which counted."""

    __slots__ = ("_cold", "_estimate", "_model", "_roles", "_texts")

    def __init__(self, model: str | None, estimate_tokens: TokenCounter | None) -> None:
        self._model = model
        self._estimate = estimate_tokens
        self._texts: TokenCounter | None = None
        self._roles: dict[str, int] = {}  # a handful of roles, counted once each
        self._cold = False  # has counted with the compact table (tiktoken not open yet)

    @property
    def loaded(self) -> bool:
        return self._texts is not None

    def load(self) -> None:
        if self._texts is None:
            self._texts = self._cold_counter() or _text_counter(self._model, self._estimate)

    def open(self) -> None:
        """Load the tokenizer itself now, in this thread (tiktoken's encoding, not the compact
        table): what :func:`ctxstore.preload` does at a server's start, so that no background
        thread opens it later. tiktoken builds its encoder holding the GIL (about 0.13 s for
        ``o200k_base``), which pauses every other thread of the process, an event loop's too,
        whenever it happens; at start nothing is waiting yet."""
        self._texts = _text_counter(self._model, self._estimate)
        self._cold = False

    def _cold_counter(self) -> TokenCounter | None:
        """The compact counter, where it counts what the tokenizer would and the tokenizer is
        not open yet in this process; None elsewhere."""
        if self._estimate is not None or DEFAULT_ENCODING in _OPENED:
            return None  # a caller's counter, or tiktoken's encoding already open
        if _openai_encoding(_bare_model(self._model)) != DEFAULT_ENCODING:
            return None
        compact = _compact_counter()
        if compact is None:
            return None
        from ctxstore.messages.rank_table import MAX_COMPACT_CHARACTERS

        def cold(text: str) -> int:
            if len(text) <= MAX_COMPACT_CHARACTERS and DEFAULT_ENCODING not in _OPENED:
                counted = compact.count(text)
                if counted is not None:
                    self._cold = True  # warm() opens tiktoken once this call has returned
                    return counted
            return self._open_tokenizer(compact)(text)  # and it counts from now on

        return cold

    def _open_tokenizer(self, compact: TokenCounter) -> TokenCounter:
        """tiktoken's counter (opened now, in this thread), which counts from now on; the
        compact one stays when tiktoken cannot open the encoding (it counts the same)."""
        name, counter = _counter(self._model)
        chosen = counter if name == f"tiktoken:{DEFAULT_ENCODING}" else compact
        self._texts = chosen
        return chosen

    def warm(self) -> None:
        """Open tiktoken in a background thread if this counter has counted with the compact
        table (a store calls it after every call returned, so the cold start's first save
        does not wait for it; a call that counted nothing, such as creating the chat, starts
        nothing, so the first save does not meet the open either); one thread a process,
        whatever the number of stores."""
        if self._cold:
            _open_in_background()

    def _role_tokens(self, role: str) -> int:
        found = self._roles.get(role)
        if found is None:
            assert self._texts is not None
            found = self._roles[role] = self._texts(role)
            if len(self._roles) > 64:  # bounded: roles are caller strings
                self._roles.clear()
        return found

    def __call__(self, message: Mapping[str, Any]) -> int:
        if self._texts is None:
            self.load()
        assert self._texts is not None
        return message_tokens(message, self._texts, self._role_tokens)


def message_counter(
    model: str | None = None, estimate_tokens: TokenCounter | None = None
) -> MessageCounting:
    """A function counting one message's tokens for ``model`` (see :class:`MessageCounting`)."""
    if estimate_tokens is not None and not callable(estimate_tokens):
        raise ValidationError(
            f"estimate_tokens must be a function of a text, got {estimate_tokens!r}"
        )
    if model is not None and not isinstance(model, str):
        raise ValidationError(f"model must be a model name or None, got {model!r}")
    return MessageCounting(model, estimate_tokens)


async def loaded(*counters: object) -> None:
    """Load, in a worker thread, the tokenizers of ``counters`` that are not loaded yet (those
    that are not :class:`MessageCounting`, a caller's own functions, are left alone): what an
    async path awaits before it counts, so the loop never waits on tiktoken's tables."""
    for counter in counters:
        if isinstance(counter, MessageCounting) and not counter.loaded:
            import asyncio  # here: a sync process never loads it for this module

            await asyncio.to_thread(counter.load)
