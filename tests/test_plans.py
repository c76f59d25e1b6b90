"""The plan vocabulary (``ctxstore._base.plans``): one closed set of steps and one pair of
drivers, through which every multi-step flow runs; errors, closes and cancellations reach the
plan at the step that was running, so its cleanup runs before the error goes on."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

from ctxstore._base.plans import (
    Effect,
    Emit,
    Pause,
    Plan,
    Run,
    adrive,
    aperformer,
    arun_plan,
    drive,
    performer,
    run_plan,
)
from ctxstore.errors import ConfigurationError

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxstore"


def ran(log: list[str]) -> Any:
    """A store ``run`` that records each operation (a generator, as the stores take them)."""

    def run(operation: Any) -> Any:
        result = next(operation)
        log.append(str(result))
        return result

    return run


def operation(name: str) -> Any:
    yield name


def cleanup_plan(log: list[str]) -> Plan[str]:
    try:
        first = yield Run(operation("take"))
        answer = yield Effect("ask")
        yield Pause(0)
        return f"{first}+{answer}"
    finally:
        yield Run(operation("give back"))


def test_a_plan_runs_its_steps_and_returns_its_result() -> None:
    log: list[str] = []
    assert run_plan(cleanup_plan(log), performer(ran(log), lambda _request: "yes")) == "take+yes"
    assert log == ["take", "give back"]


def test_an_effect_nobody_provides_is_a_clear_error_and_the_plan_cleans_up() -> None:
    log: list[str] = []
    with pytest.raises(ConfigurationError, match="'ask'"):
        run_plan(cleanup_plan(log), performer(ran(log)))
    assert log == ["take", "give back"]


def test_a_failing_step_is_thrown_into_the_plan_at_that_step() -> None:
    log: list[str] = []

    def boom(request: Any) -> Any:
        raise KeyError(request)

    with pytest.raises(KeyError):
        run_plan(cleanup_plan(log), performer(ran(log), boom))
    assert log == ["take", "give back"]


def emitting(log: list[str]) -> Plan[None]:
    try:
        for value in range(3):
            yield Emit(value)
            log.append(f"after {value}")
    finally:
        yield Run(operation("closed"))


def test_a_caller_that_stops_reading_closes_the_plan_at_its_emit() -> None:
    log: list[str] = []
    values = drive(emitting(log), performer(ran(log)))
    assert next(values) == 0
    values.close()
    assert log == ["closed"]


def test_run_plan_refuses_a_plan_that_hands_values_out() -> None:
    log: list[str] = []
    with pytest.raises(ConfigurationError, match="iterate"):
        run_plan(emitting(log), performer(ran(log)))
    assert log == ["closed"]


async def test_the_async_driver_throws_a_cancellation_into_the_plan() -> None:
    log: list[str] = []
    started = asyncio.Event()

    async def run(operation: Any) -> Any:
        return ran(log)(operation)

    async def slow(request: Any) -> Any:
        started.set()
        await asyncio.sleep(10)

    task = asyncio.ensure_future(arun_plan(cleanup_plan(log), aperformer(run, slow)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["take", "give back"]


async def test_the_async_drivers_hand_values_out_and_return_results() -> None:
    log: list[str] = []

    async def run(operation: Any) -> Any:
        return ran(log)(operation)

    assert [value async for value in adrive(emitting(log), aperformer(run))] == [0, 1, 2]
    assert await arun_plan(cleanup_plan(log), aperformer(run, lambda _r: "yes")) == "take+yes"


def test_a_sync_shell_refuses_an_effect_that_needs_an_event_loop() -> None:
    async def answer() -> str:
        return "late"

    log: list[str] = []
    with pytest.raises(ConfigurationError, match="event loop"):
        run_plan(cleanup_plan(log), performer(ran(log), lambda _request: answer()))
    assert log == ["take", "give back"]


def drivers_of_generators(path: Path) -> list[int]:
    """Lines of ``path`` that send into or throw into a generator: a driver's loop."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("send", "throw", "asend", "athrow")
    ]


def test_only_the_plan_drivers_and_the_call_exchange_drive_generators() -> None:
    """One place drives plans (``_base/plans.py``) and one drives a single operation's calls
    (``_core/protocol.py``'s exchange): a new loop anywhere else is a second protocol."""
    # telemetry's watched_plan passes a plan's steps through unchanged (to time it as one).
    allowed = {
        SRC / "_base" / "plans.py",
        SRC / "_core" / "protocol.py",
        SRC / "_core" / "telemetry.py",
    }
    found = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if path not in allowed and (lines := drivers_of_generators(path))
    }
    assert found == {}
