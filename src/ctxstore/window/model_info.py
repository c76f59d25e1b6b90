"""A model's context window and prices, from the model map litellm ships, read offline.

litellm keeps a JSON map of models (context and output limits, prices per token, provider) in
its package. Reading that file directly takes milliseconds where ``import litellm`` takes
seconds and, unless told otherwise, fetches a newer map over the network; so this module finds
the file with ``importlib.util.find_spec`` and never imports litellm. Without litellm installed
every lookup is None.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

_MAP_FILE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class ModelInfo:
    """What litellm's map says of one model (None where it says nothing)."""

    model: str
    provider: str | None
    max_input_tokens: int | None
    max_output_tokens: int | None
    input_cost_per_token: float | None
    output_cost_per_token: float | None

    def input_cost(self, tokens: int) -> float | None:
        """USD for ``tokens`` input tokens (None without a price)."""
        if self.input_cost_per_token is None:
            return None
        return tokens * self.input_cost_per_token


@lru_cache(maxsize=1)
def _model_map() -> dict[str, Any]:
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    for location in spec.submodule_search_locations:
        path = Path(location) / _MAP_FILE
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
    return {}


def model_info(model: str) -> ModelInfo | None:
    """The map's entry for ``model`` (also found without its ``provider/`` prefix)."""
    found = _model_map()
    entry = found.get(model)
    name = model
    if not isinstance(entry, dict) and "/" in model:
        name = model.split("/", 1)[1]
        entry = found.get(name)
    if not isinstance(entry, dict):
        return None

    def number(key: str) -> Any:
        value = entry.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    max_input = number("max_input_tokens")
    max_output = number("max_output_tokens")
    provider = entry.get("litellm_provider")
    return ModelInfo(
        model=model,
        provider=provider if isinstance(provider, str) else None,
        max_input_tokens=int(max_input) if max_input is not None else None,
        max_output_tokens=int(max_output) if max_output is not None else None,
        input_cost_per_token=number("input_cost_per_token"),
        output_cost_per_token=number("output_cost_per_token"),
    )
