"""The adapters are opt-in: ``import ctxstore`` (every public name resolved) loads no adapter
and no framework, and ``ctxstore.integrations`` itself loads neither framework."""

from __future__ import annotations

from tests.store.test_api import loaded_after

ADAPTERS = (
    "ctxstore.integrations",
    "ctxstore.integrations.openai_agents",
    "ctxstore.integrations.langchain",
    "agents",
    "langchain_core",
)


def test_import_ctxstore_loads_no_adapter() -> None:
    code = "import ctxstore\nfor name in ctxstore.__all__:\n    getattr(ctxstore, name)"
    assert loaded_after(code, ADAPTERS) == []


def test_the_integrations_package_loads_no_framework() -> None:
    assert loaded_after("import ctxstore.integrations", ADAPTERS) == ["ctxstore.integrations"]


def test_each_adapter_loads_only_its_framework() -> None:
    code = "import ctxstore.integrations.langchain"
    assert "agents" not in loaded_after(code, ADAPTERS)
    code = "import ctxstore.integrations.openai_agents"
    assert "langchain_core" not in loaded_after(code, ADAPTERS)
