"""A pure-Python reference model of one namespace of the store, for the model-based tests.

The model holds what docs/store.md ("Store operations") and the docstrings promise, and nothing of
how the store keeps it: no positions, runs, token entries or indexes. A chat is a dataclass with
its messages (id -> parent, payload), its branches (name -> head), the active branch and its
checkpoints. Each operation either returns exactly what the store must return (the same
pydantic models, dataclasses and dicts) or raises :class:`ExpectedError` naming the error the store
must raise; it changes the model only once it has decided the call succeeds, as the scripts
validate everything before their first write.

Ids the store generates (``<position>.<incarnation>.<tag>``, the tag random) cannot be
predicted, so the operations that create them take what the store answered and accept it only
in that form: a wrong id then shows up as a mismatch of the whole result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxstore import errors
from ctxstore.models import (
    AppendResult,
    BranchInfo,
    ChatInfo,
    ChatMeta,
    CheckpointInfo,
    StoredMessage,
)

#: A generated message id: position, incarnation, tag (base32 lowercase letters and digits).
GENERATED_ID = re.compile(r"^(\d+)\.([a-z2-7]+)\.([a-z2-7]+)$")
#: An incarnation: 13 characters of the same alphabet, set when a chat is created.
INCARNATION = re.compile(r"^[a-z2-7]{13}$")


class ExpectedError(Exception):
    """Raised by the model: the store must refuse the call with exactly ``error``, carrying
    ``details``."""

    def __init__(self, error: type[errors.CtxStoreError], **details: Any) -> None:
        super().__init__(f"{error.__name__} {details}")
        self.error = error
        self.details = details


@dataclass
class Message:
    """An immutable node: its parent (None for a root), the payload and when it was written."""

    parent: str | None
    payload: dict[str, Any]
    created_at: int


@dataclass
class Branch:
    """A named head (None for an empty branch); ``created_at`` never changes."""

    head: str | None
    created_at: int


@dataclass
class Checkpoint:
    """A named message; placing or moving it sets ``created_at``."""

    message_id: str
    created_at: int


@dataclass(frozen=True)
class Item:
    """One message of an append: its payload and the id the caller chose (None: generated)."""

    payload: dict[str, Any]
    chosen: str | None = None


@dataclass
class Chat:
    """One chat. Dict order carries the orders the API promises: ``messages`` in write order,
    ``branches`` in creation order (``list_branches``), ``checkpoints`` in placement order
    (a moved checkpoint goes last; ``list_checkpoints`` is newest first)."""

    chat_id: str
    owner: str
    incarnation: str
    created_at: int
    updated_at: int
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    branches: dict[str, Branch] = field(default_factory=dict)
    active: str = "main"
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)

    # --- derived views, built the way the API documents them -----------------------------------

    def chain(self, head: str | None) -> list[str]:
        """The ids from the root to ``head`` (root first); empty for None."""
        ids: list[str] = []
        while head is not None:
            ids.append(head)
            head = self.messages[head].parent
        return ids[::-1]

    def stored(self, message_id: str) -> StoredMessage:
        message = self.messages[message_id]
        return {
            "id": message_id,
            "parent_id": message.parent,
            "created_at": message.created_at,
            "message": message.payload,
        }

    def branch_info(self, name: str) -> BranchInfo:
        branch = self.branches[name]
        return BranchInfo(
            name=name,
            head_message_id=branch.head,
            is_active=name == self.active,
            message_count=len(self.chain(branch.head)),
            created_at=branch.created_at,
        )

    def meta(self) -> ChatMeta:
        return ChatMeta(
            id=self.chat_id,
            user_id=self.owner,
            title=None,
            metadata=dict(self.metadata),
            created_at=self.created_at,
            updated_at=self.updated_at,
            active_branch=self.active,
            incarnation=self.incarnation,
        )

    def info(self) -> ChatInfo:
        return ChatInfo(
            **self.meta().model_dump(),
            message_count=len(self.messages),
            branch_count=len(self.branches),
        )

    def auto_name(self, base: str, taken: set[str]) -> str:
        """``<base>-v<k+1>``, k counting the branches named ``base`` or starting with
        ``<base>-v`` (create_branch's docstring); a name already taken moves the counter on.
        ``taken`` grows by the name, so several forks of one call get distinct names."""
        prefix = f"{base}-v"
        count = sum(1 for name in taken if name == base or name.startswith(prefix))
        k = max(count, 1) + 1
        while f"{prefix}{k}" in taken:
            k += 1
        taken.add(f"{prefix}{k}")
        return f"{prefix}{k}"

    def is_reserved(self, message_id: str) -> bool:
        """An id of the generated form of this incarnation, which a caller may not choose."""
        match = GENERATED_ID.match(message_id)
        return match is not None and match.group(2) == self.incarnation

    def require_message(self, message_id: str) -> None:
        if message_id not in self.messages:
            raise ExpectedError(errors.MessageNotFoundError, id=message_id)

    def require_branch(self, name: str) -> Branch:
        if name not in self.branches:
            raise ExpectedError(errors.BranchNotFoundError, id=name)
        return self.branches[name]


@dataclass
class AppendPlan:
    """What an append writes, decided before anything is written (as the script does)."""

    #: The branch the next message lands on, and its parent: an existing id, or the index of a
    #: message of this append.
    target: str
    parent: str | int | None
    #: Branch names taken so far, the ones this call creates included.
    taken: set[str]
    rebased: bool = False
    conflict_fork: str | None = None
    #: Branches to create: name, start, whether it becomes the active one.
    created: list[tuple[str, str | None, bool]] = field(default_factory=list)
    #: Per message: its branch, its parent, whether it keeps its chosen id.
    placed: list[tuple[str, str | int | None, bool]] = field(default_factory=list)

    def head_moved(self, chat: Chat, expected_head: str | None, on_conflict: str) -> None:
        """``raise`` reports the current head; ``rebase`` goes on from it; ``fork`` writes to
        a new auto-named branch (after the branch written) starting at ``expected_head``, not
        activated."""
        head = chat.branches[self.target].head
        if on_conflict == "raise":
            raise ExpectedError(
                errors.HeadConflictError,
                branch=self.target,
                expected_head=expected_head,
                current_head=head,
            )
        if on_conflict == "rebase":
            self.rebased = True
            return
        if expected_head is not None:
            chat.require_message(expected_head)
        self.conflict_fork = self.target = chat.auto_name(self.target, self.taken)
        self.parent = expected_head
        self.created.append((self.target, expected_head, False))

    def place(self, chat: Chat, index: int, item: Item, on_existing: str) -> None:
        """A chosen id the chat holds is ``raise``d, or (``fork``) an edit: a new branch at that
        message's parent, activated, where it is stored under a generated id and the messages
        after it follow. A chosen id of this incarnation's generated form is refused."""
        keeps_id = item.chosen is not None
        if item.chosen is not None and item.chosen in chat.messages:
            if on_existing == "raise":
                raise ExpectedError(errors.MessageExistsError, id=item.chosen)
            self.target = chat.auto_name(self.target, self.taken)
            self.parent = chat.messages[item.chosen].parent
            self.created.append((self.target, self.parent, True))
            keeps_id = False
        elif item.chosen is not None and chat.is_reserved(item.chosen):
            raise ExpectedError(errors.ValidationError)
        self.placed.append((self.target, self.parent, keeps_id))
        self.parent = index

    def write(
        self, chat: Chat, items: Sequence[Item], now: int, stored_ids: Sequence[str]
    ) -> AppendResult:
        """Create the branches, add the messages, move each branch written to its last one."""
        first = len(chat.messages)
        ids = [
            item.chosen
            if keeps_id and item.chosen is not None
            else _generated(chat, first, index, stored_ids)
            for index, (item, (_branch, _parent, keeps_id)) in enumerate(
                zip(items, self.placed, strict=True)
            )
        ]
        for name, start, activate in self.created:
            chat.branches[name] = Branch(start, now)
            if activate:
                chat.active = name
        for (branch, parent, _keeps), item, message_id in zip(self.placed, items, ids, strict=True):
            parent_id = ids[parent] if isinstance(parent, int) else parent
            chat.messages[message_id] = Message(parent_id, dict(item.payload), now)
            chat.branches[branch].head = message_id
        chat.updated_at = max(chat.updated_at, now)
        return AppendResult(
            branch=self.target,
            head_message_id=ids[-1],
            message_ids=tuple(ids),
            updated_at=chat.updated_at,
            rebased=self.rebased,
            conflict_fork=self.conflict_fork,
            created_branches=tuple(name for name, _start, _activate in self.created),
            incarnation=chat.incarnation,
        )


@dataclass
class StoreModel:
    """The chats of one namespace, plus what outlives a chat: its earlier incarnations and the
    generated ids they handed out (which must never name a message of a later chat)."""

    chats: dict[str, Chat] = field(default_factory=dict)
    incarnations: dict[str, list[str]] = field(default_factory=dict)
    ghost_ids: list[str] = field(default_factory=list)

    def open(self, chat_id: str, caller: str | None) -> Chat:
        """The chat a chat-scoped call works on: it exists, and ``caller`` (None: anyone) owns
        it. Another user's chat is refused as a missing one, before anything is read or
        written."""
        chat = self.chats.get(chat_id)
        if chat is None or (caller is not None and caller != chat.owner):
            raise ExpectedError(errors.ChatNotFoundError, chat_id=chat_id)
        return chat

    # --- chats ---------------------------------------------------------------------------------

    def upsert_chat(
        self,
        chat_id: str,
        user: str,
        metadata: dict[str, Any] | None,
        now: int,
        incarnation: str,
    ) -> ChatMeta:
        """Create (branch ``main``, active, empty) or check the owner; metadata merges per key
        and, when there is any, moves ``updated_at`` (never back). ``incarnation``: what the
        store answered, accepted for a new chat only when new and well formed."""
        chat = self.chats.get(chat_id)
        if chat is not None:
            if chat.owner != user:
                raise ExpectedError(errors.ChatNotFoundError, chat_id=chat_id)
        else:
            earlier = self.incarnations.setdefault(chat_id, [])
            fresh = INCARNATION.match(incarnation) and incarnation not in earlier
            chat = Chat(
                chat_id=chat_id,
                owner=user,
                incarnation=incarnation if fresh else "<a new incarnation>",
                created_at=now,
                updated_at=now,
                branches={"main": Branch(None, now)},
            )
            earlier.append(chat.incarnation)
            self.chats[chat_id] = chat
        if metadata:
            chat.metadata.update(metadata)
            chat.updated_at = max(chat.updated_at, now)
        return chat.meta()

    def get_chat(self, chat_id: str, caller: str | None) -> ChatMeta:
        return self.open(chat_id, caller).meta()

    def delete_chat(self, chat_id: str, caller: str | None) -> bool:
        """True when this call deleted it, False when there was no such chat (for the caller)."""
        chat = self.chats.get(chat_id)
        if chat is None or (caller is not None and caller != chat.owner):
            return False  # another user's chat: as if there were none
        del self.chats[chat_id]
        self.ghost_ids += [m for m in chat.messages if chat.is_reserved(m)]
        return True

    def list_chats(self, user: str | None, metadata: tuple[str, Any] | None) -> dict[str, ChatInfo]:
        """The chats a listing holds (by id; the order is checked against ``updated_at``)."""
        return {
            chat_id: chat.info()
            for chat_id, chat in self.chats.items()
            if (user is None or chat.owner == user)
            and (
                metadata is None
                or (
                    metadata[0] in chat.metadata
                    and type(chat.metadata[metadata[0]]) is type(metadata[1])
                    and chat.metadata[metadata[0]] == metadata[1]
                )
            )
        }

    # --- messages ------------------------------------------------------------------------------

    def append(
        self,
        chat_id: str,
        caller: str | None,
        branch: str,
        items: Sequence[Item],
        *,
        expected_head: str | None,
        on_conflict: str,
        on_existing: str,
        now: int,
        stored_ids: Sequence[str],
    ) -> AppendResult:
        """Append with a head compare-and-set (lua/append.lua's header is the spec):

        - head moved: ``raise`` a HeadConflictError with the current head, ``rebase`` onto it,
          or ``fork`` a new auto-named branch (after the branch written) at ``expected_head``,
          not activated;
        - a chosen id the chat holds: ``raise`` MessageExistsError, or ``fork`` (an edit): a
          new branch at that message's parent, activated, the message stored under a generated
          id; the messages after it follow it there.

        ``stored_ids``: the ids the store answered, used for the generated ones.
        """
        chosen = [item.chosen for item in items if item.chosen is not None]
        if len(set(chosen)) != len(chosen):
            raise ExpectedError(errors.ValidationError)
        chat = self.open(chat_id, caller)
        head = chat.require_branch(branch).head
        plan = AppendPlan(target=branch, parent=head, taken=set(chat.branches))
        if head != expected_head:
            plan.head_moved(chat, expected_head, on_conflict)
        for index, item in enumerate(items):
            plan.place(chat, index, item, on_existing)
        return plan.write(chat, items, now, stored_ids)

    def get_message(self, chat_id: str, caller: str | None, message_id: str) -> StoredMessage:
        chat = self.open(chat_id, caller)
        chat.require_message(message_id)
        return chat.stored(message_id)

    def get_chain(
        self,
        chat_id: str,
        caller: str | None,
        head: str | None,
        *,
        max_depth: int | None,
        newest: bool,
    ) -> list[StoredMessage]:
        """The chain ending at ``head``, root first; longer than ``max_depth`` it is refused,
        or cut to its newest ``max_depth`` messages with ``newest``."""
        chat = self.open(chat_id, caller)
        if head is not None:
            chat.require_message(head)
        ids = chat.chain(head)
        if max_depth is not None and len(ids) > max_depth:
            if not newest:
                raise ExpectedError(errors.LimitExceededError)
            ids = ids[len(ids) - max_depth :]
        return [chat.stored(message_id) for message_id in ids]

    def load_branch(
        self, chat_id: str, caller: str | None, branch: str | None, max_messages: int | None
    ) -> tuple[BranchInfo, list[StoredMessage], int]:
        """A branch (the active one for None), its chain (only the newest ``max_messages``
        messages when given; no tool messages here, so no tool-group rule applies) and the
        whole chain's length."""
        chat = self.open(chat_id, caller)
        name = chat.active if branch is None else branch
        chat.require_branch(name)
        ids = chat.chain(chat.branches[name].head)
        kept = ids if max_messages is None else ids[len(ids) - min(max_messages, len(ids)) :]
        return chat.branch_info(name), [chat.stored(i) for i in kept], len(ids)

    # --- branches ------------------------------------------------------------------------------

    def create_branch(
        self,
        chat_id: str,
        caller: str | None,
        at_message: str | None,
        *,
        base: str,
        name: str | None,
        activate: bool,
        now: int,
    ) -> BranchInfo:
        """A branch at ``at_message`` (empty for None), named ``name`` (taken: BranchExists)
        or auto-named from ``base``; activated when asked."""
        chat = self.open(chat_id, caller)
        if at_message is not None:
            chat.require_message(at_message)
        return self._new_branch(chat, at_message, base, name, activate, now)

    def branch_from_checkpoint(
        self,
        chat_id: str,
        caller: str | None,
        checkpoint: str,
        *,
        base: str,
        name: str | None,
        activate: bool,
        now: int,
    ) -> BranchInfo:
        """``create_branch`` at a checkpoint's message."""
        chat = self.open(chat_id, caller)
        if checkpoint not in chat.checkpoints:
            raise ExpectedError(errors.CheckpointNotFoundError, id=checkpoint)
        at = chat.checkpoints[checkpoint].message_id
        return self._new_branch(chat, at, base, name, activate, now)

    @staticmethod
    def _new_branch(
        chat: Chat, at: str | None, base: str, name: str | None, activate: bool, now: int
    ) -> BranchInfo:
        if name is not None and name in chat.branches:
            raise ExpectedError(errors.BranchExistsError)
        if name is None:
            name = chat.auto_name(base, set(chat.branches))
        chat.branches[name] = Branch(at, now)
        if activate:
            chat.active = name
        return chat.branch_info(name)

    def get_branch(self, chat_id: str, caller: str | None, name: str | None) -> BranchInfo:
        chat = self.open(chat_id, caller)
        name = chat.active if name is None else name
        chat.require_branch(name)
        return chat.branch_info(name)

    def list_branches(self, chat_id: str, caller: str | None) -> list[BranchInfo]:
        """Every branch in creation order; exactly one is active."""
        chat = self.open(chat_id, caller)
        return [chat.branch_info(name) for name in chat.branches]

    def set_active_branch(self, chat_id: str, caller: str | None, name: str) -> BranchInfo:
        chat = self.open(chat_id, caller)
        chat.require_branch(name)
        chat.active = name
        return chat.branch_info(name)

    # --- checkpoints ---------------------------------------------------------------------------

    def upsert_checkpoint(
        self, chat_id: str, caller: str | None, name: str, message_id: str, now: int
    ) -> CheckpointInfo:
        """Name a message; an existing checkpoint of that name moves (and counts as newest)."""
        chat = self.open(chat_id, caller)
        chat.require_message(message_id)
        chat.checkpoints.pop(name, None)
        chat.checkpoints[name] = Checkpoint(message_id, now)
        return CheckpointInfo(name=name, message_id=message_id, created_at=now)

    def get_checkpoint(self, chat_id: str, caller: str | None, name: str) -> CheckpointInfo:
        chat = self.open(chat_id, caller)
        if name not in chat.checkpoints:
            raise ExpectedError(errors.CheckpointNotFoundError, id=name)
        checkpoint = chat.checkpoints[name]
        return CheckpointInfo(
            name=name, message_id=checkpoint.message_id, created_at=checkpoint.created_at
        )

    def list_checkpoints(self, chat_id: str, caller: str | None) -> list[CheckpointInfo]:
        """Newest first: most recently placed or moved."""
        chat = self.open(chat_id, caller)
        return [self.get_checkpoint(chat_id, caller, name) for name in reversed(chat.checkpoints)]

    def delete_checkpoint(self, chat_id: str, caller: str | None, name: str) -> bool:
        """True if it existed; the message it named stays."""
        chat = self.open(chat_id, caller)
        return chat.checkpoints.pop(name, None) is not None


def _generated(chat: Chat, first: int, index: int, stored_ids: Sequence[str]) -> str:
    """The store's id for message ``index`` of an append whose first message went to log
    position ``first``, when it has the generated form of that position and this chat's
    incarnation; else a placeholder that matches no answer."""
    position = first + index
    if index < len(stored_ids):
        match = GENERATED_ID.match(stored_ids[index])
        if (
            match is not None
            and match.group(1) == str(position)
            and match.group(2) == chat.incarnation
            and len(match.group(3)) == 6
        ):
            return stored_ids[index]
    return f"{position}.{chat.incarnation}.<tag>"
