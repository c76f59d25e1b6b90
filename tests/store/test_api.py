"""The public surface: sync and async stores match, imports stay light."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys

import pytest

import ctxstore
from ctxstore import AsyncStore, Store

SYNC_ONLY = {"__enter__", "__exit__"}
ASYNC_ONLY = {"__aenter__", "__aexit__"}
#: Methods that do no I/O: plain methods on both stores.
NO_IO = {"clear_cache", "admin", "for_user"}
#: The handles a store makes: each shell's own kind.
HANDLES = {
    "admin": ("AdminStore", "AsyncAdminStore"),
    "for_user": ("UserStore", "AsyncUserStore"),
}
#: Methods whose records come as an iterator (sync) and an async iterator (async): the same
#: parameters, annotated each for its own kind of iteration.
STREAMING = {"export_chat", "export_user", "import_chat"}

#: Plain methods returning an iterator of what they read: a generator on the sync store, an async
#: generator on the async one (the return annotations differ accordingly).
ITERATORS = {"read_stream": ("Iterator[StreamPiece]", "AsyncIterator[StreamPiece]")}


def public(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") or name in SYNC_ONLY | ASYNC_ONLY
    }


def test_sync_and_async_stores_have_the_same_names_and_signatures() -> None:
    sync_members, async_members = public(Store), public(AsyncStore)
    assert set(sync_members) - SYNC_ONLY == set(async_members) - ASYNC_ONLY
    for name in set(sync_members) - SYNC_ONLY:
        sync_member, async_member = sync_members[name], async_members[name]
        if isinstance(sync_member, property):
            assert isinstance(async_member, property), name
            continue
        assert callable(sync_member)
        assert callable(async_member)
        assert not inspect.iscoroutinefunction(sync_member), name
        if name in STREAMING:
            assert _unannotated(sync_member) == _unannotated(async_member), name
            continue
        sync_sig, async_sig = inspect.signature(sync_member), inspect.signature(async_member)
        if name in ITERATORS or name in HANDLES:
            expected = ITERATORS.get(name) or HANDLES[name]
            assert (sync_sig.return_annotation, async_sig.return_annotation) == expected
            sync_sig = sync_sig.replace(return_annotation=inspect.Signature.empty)
            async_sig = async_sig.replace(return_annotation=inspect.Signature.empty)
        assert sync_sig == async_sig, name
        expect_coroutine = name not in NO_IO and name not in ITERATORS and name not in HANDLES
        assert inspect.iscoroutinefunction(async_member) == expect_coroutine, name


def test_read_stream_is_a_generator_on_the_sync_store_and_an_async_one_on_the_other() -> None:
    sync_store = ctxstore.connect("memory://").admin()
    async_store = ctxstore.connect_async("memory://").admin()
    stream_id = "1-0.abcdef"
    reading, areading = (
        sync_store.read_stream("c", stream_id),
        async_store.read_stream("c", stream_id),
    )
    assert inspect.isgenerator(reading)
    assert inspect.isasyncgen(areading)
    reading.close()
    asyncio.run(areading.aclose())


def _unannotated(member: object) -> list[tuple[str, object, object]]:
    return [
        (parameter.name, parameter.kind, parameter.default)
        for parameter in inspect.signature(member).parameters.values()  # type: ignore[arg-type]
    ]


def test_the_streaming_methods_iterate_each_in_its_shell() -> None:
    # A plain method returning an async iterator: its checks (the scope) run at the call.
    assert not inspect.iscoroutinefunction(AsyncStore.export_chat)
    assert "AsyncIterator" in str(inspect.signature(AsyncStore.export_chat).return_annotation)
    records = ctxstore.connect_async("memory://").admin().export_chat("c1")
    assert hasattr(records, "__anext__")
    asyncio.run(records.aclose())  # type: ignore[attr-defined]
    assert "Iterator" in str(inspect.signature(Store.export_chat).return_annotation)
    assert inspect.iscoroutinefunction(AsyncStore.import_chat)
    assert "AsyncIterable" in str(inspect.signature(AsyncStore.import_chat).parameters["records"])


def test_connect_functions_take_the_same_arguments() -> None:
    sync_params = inspect.signature(ctxstore.connect).parameters
    async_params = inspect.signature(ctxstore.connect_async).parameters
    assert list(sync_params) == list(async_params)


def test_import_loads_neither_litellm_nor_tiktoken_nor_the_embedded_store() -> None:
    code = (
        "import sys, ctxstore, ctxstore.prompt.fragment\n"
        "heavy = [m for m in ('litellm', 'tiktoken', 'fakeredis', 'lupa') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {modules!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return [name for name in result.stdout.strip().split(",") if name]


COLD_START_HEAVY = ("pydantic", "ctxstore.store.async_store", "fakeredis", "litellm", "tiktoken")


def test_import_ctxstore_loads_only_the_error_classes() -> None:
    """Serverless functions pay for imports on every cold start: the package loads lazily."""
    assert loaded_after("import ctxstore", (*COLD_START_HEAVY, "redis", "msgpack")) == []
    # Nor the optional extras' libraries (redis-py itself imports cryptography, later).
    assert loaded_after("import ctxstore", ("cryptography", "opentelemetry")) == []
    # Nor the import machinery's heavier parts (importlib.abc loads importlib.resources,
    # pathlib and tempfile: tens of milliseconds; importlib.util loads importlib._abc).
    heavier = ("importlib.resources", "importlib.util", "pathlib", "tempfile")
    assert loaded_after("import ctxstore", heavier) == []
    # (redis-py 8 imports redis.asyncio itself, so a sync store cannot avoid that one.)


def test_the_write_path_loads_neither_pydantic_nor_the_async_store() -> None:
    code = (
        "import ctxstore\n"
        "store = ctxstore.connect('redis://127.0.0.1:1').admin()\n"
        "from ctxstore._core.ops import append, reads\nfrom ctxstore._core import cache\n"
        "store.state.cache.clear()"
    )
    assert loaded_after(code, COLD_START_HEAVY) == []


def test_every_public_name_resolves_and_is_listed() -> None:
    for name in ctxstore.__all__:
        assert getattr(ctxstore, name) is not None, name
    assert set(dir(ctxstore)) >= set(ctxstore.__all__)
    with pytest.raises(AttributeError):
        ctxstore.no_such_name  # noqa: B018


def test_every_error_derives_from_the_root() -> None:
    errors = [
        value
        for value in vars(ctxstore.errors).values()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert len(errors) >= 20
    assert all(issubclass(error, ctxstore.CtxStoreError) for error in errors)
    assert issubclass(ctxstore.ValidationError, ValueError)
    assert issubclass(ctxstore.NotFoundError, LookupError)
