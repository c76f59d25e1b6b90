"""What a recording OpenTelemetry SDK costs a save, interleaved in one process (the noise of
fresh processes is larger than the difference): blocks of appends untraced, with a span and a
histogram record made by hand around each untraced append (the SDK floor: what any
instrumentation of a save pays the SDK), and traced by ctxstore, rotating which goes first.
Client and server are pinned to one CPU.

    python bench/otel_recording.py [--processor batch|simple] [--sample RATIO] [--rounds 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_redis import local_redis
from pinning import pin_to_one_cpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processor", choices=("batch", "simple"), default="batch")
    parser.add_argument("--sample", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=300)
    options = parser.parse_args()
    print(pin_to_one_cpu())
    exporter = install_sdk(options.processor, options.sample)
    found = measure(exporter, options.rounds, options.block)
    base = statistics.median(found["untraced"])
    print(f"processor {options.processor}, sampled {options.sample}")
    for name, values in found.items():
        median = statistics.median(values)
        print(f"{name:10s} median {median:7.1f} us/append  ratio to untraced {median / base:.3f}")
    floor_median = statistics.median(found["sdk floor"])
    print(f"traced / sdk floor {statistics.median(found['traced']) / floor_median:.3f}")


def install_sdk(processor_name: str, sample: float) -> Any:
    """A recording tracer provider (spans to memory) and meter provider, set globally."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    sampler = ParentBased(TraceIdRatioBased(sample)) if sample < 1 else None
    provider = TracerProvider(sampler=sampler)
    exporter = InMemorySpanExporter()
    processor = BatchSpanProcessor if processor_name == "batch" else SimpleSpanProcessor
    provider.add_span_processor(processor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return exporter


def measure(exporter: Any, rounds: int, block: int) -> dict[str, list[float]]:
    """µs per append of each kind, per block, interleaved."""
    from opentelemetry import metrics, trace

    import ctxstore
    from ctxstore._core import telemetry

    traced_active = telemetry.active
    tracer = trace.get_tracer("floor")
    duration = metrics.get_meter("floor").create_histogram("floor.duration")
    attributes = {
        "db.system.name": "redis",
        "db.operation.name": "append",
        "ctxstore.namespace": "n",
        "server.address": "127.0.0.1",
        "server.port": 1,
    }
    labels = {"operation": "append", "outcome": "applied"}
    ended = {"ctxstore.round_trips": 1, "ctxstore.outcome": "applied", "ctxstore.script": "append"}
    with local_redis() as server:
        store = ctxstore.connect(server.url, namespace="otel", estimate_tokens=len)
        user = store.for_user("u")
        user.upsert_chat("c")
        message = [{"role": "user", "content": "hello there"}]
        head: list[str | None] = [None]

        def append() -> None:
            head[0] = user.append("c", "main", message, expected_head=head[0]).head_message_id

        def untraced(count: int) -> None:
            telemetry.active = lambda: None
            for _ in range(count):
                append()

        def floor(count: int) -> None:
            telemetry.active = lambda: None
            for _ in range(count):
                begun = time.perf_counter()
                span = tracer.start_span(
                    "ctxstore append", kind=trace.SpanKind.CLIENT, attributes=attributes
                )
                append()
                span.set_attributes(ended)
                span.end()
                duration.record(time.perf_counter() - begun, labels)

        def traced(count: int) -> None:
            telemetry.active = traced_active
            for _ in range(count):
                append()

        kinds: dict[str, Callable[[int], None]] = {
            "untraced": untraced, "sdk floor": floor, "traced": traced
        }  # fmt: skip
        found: dict[str, list[float]] = {name: [] for name in kinds}
        for run in kinds.values():
            run(block)  # warm
        names = list(kinds)
        for number in range(rounds):
            turn = number % len(names)
            for name in names[turn:] + names[:turn]:
                started = time.perf_counter()
                kinds[name](block)
                found[name].append((time.perf_counter() - started) / block * 1e6)
            exporter.clear()
        store.close()
    return found


if __name__ == "__main__":
    main()
