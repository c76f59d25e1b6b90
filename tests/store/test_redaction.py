"""``redact_message``: one message's text gone from every read, on every branch, in every
process, with its tool-call pairing, its place and every count after it kept consistent. On the
embedded store, a redis-server and a Cluster, through the sync and the async shell."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import streams as answer_stream
from ctxstore.errors import (
    ChatNotFoundError,
    ConfigurationError,
    MessageNotFoundError,
    ValidationError,
)
from ctxstore.messages.redaction import redacted_metadata, redacted_payload
from ctxstore.messages.tokens import message_counter
from tests.store.test_erasure import plain_dump
from tests.support.keyspace import raw_client

SECRET = "hunter2-7c1d9e"
PASTE = f"my password is {SECRET}, please remember it"


@pytest.fixture
def url_store(store: Any, backend: str) -> Any:
    store.url = backend
    return store


def conversation(store: Any) -> dict[str, Any]:
    """alice's c1: a question pasting the secret, a tool call and its result quoting it, an
    answer, an edit fork after the question, a checkpoint past it, a summary covering it, the
    answer streamed, and a title made from the question."""
    store.upsert_chat("c1", "alice")
    first = store.append(
        "c1",
        None,
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": PASTE},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {
                            "name": "vault_store",
                            "arguments": json.dumps({"pw": SECRET}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call-1", "content": f"stored {SECRET}"},
        ],
        expected_head=None,
    )
    system, question, call, result = first.message_ids
    state = store.state
    stream_id = store.run(answer_stream.begin_stream(state, "c1", "main", writer_ttl_ms=60_000))
    store.run(
        answer_stream.write_stream(state, "c1", stream_id, 1, "I kept ", writer_ttl_ms=60_000)
    )
    store.run(answer_stream.write_stream(state, "c1", stream_id, 2, SECRET, writer_ttl_ms=60_000))
    answer = store.append(
        "c1", None, [{"role": "assistant", "content": f"kept {SECRET} safe"}], expected_head=result
    ).head_message_id
    store.run(
        answer_stream.end_stream(state, "c1", stream_id, done=True, detail=answer, keep_ms=600_000)
    )
    after = store.append(
        "c1", None, [{"role": "user", "content": "thanks"}], expected_head=answer
    ).head_message_id
    store.write_summary("c1", answer, f"the user shared {SECRET}")
    fork = store.create_branch("c1", question, name="other")
    store.append(
        "c1", "other", [{"role": "user", "content": "another way"}], expected_head=question
    )
    store.set_active_branch("c1", "main")
    store.upsert_checkpoint("c1", "cp", after)
    store.update_chat("c1", title=ctxstore.engine.titles.static_chat_title(
        {"role": "user", "content": PASTE}
    ))  # fmt: skip
    return {
        "system": system,
        "question": question,
        "call": call,
        "result": result,
        "answer": answer,
        "after": after,
        "stream": stream_id,
        "fork": fork.name,
    }


def every_read(store: Any) -> str:
    """Everything a caller can read of c1, as text."""
    parts: list[Any] = []
    for branch in store.list_branches("c1"):
        parts.append(store.load_branch("c1", branch.name).messages)
        parts.append(store.get_chain("c1", branch.head_message_id))
    for message in store.load_branch("c1").messages:
        parts.append(store.get_message("c1", message["id"]))
    parts.append(list(store.export_chat("c1")))
    parts.append(store.get_graph("c1"))
    parts.append(store.get_chat("c1"))
    parts.append(store.list_chats())
    parts.append(store.open_chat("c1", "alice", load=True))
    return repr(parts)


def counted(store: Any, branch: str) -> int:
    """The branch's tokens counted from its payloads, as the store's counter counts them."""
    count = message_counter(None, None)
    return sum(count(message["message"]) for message in store.load_branch("c1", branch).messages)


def test_a_redacted_message_leaves_no_byte_of_its_text_anywhere(
    url_store: Any, namespace: str
) -> None:
    store = url_store
    ids = conversation(store)
    assert SECRET in every_read(store)
    for name in ("question", "call", "result", "answer"):
        done = store.redact_message("c1", ids[name], reason="a pasted password")
        assert done.redacted
    assert SECRET not in every_read(store)
    for key, values in plain_dump(store.url, f"ctx:{namespace}").items():
        assert not any(SECRET.encode() in value for value in values), key
    pieces = [piece.text for piece in store.read_stream("c1", ids["stream"])]
    assert SECRET not in "".join(pieces)
    assert store.verify_chat("c1").ok


def test_the_message_keeps_its_place_its_pairing_and_every_count_follows(url_store: Any) -> None:
    store = url_store
    ids = conversation(store)
    sizes_before = {
        b.name: store.branch_size("c1", b.name).tokens for b in store.list_branches("c1")
    }
    store.redact_message("c1", ids["question"])
    store.redact_message("c1", ids["call"])
    store.redact_message("c1", ids["result"])
    messages = store.load_branch("c1").messages
    assert [m["id"] for m in messages] == [
        ids["system"], ids["question"], ids["call"], ids["result"], ids["answer"], ids["after"]
    ]  # fmt: skip
    question, call, result = (m["message"] for m in messages[1:4])
    assert question == {"role": "user", "content": "[redacted]"}
    assert call["tool_calls"][0]["id"] == "call-1"
    assert call["tool_calls"][0]["function"]["name"] == "vault_store"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"redacted": "[redacted]"}
    assert result == {"role": "tool", "tool_call_id": "call-1", "content": "[redacted]"}
    assert messages[1]["metadata"]["redacted"]["reason"] is None
    for branch in store.list_branches("c1"):
        size = store.branch_size("c1", branch.name)
        assert size.tokens == counted(store, branch.name), branch.name
        assert size.summary_message_id is None  # the summary covered the question: dropped
        assert size.context_tokens == size.tokens
    assert store.list_branches("c1")[0].head_message_id  # heads unchanged
    assert {b.name for b in store.list_branches("c1")} == set(sizes_before)
    assert store.get_checkpoint("c1", "cp").message_id == ids["after"]
    assert store.get_chat("c1").title == "[redacted]"
    assert store.verify_chat("c1").ok


def test_a_dropped_summary_enqueues_a_compaction(url_store: Any) -> None:
    store = url_store
    ids = conversation(store)
    raw = raw_client(store.url)
    stream = store.state.keyspace.job_stream("c1")
    before = raw.xlen(stream)
    done = store.redact_message("c1", ids["question"])
    assert done.summaries_dropped == 1
    assert done.compaction_job is not None
    entries = raw.xrange(stream)
    raw.close()
    assert len(entries) == before + 1
    fields = entries[-1][1]
    assert fields[b"chat"] == b"c1"
    assert fields[b"job"] == done.compaction_job.encode()
    quiet = store.redact_message("c1", ids["after"])  # after the summary: it covered none
    assert quiet.summaries_dropped == 0
    assert quiet.compaction_job is None


def test_the_answer_stream_that_carried_a_message_loses_its_pieces(url_store: Any) -> None:
    store = url_store
    ids = conversation(store)
    done = store.redact_message("c1", ids["answer"])
    assert done.stream_entries_removed == 3  # its two pieces and its end
    pieces = [piece.text for piece in store.read_stream("c1", ids["stream"])]
    assert SECRET not in "".join(pieces)


def test_redacting_twice_changes_nothing(url_store: Any, namespace: str) -> None:
    store = url_store
    ids = conversation(store)
    first = store.redact_message("c1", ids["question"], reason="first")
    dump = plain_dump(store.url, f"ctx:{namespace}")
    second = store.redact_message("c1", ids["question"], reason="second")
    assert first.redacted
    assert not second.redacted
    assert plain_dump(store.url, f"ctx:{namespace}") == dump
    assert store.get_message("c1", ids["question"])["metadata"]["redacted"]["reason"] == "first"


def test_a_chain_another_process_cached_is_never_served_again(backend: str, namespace: str) -> None:
    """Another process: a store around a client of its own keeps a private chain cache."""
    writer = ctxstore.connect(backend, namespace=namespace).admin()
    writer.url = backend  # type: ignore[attr-defined]
    ids = conversation(writer)
    other = ctxstore.connect(raw_client(backend), namespace=namespace).admin()
    assert SECRET in repr(other.load_branch("c1").messages)  # read, and cached there
    assert SECRET in repr(other.load_branch("c1").messages)  # a warm read
    writer.redact_message("c1", ids["question"])
    writer.redact_message("c1", ids["call"])
    writer.redact_message("c1", ids["result"])
    writer.redact_message("c1", ids["answer"])
    assert SECRET not in repr(other.load_branch("c1").messages)
    assert SECRET not in repr(other.open_chat("c1", "alice", load=True).messages)
    engine = ctxstore.ContextEngine(store=other, chat_id="c1", user_id="alice")
    assert SECRET not in repr(engine.resolve().messages)
    other.close()
    writer.close()


def test_only_the_owner_or_an_operator_redacts(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace)
    admin = store.admin()
    admin.url = backend  # type: ignore[attr-defined]
    ids = conversation(admin)
    with pytest.raises(ctxstore.errors.ScopeError):
        store.redact_message("c1", ids["question"])
    with pytest.raises(ChatNotFoundError):
        store.for_user("mallory").redact_message("c1", ids["question"])
    done = store.for_user("alice").redact_message("c1", ids["question"])
    assert done.redacted
    store.close()


def test_bad_input_is_refused_and_writes_nothing(url_store: Any, namespace: str) -> None:
    store = url_store
    ids = conversation(store)
    dump = plain_dump(store.url, f"ctx:{namespace}")
    with pytest.raises(ValidationError):
        store.redact_message("c1", ids["question"], reason=3)
    with pytest.raises(ValidationError):
        store.redact_message("c1", ids["question"], reason="x" * 5000)
    with pytest.raises(MessageNotFoundError):
        store.redact_message("c1", "no-such-message")
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.redact_message("c1", "")
    with pytest.raises(ChatNotFoundError):
        store.redact_message("nope", ids["question"])
    assert plain_dump(store.url, f"ctx:{namespace}") == dump


def test_the_marker_is_a_setting(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace, redaction_marker="(removed)").admin()
    store.upsert_chat("c1", "alice")
    head = store.append(
        "c1", None, [{"role": "user", "content": PASTE}], expected_head=None
    ).head_message_id
    store.redact_message("c1", head)
    assert store.get_message("c1", head)["message"]["content"] == "(removed)"
    store.close()
    for bad in ("", "a\nb", 3, "x" * 300):
        with pytest.raises(ConfigurationError):
            ctxstore.connect("memory://", redaction_marker=bad)


# --- the redacted forms ------------------------------------------------------------------------


def test_a_ui_message_keeps_its_id_and_role_and_one_text_part() -> None:
    ui = {
        "id": "u1",
        "role": "user",
        "parts": [{"type": "text", "text": SECRET}, {"type": "file", "url": "data:..."}],
        "metadata": {"pasted": SECRET},
    }
    assert redacted_payload(ui, "[r]") == {
        "id": "u1",
        "role": "user",
        "parts": [{"type": "text", "text": "[r]"}],
    }


def test_responses_items_keep_their_call_ids_and_names() -> None:
    call = {"type": "function_call", "call_id": "c9", "name": "f", "arguments": SECRET, "id": "fc"}
    output = {"type": "function_call_output", "call_id": "c9", "output": SECRET}
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": SECRET}],
    }
    reasoning = {
        "type": "reasoning",
        "id": "r1",
        "summary": [{"type": "summary_text", "text": SECRET}],
        "encrypted_content": SECRET,
    }
    assert redacted_payload(call, "[r]") == {
        "type": "function_call", "call_id": "c9", "name": "f", "id": "fc",
        "arguments": json.dumps({"redacted": "[r]"}),
    }  # fmt: skip
    assert redacted_payload(output, "[r]") == {
        "type": "function_call_output", "call_id": "c9", "output": "[r]"
    }  # fmt: skip
    assert redacted_payload(message, "[r]")["content"] == [{"type": "output_text", "text": "[r]"}]
    assert SECRET not in repr(redacted_payload(reasoning, "[r]"))
    for item in (call, output, message, reasoning):
        assert SECRET not in repr(redacted_payload(item, "[r]"))


def test_metadata_keeps_its_keys_and_the_first_redactions_note() -> None:
    first = redacted_metadata({"source": SECRET}, "[r]", "why", 5)
    assert first == {"source": "[r]", "redacted": {"at": 5, "reason": "why"}}
    assert redacted_metadata(first, "[r]", "again", 9) == first
