"""(Run by test_otel.py in a process of its own: a tracer provider is set once a process.)
OpenTelemetry, with the SDK's in-memory exporters: a span per store operation named after it,
the database attributes, a conflict's outcome, no chat id unless opted in, the trace a
compaction job carries from the save to the worker's span, the metrics after a known sequence.
On the embedded store and a redis-server."""

from __future__ import annotations

import contextlib
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


def test_the_engines_resolve_and_save_are_spans_over_their_store_operations(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    with ctxstore.connect(url, namespace=namespace, trace_chat_ids=True) as store:
        engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        engine.set(ctxstore.user("hello"), ctxstore.assistant("hi"))
        engine.save()
        engine.resolve()
    found = {span.name: span for span in ours(spans, namespace)}
    save, resolve = found["ctxstore engine.save"], found["ctxstore engine.resolve"]
    assert save.attributes["ctxstore.chat"] == "c1"
    assert save.attributes["ctxstore.messages"] == 2
    assert save.attributes["ctxstore.forked"] is False
    assert resolve.attributes["ctxstore.messages"] == 2
    children = [
        span.name
        for span in ours(spans, namespace)
        if span.parent is not None and span.parent.span_id == save.context.span_id
    ]
    assert children
    assert all(name.startswith("ctxstore ") for name in children)
    assert any(
        span.parent is not None and span.parent.span_id == resolve.context.span_id
        for span in ours(spans, namespace)
    )


async def test_the_async_engines_spans_are_the_same(
    namespace: str, spans: InMemorySpanExporter
) -> None:
    async with ctxstore.connect_async(f"memory://{namespace}", namespace=namespace) as store:
        engine = ctxstore.AsyncContextEngine(store=store, chat_id="c1", user_id="alice")
        engine.set(ctxstore.user("hello"))
        await engine.save()
        await engine.resolve()
    names = [span.name for span in ours(spans, namespace)]
    assert "ctxstore engine.save" in names
    assert "ctxstore engine.resolve" in names
    (save,) = [span for span in ours(spans, namespace) if span.name == "ctxstore engine.save"]
    assert "ctxstore.chat" not in save.attributes  # not opted in, no key


def _ui_user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_a_chat_turn_is_a_span_with_the_genai_attributes_over_its_operations(
    shell: str, namespace: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from tests.support.scripted_model import ScriptedModel

    ScriptedModel(["Alfama and the castle."]).install(monkeypatch)
    url = f"memory://{namespace}"
    options: dict[str, Any] = {"namespace": namespace, "trace_key": "k"}
    if shell == "sync":
        with ctxstore.connect(url, **options) as store:
            engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
            chunks = list(ctxstore.chat(engine, [_ui_user("secret words")], model="openai/gpt-x"))
    else:

        async def answer() -> list[Any]:
            async with ctxstore.connect_async(url, **options) as store:
                engine = ctxstore.AsyncContextEngine(store=store, chat_id="c1", user_id="alice")
                stream = await ctxstore.achat(
                    engine, [_ui_user("secret words")], model="openai/gpt-x"
                )
                return [chunk async for chunk in stream]

        chunks = asyncio.run(answer())
    assert chunks[-1]["type"] == "finish"
    (turn,) = [span for span in ours(spans, namespace) if span.name == "ctxstore chat"]
    attributes = dict(turn.attributes)
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "openai/gpt-x"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.conversation.id"] == hmac.new(b"k", b"c1", hashlib.sha256).hexdigest()
    assert attributes["ctxstore.state"] == "done"
    assert attributes["ctxstore.model_calls"] == 1
    assert attributes["gen_ai.usage.output_tokens"] > 0
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["stop"]
    inside = [
        span.name
        for span in ours(spans, namespace)
        if span.parent is not None and span.parent.span_id == turn.context.span_id
    ]
    assert "ctxstore save+begin_stream" in inside  # the question, in the round trip of the stream
    assert "ctxstore save" in inside  # the answer
    for span in spans.get_finished_spans():
        assert "secret words" not in repr(dict(span.attributes or {}))


def test_a_chat_turn_stopped_early_ends_its_span_as_stopped(
    namespace: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.scripted_model import ScriptedModel

    ScriptedModel(["one two three four five six seven"], piece=1).install(monkeypatch)
    with ctxstore.connect(f"memory://{namespace}", namespace=namespace) as store:
        engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        stream = ctxstore.chat(engine, [_ui_user("hi")], model="gpt-x")
        for chunk in stream:
            if chunk["type"] == "text-delta":
                break
        stream.close()
    (turn,) = [span for span in ours(spans, namespace) if span.name == "ctxstore chat"]
    assert turn.attributes["ctxstore.state"] == "stopped"
    inside = [
        span.name
        for span in ours(spans, namespace)
        if span.parent is not None and span.parent.span_id == turn.context.span_id
    ]
    assert "ctxstore save" in inside  # the answer, saved when it stopped, within the turn
    assert turn.end_time >= max(s.end_time for s in ours(spans, namespace) if s is not turn)


def test_a_chat_turn_whose_model_fails_is_an_error_span_by_the_errors_type(
    namespace: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.scripted_model import ScriptedModel

    model = ScriptedModel(["never finished"]).install(monkeypatch)
    model.fail_at = 1
    with ctxstore.connect(f"memory://{namespace}", namespace=namespace) as store:
        engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        chunks = list(ctxstore.chat(engine, [_ui_user("hi")], model="gpt-x"))
    assert any(chunk["type"] == "error" for chunk in chunks)
    (turn,) = [span for span in ours(spans, namespace) if span.name == "ctxstore chat"]
    assert turn.attributes["ctxstore.state"] == "failed"
    assert turn.status.status_code == trace.StatusCode.ERROR
    assert turn.attributes["error.type"] == "RuntimeError"
    assert "failed after" not in repr([event.attributes for event in turn.events])


def test_a_write_sent_again_under_its_request_id_is_resent_and_counted(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    before = counter("ctxstore.resends", operation="append")
    with ctxstore.connect(url, namespace=namespace) as store:
        alice = store.for_user("alice")
        alice.upsert_chat("c1")
        message = [{"role": "user", "content": "once"}]
        first = alice.append("c1", "main", message, expected_head=None, request_id="r1")
        again = alice.append("c1", "main", message, expected_head=None, request_id="r1")
        assert again.message_ids == first.message_ids
        assert again.resent
    appends = [span for span in ours(spans, namespace) if span.name == "ctxstore append"]
    assert [span.attributes["ctxstore.outcome"] for span in appends] == ["applied", "resent"]
    assert counter("ctxstore.resends", operation="append") == before + 1


def test_an_engine_save_retried_after_a_lost_reply_is_resent(
    namespace: str, spans: InMemorySpanExporter
) -> None:
    with ctxstore.connect(f"memory://{namespace}", namespace=namespace) as store:
        first = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        first.set(ctxstore.user("hello"))
        saved = first.save(request_id="turn-1")
        retry = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        retry.set(ctxstore.user("hello"))
        again = retry.save(request_id="turn-1")
    assert (saved.resent, again.resent) == (False, True)
    assert again.message_ids == saved.message_ids
    outcomes = [
        span.attributes["ctxstore.outcome"]
        for span in ours(spans, namespace)
        if span.name == "ctxstore save"
    ]
    assert outcomes == ["applied", "resent"]


#: What the every-operation case leaves out of a user's handle: they make handles, not calls.
_NOT_OPERATIONS = {"admin", "for_user"}


def test_every_operation_of_a_users_handle_is_a_span_named_after_it(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    import inspect

    from ctxstore.store.scoped import UserStore

    with ctxstore.connect(url, namespace=namespace) as store:
        alice = store.for_user("alice")
        calls: dict[str, Any] = {}

        def call(operation: str, /, *args: Any, **kwargs: Any) -> Any:
            EXPORTER.clear()
            try:
                result = getattr(alice, operation)(*args, **kwargs)
                if operation in ("export_chat", "read_stream"):
                    result = list(result)
            except ctxstore.errors.NotFoundError:  # a failed call is a span too
                result = None
            calls[operation] = [span.name for span in ours(spans, namespace)]
            return result

        call("upsert_chat", "c1")
        call("open_chat", "c1")
        head = call("append", "c1", "main", [{"role": "user", "content": "hi"}],
                    expected_head=None).head_message_id  # fmt: skip
        call("get_chat", "c1")
        call("update_chat", "c1", title="A title")
        call("list_chats")
        call("list_chats_page")
        call("load_branch", "c1")
        call("get_branch", "c1")
        call("list_branches", "c1")
        call("branch_size", "c1")
        call("get_chain", "c1", head)
        call("get_message", "c1", head)
        call("message_versions", "c1", head)
        call("get_graph", "c1")
        call("create_branch", "c1", head, name="side", activate=False)
        call("set_active_branch", "c1", "main")
        call("upsert_checkpoint", "c1", "cp", head)
        call("get_checkpoint", "c1", "cp")
        call("list_checkpoints", "c1")
        call("branch_from_checkpoint", "c1", "cp", name="from-cp", activate=False)
        call("delete_checkpoint", "c1", "cp")
        call("write_summary", "c1", head, "a summary", tokens=2)
        call("add_usage", "c1", {"prompt_tokens": 3, "completion_tokens": 4})
        call("active_stream", "c1")
        records = call("export_chat", "c1")
        call("import_chat", records, chat_id="c2")
        call("redact_message", "c1", head)
        call("expire_chat", "c2", 3600)
        call("read_stream", "c1", "1-1.abcdef")  # no such stream
        call("delete_chat", "c2")
    operations = {
        name for name, _ in inspect.getmembers(UserStore, inspect.isfunction)
        if not name.startswith("_") and name not in _NOT_OPERATIONS
    }  # fmt: skip
    assert set(calls) == operations  # a new operation needs its case here
    missing = {name for name, seen in calls.items() if f"ctxstore {name}" not in seen}
    assert not missing, {name: calls[name] for name in missing}


def test_every_admin_operation_is_a_span_named_after_it(
    url: str, namespace: str, spans: InMemorySpanExporter
) -> None:
    import inspect

    from ctxstore.store.scoped import UserStore
    from ctxstore.store.sync_store import AdminStore

    handles = {"clear_cache", "close", "run"}  # a process's cache, the connection, the driver
    from ctxstore.crypto import LocalKeyProvider

    provider = LocalKeyProvider.from_keys({"kek-1": bytes(32)}, current="kek-1")
    with (
        ctxstore.connect(url, namespace=namespace) as store,
        ctxstore.connect(url, namespace=f"{namespace}s", encryption=provider) as sealed,
    ):
        admin = store.admin()
        admin.upsert_chat("c1", "alice")
        sealed.admin().upsert_chat("c1", "alice")
        seen: dict[str, list[str]] = {}
        for operation, run in (
            ("ping", admin.ping),
            ("load_functions", lambda: _load_functions(admin)),
            ("rotate_keys", sealed.admin().rotate_keys),
            ("verify_chat", lambda: admin.verify_chat("c1")),
            ("sweep", admin.sweep),
            ("migrate", admin.migrate),
            ("export_user", lambda: list(admin.export_user("alice"))),
            ("erase_user", lambda: admin.erase_user("alice")),
            ("purge_namespace", lambda: admin.purge_namespace(confirm=namespace)),
        ):
            EXPORTER.clear()
            run()
            seen[operation] = [
                span.name for span in ours(spans, namespace) + ours(spans, f"{namespace}s")
            ]
    user_operations = {name for name, _ in inspect.getmembers(UserStore, inspect.isfunction)}
    admin_only = {
        name for name, _ in inspect.getmembers(AdminStore, inspect.isfunction)
        if not name.startswith("_") and name not in user_operations and name not in handles
    }  # fmt: skip
    assert set(seen) == admin_only  # a new operation needs its case here
    missing = {name: names for name, names in seen.items() if f"ctxstore {name}" not in names}
    assert not missing


def test_a_write_whose_reply_was_lost_is_resent_by_the_client_and_its_span_says_so(
    redis_server: Any, namespace: str, spans: InMemorySpanExporter
) -> None:
    from tests.support.proxy import ReplyDroppingProxy

    before = counter("ctxstore.resends")
    with ReplyDroppingProxy("127.0.0.1", redis_server.port) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        with ctxstore.connect(url, namespace=namespace) as store:
            admin = store.admin()
            admin.upsert_chat("c1", "alice")
            head = admin.append(
                "c1", "main", [{"role": "user", "content": "a"}], expected_head=None
            ).head_message_id
            writes = {
                "append": lambda: admin.append(
                    "c1", "main", [{"role": "user", "content": "b"}], expected_head=None,
                    on_conflict="rebase",
                ),
                "create_branch": lambda: admin.create_branch("c1", head, activate=False),
                "upsert_checkpoint": lambda: admin.upsert_checkpoint("c1", "cp", head),
                "delete_checkpoint": lambda: admin.delete_checkpoint("c1", "cp"),
                "add_usage": lambda: admin.add_usage("c1", {"input_tokens": 5}),
            }  # fmt: skip
            outcomes: dict[str, list[str]] = {}
            for name, write in writes.items():
                write()  # the script is loaded, the write applied
                EXPORTER.clear()
                proxy.drop_next_reply()
                write()
                outcomes[name] = [
                    span.attributes["ctxstore.outcome"]
                    for span in ours(spans, namespace)
                    if span.name == f"ctxstore {name}"
                ]
            assert proxy.dropped == len(writes)
            assert admin.get_chat("c1").metadata["usage"]["input_tokens"] == 10
    assert outcomes == {name: ["resent"] for name in writes}
    assert counter("ctxstore.resends") == before + len(writes)


def _load_functions(admin: Any) -> None:
    """The operator's load: a server without functions (an older fakeredis) refuses it, which
    its span records as well."""
    with contextlib.suppress(ctxstore.errors.CtxStoreError):
        admin.load_functions()
