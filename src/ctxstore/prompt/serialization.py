"""Fragments to and from JSON-able dicts, for config files, APIs and storage.

The serialized form of a fragment is a dict with a ``type`` key and the fields of its builder::

    {"type": "term", "name": "MRR", "definition": "monthly recurring revenue"}
    {"type": "hint", "text": "Always exclude test accounts"}
    {"type": "role", "content": "You are a product analyst."}
    {"type": "glossary", "entries": {"revenue": "SUM(amount)"}}
    {"type": "policy", "rule": "...", "policies": [{"type": "policy", "rule": "..."}, "..."]}

Every builder of :mod:`~ctxstore.prompt.domain` and :mod:`~ctxstore.prompt.user_context` has
its type (the fragment's name; ``styleGuide`` for :func:`~ctxstore.prompt.domain.style_guide`),
whose fields are the builder's parameters. Any other fragment, including a built-in name whose
data no builder would produce, or one with an id or metadata (message fragments too), takes the
generic form, which round-trips it exactly::

    {"type": "fragment", "name": "database", "data": [...], "id": "...", "kind": "message",
     "metadata": {...}}

(``id``, ``kind`` and ``metadata`` only when set.) Fragments nested in data are serialized the
same way. A plain dict in data that has a ``type`` key of its own (an OpenAI content part, say)
is wrapped as ``{"type": "dict", "value": {...}}`` so that it is never mistaken for a fragment.

Custom fragment types are added with :func:`register_fragment_type`.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.prompt import domain, user_context
from ctxstore.prompt.fragment import Fragment, is_lazy

__all__ = [
    "fragment_from_dict",
    "fragment_to_dict",
    "from_fragment",
    "register_fragment_type",
    "registered_fragment_types",
    "to_fragment",
    "unregister_fragment_type",
]

#: The serialized form: a JSON-able dict with a string ``type`` key.
SerializedFragment = dict[str, Any]

#: Builds a fragment from the fields of a serialized dict (``type`` removed, nested values
#: already turned back into fragments).
ToFragment = Callable[[dict[str, Any]], Fragment]

#: Gives the fields of a fragment (without ``type``; nested fragments allowed), or None to
#: leave it to the generic form.
FromFragment = Callable[[Fragment], Mapping[str, Any] | None]

_GENERIC = "fragment"
_DICT = "dict"
_GENERIC_FIELDS = ("name", "data", "id", "kind", "metadata")


@dataclasses.dataclass(frozen=True)
class _Codec:
    """How one built-in type maps between fragment data and serialized fields."""

    required: frozenset[str]
    allowed: frozenset[str]
    #: Fragment data to the builder's fields, or None when the data has another shape.
    read: Callable[[Any], dict[str, Any] | None]
    #: The builder's fields to a fragment (the builder validates them).
    build: Callable[[dict[str, Any]], Fragment]


def _record(builder: Callable[..., Fragment]) -> _Codec:
    """A builder whose data is a dict keyed by its own parameter names."""
    params = inspect.signature(builder).parameters.values()
    required = frozenset(p.name for p in params if p.default is inspect.Parameter.empty)
    allowed = frozenset(p.name for p in params)

    def read(data: Any) -> dict[str, Any] | None:
        if isinstance(data, Mapping) and required <= data.keys() <= allowed:
            return dict(data)
        return None

    return _Codec(required, allowed, read, lambda fields: builder(**fields))


def _text(builder: Callable[[str], Fragment], key: str) -> _Codec:
    """A builder whose data is one string, serialized under ``key``."""
    keys = frozenset({key})
    return _Codec(keys, keys, lambda data: {key: data}, lambda fields: builder(fields[key]))


def _read_glossary(data: Any) -> dict[str, Any] | None:
    if not isinstance(data, list) or not all(
        isinstance(entry, Mapping)
        and entry.keys() == {"term", "expression"}
        and isinstance(entry["term"], str)
        for entry in data
    ):
        return None
    return {"entries": {entry["term"]: entry["expression"] for entry in data}}


_BUILTINS: dict[str, _Codec] = {
    "role": _text(domain.role, "content"),
    "hint": _text(domain.hint, "text"),
    "glossary": _Codec(
        frozenset({"entries"}),
        frozenset({"entries"}),
        _read_glossary,
        lambda fields: domain.glossary(fields["entries"]),
    ),
    "term": _record(domain.term),
    "guardrail": _record(domain.guardrail),
    "example": _record(domain.example),
    "explain": _record(domain.explain),
    "clarification": _record(domain.clarification),
    "workflow": _record(domain.workflow),
    "quirk": _record(domain.quirk),
    "styleGuide": _record(domain.style_guide),
    "principle": _record(domain.principle),
    "policy": _record(domain.policy),
    "identity": _record(user_context.identity),
    "persona": _record(user_context.persona),
    "alias": _record(user_context.alias),
    "preference": _record(user_context.preference),
    "correction": _record(user_context.correction),
}


@dataclasses.dataclass(frozen=True)
class _Custom:
    to_fragment: ToFragment
    from_fragment: FromFragment


_custom: dict[str, _Custom] = {}
_custom_lock = threading.Lock()


# --- the registry ------------------------------------------------------------------------------


def register_fragment_type(
    name: str,
    *,
    to_fragment: ToFragment,
    from_fragment: FromFragment,
    replace: bool = False,
) -> None:
    """Teach :func:`fragment_from_dict` / :func:`fragment_to_dict` a custom fragment type.

    ``name`` is both the serialized ``type`` and the name of the fragments it covers.
    ``from_fragment(fragment)`` returns the fields to serialize (without ``type``; nested
    fragments are serialized for it) or None to let the generic form take that fragment.
    ``to_fragment(fields)`` receives those fields back (nested fragments rebuilt) and returns
    the fragment. Built-in types and the reserved ``fragment`` and ``dict`` types cannot be
    registered, so stored data keeps its meaning; re-registering a custom type needs
    ``replace=True``. Example::

        register_fragment_type(
            "metric",
            to_fragment=lambda f: Fragment("metric", {"sql": f["sql"]}),
            from_fragment=lambda frag: {"sql": frag.data["sql"]},
        )
    """
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"a fragment type needs a non-empty string name, got {name!r}")
    if name in _BUILTINS or name in (_GENERIC, _DICT):
        raise ValidationError(f"fragment type {name!r} is built in and cannot be registered")
    if not callable(to_fragment) or not callable(from_fragment):
        raise ValidationError("to_fragment and from_fragment must both be callables")
    with _custom_lock:
        if name in _custom and not replace:
            raise ValidationError(
                f"fragment type {name!r} is already registered; pass replace=True to replace it"
            )
        _custom[name] = _Custom(to_fragment, from_fragment)


def unregister_fragment_type(name: str) -> None:
    """Forget a custom type registered with :func:`register_fragment_type`."""
    with _custom_lock:
        if _custom.pop(name, None) is None:
            raise ValidationError(f"fragment type {name!r} is not a registered custom type")


def registered_fragment_types() -> tuple[str, ...]:
    """Every type :func:`fragment_from_dict` accepts: built-in, generic and custom, sorted."""
    return tuple(sorted({*_BUILTINS, _GENERIC, *_custom}))


# --- fragment to dict --------------------------------------------------------------------------


def fragment_to_dict(fragment: Fragment) -> SerializedFragment:
    """The JSON-able serialized form of ``fragment`` (see the module docstring).

    Lazy data cannot be serialized: materialize the fragment first.
    """
    if not isinstance(fragment, Fragment):
        raise ValidationError(f"fragment_to_dict needs a Fragment, got {fragment!r}")
    custom = _custom.get(fragment.name)
    if custom is not None:
        fields = custom.from_fragment(fragment)
        if fields is not None:
            return _typed(fragment.name, fields)
    fields = _builtin_fields(fragment)
    if fields is not None:
        return _typed(fragment.name, fields)
    return _generic(fragment)


def _builtin_fields(fragment: Fragment) -> dict[str, Any] | None:
    """The builder fields of a fragment that its built-in builder would make exactly as is."""
    codec = _BUILTINS.get(fragment.name)
    if codec is None:
        return None
    fields = codec.read(fragment.data)
    if fields is None:
        return None
    try:
        rebuilt = codec.build(fields)
    except ValidationError:
        return None
    return fields if rebuilt == fragment else None


def _typed(type_name: str, fields: Mapping[str, Any]) -> SerializedFragment:
    if not isinstance(fields, Mapping):
        raise ValidationError(f"{type_name}: serialized fields must be a mapping, got {fields!r}")
    if fields.get("type", type_name) != type_name:
        raise ValidationError(f"{type_name}: serialized fields carry another type")
    encoded = {key: _encode(value, f"{type_name}.{key}") for key, value in fields.items()}
    return {**encoded, "type": type_name}


def _generic(fragment: Fragment) -> SerializedFragment:
    result: SerializedFragment = {
        "type": _GENERIC,
        "name": fragment.name,
        "data": _encode(fragment.data, fragment.name),
    }
    if fragment.id is not None:
        result["id"] = fragment.id
    if fragment.kind != "fragment":
        result["kind"] = fragment.kind
    if fragment.metadata is not None:
        result["metadata"] = _encode(fragment.metadata, f"{fragment.name}.metadata")
    return result


def _encode(value: Any, where: str) -> Any:
    """A JSON-able copy of fragment data: fragments serialized, ``type``-keyed dicts wrapped."""
    if isinstance(value, Fragment):
        return fragment_to_dict(value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if is_lazy(value):
        raise ValidationError(f"{where}: lazy data cannot be serialized; materialize it first")
    if isinstance(value, Mapping):
        items = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{where}: dict keys must be strings, got {key!r}")
            items[key] = _encode(item, f"{where}.{key}")
        return {"type": _DICT, "value": items} if "type" in items else items
    if isinstance(value, (list, tuple)):
        return [_encode(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise ValidationError(
        f"{where}: a {type(value).__name__} cannot be serialized; materialize the fragment first"
    )


# --- dict to fragment --------------------------------------------------------------------------


def fragment_from_dict(serialized: Mapping[str, Any]) -> Fragment:
    """The fragment a serialized dict describes (the inverse of :func:`fragment_to_dict`)."""
    if not isinstance(serialized, Mapping):
        raise ValidationError(f"a serialized fragment must be a dict, got {serialized!r}")
    type_name = serialized.get("type")
    if not isinstance(type_name, str):
        raise ValidationError(f"a serialized fragment needs a string 'type', got {type_name!r}")
    fields = {key: value for key, value in serialized.items() if key != "type"}
    if type_name == _GENERIC:
        return _from_generic(fields)
    codec = _BUILTINS.get(type_name)
    if codec is not None:
        _check_fields(type_name, fields, codec.required, codec.allowed)
        return codec.build(_decode_fields(type_name, fields))
    custom = _custom.get(type_name)
    if custom is not None:
        try:
            result = custom.to_fragment(_decode_fields(type_name, fields))
        except (KeyError, TypeError) as error:
            raise ValidationError(f"{type_name}: cannot build the fragment ({error!r})") from error
        if not isinstance(result, Fragment):
            raise ValidationError(f"{type_name}: to_fragment returned {result!r}, not a Fragment")
        return result
    raise ValidationError(
        f"unknown fragment type {type_name!r}; known types: "
        + ", ".join(registered_fragment_types())
    )


def _check_fields(
    type_name: str, fields: Mapping[str, Any], required: frozenset[str], allowed: frozenset[str]
) -> None:
    missing = sorted(required - fields.keys())
    if missing:
        raise ValidationError(f"{type_name}: missing required field(s) {', '.join(missing)}")
    unknown = sorted(fields.keys() - allowed)
    if unknown:
        raise ValidationError(f"{type_name}: unknown field(s) {', '.join(unknown)}")


def _decode_fields(where: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    result = {}
    for key, value in fields.items():
        if not isinstance(key, str):
            raise ValidationError(f"{where}: dict keys must be strings, got {key!r}")
        result[key] = _decode(value, f"{where}.{key}")
    return result


def _from_generic(fields: Mapping[str, Any]) -> Fragment:
    _check_fields(_GENERIC, fields, frozenset({"name"}), frozenset(_GENERIC_FIELDS))
    metadata = _decode(fields.get("metadata"), "fragment.metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValidationError(f"fragment.metadata must be a dict, got {metadata!r}")
    return Fragment(
        fields["name"],
        _decode(fields.get("data"), "fragment.data"),
        id=fields.get("id"),
        kind=fields.get("kind", "fragment"),
        metadata=metadata,
    )


def _decode(value: Any, where: str) -> Any:
    """Serialized data back to fragment data: typed dicts become fragments, wrapped dicts dicts."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        if "type" not in value:
            return _decode_fields(where, value)
        if value["type"] != _DICT:
            return fragment_from_dict(value)
        if value.keys() != {"type", "value"} or not isinstance(value["value"], Mapping):
            raise ValidationError(f"{where}: a wrapped dict needs exactly a 'value' mapping")
        return _decode_fields(where, value["value"])
    if isinstance(value, (list, tuple)):
        return [_decode(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise ValidationError(f"{where}: {type(value).__name__} is not a JSON value")


#: The earlier names, which read backwards (``to_fragment`` builds a fragment from a dict):
#: kept so code written against them keeps working.
to_fragment = fragment_from_dict
from_fragment = fragment_to_dict
