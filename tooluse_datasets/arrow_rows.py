"""Python rows into Arrow tables of a ``Features`` schema, every ``Json`` leaf written exactly.

:class:`RowEncoder` writes each JSON leaf as :func:`~tooluse_datasets.codec.dumps` text straight into a
``pa.json_()`` array (never through ``Json.encode_example``); :func:`rows_to_table` is the one-call form.
The single-pass table builder it hands batches to is :mod:`.columnar`.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import pyarrow as pa
from datasets import Features, Json, LargeList, List

from .arrow_memory import package_memory_pool
from .codec import dumps, dumps_parsed
from .columnar import ColumnPlan, TableBuilder
from .errors import JsonValueError


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
                raise exc.at(field=_refused_leaf(self.features[name], row.get(name), name) or name) from None
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


def _refused_leaf(feature: Any, value: Any, path: str) -> Optional[str]:
    """The field of the first JSON leaf under ``value`` that :func:`dumps` refuses (``messages[3].tool_calls[0]
    .function.arguments``): the column alone does not say which message or call holds it. None if none alone."""
    if isinstance(feature, Json):
        try:
            dumps(value)
        except JsonValueError:
            return path
    elif isinstance(feature, (List, LargeList)) and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if found := _refused_leaf(feature.feature, item, f"{path}[{i}]"):
                return found
    elif isinstance(feature, dict) and isinstance(value, dict):
        for key, sub in feature.items():
            if key in value and (found := _refused_leaf(sub, value[key], f"{path}.{key}")):
                return found
    return None


def rows_to_table(rows: list[dict], features: Features) -> pa.Table:
    """Convenience: encode and build in one call."""
    encoder = RowEncoder(features)
    return encoder.table([encoder.encode_row(r) for r in rows])
