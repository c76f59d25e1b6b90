"""This release's version: the one source of truth (hatch reads it for the package's version,
``ctxstore.__version__`` and ``ctxstore --version`` show it, the keyspace's format marker
names it). Semantic versions: docs/compatibility.md."""

__version__ = "0.4.0"
