"""Exact JSON leaves for datasets' features: decoding, and datasets' own Json writer made exact.

* :class:`ExactFeatures` / :class:`ExactJson`: a drop-in ``Features`` that decodes its JSON leaves with
  orjson through per-column compiled walkers (about 5x faster than datasets' recursive decoder on our
  rows, measured in ``benchmarks/``), installed metadata-only by :func:`tooluse_datasets.load`; unified
  messages decode in the shape chat templates expect (:func:`_chat_shape`).
* :class:`ForeignExactFeatures`: the same for JSON text other writers may have written (``td.exact``).
* :func:`decode_row`: one raw stored row decoded exactly.
* The storage writer hooks: datasets' Arrow writer and plain ``Json()`` columns store and read values with
  :mod:`.codec` (installed on import, once per process).

The wrappers that keep these features through datasets' operations (``select_columns``, ``map``,
``concatenate_datasets``...) are in :mod:`.datasets_patches`.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import orjson
import pyarrow as pa
from datasets import Features, Json, LargeList, List, Value
from datasets.features.features import cast_to_python_objects, encode_nested_example

from .codec import _REFUSE_OBJECTS, BIG_INT_MARK, dumps, has_digit_run, loads, loads_stored
from .errors import InvalidJsonError, InvalidValueError, JsonValueError, ToolUseDataError, json_kind
from .schema import MEDIA_COLUMNS, MESSAGE


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
        # Read alone (in plain Features: datasets.Features(ds.features), load_dataset(..., features=ds.features)),
        # a leaf cannot tell who wrote the text: read as td.exact reads it, an unmarked integer beyond 64 bits
        # included. ExactFeatures decode through their own compiled decoders, which trust the mark.
        return _decode_foreign(example_data)


def _exact_json_encode_field(example: Any, json_field_path: list) -> Any:
    """datasets' ``json_encode_field`` (how its Arrow writer stores Python values of a ``Json`` column: what
    ``map`` writes back), with each value written exactly (:func:`_stored_value`) instead of by pandas' ujson,
    which keeps 10 significant digits (``0.30000000000000004`` became ``0.3``) and cannot read or write integers
    beyond 64 bits. Text follows datasets' rule, JSON text stored as it is (read by :func:`loads`, so that text
    holding such an integer is not taken for a plain string and quoted; marked for the exact path by
    :func:`_marked_if_big`). A leaf of exact features (:class:`ExactJson`, see :func:`_exact_json_field_paths`) is
    held to their rules: a value JSON cannot hold is refused, as their ``encode_example`` refuses it (a NaN was
    written as null, a non-string key as text, a date as a number)."""
    leaf = _encoded_exact_leaf if type(json_field_path) is _ExactLeafPath else _encoded_leaf
    return _along_path(example, json_field_path, leaf)


class _ExactLeafPath(list):
    """A path the Arrow writer encodes (datasets' ``json_field_path``) that leads to an :class:`ExactJson` leaf."""


def _exact_json_field_paths(feature: Any) -> list:
    """datasets' ``get_json_field_paths_from_feature`` (the Json leaves its Arrow writer encodes), each path to an
    :class:`ExactJson` leaf an :class:`_ExactLeafPath`. The writer encodes what ``Dataset.map`` returns and what
    ``from_list``/``from_dict`` hand on unencoded (datasets encodes a list's items only where encoding its first
    item changes it): NaN in the arguments of a later message was stored as null there."""
    from datasets.features.features import _visit_with_path

    paths = []

    def note(leaf: Any, path: list) -> Any:
        if isinstance(leaf, Json):
            paths.append(_ExactLeafPath(path) if isinstance(leaf, ExactJson) else path)
        return leaf

    _visit_with_path(feature, note)
    return paths


def _along_path(example: Any, json_field_path: list, leaf: Callable[[Any], Any]) -> Any:
    """``example`` with ``leaf`` applied to each value under ``json_field_path`` (datasets' walk: ``0`` steps into
    every item of a list, a key into a struct); nulls stay null."""
    if json_field_path:
        key, *rest = json_field_path
        if example is None:
            return None
        if key == 0:
            if isinstance(example, str) and leaf is _encoded_exact_leaf:  # (datasets' walk: one character an entry)
                raise InvalidValueError("expected a list, got string")
            return [_along_path(x, rest, leaf) for x in example]
        value = example.get(key)
        if value is None and rest and rest[0] == 0 and leaf is _encoded_exact_leaf:
            # a decoded message leaves an empty tool_calls out: stored as the [] the loader writes, not null (a
            # column of only such lists made pyarrow fail in save_to_disk/push_to_hub: "cannot construct builder")
            value = []
        return {**example, key: _along_path(value, rest, leaf)}
    return None if example is None else leaf(example)


def _encoded_leaf(example: Any) -> Any:
    if isinstance(example, str):  # datasets' rule: JSON text stored as it is, other text as a JSON string
        return _marked_if_big(example) if _is_json_text(example) else dumps(example)
    return _stored_value(example)


def _encoded_exact_leaf(example: Any) -> Any:
    # what dumps refuses (NaN, non-string keys, a set...) is refused, as ExactJson.encode_example refuses it
    return _encoded_leaf(example) if isinstance(example, str) else dumps(example)


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


def _exact_json_decode_field(example: Any, json_field_path: list) -> Any:
    """datasets' ``json_decode_field`` (how ``Dataset.to_list``, ``to_dict`` and ``to_pandas`` read a ``Json`` column's
    text, each leaf under its path) read by :func:`loads`. Its own uses pandas' ujson: ``5e-324`` came back as ``0.0``,
    17-digit floats rounded, and a value holding an integer beyond 64 bits came back as its JSON text, a string.
    Text our reader refuses (``NaN``, not JSON) goes datasets' way: read by it, or left as the text."""
    return _along_path(example, json_field_path, _decoded_leaf)


def _decoded_leaf(example: Any) -> Any:
    try:
        return loads(example)  # not loads_stored: the text may come from another writer, without our mark
    except (ValueError, TypeError):
        return _DATASETS_WRITER["json_decode_field"](example, [])


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
    not reach them (the writer rebuilds its Json features from the Arrow schema), hence the replacement; the paths
    it encodes tell which leaves are exact features' (:func:`_exact_json_field_paths`). Reading
    too: :func:`_exact_json_decode_field` for ``to_list``/``to_dict``/``to_pandas``, which decode without features.
    Returns datasets' own functions; a datasets without them is left as it is."""
    import datasets.arrow_writer as arrow_writer
    import datasets.utils.json as datasets_json

    # (json_decode_field: imported by to_list/to_dict/to_pandas when called)
    patches = {"json_encode_field": (arrow_writer, _exact_json_encode_field),
               "get_json_field_paths_from_feature": (arrow_writer, _exact_json_field_paths),
               "json_decode_field": (datasets_json, _exact_json_decode_field),
               "cast_storage": (Json, _exact_cast_storage), "encode_example": (Json, _exact_encode_example),
               "decode_example": (Json, _exact_decode_example)}
    originals = {}
    for name, (owner, patch) in patches.items():
        installed = getattr(owner, name, None)
        # Installed already (this module reloaded: its functions are new objects): datasets' own is the one that
        # patch replaced, not the patch, which each fallback to datasets' own would call back (a RecursionError).
        originals[name] = original = getattr(installed, "datasets_original", installed)
        if original is not None:
            patch.datasets_original = original
            setattr(owner, name, patch)
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


def json_leaves_replaced(feature: Any, replace: Callable[[Json], Any]) -> Any:
    """``feature`` with each ``Json`` leaf, at any depth of lists and structs, replaced by ``replace(leaf)``."""
    if isinstance(feature, Json):
        return replace(feature)
    if isinstance(feature, List):
        return List(json_leaves_replaced(feature.feature, replace), length=feature.length)
    if isinstance(feature, LargeList):
        return LargeList(json_leaves_replaced(feature.feature, replace))
    if isinstance(feature, dict):
        return {k: json_leaves_replaced(v, replace) for k, v in feature.items()}
    return feature


def _exact_leaves(feature: Any) -> Any:
    return json_leaves_replaced(feature, lambda leaf: ExactJson(decode=leaf.decode))


class ExactFeatures(Features):
    """``Features`` that decode their JSON leaves exactly and fast.

    datasets calls ``Features.decode_example/decode_column/decode_batch`` when it formats rows (map-style
    and streaming alike); these overrides walk precompiled paths to the JSON leaves instead of datasets'
    generic recursion. Under the tensor formats (``with_format("numpy")``, torch, jax, tensorflow) datasets
    hands them numpy values, which they decode to the same exact values, in the shape datasets' own decoding
    gives a plain ``Json()`` column there. The subclass survives ``copy``, ``reorder_fields_as`` and pickling,
    so ``shuffle``, ``select``, ``filter`` and ``to_iterable_dataset`` keep it (``select_columns``, ``rename_column(s)``,
    ``flatten_indices`` and a map-style ``map`` through the wrappers of :mod:`.datasets_patches`); where datasets
    builds fresh ``Features`` otherwise, the ``ExactJson`` leaves still decode exactly.
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
        self.chat_columns = tuple(name for name, f in self.items() if self._is_chat_column(name, f))
        self.omitted_empty_media: tuple[str, ...] = ()
        for name in self.chat_columns:
            for decoders in (self._decoders, self._numpy_decoders):
                decoders[name] = _chat_shape(decoders.get(name))
        if self._omits_empty_media():
            self.omitted_empty_media = tuple(c for c in MEDIA_COLUMNS if c in self)
        # (column, decoder of python values, decoder of numpy values): one tuple per decoded column, for the loops
        self._column_decoders = [(n, d, self._numpy_decoders[n]) for n, d in self._decoders.items()]
        self._json_columns = frozenset(name for name, f in self.items() if holds_json(f))

    # Whether the JSON text may come from writers other than this package's (see ForeignExactFeatures).
    foreign_text = False

    def _is_chat_column(self, name: str, feature: Any) -> bool:
        return _is_chat_messages(feature)

    def _omits_empty_media(self) -> bool:
        return any(is_unified_messages(self[name]) for name in self.chat_columns)

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
        try:
            # (text for a list column of no JSON, an image path, datasets' encoder takes one character an entry;
            # a list or object for a text column it writes as str() of it)
            if (name in self._json_columns or (isinstance(value, str) and isinstance(self[name], (List, LargeList)))
                    or (isinstance(value, (Mapping, list, tuple)) and isinstance(self[name], Value))):
                return _encode_whole(self[name], value)
            try:
                return encode_nested_example(self[name], value, level=1)
            except (AttributeError, TypeError):
                # datasets' encoder fails bare on a value of another kind than its feature (text for the call
                # graph's edges): named where it is
                _encode_whole(self[name], value)
                raise
        except (InvalidValueError, JsonValueError) as exc:
            raise _within(exc, name) from None

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
        return self.without_empty_media(example)

    def without_empty_media(self, example: dict) -> dict:
        """``example`` (decoded) in the row shape: a row holding the conversation has no media key where it has no
        media (TRL takes a row with an "images" key for vision data). Changed in place."""
        if self.omitted_empty_media and self._holds_messages(example):
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


def holds_json(feature: Any) -> bool:
    """Whether a feature is or holds a ``Json`` column (a mirror card's note on JSON columns says so too)."""
    if isinstance(feature, Json):
        return True
    if isinstance(feature, (List, LargeList)):
        return holds_json(feature.feature)
    if isinstance(feature, dict):
        return any(holds_json(f) for f in feature.values())
    return False


def holds_exact_json(feature: Any) -> bool:
    """Whether a feature is or holds an :class:`ExactJson` leaf (whose values are held to the exact features'
    rules: a plain ``Json`` leaf stores what pandas' encoder makes of them)."""
    return any(isinstance(path, _ExactLeafPath) for path in _exact_json_field_paths(feature))


def _encode_whole(feature: Any, value: Any) -> Any:
    """datasets' ``encode_nested_example`` without its shortcut: every element of every list is encoded. A value of
    another kind than its feature declares (text for a list, which would be stored character by character; a list
    for an object) is an :class:`InvalidValueError`, named with the place under the column of it and of a value
    JSON cannot hold."""
    if value is None:
        return None
    if isinstance(feature, dict):
        if not isinstance(value, Mapping):
            raise InvalidValueError(f"expected an object, got {json_kind(value)}")
        out = {}
        for key, f in feature.items():
            try:
                # an absent key means empty (decoded messages leave empty keys out): [] for a list, as RowEncoder
                # writes it
                out[key] = _encode_whole(f, value.get(key, [] if isinstance(f, (List, LargeList)) else None))
            except (InvalidValueError, JsonValueError) as exc:
                raise _within(exc, key) from None
        return out
    if isinstance(feature, (List, LargeList)):
        if not isinstance(value, (list, tuple)):
            raise InvalidValueError(f"expected a list, got {json_kind(value)}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(_encode_whole(feature.feature, v))
            except (InvalidValueError, JsonValueError) as exc:
                raise _within(exc, f"[{i}]") from None
        return out
    if isinstance(feature, Value) and isinstance(value, (Mapping, list, tuple)):
        # (datasets' encoder writes str() of it: a message's content ['x'] was stored as the text "['x']")
        raise InvalidValueError(f"expected {feature.dtype}, got {json_kind(value)}")
    if hasattr(feature, "encode_example"):
        return feature.encode_example(value)
    return value


def _within(exc: ToolUseDataError, where: str) -> ToolUseDataError:
    """``exc`` with its field placed under ``where`` (a key, or a list's ``[i]``)."""
    if exc.field is None:
        exc.field = where
    else:
        exc.field = f"{where}{'' if exc.field.startswith('[') else '.'}{exc.field}"
    return exc


class ForeignExactFeatures(ExactFeatures):
    """:class:`ExactFeatures` for JSON text this package may not have written (``td.exact`` of any dataset: a
    Parquet file from DuckDB or Polars, someone's ``json`` column). Such text does not mark integers beyond 64
    bits with a leading space, so each text is read by :func:`loads` (which finds them) instead of trusting
    the mark: a little slower, never a rounded integer."""

    foreign_text = True


# The columns TRL reads conversations from besides ``messages`` (``trl.data_utils.is_conversational``):
# prompt-completion rows (``completion_only_loss``) and preference pairs.
TRL_CONVERSATION_COLUMNS = ("prompt", "completion", "chosen", "rejected")


class MappedUnifiedFeatures(ForeignExactFeatures):
    """The features of a map-style ``map`` of unified rows. Such a map may move the messages into TRL's
    columns (``{"prompt": m[:-1], "completion": m[-1:]}`` for ``completion_only_loss``), which datasets' writer
    types by inference (plain structs, or ``Json`` where keys differ), not as unified messages. They hold unified
    messages all the same: decoded in the chat shape (no ``reasoning_content: None`` or ``tool_calls: None``
    where the inferred struct has the key for other rows), and a row holding them leaves its empty media
    columns out, as the row it came from did (the media columns the map carried over came back as
    ``images: []`` on every row, and TRL refused the text dataset as vision data)."""

    def _is_chat_column(self, name: str, feature: Any) -> bool:
        return super()._is_chat_column(name, feature) or (name in TRL_CONVERSATION_COLUMNS
                                                           and _may_hold_messages(feature))

    def _omits_empty_media(self) -> bool:
        return super()._omits_empty_media() or any(name in TRL_CONVERSATION_COLUMNS for name in self.chat_columns)


def holds_mapped_messages(features: Features) -> bool:
    """Whether ``features`` are those of a map of unified rows into TRL's columns as a plain reader types them
    (``load_from_disk`` of its saved output: inferred structs or ``Json``, media columns as the unified ones), so
    that ``td.exact`` reads them as :class:`MappedUnifiedFeatures`. Media of another type (``Image``) are another
    dataset's, whose empty media stay."""
    media = [features[c] for c in MEDIA_COLUMNS if c in features]
    return (any(name in features and _may_hold_messages(features[name]) for name in TRL_CONVERSATION_COLUMNS)
            and all(f == List(Value("string")) for f in media))


def _may_hold_messages(feature: Any) -> bool:
    """A list of message structs (role, content and other unified message keys) or of JSON values, as datasets
    infers the type of a column of decoded unified messages."""
    if not isinstance(feature, (List, LargeList)):
        return False
    item = feature.feature
    return isinstance(item, Json) or (isinstance(item, dict) and set(_ALWAYS) <= set(item) <= _MESSAGE_KEYS)


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


def is_unified_messages(feature: Any) -> bool:
    return (isinstance(feature, (List, LargeList)) and isinstance(feature.feature, dict)
            and set(feature.feature) == _MESSAGE_KEYS)


def _is_chat_messages(feature: Any) -> bool:
    """Unified messages, or the ``swift`` format's: decoded in chat shape (:func:`_chat_shape`)."""
    return is_unified_messages(feature) or (isinstance(feature, (List, LargeList))
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
            if type(m) is dict:
                keys = iter(m)
                if next(keys, None) == "role" and next(keys, None) == "content":
                    # A struct read from Arrow (a fresh dict, role and content first, as stored): shaped in place,
                    # 40% faster than a new dict, the same keys in the same order.
                    if m["content"] is None:
                        m["content"] = ""
                    for k in _OPTIONAL:
                        if k in m and ((v := m[k]) is None or v == []):
                            del m[k]
                    out.append(m)
                    continue
            if not isinstance(m, Mapping) or "role" not in m:  # a mapped "prompt" JSON column holding no messages
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
    if not isinstance(row, Mapping) or not (isinstance(features, Features) or type(features) is dict):
        # (a dataset given as either was copied whole, or failed in dict(): "dictionary update sequence element")
        raise TypeError(f"decode_row takes one row of storage values (a dict, as ds.with_format('arrow') gives a "
                        f"table's to_pylist()) and the dataset's features (ds.features), got {type(row).__name__} "
                        f"and {type(features).__name__}")
    exact = features if isinstance(features, ExactFeatures) else ForeignExactFeatures(features)
    return exact.decode_example(copy.deepcopy(row))
