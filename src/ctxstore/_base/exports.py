"""How packages export names lazily (PEP 562), and how names that moved keep working.

A package lists where each public name lives; the name is imported on first use and kept, so a
serverless function that imports ctxstore pays only for what it touches. A name (or a module
path) of an earlier release that moved answers from its new home with a ``DeprecationWarning``
for one release.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec


def lazy_exports(
    package: str,
    table: Mapping[str, str],
    moved: Mapping[str, str] | None = None,
    submodules: tuple[str, ...] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps each public name to the module
    that defines it; ``moved`` maps names of an earlier release to their new module (they
    still resolve, with a ``DeprecationWarning``, and are not listed by ``dir()``);
    ``submodules`` import as attributes (``ctxstore.models`` after a bare ``import ctxstore``)."""
    namespace = sys.modules[package].__dict__
    old = moved or {}

    def module_getattr(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = table.get(name)
        if module is None and name in old:
            module = old[name]
            warnings.warn(
                f"{package}.{name} moved: import it from {module} "
                f"(the old path goes in the next release)",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module), name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def module_dir() -> list[str]:
        return sorted({*namespace, *table})

    return module_getattr, module_dir


#: Module paths of ctxstore 0.3 and the modules their names live in now (searched in order).
MOVED_MODULES: dict[str, tuple[str, ...]] = {
    "ctxstore.async_store": ("ctxstore.store.async_store",),
    "ctxstore.cli_transfer": ("ctxstore.cli.files",),
    "ctxstore.cli_views": ("ctxstore.cli.views",),
    "ctxstore.compaction": ("ctxstore.window.compaction",),
    "ctxstore.connection": ("ctxstore.store.connection",),
    "ctxstore.context": ("ctxstore.engine", "ctxstore.prompt", "ctxstore.models"),
    "ctxstore.context.domain": ("ctxstore.prompt.domain",),
    "ctxstore.context.engine": ("ctxstore.engine.engines",),
    "ctxstore.context.engine_core": ("ctxstore.engine.core", "ctxstore.models"),
    "ctxstore.context.fragment": ("ctxstore.prompt.fragment",),
    "ctxstore.context.inspection": ("ctxstore.engine.inspection",),
    "ctxstore.context.messages": ("ctxstore.prompt.messages",),
    "ctxstore.context.renderers": ("ctxstore.prompt.renderers",),
    "ctxstore.context.renderers.base": ("ctxstore.prompt.renderers.base",),
    "ctxstore.context.renderers.inflect": ("ctxstore.prompt.renderers.inflect",),
    "ctxstore.context.renderers.markdown": ("ctxstore.prompt.renderers.markdown",),
    "ctxstore.context.renderers.toml": ("ctxstore.prompt.renderers.toml",),
    "ctxstore.context.renderers.toon": ("ctxstore.prompt.renderers.toon",),
    "ctxstore.context.renderers.xml": ("ctxstore.prompt.renderers.xml",),
    "ctxstore.context.serialization": ("ctxstore.prompt.serialization",),
    "ctxstore.context.streamed_turn": ("ctxstore.engine.streamed",),
    "ctxstore.context.titles": ("ctxstore.engine.titles",),
    "ctxstore.context.turn": ("ctxstore.engine.turns",),
    "ctxstore.context.user_context": ("ctxstore.prompt.user_context",),
    "ctxstore.context.visualize": ("ctxstore.cli.tree",),
    "ctxstore.core": ("ctxstore._core",),
    "ctxstore.core.answer_stream": ("ctxstore._core.ops.streams", "ctxstore.models"),
    "ctxstore.core.branches": ("ctxstore._core.ops.branches",),
    "ctxstore.core.cache": ("ctxstore._core.cache",),
    "ctxstore.core.chain": ("ctxstore._core.format.records", "ctxstore._core.ops.reads"),
    "ctxstore.core.chats": ("ctxstore._core.ops.chats",),
    "ctxstore.core.checkpoints": ("ctxstore._core.ops.checkpoints",),
    "ctxstore.core.codec": ("ctxstore._core.format.codec",),
    "ctxstore.core.durability": ("ctxstore._core.durability", "ctxstore.settings"),
    "ctxstore.core.exports": ("ctxstore._core.ops.transfer.exports",),
    "ctxstore.core.failures": ("ctxstore._core.failures",),
    "ctxstore.core.graph": ("ctxstore._core.ops.graph",),
    "ctxstore.core.ids": ("ctxstore._base.ids", "ctxstore._core.ids"),
    "ctxstore.core.imports": ("ctxstore._core.ops.transfer.imports",),
    "ctxstore.core.indexes": ("ctxstore._core.ops.indexes",),
    "ctxstore.core.jobs": (
        "ctxstore._core.ops.jobs",
        "ctxstore._core.format.jobs",
        "ctxstore.models",
    ),
    "ctxstore.core.keys": ("ctxstore._core.keys",),
    "ctxstore.core.leases": ("ctxstore._core.ops.leases",),
    "ctxstore.core.listing": ("ctxstore._core.ops.listing",),
    "ctxstore.core.messages": (
        "ctxstore._core.ops.append",
        "ctxstore._core.ops.reads",
        "ctxstore._core.format.records",
    ),
    "ctxstore.core.opening": ("ctxstore._core.ops.opening",),
    "ctxstore.core.portable": ("ctxstore._core.format.portable",),
    "ctxstore.core.preview": ("ctxstore.messages.text",),
    "ctxstore.core.protocol": ("ctxstore._core.protocol",),
    "ctxstore.core.records": (
        "ctxstore._core.format.chat",
        "ctxstore._core.format.versions",
        "ctxstore._core.format.pointers",
        "ctxstore._core.format.fields",
        "ctxstore._core.format.records",
    ),
    "ctxstore.core.retention": ("ctxstore._core.ops.retention", "ctxstore.settings"),
    "ctxstore.core.scripts": ("ctxstore._core.scripts",),
    "ctxstore.core.server_checks": ("ctxstore._core.server_checks",),
    "ctxstore.core.state": ("ctxstore._core.state", "ctxstore.settings"),
    "ctxstore.core.summaries": (
        "ctxstore._core.ops.summaries",
        "ctxstore._core.format.summaries",
        "ctxstore.messages.summaries",
        "ctxstore.models",
    ),
    "ctxstore.core.token_entries": ("ctxstore._core.format.tokens",),
    "ctxstore.core.turns": ("ctxstore._core.ops.turns",),
    "ctxstore.core.verify": (
        "ctxstore._core.ops.verify.chat",
        "ctxstore.models",
        "ctxstore._core.format.chat",
        "ctxstore._core.format.versions",
    ),
    "ctxstore.core.verify_tokens": ("ctxstore._core.ops.verify.tokens",),
    "ctxstore.demo": ("ctxstore.cli.demo",),
    "ctxstore.exporting": ("ctxstore.cli.diagrams",),
    "ctxstore.factory": ("ctxstore.store.factory",),
    "ctxstore.llm": ("ctxstore._base.litellm",),
    "ctxstore.manager": ("ctxstore.window.manager",),
    "ctxstore.model_info": ("ctxstore.window.model_info",),
    "ctxstore.plans": ("ctxstore._base.plans", "ctxstore.window.summarizer"),
    "ctxstore.prompting": ("ctxstore.messages.summaries",),
    "ctxstore.results": ("ctxstore.models",),
    "ctxstore.summarizer": ("ctxstore.window.summarizer", "ctxstore.messages.summaries"),
    "ctxstore.terminal": ("ctxstore.cli.terminal",),
    "ctxstore.tokens": ("ctxstore.messages.tokens",),
    "ctxstore.tool_groups": ("ctxstore.messages.tool_groups",),
    "ctxstore.usage": ("ctxstore.messages.usage",),
}


#: Names of ctxstore 0.3 modules that live on under another name: old module -> old name ->
#: (new module, new name).
RENAMED: dict[str, dict[str, tuple[str, str]]] = {
    "ctxstore.plans": {"RunOperation": ("ctxstore._base.plans", "Run")},
    "ctxstore.compaction": {
        "RunOperation": ("ctxstore._base.plans", "Run"),
        "Step": ("ctxstore._base.plans", "Step"),
    },
}


def _outside_importlib() -> int:
    """The stack level of the first frame that is neither the import machinery nor this
    module: the import statement that named the old path."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib")
        or frame.f_code.co_filename == __file__
    ):
        frame = frame.f_back
        level += 1
    return level


class _Forwarding:
    """Imports an old module path as a module that forwards every name to its new homes (a
    loader of the import system; not derived from ``importlib.abc``, which imports
    ``importlib.resources`` and would cost every ``import ctxstore`` tens of milliseconds)."""

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        homes = MOVED_MODULES[spec.name]
        warnings.warn(
            f"{spec.name} moved: import from {' or '.join(homes)} "
            "(the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=_outside_importlib(),
        )
        module = types.ModuleType(spec.name, f"Moved to {', '.join(homes)}.")
        module.__path__ = []  # old packages keep their submodule paths (each forwarded too)

        renamed = RENAMED.get(spec.name, {})

        def forward(name: str) -> Any:
            if name in renamed:
                home, new_name = renamed[name]
                return getattr(importlib.import_module(home), new_name)
            for home in homes:
                found = importlib.import_module(home)
                if hasattr(found, name):
                    return getattr(found, name)
            raise AttributeError(f"module {spec.name!r} has no attribute {name!r}")

        module.__getattr__ = forward  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module forwards."""


class MovedModuleFinder:
    """Finds the module paths of :data:`MOVED_MODULES` (and nothing else)."""

    _loader = _Forwarding()

    def find_spec(
        self,
        fullname: str,
        path: object = None,  # noqa: ARG002 - the finder protocol's
        target: object = None,  # noqa: ARG002
    ) -> ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        loader: Any = self._loader  # the loader protocol, duck-typed (see _Forwarding)
        # ModuleSpec itself, not importlib.util.spec_from_loader: importlib.util imports
        # importlib._abc, a cost every ``import ctxstore`` would pay.
        return importlib.machinery.ModuleSpec(fullname, loader, is_package=True)


def install_moved_module_finder() -> None:
    """Make the old module paths importable (once per process)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        finder: Any = MovedModuleFinder()  # the finder protocol, duck-typed
        sys.meta_path.insert(0, finder)
