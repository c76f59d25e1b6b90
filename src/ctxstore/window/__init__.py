"""Context-window management: the :class:`ContextManager` policy (thresholds, compaction of a
plain message list), the litellm summarizer, and what litellm's map says of a model.

Importing this package loads neither litellm, tiktoken nor the store: a process that only wants
the policy pays for none of them. The compaction of a stored branch (a plan over store
operations, which the worker and the engine share) is :mod:`ctxstore.window.compaction`.
"""

from ctxstore.window.manager import Compactify, ContextManager, ContextState
from ctxstore.window.model_info import ModelInfo, model_info
from ctxstore.window.summarizer import LiteLLMSummarizer, SummarizerError

__all__ = [
    "Compactify",
    "ContextManager",
    "ContextState",
    "LiteLLMSummarizer",
    "ModelInfo",
    "SummarizerError",
    "model_info",
]
