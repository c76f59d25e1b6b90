"""Tools for ``chat()``: Python callables or ``{"name", "description", "parameters", "execute"}``
dicts, turned into the JSON-schema function definitions a model takes and run server-side.

A callable's schema comes from its type hints (through pydantic, which also checks and converts
the model's arguments before the call) and its docstring: the first paragraph describes the tool,
an ``Args:`` section describes the parameters. A parameter named ``context_variables`` is not
shown to the model: it receives ``chat(context_variables=...)``. A dict's ``execute`` takes the
arguments dict (and the context variables, when it takes a second parameter).

Every tool is checked when ``chat()`` is called: a tool that is not callable, has no schema, or
whose name a model would refuse is a ``ValidationError`` before any model is called. What a tool
returns must be JSON-serializable; a tool that raises, or returns something that is not, becomes
a ``tool-output-error`` and the loop goes on.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from ctxstore.errors import ValidationError

__all__ = ["ToolError", "ToolSpec", "model_tools", "tool_specs"]

#: What a model accepts as a function name (OpenAI's rule, which most providers share).
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: The parameter a callable tool receives ``chat(context_variables=...)`` through.
CONTEXT_PARAMETER = "context_variables"
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


class ToolError(Exception):
    """A tool call that failed: its text is what the model and the client are told."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool, checked: its name, description and JSON schema, and how to run it."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[..., Any]
    #: Checks and converts the model's arguments to the keyword arguments of ``execute``
    #: (None: ``execute`` takes the arguments dict itself).
    convert: Callable[[dict[str, Any]], dict[str, Any]] | None
    takes_context: bool

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.execute) or inspect.iscoroutinefunction(
            getattr(self.execute, "__call__", None)  # noqa: B004
        )

    def arguments(self, raw: object, context: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of ``execute`` for the model's ``raw`` input;
        ``ToolError`` when they do not fit the schema."""
        if not isinstance(raw, dict):
            raise ToolError(f"the arguments of {self.name} must be a JSON object, got {raw!r}")
        if self.convert is None:
            return ((raw, context) if self.takes_context else (raw,)), {}
        try:
            keywords = self.convert(raw)
        except Exception as error:  # pydantic's ValidationError, with the fields that failed
            raise ToolError(f"invalid arguments for {self.name}: {error}") from error
        if self.takes_context:
            keywords[CONTEXT_PARAMETER] = context
        return (), keywords


def tool_specs(tools: object) -> dict[str, ToolSpec]:
    """The tools given to ``chat()`` (a list of callables and dicts, a dict name -> tool, or
    None), checked."""
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        items: list[tuple[str | None, object]] = [(str(name), tool) for name, tool in tools.items()]
    elif isinstance(tools, Sequence) and not isinstance(tools, (str, bytes)):
        items = [(None, tool) for tool in tools]
    else:
        raise ValidationError(f"tools must be a list of tools or a dict of them, got {tools!r}")
    specs: dict[str, ToolSpec] = {}
    for index, (name, tool) in enumerate(items):
        spec = _spec(tool, name, f"tools[{index}]")
        if spec.name in specs:
            raise ValidationError(f"two tools are named {spec.name!r}")
        specs[spec.name] = spec
    return specs


def model_tools(specs: Mapping[str, ToolSpec]) -> list[dict[str, Any]]:
    """The ``tools=`` a chat-completions model takes."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in specs.values()
    ]


def _spec(tool: object, name: str | None, where: str) -> ToolSpec:
    if isinstance(tool, Mapping):
        return _dict_spec(tool, name, where)
    if callable(tool):
        return _callable_spec(tool, name, where)
    raise ValidationError(f"{where} is neither a callable nor a tool dict: {tool!r}")


def _checked_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError(
            f"{where}: a tool name is 1 to 64 letters, digits, '_' or '-', got {name!r}"
        )
    return name


def _dict_spec(tool: Mapping[str, Any], name: str | None, where: str) -> ToolSpec:
    unknown = set(tool) - {"name", "description", "parameters", "execute"}
    if unknown:
        raise ValidationError(f"{where} has unknown keys {sorted(unknown)}")
    tool_name = _checked_name(tool.get("name", name), where)
    execute = tool.get("execute")
    if not callable(execute):
        raise ValidationError(f"{where} ({tool_name}): 'execute' must be callable")
    parameters = tool.get("parameters")
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise ValidationError(
            f"{where} ({tool_name}): 'parameters' must be a JSON schema of type object"
        )
    description = tool.get("description", "")
    if not isinstance(description, str):
        raise ValidationError(f"{where} ({tool_name}): 'description' must be a string")
    takes_context = len(_positional_parameters(execute)) >= 2
    return ToolSpec(tool_name, description, dict(parameters), execute, None, takes_context)


def _positional_parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [parameter for parameter in parameters if parameter.kind in kinds]


def _callable_spec(tool: Callable[..., Any], name: str | None, where: str) -> ToolSpec:
    tool_name = _checked_name(name or getattr(tool, "__name__", None), where)
    try:
        signature = inspect.signature(tool)
        hints = get_type_hints(tool)
    except (TypeError, ValueError, NameError) as error:
        raise ValidationError(f"{where} ({tool_name}): no schema can be read: {error}") from None
    import pydantic  # a chat() dependency only: import ctxstore stays light

    described = _argument_docs(inspect.getdoc(tool) or "")
    fields: dict[str, Any] = {}
    takes_context = False
    for parameter in signature.parameters.values():
        if parameter.name == CONTEXT_PARAMETER:
            takes_context = True
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ValidationError(
                f"{where} ({tool_name}): *args and **kwargs have no schema; name each parameter"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ValidationError(f"{where} ({tool_name}): positional-only parameters have no name")
        if parameter.name not in hints:
            raise ValidationError(
                f"{where} ({tool_name}): parameter {parameter.name!r} needs a type hint"
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (
            hints[parameter.name],
            pydantic.Field(default, description=described.get(parameter.name)),
        )
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", **fields)
        schema = model.model_json_schema()
    except Exception as error:  # a hint pydantic cannot express as JSON schema
        raise ValidationError(f"{where} ({tool_name}): no JSON schema: {error}") from None
    schema.pop("title", None)
    for field in schema.get("properties", {}).values():
        if isinstance(field, dict):
            field.pop("title", None)

    def convert(raw: dict[str, Any]) -> dict[str, Any]:
        checked = model.model_validate(raw)
        return {field: getattr(checked, field) for field in fields}

    return ToolSpec(
        tool_name, _summary(inspect.getdoc(tool) or ""), schema, tool, convert, takes_context
    )


def _summary(doc: str) -> str:
    """The docstring's first paragraph, on one line."""
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def _argument_docs(doc: str) -> dict[str, str]:
    """``name -> description`` from a Google-style ``Args:`` section."""
    found: dict[str, str] = {}
    inside = False
    current: str | None = None
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            inside = True
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            break  # the next section
        match = _ARG_LINE.match(line)
        if match and (current is None or len(line) - len(line.lstrip()) <= 4):
            current = match.group(1).lstrip("*")
            found[current] = match.group(3).strip()
        elif current is not None and line.strip():
            found[current] = f"{found[current]} {line.strip()}".strip()
    return found


def output_json(value: object) -> object:
    """``value`` as the JSON value a client receives; ``ToolError`` when it is not one."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ToolError(f"the tool returned a value that is not JSON: {error}") from error
