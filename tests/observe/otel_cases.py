"""(Run by test_otel.py in a process of its own: a tracer provider is set once a process.)
OpenTelemetry, with the SDK's in-memory exporters: a span per store operation named after it,
the database attributes, a conflict's outcome, no chat id unless opted in, the trace a
compaction job carries from the save to the worker's span, the metrics after a known sequence.
On the embedded store and a redis-server."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ctxstore
from ctxstore.errors import HeadConflictError
from ctxstore.models import CompactionTrigger
from ctxstore.worker import Worker
from tests.support.counting import letters

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


@pytest.fixture(params=["memory", "redis"])
def url(request: pytest.FixtureRequest, namespace: str) -> str:
    if request.param == "memory":
        return f"memory://{namespace}"
    return str(request.getfixturevalue("redis_server").url)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    EXPORTER.clear()
    return EXPORTER


def ours(exporter: InMemorySpanExporter, namespace: str) -> list[Any]:
    return [
        span
        for span in exporter.get_finished_spans()
        if span.attributes.get("ctxstore.namespace") == namespace
    ]


def counter(name: str, **labels: str) -> float:
    data = READER.get_metrics_data()
    total = 0.0
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    if all(point.attributes.get(k) == v for k, v in labels.items()):
                        total += getattr(point, "value", getattr(point, "count", 0))
    return total


def test_each_operation_is_a_span_named_after_it_with_the_database_attributes(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    with ctxstore.connect(url, namespace=namespace) as store:
        alice = store.for_user("alice")
        alice.upsert_chat("c1")
        alice.append(
            "c1", "main", [{"role": "user", "content": "secret words"}], expected_head=None
        )
        alice.load_branch("c1")
        list(store.admin().export_chat("c1"))
    found = {span.name: span for span in ours(spans, namespace)}
    assert {"ctxstore upsert_chat", "ctxstore append", "ctxstore load_branch",
            "ctxstore export_chat"} <= set(found)  # fmt: skip
    append = found["ctxstore append"]
    assert append.kind == trace.SpanKind.CLIENT
    attributes = dict(append.attributes)
    assert attributes["db.system.name"] == "redis"
    assert attributes["db.operation.name"] == "append"
    assert attributes["ctxstore.script"] == "append"
    assert attributes["ctxstore.round_trips"] >= 1
    assert attributes["ctxstore.outcome"] == "applied"
    assert "server.address" in attributes
    assert "ctxstore.chat" not in attributes  # not opted in, no key
    for span in ours(spans, namespace):  # no message text anywhere
        text = repr(dict(span.attributes)) + repr([event.attributes for event in span.events])
        assert "secret words" not in text
    assert found["ctxstore export_chat"].attributes["ctxstore.round_trips"] >= 1


def test_a_conflict_is_the_spans_outcome_and_error_and_is_counted(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    before = counter("ctxstore.conflicts", operation="append")
    rebases = counter("ctxstore.rebases", operation="append")
    with ctxstore.connect(url, namespace=namespace) as store:
        alice = store.for_user("alice")
        alice.upsert_chat("c1")
        alice.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
        with pytest.raises(HeadConflictError):
            alice.append("c1", "main", [{"role": "user", "content": "b"}], expected_head=None)
        alice.append(
            "c1", "main", [{"role": "user", "content": "c"}], expected_head=None,
            on_conflict="rebase",
        )  # fmt: skip
    appends = [span for span in ours(spans, namespace) if span.name == "ctxstore append"]
    outcomes = [span.attributes["ctxstore.outcome"] for span in appends]
    assert outcomes == ["applied", "conflict", "rebased"]
    failed = appends[1]
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert failed.attributes["error.type"] == "HeadConflictError"
    assert counter("ctxstore.conflicts", operation="append") == before + 2
    assert counter("ctxstore.rebases", operation="append") == rebases + 1
    assert counter("ctxstore.operation.duration", operation="append", outcome="conflict") >= 1


def test_the_chat_id_is_on_a_span_only_when_opted_in_else_its_hmac_under_the_key(
    namespace: str, spans: InMemorySpanExporter
) -> None:
    for options, expected in (
        ({"trace_chat_ids": True}, "c1"),
        ({"trace_key": "k"}, hmac.new(b"k", b"c1", hashlib.sha256).hexdigest()),
    ):
        EXPORTER.clear()
        with ctxstore.connect(f"memory://{namespace}", namespace=namespace, **options) as store:
            store.for_user("alice").upsert_chat("c1")
        (span,) = [s for s in ours(spans, namespace) if s.name == "ctxstore upsert_chat"]
        assert span.attributes["ctxstore.chat"] == expected


def test_the_compaction_job_joins_the_trace_of_the_save_that_enqueued_it(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    store = ctxstore.connect(url, namespace=namespace, estimate_tokens=letters).admin()
    store.upsert_chat("c1", "alice")
    tracer = trace.get_tracer("test")
    head = None
    with tracer.start_as_current_span("request") as request:
        for number in range(6):
            head = store.append(
                "c1", "main", [{"role": "user", "content": f"message {number}"}],
                expected_head=head,
                compaction=CompactionTrigger(soft_tokens=1, min_recent_messages=2),
            ).head_message_id  # fmt: skip
    done = counter("ctxstore.jobs", result="done")
    Worker(url, namespaces=[namespace], compactify=lambda _m: "summary", poll_ms=20,
           estimate_tokens=letters).run(burst=True)  # fmt: skip
    store.close()
    jobs = [span for span in spans.get_finished_spans() if span.name == "ctxstore job"]
    assert jobs
    assert {span.context.trace_id for span in jobs} == {request.get_span_context().trace_id}
    assert jobs[0].kind == trace.SpanKind.CONSUMER
    assert counter("ctxstore.jobs", result="done") >= done + 1


def test_a_plan_is_one_span_its_operations_its_round_trips(
    namespace: str, spans: InMemorySpanExporter
) -> None:
    with ctxstore.connect(f"memory://{namespace}", namespace=namespace) as store:
        admin = store.admin()
        admin.upsert_chat("c1", "alice")
        admin.sweep()
    swept = [s for s in ours(spans, namespace) if s.name.startswith("ctxstore sweep")]
    assert len(swept) == 1
    assert swept[0].attributes["ctxstore.round_trips"] >= 2
    assert not [s for s in ours(spans, namespace) if s.name.startswith("ctxstore _")]
