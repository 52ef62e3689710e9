"""NESTFUL's tool specs and call references: free-text parameter types -> JSON Schema, specs <-> OpenAI function
tools, and the ``$label.field$`` references between calls (shared by the v2 and v1 readers, the scorer, the
executor and the validation rules)."""
from __future__ import annotations

import functools
import json
import re
from typing import Any, Container, Iterator, Mapping, Optional

from tooluse_datasets.errors import (InvalidValueError, MissingFieldError, UndefinedReferenceError, UnknownToolError,
                                     json_kind, shown)

# A whole argument value that is a reference: "$var_2.result$", "$var1.output_0$", v1 "$var3$", and one with a
# field but no closing `$` ("$var_1.result"), which upstream's executor and scorer read as the closed reference
# (spec §9): so do the readers, the rules and our executor. Matched with fullmatch: a pattern's `$` also matches
# before a final newline, and "$var_1.result$\n" is no reference.
REFERENCE = re.compile(r"\$(var_?\d+)(?:\.([^$]+)\$?|\$)")

# NESTFUL's free-text types -> JSON Schema. JSON Schema types (and lists of them) pass through.
FREE_TEXT_TYPES: dict[str, dict] = {
    "int or float": {"type": "number"},
    "float": {"type": "number"},
    "int": {"type": "integer"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "str": {"type": "string"},
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "boolean": {"type": "boolean"},
    "list": {"type": "array"},
    "array": {"type": "array"},
    "dict": {"type": "object"},
    "object": {"type": "object"},
    "list of float": {"type": "array", "items": {"type": "number"}},
    "list of int": {"type": "array", "items": {"type": "integer"}},
    "list of str": {"type": "array", "items": {"type": "string"}},
    "null": {"type": "null"},
}
JSON_SCHEMA_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}


# v1 also embeds references in longer strings ("Meeting ID: $var1.event_id$").
EMBEDDED_REFERENCE = re.compile(r"\$(var_?\d+)\.([^$]+)\$")


# The keys of a NESTFUL call, in upstream's order.
CALL_KEYS = ("name", "label", "arguments")


def label_key(label: str) -> str:
    """How references name a call: its label without its ``$`` (``$var_1`` is read as ``var_1``; upstream's executor
    removes every ``$``, so ``$var_1$`` is ``var_1`` too, as the executor and scorer here read it)."""
    return label.replace("$", "")


def check_call(call: dict, i: int, *, producers: Mapping[str, str], catalog: set,
               catalog_name: str) -> tuple[str, str, dict]:
    """``(label, name, arguments)`` of the ``i``-th call of a row's ``output``, each checked (``producers``: the
    earlier calls' labels by :func:`label_key`; a label references could not tell from one of them is used
    twice); typed errors name the field."""
    for key in CALL_KEYS:
        if key not in call:
            raise MissingFieldError(f"call lacks {key!r}", field=f"output[{i}].{key}")
    label, name, arguments = call["label"], call["name"], call["arguments"]
    if not isinstance(label, str) or not label_key(label):
        # ("$" alone: references name a call by its label without "$", so none could name it)
        raise InvalidValueError(f"label must be a non-empty string besides its '$', got "
                                f"{shown(label) if isinstance(label, str) else json_kind(label)}",
                                field=f"output[{i}].label")
    if label_key(label) in producers:
        raise InvalidValueError(f"label {label!r} is used twice", field=f"output[{i}].label")
    if not isinstance(name, str):
        raise InvalidValueError(f"name must be a string, got {json_kind(name)}", field=f"output[{i}].name")
    if name not in catalog:
        raise UnknownToolError(f"call to {shown(name)}, which is not in {catalog_name}", field=f"output[{i}].name")
    if not isinstance(arguments, dict):
        raise InvalidValueError(f"arguments must be a JSON object, got {json_kind(arguments)}",
                                field=f"output[{i}].arguments")
    return label, name, arguments


def labelled_reference(value: str, labels: Container[str]) -> Optional[tuple[str, Optional[str]]]:
    """``(label, output field or None)`` when ``value`` is the whole ``$<label>.<field>$`` (or ``$<label>$``) of a
    label in ``labels``, however it is spelled (``$step_1``): upstream's executor resolves any label the row's
    calls define (spec section 9: the label is what comes before the first ``.``); None otherwise."""
    if len(value) < 3 or value[0] != "$" or value[-1] != "$":
        return None
    label, dot, output_field = value[1:-1].partition(".")
    if label not in labels or "$" in output_field or (dot and not output_field):
        return None
    return label, output_field if dot else None


def references(arguments: dict, *, embedded: bool = False, labels: Container[str] = ()
               ) -> Iterator[tuple[str, str, Any]]:
    """``(argument path, producer label, output field or None)`` for each whole-value reference, also inside
    lists and objects: ``$var_N...`` (:data:`REFERENCE`) and, for a row whose calls are labelled otherwise
    (``$step_1``), a reference to one of ``labels`` (label keys); ``embedded``: also references inside longer
    strings (v1), to ``var_N``/``varN`` or to one of ``labels`` (labels renamed by ``short_call_ids``)."""
    keys = tuple(sorted((k for k in labels if isinstance(k, str) and k), key=len, reverse=True)) if embedded else ()
    within = _embedded_reference_to(keys) if keys else None
    for path, value in argument_strings(arguments):
        m = REFERENCE.fullmatch(value)
        named = None if m else labelled_reference(value, labels)
        if m:
            yield path, m.group(1), m.group(2)
        elif named:
            yield path, *named
        elif embedded:
            for e in (within or EMBEDDED_REFERENCE).finditer(value):
                yield path, e.group(1), e.group(2)


@functools.lru_cache(maxsize=256)
def _embedded_reference_to(labels: tuple[str, ...]) -> re.Pattern:
    """:data:`EMBEDDED_REFERENCE`, also to one of ``labels`` (longest first): built once for a row's labels, which
    each of its calls' arguments is searched with."""
    return re.compile(r"\$(var_?\d+|" + "|".join(map(re.escape, labels)) + r")\.([^$]+)\$")


def argument_strings(arguments: dict) -> Iterator[tuple[str, str]]:
    """``(argument path, text)`` for each string among a call's argument values, also inside lists and objects
    (``a[0].b``), where references are written."""
    def walk(path: str, value: Any):
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from walk(f"{path}[{i}]", v)
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from walk(f"{path}.{k}", v)
    for name, value in arguments.items():
        yield from walk(name, value)


def executor_reference(value: Any) -> Optional[tuple[str, Optional[str]]]:
    """``(label, output field or None)`` when upstream's executor reads ``value`` as a reference (spec §9: a string
    that starts and ends with ``$``, or starts with ``$var``; the label is what comes before the first ``.``),
    None when it passes the value as it is. The sandbox's ``child.resolve`` reads values so (it imports nothing
    of the package); for a well-formed reference this is what :data:`REFERENCE` reads."""
    if type(value) is not str:
        return None
    if value.startswith("$") and value.endswith("$"):
        inner = value[1:-1]
    elif value.startswith("$var"):
        inner = value[1:]
    else:
        return None
    label, dot, output_field = inner.partition(".")
    return label, output_field if dot else None


def check_references(arguments: dict, producers: Mapping[str, str], field: str, *, embedded: bool = False
                     ) -> list[tuple[str, str, Optional[str]]]:
    """``(argument path, producer's label, output field or None)`` of each reference in ``arguments`` (as
    :func:`references` finds them); ``producers``: the earlier calls' labels by :func:`label_key`. A reference
    to no earlier call is an :class:`UndefinedReferenceError` naming ``<field>.<argument path>``."""
    found = []
    for argument, key, output_field in references(arguments, embedded=embedded, labels=producers):
        if key not in producers:
            raise UndefinedReferenceError(f"reference to {key!r}, which no earlier call defines",
                                          field=f"{field}.{argument}")
        found.append((argument, producers[key], output_field))
    return found


def unwrap_properties(spec: Any, field: str) -> tuple[dict, list | None]:
    """``{"properties": {...}, "required": [...], "type": "object"}`` or a plain name -> property map."""
    if not isinstance(spec, dict):
        raise InvalidValueError(f"must be a JSON object, got {json_kind(spec)}", field=field)
    if _is_wrapper(spec):
        return spec["properties"], spec.get("required")
    return spec, None


_WRAPPER_KEYS = frozenset({"properties", "required", "type", "additionalProperties"})


def _is_wrapper(spec: dict) -> bool:
    """Whether ``spec`` is a JSON-Schema object wrapper rather than a name -> property map that happens to have
    parameters named ``properties``, ``type`` or ``required`` (current-format code tools use the Python names):
    a wrapper's ``properties`` maps names to property objects, its ``type`` is ``"object"`` and its ``required``
    a list, where such parameters are property objects (``{"description": ..., "type": ...}``)."""
    props = spec.get("properties")
    return (isinstance(props, dict) and set(spec) <= _WRAPPER_KEYS
            and all(isinstance(p, dict) for p in props.values())
            and spec.get("type", "object") == "object"
            and isinstance(spec.get("required", []), list)
            and isinstance(spec.get("additionalProperties", True), (bool, dict)))


def output_fields(tools: list) -> dict[str, Optional[list[str]]]:
    """Tool name -> its output parameter names, from NESTFUL specs (either variant, wrapped in JSON Schema or
    not) or from unified (OpenAI function) tools; the first tool of a name wins, as in upstream's lookup.
    None: the tool declares no output parameters."""
    out: dict[str, Optional[list[str]]] = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        unified = isinstance(tool.get("function"), dict)
        spec = tool["function"] if unified else tool
        name = spec.get("name")
        if not isinstance(name, str) or name in out:
            continue
        if unified:  # already a property map: to_openai_tool unwrapped it
            outputs = spec.get("output_parameters")
            out[name] = list(outputs) if isinstance(outputs, dict) else None
        else:
            outputs = spec.get("output_parameters", spec.get("output_parameter"))
            out[name] = list(unwrap_properties(outputs, "output_parameters")[0]) if isinstance(outputs, dict) else None
    return out


def json_schema_property(prop: Any) -> Any:
    """A NESTFUL property as JSON Schema: free-text types mapped (``"int or float"`` -> ``number``), also in a
    list of types and in the property's ``items`` and ``properties``, where specs nest them too."""
    if not isinstance(prop, dict):
        return prop
    out = dict(prop)
    t = prop.get("type")
    if isinstance(t, str) and t not in JSON_SCHEMA_TYPES:
        mapped = FREE_TEXT_TYPES.get(t.strip().lower())
        if mapped is not None:
            out = {**mapped, **{k: v for k, v in out.items() if k not in mapped}}
        else:
            _type_in_description(out, t)
    elif isinstance(t, list) and not all(x in JSON_SCHEMA_TYPES for x in t if isinstance(x, str)):
        names = [_bare_type(x) for x in t]  # "int or float" -> "number"; else the whole list is described
        if all(names):
            out["type"] = list(dict.fromkeys(names))
        else:
            _type_in_description(out, t)
    if isinstance(out.get("items"), dict):
        out["items"] = json_schema_property(out["items"])
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: json_schema_property(v) for k, v in out["properties"].items()}
    return out


def _bare_type(name: Any) -> Optional[str]:
    """The JSON Schema type a type name in a list of types stands for, if it is one type alone."""
    if not isinstance(name, str):
        return None
    if name in JSON_SCHEMA_TYPES:
        return name
    mapped = FREE_TEXT_TYPES.get(name.strip().lower())
    return mapped["type"] if mapped is not None and len(mapped) == 1 else None


def _type_in_description(prop: dict, t: Any) -> None:
    """Unknown free text is not a JSON Schema type: said in the description instead."""
    prop.pop("type")
    desc = prop.get("description") or ""
    # (a list of types read as one: "list of int or str", not Python's "['list of int', 'str']")
    named = " or ".join(x if isinstance(x, str) else json.dumps(x) for x in t) if isinstance(t, list) else t
    prop["description"] = f"{desc} (type: {named})".strip()


def to_openai_tool(spec: dict, field: str = "tools[]") -> dict:
    props, required = unwrap_properties(spec.get("parameters", {}), f"{field}.parameters")
    parameters: dict = {"type": "object", "properties": {k: json_schema_property(v) for k, v in props.items()}}
    if required is not None:
        parameters["required"] = required
    function: dict = {"name": spec["name"], "description": spec.get("description", ""), "parameters": parameters}
    out_spec = spec.get("output_parameters", spec.get("output_parameter"))
    if out_spec is not None:
        out_props, _ = unwrap_properties(out_spec, f"{field}.output_parameters")
        function["output_parameters"] = {k: json_schema_property(v) for k, v in out_props.items()}
    return {"type": "function", "function": function}


def from_openai_tool(tool: dict) -> dict:
    """Current-format NESTFUL spec from an OpenAI tool (used when a row carries no source specs)."""
    fn = tool["function"]
    spec = {"name": fn["name"], "description": fn.get("description", ""),
            "parameters": fn.get("parameters", {}).get("properties", {})}
    if "output_parameters" in fn:
        spec["output_parameters"] = fn["output_parameters"]
    return spec
