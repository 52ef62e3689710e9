"""Typed errors that name the file, row and field, and the skip report used when ``on_error="skip"``.

Bad input never crashes with a bare traceback and never disappears silently: readers raise a
:class:`ToolUseDataError` subclass carrying ``file``, ``row`` and ``field``; with ``on_error="skip"`` the
row is dropped, counted in a :class:`SkipReport` and logged.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Literal, Optional

logger = logging.getLogger("tooluse_datasets")

OnError = Literal["raise", "skip"]
ON_ERROR_VALUES = ("raise", "skip")


# Messages quote the data (a tool name, an argument key): printed as plain text on a terminal (the lines of
# `validate`, `export`'s skipped rows, error and log lines), a control character in them (an ESC starting a
# sequence that clears the screen or sets the window title, a carriage return, a C1 CSI) would act on the
# terminal. Every control character but the line break and the tab is written as its escape (\u001b).
# Bidirectional overrides and isolates (U+202A-202E, U+2066-2069) are escaped too: on a terminal that applies
# them, a tool name holding one reverses the text after it ("Trojan source").
BIDI_CONTROLS = (*range(0x202a, 0x202f), *range(0x2066, 0x206a))
_PLAIN_CONTROLS = {c: f"\\u{c:04x}" for c in [*range(0x20), *range(0x7f, 0xa0), *BIDI_CONTROLS]
                   if chr(c) not in "\n\t"}
_CONTROL_CHARS = frozenset(map(chr, _PLAIN_CONTROLS))

# Messages quote the data with Python's repr (``{name!r}``), which writes the same characters ``\x1b``, ``\x9b``,
# ``\r``: inside a quoted string such an escape is written as the rest are (``\u001b``), so that a line quoting a
# value and a table showing it say the same. Only quoted strings are rewritten (a path such as ``C:\x86\a.jsonl``
# printed as it is stays), and an escape is read as Python writes it (``\\x1b`` is a backslash, then "x1b").
# (QUOTED_STRING: a string as repr or JSON writes it, quotes and escapes included)
QUOTED_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'" "|" r'"(?:[^"\\\n]|\\.)*"')
_ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|.)")


def _unified_escape(escape: re.Match) -> str:
    text = escape.group()
    if text == "\\r":
        return "\\u000d"
    if text[1] == "x" and chr(int(text[2:], 16)) in _CONTROL_CHARS:
        return "\\u00" + text[2:]
    return text


def _unify_quoted(quoted: re.Match) -> str:
    return _ESCAPE.sub(_unified_escape, quoted.group())


def escape_controls(text: str) -> str:
    """``text`` with its control characters written as visible escapes (``\\u001b``): data shown as it is."""
    return text.translate(_PLAIN_CONTROLS)


def plain_printable(text: Any) -> str:
    """A line of the package's (an error, a skipped row, a table) safe to print as plain text on a terminal:
    control characters written as visible escapes, those of the strings it quotes (repr) the same way."""
    text = str(text)
    if "\\" in text:
        text = QUOTED_STRING.sub(_unify_quoted, text)
    return escape_controls(text)


def one_line(text: Any) -> str:
    """``text`` for one line of a printed table: its line breaks written as visible escapes too (a detail quoting a
    multi-line message would otherwise print lines that read as other rows of the table)."""
    # (U+2028 and U+2029 separate lines as well for editors and for Python's str.splitlines reading the output)
    return str(text).translate(_LINE_BREAKS)


_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\r\n\u2028\u2029"}


def raised_within(exc: Optional[BaseException], kind: type) -> Optional[BaseException]:
    """The first exception of type ``kind`` that ``exc`` is or was raised from or while handling (its cause and
    context chain), or None: what a wrapper (a library's own error, Python's RuntimeError around an interrupt
    in ``__set_name__``) hides."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def json_kind(value: Any) -> str:
    """A value's JSON type as messages name it (``object``, ``array``, ``null``...), not Python's name for it.
    A value that is no JSON value (a Parquet binary cell) is named as what it holds, or by its type."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary data"
    for kind, name in ((dict, "object"), ((list, tuple), "array"), (str, "string"), (type(None), "null")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def as_json(value: Any, limit: int = 80) -> str:
    """A value of the user's data as a validation finding quotes it: as JSON writes it (``"get"``, ``true``,
    ``null``, ``{"x": 1}``, not Python's ``'get'``, ``True``, ``None``, ``{'x': 1}``), the form the user's rows
    hold, cut after ``limit`` characters (a 5,000-digit number or a deeply nested value stays short); a value JSON
    cannot write is named by its kind."""
    try:
        text = json.dumps(value[:limit + 1] if isinstance(value, str) else value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):  # no JSON value, or one Python cannot write
        return json_kind(value)
    return cut(text, limit)


def cut(text: str, limit: int = 80) -> str:
    """``text`` cut after ``limit`` characters: user data a finding writes unquoted (a called tool's name, a
    reference) is cut as quoted values are, so a long one does not fill the message and cut off what is wrong."""
    return text if len(text) <= limit else text[:limit] + "..."


def shown(value: Any, limit: int = 80) -> str:
    """A value of the user's data quoted in a reader's message: a string quoted as the messages quote names
    (``'get'``), any other value as JSON writes it (:func:`as_json`)."""
    if isinstance(value, str):
        return cut(repr(value[:limit + 1]), limit)
    return as_json(value, limit)


class ToolUseDataError(ValueError):
    """A row of source data that cannot be read or converted. ``str()`` names file, row and field."""

    def __init__(self, message: str, *, file: Optional[str] = None, row: Optional[int] = None,
                 field: Optional[str] = None, source: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.row = row
        self.field = field
        self.source = source

    def at(self, *, file: Optional[str] = None, row: Optional[int] = None, field: Optional[str] = None,
           source: Optional[str] = None) -> "ToolUseDataError":
        """Fill in location parts that are still unknown (inner code knows the field, outer the file)."""
        if file is not None and self.file is None:
            self.file = file
        if row is not None and self.row is None:
            self.row = row
        if field is not None:
            self.field = field if self.field is None else f"{field}.{self.field}"
        if source is not None and self.source is None:
            self.source = source
        return self

    def read_from(self, input_field: Optional[str]) -> None:
        """Name ``input_field``, where the row as read held what the unified field a writer named holds (see
        ``Source.input_field``), the unified field kept in the message. Named from the unified field however many
        callers name it (the writer called alone, then the converter that knows the source's options)."""
        unified = getattr(self, "unified_field", None) or self.field
        if input_field is None or input_field == unified:
            return
        if getattr(self, "unified_field", None) is None:
            self.message = f"{self.message} (the unified row's {unified})"
            self.args = (self.message,)
            self.unified_field = unified
        self.field = input_field

    @property
    def reason(self) -> str:
        """What a skip report counts this error under: its type and field."""
        return f"{type(self).__name__}:{self.field or '-'}"

    @property
    def location(self) -> str:
        """Source, file, row and field, each where known; a row named by its unified id (``row_id``: rows dropped by
        validation or execution, or refused by a row rewrite such as ``td.drop_trailing_results``) has it first, in
        place of the source (the id starts with the source's name)."""
        row_id = getattr(self, "row_id", None)
        parts = []
        if row_id is not None:
            parts.append(f"row id {row_id!r}")
        elif self.source:
            parts.append(self.source)
        if self.file:
            parts.append(str(self.file))
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts)

    def __str__(self) -> str:
        where = self.location
        return f"{where}: {self.message}" if where else self.message

    def __reduce__(self):  # keep the location across processes (num_proc, DataLoader workers)
        return _rebuild_error, (type(self), self.message, self.file, self.row, self.field, self.source), \
            {"row_id": getattr(self, "row_id", None)}


def _rebuild_error(cls, message, file, row, field, source):
    return cls(message, file=file, row=row, field=field, source=source)


class InvalidJsonError(ToolUseDataError):
    """Text that should be JSON is not (truncated, malformed)."""


class MissingFieldError(ToolUseDataError):
    """A required field is absent or null."""


class InvalidValueError(ToolUseDataError):
    """A field is present but its value breaks the format (wrong type, unknown role, bad wrapper...)."""


def wrapped_rows_error(row: dict, keys: tuple[str, ...]) -> Optional[InvalidValueError]:
    """The error for an object that holds rows instead of being one: it has none of ``keys`` (what a row of the
    source has), but under another key a list of objects that have them, as a JSON file written
    ``{"version": 1, "data": [row, ...]}`` is read (one object, one row). datasets' json builder reads such rows
    with ``field="data"``; here the object is refused naming that key, where it would otherwise be one bogus row
    refused for a missing field, its rows never counted. None for an object that is no such wrapper."""
    if any(key in row for key in keys):
        return None
    for name, value in row.items():
        if isinstance(value, list) and any(isinstance(v, dict) and any(k in v for k in keys) for v in value):
            return InvalidValueError(
                f"the row has no {keys[0]!r} but its {name!r} holds a list of {len(value)} rows: rows wrapped in "
                f"an object are not read (a JSON object is one row); make them the file's top-level array (the "
                f"list in {name!r} alone) or its lines (JSON Lines)", field=name)
    return None


class UndefinedReferenceError(ToolUseDataError):
    """A call refers to the output of a call that does not exist (or comes later)."""


class UnknownToolError(ToolUseDataError):
    """A call names a tool that is not in the row's tool catalog."""


class JsonValueError(ToolUseDataError):
    """A value JSON cannot hold exactly (NaN, infinity, non-string key, non-JSON type)."""


class ConversionError(ToolUseDataError):
    """A unified row cannot be written in a target format without losing or inventing data."""


class RuleViolationError(ToolUseDataError):
    """A unified row breaks a validation rule chosen with ``load(..., validate=...)``; ``rule`` is its id."""

    def __init__(self, message: str, *, rule: str, row_id: Optional[str] = None, **location: Any):
        super().__init__(message, **location)
        self.rule = rule
        self.row_id = row_id

    @property
    def reason(self) -> str:  # counted by rule, not by field: one reason per rule, whatever the row
        return f"{type(self).__name__}:{self.rule}"

    def __reduce__(self):
        return _rebuild_rule_violation, (self.message, self.rule, self.row_id, self.file, self.row, self.field,
                                         self.source)


def _rebuild_rule_violation(message, rule, row_id, file, row, field, source):
    return RuleViolationError(message, rule=rule, row_id=row_id, file=file, row=row, field=field, source=source)


class ExecutionError(ToolUseDataError):
    """Executing a row's calls failed or the sandbox stopped it; the message starts with the reason
    (``network``, ``timeout``, ``exception``...; see the NESTFUL execution section of the README). ``row_id``:
    the unified id of the row executed, where known."""

    def __init__(self, message: str, *, row_id: Optional[str] = None, **location: Any):
        super().__init__(message, **location)
        self.row_id = row_id

    @property
    def failure(self) -> str:
        """Why the execution failed: the message's leading reason (``network``, ``timeout``, ``no_gold``...). (Not
        named ``cause``: Ray sets that attribute on the error it raises for a task's, also one of this type.)"""
        head, sep, _ = self.message.partition(": ")
        return head if sep and head and " " not in head else "-"

    @property
    def reason(self) -> str:  # counted by why it failed, not by the call that failed (output[0], output[3]...)
        return f"{type(self).__name__}:{self.failure}"

    def __reduce__(self):
        return _rebuild_execution_error, (type(self), self.message, self.row_id, self.file, self.row, self.field,
                                          self.source)


def _rebuild_execution_error(cls, message, row_id, file, row, field, source):
    return cls(message, row_id=row_id, file=file, row=row, field=field, source=source)


class DataNotFoundError(FileNotFoundError):
    """Source data cannot be reached (offline, missing files); the message says how to point at local files.
    ``command_hint``: that advice in the command line's terms, where it differs from the Python one (the commands
    print the message's first line and it, ``{files}`` replaced by the command's option for data files)."""

    def __init__(self, message: str = "", *, command_hint: Optional[str] = None):
        super().__init__(message)
        self.command_hint = command_hint


# The command-line advice for missing source data, in DataNotFoundError.command_hint's terms.
LOCAL_FILES_HINT = ("Give local files with {files} PATH... (globs, hf:// or https:// URLs too), or the bundled sample "
                    "with --sample")


@dataclasses.dataclass
class SkippedRow:
    error: str
    message: str
    file: Optional[str]
    row: Optional[int]
    field: Optional[str]
    row_id: Optional[str] = None  # the unified id of a row dropped by validation or execution (older reports lack it)

    @property
    def where(self) -> str:
        """Unified row id, file, row and field, each where known: a file that cannot be read at all has no row
        number (it was shown as "row None")."""
        parts = [f"row id {self.row_id!r}" if self.row_id is not None else "",
                 str(self.file) if self.file else "",
                 f"row {self.row}" if self.row is not None else "",
                 f"field {self.field!r}" if self.field else ""]
        return " ".join(part for part in parts if part)


def row_id_of(error: "ToolUseDataError") -> Optional[str]:
    """The unified id of the row ``error`` is about, where the error knows it (:class:`RuleViolationError`,
    :class:`ExecutionError`)."""
    return getattr(error, "row_id", None)


def skipped_row_record(error: "ToolUseDataError") -> dict[str, Any]:
    """One skipped row as the JSON object of a skipped-rows file: where (source, file, row, field) and why
    (error type, the reason it is counted under, message). A row that breaks a validation rule or whose
    execution fails also has ``row_id``, its unified id (the only place to find it when it was dropped from a
    dataset already loaded, whose rows no longer hold their file and row number)."""
    record: dict[str, Any] = {"source": error.source, "file": error.file, "row": error.row}
    row_id = row_id_of(error)
    if row_id is not None:
        record["row_id"] = row_id
    record.update(field=error.field, error=type(error).__name__, reason=error.reason, message=error.message)
    return record


def listed_skipped_rows(path: str, files: set[str]) -> Counter:
    """How often a skipped-rows file lists each ``(file, row)`` of ``files`` (once a pass over a stream; none if it
    does not exist yet). A line that does not read as a record (cut short by a process killed while writing it)
    lists none."""
    listed: Counter = Counter()
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return listed
    with handle:
        for line in handle:
            try:
                record = json.loads(line)
                if record["file"] in files:
                    listed[record["file"], record["row"]] += 1
            except (ValueError, TypeError, KeyError):
                continue
    return listed


def json_text_bytes(value: Any, **options: Any) -> bytes:
    """UTF-8 JSON of ``value`` that any text can go through: a lone surrogate (an error message quoting bad
    input) is written as its ``\\udXXX`` escape, which reads back as the same character."""
    return json.dumps(value, ensure_ascii=False, **options).encode("utf-8", "backslashreplace")


def count_of(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``: the lines the commands print said "1 rows"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


class SkipReport:
    """Counts rows skipped under ``on_error="skip"``, by error type and field, keeping the first examples.

    Every skipped row (source, file, row, field, reason, message; ``row_id`` for a row dropped by validation or
    execution)
    can be kept too: ``keep_all=True`` keeps them in ``rows``; ``rows_path`` appends each as one JSON line to
    that file as it is skipped (constant memory; the file is created at the first skip). Thread-safe; merge
    reports from worker processes with :meth:`merge` or :meth:`load`.
    """

    MAX_EXAMPLES = 20

    def __init__(self, *, keep_all: bool = False, rows_path: str | Path | None = None) -> None:
        self.rows_read = 0
        self.skipped = 0
        self.by_reason: Counter[str] = Counter()
        self.examples: list[SkippedRow] = []
        self.keep_all = keep_all
        self.rows: list[dict[str, Any]] = []
        if rows_path is not None and not isinstance(rows_path, (str, os.PathLike)):
            # str() of any value made a path of it: rows_path=b"skipped.jsonl" appended to "./b'skipped.jsonl'"
            raise TypeError(f"rows_path must be a path (str or pathlib.Path), got {rows_path!r:.80} "
                            f"({type(rows_path).__name__})")
        self.rows_path = os.fspath(rows_path) if rows_path is not None else None
        if isinstance(self.rows_path, bytes):
            raise TypeError(f"rows_path must be a path (str or pathlib.Path), got {rows_path!r:.80}")
        if self.rows_path is not None and (not self.rows_path.strip() or os.path.isdir(self.rows_path)
                                           or not os.path.isdir(os.path.dirname(os.path.abspath(self.rows_path)))):
            # found at the first skipped row, after a map-style load had prepared the split: a bare IsADirectoryError.
            # (Said of the file, not of rows_path: validate()'s skipped_rows= and the commands' --skipped-rows end here)
            what = "is a folder" if self.rows_path.strip() and os.path.isdir(self.rows_path) else "cannot be made"
            raise ValueError(f"the skipped rows file {self.rows_path!r} {what}: give a file in an existing folder")
        self._rows_file = None
        self._lock = threading.Lock()

    @property
    def wants_rows(self) -> bool:
        """True if this report lists every skipped row (in memory or in a file)."""
        return self.keep_all or self.rows_path is not None

    def add(self, error: ToolUseDataError, *, log: bool = True, listed: bool = False) -> None:
        """Count a skipped row. ``log=False``: the same error was logged already, by the report of another
        config that skipped the same row (a row that cannot be read skips in every config). ``listed``: the
        row is in ``rows_path`` already (a resumed stream reading again what the run it resumes read past its
        saved state): counted, not appended to the file a second time."""
        with self._lock:
            self.skipped += 1
            self.by_reason[error.reason] += 1
            if len(self.examples) < self.MAX_EXAMPLES:
                self.examples.append(SkippedRow(type(error).__name__, error.message, error.file, error.row, error.field,
                                              row_id_of(error)))
            if self.wants_rows:
                self._keep_rows([skipped_row_record(error)], to_file=not listed)
        if not log:
            return
        if self.skipped <= 10:
            logger.warning("skipped row: %s", plain_printable(error))  # it quotes the data
        elif self.skipped == 11:
            logger.warning("more rows skipped; see the skip report for counts")

    def _keep_rows(self, records: list[dict[str, Any]], *, to_file: bool = True) -> None:
        if self.keep_all:
            self.rows.extend(records)
        if self.rows_path is not None and records and to_file:
            if self._rows_file is None:
                self._rows_file = open(self.rows_path, "ab")
            self._rows_file.write(b"".join(json_text_bytes(r) + b"\n" for r in records))
            self._rows_file.flush()  # readable while a long load runs, complete if it stops

    def close(self) -> None:
        """Close the skipped-rows file (reopened in append mode if more rows are skipped)."""
        with self._lock:
            if self._rows_file is not None:
                self._rows_file.close()
                self._rows_file = None

    def count_read(self, n: int) -> None:
        with self._lock:
            self.rows_read += n

    def merge(self, other: "SkipReport") -> None:
        with self._lock:
            self.rows_read += other.rows_read
            self.skipped += other.skipped
            self.by_reason.update(other.by_reason)
            room = self.MAX_EXAMPLES - len(self.examples)
            self.examples.extend(other.examples[: max(room, 0)])
            if self.wants_rows:
                self._keep_rows(other.rows)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "rows_read": self.rows_read,
            "skipped": self.skipped,
            "by_reason": dict(self.by_reason),
            "examples": [dataclasses.asdict(e) for e in self.examples],
        }
        if self.keep_all:
            data["rows"] = list(self.rows)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SkipReport":
        report = cls(keep_all="rows" in data)
        report.rows_read = data.get("rows_read", 0)
        report.skipped = data.get("skipped", 0)
        report.by_reason.update(data.get("by_reason", {}))
        report.examples = [SkippedRow(**e) for e in data.get("examples", [])]
        report.rows = list(data.get("rows", []))
        return report

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(json_text_bytes(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "SkipReport":
        return cls.from_dict(json.loads(Path(path).read_bytes()))

    def summary(self) -> str:
        read = count_of(self.rows_read, "row")
        if not self.skipped:
            return f"{read} read, none skipped"
        # (a reason names the field, which may hold a key of the data: printed and logged as a plain line)
        reasons = plain_printable(", ".join(f"{k} x{v}" for k, v in self.by_reason.most_common()))
        return f"{read} read, {self.skipped} skipped ({reasons})"

    def __repr__(self) -> str:
        return f"SkipReport({self.summary()})"

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        state["_rows_file"] = None  # each process opens the file for itself (append mode)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


def check_on_error(value: str) -> OnError:
    if value not in ON_ERROR_VALUES:
        raise ValueError(f"on_error must be one of {ON_ERROR_VALUES}, got {value!r}")
    return value  # type: ignore[return-value]
