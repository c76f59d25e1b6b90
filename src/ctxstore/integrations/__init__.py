"""Adapters that let other agent frameworks keep their history in ctxstore.

Each adapter is a module of its own with its own extra, imported only by name (``import
ctxstore`` never loads one, nor the framework it needs):

- :mod:`ctxstore.integrations.openai_agents`: ``CtxStoreSession``, a session of the OpenAI
  Agents SDK (``pip install 'ctxstore[openai-agents]'``);
- :mod:`ctxstore.integrations.langchain`: ``CtxStoreChatMessageHistory``, a LangChain chat
  message history (``pip install 'ctxstore[langchain]'``).

Both keep a chat's *active branch* as the framework's list of messages: a rewind, a restored
checkpoint or a branch switch made through a ``ContextEngine`` shows at the adapter's next read,
and the adapter's writes land on the branch active when they run.
"""
