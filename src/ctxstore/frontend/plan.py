"""``chat()``'s logic, without I/O: a plan (:mod:`ctxstore._base.plans`) that a sync or an async
shell drives (:mod:`ctxstore.frontend.streams`).

What a chat answer does, in order:

1. (:meth:`ChatPlan.prepare`, before ``chat()`` returns) open the chat and place the new user
   message: pending under its client id; an edit (its id is in the chat with other content)
   moves the engine to a new branch at the edited message's parent, where the edit goes under
   a new id, as ``save()`` forks one; a resent submit of the branch's head is not saved again.
   A regenerate moves the engine to a new branch at the parent of the answer it replaces.
   Then resolve the context as ``engine.resolve()`` does.
2. (:meth:`ChatPlan.start`) save the user message (with the static title of an untitled chat)
   and start the answer's Redis stream (resumable by other workers and reloaded pages), both
   in one round trip, before any model call: a worker that dies while it answers leaves the
   question in the chat. With ``generate_title``, the title starts in the background.
3. (:meth:`ChatPlan.steps`, iterating) ``start`` with the answer's id, the static title of an
   untitled chat as a transient ``data-chat-title``, then up to ``max_steps`` model calls: each
   a ``start-step``, the model's text, reasoning and tool calls as they stream, the tools run
   (in parallel, by the shell) and their outputs, a ``finish-step``; the loop goes on while the
   model calls tools. Every chunk is also mirrored, as JSON lines, into the answer's stream.
4. At the end: the usage tracked, the answer (one ``UIMessage`` holding every step's parts,
   under the announced id, with its metadata) appended after the question, the model-made title
   set, ``message-metadata`` and ``finish`` handed out and written, the stream marked done.

A consumer that stops reading (``break``, ``close()``, a cancelled task), :meth:`ChatStream.stop`
or another worker's ``stop_stream`` ends the answer early: what was streamed is saved as the
answer with ``metadata.ctxstore.aborted = true``, never twice. An error saves no answer (the
question is saved already), hands out an ``error`` chunk whose text ``on_error`` gives (a
generic one by default: the exception's text can hold what a user must not see) and ends the
stream failed; the exception is logged and kept on the stream (``ChatStream.error``). A worker
killed while it answers leaves the question and a stream that its readers see fail once the
writer's deadline passes; the next ``chat()`` (a regenerate answers the question where it
stands, or the next message) carries on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxstore._base.plans import Effect, Emit, Plan, Run
from ctxstore._core.ops import reads
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.protocol import together
from ctxstore.engine.core import EngineCore
from ctxstore.engine.stream_io import (
    ABANDON,
    END,
    NEXT_CHUNK,
    SETTLE,
    TITLE,
    OpenModel,
    StartTitle,
    StreamBuffer,
)
from ctxstore.engine.titles import static_chat_title
from ctxstore.errors import CtxStoreError, NotFoundError, StreamFailedError, ValidationError
from ctxstore.frontend.protocol import AnswerBuilder, chunk_json, merge_metadata
from ctxstore.frontend.reading import ModelCallReader
from ctxstore.frontend.request import ChatRequest
from ctxstore.frontend.tools import ToolError, ToolSpec, model_tools, output_json
from ctxstore.messages.usage import normalize_usage
from ctxstore.models import ResolveResult, SavedHead
from ctxstore.prompt.messages import assistant, user
from ctxstore.ui.to_model import model_messages_of
from ctxstore.window.manager import ContextManager

__all__ = ["DEFAULT_ERROR_TEXT", "ChatPlan", "RunTools", "ToolRun"]

log = logging.getLogger("ctxstore")

#: What a client is told of an error when ``on_error`` says nothing else (the SDK's default).
DEFAULT_ERROR_TEXT = "An error occurred."


@dataclass(frozen=True)
class ToolRun:
    """One tool call to run: the tool, the call's id, the arguments of its function."""

    spec: ToolSpec
    call_id: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class RunTools:
    """Run these tool calls (in parallel) and give back, in order, ``(True, result)`` or
    ``(False, the exception)`` for each."""

    runs: tuple[ToolRun, ...]


class _StopRequestedError(Exception):
    """The answer was stopped: by ``ChatStream.stop()``, or its stream closed by another
    worker (``stop_stream``)."""


class ChatPlan:
    """The steps of one ``chat()`` answer (see the module). Not reusable: one plan, one answer."""

    def __init__(self, engine: EngineCore, request: ChatRequest) -> None:
        self._engine = engine
        self._request = request
        self._builder = AnswerBuilder(request.answer_id)
        self._buffer = StreamBuffer(engine, request.stream.writer_ttl_ms)
        self._context: list[dict[str, Any]] = []
        self._usage: list[dict[str, int]] = []
        #: Why each model call ended, in order: the last one is the answer's.
        self._finish_reasons: list[str] = []
        self._static_title: str | None = None
        self._title_started = False
        self._saving = False
        #: The answer stream's id, once started.
        self.stream_id: str | None = None
        #: Where the user message was saved (when the answer began), once it was.
        self.question_saved: SavedHead | None = None
        #: Where the answer was saved, once it was.
        self.saved: SavedHead | None = None
        #: "new", "streaming", then "done", "stopped" or "failed".
        self.state = "new"
        #: The error that ended the answer, if one did.
        self.error: BaseException | None = None
        #: Set by ``ChatStream.stop()``: the next chunk ends the answer.
        self.stop_requested = False
        #: Whether reading began.
        self.read = False
        #: Set when the answer ends early: the async shell shields the cleanup's awaits.
        self.cleaning = False

    @property
    def answer_id(self) -> str:
        return self._request.answer_id

    @property
    def model(self) -> str:
        """The model the answer is asked of."""
        return self._request.model

    @property
    def model_calls(self) -> int:
        """How many model calls the answer made so far."""
        return len(self._finish_reasons)

    @property
    def finish_reasons(self) -> tuple[str, ...]:
        """Why each model call ended, in order (``stop``, ``tool-calls``...)."""
        return tuple(self._finish_reasons)

    @property
    def usage(self) -> dict[str, int]:
        """The tokens of the answer's model calls, summed (empty when no provider told)."""
        return _summed(self._usage)

    # --- before chat() returns ------------------------------------------------------------

    def prepare(self) -> Plan[ResolveResult]:
        """Open the chat, place the new message (or move to regenerate), resolve the context."""
        engine, request = self._engine, self._request
        yield Run(engine.ensure_open())
        if request.trigger == "regenerate-message":
            yield from self._move_to_regenerate()
        else:
            yield from self._place_user_message()
        chain = yield from engine.resolve_plan(None, None, False)
        return engine.resolved(chain, None)

    def _move_to_regenerate(self) -> Plan[None]:
        engine = self._engine
        target = self._request.message_id or engine.session.head
        if target is None:
            raise ValidationError("nothing to regenerate: the branch holds no message")
        found = yield Run(self._get_message(target))
        role = found["message"].get("role")
        if role == "user":
            # A question without its answer (an error saved it alone; the SDK's regenerate()
            # then names no message): it is answered where it stands.
            if target != engine.session.head:
                yield Run(engine.rewind_op(target))
            return
        if role != "assistant":
            raise ValidationError(f"message {target!r} is not an answer: it cannot be regenerated")
        if found["parent_id"] is None:
            raise ValidationError(f"answer {target!r} has no message before it to answer again")
        yield Run(engine.rewind_op(found["parent_id"]))

    def _place_user_message(self) -> Plan[None]:
        engine = self._engine
        message = self._request.user_message
        assert message is not None
        payload = {key: value for key, value in message.items() if key != "id"}
        try:
            existing = yield Run(self._get_message(message["id"]))
        except NotFoundError:
            existing = None
        if existing is None:
            engine.set([user(message)])
        elif existing["message"] == payload and existing["id"] == engine.session.head:
            return  # a resent submit: the message is the head already; answer it
        elif existing["parent_id"] is not None:
            # An edit: a new branch at the edited message's parent, the edit there under a new
            # id (the original stays on its branch), as save() forks an edit.
            yield Run(engine.rewind_op(existing["parent_id"]))
            engine.set([user(payload)])
        else:
            engine.set([user(message)])  # an edit of the first message: save() forks it

    def _get_message(self, message_id: str) -> Any:
        engine = self._engine
        return reads.get_message(
            engine.store_state, engine.chat_id, message_id, **engine.stream_scope(fenced=False)
        )

    def start(self, context: ResolveResult) -> Plan[None]:
        """Start the answer's stream, and the title in the background when asked for."""
        engine, request = self._engine, self._request
        self._context = context.with_system()
        question = next(
            (item for item in engine.prompt.pending if item.data.get("role") == "user"), None
        )
        if question is not None and engine.session.untitled():
            self._static_title = static_chat_title(question)
        begin = answer_stream.begin_stream(
            engine.store_state,
            engine.chat_id,
            engine.session.branch,
            writer_ttl_ms=request.stream.writer_ttl_ms,
            **engine.stream_scope(fenced=True),
        )
        if engine.prompt.pending:
            # The question is saved in the round trip that begins the stream, before any model
            # call: a worker that dies while it answers leaves the question in the chat.
            asked, began = yield Run(together([engine.save_op(), begin]))
            if isinstance(asked, CtxStoreError):
                if not isinstance(began, CtxStoreError):
                    self.stream_id = began
                    yield from self._close(done=False, reason=f"failed: {asked}")
                raise asked
            if isinstance(began, CtxStoreError):
                raise began
            self.question_saved = asked
            self.stream_id = began
        else:
            self.stream_id = yield Run(begin)
        self._buffer.started(self.stream_id)
        self.state = "streaming"
        if request.generate_title and question is not None and self._static_title is not None:
            self._title_started = True
            yield Effect(StartTitle(question, request.title_model or request.model, {}))

    # --- iterating --------------------------------------------------------------------------

    def steps(self) -> Plan[None]:
        """The answer's chunks (see the module)."""
        if self.read or self.state != "streaming":
            raise RuntimeError("a chat stream is read once")
        self.read = True
        try:
            start: dict[str, Any] = {"type": "start", "messageId": self.answer_id}
            metadata = self._caller_metadata({"type": "start"})
            if metadata is not None:
                start["messageMetadata"] = metadata
            yield from self._emit(start)
            if self._static_title is not None:
                yield from self._emit(_title_chunk(self._static_title))
            for step in range(1, self._request.max_steps + 1):
                if not (yield from self._model_call(step)):
                    break
            yield from self._finish()
        except BaseException as error:  # every way out is handled, then re-raised if it must be
            yield from self._ended_early(error)

    def cancel(self) -> Plan[None]:
        """End an answer nobody read: what there is (the user message) is saved as stopped."""
        if self.read or self.state != "streaming":
            return
        self.read = True
        yield from self._ended_early(GeneratorExit(), reraise=False)

    def _model_call(self, step: int) -> Plan[bool]:
        """One model call and the tools it calls; True when the loop goes on."""
        request = self._request
        yield from self._emit({"type": "start-step"})
        model_request: dict[str, Any] = {
            **request.arguments,
            "model": request.model,
            "messages": self._context + model_messages_of(self._builder.message),
            "stream": True,
            "stream_options": {
                **dict(request.arguments.get("stream_options") or {}),
                "include_usage": True,
            },
        }
        if request.tools:
            model_request["tools"] = model_tools(request.tools)
        yield Effect(OpenModel(model_request))
        reader = ModelCallReader(step)
        while True:
            chunk = yield Effect(NEXT_CHUNK)
            if chunk is END:
                break
            for ui_chunk in reader.read(chunk):
                yield from self._emit(ui_chunk)
        for ui_chunk in reader.close():
            yield from self._emit(ui_chunk)
        if reader.usage is not None:
            self._usage.append(normalize_usage(reader.usage))
        self._finish_reasons.append(reader.finish)
        runs: list[ToolRun] = []
        for call in reader.calls.values():
            part = self._builder.tool_part(call.call_id)
            if part is None or part.get("state") != "input-available":
                continue  # arguments that were not JSON: answered with their error already
            run = self._tool_run(call.call_id, call.name, part.get("input"))
            if isinstance(run, ToolRun):
                runs.append(run)
            else:
                yield from self._emit(run)
        if runs:
            results = yield Effect(RunTools(tuple(runs)))
            for run, (ok, value) in zip(runs, results, strict=True):
                yield from self._emit(_tool_output(run.call_id, ok, value))
        yield from self._emit({"type": "finish-step"})
        return bool(reader.calls) and step < request.max_steps

    def _tool_run(self, call_id: str, name: str, arguments: Any) -> ToolRun | dict[str, Any]:
        """The run of one call, or the error chunk that answers it without a run."""
        spec = self._request.tools.get(name)
        if spec is None:
            return _tool_error(call_id, f"there is no tool named {name!r}")
        try:
            args, kwargs = spec.arguments(arguments, self._request.context_variables)
        except ToolError as error:
            return _tool_error(call_id, str(error))
        return ToolRun(spec, call_id, args, kwargs)

    def _emit(self, chunk: dict[str, Any], *, applied: bool = False) -> Plan[None]:
        """Hand a chunk out (through ``transform``), build the answer with it, mirror it."""
        for out in self._transformed(chunk):
            if not applied:
                self._builder.apply(out)
            self._buffer.add(chunk_json(out))  # mirrored even if this consumer leaves now
            yield Emit(out)
            if self._buffer.due():
                yield Effect(self._buffer.write("\n"))
            if self.stop_requested:
                raise _StopRequestedError("stopped by the caller")

    def _transformed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        transform = self._request.transform
        if transform is None:
            return [chunk]
        result = transform(chunk)
        if result is None:
            return []
        if isinstance(result, Mapping):
            return [dict(result)]
        return [dict(item) for item in result]

    # --- the end ---------------------------------------------------------------------------

    def _finish(self) -> Plan[None]:
        engine, request = self._engine, self._request
        # What waits is written and every write settled before the answer is saved whole: a
        # stop that another worker gave meanwhile is found now (its stream is closed), and
        # the answer is saved as stopped instead.
        if self._buffer.waiting:
            yield Effect(self._buffer.write("\n"))
        yield Effect(SETTLE)
        usage = _summed(self._usage)
        metadata: dict[str, Any] = {}
        if usage:
            metadata["usage"] = usage
            totals = yield Run(engine.track_usage_op(usage))
            metadata["chat_usage"] = totals
        metadata["context"] = self._context_metadata()
        finish_metadata = merge_metadata(
            self._caller_metadata({"type": "finish", "usage": usage}),
            request.final_assistant_metadata,
        )
        final: list[dict[str, Any]] = []
        if metadata:
            final += self._transformed(
                {"type": "message-metadata", "messageMetadata": {"ctxstore": metadata}}
            )
        reason = self._finish_reasons[-1] if self._finish_reasons else "other"
        finish: dict[str, Any] = {"type": "finish", "finishReason": reason}
        if finish_metadata:
            finish["messageMetadata"] = finish_metadata
        final += self._transformed(finish)
        for chunk in final:
            self._builder.apply(chunk)  # saved as the client will hold it
        yield from self._save(self._builder.message)
        title = yield from self._generated_title()
        if title is not None:
            yield from self._emit(_title_chunk(title))
        for chunk in final:  # all mirrored first: the answer is saved, readers get it whole
            self._buffer.add(chunk_json(chunk))
        for chunk in final:
            yield Emit(chunk)
        yield from self._close(done=True)
        self.state = "done"

    def _context_metadata(self) -> dict[str, Any]:
        """How full the window is after this answer, as a ``ContextManager`` says it
        (``usage_ratio``, 0 to 1, and what it comes from): the engine's manager's, else one for
        the answer's model (its window from litellm's map, or the default one; ``max_tokens_source``
        says which). The context is the last model call's input and output as the provider
        counted them, else what was sent and the answer, counted here."""
        engine = self._engine
        manager = engine.manager
        if manager is None:
            manager = ContextManager(model=self._request.model)
            if not self._usage:
                sent = self._context + model_messages_of(self._builder.message)
                manager.should_summarize(sent)  # counts them as its context
        if self._usage:
            manager.record_usage(self._usage[-1])
        state = manager.get_state()
        shown = manager.get_message_metadata()
        shown["max_tokens_source"] = state["max_tokens_source"]
        return shown

    def _save(self, answer: dict[str, Any] | None) -> Plan[None]:
        """Save ``answer`` (a UI message; None: none) with whatever is pending (nothing, once
        the question was saved at the start) in one append; a retry after a save whose outcome
        is unknown checks first."""
        engine = self._engine
        if self.saved is not None:
            return
        if self._saving and (yield from self._already_saved()):
            return
        # A retry (a stop during the final save) replaces the answer it queued before.
        engine.prompt.pending = [
            item for item in engine.prompt.pending if item.id != self.answer_id
        ]
        if answer is not None:
            payload = {key: value for key, value in answer.items() if key != "id"}
            engine.set([assistant(payload, id=self.answer_id)])
        self._saving = True
        saved = yield Run(engine.save_op())
        self.saved = saved

    def _already_saved(self) -> Plan[bool]:
        """Whether a save whose reply was lost (a cancel while it ran) stored the answer; the
        engine's next read finds where it went."""
        try:
            yield Run(self._get_message(self.answer_id))
        except NotFoundError:
            return False
        self._engine.prompt.drop_pending()
        self.saved = SavedHead(self.answer_id, branch=self._engine.session.branch)
        return True

    def _generated_title(self) -> Plan[str | None]:
        if not self._title_started:
            return None
        title = yield Effect(TITLE)
        if not isinstance(title, str) or title == self._static_title:
            return None
        try:
            yield Run(self._engine.update_chat_op(title, None))
        except CtxStoreError as error:
            log.warning("could not set the title of chat %r: %s", self._engine.chat_id, error)
            return None
        return title

    def _close(self, *, done: bool, reason: str = "") -> Plan[None]:
        """Write what waits, then mark the stream done (with the answer's id) or failed."""
        engine = self._engine
        if self._buffer.waiting:
            yield Effect(self._buffer.write("\n"))
        yield Effect(SETTLE)
        assert self.stream_id is not None
        yield Run(
            answer_stream.end_stream(
                engine.store_state,
                engine.chat_id,
                self.stream_id,
                done=done,
                detail=self.answer_id if done else reason,
                keep_ms=self._request.stream.stream_ttl_ms,
                **engine.stream_scope(fenced=False),
            )
        )

    def _ended_early(self, error: BaseException, *, reraise: bool = True) -> Plan[None]:
        """A stop or a failure (see the module); re-raises what the caller must see (a close,
        a cancel, an interrupt), after the cleanup, and hands nothing out after those."""
        self.cleaning = True
        yield Effect(ABANDON)
        if self.saved is not None and isinstance(error, Exception):
            yield from self._after_save(error)
            return
        stopped_elsewhere = isinstance(error, StreamFailedError)
        if (
            stopped_elsewhere
            or not isinstance(error, Exception)
            or (isinstance(error, _StopRequestedError))
        ):
            yield from self._stopped(error, closed=stopped_elsewhere)
            if not isinstance(error, Exception):  # a close, a cancel, an interrupt
                if reraise:
                    raise error
                return
            yield Emit({"type": "abort", "reason": _stop_reason(error)})
            return
        yield from self._failed(error)

    def _after_save(self, error: Exception) -> Plan[None]:
        """A failure once the answer was saved whole (a write of the last chunks, the stream's
        close): the answer stands; the stream is closed as done if it still can be."""
        self.state = "done"
        log.warning("chat %r: after the answer was saved: %s", self._engine.chat_id, error)
        if not isinstance(error, StreamFailedError):
            try:
                yield from self._close(done=True)
            except CtxStoreError as failure:
                log.warning("chat %r: the stream was not closed: %s", self._engine.chat_id, failure)

    def _stopped(self, error: BaseException, *, closed: bool) -> Plan[None]:
        complete = self.saved is not None  # saved whole before the consumer left
        self.state = "done" if complete else "stopped"
        partial = self._builder.stopped()
        partial["metadata"] = merge_metadata(
            partial.get("metadata"), {"ctxstore": {"aborted": True}}
        )
        has_content = any(part.get("type") != "step-start" for part in partial["parts"])
        try:
            yield from self._save(partial if has_content else None)
        except CtxStoreError as failure:
            log.warning(
                "chat %r: the stopped answer was not saved: %s", self._engine.chat_id, failure
            )
            self._engine.prompt.drop_pending()  # not left for a later save to send again
        if not closed and self.stream_id is not None:
            try:
                yield from self._close(done=complete, reason=_stop_reason(error))
            except CtxStoreError as failure:
                log.warning(
                    "chat %r: the stopped answer's stream was not closed: %s",
                    self._engine.chat_id,
                    failure,
                )

    def _failed(self, error: BaseException) -> Plan[None]:
        self.state, self.error = "failed", error
        log.error("chat %r: the answer failed", self._engine.chat_id, exc_info=error)
        text = DEFAULT_ERROR_TEXT
        if self._request.on_error is not None:
            try:
                text = str(self._request.on_error(error))
            except Exception:
                log.exception("chat %r: on_error failed", self._engine.chat_id)
        if self.saved is None and not self._saving:
            try:
                yield from self._save(None)  # the user message only
            except CtxStoreError as failure:
                log.warning(
                    "chat %r: the user message was not saved: %s", self._engine.chat_id, failure
                )
                self._engine.prompt.drop_pending()
        chunk = {"type": "error", "errorText": text}
        self._buffer.add(chunk_json(chunk))
        try:
            yield from self._close(done=False, reason=answer_stream.failure_reason(error))
        except CtxStoreError as failure:
            log.warning(
                "chat %r: the failed answer's stream was not closed: %s",
                self._engine.chat_id,
                failure,
            )
        yield Emit(chunk)

    def _caller_metadata(self, event: dict[str, Any]) -> Any:
        metadata = self._request.message_metadata
        if metadata is None:
            return None
        if isinstance(metadata, Mapping):
            return dict(metadata) if event["type"] == "finish" else None
        return metadata(event)


def _title_chunk(title: str) -> dict[str, Any]:
    """The title of the chat for the client: a transient data part (not a part of the answer)."""
    return {"type": "data-chat-title", "data": {"title": title}, "transient": True}


def _tool_error(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}


def _tool_output(call_id: str, ok: bool, value: Any) -> dict[str, Any]:
    if not ok:
        return _tool_error(call_id, _error_text(value))
    try:
        output = output_json(value)
    except ToolError as error:
        return _tool_error(call_id, str(error))
    return {"type": "tool-output-available", "toolCallId": call_id, "output": output}


def _error_text(error: object) -> str:
    """What a tool's failure says (as the SDK says it: the error's message)."""
    if isinstance(error, BaseException):
        return str(error) or type(error).__name__
    return str(error)


def _stop_reason(error: BaseException) -> str:
    if isinstance(error, StreamFailedError):
        return "stopped: the answer's stream was closed"
    if isinstance(error, _StopRequestedError):
        return "stopped by the caller"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled: the task reading the answer was cancelled"
    return "cancelled: the caller stopped reading the answer"


def _summed(usages: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for usage in usages:
        for key, value in usage.items():
            total[key] = total.get(key, 0) + value
    return total
