"""The I/O-free logic core shared by the sync and async stores.

Every store operation is a generator of :class:`~ctxstore.core.protocol.Call` values (build keys
and args, name the script, say how to parse the reply). The shells in :mod:`ctxstore.store` and
:mod:`ctxstore.async_store` only ship the calls to Redis and feed the replies back.
"""
