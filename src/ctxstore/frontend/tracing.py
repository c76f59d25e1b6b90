"""The span of a ``chat()`` turn: ``ctxstore chat``, with the OpenTelemetry GenAI conventions'
attributes, open from ``chat()`` until the answer ends (done, stopped or failed); the store
operations of the turn are its children. The chat id is on it (``gen_ai.conversation.id``)
under the store's rule for chat ids on spans (``Settings.trace_chat_ids``, else its HMAC under
``trace_key``, else absent). Nothing of the messages' text is.

ctxstore makes no span of a model call: that is the model client's to trace (litellm has an
OpenTelemetry callback). The call runs while this span is current.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any, TypeVar

from ctxstore._core import telemetry
from ctxstore.engine.core import EngineCore
from ctxstore.frontend.plan import ChatPlan

T = TypeVar("T")

_ENDED = ("done", "stopped", "failed")


def turn_span(core: EngineCore, plan: ChatPlan) -> telemetry.Opened | None:
    """The turn's span, started (None when tracing is off)."""
    if not telemetry.tracing():
        return None
    model = plan.model
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        **telemetry.chat_attributes(core.store_state, core.chat_id, "gen_ai.conversation.id"),
    }
    provider, slash, _ = model.partition("/")
    if slash and provider:
        attributes["gen_ai.provider.name"] = provider
    return telemetry.opened("ctxstore chat", attributes)


def ended(turn: telemetry.Opened | None, plan: ChatPlan, error: BaseException | None) -> None:
    """End the turn's span with what the answer came to."""
    if turn is None:
        return
    attributes: dict[str, Any] = {
        "ctxstore.state": plan.state,
        "ctxstore.model_calls": plan.model_calls,
        "gen_ai.response.id": plan.answer_id,
    }
    if plan.finish_reasons:
        attributes["gen_ai.response.finish_reasons"] = list(plan.finish_reasons)
    usage = plan.usage
    for counter in ("input_tokens", "output_tokens"):
        if counter in usage:
            attributes[f"gen_ai.usage.{counter}"] = usage[counter]
    turn.end(attributes, error if error is not None else plan.error)


def traced_steps(
    turn: telemetry.Opened | None, plan: ChatPlan, items: Generator[T, None, None]
) -> Generator[T, None, None]:
    """The chunks of a sync answer, the turn's span current while each is made, ended with
    the answer."""
    if turn is None:
        return items
    return _ending(turn, plan, telemetry.during(turn, items))


def _ending(turn: telemetry.Opened, plan: ChatPlan, items: Iterator[T]) -> Generator[T, None, None]:
    try:
        yield from items
    finally:
        if plan.state in _ENDED:
            ended(turn, plan, None)


def atraced_steps(
    turn: telemetry.Opened | None, plan: ChatPlan, items: AsyncIterator[T]
) -> AsyncIterator[T]:
    """The async form of :func:`traced_steps`."""
    if turn is None:
        return items
    return _aending(turn, plan, telemetry.aduring(turn, items))


async def _aending(
    turn: telemetry.Opened, plan: ChatPlan, items: AsyncIterator[T]
) -> AsyncIterator[T]:
    try:
        async for item in items:
            yield item
    finally:
        await items.aclose()  # type: ignore[attr-defined]
        if plan.state in _ENDED:
            ended(turn, plan, None)
