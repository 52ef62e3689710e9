"""Mutated rows for fuzzing the readers: seeds from the real samples, mutations, files of every kind, and the
check of a load of them. Used by ``tests/test_fuzz.py`` (hypothesis drives the random choices) and
``benchmarks/fuzz_run.py`` (10,000 mutated rows per source).

Every random choice goes through one ``random.Random``, so a run is reproducible from its seed (and hypothesis
can shrink a failing example). What a file holds is decided here, not by the reader: the number of rows in
it (``FileSpec.items``: non-blank lines of a JSON Lines file, elements of a JSON array, rows of a Parquet
file, 1 for a file that is not what its extension says), and the exact numbers planted in call arguments
(``Marker``), so that a load can be checked against them:

* every row is converted or reported (with its file and row, or the whole file), and the counts add up;
* only the package's error types escape;
* map-style and streaming give the same rows and the same skip counts;
* ids are unique, and each planted number comes back with the same bits (non-finite ones are reported).
"""
from __future__ import annotations

import dataclasses
import io
import itertools
import json
import random
import re
from pathlib import Path
from typing import Any, Callable, Optional

import pyarrow as pa
import pyarrow.parquet as pq

SOURCES = ("nestful", "ms_swift", "toolmind", "llamafactory")
KINDS = ("jsonl", "json", "parquet")

# --------------------------------------------------------------------------------------------------
# Seeds: the real rows
# --------------------------------------------------------------------------------------------------

SHARED_FILES = {
    "nestful": ("nestful/third_party/AtakanTekparmak_NESTFUL_27c2028/data_v2/toy_data.jsonl",
                "nestful/third_party/reconstructed_current_v2/rows_github_native_format.jsonl",
                "nestful/third_party/reconstructed_current_v2/rows_hf_string_format.jsonl",
                "nestful/src/icl_examples.json"),
    "ms_swift": ("ms_swift/agent_support_doc_examples_en.jsonl", "ms_swift/agent_support_doc_examples_zh.jsonl",
                 "ms_swift/custom_dataset_doc_agent_rows_en.jsonl"),
}


def read_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def seed_rows(source: str, shared_dir: Optional[Path] = None) -> list[dict]:
    """The bundled sample rows of ``source`` and, where ``shared_dir`` exists, the real upstream rows in it."""
    import tooluse_datasets as td

    rows = [row for path in td.sample_files(source)["train"] for row in read_rows(Path(path))]
    if shared_dir is not None and shared_dir.exists():
        for relative in SHARED_FILES.get(source, ()):
            if (shared_dir / relative).exists():
                rows += read_rows(shared_dir / relative)
    return rows


# --------------------------------------------------------------------------------------------------
# JSON text with exact odd values
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Raw:
    """JSON text written as it is (``1e400``, ``NaN``, a value nested 1,100 deep)."""

    text: str


def to_json(value: Any, *, ascii: bool = True) -> str:
    """JSON text of ``value`` with every :class:`Raw` written verbatim."""
    raws: dict[str, str] = {}

    def swap(v):
        if isinstance(v, Raw):
            key = f"@@raw{len(raws)}@@"
            raws[key] = v.text
            return key
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value), ensure_ascii=ascii)
    for key, raw in raws.items():
        text = text.replace(f'"{key}"', raw, 1)
    return text


@dataclasses.dataclass(frozen=True)
class Marker:
    """A number planted in a call's arguments under ``key``: its JSON text and, if JSON can hold it, the
    value it must come back as (compared by type and ``repr``, so ``-0.0`` and ``0.0`` differ)."""

    key: str
    text: str
    value: Any  # None: not finite, the row must be reported

    @property
    def finite(self) -> bool:
        return self.value is not None


ODD_NUMBERS: tuple[tuple[str, Any], ...] = (
    ("NaN", None), ("Infinity", None), ("-Infinity", None), ("1e400", None), ("-1e400", None),
    ("-0.0", -0.0), ("0.1", 0.1), ("5e-324", 5e-324), ("1.7976931348623157e308", 1.7976931348623157e308),
    (str(2**63), 2**63), (str(2**63 - 1), 2**63 - 1), (str(2**64 - 1), 2**64 - 1), (str(2**70), 2**70),
    (str(-(2**80)), -(2**80)), ("3.141592653589793", 3.141592653589793), ("1e-7", 1e-7),
)


def same_number(a: Any, b: Any) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


# --------------------------------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------------------------------

WRAPPER_TAGS = ("think", "tool_call", "tool_response", "answer")
_WRAPPED = re.compile(r"^(\s*<(\w+)>\s*)(.*?)(\s*</\2>\s*)$", re.DOTALL)
_OTHER_TYPES = (None, True, 0, -1, 1.5, "", "text", [], {}, [1, "a"], {"k": "v"}, [{}])


@dataclasses.dataclass
class MutatedRow:
    value: Any                          # the native row (usually a dict)
    markers: list[Marker]
    mutations: list[str]
    line: Optional[bytes] = None        # JSON Lines only: the line's text replaced (truncated, pretty-printed...)


class Mutator:
    """Mutations of native rows, all random choices from ``rng``."""

    def __init__(self, rng: random.Random, *, huge_chars: int = 100_000, max_mutations: int = 3):
        self.rng = rng
        self.huge_chars = huge_chars
        self.max_mutations = max_mutations
        self._markers = itertools.count()

    # -- one row ---------------------------------------------------------------------------------------

    def mutate(self, source: str, row: dict) -> MutatedRow:
        rng = self.rng
        value = json.loads(json.dumps(row))  # a deep copy
        out = MutatedRow(value, [], [])
        count = 0 if rng.random() < 0.35 else rng.randint(1, self.max_mutations)  # a third stay valid rows
        for _ in range(count):
            name, op = rng.choice(self._row_ops(source))
            out.value = op(out.value)
            out.mutations.append(name)
        if rng.random() < 0.5 and isinstance(out.value, dict):
            marker = self._marker()
            planted = plant_in_arguments(source, out.value, marker, rng)
            if planted is not None:
                out.value = planted
                out.markers.append(marker)
                out.mutations.append(f"number {marker.text}")
        return out

    def _row_ops(self, source: str) -> list[tuple[str, Callable[[Any], Any]]]:
        ops = [("delete key", self._at_random(self._delete)), ("rename key", self._at_random(self._rename)),
               ("wrong type", self._at_random(self._wrong_type)), ("truncate string", self._at_random(self._truncate)),
               ("wrappers", self._at_random(self._wrappers)), ("huge string", self._at_random(self._huge)),
               ("deep nesting", self._at_random(self._deep)), ("odd number", self._at_random(self._odd_number)),
               ("lone surrogate", self._at_random(self._surrogate))]
        if source == "toolmind":
            ops.append(("split value", self._split_value))
        return ops

    def _marker(self) -> Marker:
        text, value = self.rng.choice(ODD_NUMBERS)
        return Marker(f"fz{next(self._markers)}", text, value)

    # -- choosing a node: a random descent, through JSON held in strings too ----------------------------

    def _at_random(self, op: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def apply(value):
            return self._descend(value, op, 0)
        return apply

    def _descend(self, value: Any, op, depth: int) -> Any:
        rng = self.rng
        if depth > 12 or rng.random() < 0.3:
            return op(value)
        if isinstance(value, dict) and value:
            key = rng.choice(list(value))
            return {**value, key: self._descend(value[key], op, depth + 1)}
        if isinstance(value, list) and value:
            i = rng.randrange(len(value))
            return value[:i] + [self._descend(value[i], op, depth + 1)] + value[i + 1:]
        if isinstance(value, str):
            embedded = embedded_json(value)
            if embedded is not None:
                inner, rewrap = embedded
                return rewrap(self._descend(inner, op, depth + 1))
        return op(value)

    # -- the operations (each returns the new node) ------------------------------------------------------

    def _delete(self, value):
        if isinstance(value, dict) and value:
            key = self.rng.choice(list(value))
            return {k: v for k, v in value.items() if k != key}
        if isinstance(value, list) and value:
            i = self.rng.randrange(len(value))
            return value[:i] + value[i + 1:]
        return self._wrong_type(value)

    def _rename(self, value):
        if isinstance(value, dict) and value:
            key = self.rng.choice(list(value))
            new = self.rng.choice([key.upper(), key + "_", key[:-1], "", "role", "content", "name", "arguments"])
            return {(new if k == key else k): v for k, v in value.items()}
        return self._wrong_type(value)

    def _wrong_type(self, value):
        choices = [v for v in _OTHER_TYPES if type(v) is not type(value)]
        return json.loads(json.dumps(self.rng.choice(choices)))

    def _truncate(self, value):
        if isinstance(value, str) and value:
            return value[:self.rng.randrange(len(value))]
        if isinstance(value, (dict, list)):
            text = to_json(value)
            return text[:self.rng.randrange(1, len(text))]  # JSON text cut short, held in a string
        return self._wrong_type(value)

    def _wrappers(self, value):
        if not isinstance(value, str):
            return self._wrong_type(value)
        rng = self.rng
        tag = rng.choice(WRAPPER_TAGS)
        match = _WRAPPED.match(value)
        if match:
            tag = match.group(2)
        choice = rng.randrange(6)
        if choice == 0:
            return value.replace(f"</{tag}>", "", 1)                        # unbalanced: no closing tag
        if choice == 1:
            return value.replace(f"<{tag}>", "", 1)                         # unbalanced: no opening tag
        if choice == 2:
            return f"<{tag}>{value}</{tag}>"                                # nested in itself
        if choice == 3:
            return f"<{tag}></{tag}>"                                       # empty
        if choice == 4:
            other = rng.choice([t for t in WRAPPER_TAGS if t != tag])
            return value.replace(f"<{tag}>", f"<{other}>", 1)               # mismatched
        return f"{value}<{tag}>{value}</{tag}>"                             # two blocks

    def _huge(self, value):
        text = value if isinstance(value, str) and value else "x"
        return (text * (self.huge_chars // len(text) + 1))[:self.huge_chars]

    def _deep(self, value):
        depth = self.rng.choice((600, 1100))
        inner = "1" if self.rng.random() < 0.5 else to_json(value if isinstance(value, (int, str)) else 1)
        if self.rng.random() < 0.5:
            return Raw("[" * depth + inner + "]" * depth)
        return Raw('{"a":' * depth + inner + "}" * depth)

    def _odd_number(self, value):
        text, _ = self.rng.choice(ODD_NUMBERS)
        return Raw(text)

    def _surrogate(self, value):
        text = value if isinstance(value, str) else "x"
        i = self.rng.randrange(len(text) + 1)
        return text[:i] + self.rng.choice(("\ud800", "\udfff", "\udc80")) + text[i:]

    def _split_value(self, row):
        if not isinstance(row, dict):
            return row
        value = self.rng.choice(("tau_train", "tau-train", None, "unlabeled", "", "'", "x" * 300, "a/b", "Ünï",
                                 5, ["a"], {"s": 1}, True, "synthetic"))
        return {**row, "split": value}

    # -- line-level changes (JSON Lines) -------------------------------------------------------------------

    def line_for(self, row: MutatedRow, *, ascii: bool) -> bytes:
        """The JSON Lines text of a row, sometimes broken as a line: truncated, pretty-printed over several
        lines, with text after it, or not an object."""
        text = encode_text(to_json(row.value, ascii=ascii))
        choice = self.rng.randrange(24)
        if choice == 0 and len(text) > 1:
            row.mutations.append("truncated line")
            return text[:self.rng.randrange(1, len(text))]
        if choice == 1 and isinstance(row.value, dict):  # one top-level key per line
            row.mutations.append("pretty-printed line")
            keys = [f"{json.dumps(k, ensure_ascii=ascii)}: {to_json(v, ascii=ascii)}" for k, v in row.value.items()]
            return encode_text("{\n" + ",\n".join(keys) + "\n}")
        if choice == 2:
            row.mutations.append("text after the object")
            return text + b" trailing"
        if choice == 3:
            row.mutations.append("not an object")
            return encode_text(to_json(self.rng.choice([[row.value], "row", 7, None])))
        return text


def encode_text(text: str) -> bytes:
    """UTF-8, lone surrogates included as their (invalid) UTF-8 bytes."""
    return text.encode("utf-8", "surrogatepass")


def embedded_json(text: str) -> Optional[tuple[Any, Callable[[Any], str]]]:
    """``(value, rewrap)`` when ``text`` holds a JSON object or array, bare or in a ``<tag>...</tag>`` wrapper
    (ms-swift call contents, ToolMind messages and calls, NESTFUL's string columns); None otherwise."""
    match = _WRAPPED.match(text)
    prefix, body, suffix = (match.group(1), match.group(3), match.group(4)) if match else ("", text, "")
    stripped = body.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if _depth(value) > 100:  # planted deep nesting: kept as text (Python would recurse past its limit)
        return None
    ascii = stripped.isascii()
    return value, lambda new: prefix + to_json(new, ascii=ascii) + suffix


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((x, depth + 1) for x in (item.values() if isinstance(item, dict) else item))
    return deepest


# --------------------------------------------------------------------------------------------------
# Numbers planted in call arguments, per source
# --------------------------------------------------------------------------------------------------


def plant_in_arguments(source: str, row: dict, marker: Marker, rng: random.Random) -> Optional[dict]:
    """``row`` with ``marker`` added to the arguments of one of its calls (None if it has no call the
    mutations left readable)."""
    raw = Raw(marker.text)

    def into_call(call: Any) -> Optional[Any]:
        if isinstance(call, dict) and isinstance(call.get("arguments"), dict):
            return {**call, "arguments": {**call["arguments"], marker.key: raw}}
        return None

    def into_text(text: Any) -> Optional[str]:  # a call held as (wrapped) JSON text
        if not isinstance(text, str):
            return None
        embedded = embedded_json(text)
        if embedded is None:
            return None
        value, rewrap = embedded
        planted = into_call(value)
        return rewrap(planted) if planted is not None else None

    def first_planted(items: list, plant: Callable[[Any], Any]) -> Optional[list]:
        order = list(range(len(items)))
        rng.shuffle(order)
        for i in order:
            planted = plant(items[i])
            if planted is not None:
                return items[:i] + [planted] + items[i + 1:]
        return None

    if source == "nestful":
        output = row.get("output")
        if isinstance(output, str):
            embedded = embedded_json(output)
            if embedded is None or not isinstance(embedded[0], list):
                return None
            planted = first_planted(embedded[0], into_call)
            return None if planted is None else {**row, "output": embedded[1](planted)}
        if isinstance(output, list):
            planted = first_planted(output, into_call)
            return None if planted is None else {**row, "output": planted}
        return None
    # column of turns, the key naming a turn's kind, the call turns' kind, the key of their text
    turn_layouts = {"ms_swift": ("messages", "role", "tool_call", "content"),
                    "llamafactory": ("conversations", "from", "function_call", "value")}
    if source in turn_layouts:
        column, kind_key, call_kind, text_key = turn_layouts[source]
        turns = row.get(column)
        if not isinstance(turns, list):
            return None
        plant = lambda m: ({**m, text_key: t} if isinstance(m, dict) and m.get(kind_key) == call_kind
                           and (t := into_text(m.get(text_key))) is not None else None)
        planted = first_planted(turns, plant)
        return None if planted is None else {**row, column: planted}
    if source == "toolmind":
        embedded = embedded_json(row["messages"]) if isinstance(row.get("messages"), str) else None
        if embedded is None or not isinstance(embedded[0], list):
            return None
        plant = lambda m: ({**m, "content": t} if isinstance(m, dict) and m.get("role") == "tool_call"
                           and (t := into_text(m.get("content"))) is not None else None)
        planted = first_planted(embedded[0], plant)
        return None if planted is None else {**row, "messages": embedded[1](planted)}
    raise ValueError(source)


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class FileSpec:
    """A written file: how many rows (reader items) it holds, and where each generated row landed."""

    path: str
    kind: str                                    # jsonl, json, parquet: what the content is read as
    items: int                                   # rows in it (1 for a file reported as a whole)
    row_span: int = 0                            # row numbers are below this (JSON Lines: lines, blank included)
    whole_file_error: bool = False               # not what its extension says, or not readable at all
    file_field: str = "<file>"                   # the field its whole-file error names
    row_of: list[Optional[int]] = dataclasses.field(default_factory=list)  # file row of each generated row
    markers: dict[int, list[Marker]] = dataclasses.field(default_factory=dict)  # by file row
    mutations: dict[int, list[str]] = dataclasses.field(default_factory=dict)   # by file row
    generated: int = 0                           # mutated rows written into it
    shared_ids: set = dataclasses.field(default_factory=set)  # NESTFUL sample_ids given to several rows


def write_file(folder: Path, stem: str, kind: str, rows: list[MutatedRow], mutator: Mutator, *,
               oddities: bool = True) -> FileSpec:
    """Write ``rows`` as a ``kind`` file, with file-level variations chosen by the mutator's rng: a BOM, CRLF
    line ends, blank lines, JSON Lines saved as ``.json``, a JSON array with text after it, a bad token in
    one element or its last element cut short, an empty file, or content that is not what the extension
    says."""
    rng = mutator.rng
    oddity = rng.randrange(20) if oddities else -1
    path = folder / f"{stem}.{kind}"
    other = rng.choice([k for k in KINDS if k != kind]) if oddity == 0 else None
    if (kind, other) == ("json", "jsonl"):
        oddity = 2  # JSON Lines in a .json file: read as lines, a variation rather than an error (below)
    if oddity == 0:  # content of another kind
        inner = write_file(folder, f"{stem}-inner", other, rows, mutator, oddities=False)
        content = Path(inner.path).read_bytes()
        Path(inner.path).unlink()
        path.write_bytes(content)
        if "parquet" in (kind, other):  # JSON named .parquet, Parquet named .json(l): one file error
            return FileSpec(str(path), other, 1, whole_file_error=True, generated=len(rows))
        # a JSON array in a .jsonl file: read as lines, every line a (bad) row
        return FileSpec(str(path), "jsonl", count_lines(content), row_span=content.count(b"\n") + 1,
                        generated=len(rows))
    if oddity == 1:  # empty: no rows (an empty .parquet is not Parquet)
        path.write_bytes(b"")
        return FileSpec(str(path), kind, int(kind == "parquet"), whole_file_error=kind == "parquet")  # no row
    if kind == "parquet":
        path.write_bytes(parquet_bytes([r.value for r in rows], rng))
        return FileSpec(str(path), kind, len(rows), len(rows), generated=len(rows), row_of=list(range(len(rows))),
                        markers={i: r.markers for i, r in enumerate(rows) if r.markers},
                        mutations={i: r.mutations for i, r in enumerate(rows)})
    ascii = rng.random() < 0.5  # lone surrogates as escapes (ascii) or as invalid UTF-8 bytes
    newline = b"\r\n" if rng.random() < 0.2 else b"\n"
    bom = b"\xef\xbb\xbf" if rng.random() < 0.1 else b""
    if kind == "jsonl" or oddity == 2:  # JSON Lines (oddity 2: saved as .json)
        return _write_lines(path, rows, mutator, ascii=ascii, newline=newline, bom=bom, as_document=kind == "json")
    return _write_array(path, rows, oddity, ascii=ascii, newline=newline, bom=bom, rng=rng)


def _write_lines(path: Path, rows: list[MutatedRow], mutator: Mutator, *, ascii: bool, newline: bytes, bom: bytes,
                 as_document: bool) -> FileSpec:
    rng = mutator.rng
    entries: list[tuple[Optional[int], bytes]] = []  # (generated row, its text; None: a blank line)
    for i, r in enumerate(rows):
        if rng.random() < 0.1:
            entries.append((None, b""))
        entries.append((i, mutator.line_for(r, ascii=ascii)))
    first = next((text for _, text in entries if text.strip()), b"")
    if as_document and first.lstrip().startswith(b"["):
        entries.insert(0, (None, b"{}"))  # a .json file starting with '[' would be read as an array
    lines = [text for _, text in entries]
    content = bom + newline.join(lines) + (newline if rng.random() < 0.8 else b"")
    path.write_bytes(content)
    row_of: list[Optional[int]] = [None] * len(rows)
    line = 0
    for i, text in entries:  # row numbers are line numbers, blank lines included; an entry may span lines
        if i is not None:
            row_of[i] = line
        line += text.count(b"\n") + 1
    read_as = _json_file_read_as(content.removeprefix(bom)) if as_document else "lines"
    if read_as == "object":
        # One object written over several lines (a pretty-printed row alone in the file): a .json file holding
        # one object is one row, numbered 0.
        (i, _), = [e for e in entries if e[0] is not None]
        return FileSpec(str(path), "json", 1, row_span=1, generated=len(rows), row_of=[0],
                        markers={0: rows[i].markers} if rows[i].markers else {}, mutations={0: rows[i].mutations})
    if read_as == "error":  # taken for one object over several lines that does not parse: one error, row 0
        return FileSpec(str(path), "json", 1, row_span=1, generated=len(rows),
                        mutations={0: [m for r in rows for m in r.mutations]})
    unconverted = ("truncated line", "not an object", "pretty-printed line", "text after the object")
    return FileSpec(str(path), "jsonl", count_lines(content), row_span=line + 1, generated=len(rows), row_of=row_of,
                    markers={row_of[i]: r.markers for i, r in enumerate(rows)
                             if r.markers and not any(m in r.mutations for m in unconverted)},
                    mutations={row_of[i]: r.mutations for i, r in enumerate(rows)})


def _json_file_read_as(text: bytes) -> str:
    """How the reader takes a .json file that is no JSON array: ``"object"``, one object written over several
    lines (its first line is no JSON value of its own, even to Python's json, and the whole text is one object,
    parsed as the reader parses: no NaN, nesting as deep as it allows); ``"error"``, such a first line, a text that
    is not one object, and none of the next 64 lines an object of its own (one error for the file); else
    ``"lines"`` (JSON Lines)."""
    from tooluse_datasets.codec import try_loads

    text = text.lstrip()
    first = text.split(b"\n", 1)[0]
    if not text.startswith(b"{") or try_loads(first)[0]:
        return "lines"
    try:
        json.loads(first, parse_int=str)  # (integers past Python's digit limit too)
        return "lines"  # a bad row of JSON Lines (NaN, -Infinity...), whole on its line
    except (ValueError, RecursionError):
        pass
    if isinstance(try_loads(text)[1], dict):
        return "object"
    later = [line for line in text.split(b"\n")[1:] if line.strip()][:64]
    return "lines" if not later or any(isinstance(try_loads(line)[1], dict) for line in later) else "error"


def _write_array(path: Path, rows: list[MutatedRow], oddity: int, *, ascii: bool, newline: bytes, bom: bytes,
                 rng: random.Random) -> FileSpec:
    elements = [encode_text(to_json(r.value, ascii=ascii)) for r in rows]
    markers = {i: r.markers for i, r in enumerate(rows) if r.markers}
    mutations = {i: list(r.mutations) for i, r in enumerate(rows)}
    items, closing, tail = len(elements), b"]", b""
    if elements and oddity == 3:  # the file ends inside its last element
        last = elements[-1]
        elements[-1] = last[:rng.randrange(1, len(last))] if len(last) > 1 else b"{"
        closing = b""
        markers.pop(len(elements) - 1, None)
        mutations[len(elements) - 1].append("cut last element")
    elif oddity == 4:  # text after the array: one more (bad) item
        tail, items = b" trailing", items + 1
    if elements and oddity == 5:  # one element with a token JSON does not allow (still delimitable)
        i = rng.randrange(len(elements))
        elements[i] = rng.choice([b'{"a": tru}', b'{"a": NaN}', b'{"a": 1e400}', b'{"a": "\\ud800"}', b"{,}"])
        markers.pop(i, None)
        mutations[i].append("bad element")
    path.write_bytes(bom + b"[" + (b"," + newline).join(elements) + closing + tail + newline)
    return FileSpec(str(path), "json", items, row_span=items, generated=len(rows), row_of=list(range(len(rows))),
                    markers=markers, mutations=mutations)


def count_lines(content: bytes) -> int:
    """Rows of a JSON Lines text as the format defines them: lines with something besides whitespace."""
    if content.startswith(b"\xef\xbb\xbf"):
        content = content[3:]
    return sum(1 for line in content.split(b"\n") if line.strip())


def parquet_bytes(rows: list[Any], rng: random.Random) -> bytes:
    """A Parquet file of ``rows`` (dicts; anything else becomes ``{"value": ...}``). A column whose values
    Arrow cannot put in one type is written as JSON text; text with lone surrogates as invalid UTF-8."""
    rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
    columns: dict[str, list] = {}
    for r in rows:
        for k in r:
            columns.setdefault(k, [])
    for name in columns:
        columns[name] = [r.get(name) for r in rows]
    arrays = {}
    for name, values in columns.items():
        arrays[name] = _arrow_column(values)
    table = pa.table(arrays) if arrays else pa.table({"value": pa.nulls(len(rows))})
    row_group_size = rng.choice((1, 2, 4, 1000))
    buffer = io.BytesIO()
    try:
        pq.write_table(table, buffer, row_group_size=row_group_size)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. a struct without fields ({} cells)
        buffer = io.BytesIO()
        table = pa.table({name: _text_column(values) for name, values in columns.items()})
        pq.write_table(table, buffer, row_group_size=row_group_size)
    return buffer.getvalue()


def _has_raw(value: Any) -> bool:
    if isinstance(value, Raw):
        return True
    if isinstance(value, dict):
        return any(_has_raw(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_raw(v) for v in value)
    return False


def _arrow_column(values: list) -> pa.Array:
    if not any(_has_raw(v) for v in values):
        try:
            return pa.array(values)
        except Exception:  # noqa: BLE001 - whatever Arrow cannot type is written as text
            pass
    return _text_column(values)


def _text_column(values: list) -> pa.Array:
    texts = [None if v is None else v if isinstance(v, str) else to_json(v) for v in values]
    return pa.array([None if t is None else encode_text(t) for t in texts], pa.binary()).view(pa.string())


# --------------------------------------------------------------------------------------------------
# A fuzz case: files of mutated rows
# --------------------------------------------------------------------------------------------------


def make_files(source: str, seeds: list[dict], folder: Path, rng: random.Random, *, files: int, rows_per_file: int,
               huge_chars: int = 100_000, row_counts: Optional[list[int]] = None) -> list[FileSpec]:
    """``files`` files of ``0..rows_per_file`` mutated rows each (or ``row_counts[i]`` rows in file ``i``), of
    random kinds. NESTFUL rows get a ``sample_id`` naming their file and generated row (``<f000~3>``); one in
    ten repeats an earlier row's."""
    mutator = Mutator(rng, huge_chars=huge_chars)
    specs = []
    for f in range(files):
        kind = rng.choice(KINDS)
        stem = f"f{f:03d}"
        count = row_counts[f] if row_counts is not None else rng.randint(0, rows_per_file)
        chosen = [dict(rng.choice(seeds)) for _ in range(count)]
        repeats = set()
        if source == "nestful":
            for i, row in enumerate(chosen):
                if i and rng.random() < 0.1:
                    row["sample_id"] = chosen[rng.randrange(i)]["sample_id"]
                    repeats.add(i)
                else:
                    row["sample_id"] = f"<{stem}~{i}>"
        rows = [mutator.mutate(source, row) for row in chosen]
        for i in repeats:
            rows[i].mutations.append("repeated sample_id")
        spec = write_file(folder, stem, kind, rows, mutator)
        refused = _refused_column(spec) if source == "toolmind" else None
        if refused is not None:  # one error for the file, naming the column (README, ToolMind's split column)
            spec.items, spec.whole_file_error, spec.file_field = 1, True, refused
        ids = [row.get("sample_id") for row in chosen]  # as given, before the mutations
        spec.shared_ids = {i for i in ids if ids.count(i) > 1}
        specs.append(spec)
    return specs


def _refused_column(spec: FileSpec) -> Optional[str]:
    """The column a ToolMind Parquet file is refused for as a whole: a ``split`` column that is not text, or a
    ``messages`` column that is neither text nor lists of message structs."""
    if spec.kind != "parquet" or spec.whole_file_error:
        return None
    schema = pq.read_schema(spec.path)

    def text(t: pa.DataType) -> bool:
        t = t.value_type if pa.types.is_dictionary(t) else t
        return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t) or pa.types.is_binary(t)

    def last(name: str) -> pa.DataType:  # of two columns of a name, the last is read
        return schema.field(schema.get_all_field_indices(name)[-1]).type

    if "split" in schema.names and not text(last("split")):
        return "split"
    if "messages" in schema.names:
        messages = last("messages")
        if not (text(messages) or (pa.types.is_list(messages) and (pa.types.is_struct(messages.value_type)
                                                                     or pa.types.is_null(messages.value_type)))):
            return "messages"
    return None


# --------------------------------------------------------------------------------------------------
# Checking a load
# --------------------------------------------------------------------------------------------------

_ROW_ID = {
    "ms_swift": re.compile(r"^ms_swift/(?P<stem>[^/]+)/(?P<row>\d+)$"),
    "llamafactory": re.compile(r"^llamafactory/(?P<stem>[^/]+)/(?P<row>\d+)$"),
    "toolmind": re.compile(r"^toolmind/.*/(?P<stem>f\d{3})/(?P<row>\d+)$"),
}
_NESTFUL_ID = re.compile(r"^<(?P<stem>f\d{3})~(?P<index>\d+)>$")


@dataclasses.dataclass
class LoadResult:
    """One load (map-style or streaming) of a fuzz case."""

    rows: list[dict] = dataclasses.field(default_factory=list)
    rows_read: int = 0
    skipped: int = 0
    by_reason: dict = dataclasses.field(default_factory=dict)
    reported: list[dict] = dataclasses.field(default_factory=list)  # every skipped row
    error: Optional[BaseException] = None


def load_case(source: str, files: list[FileSpec], *, streaming: bool, cache_dir: Optional[str] = None,
              **options) -> LoadResult:
    import tooluse_datasets as td

    report = td.SkipReport(keep_all=True)
    out = LoadResult()
    try:
        splits = td.load(source, data_files=[f.path for f in files], on_error="skip", report=report,
                         streaming=streaming, cache_dir=cache_dir, **options)
        for ds in splits.values():
            out.rows.extend(ds)
    except Exception as exc:  # noqa: BLE001 - what escapes is what the check judges
        out.error = exc
    out.rows_read, out.skipped, out.by_reason = report.rows_read, report.skipped, dict(report.by_reason)
    out.reported = list(report.rows)
    return out


@dataclasses.dataclass
class CaseCheck:
    """What a fuzz case's load gave, against what its files hold."""

    items: int = 0                  # rows in the files (what must be converted or reported)
    converted: int = 0
    reported: int = 0
    file_errors: int = 0            # whole files reported as one error (row None, field <file> or the column)
    escaped: int = 0                # rows lost to an exception that is not the package's (raw traceback)
    typed_failures: int = 0         # rows lost to a typed error that stopped the whole load
    numbers_checked: int = 0        # planted numbers found in converted rows (or proven reported)
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def unaccounted(self) -> int:
        if self.escaped or self.typed_failures:
            return 0
        return self.items - self.converted - self.reported


def check_case(source: str, files: list[FileSpec], mapped: LoadResult, streamed: LoadResult) -> CaseCheck:
    """The properties of a fuzz case (see the module docstring); ``problems`` lists every breach."""
    from tooluse_datasets.codec import json_bytes
    from tooluse_datasets.errors import DataNotFoundError, ToolUseDataError

    check = CaseCheck(items=sum(f.items for f in files))
    for mode, result in (("map-style", mapped), ("streaming", streamed)):
        if result.error is not None:
            typed = isinstance(result.error, (ToolUseDataError, DataNotFoundError))
            if mode == "map-style":
                if typed:
                    check.typed_failures = check.items
                else:
                    check.escaped = check.items
            if not typed:
                check.problems.append(f"{mode}: {type(result.error).__name__} escaped: {result.error}"[:500])
    if mapped.error is not None or streamed.error is not None:
        if type(mapped.error) is not type(streamed.error):
            check.problems.append(f"map-style raised {mapped.error!r:.200}, streaming {streamed.error!r:.200}")
        return check

    check.converted, check.reported = len(mapped.rows), mapped.skipped
    paths = {f.path: f for f in files}
    check.file_errors = sum(1 for r in mapped.reported if r["row"] is None and r["file"] in paths
                            and r["field"] in ("<file>", paths[r["file"]].file_field))
    # counts add up
    if mapped.rows_read != check.items:
        check.problems.append(f"rows_read {mapped.rows_read} != {check.items} rows in the files")
    if len(mapped.rows) + mapped.skipped != mapped.rows_read:
        check.problems.append(f"{len(mapped.rows)} converted + {mapped.skipped} skipped != {mapped.rows_read} read")
    # streaming and map-style agree, bit for bit
    if [json_bytes(r) for r in mapped.rows] != [json_bytes(r) for r in streamed.rows]:
        check.problems.append("map-style and streaming rows differ")
    if (mapped.rows_read, mapped.skipped, mapped.by_reason) != (streamed.rows_read, streamed.skipped,
                                                                streamed.by_reason):
        check.problems.append(f"skip reports differ: map-style {mapped.rows_read}/{mapped.skipped} "
                              f"{mapped.by_reason}, streaming {streamed.rows_read}/{streamed.skipped} "
                              f"{streamed.by_reason}")
    # every skipped row names its file and row (or is its whole file) and a reason
    reported_at = set()
    for r in mapped.reported:
        spec = paths.get(r["file"])
        if spec is None or not r.get("reason") or not r.get("message"):
            check.problems.append(f"skipped row without file or reason: {r}"[:300])
        elif r["row"] is None:
            if r["field"] not in ("<file>", spec.file_field):
                check.problems.append(f"skipped row without a row number: {r}"[:300])
        elif not 0 <= r["row"] < spec.row_span:  # the numbers the writer gave the file's rows
            check.problems.append(f"skipped row number out of range: {r}"[:300])
        else:
            key = (r["file"], r["row"])
            if key in reported_at:
                check.problems.append(f"row reported twice: {key}")
            reported_at.add(key)
    # ids are unique; converted rows are not also reported; planted numbers come back exactly
    # NESTFUL ids are unique within a file (a repeat gets '#<row>'); the same sample_id in two files names the
    # same upstream sample, so across files only the generator's ids (which name their file) must differ.
    ids = [r["id"] for r in mapped.rows
           if source != "nestful" or _NESTFUL_ID.match(str((r.get("meta") or {}).get("sample_id", "")))]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        check.problems.append(f"duplicate ids: {dupes[:5]}")
    by_stem = {Path(f.path).stem: f for f in files}
    for row in mapped.rows:
        where = _origin(source, row, by_stem)
        if where is None:
            continue
        spec, number = where
        if number is not None and (spec.path, number) in reported_at:
            check.problems.append(f"{row['id']} converted and reported")
        for marker in spec.markers.get(number, []) if number is not None else []:
            check.numbers_checked += 1
            found = _find_argument(row, marker.key)
            if not marker.finite:
                if found is not _MISSING:
                    check.problems.append(f"{row['id']}: {marker.text} converted to {found!r}")
            elif found is _MISSING:
                check.problems.append(f"{row['id']}: planted {marker.text} is gone")
            elif not same_number(found, marker.value):
                check.problems.append(f"{row['id']}: {marker.text} came back as {found!r}")
    return check


_MISSING = object()


def _origin(source: str, row: dict, by_stem: dict[str, FileSpec]) -> Optional[tuple[FileSpec, Optional[int]]]:
    """The file and row number a converted row came from, where its id says so."""
    if source == "nestful":
        # nestful/<domain>/<sample_id>, '#<row>' added to a repeated id; the sample_id names the generated row
        match = _NESTFUL_ID.match(str((row.get("meta") or {}).get("sample_id", "")))
        spec = by_stem.get(match.group("stem")) if match else None
        if spec is None:
            return None
        suffix = re.search(r"#(\d+)$", row["id"])
        if suffix:
            return spec, int(suffix.group(1))
        index = int(match.group("index"))
        shared = row["meta"]["sample_id"] in spec.shared_ids
        return (spec, spec.row_of[index]) if index < len(spec.row_of) and not shared else None
    match = _ROW_ID[source].match(row["id"])
    if match is None:
        if source == "toolmind" and len(by_stem) == 1:  # one file: toolmind/<split>/<row>
            number = re.search(r"/(\d+)$", row["id"])
            return (next(iter(by_stem.values())), int(number.group(1))) if number else None
        return None
    spec = by_stem.get(match.group("stem"))
    return None if spec is None else (spec, int(match.group("row")))


def _find_argument(row: dict, key: str) -> Any:
    for message in row["messages"]:
        for call in message.get("tool_calls") or []:
            arguments = call["function"]["arguments"]
            if isinstance(arguments, dict) and key in arguments:
                return arguments[key]
    return _MISSING
