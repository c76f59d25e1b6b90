"""litellm, imported on first use by what needs it (titles, token counts, summaries, prices).

litellm takes seconds to import and, unless told otherwise, fetches its model price map over
the network on import. ``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` here so it uses the
map bundled in the package: closed networks and serverless cold starts never wait on it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from ctxstore.errors import ConfigurationError


def import_litellm() -> Any:
    """The litellm module (imported now if it was not), with its bundled price map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as error:
        raise ConfigurationError(
            "this needs litellm, which is not installed: pip install 'ctxstore[llm]'"
        ) from error
    return litellm


#: The models litellm has counted a text for in this process (see :func:`warm_litellm`).
_WARMED: set[str] = set()
#: What litellm's first call for a model with no name known is warmed with.
_DEFAULT_MODEL = "gpt-4o-mini"


def warm_litellm(model: str | None = None) -> Any:
    """litellm imported, and the tokenizer it counts ``model``'s tokens with loaded: its first
    completion of a model computes the call's cost, which counts tokens, which reads that
    tokenizer's tables (a quarter of a second), in the caller's thread; and its first call
    builds its parameter and reply models (another fifth of a second). Warmed here, once a
    model, so that an async caller can do it in a worker thread."""
    litellm = import_litellm()
    key = model or _DEFAULT_MODEL
    if key not in _WARMED:
        # A model litellm cannot count: its first call counts nothing either.
        with contextlib.suppress(Exception):
            litellm.token_counter(model=key, text="warm")
        _build_deferred_models()
        _WARMED.add(key)
    return litellm


def _build_deferred_models() -> None:
    """Build the pydantic models litellm defers to first use (``DEFER_PYDANTIC_BUILD``): its
    first call builds the ones it meets (a fifth of a second, in the caller's thread, on the
    event loop of an async caller). All of litellm's take under half a second, here."""
    try:
        from pydantic import BaseModel
    except ImportError:
        return
    pending: list[type[BaseModel]] = [BaseModel]
    seen: set[type[BaseModel]] = set()
    while pending:
        for model in pending.pop().__subclasses__():
            if model in seen:
                continue
            seen.add(model)
            pending.append(model)
            if model.__module__.startswith("litellm") and not model.__pydantic_complete__:
                # pydantic warns about litellm's own typing choices while it builds: not ours
                # to report, and not the caller's.
                with contextlib.suppress(Exception), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.model_rebuild()


async def aimport_litellm(model: str | None = None) -> Any:
    """:func:`import_litellm` for async code (and :func:`warm_litellm` of ``model``): the
    first import (seconds) and the tokenizer's tables load in a worker thread, so the event
    loop serves other requests meanwhile."""
    found = sys.modules.get("litellm")
    if found is not None and (model or _DEFAULT_MODEL) in _WARMED:
        return found
    import asyncio

    return await asyncio.to_thread(warm_litellm, model)


def reply_text(response: Any) -> str:
    """The text of the first choice of a litellm / OpenAI response object or a plain response
    dict; ``TypeError`` when the reply holds no text."""
    choice = response["choices"][0] if isinstance(response, Mapping) else response.choices[0]
    reply = choice["message"] if isinstance(choice, Mapping) else choice.message
    content = reply["content"] if isinstance(reply, Mapping) else reply.content
    if not isinstance(content, str):
        raise TypeError(f"reply content is {content!r}, not text")
    return content
