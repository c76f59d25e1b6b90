"""litellm, imported on first use by what needs it (titles, token counts, summaries, prices).

litellm takes seconds to import and, unless told otherwise, fetches its model price map over
the network on import. ``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` here so it uses the
map bundled in the package: closed networks and serverless cold starts never wait on it.
"""

from __future__ import annotations

import os
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


def reply_text(response: Any) -> str:
    """The text of the first choice of a litellm / OpenAI response object or a plain response
    dict; ``TypeError`` when the reply holds no text."""
    choice = response["choices"][0] if isinstance(response, Mapping) else response.choices[0]
    reply = choice["message"] if isinstance(choice, Mapping) else choice.message
    content = reply["content"] if isinstance(reply, Mapping) else reply.content
    if not isinstance(content, str):
        raise TypeError(f"reply content is {content!r}, not text")
    return content
