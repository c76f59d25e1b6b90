"""From a URL (or an existing client) to a redis-py client, sync or async.

Schemes:

* ``memory://`` - the embedded store: fakeredis with Lua, in this process, no server. Each
  ``memory://`` is a fresh private store; ``memory://<name>`` is shared by every store of this
  process that names it (sync and async alike), which is how tests and demos hand one embedded
  store to several engines.
* ``redis://``, ``rediss://`` (TLS), ``unix://`` - one server (or a primary behind a proxy).
* ``local://PATH[?idle=SECONDS]`` - a persistent store in directory PATH: a private Valkey or
  Redis server on a unix socket inside it, started on first use and shared by every process of
  the machine (:mod:`ctxstore.store.local`).
* ``redis+cluster://`` / ``rediss+cluster://`` - a Redis Cluster, reached from one seed node; the
  client discovers the rest. A scheme (rather than a ``cluster=True`` flag) keeps the whole
  target in the one ``CTXSTORE_URL`` variable that deployments set.

``url=None`` reads ``CTXSTORE_URL``; without it, ``connect()`` refuses (a deployment that lost
one variable must not write to an in-process store no other worker sees): ``memory://`` is used
only when named. Replies must stay bytes (message records are msgpack), so a client that decodes
responses is refused.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ctxstore._core.failures import TRANSPORT_ERRORS, translate
from ctxstore.errors import ConfigurationError

ENV_URL = "CTXSTORE_URL"
MEMORY_URL = "memory://"
_SERVER_SCHEMES = ("redis", "rediss", "unix")
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

_memory_servers: dict[str, Any] = {}
_memory_lock = threading.Lock()


@dataclass(frozen=True)
class Target:
    """Where a store points: ``kind`` is memory, local, server or cluster. ``name`` is a
    ``memory://`` store's name or a ``local://`` store's directory, ``idle`` the idle timeout
    of a ``local://`` server."""

    kind: str
    url: str
    name: str = ""
    idle: float = 0.0


def parse_url(url: str | None) -> Target:
    raw = url if url is not None else os.environ.get(ENV_URL)
    if raw is None or raw == "":
        raise ConfigurationError(
            f"no store URL: pass one (connect('redis://host:6379'), or 'memory://' for an "
            f"in-process store that lives as long as the process) or set {ENV_URL}"
        )
    if not isinstance(raw, str):
        raise ConfigurationError(f"store URL must be a string, got {raw!r}")
    scheme = urlsplit(raw).scheme.lower()
    if scheme == "memory":
        return Target("memory", raw, raw[len("memory://") :].strip("/"))
    if scheme == "local":
        require_posix()
        from ctxstore.store.local import parse_local_url

        path, idle = parse_local_url(raw)
        directory = os.path.realpath(os.path.expanduser(path))
        return Target("local", f"local://{directory}", directory, idle)
    if scheme in _SERVER_SCHEMES:
        return Target("server", raw)
    if scheme in _CLUSTER_SCHEMES:
        return Target("cluster", _CLUSTER_SCHEMES[scheme] + raw[len(scheme) :])
    raise ConfigurationError(
        f"unsupported store URL scheme {scheme!r} in {raw!r}; use memory://, local://, "
        "redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://"
    )


def require_posix() -> None:
    """``local://`` runs its server on a unix socket and guards it with ``flock``: a POSIX
    system (Linux, macOS) is required, and anything else gets a clear error."""
    if os.name != "posix":
        raise ConfigurationError(
            "local:// needs a POSIX system (Linux or macOS: unix sockets and flock); use "
            "memory:// or a redis:// server here"
        )


#: Seconds to open a connection, and to wait for a reply, unless the caller says otherwise.
DEFAULT_CONNECT_TIMEOUT = 2.0
DEFAULT_SOCKET_TIMEOUT = 5.0


def _server_options(options: dict[str, Any], *, asynchronous: bool) -> dict[str, Any]:
    """Defaults for servers: bytes replies, short timeouts, a short and safe retry budget.

    A frozen or unreachable server fails a call fast: 2 s to connect, 5 s for a reply (every
    script is bounded to a few milliseconds of Redis time, so 5 s only means trouble). Both are
    redis-py options (``socket_connect_timeout``, ``socket_timeout``) a caller overrides.

    redis-py's own default retries ten times, on timeouts too. A command that timed out may
    have run, so only connection errors are retried (three quick attempts ride out a failover
    blip and fail fast otherwise). A connection that breaks after the server ran a command is
    retried, so the writes recognize their own replay: ``append``, ``add_usage`` and
    ``create_branch`` / ``branch_from_checkpoint`` by a request id checked inside the script,
    chat creation by the incarnation the call itself proposed.
    """
    if options.get("decode_responses"):
        raise ConfigurationError("ctxstore needs decode_responses=False (records are msgpack)")
    if asynchronous:  # redis.asyncio is imported only by async users
        from redis.asyncio.retry import Retry as AsyncRetry

        retry_class: type[Retry] | type[AsyncRetry] = AsyncRetry
    else:
        retry_class = Retry
    merged = {
        "socket_connect_timeout": DEFAULT_CONNECT_TIMEOUT,
        "socket_timeout": DEFAULT_SOCKET_TIMEOUT,
        "retry": retry_class(
            ExponentialWithJitterBackoff(cap=0.256, base=0.008),
            3,
            supported_errors=(RedisConnectionError,),
        ),
        **_QUIET_HANDSHAKE,
        **_no_client_info(),
        **options,
    }
    merged["decode_responses"] = False
    return merged


#: A new connection's handshake sends nothing ctxstore does not need: each command of it is a
#: round trip before the first call (a serverless function pays them on every cold start).
#: RESP2 needs no ``HELLO`` (redis-py 8 asks for RESP3 by default), and no RESP3 means no
#: maintenance-notification opt-in. A caller's own options win.
_QUIET_HANDSHAKE: dict[str, Any] = {"protocol": 2}


@functools.cache
def _no_client_info() -> dict[str, Any]:
    """The option that keeps redis-py from sending ``CLIENT SETINFO`` (two round trips on each
    new connection): ``driver_info=None`` where redis-py has it (8 and later, where
    ``lib_name`` is deprecated), ``lib_name`` / ``lib_version`` None before."""
    import redis

    if "driver_info" in inspect.signature(redis.Redis.__init__).parameters:
        return {"driver_info": None}
    return {"lib_name": None, "lib_version": None}


def _memory_server(name: str) -> Any:
    """A fakeredis server: fresh when unnamed, shared per name in this process."""
    if importlib.util.find_spec("lupa") is None:
        raise ConfigurationError(
            "the embedded store needs fakeredis with Lua: pip install 'fakeredis[lua]'"
        )
    import fakeredis

    if not name:
        return fakeredis.FakeServer()
    with _memory_lock:
        if name not in _memory_servers:
            _memory_servers[name] = fakeredis.FakeServer()
        return _memory_servers[name]


def make_client(target: Target, options: dict[str, Any], *, asynchronous: bool) -> Any:
    """A new redis-py (or fakeredis) client for ``target``."""
    if target.kind == "memory":
        import fakeredis

        server = _memory_server(target.name)
        cls = fakeredis.FakeAsyncRedis if asynchronous else fakeredis.FakeRedis
        return cls(server=server, decode_responses=False)
    merged = _server_options(options, asynchronous=asynchronous)
    if target.kind == "local":
        from ctxstore.store.local import local_client

        return local_client(target.name, target.idle, merged, asynchronous=asynchronous)
    if target.kind == "cluster":
        if asynchronous:
            from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

            return AsyncRedisCluster.from_url(target.url, **merged)
        from redis.cluster import RedisCluster

        try:  # the sync cluster client reads the slot map right away
            return RedisCluster.from_url(target.url, **merged)
        except TRANSPORT_ERRORS as error:
            raise translate(error, {"url": target.url}) from error
    return _pooled_client(target.url, merged, asynchronous=asynchronous)


#: Connections a store opens to its server at most, unless its options say otherwise: more
#: concurrent calls (a thousand answers streaming from one process) wait for one to be free.
DEFAULT_MAX_CONNECTIONS = 100
#: How long a call waits for a free connection before it fails (seconds).
DEFAULT_POOL_TIMEOUT = 20.0


def _pooled_client(url: str, options: dict[str, Any], *, asynchronous: bool) -> Any:
    """A client of one server whose pool makes a call wait for a free connection when all
    are busy: redis-py's own pool (100 connections from redis-py 6 on) fails the call instead,
    so a process with more concurrent calls than connections would see errors under load.
    The client option ``max_connections`` (``redis_options={"max_connections": N}``) sets the
    pool's size."""
    options = dict(options)
    bounds = {
        "max_connections": options.pop("max_connections", None) or DEFAULT_MAX_CONNECTIONS,
        "timeout": DEFAULT_POOL_TIMEOUT,
    }
    if asynchronous:
        import redis.asyncio

        pool: Any = redis.asyncio.BlockingConnectionPool.from_url(url, **bounds, **options)
        client: Any = redis.asyncio.Redis(connection_pool=pool)
    else:
        import redis

        pool = redis.BlockingConnectionPool.from_url(url, **bounds, **options)
        client = redis.Redis(connection_pool=pool)
    client.auto_close_connection_pool = True  # closing the store closes its pool
    return client


def adopt_client(client: Any, *, asynchronous: bool) -> Any:
    """Check an existing client: right flavour (sync/async) and bytes replies."""
    execute = getattr(client, "execute_command", None)
    if execute is None:
        raise ConfigurationError(f"expected a redis-py client, got {type(client).__name__}")
    if inspect.iscoroutinefunction(execute) != asynchronous:
        flavour = "an async" if asynchronous else "a sync"
        raise ConfigurationError(f"this store needs {flavour} redis-py client")
    if client.get_encoder().decode_responses:
        raise ConfigurationError("ctxstore needs a client with decode_responses=False")
    return client


def socket_timeout_of(client: Any) -> float | None:
    """The seconds a client waits for a reply (None: no limit, or a client that does not say)."""
    kwargs = getattr(client, "get_connection_kwargs", None)
    timeout = kwargs().get("socket_timeout") if callable(kwargs) else None
    return float(timeout) if isinstance(timeout, (int, float)) else None


def is_memory_client(client: Any) -> bool:
    return type(client).__module__.startswith("fakeredis")


class DirectLine:
    """One pooled connection a sync store keeps for its single commands.

    redis-py's ``execute_command`` takes a connection from the pool, wraps the call in its retry
    and observability machinery and gives the connection back, every time: about as much Python
    as the rest of a save. A store that sends one command at a time (almost every operation)
    uses this connection directly instead. It is taken without blocking: when another thread of
    the same store holds it, or when it fails, the command goes through ``execute_command`` as
    usual (which also gives the retries on a broken connection); a timeout is raised, never
    sent again (the command may have run). Only for a plain
    ``redis.Redis`` client; a Cluster, an async client or the embedded store never get one.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pool = client.connection_pool
        self._connection: Any = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    @staticmethod
    def serves(client: Any) -> bool:
        return type(client).__module__ == "redis.client" and type(client).__name__ == "Redis"

    def execute(self, command: tuple[Any, ...]) -> Any:
        """The reply to ``command`` (a ResponseError is returned, not raised)."""
        if self._lock.acquire(blocking=False):
            try:
                if self._pid != os.getpid():  # a forked child never shares the parent's socket
                    self._connection, self._pid = None, os.getpid()
                if self._connection is None:
                    self._connection = self._pool.get_connection()
                try:
                    self._connection.send_command(*command)
                    return self._connection.read_response()
                except ResponseError as error:
                    return error
                except RedisTimeoutError:
                    # The command may have run: it is not sent again (a timeout surfaces once,
                    # after socket_timeout), and the connection, out of step now, is dropped.
                    self._drop()
                    raise
                except (RedisConnectionError, OSError):
                    self._drop()  # below: execute_command retries on a fresh connection
            finally:
                self._lock.release()
        try:
            return self._client.execute_command(*command)
        except ResponseError as error:
            return error

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.disconnect()
            self._pool.release(connection)

    def close(self) -> None:
        """Give the connection back to the pool."""
        with self._lock:
            if self._connection is not None:
                self._pool.release(self._connection)
                self._connection = None


def is_cluster_client(client: Any) -> bool:
    """A redis-py Cluster client, sync or async (without importing the async one for sync users)."""
    return type(client).__name__ == "RedisCluster" and type(client).__module__.startswith("redis.")


#: Commands that wait for what their connection wrote before them (``durability=``).
_WAITS = ("WAIT", "WAITAOF")
#: Commands whose first key follows the script or function and the key count.
_SCRIPTED = ("EVAL", "EVALSHA", "FCALL", "FCALL_RO")


def fcall(command: tuple[Any, ...]) -> bool:
    """Whether ``command`` calls a function: redis-py would ask a node for its keys first, so
    the shells route it themselves (every other single command redis-py routes as ever)."""
    return str(command[0]).upper() in ("FCALL", "FCALL_RO")


def routing_key(command: tuple[Any, ...]) -> Any:
    """The first key of a wire command (None for keyless commands)."""
    name = str(command[0]).upper()
    if name in _SCRIPTED:
        return command[3] if int(command[2]) > 0 else None
    return command[1] if len(command) > 1 and name not in ("CONFIG", "FUNCTION", *_WAITS) else None


Router = Callable[[Sequence[tuple[Any, ...]]], list[dict[str, Any]]]


def pipeline_router(client: Any) -> Router:
    """Per-command pipeline options that route each command straight to its Cluster node.

    redis-py's sync ClusterPipeline asks a server (``COMMAND GETKEYS``) for the keys of every
    EVALSHA it queues: one extra round trip per pipeline. Naming the target node skips that;
    on a MOVED reply the pipeline still re-routes as usual. (For an ``FCALL`` it would ask even
    for a single command, so the shells route those too.) A ``WAIT`` / ``WAITAOF`` has no key
    and counts what its own connection wrote: it goes to the node of the command before it, the
    write it waits for (left to redis-py, a keyless command goes to a node of its choosing). A
    ``FUNCTION LOAD`` goes to the node of the command after it: the call that found its function
    missing there. Other clients need no options. The slot map must be loaded (an async Cluster
    client loads it lazily)."""
    if not is_cluster_client(client):
        return lambda commands: [{} for _command in commands]

    node_of: Callable[[Any], Any] = client.get_node_from_key

    def route(commands: Sequence[tuple[Any, ...]]) -> list[dict[str, Any]]:
        options: list[dict[str, Any]] = []
        key = None
        for index, command in enumerate(commands):
            name = str(command[0]).upper()
            if name == "FUNCTION" and index + 1 < len(commands):
                key = routing_key(commands[index + 1])
            elif name not in _WAITS:
                key = routing_key(command)
            options.append({} if key is None else {"target_nodes": node_of(key)})
        return options

    return route
