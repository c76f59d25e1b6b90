"""What OpenTelemetry costs a save: appends timed in fresh processes, interleaved, with no
provider (the API installed: its no-ops), with a recording SDK provider (spans to an in-memory
exporter, metrics to an in-memory reader), and without the API loaded at all as the floor.

    .venv/bin/python bench/otel.py [REDIS_URL]   # default: a redis-server it starts
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import sys, time
mode, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "off":
    sys.modules["opentelemetry"] = None  # the API not installed
if mode == "recording":
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
import ctxstore
store = ctxstore.connect(url, namespace=f"bench{mode}{time.time_ns()}", estimate_tokens=len)
user = store.for_user("u")
user.upsert_chat("c")
head = None
message = [{"role": "user", "content": "hello there"}]
for _ in range(200):
    head = user.append("c", "main", message, expected_head=head).head_message_id
started = time.perf_counter()
for _ in range(count):
    head = user.append("c", "main", message, expected_head=head).head_message_id
print((time.perf_counter() - started) / count * 1e6)
if mode == "recording":
    exporter.clear()
"""


def main() -> None:
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
    found: dict[str, list[float]] = {"off": [], "no provider": [], "recording": []}
    try:
        for _round in range(5):
            modes = (("off", "off"), ("noop", "no provider"), ("recording", "recording"))
            for mode, label in modes:
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


if __name__ == "__main__":
    main()
