"""Exact JSON text: values written and read back bit for bit.

``datasets.Json()`` encodes floats with 10 significant digits, decodes with a parser that is one ULP off
for about a third of doubles, and takes JSON-looking strings (``"123"``) for JSON. This module is the
exact text path used everywhere in the package: :func:`dumps` / :func:`loads`, orjson text, bit-exact for
every value JSON can hold, with a stdlib fallback for integers beyond 64 bits (orjson refuses to write them
and reads them as floats). The Arrow side is built on it: :mod:`.exact_features` (decoding ``Json`` columns),
:mod:`.arrow_rows` (Python rows -> Arrow tables) and :mod:`.datasets_patches` (exact features kept through
datasets' operations).

Policy for values JSON cannot hold exactly (documented in the README, tested in tests/test_codec.py):
NaN and +/-Infinity are refused with :class:`~tooluse_datasets.errors.JsonValueError` (orjson would
silently write ``null``); integers of any size are kept exactly; a ``uuid.UUID`` is written as its text and
an enum member as its value (orjson's rule, on both paths); non-string dict keys, sets, bytes and other
non-JSON objects are refused with the same error.
"""
from __future__ import annotations

import ast
import enum
import json
import math
import re
import sys
import uuid
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii
from typing import Any, Callable

import orjson

from .errors import InvalidJsonError, JsonValueError

_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1

# Text that holds integers beyond 64 bits is written by the stdlib with one leading space: whitespace JSON
# ignores (so every JSON reader still reads it), and a one-character test for our decoders, which would
# otherwise have to scan every value for numbers orjson reads as floats.
BIG_INT_MARK = " "

# Containers orjson writes nested (it reads up to 1024): deeper values are refused by every writer here.
MAX_DEPTH = 254
_TOO_DEEP = f"value nests more than {MAX_DEPTH} levels deep, too deep to store as JSON text"


# orjson writes dates, times and dataclasses as JSON of its own choosing; they are not JSON values, and the
# stdlib path (integers beyond 64 bits) refuses them too. (Readers turn Parquet dates into text first.)
_REFUSE_OBJECTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


# orjson writes a UUID as its canonical text (as Parquet UUIDs are read) and an enum member as its value: both
# are the value exactly, and refusing them would take a walk of every value, about 4x orjson's own time. The
# stdlib path writes them the same way, so a value is written alike with or without an integer beyond 64 bits.
def _is_orjson_enum(item: Any) -> bool:
    return type(type(item)) is enum.EnumMeta  # orjson's test: a member of an enum made by the standard metaclass


def _write_as_orjson(item: Any) -> Any:
    if type(item) is uuid.UUID:  # orjson takes no subclass of UUID
        return str(item)
    if _is_orjson_enum(item):
        return item.value
    raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")


def dumps(value: Any) -> str:
    """Serialize ``value`` to compact JSON text that :func:`loads` turns back into an identical value.

    Raises :class:`JsonValueError` for values JSON cannot hold exactly (NaN, infinities, non-string
    keys, non-JSON types).
    """
    try:
        data = orjson.dumps(value, option=_REFUSE_OBJECTS)
    except orjson.JSONEncodeError as exc:
        if "Recursion limit" in str(exc):
            raise JsonValueError(_TOO_DEEP) from None
        if "64-bit" not in str(exc):
            _check_json_value(value, "$")  # names where (orjson's error does not: "Type is not JSON serializable")
            raise JsonValueError(f"value is not JSON-serializable: {exc}") from None
        # Integers beyond 64 bits: the stdlib writes them exactly, but it would also stringify non-string
        # keys that orjson refuses, so check the whole value first.
        _check_json_value(value, "$")
        try:
            text = BIG_INT_MARK + json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                                                  allow_nan=False, default=_write_as_orjson)
        except ValueError as exc:  # Python writes no integer text longer than sys.get_int_max_str_digits()
            raise JsonValueError(f"an integer is too long to write as text ({_digit_limit_reason(exc)})") from None
        # The stdlib writes a lone surrogate (a string or key that is not UTF-8 text) as it is, which orjson
        # refuses: refused here too, as the value without the big integer would be, not left to fail later
        # where the text is stored or read.
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise JsonValueError("value is not JSON-serializable: a string holds a lone surrogate "
                                     "(not UTF-8 text)") from None
        return text
    if b"null" in data and (b":null" in data or b",null" in data or b"[null" in data or data == b"null") \
            and _has_non_finite(value):
        # orjson writes NaN and infinities as null: refuse them instead of changing the value. (Only a
        # null *value* can be one; "nullable" keys and strings do not trigger the walk.)
        _check_json_value(value, "$")
    return data.decode()


def dumps_parsed(value: Any) -> str:
    """:func:`dumps` for a value read from JSON text (so its numbers are finite and its keys strings): the
    same text, without looking for NaN."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return dumps(value)  # integers beyond 64 bits, or nesting deeper than orjson writes (named there)


def may_nest_deep(text: str) -> bool:
    """Whether a value read from JSON ``text`` could nest :data:`MAX_DEPTH` deep (orjson reads up to 1,024
    levels), i.e. whether the text holds that many brackets (counted only in texts long enough to)."""
    return len(text) >= 2 * MAX_DEPTH and text.count("{") + text.count("[") >= MAX_DEPTH


def json_bytes(value: Any) -> bytes:
    """Compact JSON of ``value`` for comparing values exactly (Python's ``==`` takes ``1 == 1.0 == True`` and
    ignores key order, JSON text does not). Not a storage format: NaN is not refused here."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return dumps(value).encode()


def _has_non_finite(value: Any) -> bool:
    """True if a float under ``value`` is NaN or infinite (the cheap walk; :func:`_check_json_value` names it)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or item is None or kind is int or kind is bool:  # most leaves: not the subclass tests below
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is float:
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):  # subclasses, which orjson also writes
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return True
        elif _is_orjson_enum(item):  # written as its value, which may be NaN
            stack.append(item.value)
    return False


# An integer literal beyond 64 bits has at least 19 digits in a row. Short texts are screened for such a run
# by mapping every byte to "1" (an ASCII digit) or "0" and searching (C speed, ~5x a regex's); long ones by
# walking the parsed values, whose cost follows the number of values rather than the text's length.
_DIGIT_MAP = bytes(49 if 48 <= b <= 57 else 48 for b in range(256))
_DIGIT_RUN = b"1" * 19
_SHORT_TEXT = 4096


def has_digit_run(text: str | bytes) -> bool:
    """True if ``text`` holds 19 ASCII digits in a row (the shortest literal orjson may read inexactly)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return _DIGIT_RUN in data.translate(_DIGIT_MAP)


def loads(text: str | bytes) -> Any:
    """Parse any JSON text exactly: orjson, re-read with the stdlib if orjson may have turned an integer
    beyond 64 bits into a float. Raises ``ValueError`` (orjson's or :class:`JsonValueError`) on bad input,
    including values nested too deeply to read."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "number is infinity" not in str(exc):
            raise
        # An integer literal beyond a double's range (309+ digits), which orjson refuses: the stdlib reads
        # it, and its strings are then held to orjson's rule (no lone surrogates).
        value = _stdlib_loads(text)
        _refuse_lone_surrogates(value)
        return value
    if len(text) <= _SHORT_TEXT and not has_digit_run(text):
        return value
    if may_hold_big_int(value):
        value = _stdlib_loads(text)
    return value


def _stdlib_loads(text: str | bytes) -> Any:
    """The stdlib's exact reading (integers of any size), refusing what orjson refuses: NaN and Infinity
    literals, and float literals beyond a double's range."""
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise JsonValueError("JSON nests values too deeply to read exactly") from None
    except ValueError as exc:
        if isinstance(exc, JsonValueError) or "integer string conversion" not in str(exc):
            raise
        raise JsonValueError(f"an integer is too long to read from text ({_digit_limit_reason(exc)})") from None


def _digit_limit_reason(exc: ValueError) -> str:
    """Python's limit on integer text (``sys.get_int_max_str_digits()``), said without its advice to raise it:
    a library must not change that process-wide setting."""
    limit = sys.get_int_max_str_digits()
    digits = re.search(r"value has (\d+) digits", str(exc))
    if digits:
        return f"{int(digits.group(1)):,} digits; Python reads and writes at most {limit:,}"
    return f"more than {limit:,} digits, the most Python reads and writes"


def _refuse_lone_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise JsonValueError("string holds a lone surrogate (not UTF-8 text)") from None


def _refuse_constant(name: str) -> Any:
    raise JsonValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise JsonValueError(f"number {literal[:40]} is beyond the range of a double")
    return value


def _python_json_writer(ensure_ascii: bool, check_circular: bool) -> Callable[[Any], str]:
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, check_circular=check_circular)
    if c_make_encoder is None or check_circular:  # no C accelerator; a cycle check needs fresh markers per call
        return encoder.encode
    # JSONEncoder.encode builds its C encoder on every call: a third of the time on call-sized values.
    escape = encode_basestring_ascii if ensure_ascii else encode_basestring
    write = c_make_encoder(None, encoder.default, escape, None, ": ", ", ", False, False, True)
    return lambda value: "".join(write(value, 0))


_PYTHON_JSON_WRITERS = {(ascii_only, checked): _python_json_writer(ascii_only, checked)
                        for ascii_only in (False, True) for checked in (False, True)}


def python_json_text(value: Any, ensure_ascii: bool = False, *, check_circular: bool = False) -> str:
    """``json.dumps(value, ensure_ascii=ensure_ascii)``, the spelling upstream rows are written in, to compare
    a row's text with or to write one. Without ``check_circular`` (the fast path) pass parsed JSON or a value
    :func:`dumps` accepted; with it a value that contains itself is json's ValueError."""
    return _PYTHON_JSON_WRITERS[ensure_ascii, check_circular](value)


def loads_stored(text: str | bytes) -> Any:
    """Parse text written by :func:`dumps` (our Arrow columns) or :func:`json_bytes`: only marked text needs
    the exact reader. The mark is not trusted further: marked text is read by :func:`loads`, held to every rule
    of unmarked text (no NaN, infinity or lone surrogate; too deep a value a typed error)."""
    if text[:1] in (BIG_INT_MARK, b" "):
        return loads(text)
    return orjson.loads(text)


def try_loads(text: str) -> tuple[bool, Any]:
    """``(True, value)`` if ``text`` is valid JSON, else ``(False, None)``; never raises."""
    try:
        return True, loads(text)
    except (orjson.JSONDecodeError, ValueError, TypeError, RecursionError):
        return False, None


def loads_json_or_literal(text: str) -> Any:
    """JSON text, or else a Python literal (``ast.literal_eval``: single quotes, ``True``, ``None``; never
    ``eval``), returned as JSON values (tuples become lists). Sources quote such text: NESTFUL's HF
    ``gold_answer`` is ``str()`` of a value, ms-swift accepts literal call arguments.

    Raises :class:`JsonValueError` if the text is JSON the exact reader refuses (``1e400``, a lone surrogate
    escape, an integer past Python's digit limit) or a literal holding what JSON cannot (sets, bytes, complex,
    NaN...), :class:`InvalidJsonError` if it is neither JSON nor a literal. Their messages say what the text is
    ("JSON that cannot be read exactly (...)", "a Python literal JSON cannot hold (...)").
    """
    try:
        return loads(text)
    except (orjson.JSONDecodeError, ValueError, TypeError, RecursionError) as exc:
        json_error = exc
    try:
        return loads(dumps(ast.literal_eval(text.strip())))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:  # JsonValueError included
        literal_error = exc
    # Text such as 1e400 or "\ud800" is JSON whatever Python makes of it (infinity, a lone surrogate, or nothing
    # when a `true` elsewhere is no Python literal): say what the JSON holds. Asked only where a reader got as far
    # as a value it refuses: plain text (most of NESTFUL's gold answers that are not JSON) is not parsed again.
    refused_a_value = any(isinstance(e, JsonValueError) for e in (json_error, literal_error))
    if (refused_a_value or "surrogate" in str(json_error)) and is_json_syntax(text):
        raise JsonValueError(f"JSON that cannot be read exactly ({json_reason(json_error)})") from None
    if isinstance(literal_error, JsonValueError):
        raise JsonValueError(f"a Python literal JSON cannot hold ({literal_error.message})") from None
    raise InvalidJsonError(f"neither JSON nor a Python literal (as JSON: {json_reason(json_error)})") from None


def json_reason(exc: BaseException) -> str:
    """Why :func:`loads` refused a text, in JSON's terms: the codec's own reason, or the parser's message and
    position (orjson's ``JSONDecodeError`` says it as the stdlib does: ``line 1 column 12 (char 11)``)."""
    if isinstance(exc, JsonValueError):
        return exc.message
    if isinstance(exc, RecursionError):
        return "values nested too deeply to read"
    return str(exc)[:200]


def is_json_syntax(text: str) -> bool:
    """Whether ``text`` is JSON as written, whatever it holds (a number beyond a double's range, a lone surrogate
    escape): the stdlib parser takes both. Text nesting deeper than :func:`loads` reads (1,024 levels) is not,
    whichever Python runs: the stdlib reads 1,100 levels on Python 3.12+, not on 3.11. Only asked of text
    already refused, so its cost does not matter."""
    try:
        json.loads(text, parse_constant=_refuse_constant, parse_int=len)
    except (ValueError, RecursionError):
        return False
    return not _nests_deeper_than(text, _READ_DEPTH)


_READ_DEPTH = 1024  # orjson reads no deeper
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _nests_deeper_than(text: str, depth: int) -> bool:
    """Whether JSON ``text`` (valid) nests more than ``depth`` containers deep: its brackets outside strings."""
    if text.count("[") + text.count("{") <= depth:
        return False
    level = deepest = 0
    for bracket in re.findall(r"[][{}]", _JSON_STRING.sub("", text)):
        level += 1 if bracket in "[{" else -1
        deepest = max(deepest, level)
    return deepest > depth


def may_hold_big_int(value: Any) -> bool:
    """True if ``value`` holds a float that may be a rounded integer literal beyond 64 bits (a float
    literal such as 1e300 also matches: re-reading it with the stdlib gives the same float). Iterative:
    orjson reads values nested 1024 deep, past Python's recursion limit."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            # -2**63 itself is excluded: integers just below it round to float(-2**63).
            if not (_INT64_MIN < item <= _UINT64_MAX) and item.is_integer():
                return True
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


def _non_finite_name(number: float) -> str:
    """NaN or an infinity as the texts that write them name it (``NaN``, ``-Infinity``), not Python's ``nan``."""
    return "NaN" if math.isnan(number) else "Infinity" if number > 0 else "-Infinity"


def _check_json_value(value: Any, path: str) -> None:
    """Raise JsonValueError unless ``value`` is plain JSON: finite numbers, string keys, JSON types, at most
    :data:`MAX_DEPTH` containers deep (the limit orjson writes with, so that a value is refused the same
    whichever writer a :func:`dumps` call ends up using). Iterative, like :func:`may_hold_big_int`."""
    stack = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, float):
            if type(item) is not float:  # a numpy or other float subclass: orjson refuses it, so the stdlib path must
                raise JsonValueError(f"{type(item).__name__} at {where} is not a JSON value")
            if not math.isfinite(item):
                raise JsonValueError(f"{_non_finite_name(item)} at {where} cannot be stored as JSON (NaN and infinities "
                                     f"are refused)")
        elif isinstance(item, (dict, list, tuple)) and depth > MAX_DEPTH:
            raise JsonValueError(_TOO_DEEP)
        elif isinstance(item, dict):
            children = []
            for k, v in item.items():
                if not isinstance(k, str):
                    raise JsonValueError(f"key {k!r} at {where} is not a string; JSON keys are strings")
                children.append((v, f"{where}.{k}", depth + 1))
            stack.extend(reversed(children))  # depth first, in order: the first bad value is reported
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item)]))
        elif _is_orjson_enum(item):  # written as its value (see _write_as_orjson), held to the same rules
            stack.append((item.value, where, depth))
        elif not (item is None or type(item) is uuid.UUID or isinstance(item, (str, int, bool))):
            raise JsonValueError(f"{type(item).__name__} at {where} is not a JSON value")
