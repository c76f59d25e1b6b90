"""What OpenTelemetry costs a save: appends timed in fresh processes, interleaved, with no
provider (the API installed: its no-ops), with a recording SDK provider (spans to an in-memory
exporter through the SDK's ``SimpleSpanProcessor``, which exports each span as it ends, or its
``BatchSpanProcessor``, which queues it for a background thread: what production uses; metrics
to an in-memory reader), and without the API loaded at all as the floor.

    .venv/bin/python bench/otel.py [REDIS_URL]   # default: a redis-server it starts
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pinning import pin_to_one_cpu

CHILD = r"""
import sys, time
mode, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "off":
    sys.modules["opentelemetry"] = None  # the API not installed
if mode in ("simple", "batch", "sdk floor"):
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor if mode == "simple" else BatchSpanProcessor
    provider.add_span_processor(processor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
import ctxstore
if mode == "sdk floor":
    # What any instrumentation of a save pays the SDK: one span with the same attributes and
    # one histogram record, made by hand around an untraced append.
    from ctxstore._core import telemetry
    telemetry.active = lambda: None
    tracer = trace.get_tracer("floor")
    duration = metrics.get_meter("floor").create_histogram("floor.duration")
    attributes = {"db.system.name": "redis", "db.operation.name": "append",
                  "ctxstore.namespace": "n", "server.address": "127.0.0.1", "server.port": 1}
    labels = {"operation": "append", "outcome": "applied"}
namespace = f"bench{mode.replace(' ', '')}{time.time_ns()}"
store = ctxstore.connect(url, namespace=namespace, estimate_tokens=len)
user = store.for_user("u")
user.upsert_chat("c")
head = None
message = [{"role": "user", "content": "hello there"}]
for _ in range(200):
    head = user.append("c", "main", message, expected_head=head).head_message_id
started = time.perf_counter()
if mode == "sdk floor":
    for _ in range(count):
        begun = time.perf_counter()
        span = tracer.start_span("ctxstore append", kind=trace.SpanKind.CLIENT,
                                 attributes=attributes)
        head = user.append("c", "main", message, expected_head=head).head_message_id
        span.set_attributes({"ctxstore.round_trips": 1, "ctxstore.outcome": "applied",
                             "ctxstore.script": "append"})
        span.end()
        duration.record(time.perf_counter() - begun, labels)
else:
    for _ in range(count):
        head = user.append("c", "main", message, expected_head=head).head_message_id
print((time.perf_counter() - started) / count * 1e6)
if mode in ("simple", "batch", "sdk floor"):
    exporter.clear()
"""


def main() -> None:
    print(pin_to_one_cpu())  # the server and the children too: no cross-CPU wake-ups
    server = None
    if len(sys.argv) > 1:
        url = sys.argv[1]
    else:
        folder = Path(tempfile.mkdtemp())
        port = 26399
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
             "--dir", str(folder)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"redis://127.0.0.1:{port}"
        import time

        time.sleep(0.5)
    found: dict[str, list[float]] = {
        "off": [], "no provider": [], "sdk floor": [], "simple": [], "batch": []
    }  # fmt: skip
    try:
        for _round in range(10):
            modes = (
                ("off", "off"), ("noop", "no provider"), ("sdk floor", "sdk floor"),
                ("simple", "simple"), ("batch", "batch"),
            )  # fmt: skip
            turn = _round % len(modes)  # each mode goes first in turn
            for mode, label in modes[turn:] + modes[:turn]:
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, mode, url, "2000"],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                found[label].append(float(done.stdout.strip()))
    finally:
        if server is not None:
            server.terminate()
    floor = statistics.median(found["off"])
    for label, values in found.items():
        median = statistics.median(values)
        print(f"{label:12s} median {median:7.1f} us/append  ratio to off {median / floor:.3f}")
    sdk = statistics.median(found["sdk floor"])
    for label in ("simple", "batch"):
        median = statistics.median(found[label])
        print(f"{label:12s} ratio to the SDK floor (a hand-made span + record) {median / sdk:.3f}")


if __name__ == "__main__":
    main()
