"""Model-based tests: random sequences of store calls, each checked against a reference model.

A hypothesis state machine drives the sync store on the embedded store (``memory://``), a real
redis-server and a Redis Cluster: chats of two users, appends under every ``on_conflict`` and
``on_existing`` policy, branches, checkpoints, message and chain reads, deletions and listings.
Every answer (result or error) must be the one :mod:`tests.support.store_model` gives. Two
workers share the namespace: a store made from the URL, and one around the same client (so its
owner and chain caches are its own) whose reads come back in tiny pieces (2 records inline, 3
per ``LRANGE``), so the long-read path runs on short chains too. A settable clock makes every
time exact, and sometimes goes back (writers' clocks differ: ``updated_at`` never moves back).
Each example runs in a namespace of its own.

The budget is small (100 examples of up to 50 steps per backend, a few seconds each) and the
examples derandomized, so CI is fast and reproducible; a failure there is reported as found,
unshrunk (shrinking replays the machine for minutes). Set ``CTXSTORE_LONG_TESTS=1`` for a long
run: 200 times the examples, up to 100 steps each, drawn anew on every run, a failure shrunk to
a short sequence and printed with the ``@reproduce_failure`` blob that replays it.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ctxstore
from ctxstore import NewMessage, errors
from ctxstore.models import AppendResult
from tests.support import servers
from tests.support.store_model import Chat, ExpectedError, Item, StoreModel

T = TypeVar("T")

LONG = os.environ.get("CTXSTORE_LONG_TESTS") == "1"

SETTINGS = settings(
    max_examples=200 * 100 if LONG else 100,
    stateful_step_count=100 if LONG else 50,
    deadline=None,
    derandomize=not LONG,
    database=None,
    # Shrinking a failure replays the machine thousands of times (minutes): CI reports the
    # sequence as found; the long run shrinks it.
    phases=list(Phase) if LONG else [Phase.explicit, Phase.reuse, Phase.generate],
    print_blob=LONG,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CHATS = st.sampled_from(["c1", "c2", "c3"])
USERS = st.sampled_from(["alice", "bob"])
WORKERS = st.sampled_from([0, 1])
#: Chosen message ids: few, so they collide with the chat's own (MessageExistsError, edits).
CHOSEN_IDS = ["a", "b", "c", "d"]
#: Explicit branch names, some of the auto-named form (the counter must skip taken names).
BRANCH_NAMES = ["side", "main-v2", "main-v3", "side-v2"]
CHECKPOINTS = ["cp1", "cp2", "cp3"]
MISSING = "nowhere"
#: Store calls between two whole-namespace checks (each reads every chat, branch and listing).
CHECK_EVERY = 10


class SettableClock:
    """Epoch milliseconds that move only when the machine moves them, so the model knows the
    ``now`` of every write."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


class StoreMachine(RuleBasedStateMachine):
    """Drives two workers on one fresh namespace and checks each answer against the model."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.clock = SettableClock()
        self.model = StoreModel()
        self.payloads = 0
        self.calls = self.checked_at = 0
        namespace = f"m{uuid.uuid4().hex[:12]}"
        main = ctxstore.connect(
            url, namespace=namespace, clock=self.clock, estimate_tokens=len
        ).admin()
        peer = ctxstore.connect(
            main.client,
            namespace=namespace,
            clock=self.clock,
            estimate_tokens=len,
            limits=ctxstore.Limits(read_inline_messages=2, read_chunk_messages=3),
        ).admin()
        self.stores = (main, peer)

    def teardown(self) -> None:
        try:
            if sys.exc_info()[0] is None:  # a failed step is reported as it is
                for store in self.stores:
                    self._check_everything(store)
        finally:
            for store in reversed(self.stores):
                store.close()

    # --- helpers -------------------------------------------------------------------------------

    def _tick(self) -> int:
        """The time of the next write: one millisecond on."""
        self.clock.now += 1
        return self.clock.now

    def _expect(self, call: Callable[[], T], model: Callable[[Any], Any]) -> T | None:
        """Run ``call`` on the store and ``model`` on its answer (a result or the error); the
        store must answer exactly what the model returns, or raise what the model refuses."""
        self.calls += 1
        actual: Any
        try:
            actual = call()
        except errors.CtxStoreError as error:
            actual = error
        refusal: ExpectedError | None = None
        try:
            expected = model(actual)
        except ExpectedError as refused:
            refusal = refused
        if refusal is not None:
            assert type(actual) is refusal.error, f"store answered {actual!r}, model: {refusal}"
            for name, value in refusal.details.items():
                assert actual.details.get(name) == value, (name, actual.details, refusal)
            return None
        if isinstance(actual, errors.CtxStoreError):
            raise AssertionError(f"store raised {actual!r}, model expected {expected!r}")
        assert actual == expected
        result: T = actual
        return result

    def _chat(self, data: st.DataObject) -> str:
        """Mostly a chat that exists, so calls get past the chat checks."""
        live = sorted(self.model.chats)
        kind = data.draw(st.sampled_from(["live"] * 4 + ["any"] if live else ["any"]))
        pool = live if kind == "live" else ["c1", "c2", "c3"]
        return data.draw(st.sampled_from(pool), label="chat")

    def _live_chat(self, data: st.DataObject) -> Chat | None:
        """One of the chats that exist (None when there is none)."""
        live = sorted(self.model.chats)
        if not live:
            return None
        return self.model.chats[data.draw(st.sampled_from(live), label="chat")]

    def _caller(self, data: st.DataObject, chat_id: str) -> str | None:
        """Mostly the owner; sometimes anyone (None) or another user."""
        chat = self.model.chats.get(chat_id)
        owner = chat.owner if chat else "alice"
        kind = data.draw(st.sampled_from(["owner"] * 6 + ["anyone", "stranger"]), label="caller")
        if kind == "anyone":
            return None
        if kind == "stranger":
            return "bob" if owner == "alice" else "alice"
        return owner

    def _message(self, data: st.DataObject, chat_id: str, *, none: bool = False) -> str | None:
        """A message id: mostly one of the chat's, else one of a deleted chat or none at all."""
        chat = self.model.chats.get(chat_id)
        kinds = ["known"] * 4 if chat and chat.messages else []
        kinds += ["ghost", "missing"] + (["none"] * 2 if none else [])
        kind = data.draw(st.sampled_from(kinds), label="message kind")
        if kind == "known" and chat:
            return data.draw(st.sampled_from(list(chat.messages)), label="message")
        if kind == "ghost" and self.model.ghost_ids:
            return data.draw(st.sampled_from(self.model.ghost_ids), label="ghost message")
        return None if kind == "none" else MISSING

    def _branch(self, data: st.DataObject, chat_id: str, *, none: bool = False) -> str | None:
        chat = self.model.chats.get(chat_id)
        names = list(chat.branches) * 3 if chat else ["main"]
        names += [MISSING] + (["<active>"] * 2 if none else [])
        name = data.draw(st.sampled_from(names), label="branch")
        return None if name == "<active>" else name

    def _expected_head(self, data: st.DataObject, chat: Chat | None, head: str | None) -> Any:
        """The head a writer last saw: the current one, an older one of the branch (another
        worker wrote since), none, or any message of the chat (or of none)."""
        kind = data.draw(st.sampled_from(["head", "stale", "none", "other"]), label="expected")
        if kind == "head" or chat is None:
            return head
        if kind == "stale":
            older = chat.chain(head)[:-1]
            return data.draw(st.sampled_from(older), label="stale") if older else None
        if kind == "none":
            return None
        return self._message(data, chat.chat_id)

    def _generated_item(self) -> Item:
        """A message with a generated id and a payload no other message has."""
        self.payloads += 1
        role = ("user", "assistant")[self.payloads % 2]
        return Item({"role": role, "content": f"m{self.payloads}"})

    def _item(self, data: st.DataObject, chat: Chat | None) -> Item:
        """A message to append: mostly with a generated id, else a chosen one that is new, the
        chat's own (an existing message), a deleted chat's or reserved (the generated form of
        this chat's incarnation, naming no message)."""
        payload = self._generated_item().payload
        kinds = ["generated"] * 4 + ["chosen"] * 2 + ["ghost"]
        if chat and chat.messages:
            kinds += ["existing"] * 3 + ["reserved"]
        kind = data.draw(st.sampled_from(kinds), label="id kind")
        if kind == "chosen":
            return Item(payload, data.draw(st.sampled_from(CHOSEN_IDS), label="id"))
        if kind == "ghost" and self.model.ghost_ids:
            return Item(payload, data.draw(st.sampled_from(self.model.ghost_ids), label="id"))
        if kind == "existing" and chat:
            return Item(payload, data.draw(st.sampled_from(list(chat.messages)), label="id"))
        if kind == "reserved" and chat:
            position = data.draw(st.integers(0, len(chat.messages) + 2), label="position")
            digits = data.draw(st.sampled_from([str(position), f"0{position}"]), label="digits")
            return Item(payload, f"{digits}.{chat.incarnation}.aaaaaa")
        return Item(payload)

    # --- chats ---------------------------------------------------------------------------------

    @initialize(first=st.integers(0, 2), second=st.integers(0, 2))
    def two_conversations(self, first: int, second: int) -> None:
        """Chat c1 of alice and c2 of bob, each with a few messages on main, so most steps
        work on chats that exist and hold something."""
        for chat_id, user, count in (("c1", "alice", first), ("c2", "bob", second)):
            now = self._tick()
            self._expect(
                lambda chat_id=chat_id, user=user: self.stores[0].upsert_chat(chat_id, user),
                lambda actual, chat_id=chat_id, user=user, now=now: self.model.upsert_chat(
                    chat_id, user, None, now, getattr(actual, "incarnation", "")
                ),
            )
            if count:
                self._turn(chat_id, count, worker=0)

    @rule(data=st.data(), worker=WORKERS, count=st.integers(1, 2))
    def conversation_turn(self, data: st.DataObject, worker: int, count: int) -> None:
        """The usual write: the owner appends to the active branch at the head it last saw."""
        self._turn(self._chat(data), count, worker)

    @rule(
        chat_id=CHATS,
        user=USERS,
        metadata=st.sampled_from([None, {}, {"k": 0}, {"k": 1}, {"tier": 2}, {"k": 2, "tier": 0}]),
        worker=WORKERS,
    )
    def upsert_chat(
        self, chat_id: str, user: str, metadata: dict[str, Any] | None, worker: int
    ) -> None:
        """Create a chat, or open it as its owner (another user is refused), merging metadata."""
        now = self._tick()
        self._expect(
            lambda: self.stores[worker].upsert_chat(chat_id, user, metadata),
            lambda actual: self.model.upsert_chat(
                chat_id, user, metadata, now, getattr(actual, "incarnation", "")
            ),
        )

    @rule(data=st.data(), worker=WORKERS)
    def get_chat(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        self._expect(
            lambda: self.stores[worker].get_chat(chat_id, user_id=caller),
            lambda _: self.model.get_chat(chat_id, caller),
        )

    @precondition(lambda self: len(self.model.chats) > 1)
    @rule(data=st.data(), worker=WORKERS)
    def delete_chat(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        self._expect(
            lambda: self.stores[worker].delete_chat(chat_id, user_id=caller),
            lambda _: self.model.delete_chat(chat_id, caller),
        )

    @rule(
        data=st.data(),
        user=st.sampled_from([None, "alice", "bob", "carol"]),
        metadata=st.none() | st.tuples(st.just("k"), st.integers(0, 2)),
        worker=WORKERS,
    )
    def list_chats(self, data: st.DataObject, user: str | None, metadata: Any, worker: int) -> None:
        self._check_listing(self.stores[worker], user, metadata, data)

    @rule(back=st.integers(1, 20))
    def clock_goes_back(self, back: int) -> None:
        """Another writer's clock is behind: times may repeat or go back."""
        self.clock.now -= back

    @rule(worker=WORKERS)
    def clear_cache(self, worker: int) -> None:
        self.stores[worker].clear_cache()

    # --- messages ------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        worker=WORKERS,
        count=st.integers(1, 3),
        on_conflict=st.sampled_from(["raise", "rebase", "fork"]),
        on_existing=st.sampled_from(["raise", "fork"]),
    )
    def append(
        self, data: st.DataObject, worker: int, count: int, on_conflict: str, on_existing: str
    ) -> None:
        """Any append: any caller, branch, expected head and ids, under any policy."""
        chat_id = self._chat(data)
        chat = self.model.chats.get(chat_id)
        branch = self._branch(data, chat_id) or "main"
        head = chat.branches[branch].head if chat and branch in chat.branches else None
        self._append(
            worker,
            chat_id,
            self._caller(data, chat_id),
            branch,
            self._expected_head(data, chat, head),
            [self._item(data, chat) for _ in range(count)],
            on_conflict,
            on_existing,
        )

    @rule(
        data=st.data(),
        worker=WORKERS,
        count=st.integers(1, 2),
        on_conflict=st.sampled_from(["raise", "rebase", "fork"]),
    )
    def append_after_another_writer(
        self, data: st.DataObject, worker: int, count: int, on_conflict: str
    ) -> None:
        """The owner appends at a head another worker has moved on from since."""
        chat = self._live_chat(data)
        if chat is None:
            return
        branch = data.draw(st.sampled_from(list(chat.branches)), label="branch")
        chain = chat.chain(chat.branches[branch].head)
        seen = data.draw(st.sampled_from([None, *chain[:-1]]), label="seen head")
        items = [self._generated_item() for _ in range(count)]
        self._append(worker, chat.chat_id, chat.owner, branch, seen, items, on_conflict, "raise")

    @rule(data=st.data(), worker=WORKERS, after=st.integers(0, 2))
    def edit_message(self, data: st.DataObject, worker: int, after: int) -> None:
        """The owner re-sends a message of the chat under its id (an edit), maybe followed by
        new ones; the head the owner saw may have moved (then the policy is drawn too)."""
        chat = self._live_chat(data)
        if chat is None or not chat.messages:
            return
        edited = data.draw(st.sampled_from(list(chat.messages)), label="edited")
        items = [Item(self._generated_item().payload, edited)]
        items += [self._generated_item() for _ in range(after)]
        branch = chat.active
        head = chat.branches[branch].head
        expected = data.draw(st.sampled_from([head, None]), label="expected")
        policy = data.draw(st.sampled_from(["raise", "rebase", "fork"]), label="on_conflict")
        self._append(worker, chat.chat_id, chat.owner, branch, expected, items, policy, "fork")

    def _turn(self, chat_id: str, count: int, worker: int) -> None:
        """The usual write: the owner appends to the active branch at the head it last saw."""
        chat = self.model.chats.get(chat_id)
        owner = chat.owner if chat else "alice"
        branch = chat.active if chat else "main"
        head = chat.branches[branch].head if chat else None
        items = [self._generated_item() for _ in range(count)]
        self._append(worker, chat_id, owner, branch, head, items, "raise", "raise")

    def _append(
        self,
        worker: int,
        chat_id: str,
        caller: str | None,
        branch: str,
        expected: str | None,
        items: list[Item],
        on_conflict: Any,
        on_existing: Any,
    ) -> None:
        messages = [
            NewMessage(item.payload, id=item.chosen) if item.chosen else item.payload
            for item in items
        ]
        now = self._tick()
        self._expect(
            lambda: self.stores[worker].append(
                chat_id,
                branch,
                messages,
                expected_head=expected,
                on_conflict=on_conflict,
                on_existing=on_existing,
                user_id=caller,
            ),
            lambda actual: self.model.append(
                chat_id,
                caller,
                branch,
                items,
                expected_head=expected,
                on_conflict=on_conflict,
                on_existing=on_existing,
                now=now,
                stored_ids=actual.message_ids if isinstance(actual, AppendResult) else (),
            ),
        )

    @rule(data=st.data(), worker=WORKERS)
    def get_message(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        message_id = self._message(data, chat_id) or MISSING
        self._expect(
            lambda: self.stores[worker].get_message(chat_id, message_id, user_id=caller),
            lambda _: self.model.get_message(chat_id, caller, message_id),
        )

    @rule(
        data=st.data(),
        worker=WORKERS,
        max_depth=st.none() | st.integers(1, 4),
        newest=st.booleans(),
    )
    def get_chain(
        self,
        data: st.DataObject,
        worker: int,
        max_depth: int | None,
        newest: bool,
    ) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        chat = self.model.chats.get(chat_id)
        head = self._message(data, chat_id, none=True)
        if chat and data.draw(st.booleans(), label="a branch head"):
            head = chat.branches[data.draw(st.sampled_from(list(chat.branches)))].head
        self._expect(
            lambda: self.stores[worker].get_chain(
                chat_id, head, max_depth=max_depth, newest=newest, user_id=caller
            ),
            lambda _: self.model.get_chain(
                chat_id, caller, head, max_depth=max_depth, newest=newest
            ),
        )

    @rule(
        data=st.data(),
        worker=WORKERS,
        max_messages=st.none() | st.integers(0, 4),
    )
    def load_branch(self, data: st.DataObject, worker: int, max_messages: int | None) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        branch = self._branch(data, chat_id, none=True)

        def load() -> tuple[Any, ...]:
            loaded = self.stores[worker].load_branch(
                chat_id, branch, max_messages=max_messages, user_id=caller
            )
            return loaded.branch, loaded.messages, loaded.chain_length

        self._expect(load, lambda _: self.model.load_branch(chat_id, caller, branch, max_messages))

    # --- branches ------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        worker=WORKERS,
        name=st.none() | st.sampled_from(BRANCH_NAMES),
        activate=st.booleans(),
    )
    def create_branch(
        self, data: st.DataObject, worker: int, name: str | None, activate: bool
    ) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        at = self._message(data, chat_id, none=True)
        base = self._base(data, chat_id)
        now = self._tick()
        self._expect(
            lambda: self.stores[worker].create_branch(
                chat_id, at, base=base, name=name, activate=activate, user_id=caller
            ),
            lambda _: self.model.create_branch(
                chat_id, caller, at, base=base, name=name, activate=activate, now=now
            ),
        )

    @rule(
        data=st.data(),
        worker=WORKERS,
        name=st.none() | st.sampled_from(BRANCH_NAMES),
        activate=st.booleans(),
    )
    def branch_from_checkpoint(
        self,
        data: st.DataObject,
        worker: int,
        name: str | None,
        activate: bool,
    ) -> None:
        """Restore a checkpoint: a new branch at its message."""
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        checkpoint = self._checkpoint(data, chat_id)
        base = self._base(data, chat_id)
        now = self._tick()
        self._expect(
            lambda: self.stores[worker].branch_from_checkpoint(
                chat_id, checkpoint, base=base, name=name, activate=activate, user_id=caller
            ),
            lambda _: self.model.branch_from_checkpoint(
                chat_id, caller, checkpoint, base=base, name=name, activate=activate, now=now
            ),
        )

    def _checkpoint(self, data: st.DataObject, chat_id: str) -> str:
        """Mostly one of the chat's checkpoints, else any name (maybe none of the chat's)."""
        chat = self.model.chats.get(chat_id)
        names = list(chat.checkpoints) * 3 if chat else []
        return data.draw(st.sampled_from(names + CHECKPOINTS), label="checkpoint")

    def _base(self, data: st.DataObject, chat_id: str) -> str:
        chat = self.model.chats.get(chat_id)
        bases = ["main", "side"] + (list(chat.branches) if chat else [])
        return data.draw(st.sampled_from(bases), label="base")

    @rule(data=st.data(), worker=WORKERS)
    def set_active_branch(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        name = self._branch(data, chat_id) or "main"
        self._expect(
            lambda: self.stores[worker].set_active_branch(chat_id, name, user_id=caller),
            lambda _: self.model.set_active_branch(chat_id, caller, name),
        )

    @rule(data=st.data(), worker=WORKERS)
    def get_branch(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        name = self._branch(data, chat_id, none=True)
        self._expect(
            lambda: self.stores[worker].get_branch(chat_id, name, user_id=caller),
            lambda _: self.model.get_branch(chat_id, caller, name),
        )

    @rule(data=st.data(), worker=WORKERS)
    def list_branches(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        self._expect(
            lambda: self.stores[worker].list_branches(chat_id, user_id=caller),
            lambda _: self.model.list_branches(chat_id, caller),
        )

    # --- checkpoints ---------------------------------------------------------------------------

    @rule(data=st.data(), worker=WORKERS, name=st.sampled_from(CHECKPOINTS))
    def upsert_checkpoint(self, data: st.DataObject, worker: int, name: str) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        message = self._message(data, chat_id) or MISSING
        now = self._tick()
        self._expect(
            lambda: self.stores[worker].upsert_checkpoint(chat_id, name, message, user_id=caller),
            lambda _: self.model.upsert_checkpoint(chat_id, caller, name, message, now),
        )

    @rule(data=st.data(), worker=WORKERS)
    def get_checkpoint(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        name = self._checkpoint(data, chat_id)
        self._expect(
            lambda: self.stores[worker].get_checkpoint(chat_id, name, user_id=caller),
            lambda _: self.model.get_checkpoint(chat_id, caller, name),
        )

    @rule(data=st.data(), worker=WORKERS)
    def list_checkpoints(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        self._expect(
            lambda: self.stores[worker].list_checkpoints(chat_id, user_id=caller),
            lambda _: self.model.list_checkpoints(chat_id, caller),
        )

    @rule(data=st.data(), worker=WORKERS)
    def delete_checkpoint(self, data: st.DataObject, worker: int) -> None:
        chat_id = self._chat(data)
        caller = self._caller(data, chat_id)
        name = self._checkpoint(data, chat_id)
        self._expect(
            lambda: self.stores[worker].delete_checkpoint(chat_id, name, user_id=caller),
            lambda _: self.model.delete_checkpoint(chat_id, caller, name),
        )

    # --- whole-state checks --------------------------------------------------------------------

    @precondition(lambda self: self.calls >= self.checked_at + CHECK_EVERY)
    @rule(worker=WORKERS)
    def check_everything(self, worker: int) -> None:
        """Now and then (it reads everything), the whole namespace against the model."""
        self.checked_at = self.calls
        self._check_everything(self.stores[worker])

    def _check_everything(self, store: Any) -> None:
        """The listings of the namespace and per user; every chat as the model holds it: its
        fields, branches with their chains (and the active one's newest two messages),
        checkpoints, and a clean ``verify_chat``."""
        for user in (None, "alice", "bob"):
            self._check_listing(store, user, None, None)
        for chat_id in ("c1", "c2", "c3"):
            chat = self.model.chats.get(chat_id)
            if chat is None:
                with pytest.raises(errors.ChatNotFoundError):
                    store.get_chat(chat_id)
                continue
            assert store.get_chat(chat_id) == chat.meta()
            assert store.list_branches(chat_id) == self.model.list_branches(chat_id, None)
            for name in chat.branches:
                loaded = store.load_branch(chat_id, name)
                expected = self.model.load_branch(chat_id, None, name, None)
                assert (loaded.branch, loaded.messages, loaded.chain_length) == expected
            window = store.load_branch(chat_id, max_messages=2)
            expected = self.model.load_branch(chat_id, None, None, 2)
            assert (window.branch, window.messages, window.chain_length) == expected
            assert store.list_checkpoints(chat_id) == self.model.list_checkpoints(chat_id, None)
            report = store.verify_chat(chat_id)
            assert report.ok, report.problems

    def _check_listing(
        self, store: Any, user: str | None, metadata: Any, data: st.DataObject | None
    ) -> None:
        """A listing holds exactly the model's chats (each as the model has it), newest
        ``updated_at`` first; a page (drawn when ``data`` is given) is that slice of it. On a
        Cluster too: a refused write puts back the index score its pipelined touch moved."""
        expected = self.model.list_chats(user, metadata)
        listed = store.list_chats(user_id=user, metadata=metadata)
        assert sorted(info.id for info in listed) == sorted(expected)
        assert {info.id: info for info in listed} == expected
        times = [info.updated_at for info in listed]
        assert times == sorted(times, reverse=True), times
        if data is not None:
            limit = data.draw(st.integers(0, 3), label="limit")
            offset = data.draw(st.integers(0, 3), label="offset")
            page = store.list_chats(user_id=user, metadata=metadata, limit=limit, offset=offset)
            assert page == listed[offset : offset + limit]


@pytest.fixture(params=["memory", "redis", "cluster"])
def model_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The embedded store (a server of its own per test), the session's redis-server or its
    Cluster."""
    if request.param == "memory":
        yield f"memory://{uuid.uuid4().hex}"
        return
    if request.param == "cluster":
        cluster: servers.Cluster = request.getfixturevalue("redis_cluster")
        yield cluster.url
        return
    server: servers.RedisProcess = request.getfixturevalue("redis_server")
    yield server.url


@pytest.mark.timeout(0 if LONG else 300)
def test_store_follows_the_model(model_url: str) -> None:
    """Any sequence of calls answers what the reference model answers."""
    run_state_machine_as_test(lambda: StoreMachine(model_url), settings=SETTINGS)
