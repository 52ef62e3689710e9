"""Python rows into one Arrow table in a single pass over their values.

:meth:`RowEncoder.table <tooluse_datasets.arrow_rows.RowEncoder.table>` takes rows whose JSON leaves were written as
text by :meth:`~tooluse_datasets.arrow_rows.RowEncoder.encode_row`, which copies every struct on the way to a leaf
(a message, its calls, their functions), and then hands the copies to ``pa.array``, which walks them again. For
unified rows those two walks were about a quarter of prepare's CPU time (ms-swift, 30K rows). Here a schema is
compiled once into a Python function that appends a row's values to flat lists (JSON leaves written as text,
offsets for the lists on the way to them), and a batch's lists become arrays with
``ListArray``/``StructArray.from_arrays``.

Only the lists and structs on the way to a JSON leaf are taken apart: any other column or struct field is one
value handed to ``pa.array`` as it is, as ``RowEncoder.table`` hands it, so it is converted (or refused) by the
same code. Anything the compiled function does not take (a struct given as other than a dict, a list as other
than a list or tuple), or a JSON leaf that cannot be written, and the batch goes back to ``RowEncoder``'s two
walks, which then give the table, or the error, that they always gave.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import pyarrow as pa

from .arrow_memory import package_memory_pool


class RowEncoding(Protocol):
    """What a :class:`TableBuilder` needs of :class:`tooluse_datasets.arrow_rows.RowEncoder`."""

    leaf_writer: Callable[[Any], str]
    parsed_leaf_writer: Callable[[Any], str]

    def encode_row(self, row: dict) -> dict: ...

    def encode_parsed_row(self, row: dict) -> dict: ...

    def table(self, encoded_rows: list[dict]) -> pa.Table: ...

    def table_of_arrays(self, arrays: list) -> pa.Table: ...


# A source's own appender of one row's values (see TableBuilder.add_columns): (native, ctx, lists, write) -> added.
ColumnFiller = Callable[[Any, Any, dict, Callable[[Any], str]], bool]


class _NotTaken(Exception):
    """A value the compiled function does not take apart: the batch is encoded the general way."""


def _is_json(arrow_type: pa.DataType) -> bool:
    return isinstance(arrow_type, pa.JsonType)  # datasets' Json()


def _holds_json(arrow_type: pa.DataType) -> bool:
    if _is_json(arrow_type):
        return True
    if isinstance(arrow_type, pa.BaseExtensionType):
        return False  # another extension type (datasets' Array2D...): one value, stored as its storage type
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return _holds_json(arrow_type.value_type)
    if pa.types.is_struct(arrow_type):
        return any(_holds_json(f.type) for f in arrow_type)
    return False


class _Node:
    """One Arrow array of the table: its values are appended by generated code and built by :meth:`build`."""

    count: str  # a Python expression: how many values the node holds so far


class _Leaf(_Node):
    def __init__(self, compiler: "_Compiler", storage: pa.DataType, json: bool):
        self.values = compiler.buffer()
        self.storage, self.json = storage, json
        self.count = f"len({self.values})"

    def emit(self, value: str, code: "_Code") -> None:
        if self.json:
            code.line(f"{self.values}_append(None if {value} is None else write({value}))")
        else:
            code.line(f"{self.values}_append({value})")

    def emit_null(self, code: "_Code") -> None:
        code.line(f"{self.values}_append(None)")

    def build(self, buffers: dict, pool: pa.MemoryPool) -> pa.Array:
        return pa.array(buffers[self.values], self.storage, memory_pool=pool)


class _ListNode(_Node):
    def __init__(self, compiler: "_Compiler", storage: pa.DataType, child: _Node):
        self.offsets, self.nulls = compiler.buffer([0]), compiler.buffer()
        self.storage, self.child = storage, child
        self.large = pa.types.is_large_list(storage)
        self.count = f"(len({self.offsets}) - 1)"

    def emit(self, value: str, code: "_Code") -> None:
        item = code.name("item")
        code.line(f"if {value} is None:")
        code.indent(1)
        self.emit_null(code)
        code.indent(-1)
        code.line(f"elif type({value}) is list or type({value}) is tuple:")
        code.line(f"    for {item} in {value}:")
        code.indent(2)
        self.child.emit(item, code)
        code.indent(-2)
        code.line(f"    {self.offsets}_append({self.child.count})")
        code.line("else:")
        code.line("    raise NotTaken")

    def emit_null(self, code: "_Code") -> None:
        code.line(f"{self.nulls}_append({self.count})")
        code.line(f"{self.offsets}_append({self.offsets}[-1])")

    def build(self, buffers: dict, pool: pa.MemoryPool) -> pa.Array:
        offsets = pa.array(buffers[self.offsets], pa.int64() if self.large else pa.int32(), memory_pool=pool)
        array_type = pa.LargeListArray if self.large else pa.ListArray
        return array_type.from_arrays(offsets, self.child.build(buffers, pool), type=self.storage, pool=pool,
                                      mask=_mask(buffers[self.nulls], len(offsets) - 1, pool))


class _StructNode(_Node):
    def __init__(self, compiler: "_Compiler", storage: pa.DataType, fields: list[tuple[str, _Node, bool]]):
        self.nulls = compiler.buffer()
        self.storage, self.fields = storage, fields
        self.count = fields[0][1].count

    def emit(self, value: str, code: "_Code") -> None:
        code.line(f"if {value} is None:")
        code.indent(1)
        self.emit_null(code)
        code.indent(-1)
        code.line(f"elif type({value}) is dict:")
        code.indent(1)
        for key, node, absent_empty in self.fields:
            field_value = code.name("field")
            # An absent list of JSON leaves is empty, as RowEncoder.encode_row makes it (decoded rows leave
            # empty keys out); any other absent field is null.
            code.line(f"{field_value} = {value}.get({key!r}{', ()' if absent_empty else ''})")
            node.emit(field_value, code)
        code.indent(-1)
        code.line("else:")
        code.line("    raise NotTaken")

    def emit_null(self, code: "_Code") -> None:
        code.line(f"{self.nulls}_append({self.count})")
        for _key, node, _absent_empty in self.fields:
            node.emit_null(code)

    def build(self, buffers: dict, pool: pa.MemoryPool) -> pa.Array:
        children = [node.build(buffers, pool) for _key, node, _absent_empty in self.fields]
        return pa.StructArray.from_arrays(children, fields=list(self.storage), memory_pool=pool,
                                          mask=_mask(buffers[self.nulls], len(children[0]), pool))


def _mask(nulls: list[int], length: int, pool: pa.MemoryPool) -> Optional[pa.Array]:
    if not nulls:
        return None
    mask = [False] * length
    for i in nulls:
        mask[i] = True
    return pa.array(mask, pa.bool_(), memory_pool=pool)


class _Code:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self.names = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def indent(self, levels: int) -> None:
        self.depth += levels

    def name(self, stem: str) -> str:
        self.names += 1
        return f"{stem}{self.names}"


class _Compiler:
    def __init__(self):
        self.initial: dict[str, list] = {}
        self.paths: dict[str, str] = {}  # a field's path -> its values (a list's: its offsets), see ColumnPlan.lists

    def buffer(self, initial: Optional[list] = None) -> str:
        name = f"b{len(self.initial)}"
        self.initial[name] = initial or []
        return name

    def node(self, arrow_type: pa.DataType, storage: pa.DataType, path: str) -> Optional[_Node]:
        """The node of a value of ``arrow_type``; None if a JSON leaf sits under a type not taken apart here."""
        if not _holds_json(arrow_type) or _is_json(arrow_type):
            leaf = _Leaf(self, storage, json=_is_json(arrow_type))
            self.paths[path] = leaf.values
            return leaf
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            child = self.node(arrow_type.value_type, storage.value_type, path + "[]")
            if child is None:
                return None
            node = _ListNode(self, storage, child)
            self.paths[path] = node.offsets
            return node
        if pa.types.is_struct(arrow_type):
            fields = []
            for field, storage_field in zip(arrow_type, storage):
                child = self.node(field.type, storage_field.type, f"{path}.{field.name}")
                if child is None:
                    return None
                absent_empty = _holds_json(field.type) and isinstance(child, _ListNode)
                fields.append((field.name, child, absent_empty))
            return _StructNode(self, storage, fields) if fields else None
        return None  # a fixed-size list of JSON leaves


class ColumnPlan:
    """A schema compiled into the function that appends one row's values (see the module docstring)."""

    def __init__(self, columns: list[tuple[str, _Node]], initial: dict[str, list], source: str,
                 paths: dict[str, str]):
        self.columns, self.initial, self.source, self.paths = columns, initial, source, paths
        namespace: dict[str, Any] = {}
        exec(compile(source, "<tooluse_datasets.columnar>", "exec"), namespace)  # noqa: S102 (our own code)
        self._factory: Callable[..., Callable[[dict, Callable], None]] = namespace["bind"]

    @classmethod
    def compile(cls, schema: pa.Schema, storage_schema: pa.Schema) -> Optional["ColumnPlan"]:
        """The plan of a table schema; None if one of its JSON leaves sits under a type not taken apart."""
        compiler, code = _Compiler(), _Code()
        columns = []
        for field, storage_field in zip(schema, storage_schema):
            node = compiler.node(field.type, storage_field.type, field.name)
            if node is None:
                return None
            value = code.name("column")
            code.line(f"{value} = row.get({field.name!r})")
            node.emit(value, code)
            columns.append((field.name, node))
        buffers = ", ".join(compiler.initial)
        appends = [f"  {name}_append = {name}.append" for name in compiler.initial]
        source = "\n".join([f"def bind(NotTaken, {buffers}):", *appends, "  def add(row, write):",
                            *("  " + line for line in code.lines), "  return add", ""])
        return cls(columns, compiler.initial, source, compiler.paths)

    def bind(self) -> tuple[dict[str, list], Callable[[dict, Callable], None]]:
        """Fresh buffers, and the function appending one row to them: ``add(row, write)``, ``write`` the
        function that writes a JSON leaf's text. Raises if the row's values are not taken (see the module
        docstring), having appended some of them."""
        buffers = {name: list(initial) for name, initial in self.initial.items()}
        return buffers, self._factory(_NotTaken, *buffers.values())

    def lists(self, buffers: dict[str, list]) -> dict[str, list]:
        """The buffers by field path, for code that appends a row's values itself (a source's column filler):
        ``"id"``, ``"tools"`` (a list's offsets: append the count of its items so far after each row's),
        ``"tools[]"`` (its items), ``"messages[].tool_calls[].function.arguments"``. JSON leaves are appended
        as text; nulls of lists and structs cannot be appended this way."""
        return {path: buffers[name] for path, name in self.paths.items()}

    def arrays(self, buffers: dict[str, list]) -> list[pa.Array]:
        pool = package_memory_pool()
        return [node.build(buffers, pool) for _name, node in self.columns]


class TableBuilder:
    """A batch's rows for one config, added one at a time, and their table (``RowEncoder.table`` of the rows
    ``RowEncoder`` encodes, value for value)."""

    def __init__(self, encoder: RowEncoding, plan: Optional[ColumnPlan]):
        self.encoder = encoder
        self.plan = plan
        # (row, its JSON leaves were read from text); a row given by add_columns is the function making it
        self.rows: list[tuple[Any, bool]] = []
        self._encoded: Optional[list[dict]] = None  # the general way's encoded rows, once the batch takes it
        if plan is not None:
            self._buffers, self._add = plan.bind()
            self._lists: Optional[dict[str, list]] = None  # the buffers by field path, once add_columns needs them
            self._writers = {True: encoder.parsed_leaf_writer, False: encoder.leaf_writer}
        else:
            self._encoded = []

    def add(self, row: dict, *, parsed: bool) -> None:
        """Add a row, or raise what :meth:`RowEncoder.encode_row` raises for it (then it is not added).
        ``parsed``: its JSON leaves were read from JSON text (see :func:`~tooluse_datasets.codec.dumps_parsed`)."""
        if self._encoded is None:
            try:
                self._add(row, self._writers[parsed])
            except Exception:
                self._encode_all()  # the buffers hold part of this row: the general way from here on
            else:
                self.rows.append((row, parsed))
                return
        self._encoded.append(self._encode(row, parsed))  # raises as encode_row does
        self.rows.append((row, parsed))

    def add_columns(self, fill: "ColumnFiller", native: Any, ctx: Any, row: Callable[[], dict]) -> bool:
        """Add a row by ``fill(native, ctx, lists, write)``, which appends its values to :meth:`ColumnPlan.lists`
        itself (JSON leaves read from text) or returns False having appended nothing; ``row()`` makes the same
        row as a dict, if the batch has to be encoded the general way. False: nothing added (also when the
        batch is encoded the general way already)."""
        if self._encoded is not None:
            return False
        if self._lists is None:
            self._lists = self.plan.lists(self._buffers)
        try:
            if not fill(native, ctx, self._lists, self.encoder.parsed_leaf_writer):
                return False
        except Exception:
            # The buffers hold part of this row: the general way from here on, this row too (converted, or
            # refused naming its field, by the source's general stages: row() may have no row to give).
            self._encode_all()
            return False
        self.rows.append((row, True))
        return True

    def encoded_rows(self) -> list[dict]:
        """The rows as ``RowEncoder`` encodes them (for finding a row Arrow cannot store)."""
        if self._encoded is None:
            return [self._encode(row, parsed) for row, parsed in self.rows]
        return self._encoded

    def table(self) -> pa.Table:
        if self._encoded is None:
            try:
                return self.encoder.table_of_arrays(self.plan.arrays(self._buffers))
            except Exception:  # a value its column cannot hold: the general way names it
                pass
        return self.encoder.table(self.encoded_rows())

    def _encode_all(self) -> None:
        self._encoded = [self._encode(row, parsed) for row, parsed in self.rows]
        self._buffers = {}
        self._lists = None

    def _encode(self, row: Any, parsed: bool) -> dict:
        if callable(row):  # added by add_columns
            row = row()
        return self.encoder.encode_parsed_row(row) if parsed else self.encoder.encode_row(row)
