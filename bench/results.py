"""The figures a run produces, as plain dataclasses that serialize to JSON as they are.

A latency figure never travels without the floors measured in the same loop: the machine is
noisy, and the ratio of medians is the figure that means something from one run to another.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from timing import Interleaved, Stat


@dataclass(frozen=True)
class Timed:
    """One measured operation next to its floors, from the same interleaved loop.

    ``ratio_floor`` names the floor the headline ratio is quoted against; ``ratios`` holds the
    ratio of medians to every floor of the loop. ``extra`` holds figures specific to the
    scenario (server time per message, scripts per call, ...).
    """

    scenario: str
    operation: str
    backend: str
    length: int
    call: Stat
    floors: dict[str, Stat]
    ratio_floor: str
    ratios: dict[str, float]
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.ratios[self.ratio_floor]


def timed(
    scenario: str,
    operation: str,
    backend: str,
    length: int,
    loop: Interleaved,
    ratio_floor: str,
    extra: dict[str, float] | None = None,
) -> Timed:
    ratios = {name: loop.call.median_us / stat.median_us for name, stat in loop.floors.items()}
    return Timed(
        scenario,
        operation,
        backend,
        length,
        loop.call,
        loop.floors,
        ratio_floor,
        ratios,
        extra or {},
    )


@dataclass(frozen=True)
class Skipped:
    """A scenario (or peer) that did not run, and the one-line reason."""

    reason: str


@dataclass
class Results:
    """Everything one run measured, keyed by scenario name, plus where it ran."""

    environment: dict[str, Any]
    scale: dict[str, Any]
    scenarios: dict[str, Any] = field(default_factory=dict)

    def rows(self, scenario: str) -> list[Timed]:
        found = self.scenarios.get(scenario)
        if isinstance(found, list):
            return [row for row in found if isinstance(row, Timed)]
        return []


def _plain(value: Any) -> Any:
    """Dataclasses to dicts (with every ratio), tuples to lists, dict keys to strings."""
    if isinstance(value, Timed):
        data = asdict(value)
        data["ratio"] = value.ratio
        return data
    if hasattr(value, "__dataclass_fields__"):
        return {key: _plain(item) for key, item in asdict(value).items()}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def to_json(results: Results) -> dict[str, Any]:
    return {
        "environment": results.environment,
        "scale": _plain(results.scale),
        "scenarios": {name: _plain(value) for name, value in results.scenarios.items()},
    }


def write_json(results: Results, path: Path) -> None:
    text = json.dumps(to_json(results), indent=2, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
