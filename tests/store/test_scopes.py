"""Scope by construction: a chat call names its owner, or is an operator's on purpose.

On a plain store a chat call without ``user_id`` is a ScopeError raised before anything is
sent; ``store.for_user(user_id)`` is a handle whose chat methods have no ``user_id`` at all and
act as that user; ``store.admin()`` is the one handle on which no owner means any owner.
Engines, resumes and adapters take a user's handle wherever they take a store. Every backend,
both shells."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.errors import ConfigurationError, PermissionDeniedError, ScopeError
from ctxstore.store import AsyncAdminStore, AsyncStore, AsyncUserStore, Store, UserStore
from tests.conftest import SHELLS, Clock
from tests.store.conftest import seed_chat
from tests.support.facade import LoopThread, SyncOverAsync
from tests.support.wire import trace_wire

Call = Callable[[Any], Any]

#: Every store method that acts on one chat or lists chats, called without an owner.
UNSCOPED: dict[str, Call] = {
    "get_chat": lambda s: s.get_chat("c1"),
    "expire_chat": lambda s: s.expire_chat("c1", 60),
    "update_chat": lambda s: s.update_chat("c1", title="t"),
    "add_usage": lambda s: s.add_usage("c1", {"input_tokens": 1}),
    "list_chats": lambda s: s.list_chats(),
    "list_chats_page": lambda s: s.list_chats_page(),
    "delete_chat": lambda s: s.delete_chat("c1"),
    "append": lambda s: s.append(
        "c1", "main", [{"role": "user", "content": "x"}], expected_head="m2"
    ),
    "get_message": lambda s: s.get_message("c1", "m1"),
    "message_versions": lambda s: s.message_versions("c1", "m2"),
    "get_chain": lambda s: s.get_chain("c1", "m2"),
    "load_branch": lambda s: s.load_branch("c1"),
    "branch_size": lambda s: s.branch_size("c1"),
    "write_summary": lambda s: s.write_summary("c1", "m1", "summary"),
    "create_branch": lambda s: s.create_branch("c1", "m1"),
    "branch_from_checkpoint": lambda s: s.branch_from_checkpoint("c1", "cp"),
    "get_branch": lambda s: s.get_branch("c1"),
    "list_branches": lambda s: s.list_branches("c1"),
    "set_active_branch": lambda s: s.set_active_branch("c1", "main"),
    "upsert_checkpoint": lambda s: s.upsert_checkpoint("c1", "cp2", "m1"),
    "get_checkpoint": lambda s: s.get_checkpoint("c1", "cp"),
    "list_checkpoints": lambda s: s.list_checkpoints("c1"),
    "delete_checkpoint": lambda s: s.delete_checkpoint("c1", "cp"),
    "get_graph": lambda s: s.get_graph("c1"),
    "redact_message": lambda s: s.redact_message("c1", "m2"),
    "export_chat": lambda s: s.export_chat("c1"),
    "import_chat": lambda s: s.import_chat([]),
    "read_stream": lambda s: s.read_stream("c1", "1-0.abcdef"),
    "active_stream": lambda s: s.active_stream("c1"),
    "verify_chat": lambda s: s.verify_chat("c1"),
    "erase_user": lambda s: s.erase_user("alice"),
    "export_user": lambda s: s.export_user("alice"),
}
#: The operators' calls by nature: on admin() only, whatever user they name.
ADMIN_ONLY = {"verify_chat", "erase_user", "export_user"}


@pytest.fixture(params=SHELLS)
def plain(
    request: pytest.FixtureRequest,
    backend: str,
    namespace: str,
    clock: Clock,
    loop_thread: LoopThread,
) -> Iterator[Any]:
    """A plain store (sync, or the async one wrapped) holding alice's c1 (m1 <- m2) with a
    checkpoint ``cp`` at m1."""
    if request.param == "sync":
        store: Any = ctxstore.connect(backend, namespace=namespace, clock=clock)
    else:
        store = SyncOverAsync(
            ctxstore.connect_async(backend, namespace=namespace, clock=clock), loop_thread
        )
    seed_chat(store.admin())
    store.upsert_checkpoint("c1", "cp", "m1", user_id="alice")
    yield store
    if request.param == "sync":
        store.close()
    else:
        loop_thread.run(store.wrapped.close())


@pytest.mark.parametrize("name", sorted(UNSCOPED))
def test_a_chat_call_that_names_no_owner_is_a_scope_error_before_anything_is_sent(
    plain: Any, name: str
) -> None:
    with trace_wire() as wire, pytest.raises(ScopeError) as caught:
        UNSCOPED[name](plain)  # an iterator's too: refused at the call, before it is read
    assert wire.round_trips == 0
    assert wire.commands == []
    message = str(caught.value)
    assert f"{name}()" in message
    if name not in ADMIN_ONLY:  # an operator's call by nature: admin() is the one way
        assert "user_id=" in message
        assert "store.for_user(user_id)" in message
    assert "store.admin()" in message
    assert isinstance(caught.value, ConfigurationError)


def test_every_chat_method_of_the_store_is_covered() -> None:
    takes_owner = {
        name
        for name, member in vars(Store).items()
        if inspect.isfunction(member)
        and "user_id" in inspect.signature(member).parameters
        and inspect.signature(member).parameters["user_id"].default is None
    }
    assert takes_owner | ADMIN_ONLY == set(UNSCOPED)


@pytest.mark.parametrize("name", sorted(set(UNSCOPED) - ADMIN_ONLY))
def test_the_same_calls_with_user_id_pass_the_scope(plain: Any, name: str) -> None:
    scoped = plain.for_user("alice")
    call = UNSCOPED[name]
    if name == "read_stream":
        with pytest.raises(ctxstore.errors.StreamNotFoundError):  # past the chat's check
            list(call(scoped))
        return
    if name == "import_chat":
        with pytest.raises(ctxstore.ValidationError):  # past the scope: an empty export
            call(scoped)
        return
    result = call(scoped)
    if name == "export_chat":
        assert next(iter(result))["type"] == "chat"


@pytest.mark.parametrize(
    ("store_cls", "handle_cls"), [(Store, UserStore), (AsyncStore, AsyncUserStore)]
)
def test_a_users_handle_has_the_chat_methods_without_user_id(
    store_cls: type, handle_cls: type
) -> None:
    """Each method of the handle is the store's, parameter for parameter, without
    ``user_id``: the same names, kinds, defaults and annotations, and the same return."""
    expected = {}
    for name, member in vars(store_cls).items():
        if not inspect.isfunction(member) or name.startswith("_") or name == "for_user":
            continue
        if name in ADMIN_ONLY:  # a user's handle has no operator's call
            continue
        signature = inspect.signature(member)
        if "user_id" not in signature.parameters:
            continue
        expected[name] = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name != "user_id"]
        )
    own = {
        name: inspect.signature(member)
        for name, member in vars(handle_cls).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
    assert set(own) == set(expected)
    for name, signature in expected.items():
        assert own[name] == signature, name
        assert inspect.iscoroutinefunction(getattr(handle_cls, name)) == (
            inspect.iscoroutinefunction(getattr(store_cls, name))
        ), name
        assert (inspect.getdoc(getattr(Store, name)) or "") in (
            inspect.getdoc(getattr(handle_cls, name)) or ""
        )


def test_a_users_handle_acts_as_its_user(plain: Any) -> None:
    alice, bob = plain.for_user("alice"), plain.for_user("bob")
    assert alice.user_id == "alice"
    assert [m["id"] for m in alice.load_branch("c1").messages] == ["m1", "m2"]
    bob.upsert_chat("c2")
    assert [chat.id for chat in alice.list_chats()] == ["c1"]
    assert [chat.id for chat in bob.list_chats()] == ["c2"]
    assert [chat.id for chat in bob.list_chats_page().chats] == ["c2"]
    head = alice.append("c1", None, [{"role": "user", "content": "c"}], expected_head="m2")
    assert alice.get_chat("c1").user_id == "alice"
    assert plain.get_message("c1", head.head_message_id, user_id="alice")["message"] == {
        "role": "user",
        "content": "c",
    }
    with pytest.raises(ctxstore.ChatNotFoundError) as refused:
        bob.get_chat("c1")
    with pytest.raises(ctxstore.ChatNotFoundError) as missing:
        bob.get_chat("c9")
    assert str(refused.value).replace("c1", "c9") == str(missing.value)
    assert bob.delete_chat("c1") is False
    assert alice.get_chat("c1").id == "c1"


def test_a_users_handle_never_becomes_another_handle(plain: Any) -> None:
    alice = plain.for_user("alice")
    assert alice.for_user("alice") is alice
    for escape in (alice.admin, lambda: alice.for_user("bob"), lambda: alice.store):
        with pytest.raises(PermissionDeniedError):
            escape()
    with pytest.raises(TypeError):
        alice.get_chat("c1", user_id="bob")
    with pytest.raises(ctxstore.errors.InvalidIdError):
        plain.for_user("a{b}")


def test_an_admin_handle_acts_on_any_chat_and_checks_an_owner_it_is_given(plain: Any) -> None:
    admin = plain.admin()
    assert admin.admin() is admin
    assert admin.get_chat("c1").user_id == "alice"
    assert {chat.id for chat in admin.list_chats()} == {"c1"}
    assert admin.verify_chat("c1").ok
    with pytest.raises(ctxstore.ChatNotFoundError):
        admin.get_chat("c1", user_id="bob")
    assert admin.for_user("alice").get_chat("c1").id == "c1"


def test_an_admin_handle_shares_its_stores_connection_and_closing_it_closes_the_store(
    backend: str, namespace: str
) -> None:
    store = ctxstore.connect(backend, namespace=namespace)
    admin = store.admin()
    assert isinstance(admin, Store)
    assert admin.client is store.client
    assert admin.state is store.state
    with store.admin() as handle:
        handle.upsert_chat("c1", "alice")
    assert repr(admin).startswith("<AdminStore of ")


async def test_an_async_admin_handle_runs_on_its_stores_event_loop(
    backend: str, namespace: str
) -> None:
    store = ctxstore.connect_async(backend, namespace=namespace)
    admin = store.admin()
    assert isinstance(admin, AsyncAdminStore)
    await admin.upsert_chat("c1", "alice")
    assert (await store.get_chat("c1", user_id="alice")).id == "c1"
    assert (await admin.get_chat("c1")).user_id == "alice"
    await admin.close()


def test_engines_always_act_as_a_user(plain: Any, loop_thread: LoopThread) -> None:
    def engine(**kwargs: Any) -> Any:
        if isinstance(plain, SyncOverAsync):
            given = kwargs.pop("store", plain.wrapped)
            if isinstance(given, SyncOverAsync):
                given = given.wrapped
            return SyncOverAsync(ctxstore.AsyncContextEngine(store=given, **kwargs), loop_thread)
        return ctxstore.ContextEngine(store=kwargs.pop("store", plain), **kwargs)

    with pytest.raises(ScopeError, match="acts for one user"):
        engine(chat_id="c1")
    with pytest.raises(ScopeError):
        engine(store=plain.admin(), chat_id="c1")  # an engine never acts as "anyone"
    alice = plain.for_user("alice")
    on_handle = engine(store=alice, chat_id="c1")
    assert on_handle.user_id == "alice"
    assert [m["content"] for m in on_handle.resolve().messages] == ["a", "b"]
    with pytest.raises(PermissionDeniedError):
        engine(store=alice, chat_id="c1", user_id="bob")
    assert engine(store=alice, chat_id="c1", user_id="alice").user_id == "alice"
    assert engine(store=plain.admin(), chat_id="c1", user_id="alice").resolve().messages


def test_a_resume_takes_a_users_handle_and_refuses_no_owner(plain: Any) -> None:
    if isinstance(plain, SyncOverAsync):
        pytest.skip("resume_sse is the sync store's; aresume_sse is tested with the frontend")
    from ctxstore.frontend import resume_sse, stop_stream

    assert resume_sse(plain.for_user("alice"), "c1") is None  # nothing is being streamed
    assert stop_stream(plain.for_user("alice"), "c1") is False
    assert resume_sse(plain.admin(), "c1") is None  # an operator's: any owner
    with pytest.raises(ScopeError):
        resume_sse(plain, "c1")
    with pytest.raises(PermissionDeniedError):
        resume_sse(plain.for_user("alice"), "c1", user_id="bob")


def test_the_web_console_is_an_operators_and_refuses_a_users_handle(plain: Any) -> None:
    pytest.importorskip("starlette")
    import ctxstore.web

    with pytest.raises(ConfigurationError):
        ctxstore.web.app(plain.for_user("alice"))


def test_the_adapters_take_a_users_handle(plain: Any, loop_thread: LoopThread) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage

    from ctxstore.integrations.langchain import CtxStoreChatMessageHistory

    given = plain.wrapped if isinstance(plain, SyncOverAsync) else plain
    history = CtxStoreChatMessageHistory("c1", store=given.for_user("alice"))
    assert history.user_id == "alice"
    loop_thread.run(history.aadd_messages([HumanMessage("c")]))
    assert [m["message"]["content"] for m in plain.load_branch("c1", user_id="alice").messages] == [
        "a",
        "b",
        "c",
    ]
    with pytest.raises(PermissionDeniedError):
        CtxStoreChatMessageHistory("c1", user_id="bob", store=given.for_user("alice"))
    with pytest.raises(ScopeError):
        CtxStoreChatMessageHistory("c1", store=given)
