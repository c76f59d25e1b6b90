"""LangGraph checkpointers on a ctxstore store (``pip install 'ctxstore[langgraph]'``).

``CtxStoreSaver(store)`` and ``AsyncCtxStoreSaver(store)`` keep every key of a thread under one
hash tag, so each operation is one atomic script on Redis, Valkey, a Cluster and managed
services (core commands only); see :mod:`.layout` for the keys and :mod:`.operations` for what
each call costs.
"""

from __future__ import annotations

from ctxstore.integrations.langgraph.savers import AsyncCtxStoreSaver, CtxStoreSaver

__all__ = ["AsyncCtxStoreSaver", "CtxStoreSaver"]
