"""The I/O-free logic core shared by the sync and async stores (internal: not a stable API).

Every store operation is a generator of :class:`~ctxstore._core.protocol.Call` values (build keys
and args, name the script, say how to parse the reply); the shells in :mod:`ctxstore.store` only
ship the calls to Redis and feed the replies back. Multi-step work (compactions, turns, exports,
imports, streamed answers) is a *plan* (:mod:`ctxstore._base.plans`), driven by the same two
drivers for every flow.

* :mod:`ctxstore._core.format`: the storage format, the one place that encodes and decodes what
  the scripts keep (message records, token entries, pointers, the chat hash, summaries, jobs).
* :mod:`ctxstore._core.ops`: the operations, by family (chats, append, reads, branches, ...).
* the rest: calls and their exchange, plans, scripts, keys, ids, the process cache, failures.
"""
