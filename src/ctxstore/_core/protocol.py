"""Calls, operations, and the I/O-free driver that runs them.

A :class:`Call` is one Redis command (a Lua script or a plain command) with the function that
parses its reply. An *operation* is a generator that yields steps and receives their results: a
step is one call (the result, or the ctxstore error, is sent back) or a tuple of calls sent as
one pipeline (a list of results and errors is sent back). Single-script operations yield once;
multi-step ones (listing chats, index maintenance) yield more.

:class:`Exchange` drives an operation without doing I/O: it turns steps into *wire requests*
(lists of command tuples), and turns the raw replies into results. A script call goes as
``FCALL`` (``FCALL_RO`` for a read) of the library's function where the store's
:class:`~ctxstore._core.dispatch.LuaDispatch` says the server has functions, else as
``EVALSHA``. It answers a missing function by loading the library on that node and sending the
call again, a server without functions by sending it as a script, and NOSCRIPT by re-sending the
affected calls as EVAL (which also re-caches the script); and it translates error replies. The
sync and async stores differ only in how they send a wire request. With a
:class:`~ctxstore._core.durability.Durability` it also sends a wait after every call marked as a
write, and judges it (see :mod:`ctxstore._core.durability`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ctxstore._core import failures
from ctxstore._core.dispatch import LuaDispatch, neither_error, unloadable_error
from ctxstore._core.durability import Durability
from ctxstore._core.keys import expected_type
from ctxstore._core.scripts import LuaScript, checking_service_rules, library_name, load_library
from ctxstore.errors import CorruptionError, CtxStoreError, DurabilityError

T = TypeVar("T")
Arg = str | bytes | int | float
WireCommand = tuple[Arg, ...]

#: The most arguments one command may carry (its name included) on the managed services that
#: cap it: ElastiCache Serverless refuses a request of more. Every command ctxstore sends stays
#: within it whatever the input (a long append packs its records into two arguments, an import
#: closes a staging chunk before it could pass the cap); with the managed-service checks on
#: (:data:`~ctxstore._core.scripts.CHECK_KEYS_ENV`, read once at import), a command over it
#: raises before it is sent.
MAX_COMMAND_ARGUMENTS = 3999
CHECK_ARGUMENTS = checking_service_rules()


def _identity(reply: Any) -> Any:
    return reply


#: How a script call goes on the wire: the library's function; the library's load then the
#: function (after the node said the function is missing); the script by its SHA1; the script's
#: source (after NOSCRIPT). A call moves only forward through them, so it is sent at most four
#: times.
FCALL, LOAD_FCALL, EVALSHA, EVAL = range(4)


def load_command() -> WireCommand:
    """``FUNCTION LOAD`` of this release's library (routed to the node of the call after it)."""
    return ("FUNCTION", "LOAD", load_library().code)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One command and how to read its reply.

    ``script`` set: EVALSHA of that script with ``keys`` and ``args``. ``script`` None: the plain
    command ``args`` (``keys`` lists the keys it touches, for routing and for tests).
    ``context`` (chat id, ...) goes into error messages. ``writes``: the call changes chat data,
    so a store with ``durability=`` waits for it to be replicated (or fsynced); a callable tells
    from the parsed reply whether it did write (opening a chat creates it only when missing).
    """

    script: LuaScript | None
    keys: tuple[str, ...]
    args: tuple[Arg, ...]
    parse: Callable[[Any], T] = field(default=_identity)
    context: Mapping[str, Any] = field(default_factory=dict)
    writes: bool | Callable[[T], bool] = False

    @property
    def name(self) -> str:
        """The script's name, or the plain command's (for error messages)."""
        if self.script is not None:
            return self.script.name
        first = self.args[0]
        return first.decode() if isinstance(first, bytes) else str(first)

    def wire(self, form: int = EVALSHA) -> WireCommand:
        """The command tuple: the script's function (``FCALL`` / ``FCALL_RO``), EVALSHA, or
        EVAL with the full source after a NOSCRIPT reply."""
        script = self.script
        if script is None:
            return self.args
        head: WireCommand
        if form <= LOAD_FCALL:
            head = ("FCALL_RO" if script.read_only else "FCALL", script.function)
        elif form == EVALSHA:
            head = ("EVALSHA", script.sha)
        else:
            head = ("EVAL", script.source)
        return (*head, len(self.keys), *self.keys, *self.args)


def script_call(
    script: LuaScript,
    keys: Sequence[str],
    args: Sequence[Arg],
    parse: Callable[[Any], T],
    context: Mapping[str, Any] | None = None,
    *,
    writes: bool | Callable[[T], bool] = False,
) -> Call[T]:
    """A script call; the keys must be the script's declared KEYS (optional ones all or none)."""
    if len(keys) not in (script.required_keys, len(script.key_names)):
        raise AssertionError(
            f"{script.name} declares {len(script.key_names)} keys, got {len(keys)}"
        )
    return Call(script, tuple(keys), tuple(args), parse, context or {}, writes)


def command_call(
    args: Sequence[Arg],
    keys: Sequence[str],
    parse: Callable[[Any], T] = _identity,
    *,
    writes: bool = False,
) -> Call[T]:
    """A plain command (used for the cross-slot chat indexes)."""
    return Call(None, tuple(keys), tuple(args), parse, writes=writes)


Batch = tuple[Call[Any], ...]
Step = Call[Any] | Batch
#: A store operation: yields steps, receives results, returns its value.
Operation = Generator[Step, Any, T]
#: What a pipeline returns per command: a reply or the error for that command.
Outcome = Any


def raise_first_error(outcomes: Sequence[Outcome]) -> None:
    """Raise the first ctxstore error among a batch's outcomes (a step whose every command
    must have succeeded)."""
    for outcome in outcomes:
        if isinstance(outcome, CtxStoreError):
            raise outcome


class Exchange(Generic[T]):
    """Runs one operation over any transport: ``request()``, ``respond(replies)``, ``result``.

    With ``durability``, each call marked as a write is followed by the wait command, in the
    same request, on the same connection (on a Cluster the shells route it to the node of the
    command before it). A write whose wait falls short still completes the operation (its result
    is what the primary did, and the operation's later steps run); ``result`` then raises
    :class:`~ctxstore.errors.DurabilityError` carrying it.
    """

    def __init__(
        self,
        operation: Operation[T],
        durability: Durability | None = None,
        lua: LuaDispatch | None = None,
    ) -> None:
        self._operation = operation
        self._durability = durability
        #: Functions or scripts (None: scripts, for an exchange driven outside a store).
        self._lua = lua
        #: Each current call's form on the wire (FCALL ... EVAL), for the next request.
        self._forms: list[int] = []
        #: Why a call's function could not run, for the error when its script is refused too.
        self._function_errors: dict[int, Outcome] = {}
        #: A load of the library that failed (not refused): the call's outcome.
        self._load_errors: dict[int, Outcome] = {}
        self._shortfall: DurabilityError | None = None
        self._step: Step | None = None
        self._calls: tuple[Call[Any], ...] = ()
        self._outcomes: list[Outcome] = []
        self._resend: list[int] = []
        #: Calls refused for a key of the wrong type, while their keys' types are asked.
        self._probed: list[int] = []
        self._done = False
        self._result: T | None = None
        self._advance(lambda: next(self._operation))

    @property
    def done(self) -> bool:
        return self._done

    @property
    def result(self) -> T:
        if not self._done:
            raise RuntimeError("the operation has not finished")
        if self._shortfall is not None:
            self._shortfall.result = self._result
            raise self._shortfall
        return self._result  # type: ignore[return-value]

    @property
    def scripts(self) -> tuple[str, ...]:
        """The Lua scripts the current step runs (what a trace names)."""
        return tuple(call.script.name for call in self._calls if call.script is not None)

    def request(self) -> list[WireCommand]:
        """The commands to send now, in order, as one round trip."""
        if self._probed:
            return [("TYPE", key) for index in self._probed for key in self._calls[index].keys]
        commands: list[WireCommand] = []
        for index in self._resend or range(len(self._calls)):
            call = self._calls[index]
            form = self._forms[index]
            if form == LOAD_FCALL and call.script is not None:
                commands.append(load_command())
            command = call.wire(form)
            if CHECK_ARGUMENTS and len(command) > MAX_COMMAND_ARGUMENTS:
                raise RuntimeError(
                    f"{command[0]!r} with {len(command)} arguments: over the "
                    f"{MAX_COMMAND_ARGUMENTS} managed services accept in one command"
                )
            commands.append(command)
            if self._durability is not None and self._waits_after(call):
                commands.append(self._durability.wait_command())
        return commands

    def respond(self, replies: Sequence[Outcome]) -> None:
        """Feed the replies to the last request (errors as exception objects, in place)."""
        if self._probed:
            self._name_wrong_types(replies)
            self._finish_step()
            return
        targets = self._resend or list(range(len(self._calls)))
        expected = sum(1 + self._waits_after(self._calls[i]) + self._loads(i) for i in targets)
        if len(replies) != expected:
            raise RuntimeError(f"expected {expected} replies, got {len(replies)}")
        pending = iter(replies)
        retry = []
        for index in targets:
            call = self._calls[index]
            loaded = next(pending) if self._loads(index) else None
            reply = next(pending)
            waits = self._waits_after(call)
            waited = next(pending) if waits else None
            form = self._next_form(index, reply, loaded) if call.script is not None else None
            if form is not None:
                self._forms[index] = form
                retry.append(index)
            else:
                if index in self._load_errors:
                    reply = self._load_errors[index]
                self._outcomes[index] = self._complete(call, reply)
                if index in self._function_errors:
                    self._decide(index, reply)
                    self._outcomes[index] = self._unrunnable(index, reply)
                if waits:
                    self._judge(call, self._outcomes[index], waited)
                if failures.is_wrong_type(reply) and any(map(expected_type, call.keys)):
                    self._probed.append(index)
        self._resend = retry
        if retry or self._probed:
            return  # the resend, or the keys' types, go in the next round trip
        self._finish_step()

    def _loads(self, index: int) -> bool:
        """Whether the call's request carries the library's load before it."""
        return self._forms[index] == LOAD_FCALL and self._calls[index].script is not None

    def _next_form(self, index: int, reply: Outcome, loaded: Outcome) -> int | None:
        """The form to send the script call ``index`` again in, after ``reply`` (and the
        library's load, ``loaded``, sent before it); None when ``reply`` is its outcome.

        Only a refusal of the command itself (an unknown command, an ACL's NOPERM for it) sends
        a call on as a script; a full, busy or read-only server, or a library that does not
        load, is the call's outcome. The server is decided for scripts only once a script ran
        where the function could not (:meth:`_decide`): until then every call tries the
        function first, whatever the others' outcomes."""
        form, lua = self._forms[index], self._lua
        if form > LOAD_FCALL or lua is None:
            return EVAL if form == EVALSHA and failures.is_noscript(reply) else None
        missing = failures.is_function_missing(reply)
        if missing and form == FCALL:
            return LOAD_FCALL
        if missing and failures.refuses_functions(loaded):
            cause = f"FUNCTION LOAD was refused ({loaded})"
        elif missing and isinstance(loaded, Exception) and not failures.is_library_present(loaded):
            self._load_errors[index] = loaded  # the load's own failure is the outcome
            return None
        elif failures.refuses_functions(reply):
            cause = f"{self._function_command(index)} was refused ({reply})"
        else:
            return None  # the function's own outcome
        self._function_errors[index] = cause
        return EVALSHA if lua.may_fall_back() else None

    def _function_command(self, index: int) -> str:
        script = self._calls[index].script
        return "FCALL_RO" if script is not None and script.read_only else "FCALL"

    def _decide(self, index: int, reply: Outcome) -> None:
        """A call that ran as a script where its function could not: the server has no
        functions for this store's user; its stores send scripts from now on (logged once)."""
        ran = not isinstance(reply, Exception) or str(reply).startswith("CTX_")  # its own error
        if self._lua is not None and self._forms[index] > LOAD_FCALL and ran:
            self._lua.fall_back(str(self._function_errors[index]))

    def _unrunnable(self, index: int, reply: Outcome) -> Outcome:
        """The outcome of a call whose function could not run: the script's when it ran as a
        script, else a ConfigurationError saying what the server refused."""
        cause = self._function_errors[index]
        if self._forms[index] <= LOAD_FCALL:  # no fallback (scripting="functions")
            return unloadable_error(library_name(), cause)
        if failures.refuses_command(reply):
            return neither_error(library_name(), cause, reply)
        return self._outcomes[index]

    def _name_wrong_types(self, types: Sequence[Outcome]) -> None:
        """A call that Redis refused for a key of the wrong type (a corrupt chat: its ``log``
        replaced by a string...) is a CorruptionError naming that key, found by one more round
        trip asking each of its keys' types: Redis's refusal does not say which key."""
        replies = iter(types)
        for index in self._probed:
            call = self._calls[index]
            wrong: tuple[str, str, str] | None = None
            for key in call.keys:
                found = next(replies)
                held = found.decode() if isinstance(found, bytes) else str(found)
                wanted = expected_type(key)
                if wrong is None and wanted is not None and held not in (wanted, "none"):
                    wrong = (key, held, wanted)
            if wrong is not None and isinstance(self._outcomes[index], CtxStoreError):
                key, held, wanted = wrong
                self._outcomes[index] = CorruptionError(
                    f"corrupt data at {key}: it holds a {held}, not a {wanted}",
                    **call.context,
                    key=key,
                    reason=f"holds a {held}, not a {wanted}",
                )
        self._probed = []

    def _finish_step(self) -> None:
        """Hand the step's outcomes to the operation."""
        if isinstance(self._step, Call):
            outcome = self._outcomes[0]
            if isinstance(outcome, CtxStoreError):
                self._advance(lambda: self._operation.throw(outcome))
            else:
                self._advance(lambda: self._operation.send(outcome))
        else:
            outcomes = list(self._outcomes)
            self._advance(lambda: self._operation.send(outcomes))

    def fail(self, error: BaseException) -> CtxStoreError:
        """Close the operation after a transport failure; returns the translated error."""
        self._operation.close()
        return failures.translate(error, self._context())

    def _waits_after(self, call: Call[Any]) -> bool:
        return self._durability is not None and call.writes is not False

    def _judge(self, call: Call[Any], outcome: Outcome, waited: Outcome) -> None:
        """Record the first write whose wait fell short; a refused call wrote nothing."""
        if self._durability is None or self._shortfall is not None:
            return
        if isinstance(outcome, CtxStoreError):
            return
        if callable(call.writes) and not call.writes(outcome):
            return
        shortfall = self._durability.shortfall(waited)
        if shortfall is not None:
            self._shortfall = self._durability.error(shortfall, call.context)
            if isinstance(waited, BaseException):
                self._shortfall.__cause__ = waited

    def _context(self) -> Mapping[str, Any]:
        return self._calls[0].context if self._calls else {}

    @staticmethod
    def _complete(call: Call[Any], reply: Outcome) -> Outcome:
        if isinstance(reply, BaseException):
            return failures.translate(reply, call.context, command=call.name, keys=call.keys)
        try:
            return call.parse(reply)
        except CtxStoreError as error:
            return error
        except (ValueError, TypeError, LookupError) as error:
            # The parsers name the key and field of what they refuse; this is the net under
            # them: a reply no parser expected still surfaces as ctxstore's error, not a raw one.
            key = call.keys[0] if call.keys else None
            what = call.name
            failed = CorruptionError(
                f"the reply of {what} on {key} could not be read ({type(error).__name__}: {error})",
                **call.context,
                key=key,
                field=None,
            )
            failed.__cause__ = error
            return failed

    def _advance(self, resume: Callable[[], Step]) -> None:
        try:
            step = resume()
        except StopIteration as stop:
            self._done = True
            self._result = stop.value
            self._step = None
            self._calls = ()
            return
        self._step = step
        self._calls = (step,) if isinstance(step, Call) else tuple(step)
        if not self._calls:
            raise RuntimeError("an operation yielded an empty batch")
        self._outcomes = [None] * len(self._calls)
        first = FCALL if self._lua is not None and self._lua.functions else EVALSHA
        self._forms = [first] * len(self._calls)
        self._function_errors = {}
        self._load_errors = {}
        self._resend = []


# --- several operations in the same round trips -------------------------------------------------


def together(operations: Sequence[Operation[T]]) -> Operation[list[T | CtxStoreError]]:
    """Run ``operations`` in lockstep: each round trip carries the current step of every
    operation still running, and their results come back in order.

    A page that shows fifty chats wants fifty small reads (each chat's size, its live stream),
    each an operation of one or two steps: run one after another they cost fifty round trips,
    together one, and the whole costs as many round trips as the longest operation has steps.
    One operation's failure is its own: the :class:`~ctxstore.errors.CtxStoreError` it raised
    stands in its place in the result, and the others run on.
    """
    results: list[T | CtxStoreError | None] = [None] * len(operations)
    steps: dict[int, Step] = {}
    for index in range(len(operations)):
        _step_one(operations, index, results, steps, next)
    while steps:
        order = list(steps)
        batch: list[Call[Any]] = []
        sizes: list[int] = []
        for index in order:
            calls = _calls_of(steps[index])
            batch.extend(calls)
            sizes.append(len(calls))
        replies = yield tuple(batch)
        start = 0
        for index, size in zip(order, sizes, strict=True):
            mine = list(replies[start : start + size])
            start += size
            step = steps.pop(index)
            if not isinstance(step, Call):
                _step_one(operations, index, results, steps, lambda op, v=mine: op.send(v))
            elif isinstance(mine[0], CtxStoreError):
                _step_one(operations, index, results, steps, lambda op, e=mine[0]: op.throw(e))
            else:
                _step_one(operations, index, results, steps, lambda op, v=mine[0]: op.send(v))
    return results  # type: ignore[return-value]  # every place is filled once all have ended


def _calls_of(step: Step) -> tuple[Call[Any], ...]:
    return (step,) if isinstance(step, Call) else tuple(step)


def _step_one(
    operations: Sequence[Operation[T]],
    index: int,
    results: list[T | CtxStoreError | None],
    steps: dict[int, Step],
    resume: Any,
) -> None:
    """Resume one of :func:`together`'s operations: note its next step, or its result (or its
    error) when it ends."""
    try:
        steps[index] = resume(operations[index])
    except StopIteration as stop:
        results[index] = stop.value
    except CtxStoreError as error:
        results[index] = error
