"""Tools' JSON Schemas: checked once, compiled once per distinct schema, applied to call arguments.

Built on ``jsonschema`` (not hand-written checks), chosen over ``fastjsonschema`` after measuring both on the
calls of our rows (``benchmarks/bench_schema_validators.py``: bundled samples + 2,000 generated ToolMind rows,
5,533 calls over 614 distinct schemas). fastjsonschema validates ~8x faster once a schema is compiled, but
compiling costs so much that, at ~9 calls per distinct schema, jsonschema is ~3.6x faster overall; ToolMind
has tens of thousands of tools. jsonschema also reports every error with its path (needed to name the field,
and to leave NESTFUL references such as ``$var_1.result$`` unchecked), and it neither generates and runs
Python code from schemas that come with untrusted data nor, as fastjsonschema does by default, writes schema
defaults into the arguments it checks.

The draft is the one a schema names in ``$schema``, else draft-07 (also for a ``$schema`` that names no draft
known here, which is reported: ``tool.unknown_dialect``): what function-calling tool schemas are usually
written against (tuple ``items`` lists, ``definitions``), and its metaschema check costs a seventh
of 2020-12's, which matters with tens of thousands of distinct tools. ``format`` is an annotation (not
asserted), as the JSON Schema specification says. References are resolved only inside the schema: no
schema is ever fetched; one that points to nothing there, or a loop of references that never descends into
the value, makes the schema unusable (``references.py``), not each call that reaches it. A schema's patterns
(``pattern``, ``patternProperties`` and the keys ``additionalProperties`` and ``unevaluatedProperties`` weigh
against them) come with the data, so they run with a time limit (the ``regex`` engine's timeout): a pattern
that backtracks catastrophically on an argument leaves it not checked (a warning of its own) instead of
stalling validation.
"""
from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import islice
from typing import Any, Iterable, Iterator, Optional
from urllib.parse import unquote

import attrs
import orjson
import regex
from jsonschema import Draft7Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import extend, validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import lookup_recursive_ref

from ..codec import dumps
from ..errors import QUOTED_STRING, as_json, json_kind
from .references import REFERENCE_KEYWORDS, reference_problem
from .registry import short_message

DEFAULT_DRAFT = Draft7Validator
# Distinct schemas kept compiled; ToolMind has tens of thousands of tools. Past this many the cache starts
# over (cheap to rebuild, and memory stays bounded on any input).
MAX_CACHED_SCHEMAS = 16_384
# Errors reported per call (each message cut as every finding's is: jsonschema quotes the offending value).
MAX_ERRORS_PER_CALL = 10
# Errors past those counted for the note saying how many were left out; counting stops here, at the first value a
# pattern runs out of time on, and after COUNTING_SECONDS, so an argument of a million bad items stays cheap.
MAX_ERRORS_COUNTED = 1000


@dataclass(frozen=True)
class CompiledSchema:
    validator: Any = None            # a jsonschema validator, None when the schema is unusable
    problem: Optional[str] = None    # why the schema is unusable (tool.invalid_schema)
    unknown_dialect: Optional[str] = None  # a $schema naming no known draft, the draft used (tool.unknown_dialect)


_cache: dict[str, CompiledSchema] = {}
_cache_lock = threading.Lock()


def schema_key(schema: Any) -> str:
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # integers beyond 64 bits and the like: exact text, key order kept
        return dumps(schema)


def compile_parameters(schema: Any) -> CompiledSchema:
    """The compiled validator of a tool's ``parameters`` (cached per distinct schema)."""
    key = schema_key(schema)
    compiled = _cache.get(key)
    if compiled is None:
        compiled = _compile(schema, has_refs=any(f'"{keyword}"' in key for keyword in REFERENCE_KEYWORDS))
        with _cache_lock:
            if len(_cache) >= MAX_CACHED_SCHEMAS:
                _cache.clear()
            _cache[key] = compiled
    return compiled


# Seconds one pattern (``pattern``, ``patternProperties``) may take on one value or key.
PATTERN_SECONDS = 0.1
# Seconds counting the errors past those reported may take: as long as the reported ones may (a pattern may take
# nearly PATTERN_SECONDS on each of a thousand values).
COUNTING_SECONDS = MAX_ERRORS_PER_CALL * PATTERN_SECONDS
# ``ValidationError.validator`` of a value a pattern ran out of time on: not checked, not a violation.
UNCHECKED = "unchecked"


def _search(pattern: str, text: str) -> Optional[bool]:
    """Whether ``pattern`` is found in ``text``; None when it runs over the time limit. Patterns come with
    the data, and one that backtracks catastrophically would otherwise stall validation for hours."""
    try:
        return regex.search(pattern, text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        return None


def _not_checked(pattern: str, text: str) -> ValidationError:
    return ValidationError(f"pattern {as_json(pattern)} took over {PATTERN_SECONDS} s on {as_json(text, 60)}: "
                           "not checked",
                           validator=UNCHECKED)


def _pattern(validator, pattern, instance, schema):
    if not validator.is_type(instance, "string"):
        return
    found = _search(pattern, instance)
    if found is None:
        yield _not_checked(pattern, instance)
    elif not found:
        yield ValidationError(f"{as_json(instance)} does not match {as_json(pattern)}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            found = _search(pattern, key)
            if found is None:
                yield _not_checked(pattern, key)
            elif found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, allowed, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:
        if key in declared:
            continue
        timed_out = None
        for pattern in patterns:
            found = _search(pattern, key)
            if found:
                break
            if found is None:
                timed_out = pattern
        else:
            if timed_out is not None:
                yield _not_checked(timed_out, key)
            else:
                extras.append(key)
    if validator.is_type(allowed, "object"):
        for key in extras:
            yield from validator.descend(instance[key], allowed, path=key)
    elif allowed is False and extras:
        listed = ", ".join(as_json(key) for key in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} "
                              f"{'was' if len(extras) == 1 else 'were'} unexpected)")


def _unevaluated_properties(validator, unevaluated, instance, schema):
    """``unevaluatedProperties`` (2019-09 and later): the keys no keyword of this schema, or of a subschema
    that applied to the instance in place and held, evaluated. Which keys ``patternProperties`` evaluated is
    decided with the time limit; a key a pattern ran out of time on is not checked (neither evaluated nor
    not)."""
    if not validator.is_type(instance, "object"):
        return
    evaluated: set = set()
    timed_out: dict[str, str] = {}
    _evaluated_keys(validator, instance, schema, evaluated, timed_out)
    for key, pattern in timed_out.items():
        if key not in evaluated:
            yield _not_checked(pattern, key)
    rest = [key for key in instance if key not in evaluated and key not in timed_out]
    failed = [key for key in rest if not _holds(validator.descend(instance[key], unevaluated, path=key))]
    if failed and unevaluated is False:
        listed = ", ".join(as_json(key) for key in sorted(failed))
        yield ValidationError(f"Unevaluated properties are not allowed ({listed} "
                              f"{'was' if len(failed) == 1 else 'were'} unexpected)")
    elif failed:
        listed = ", ".join(as_json(key) for key in failed)
        yield ValidationError(f"Unevaluated properties are not valid under the given schema ({listed} "
                              f"{'was' if len(failed) == 1 else 'were'} unevaluated and invalid)")


def _holds(errors: Iterable[ValidationError]) -> bool:
    """Whether a subschema held: no error other than a value not checked for time."""
    return all(error.validator == UNCHECKED for error in errors)


def _evaluated_keys(validator, instance: dict, schema: Any, evaluated: set, timed_out: dict[str, str]) -> None:
    """Add to ``evaluated`` the keys of ``instance`` that ``schema`` evaluates, following the in-place
    applicators whose subschemas hold (JSON Schema 2020-12, section 11.3); keys a pattern ran out of time on
    go to ``timed_out`` (key -> pattern)."""
    if not isinstance(schema, dict):
        return  # true or false: no annotations
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        reference = schema.get(keyword)
        if isinstance(reference, str):
            # as jsonschema's own keywords resolve them: $recursiveRef by the dynamic scope (the outermost
            # $recursiveAnchor), not as the plain reference "#" to its own resource
            resolved = (lookup_recursive_ref(validator._resolver) if keyword == "$recursiveRef"
                        else validator._resolver.lookup(reference))
            _evaluated_keys(validator.evolve(schema=resolved.contents, _resolver=resolved.resolver), instance,
                            resolved.contents, evaluated, timed_out)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        evaluated.update(key for key in instance if key in properties)
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for key in instance:
            for pattern in patterns:
                found = _search(pattern, key)
                if found:
                    evaluated.add(key)
                    break
                if found is None:
                    timed_out.setdefault(key, pattern)
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is not None:
            evaluated.update(key for key, value in instance.items()
                             if _holds(validator.descend(value, subschema, path=key)))
    dependent = schema.get("dependentSchemas")
    if isinstance(dependent, dict):
        for key, subschema in dependent.items():
            if key in instance:
                _evaluated_keys(validator, instance, subschema, evaluated, timed_out)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for subschema in schema.get(keyword) or ():
            if _holds(validator.descend(instance, subschema)):
                _evaluated_keys(validator, instance, subschema, evaluated, timed_out)
    if "if" in schema:
        if _holds(validator.descend(instance, schema["if"])):
            _evaluated_keys(validator, instance, schema["if"], evaluated, timed_out)
            branch = schema.get("then")
        else:
            branch = schema.get("else")
        if branch is not None:
            _evaluated_keys(validator, instance, branch, evaluated, timed_out)


def _exact_number(value: Any) -> Fraction:
    """A JSON number as the exact decimal it was written as: a float is read back from its shortest text
    (what the JSON said, ``19.99``), not from its binary value (``19.989999999999998436805981327779591083526611328125``)."""
    return Fraction(value) if isinstance(value, int) else Fraction(repr(value))


def _multiple_of(validator, divisor, instance, schema):
    """``multipleOf`` on the decimal values JSON holds: ``0.3`` is a multiple of ``0.1`` and ``19.99`` of
    ``0.01`` (jsonschema divides the doubles, where ``19.99 / 0.01`` is ``1998.9999999999998``, and raises on
    integers too large for a double)."""
    if not validator.is_type(instance, "number") or not validator.is_type(divisor, "number") or not divisor:
        return
    if (_exact_number(instance) / _exact_number(divisor)).denominator != 1:
        yield ValidationError(f"{as_json(instance)} is not a multiple of {as_json(divisor)}")


# The draft's keywords that run patterns, with time limits, and multipleOf on exact decimals.
_BOUNDED_KEYWORDS = {"pattern": _pattern, "patternProperties": _pattern_properties,
                     "additionalProperties": _additional_properties,
                     "unevaluatedProperties": _unevaluated_properties,
                     "multipleOf": _multiple_of, "divisibleBy": _multiple_of}
_BOUNDED = {}  # draft class -> the same class with the bounded keywords


def _bounded(cls):
    if cls in _BOUNDED.values():
        return cls
    if cls not in _BOUNDED:
        # Only keywords the draft has: draft-07 ignores unevaluatedProperties, and so must we.
        bounded = extend(cls, {k: v for k, v in _BOUNDED_KEYWORDS.items() if k in cls.VALIDATORS})
        bounded.evolve = _evolve_bounded
        bounded.descend = _descend_keeping_the_path(bounded.descend)
        _BOUNDED[cls] = bounded
    return _BOUNDED[cls]


def _descend_keeping_the_path(descend):
    """jsonschema's ``descend``, except that the error of a ``false`` subschema (``"properties": {"h": false}``)
    keeps the place it was found at: jsonschema yields it before adding the path, so the finding named the whole
    arguments instead of ``h``."""
    def descend_keeping_the_path(self, instance, schema, path=None, schema_path=None, resolver=None):
        for error in descend(self, instance, schema, path=path, schema_path=schema_path, resolver=resolver):
            if schema is False:
                if path is not None:
                    error.path.appendleft(path)
                if schema_path is not None:
                    error.schema_path.appendleft(schema_path)
            yield error
    return descend_keeping_the_path


def _evolve_bounded(self, **changes):
    """``evolve`` of a bounded validator, which jsonschema calls for every subschema it descends into: like
    jsonschema's own, a subschema naming a draft in ``$schema`` gets that draft's validator, but the bounded
    one. jsonschema's gave the stock class to any such subschema, the root itself too when a ``$ref: "#"``
    reaches it again: patterns ran there without a time limit, and multipleOf on doubles."""
    cls = type(self)
    schema = changes.setdefault("schema", self.schema)
    if isinstance(schema, dict) and "$schema" in schema:
        try:
            cls = _bounded(validator_for(schema, default=cls))
        except ValueError:  # a $schema that is no URI ("http://["): the draft already in use (tool.unknown_dialect)
            pass
    for name, alias in _evolve_fields(type(self)):
        if alias not in changes:
            changes[alias] = getattr(self, name)
    return cls(**changes)


_EVOLVE_FIELDS: dict = {}  # validator class -> (attribute, init argument) of each field evolve carries over


def _evolve_fields(cls) -> list[tuple[str, str]]:
    if cls not in _EVOLVE_FIELDS:
        _EVOLVE_FIELDS[cls] = [(f.name, f.alias) for f in attrs.fields(cls) if f.init]
    return _EVOLVE_FIELDS[cls]


def _compile(schema: Any, has_refs: bool = True) -> CompiledSchema:
    if not isinstance(schema, dict):
        return CompiledSchema(problem=f"parameters must be a JSON Schema object, got {type_name(schema)}")
    if "$schema" in schema and not isinstance(schema["$schema"], str):  # jsonschema fails on it with an AttributeError
        return CompiledSchema(problem=f"$schema must be a string naming a JSON Schema draft, got "
                                      f"{type_name(schema['$schema'])}")
    cls, unknown_dialect = draft_of(schema)
    compiled = _compile_as(cls, schema, has_refs)
    return replace(compiled, unknown_dialect=unknown_dialect) if unknown_dialect else compiled


# What a $schema may name: the drafts jsonschema implements, by their metaschemas' URIs.
KNOWN_DRAFTS = "draft-03, draft-04, draft-06, draft-07, 2019-09, 2020-12"


def draft_of(schema: dict) -> tuple[Any, Optional[str]]:
    """The draft ``schema`` is checked against, and, when its ``$schema`` names no draft known here, a message
    saying so and that it is checked as draft-07 (None otherwise). A URI that differs from a draft's only by
    its scheme (``https://json-schema.org/draft-07/schema``, ``http://json-schema.org/draft/2020-12/schema``)
    names that draft: jsonschema alone checked the second as draft-07, ignoring every keyword of 2020-12."""
    named = schema.get("$schema")
    if not isinstance(named, str):
        return DEFAULT_DRAFT, None  # none named (a $schema that is no string is tool.invalid_schema)
    scheme, colon, rest = named.partition(":")
    other = {"http": "https", "https": "http"}.get(scheme.lower())
    for uri in (named, f"{other}{colon}{rest}" if other else None):
        try:
            cls = validator_for({"$schema": uri}, default=None) if uri else None
        except ValueError:  # no URI at all ("http://[")
            cls = None
        if cls is not None:
            return cls, None
    return DEFAULT_DRAFT, (f"$schema {as_json(named, 120)} names no JSON Schema draft known here ({KNOWN_DRAFTS}): "
                           f"checked as draft-07")


def _compile_as(cls, schema: dict, has_refs: bool) -> CompiledSchema:
    try:
        cls.check_schema(schema, format_checker=_schema_format_checker(cls))
    except SchemaError as exc:
        where = _path(exc.absolute_path)
        return CompiledSchema(problem=short_message(json_message(exc)) + (f" (at {where})" if where else ""))
    except Exception as exc:  # a pathological schema (nested too deep): unusable, said why
        return CompiledSchema(problem=short_message(f"{type(exc).__name__}: {exc}"))
    declared = schema.get("type")
    types = declared if isinstance(declared, list) else [declared]
    if declared is not None and "object" not in types:
        return CompiledSchema(problem=f"parameters must describe an object (type \"object\"), not type "
                                      f"{as_json(declared)}")
    # An empty registry: references resolve inside the schema (and to the drafts' metaschemas, which jsonschema
    # adds) and nowhere else. jsonschema's default registry downloads any other URI a `$ref` names.
    # A copy of its own: the validator keeps the schema it is given, and the caller may change its row after it
    # is checked (a template reused for the next row); the cache would then apply the changed schema to every
    # later row with the schema this key names.
    validator = _bounded(cls)(copy.deepcopy(schema), registry=_NO_RETRIEVAL)
    try:  # (the walk costs a tenth of the metaschema check: skipped when no key is a reference keyword)
        problem = reference_problem(validator) if has_refs else None
    except Exception:  # the walk itself failed (it reads jsonschema internals): the calls say what they meet
        problem = None
    return CompiledSchema(problem=short_message(problem)) if problem else CompiledSchema(validator=validator)


_NO_RETRIEVAL = Registry()


_SCHEMA_FORMAT_CHECKERS: dict = {}  # draft class -> the format checker its metaschema check uses


def _schema_format_checker(cls) -> FormatChecker:
    """The format checker of ``cls``'s metaschema, except that a pattern (format ``regex``: ``pattern``,
    ``patternProperties`` keys) is compiled by the engine that runs it on arguments (``regex``), not by Python's
    ``re``: ``re`` refuses ECMA-262 patterns that ``regex`` runs, such as ``\\p{L}`` or ``(?<year>...)``, which
    would make a valid schema ``tool.invalid_schema``."""
    if cls not in _SCHEMA_FORMAT_CHECKERS:
        meta = validator_for(cls.META_SCHEMA, default=cls)
        checker = FormatChecker(())
        checker.checkers = dict(meta.FORMAT_CHECKER.checkers)
        checker.checkers["regex"] = (_compiles, (regex.error,))
        _SCHEMA_FORMAT_CHECKERS[cls] = checker
    return _SCHEMA_FORMAT_CHECKERS[cls]


def _compiles(pattern: object) -> bool:
    if isinstance(pattern, str):
        regex.compile(pattern)
    return True


def argument_errors(compiled: CompiledSchema, arguments: Any,
                    unchecked: Iterable[str] = ()) -> Iterator[tuple[str, str, bool]]:
    """``(path inside the arguments, message, checked)`` for each way ``arguments`` break the schema
    (``checked``), or a value a pattern ran out of time on (not ``checked``: neither passed nor failed);
    values at the ``unchecked`` paths (references to other calls' outputs) are not checked. At most
    ``MAX_ERRORS_PER_CALL`` are given, then one on the arguments (path ``""``) saying how many more there are."""
    skip = tuple(unchecked)
    reported = left_out = 0
    left_out_checked, counted_all = False, True
    try:
        for error in compiled.validator.iter_errors(arguments):
            path = _path(error.absolute_path)
            if skip and any(path == p or path.startswith((p + ".", p + "[")) for p in skip):
                continue
            if reported < MAX_ERRORS_PER_CALL:
                yield path, short_message(json_message(error)), error.validator != UNCHECKED
                reported += 1
                counting_ends = time.monotonic() + COUNTING_SECONDS
                continue
            # Past the cap: counted, so the findings say errors were left out and how many (at least the first).
            if left_out and (left_out >= MAX_ERRORS_COUNTED or error.validator == UNCHECKED
                             or time.monotonic() > counting_ends):
                counted_all = False
                break
            left_out += 1
            left_out_checked = left_out_checked or error.validator != UNCHECKED
        if left_out:
            # one more finding on the arguments themselves, under arguments.unchecked only when no left-out error
            # was a violation
            yield "", (f"and {'' if counted_all else 'at least '}{left_out} more error{'s' * (left_out > 1)} in "
                       f"these arguments (not reported: at most {MAX_ERRORS_PER_CALL} per call)"), left_out_checked
    except Exception as exc:  # a $ref to another document, a pattern that is no regular expression, nesting too deep
        cause = getattr(exc, "_wrapped", exc)  # jsonschema's _WrappedReferencingError, a name of no help to a user
        if type(cause) is Unresolvable:
            why = f": $ref {as_json(cause.ref)} names another document, which is never fetched (Unresolvable)"
        else:
            why = f" ({type(cause).__name__}: {cause})"
        yield "", short_message(f"the tool's schema cannot be applied{why}"), True


# Values whose Python repr jsonschema's messages quote, looked at per message (a huge object stays cheap).
_MAX_QUOTED_VALUES = 256
_FALSE_SCHEMA = "False schema does not allow "
_NONE_OF = "None of "


def json_message(error: ValidationError) -> str:
    """jsonschema's message with the values it quotes written as JSON (``"x" is not of type "integer"``,
    ``true``, ``null``), as the user's rows hold them, not as Python's repr (``'x'``, ``True``, ``None``).
    jsonschema writes each value with ``repr``: the reprs of the error's instance, its keyword's value and the
    parts of both (keys, items: the unexpected keys, the missing property, the enum's members) are replaced by
    their JSON text, longest first, in one pass."""
    message = error.message
    if error.validator is None and message.startswith(_FALSE_SCHEMA):  # the schema `false` (its words, not a value)
        return f"the schema false allows no value ({as_json(error.instance, 10**6)} given)"
    # draft-06/07 contains: "None of [None, 1] are valid under the given schema" starts with words, not a value
    words = _NONE_OF if error.validator == "contains" and message.startswith(_NONE_OF) else ""
    message = message[len(words):]
    quoted: dict[str, str] = {}
    parts = [(error.instance, 1), (error.validator_value, 2)]
    if error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(error.schema, dict):
        # "'x' does not match any of the regexes: '^p'" quotes the schema's patterns
        parts.append((list(error.schema.get("patternProperties") or ()), 1))
    for value, depth in parts:
        _collect_reprs(value, depth, message, quoted)
    if not quoted:
        return words + message
    # Any other quoted string is matched whole, and kept: a repr found inside it ('a' in the const "it's 'a'", True
    # in the key "True" of a message already written as JSON) is part of another value.
    by_length = sorted(quoted, key=len, reverse=True)
    pattern = "|".join([*map(regex.escape, by_length), QUOTED_STRING.pattern])
    return words + regex.sub(pattern, lambda m: quoted.get(m.group(), m.group()), message)


def _collect_reprs(value: Any, depth: int, message: str, quoted: dict) -> None:
    """``repr -> JSON text`` of ``value`` and of its keys and items down to ``depth``, where the repr is in
    ``message`` and differs from the JSON as quoted (cut at 80 characters; a number's repr is its JSON)."""
    if len(quoted) >= _MAX_QUOTED_VALUES:
        return
    # (an integer's repr is its JSON, replaced only when too long to quote whole: "1000...")
    if isinstance(value, (str, bool, int, dict, list, tuple)) or value is None:
        try:
            text = repr(value) if _repr_within(value, len(message)) else None
            if text is not None and text in message and text not in quoted:
                written = as_json(value)  # cut as every quoted value is: a long one left no room for the reason
                if text != written:
                    quoted[text] = written
        except (TypeError, ValueError, RecursionError):  # no JSON value (not in decoded rows), or too deep
            return
    if depth and isinstance(value, dict):
        for key, item in islice(value.items(), _MAX_QUOTED_VALUES):
            _collect_reprs(key, 0, message, quoted)
            _collect_reprs(item, depth - 1, message, quoted)
    elif depth and isinstance(value, (list, tuple)):
        for item in islice(value, _MAX_QUOTED_VALUES):
            _collect_reprs(item, depth - 1, message, quoted)


def _repr_within(value: Any, limit: int) -> bool:
    """Whether ``repr(value)`` may be at most ``limit`` characters long (a lower bound of its length is): a value
    longer than the message cannot be quoted in it, and writing a megabyte of arguments to find that out would cost
    more than the check. Work stops once the bound passes ``limit``."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            limit -= len(v) + 2
        elif isinstance(v, dict):
            limit -= 4 * len(v) if v else 2   # "{", "}" and "k: v, " but the last ", "
            if limit >= 0:
                stack.extend(v.keys())
                stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            limit -= 2 * len(v) if v else 2   # "[", "]" and "v, " but the last ", "
            if limit >= 0:
                stack.extend(v)
        else:
            limit -= 1
        if limit < 0:
            return False
    return True


def undeclared_keys(schema: Any, arguments: Any) -> list[str]:
    """Top-level argument keys the schema does not declare although it lists its parameters (in ``properties``,
    its own or those of a subschema applied to the arguments themselves: ``allOf``/``anyOf``/``oneOf``,
    ``if``/``then``/``else``, ``dependentSchemas``, and a ``$ref`` to a definition of the schema).

    Reported only where the schema leaves extra keys allowed by default (``additionalProperties`` absent, and
    ``unevaluatedProperties`` too in drafts that have it): with ``false`` an extra key breaks the schema itself
    (``arguments.schema``); with ``true`` or a schema, or a matching ``patternProperties`` pattern, the tool
    declares that it takes other keys. A schema without ``properties`` declares nothing, so nothing is
    undeclared; one that is a ``$ref`` to a definition of its own (``{"$ref": "#/definitions/Args", "definitions":
    ...}``, as zod-to-json-schema writes a named schema) is that definition.
    """
    if not (isinstance(schema, dict) and isinstance(arguments, dict)):
        return []
    chain = _root_references(schema)
    if not isinstance(chain[-1].get("properties"), dict):
        return []
    if any("additionalProperties" in part or ("unevaluatedProperties" in part and _has_unevaluated(schema))
           for part in chain):
        return []
    properties: set = set()
    patterns: list[str] = []
    for part in _applied_in_place(schema):  # (from the root: its $ref leads to the definition)
        properties.update(part.get("properties") if isinstance(part.get("properties"), dict) else ())
        pattern_map = part.get("patternProperties")  # (not an object in a broken schema: tool.invalid_schema says so)
        patterns += [p for p in pattern_map if isinstance(p, str)] if isinstance(pattern_map, dict) else []
    return [key for key in arguments if key not in properties and not any(_matches(p, key) for p in patterns)]


# Keywords whose subschemas apply to the arguments object itself: a parameter one of them declares (a oneOf
# alternative, an if/then) is one the tool reads. ``not`` is left out: what it lists is what the tool refuses.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONES = ("if", "then", "else")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")  # (draft-07 dependencies may also list names: skipped)


def _root_references(schema: dict) -> list[dict]:
    """``schema``, then, while the last of them lists no ``properties``, what its ``$ref`` points to inside
    ``schema`` (each once: references that loop end): the schemas the arguments' own keys are declared by."""
    chain = [schema]
    while not isinstance(chain[-1].get("properties"), dict) and isinstance(chain[-1].get("$ref"), str):
        target = _pointer_target(schema, chain[-1]["$ref"])
        if not isinstance(target, dict) or any(target is part for part in chain):
            break
        chain.append(target)
    return chain


def _applied_in_place(schema: dict) -> Iterator[dict]:
    """``schema`` and every subschema applied to the same value through the keywords above, or through a ``$ref``
    to a JSON pointer inside ``schema`` (``{"allOf": [{"$ref": "#/$defs/paging"}]}``: the tool reads the
    parameters the definition lists). Each once, so references that loop end."""
    stack, seen = [schema], set()
    while stack:
        part = stack.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        yield part
        subs = [sub for key in _IN_PLACE_LISTS if isinstance(part.get(key), list) for sub in part[key]]
        subs += [part[key] for key in _IN_PLACE_ONES if key in part]
        subs += [sub for key in _IN_PLACE_MAPS if isinstance(part.get(key), dict) for sub in part[key].values()]
        if isinstance(part.get("$ref"), str):
            subs.append(_pointer_target(schema, part["$ref"]))
        stack += [sub for sub in subs if isinstance(sub, dict)]


def _pointer_target(schema: dict, reference: str) -> Any:
    """What a ``$ref`` that is a JSON pointer into ``schema`` (``#``, ``#/$defs/a~1b``) points to; None for any
    other reference (an anchor, another document: its keys are not looked up) or one that points nowhere."""
    if reference != "#" and not reference.startswith("#/"):
        return None
    target: Any = schema
    for token in reference[2:].split("/") if reference != "#" else ():
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            return None
    return target


def _has_unevaluated(schema: dict) -> bool:
    """Whether the schema's draft has ``unevaluatedProperties`` (2019-09 and later), which then says what other
    keys are taken as ``additionalProperties`` does (draft-07 ignores the keyword, and so do we)."""
    return "unevaluatedProperties" in draft_of(schema)[0].VALIDATORS


def _matches(pattern: str, key: str) -> bool:
    """Whether ``pattern`` matches ``key``; a pattern that runs out of time counts as matching, so a key it
    could not check (``arguments.unchecked``) is not also called undeclared."""
    try:
        return _search(pattern, key) is not False
    except regex.error:
        return False


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def type_name(value: Any) -> str:
    """A value's JSON type as messages name it (``object``, ``array``, ``null``...)."""
    return json_kind(value)
