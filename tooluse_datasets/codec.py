"""Exact JSON for Arrow columns.

``datasets.Json()`` encodes floats with 10 significant digits, decodes with a parser that is one ULP off
for about a third of doubles, and takes JSON-looking strings (``"123"``) for JSON. This module is the
exact path used everywhere in the package:

* :func:`dumps` / :func:`loads`: orjson text, bit-exact for every value JSON can hold, with a stdlib
  fallback for integers beyond 64 bits (orjson refuses to write them and reads them as floats).
* :func:`rows_to_table`: Python rows -> an Arrow table of a ``Features`` schema, every ``Json`` leaf
  written as orjson text straight into a ``pa.json_()`` array (never through ``Json.encode_example``).
* :class:`ExactFeatures` / :class:`ExactJson`: a drop-in ``Features`` that decodes its JSON leaves with
  orjson through per-column compiled walkers (about 5x faster than datasets' recursive decoder on our
  rows, measured in ``benchmarks/``), installed metadata-only by :func:`tooluse_datasets.load`.

Policy for values JSON cannot hold exactly (documented in the README, tested in tests/test_codec.py):
NaN and +/-Infinity are refused with :class:`~tooluse_datasets.errors.JsonValueError` (orjson would
silently write ``null``); integers of any size are kept exactly; a ``uuid.UUID`` is written as its text and
an enum member as its value (orjson's rule, on both paths); non-string dict keys, sets, bytes and other
non-JSON objects are refused with the same error.
"""
from __future__ import annotations

import ast
import copy
import enum
import functools
import inspect
import json
import math
import re
import sys
import uuid
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii
from typing import Any, Callable, Optional

import numpy as np
import orjson
import pyarrow as pa
from datasets import Features, Json, LargeList, List
from datasets.features.features import cast_to_python_objects, encode_nested_example
from datasets.iterable_dataset import SelectColumnsIterable

from .arrow_memory import package_memory_pool
from .columnar import ColumnPlan, TableBuilder
from .errors import InvalidJsonError, JsonValueError
from .schema import MEDIA_COLUMNS, MESSAGE

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

    Raises :class:`InvalidJsonError` if the text is neither, :class:`JsonValueError` if the literal holds
    what JSON cannot (sets, bytes, complex, NaN...).
    """
    ok, value = try_loads(text)
    if ok:
        return value
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InvalidJsonError("text is neither JSON nor a Python literal") from None
    return loads(dumps(value))


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


def _check_json_value(value: Any, path: str) -> None:
    """Raise JsonValueError unless ``value`` is plain JSON: finite numbers, string keys, JSON types, at most
    :data:`MAX_DEPTH` containers deep (the limit orjson writes with, so that a value is refused the same
    whichever writer a :func:`dumps` call ends up using). Iterative, like :func:`may_hold_big_int`."""
    stack = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise JsonValueError(f"{item!r} at {where} cannot be stored as JSON (NaN and infinities are refused)")
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


# --------------------------------------------------------------------------------------------------
# Features: exact JSON leaves, compiled decoders
# --------------------------------------------------------------------------------------------------


@dataclass
class ExactJson(Json):
    """``Json`` whose decode is exact (orjson) and whose encode never rounds.

    It serializes as plain ``Json`` (same ``_type``), so files and cards written with it stay readable
    by any ``datasets>=4.7`` without this package.
    """

    _type: str = field(default="Json", init=False, repr=False)

    def __eq__(self, other):
        # The same column as a plain Json(): features compare equal, so datasets sees no cast to apply
        # between a builder's features and their exact version.
        return isinstance(other, Json) and other.decode == self.decode

    def __hash__(self):
        return hash(("Json", self.decode))

    def encode_example(self, example_data):
        if example_data is None:
            return None
        return dumps(example_data)

    def decode_example(self, example_data, token_per_repo_id=None):
        if not self.decode:
            raise RuntimeError("Decoding is disabled for this feature. Please use Json(decode=True) instead.")
        return _decode_stored(example_data)


def _exact_json_encode_field(example: Any, json_field_path: list) -> Any:
    """datasets' ``json_encode_field`` (how its Arrow writer stores Python values of a ``Json`` column: what
    ``map`` writes back), with each value written exactly (:func:`_stored_value`) instead of by pandas' ujson,
    which keeps 10 significant digits (``0.30000000000000004`` became ``0.3``) and cannot read or write integers
    beyond 64 bits. Text follows datasets' rule, JSON text stored as it is (read by :func:`loads`, so that text
    holding such an integer is not taken for a plain string and quoted)."""
    if json_field_path:
        key, *rest = json_field_path
        if example is None:
            return None
        if key == 0:
            return [_exact_json_encode_field(x, rest) for x in example]
        return {**example, key: _exact_json_encode_field(example.get(key), rest)}
    if example is None:
        return None
    if isinstance(example, str):
        return _stored_json_text(example)
    return _stored_value(example)


def _stored_json_text(text: str) -> str:
    """A str given for a Json value, as datasets stores it (JSON text as it is, other text as a JSON string),
    except that JSON text that may hold an integer beyond 64 bits is written anew by :func:`dumps`, whose
    mark makes every reader of ours take the exact path."""
    try:
        value = loads(text)
    except (ValueError, TypeError):
        return dumps(text)
    return dumps(value) if text[:1] != BIG_INT_MARK and has_digit_run(text) else text


def _exact_cast_storage(self: Json, storage: pa.Array) -> pa.Array:
    """datasets' ``Json.cast_storage`` (its writer's last step for a Json column: what ``map`` writes back), with
    text read by :func:`loads` and values written by :func:`dumps`. Its own uses pandas' ujson, which reads no
    integer beyond 64 bits (so it took JSON text holding one for a plain string and quoted it) and writes
    floats with 10 significant digits."""
    from datasets.table import array_cast

    if isinstance(storage, pa.JsonArray):
        return storage
    if pa.types.is_string(storage.type) or pa.types.is_large_string(storage.type) or \
            pa.types.is_string_view(storage.type):
        # datasets' rule: text whose first values are JSON is JSON text, else every value is a string
        if all(item is None or _is_json_text(item) for item in storage[:5].to_pylist()):
            texts = storage.to_pylist()
            marked = [None if t is None else _marked_if_big(t) for t in texts]
            if marked != texts:
                storage = pa.array(marked, pa.string())
            return array_cast(storage, self.pa_type)
    encoded = pa.array([None if x is None else _stored_value(x) for x in storage.to_pylist()], pa.json_())
    return array_cast(encoded, self.pa_type)


def _marked_if_big(text: str) -> str:
    """JSON text as it is, unless it may hold an integer beyond 64 bits: then written anew by :func:`dumps`
    (marked for the exact path). Text that is not JSON stays as datasets keeps it."""
    if text[:1] == BIG_INT_MARK or not has_digit_run(text):
        return text
    try:
        return dumps(loads(text))
    except (ValueError, TypeError):
        return text


def _stored_value(value: Any) -> str:
    """One Python value as datasets' writer stores it, exactly: orjson's text (NaN and infinities as null, as
    datasets' own writer has them, without looking for them first), :func:`dumps`'s for integers beyond 64 bits
    (marked), datasets' own for what neither writes (non-string keys, numpy values...)."""
    try:
        return orjson.dumps(value, option=_REFUSE_OBJECTS).decode()
    except orjson.JSONEncodeError:
        pass
    try:
        return dumps(value)
    except JsonValueError:
        from datasets.utils.json import ujson_dumps

        return ujson_dumps(value)


def _exact_decode_example(self: Json, example_data: Any, token_per_repo_id: Any = None) -> Any:
    """datasets' ``Json.decode_example`` (a plain Json column: a ``load_from_disk``, ``to_list``, a map output)
    read by :func:`loads_stored`. Its own uses pandas' ujson: 0.3 came back one ULP off, and JSON text holding
    an integer beyond 64 bits raised "Value is too big!". Text our reader refuses (NaN...) goes its way."""
    if not self.decode or example_data is None:
        return _DATASETS_WRITER["decode_example"](self, example_data, token_per_repo_id)
    try:
        # loads, not loads_stored: text written by others has no mark, and may hold integers beyond 64 bits
        return loads(_stored_text(example_data))
    except (ValueError, TypeError):
        return _DATASETS_WRITER["decode_example"](self, example_data, token_per_repo_id)


def _exact_encode_example(self: Json, example_data: Any) -> Any:
    """datasets' ``Json.encode_example`` (how ``Features.encode_example``/``encode_batch`` store a Python value of a
    plain ``Json()`` column: ``Dataset.from_list``, ``from_dict`` and ``from_generator`` with features, ``add_item``),
    by the rules of :func:`_exact_json_encode_field`. Its own uses pandas' ujson: 10 significant digits
    (``3.141592653589793`` became ``3.1415926536``, ``-0.0`` became ``0.0``), and no integer beyond 64 bits."""
    return _exact_json_encode_field(example_data, [])


def _is_json_text(text: str) -> bool:
    try:
        loads(text)
    except (ValueError, TypeError):
        return False
    return True


def _install_exact_writer() -> dict[str, Callable]:
    """Make datasets' Arrow writer store Json values exactly, once per process (importing this package):
    :func:`_exact_json_encode_field` and :func:`_exact_cast_storage` replace its two lossy steps, and
    :func:`_exact_encode_example` the encoding of Python values by ``Features`` (``Dataset.from_list``...). Features do
    not reach them (the writer rebuilds its Json features from the Arrow schema), hence the replacement.
    Returns datasets' own functions; a datasets without them is left as it is."""
    import datasets.arrow_writer as arrow_writer

    if getattr(arrow_writer, "json_encode_field", None) is _exact_json_encode_field:
        return _DATASETS_WRITER
    originals = {"json_encode_field": getattr(arrow_writer, "json_encode_field", None),
                 "cast_storage": getattr(Json, "cast_storage", None),
                 "encode_example": getattr(Json, "encode_example", None),
                 "decode_example": getattr(Json, "decode_example", None)}
    if originals["json_encode_field"] is not None:
        arrow_writer.json_encode_field = _exact_json_encode_field
    if originals["cast_storage"] is not None:
        Json.cast_storage = _exact_cast_storage
    if originals["encode_example"] is not None:
        Json.encode_example = _exact_encode_example
    if originals["decode_example"] is not None:
        Json.decode_example = _exact_decode_example
    return originals


_DATASETS_WRITER: dict[str, Callable] = {}
_DATASETS_WRITER.update(_install_exact_writer())


def _decode_stored(value: Any) -> Any:
    """One stored JSON leaf (text, or None), as :func:`loads_stored` reads it, also when it comes as numpy text."""
    if value is None:
        return None
    try:
        return loads_stored(value)
    except JsonValueError:  # JSON text holding what JSON values cannot (1e400): named as it is
        raise
    # orjson takes exact str/bytes only, not numpy.str_: retried as such. (A dict is a KeyError from Python 3.12 on,
    # where slices hash: loads_stored's text[:1] looks the slice up as a key.)
    except (ValueError, TypeError, KeyError):
        text = _stored_text(value)
    try:
        return loads_stored(text)
    except JsonValueError:
        raise
    except ValueError as exc:  # not JSON (text edited or written by others): named like _decode_foreign names it
        raise InvalidJsonError(f"stored text is not JSON ({str(exc)[:120]})") from None


def _decode_foreign(value: Any) -> Any:
    """One JSON leaf whose text may come from another writer, read by :func:`loads`: exact whether or not it is
    marked (an unmarked integer beyond 64 bits is not read as a float); text that is not JSON (``NaN``, ``1e400``,
    a truncated value) is an :class:`InvalidJsonError` or :class:`JsonValueError`, not orjson's bare error."""
    if value is None:
        return None
    text = value if type(value) is str or type(value) is bytes else _stored_text(value)
    try:
        return loads(text)
    except JsonValueError:
        raise
    except (ValueError, TypeError) as exc:
        raise InvalidJsonError(f"stored text is not JSON ({str(exc)[:120]})") from None


def _stored_text(value: Any) -> str | bytes:
    """The str or bytes of stored JSON text handed over as a numpy value (``numpy.str_``/``bytes_``, 0-d array)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return _stored_text(value.item())
    raise InvalidJsonError(f"a stored JSON value is {type(value).__name__}, not JSON text")


Decoder = Callable[[Any], Any]

# Values datasets' python formatter hands the decoders a column as. Anything else comes from the numpy extractor
# behind its numpy, torch, jax and tf formatters (object arrays, numpy.str_), or is a struct column's dict, which
# the numpy decoders decode to the same values (the lists under it copied).
_PYTHON_VALUES = frozenset({list, str, type(None)})


def _compile_decoder(feature: Any, from_numpy: bool = False, foreign: bool = False) -> Optional[Decoder]:
    """A function decoding one stored value of ``feature`` in place, or None if nothing to decode.

    ``from_numpy``: for values of datasets' numpy extractor (lists as object arrays, text as ``numpy.str_``),
    decoded into the shape datasets' own decoding gives a plain ``Json()`` column there: every list under a
    decoded column becomes a Python list, as the rows of the python format have it.

    ``foreign``: the JSON text may have been written by others (no mark on text holding integers beyond 64
    bits), so every text is read by :func:`_decode_foreign`."""
    if isinstance(feature, Json):
        return (_decode_foreign if foreign else _decode_stored) if feature.decode else None
    if isinstance(feature, (List, LargeList)):
        inner = _compile_decoder(feature.feature, from_numpy, foreign)
        if inner is None:
            return (lambda v: None if v is None else list(v)) if from_numpy else None
        return lambda v: None if v is None else [inner(x) for x in v]
    if isinstance(feature, dict):
        subs = [(k, d) for k, f in feature.items() if (d := _compile_decoder(f, from_numpy, foreign)) is not None]
        if not subs:
            return None

        def decode_struct(v):
            if v is not None:
                for key, decode in subs:
                    v[key] = decode(v[key])
            return v

        return decode_struct
    if hasattr(feature, "decode_example") and getattr(feature, "decode", True):
        # Image, Audio, ...: defer to the feature itself.
        return lambda v: None if v is None else feature.decode_example(v)
    return None


def _exact_leaves(feature: Any) -> Any:
    if isinstance(feature, Json):
        return ExactJson(decode=feature.decode)
    if isinstance(feature, List):
        return List(_exact_leaves(feature.feature), length=feature.length)
    if isinstance(feature, LargeList):
        return LargeList(_exact_leaves(feature.feature))
    if isinstance(feature, dict):
        return {k: _exact_leaves(v) for k, v in feature.items()}
    return feature


class ExactFeatures(Features):
    """``Features`` that decode their JSON leaves exactly and fast.

    datasets calls ``Features.decode_example/decode_column/decode_batch`` when it formats rows (map-style
    and streaming alike); these overrides walk precompiled paths to the JSON leaves instead of datasets'
    generic recursion. Under the tensor formats (``with_format("numpy")``, torch, jax, tensorflow) datasets
    hands them numpy values, which they decode to the same exact values, in the shape datasets' own decoding
    gives a plain ``Json()`` column there. The subclass survives ``copy``, ``reorder_fields_as`` and pickling,
    so ``shuffle``, ``select``, ``filter`` and ``to_iterable_dataset`` keep it (``select_columns``, ``rename_column(s)``,
    ``flatten_indices`` and a map-style ``map`` through the wrappers installed below); where datasets builds fresh
    ``Features`` otherwise, the ``ExactJson`` leaves still decode exactly.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in list(self):
            dict.__setitem__(self, name, _exact_leaves(self[name]))
        foreign = self.foreign_text
        self._decoders = {name: d for name, f in self.items() if (d := _compile_decoder(f, foreign=foreign)) is not None}
        self._numpy_decoders = {name: _compile_decoder(self[name], from_numpy=True, foreign=foreign)
                                for name in self._decoders}
        # Unified rows (and the swift format's messages) decode in the shape chat templates and TRL expect (see
        # _chat_shape). Messages are known by their type, not their name: renamed ("conversation"), they decode as
        # they did under "messages".
        self.chat_columns = tuple(name for name, f in self.items() if _is_chat_messages(f))
        self.omitted_empty_media: tuple[str, ...] = ()
        for name in self.chat_columns:
            for decoders in (self._decoders, self._numpy_decoders):
                decoders[name] = _chat_shape(decoders.get(name))
        if any(_is_unified_messages(self[name]) for name in self.chat_columns):
            self.omitted_empty_media = tuple(c for c in MEDIA_COLUMNS if c in self)
        # (column, decoder of python values, decoder of numpy values): one tuple per decoded column, for the loops
        self._column_decoders = [(n, d, self._numpy_decoders[n]) for n, d in self._decoders.items()]
        self._json_columns = frozenset(name for name, f in self.items() if _holds_json(f))

    # Whether the JSON text may come from writers other than this package's (see ForeignExactFeatures).
    foreign_text = False

    def __reduce__(self):
        return type(self), (dict(self),)

    def copy(self) -> "ExactFeatures":
        return type(self)(super().copy())

    def reorder_fields_as(self, other: Features) -> "ExactFeatures":
        return type(self)(super().reorder_fields_as(other))

    # Decoded rows are encoded again where a stream hands them on through its features (a rename, a typed map).
    # datasets encodes a list only when encoding its first non-empty element changes it: messages whose first
    # message holds no JSON value went on unencoded, the arguments of later calls still decoded, and decoding
    # them again failed. Columns holding JSON values
    # are encoded element by element.

    def encode_example(self, example: dict) -> dict:
        example = cast_to_python_objects(example)
        # A decoded unified row has no media keys where it has no media: an absent media column is empty.
        return {name: self._encode(name, example.get(name, [] if name in self.omitted_empty_media else None))
                for name in self}

    def encode_column(self, column: list, column_name: str) -> list:
        return [self._encode(column_name, value) for value in cast_to_python_objects(column)]

    def encode_batch(self, batch: dict) -> dict:
        if set(batch) != set(self):
            raise ValueError(f"Column mismatch between batch {set(batch)} and features {set(self)}")
        return {name: self.encode_column(column, name) for name, column in batch.items()}

    def _encode(self, name: str, value: Any) -> Any:
        if name in self._json_columns:
            try:
                return _encode_whole(self[name], value)
            except JsonValueError as exc:
                raise exc.at(field=name) from None
        return encode_nested_example(self[name], value, level=1)

    # Rows, columns and batches come as Python values (python format) or numpy ones (the tensor formats); the
    # python ones take the fast decoders, chosen by one type test per column.

    def decode_example(self, example: dict, token_per_repo_id=None) -> dict:
        for name, decode, decode_numpy in self._column_decoders:
            if name in example:
                value = example[name]
                try:
                    example[name] = decode(value) if type(value) in _PYTHON_VALUES else decode_numpy(value)
                except (InvalidJsonError, JsonValueError) as exc:
                    raise exc.at(field=name) from None
        if self.omitted_empty_media and self._holds_messages(example):
            # A row without media has no media keys: TRL takes a row with an "images" key for vision data.
            for name in self.omitted_empty_media:
                if name in example and ((value := example[name]) is None or len(value) == 0):  # lists or arrays
                    del example[name]
        return example

    def decode_column(self, column: list, column_name: str, token_per_repo_id=None) -> list:
        if column_name not in self._decoders:
            return column
        decode = self._decoders[column_name] if type(column) is list else self._numpy_decoders[column_name]
        try:
            return [decode(v) for v in column]
        except (InvalidJsonError, JsonValueError) as exc:
            raise exc.at(field=column_name) from None

    def decode_batch(self, batch: dict, token_per_repo_id=None) -> dict:
        for name, decode, decode_numpy in self._column_decoders:
            if name in batch:
                column = batch[name]
                if type(column) is not list:
                    decode = decode_numpy
                try:
                    batch[name] = [decode(v) for v in column]
                except (InvalidJsonError, JsonValueError) as exc:
                    raise exc.at(field=name) from None
        if self.omitted_empty_media and self._holds_messages(batch):
            # Streaming rows are cut from decoded batches: a media column empty in the whole batch goes.
            for name in self.omitted_empty_media:
                if name in batch and all(_is_empty(v) for v in batch[name]):
                    del batch[name]
        return batch

    def chat_shapers(self) -> list[tuple[str, Decoder]]:
        """``(column, shape)`` for each chat column: ``shape`` gives that column's messages, as a converter builds
        them (Python values, JSON leaves already decoded), the chat shape decoding their stored form gives."""
        shape = _chat_shape(None)  # nothing left to decode: only the shape
        return [(name, shape) for name in self.chat_columns]

    def _holds_messages(self, example: dict) -> bool:
        """Whether a row (or batch) read holds the conversation, so that its empty media columns go. Read without
        it, as the columns a function asked for (``map(..., input_columns=["images"])``, a format's ``columns=``),
        its media columns stay, ``[]`` where empty: datasets takes each column asked for from the row."""
        return any(name in example for name in self.chat_columns)


def _holds_json(feature: Any) -> bool:
    if isinstance(feature, Json):
        return True
    if isinstance(feature, (List, LargeList)):
        return _holds_json(feature.feature)
    if isinstance(feature, dict):
        return any(_holds_json(f) for f in feature.values())
    return False


def _encode_whole(feature: Any, value: Any) -> Any:
    """datasets' ``encode_nested_example`` without its shortcut: every element of every list is encoded."""
    if value is None:
        return None
    if isinstance(feature, dict):
        # an absent key means empty (decoded messages leave empty keys out): [] for a list, as RowEncoder writes it
        return {key: _encode_whole(f, value.get(key, [] if isinstance(f, (List, LargeList)) else None))
                for key, f in feature.items()}
    if isinstance(feature, (List, LargeList)):
        return [_encode_whole(feature.feature, v) for v in value]
    if hasattr(feature, "encode_example"):
        return feature.encode_example(value)
    return value


class ForeignExactFeatures(ExactFeatures):
    """:class:`ExactFeatures` for JSON text this package may not have written (``td.exact`` of any dataset: a
    Parquet file from DuckDB or Polars, someone's ``json`` column). Such text does not mark integers beyond 64
    bits with a leading space, so each text is read by :func:`loads` (which finds them) instead of trusting
    the mark: a little slower, never a rounded integer."""

    foreign_text = True


def patched_once(original: Callable, patch: Callable, mark: str) -> Callable:
    """``patch``, a replacement for datasets' ``original`` that calls it, as it is installed: with ``original``'s
    name and doc, ``__wrapped__`` set to it (``functools.wraps``), and marked ``mark``; ``original`` itself when it
    is that patch already (the module installing it reloaded), so each patch wraps datasets' function once."""
    if getattr(original, mark, False):
        return original
    functools.wraps(original)(patch)
    setattr(patch, mark, True)
    return patch


def _keeping_exact_features(original: Callable, keep: Callable[..., None]) -> Callable:
    """datasets' ``original`` followed by ``keep(result, *args)``, which puts exact features back on the result
    where datasets rebuilt plain ones."""
    def keeping(*args, **kwargs):
        out = original(*args, **kwargs)
        keep(out, *args)
        return out

    return patched_once(original, keeping, "_keeps_exact_features")


def _install_merged_info_features() -> None:
    """``datasets.concatenate_datasets`` / ``interleave_datasets`` of map-style datasets merge their infos with
    ``DatasetInfo.from_merge``, which drops the features of infos that differ in anything (every source's
    description does), so a mix of ``td.load`` results would fall back to plain ``Features``: its rows would come
    back with every key (``tool_calls: []``, ``images: []``: TRL takes such a mix for vision data). Where every merged info has
    equal :class:`ExactFeatures`, the merged info keeps them (foreign if any of them is). Installed once per
    process on import, like the exact writer above; other merges are datasets' own."""
    from datasets.info import DatasetInfo

    def keep(merged, cls, dataset_infos):
        if merged.features is None:
            merged.features = _merged_exact_features([info.features for info in dataset_infos if info is not None])

    DatasetInfo.from_merge = classmethod(_keeping_exact_features(DatasetInfo.from_merge.__func__, keep))


def _merged_exact_features(given: list) -> Optional["ExactFeatures"]:
    """The :class:`ExactFeatures` a mix of datasets with these features keeps: where every member has equal
    ``ExactFeatures`` (foreign if any of them is), else None."""
    if not given or not all(isinstance(f, ExactFeatures) for f in given) or any(f != given[0] for f in given[1:]):
        return None
    foreign = any(f.foreign_text for f in given)
    return (ForeignExactFeatures if foreign else ExactFeatures)(copy.deepcopy(dict(given[0])))


def _install_mixed_stream_features() -> None:
    """``concatenate_datasets`` / ``interleave_datasets`` of streams set the mix's features to a plain
    ``Features`` rebuilt from the members' (not through ``DatasetInfo.from_merge``). Iterating the mix reads the
    members' rows as they are, but every ``map``, ``filter`` or format of it (TRL's own tokenizing ``map``)
    decodes through the mix's features: its rows came back with every key (``images: []``, ``tool_calls: []``,
    ``reasoning_content: None``), so TRL took a filtered mix for vision data and Hermes-3 rendered each plain
    answer as an empty call turn. Where every member has equal :class:`ExactFeatures` and the mix has the same
    columns, the mix keeps them (as map-style mixes do above). Installed once per process on import."""
    from datasets import combine, iterable_dataset

    def keep(out, dsets, *args):
        # (a member without features, a mapped stream, is mixed with the features resolved for it below)
        exact = _merged_exact_features([d.features if d.features is not None else
                                        getattr(d, "_resolved_exact_features", None) for d in dsets])
        if exact is not None and out.features is not None and dict(out.features) == dict(exact):
            out._info.features = exact

    for name in ("_concatenate_iterable_datasets", "_interleave_iterable_datasets"):
        if getattr(iterable_dataset, name, None) is None:
            continue  # a datasets without it: left as it is
        wrapped = _keeping_exact_features(getattr(iterable_dataset, name), keep)
        setattr(iterable_dataset, name, wrapped)
        if hasattr(combine, name):
            setattr(combine, name, wrapped)


def _install_stream_features_resolved_from_exact_ones() -> None:
    """A stream's ``map`` (without ``features=``) has no features, and ``interleave_datasets``,
    ``concatenate_datasets`` and ``push_to_hub`` infer them from its first rows with pyarrow's inference, which
    fails on unified rows (arguments of differing types: ``ArrowInvalid: Could not convert '$var_1.result$'``):
    mixing streams after the README's ``ds.map(td.short_call_ids)`` stopped with a bare traceback. Where the map
    reads a stream with :class:`ExactFeatures`, a column its first rows hold as those features declare it keeps
    its feature (unified messages keep their media columns), the others are inferred alone, as datasets infers
    them. Installed once per process on import."""
    from datasets import IterableDataset

    original = IterableDataset._resolve_features

    def resolve_features(self):
        if self.features is None and not self._ex_iterable.is_typed:
            exact = _exact_features_read_by(self._ex_iterable)
            resolved = _features_of_head(self, exact) if exact is not None else None
            if resolved is not None:
                self._resolved_exact_features = resolved  # for the mix's features (above)
                out = copy.copy(self)  # as datasets' own: the same stream, with features
                out._info = self.info.copy()
                out._info.features = resolved
                return out
        return original(self)

    IterableDataset._resolve_features = patched_once(original, resolve_features, "_resolves_exact_features")


def _exact_features_read_by(ex_iterable: Any) -> Optional["ExactFeatures"]:
    """The :class:`ExactFeatures` of the nearest typed stream step that ``ex_iterable`` reads (through maps and
    filters), or None."""
    while ex_iterable is not None:
        features = getattr(ex_iterable, "features", None)
        if ex_iterable.is_typed:
            return features if isinstance(features, ExactFeatures) else None
        ex_iterable = getattr(ex_iterable, "ex_iterable", None)
    return None


def _features_of_head(stream: Any, exact: "ExactFeatures") -> Optional["ExactFeatures"]:
    """Features of ``stream``'s first rows: ``exact``'s feature for each column that holds its values there, the
    others inferred alone; None where a column cannot be inferred (datasets' own inference then says why)."""
    from datasets.features.features import get_nested_type
    from datasets.iterable_dataset import _infer_features_from_batch

    head = stream.with_format(None)._head()
    columns = {}
    for name, values in head.items():
        feature = exact.get(name)
        if feature is not None:
            try:
                encoded = ExactFeatures({name: feature}).encode_column(values, name)
                pa.array(encoded, type=storage_type(get_nested_type(feature)))
                columns[name] = feature
                continue
            except (InvalidJsonError, JsonValueError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                    KeyError, AttributeError):
                pass  # the map changed the column: inferred as datasets infers it
        try:
            columns[name] = _infer_features_from_batch({name: values})[name]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
    if any(columns.get(name) == exact[name] for name in exact.chat_columns):
        columns.update((c, exact[c]) for c in exact.omitted_empty_media if c not in columns)
    ordered = [c for c in exact if c in columns] + [c for c in columns if c not in exact]
    # foreign: the map may hand on Arrow tables holding JSON text from any writer (as a map-style map's output)
    return ForeignExactFeatures({c: columns[c] for c in ordered})


def _install_column_operations_keeping_features() -> None:
    """``select_columns``, ``rename_column``, ``rename_columns``, ``cast_column``, ``cast`` (map-style and
    streaming) and ``flatten_indices`` rebuild the dataset's features as a plain ``Features``, so their rows came
    back with every key: after ``ds.select_columns(["messages", "tools"])`` Hermes-3 rendered each final answer
    (``tool_calls: []``) as an empty call turn, and a kept ``images: []`` made TRL take the text for vision data.
    Their result keeps the class of the features it came from (recompiled for its columns). So does a map-style
    ``map``, whose writer infers fresh features: after ``ds.map(td.short_call_ids)`` (or any map adding a column)
    the rows came back with every key too, and went to ``SFTTrainer`` that way unless passed through ``td.exact``
    again. Its JSON text is read as ``td.exact`` reads it, since a function may return Arrow tables holding text
    from any writer. (A stream's ``map`` hands on the function's rows as they are.) Installed once per process on
    import."""
    from datasets import Dataset, IterableDataset

    def keep(out, self, *args):
        given, made = self._info.features, out._info.features
        if isinstance(given, ExactFeatures) and made is not None and not isinstance(made, ExactFeatures):
            out._info.features = type(given)(dict(made))

    def keep_rewritten(out, self, *args):
        given, made = self._info.features, out._info.features
        if isinstance(given, ExactFeatures) and made is not None and not isinstance(made, ExactFeatures):
            out._info.features = ForeignExactFeatures(dict(made))

    Dataset.map = _keeping_exact_features(Dataset.map, keep_rewritten)
    # (``_fast_select_column`` is how ``ds["messages"]`` reads one column: its rows kept every key.)
    for cls, names in ((Dataset, ("select_columns", "rename_column", "rename_columns", "flatten_indices",
                                  "cast_column", "cast", "_fast_select_column")),
                       (IterableDataset, ("select_columns", "rename_column", "rename_columns", "cast_column", "cast"))):
        for name in names:
            if getattr(cls, name, None) is not None:  # a datasets without it: left as it is
                setattr(cls, name, _keeping_exact_features(getattr(cls, name), keep))
    IterableDataset.select_columns = _selecting_absent_media(IterableDataset.select_columns)
    IterableDataset.__getitem__ = _column_of_selected(IterableDataset.__getitem__)
    IterableDataset.map = _handing_absent_media_to(IterableDataset.map)
    IterableDataset.filter = _handing_absent_media_to(IterableDataset.filter)
    IterableDataset.remove_columns = _removing_by_selecting(IterableDataset.remove_columns)
    IterableDataset.rename_columns = _renaming_absent_media(IterableDataset.rename_columns)  # rename_column's too


def _renaming_absent_media(original: Callable) -> Callable:
    """A stream's ``rename_columns`` is datasets' Python ``map``, which requires every renamed key in every row:
    our decoded rows leave an empty media list out, so renaming ``images`` failed on the first row without
    images (ValueError: columns {'images'} are not in the dataset). With exact features such a key is renamed
    as the empty list it stands for."""
    def rename_columns(self, column_mapping):
        features = self._info.features
        if not isinstance(features, ExactFeatures):
            return original(self, column_mapping)
        # Rows leave empty media out, so datasets' row check misses a name taken by such a column: the renamed
        # column would replace it without a word (map-style refuses it, as here)
        taken = [new for new in column_mapping.values() if new in features and new not in column_mapping]
        if taken:
            raise ValueError(f"cannot rename to {', '.join(map(repr, taken))}: already a column of the dataset")
        empty = [c for c in column_mapping if c in features.omitted_empty_media]
        if not empty:
            return original(self, column_mapping)
        # (a module function, not a closure: the stream stays picklable, as a spawned DataLoader worker needs)
        rename = functools.partial(_rename_with_empty_media, empty=tuple(empty), column_mapping=column_mapping)
        out = self.map(rename, remove_columns=list(column_mapping))
        out._info.features = type(features)({column_mapping.get(c, c): f for c, f in features.items()})
        return out

    return patched_once(original, rename_columns, "_renames_absent_media")


def _rename_with_empty_media(example: dict, empty: tuple, column_mapping: dict) -> dict:
    """datasets' stream rename of one row, a media key the row leaves out (``empty``) taken as its empty list."""
    from datasets.iterable_dataset import _rename_columns_fn

    return _rename_columns_fn({**{c: [] for c in empty}, **example}, column_mapping)


def _removing_by_selecting(original: Callable) -> Callable:
    """A stream's ``remove_columns`` is datasets' Python ``map``, which hands on our rows as decoded values (a
    ``meta`` dict, not its JSON text): an Arrow step after it (``with_format("arrow")``, ``filter_dataset``)
    built tables from them and failed (ArrowInvalid: cannot mix struct and non-struct). With exact features it
    selects the other columns instead, which passes Arrow tables through as they are read."""
    def remove_columns(self, column_names):
        features = self._info.features
        if not isinstance(features, ExactFeatures):
            return original(self, column_names)
        removed = [column_names] if isinstance(column_names, str) else list(column_names)
        missing = [c for c in removed if c not in features]
        if missing:  # datasets' own error for it
            return original(self, column_names)
        return self.select_columns([c for c in features if c not in removed])

    return patched_once(original, remove_columns, "_selects_the_rest")


def _selecting_absent_media(original: Callable) -> Callable:
    """A stream's ``select_columns`` takes each selected key of a row where datasets has no cast to apply: when
    every column is selected (in any order, as ``remove_columns([])`` does), it read our rows, which leave an
    empty media column out, and failed (KeyError: 'images'). With exact features the selection leaves such a
    column out of the row as it was (it stands for ``[]``); its Arrow tables are selected as datasets selects them."""
    def select_columns(self, column_names):
        out = original(self, column_names)
        features = self._info.features
        selection = out._ex_iterable
        if isinstance(features, ExactFeatures) and features.omitted_empty_media and \
                type(selection) is SelectColumnsIterable:
            out._ex_iterable = _SelectColumnsLeavingAbsentMedia(selection.ex_iterable, selection.column_names,
                                                                features.omitted_empty_media)
        return out

    return patched_once(original, select_columns, "_leaves_absent_media")


def _column_of_selected(original: Callable) -> Callable:
    """A stream's ``ds["images"]`` (datasets' ``IterableColumn``) takes the key from each row: our rows leave an
    empty media column out, so it failed on the first row without media (KeyError: 'images'). With exact features
    the column is read from the stream of that column alone, ``[]`` where a row has no media, as map-style
    ``ds["images"]`` gives it."""
    def getitem(self, column_name):
        features = self._info.features
        if isinstance(features, ExactFeatures) and column_name in features.omitted_empty_media:
            return original(self.select_columns([column_name]), column_name)
        return original(self, column_name)

    return patched_once(original, getitem, "_reads_absent_media")


def _handing_absent_media_to(original: Callable) -> Callable:
    """A stream's ``map`` and ``filter`` take each of their ``input_columns`` from a row: our rows leave an empty
    media column out, so ``map(f, input_columns=["images"])`` failed on the first row without media (KeyError:
    'images'). With exact features the function is handed the columns by a wrapper instead, ``[]`` for a media
    column a row leaves out, as map-style hands it. (An async function is left to datasets, which tests for one.)"""
    def apply(self, function=None, with_indices=False, input_columns=None, batched=False, *args, **kwargs):
        features = self._info.features
        columns = [input_columns] if isinstance(input_columns, str) else input_columns
        if function is None or not columns or not isinstance(features, ExactFeatures) or \
                not set(columns) & set(features.omitted_empty_media) or inspect.iscoroutinefunction(function):
            return original(self, function, with_indices, input_columns, batched, *args, **kwargs)
        given = functools.partial(_call_with_columns, _function=function, _columns=tuple(columns), _batched=batched,
                                  _absent=features.omitted_empty_media)
        return original(self, given, with_indices, None, batched, *args, **kwargs)

    return patched_once(original, apply, "_hands_absent_media")


def _call_with_columns(example: dict, *rest, _function: Callable, _columns: tuple, _batched: bool, _absent: tuple,
                       **fn_kwargs):
    """``_function`` called as datasets calls it with ``input_columns``, a media column the row (or every row of the
    batch) leaves out given as empty; any other column missing is datasets' KeyError."""
    if _batched:
        rows = len(next(iter(example.values()), ()))
        values = [example[c] if c in example or c not in _absent else [[] for _ in range(rows)] for c in _columns]
    else:
        values = [example[c] if c in example or c not in _absent else [] for c in _columns]
    return _function(*values, *rest, **fn_kwargs)


class _SelectColumnsLeavingAbsentMedia(SelectColumnsIterable):
    """datasets' ``SelectColumnsIterable`` whose rows leave out a media column the row read leaves out."""

    def __init__(self, ex_iterable, column_names: list, absent_media: tuple):
        super().__init__(ex_iterable, column_names)
        self.absent_media = absent_media

    def __iter__(self):
        columns, absent = self.column_names, self.absent_media
        for idx, row in self.ex_iterable:
            yield idx, {c: row[c] for c in columns if c in row or c not in absent}

    def _alike(self, plain: SelectColumnsIterable) -> "_SelectColumnsLeavingAbsentMedia":
        return type(self)(plain.ex_iterable, plain.column_names, self.absent_media)

    def shuffle_data_sources(self, generator):
        return self._alike(super().shuffle_data_sources(generator))

    def shard_data_sources(self, num_shards: int, index: int, contiguous=True):
        return self._alike(super().shard_data_sources(num_shards, index, contiguous=contiguous))

    def reshard_data_sources(self):
        return self._alike(super().reshard_data_sources())


def _install_add_item_encoding_the_item() -> None:
    """datasets' ``Dataset.add_item`` makes the item's table from its Python values, with Arrow's inferred types: a
    JSON value that is a dict became a struct, which it then tried to align with the ``Json()`` column
    (AttributeError: 'ExactJson' object has no attribute 'items'), so no row of ours could be added. With exact
    features the item is encoded by them first (JSON leaves as text, exactly; absent empty keys as a prepared
    row stores them), and datasets aligns and casts that text as it does any. Installed once per process."""
    from datasets import Dataset

    original = Dataset.add_item

    def add_item(self, item, *args, **kwargs):
        features = self._info.features
        if isinstance(features, ExactFeatures) and isinstance(item, dict):
            unknown = [k for k in item if k not in features]
            if unknown:  # datasets' own add_item fails on them in Arrow (schemas differ)
                raise ValueError(f"add_item: {unknown} are not columns of the dataset (columns: {list(features)})")
            item = features.encode_example(item)
        return original(self, item, *args, **kwargs)

    Dataset.add_item = patched_once(original, add_item, "_encodes_the_item")


def _install_from_list_taking_decoded_rows() -> None:
    """datasets' ``Dataset.from_list`` takes its columns from the first row's keys: decoded unified rows leave an empty
    media column out, so ``Dataset.from_list(list(ds), features=ds.features)`` failed ("Keys mismatch") whenever
    the first row had no images. With features of unified rows, a media column a row leaves out is given as the
    empty list it stands for. Installed once per process on import."""
    from datasets import Dataset

    original = Dataset.from_list.__func__

    def from_list(cls, mapping, features=None, *args, **kwargs):
        media = _media_of_unified(features)
        if media and isinstance(mapping, list):
            mapping = [_with_media(row, features, media) if isinstance(row, dict) and not all(c in row for c in media)
                       else row for row in mapping]
        return original(cls, mapping, features, *args, **kwargs)

    Dataset.from_list = classmethod(patched_once(original, from_list, "_takes_decoded_rows"))


def _install_constructors_keeping_exact_features() -> None:
    """``Dataset.from_dict`` (behind ``from_list``) and ``Dataset.from_generator`` given :class:`ExactFeatures`
    (``features=ds.features``) gave the new dataset datasets' plain ``Features``: its rows came back with every key,
    ``images: []`` (TRL refused it as vision data) and ``tool_calls: None`` on each answer, and a
    ``concatenate_datasets`` of it with ``ds`` fell back to plain ``Features`` too. The new dataset keeps the class
    of the features given (foreign where ``from_dict`` is handed Arrow arrays, whose JSON text it does not write).
    ``from_dict`` of a decoded batch (``ds[:8]``) failed ("Keys mismatch") where no row of the batch had media:
    such a media column is given as the empty lists it stands for, as ``from_list`` gives it for a row.
    Installed once per process on import."""
    from datasets import Dataset

    from_dict_original = Dataset.from_dict.__func__

    def from_dict(cls, mapping, features=None, info=None, *args, **kwargs):
        given = features if features is not None else getattr(info, "features", None)  # (datasets replaces info's)
        media = _media_of_unified(given)
        if media and isinstance(mapping, dict) and mapping and not all(c in mapping for c in media):
            mapping = _with_media_columns(mapping, given, media)
        out = from_dict_original(cls, mapping, features, info, *args, **kwargs)
        arrow_given = isinstance(mapping, dict) and any(isinstance(v, (pa.Array, pa.ChunkedArray))
                                                        for v in mapping.values())
        _keep_exact_class(out, given, arrow_given)
        return out

    Dataset.from_dict = classmethod(patched_once(from_dict_original, from_dict, "_keeps_exact_features"))

    from_generator_original = Dataset.from_generator

    def from_generator(generator, features=None, *args, **kwargs):
        out = from_generator_original(generator, features, *args, **kwargs)
        _keep_exact_class(out, features, foreign=False)  # its rows are encoded through the features given
        return out

    Dataset.from_generator = staticmethod(patched_once(from_generator_original, from_generator,
                                                       "_keeps_exact_features"))


def _keep_exact_class(out: Any, given: Any, foreign: bool) -> None:
    """Gives ``out`` (a new Dataset) the class of ``given`` where these are :class:`ExactFeatures` and datasets
    rebuilt plain ones; ``foreign``: its JSON text was not written by this package's writer."""
    made = getattr(getattr(out, "_info", None), "features", None)
    if isinstance(given, ExactFeatures) and made is not None and not isinstance(made, ExactFeatures):
        cls = ForeignExactFeatures if foreign else type(given)
        out._info.features = cls(dict(made))


def _with_media_columns(mapping: dict, features: dict, media: tuple) -> dict:
    """A columnar ``mapping`` with every media column, ``[]`` for each row where it left one out, its columns in the
    order of ``features``."""
    rows = len(next(iter(mapping.values())))
    columns = [c for c in features if c in mapping or c in media] + [c for c in mapping if c not in features]
    return {c: mapping[c] if c in mapping else [[] for _ in range(rows)] for c in columns}


def _with_media(row: dict, features: dict, media: tuple) -> dict:
    """The row with every media column, ``[]`` where it left one out, its columns in the order of ``features`` (the
    first row's keys order the columns)."""
    columns = [c for c in features if c in row or c in media] + [c for c in row if c not in features]
    return {c: row[c] if c in row else [] for c in columns}


def _media_of_unified(features: Any) -> tuple:
    """The media columns that decoded rows of ``features`` leave out when empty (none unless they are unified rows)."""
    if isinstance(features, ExactFeatures):
        return features.omitted_empty_media
    if isinstance(features, dict) and any(_is_unified_messages(f) for f in features.values()):
        return tuple(c for c in MEDIA_COLUMNS if c in features)
    return ()


_install_merged_info_features()
_install_mixed_stream_features()
_install_stream_features_resolved_from_exact_ones()
_install_from_list_taking_decoded_rows()
_install_constructors_keeping_exact_features()
_install_column_operations_keeping_features()
_install_add_item_encoding_the_item()


def _is_empty(value: Any) -> bool:
    """A null or empty list, as a Python list or a numpy array (whose truth value numpy refuses)."""
    return value is None or len(value) == 0


_MESSAGE_KEYS = frozenset(MESSAGE)
_ALWAYS = ("role", "content")
_OPTIONAL = tuple(k for k in MESSAGE if k not in _ALWAYS)


# The `swift` format's messages: `name` is the tool of a result, null on every other message in Arrow; decoded,
# it is absent there, as ms-swift's own rows spell it (its media columns stay, empty or not: every swift row has
# all of them).
_SWIFT_MESSAGE_KEYS = frozenset(("role", "content", "name"))


def _is_unified_messages(feature: Any) -> bool:
    return (isinstance(feature, (List, LargeList)) and isinstance(feature.feature, dict)
            and set(feature.feature) == _MESSAGE_KEYS)


def _is_chat_messages(feature: Any) -> bool:
    """Unified messages, or the ``swift`` format's: decoded in chat shape (:func:`_chat_shape`)."""
    return _is_unified_messages(feature) or (isinstance(feature, (List, LargeList))
                                             and isinstance(feature.feature, dict)
                                             and set(feature.feature) == _SWIFT_MESSAGE_KEYS)


def _chat_shape(decode_messages: Optional[Decoder]) -> Decoder:
    """Decoded unified messages as chat templates expect them: a key whose value is null or an empty list is
    absent (templates test ``'tool_calls' in message`` or ``message.reasoning_content is defined``), ``role``
    and ``content`` are always there and ``content`` is a string. Nothing is lost: an absent key means null
    (``[]`` for ``tool_calls``), and an empty string (e.g. an empty reasoning block) stays."""

    def decode(messages):
        if messages is None:
            return None
        if decode_messages is not None:
            messages = decode_messages(messages)
        out = []
        for m in messages:
            keys = iter(m)
            if next(keys, None) == "role" and next(keys, None) == "content":
                # A struct read from Arrow (a fresh dict, role and content first, as stored): shaped in place, 40%
                # faster than a new dict, the same keys in the same order.
                if m["content"] is None:
                    m["content"] = ""
                for k in _OPTIONAL:
                    if k in m and ((v := m[k]) is None or v == []):
                        del m[k]
                out.append(m)
                continue
            shaped = {"role": m.get("role"), "content": m.get("content") or ""}
            shaped.update((k, v) for k, v in m.items() if v is not None and v != [] and k not in _ALWAYS)
            out.append(shaped)
        return out

    return decode


def decode_row(row: dict, features: Features) -> dict:
    """Decode one row read as raw storage values (JSON leaves as text) into Python values, exactly. Plain
    ``features`` say nothing of who wrote the text: it is read as :func:`tooluse_datasets.exact` reads such a
    dataset (an unmarked integer beyond 64 bits stays an integer). ``row`` is left as it is: the decoders work in
    place, here on a copy of its lists and structs."""
    exact = features if isinstance(features, ExactFeatures) else ForeignExactFeatures(features)
    return exact.decode_example(copy.deepcopy(row))


# --------------------------------------------------------------------------------------------------
# Encoding rows into Arrow
# --------------------------------------------------------------------------------------------------


def storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """The Arrow type with every extension type (``arrow.json``) replaced by its storage type."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        return arrow_type.storage_type
    if pa.types.is_list(arrow_type):
        return pa.list_(pa.field(arrow_type.value_field.name, storage_type(arrow_type.value_type)))
    if pa.types.is_large_list(arrow_type):
        return pa.large_list(pa.field(arrow_type.value_field.name, storage_type(arrow_type.value_type)))
    if pa.types.is_fixed_size_list(arrow_type):
        return pa.list_(storage_type(arrow_type.value_type), arrow_type.list_size)
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, storage_type(f.type)) for f in arrow_type])
    return arrow_type


Encoder = Callable[[Any], Any]


def _compile_encoder(feature: Any, write: Callable[[Any], str]) -> Optional[Encoder]:
    if isinstance(feature, Json):
        return lambda v: None if v is None else write(v)
    if isinstance(feature, (List, LargeList)):
        inner = _compile_encoder(feature.feature, write)
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if isinstance(feature, dict):
        subs = [(k, e, isinstance(f, (List, LargeList))) for k, f in feature.items()
                if (e := _compile_encoder(f, write)) is not None]
        if not subs:
            return None

        def encode_struct(v):
            if v is None:
                return None
            v = dict(v)
            for key, encode, is_list in subs:
                if key in v:
                    v[key] = encode(v[key])
                else:  # an absent key means empty (decoded rows leave empty keys out): [] for a list
                    v[key] = [] if is_list else None
            return v

        return encode_struct
    return None


Gatherer = Callable[[Any, list], None]


def _compile_gatherer(feature: Any) -> Optional[Gatherer]:
    """A function appending every JSON leaf value under ``feature`` to a list (None if it has none)."""
    if isinstance(feature, Json):
        return lambda v, out: out.append(v) if v is not None else None
    if isinstance(feature, (List, LargeList)):
        inner = _compile_gatherer(feature.feature)
        if inner is None:
            return None

        def gather_list(v, out):
            if v:
                for x in v:
                    inner(x, out)

        return gather_list
    if isinstance(feature, dict):
        subs = [(k, g) for k, f in feature.items() if (g := _compile_gatherer(f)) is not None]
        if not subs:
            return None

        def gather_struct(v, out):
            if v is not None:
                for key, gather in subs:
                    gather(v.get(key), out)

        return gather_struct
    return None


class RowEncoder:
    """Turns batches of Python rows into Arrow tables of one ``Features`` schema, JSON leaves exact."""

    def __init__(self, features: Features):
        self.features = features
        self.schema = features.arrow_schema
        self.storage_schema = pa.schema([pa.field(f.name, storage_type(f.type)) for f in self.schema])
        self._viewed_columns = [(i, f.type) for i, (f, s) in enumerate(zip(self.schema, self.storage_schema))
                                if f.type != s.type]
        self._encoders = {n: e for n, f in features.items() if (e := _compile_encoder(f, dumps)) is not None}
        self._parsed_encoders = {n: e for n, f in features.items()
                                 if (e := _compile_encoder(f, dumps_parsed)) is not None}
        self._gatherers = {n: g for n, f in features.items() if (g := _compile_gatherer(f)) is not None}
        self.leaf_writer, self.parsed_leaf_writer = dumps, dumps_parsed
        self._plan = ColumnPlan.compile(self.schema, self.storage_schema)

    def builder(self) -> TableBuilder:
        """A batch's table, built as rows are added (one pass over their values; see :mod:`.columnar`)."""
        return TableBuilder(self, self._plan)

    def check_row(self, row: dict) -> None:
        """Raise what :meth:`encode_row` would raise, at a fraction of its cost: every JSON leaf of the row is
        serialized in one call (the row is then kept as Python values: streaming)."""
        leaves: list = []
        for name, gather in self._gatherers.items():
            gather(row.get(name), leaves)
        try:
            dumps(leaves)
        except JsonValueError:
            # Column by column, as encode_row stores them: raises naming the field, unless the leaves only
            # failed together (the list holding them is one more level deep than any of them).
            self.encode_row(row)

    def encode_row(self, row: dict) -> dict:
        """Encode one row's JSON leaves; raises JsonValueError (with the column in its field path)."""
        return self._encode(row, self._encoders)

    def encode_parsed_row(self, row: dict) -> dict:
        """:meth:`encode_row` for a row whose JSON leaves were read from JSON text (see :func:`dumps_parsed`)."""
        return self._encode(row, self._parsed_encoders)

    def _encode(self, row: dict, encoders: dict[str, Encoder]) -> dict:
        out = dict(row)
        for name, encode in encoders.items():
            try:
                out[name] = encode(row.get(name))
            except JsonValueError as exc:
                raise exc.at(field=name) from None
        return out

    def table(self, encoded_rows: list[dict]) -> pa.Table:
        # Column by column (what from_pylist does) to allocate from the package's pool.
        pool = package_memory_pool()
        return self.table_of_arrays([pa.array([row.get(field.name) for row in encoded_rows], field.type,
                                               memory_pool=pool) for field in self.storage_schema])

    def table_of_arrays(self, arrays: list) -> pa.Table:
        """The table of one storage array per column."""
        # A column holding JSON leaves gets its extension type as a zero-copy view of the same buffers (its
        # storage type has that type's layout by construction). ``storage.cast(self.schema)`` gives the same
        # table through the cast kernels, at about 30% of from_pylist's time on unified rows (measured).
        columns = list(arrays)
        for i, ext_type in self._viewed_columns:
            column = columns[i]  # pa.array gives a chunked array past 2 GiB of strings
            columns[i] = pa.chunked_array([chunk.view(ext_type) for chunk in column.chunks], type=ext_type) \
                if isinstance(column, pa.ChunkedArray) else column.view(ext_type)
        return pa.Table.from_arrays(columns, schema=self.schema)


def rows_to_table(rows: list[dict], features: Features) -> pa.Table:
    """Convenience: encode and build in one call."""
    encoder = RowEncoder(features)
    return encoder.table([encoder.encode_row(r) for r in rows])
