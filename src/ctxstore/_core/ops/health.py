"""``ping``: whether the server answers, how fast, which storage format its keyspace is marked
with and whether it may evict keys: what a readiness probe and an operator's first look ask.

One request: ``PING``, the marker and ``CONFIG GET maxmemory-policy``, pipelined (on a
Cluster the pipeline reaches the nodes that hold them, at once). It is timed whole.
"""

from __future__ import annotations

import time
from typing import Any

from ctxstore._core.protocol import Call, Operation, command_call, raise_first_error
from ctxstore._core.server_checks import eviction_policy_call, marker_call, marker_of, policy_of
from ctxstore._core.state import StoreState
from ctxstore.errors import CtxStoreError
from ctxstore.models import Health


def ping(state: StoreState) -> Operation[Health]:
    calls: tuple[Call[Any], ...] = (
        command_call(("PING",), keys=()),
        marker_call(state),
        eviction_policy_call(),
    )
    started = time.perf_counter()
    outcomes: tuple[Any, ...] = tuple((yield calls))
    round_trip = time.perf_counter() - started
    raise_first_error(outcomes[:2])
    marker = marker_of(outcomes[1])
    policy = None if isinstance(outcomes[2], CtxStoreError) else policy_of(outcomes[2])
    return Health(
        round_trip=round_trip,
        format=marker.format,
        format_release=marker.release,
        eviction_policy=policy,
    )
