"""A tool schema's own ``$ref``s, checked once when the schema is compiled: one that points nowhere in the
document it names or to a value that is no schema (a description, a list), or a loop of references that applies
a schema to the same value again without descending into it.

jsonschema resolves a reference only when a value reaches it, so such a schema passes its metaschema check
and then fails on every call (a ``PointerToNowhere``, or a ``RecursionError`` after a thousand frames) as if
the calls were wrong. The schema is what is broken: JSON Schema 2020-12 (section 9.4.1) says a schema must not
run into an infinite loop against an instance. A reference that descends first is ordinary recursion and
valid: a tree node whose ``children`` items ``$ref`` the node, or ``{"$ref": "#"}`` under ``properties``.

``$dynamicRef`` and ``$recursiveRef`` are followed too, resolved as jsonschema resolves them: against the
dynamic scope, which the walk builds as validation does (the resources it enters, from the root down). A
reference to another document (never fetched) is left to the calls that reach it, as before.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

import referencing
import referencing.jsonschema
from referencing.exceptions import InvalidAnchor, NoSuchAnchor, PointerToNowhere, Unresolvable
from referencing.jsonschema import lookup_recursive_ref

from ..errors import as_json, json_kind

# Lookups that found the document but nothing at the pointer or anchor in it: never resolvable.
_NOWHERE = (PointerToNowhere, NoSuchAnchor, InvalidAnchor)


def _nowhere_words(exc: Exception) -> str:
    """Why a lookup found nothing, in the schema's terms rather than the referencing library's class names."""
    if isinstance(exc, PointerToNowhere):
        return "no value at that JSON pointer"
    return "not a valid anchor" if isinstance(exc, InvalidAnchor) else "no such anchor"


# Keywords that apply the schema they reference to the value itself.
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords that apply their subschemas to the value itself (in place), by draft keyword name.
_IN_PLACE_VALUE = ("not",)
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")   # draft-07 `dependencies` may also list property names
# Keywords whose subschemas only a reference applies.
_DEFINITIONS = ("$defs", "definitions")


class _BrokenReference(Exception):
    pass


def reference_problem(validator: Any) -> Optional[str]:
    """Why ``validator``'s schema cannot apply its own references, or None. ``validator`` is a jsonschema
    validator built with the registry its calls are checked with (references resolve as they would)."""
    cls = type(validator)
    specification = referencing.jsonschema.specification_with(
        dialect_id=cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect", default=referencing.Specification.OPAQUE)
    # ids of subschemas from which no loop is reachable, following dynamic references (True) or not (False)
    done: dict[bool, set[int]] = {True: set(), False: set()}
    try:
        for schema, resolver, applied in _subschemas(validator.schema, validator._resolver, specification):
            loop = _loop_from(schema, resolver, cls, specification, done[applied], follow_dynamic=applied)
            if loop:
                return (f"{' -> '.join(loop)} loops: it applies a schema again to the same value, never "
                        f"descending into it")
    except _BrokenReference as exc:
        return str(exc)
    return None


def _subschemas(schema: Any, resolver: Any, specification: Any) -> Iterator[tuple[dict, Any, bool]]:
    """Every subschema of ``schema`` (itself included) with the resolver its references resolve with, and whether
    validation applies it as the walk reaches it: from the root without passing a definition (``$defs``,
    ``definitions``), which only a reference applies. Only there is the walk's dynamic scope the one validation
    has, which a ``$dynamicRef`` or ``$recursiveRef`` resolves against (a definition's references extend that
    of the reference that applies it)."""
    stack = [(schema, resolver, True)]
    while stack:
        schema, resolver, applied = stack.pop()
        if not isinstance(schema, dict):
            continue
        yield schema, resolver, applied
        definitions = {id(sub) for key in _DEFINITIONS if isinstance(schema.get(key), dict)
                       for sub in schema[key].values()}
        for sub in specification.subresources_of(schema):
            stack.append((sub, resolver.in_subresource(specification.create_resource(sub)),
                          applied and id(sub) not in definitions))


def _loop_from(start: dict, resolver: Any, cls: Any, specification: Any, done: set[int], *,
               follow_dynamic: bool) -> list[str]:
    """The references of a loop of in-place applications reachable from ``start``, or [] (depth first, with an
    explicit stack: chains of references may be long). ``follow_dynamic``: ``resolver``'s dynamic scope is the
    one validation has there, so dynamic references are followed too."""
    if id(start) in done:
        return []
    on_path = {id(start): 0}
    path: list[tuple[dict, Optional[str]]] = [(start, None)]   # (schema, the reference that led to it)
    pending = [_in_place(start, resolver, cls, specification, follow_dynamic)]
    while pending:
        step = next(pending[-1], None)
        if step is None:
            pending.pop()
            schema, _ = path.pop()
            del on_path[id(schema)]
            done.add(id(schema))
            continue
        ref, sub, sub_resolver = step
        if not isinstance(sub, dict) or id(sub) in done:
            continue
        if id(sub) in on_path:
            return [r for _, r in path[on_path[id(sub)] + 1:] if r is not None] + ([ref] if ref is not None else [])
        on_path[id(sub)] = len(path)
        path.append((sub, ref))
        pending.append(_in_place(sub, sub_resolver, cls, specification, follow_dynamic))
    return []


def _in_place(schema: dict, resolver: Any, cls: Any, specification: Any,
              follow_dynamic: bool) -> Iterator[tuple[Optional[str], Any, Any]]:
    """``(the reference followed or None, subschema, its resolver)`` for each subschema that jsonschema applies
    to the value ``schema`` is applied to: the keywords the draft applies (draft-07 and earlier ignore a
    ``$ref``'s siblings), as jsonschema descends into them."""
    for keyword, value in cls._APPLICABLE_VALIDATORS(schema):
        if keyword not in cls.VALIDATORS:
            continue
        if keyword in REFERENCE_KEYWORDS and isinstance(value, str):
            try:
                resolved = lookup_recursive_ref(resolver) if keyword == "$recursiveRef" else resolver.lookup(value)
            except _NOWHERE as exc:
                raise _BrokenReference(f"{keyword} {as_json(value)} points to nothing ({_nowhere_words(exc)})")
            except Unresolvable:
                continue  # another document, never fetched: the calls that reach it say so
            if not isinstance(resolved.contents, (dict, bool)):  # a description, a list: jsonschema fails on it
                raise _BrokenReference(f"{keyword} {as_json(value)} points to a JSON {json_kind(resolved.contents)}, "
                                       "not a schema")
            if keyword == "$ref" or follow_dynamic:  # (one that points nowhere does so in any scope)
                yield f"{keyword} {as_json(value)}", resolved.contents, resolved.resolver
            continue
        if keyword in _IN_PLACE_VALUE:
            subs = [value]
        elif keyword in _IN_PLACE_LIST and isinstance(value, list):
            subs = value
        elif keyword in _IN_PLACE_MAP and isinstance(value, dict):
            subs = list(value.values())
        elif keyword == "if":   # then and else are applied by if
            subs = [value] + [schema[k] for k in ("then", "else") if k in schema]
        else:
            continue
        for sub in subs:
            if isinstance(sub, dict):
                yield None, sub, resolver.in_subresource(specification.create_resource(sub))
