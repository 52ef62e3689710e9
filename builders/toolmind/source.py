"""ToolMind (cleaned & rectified): rows of ``system, user, reasoning, tool_call, tool_output, answer`` messages
with ``<think>``, ``<tool_call>``, ``<tool_response>`` and ``<answer>`` wrappers, in a JSON-string column.

Unified mapping:

* ``system`` (first message): the tool catalog found in it becomes ``tools``; the rest (domain instructions)
  the unified system message; the exact text goes to ``meta["system"]``.
* ``reasoning``: ``reasoning_content`` of the assistant turn it precedes.
* ``tool_call``: an assistant turn with one call (id ``call_<n>``, counted over the row).
* ``tool_output``: a ``tool`` message answering the oldest unanswered call of the call turn before it
  (``tool_call_id`` + ``name``).
* ``answer``: an assistant turn's ``content``.

Lossless: ``meta`` records whatever the unified fields cannot say (exact system text, the original content
of any message our rendering would not reproduce byte for byte, wrapper padding, the JSON encoding of the
column, bridge texts, and the whole original message list for rows outside the card's grammar), so that
raw -> unified -> raw is exact and the ``toolmind`` writer reproduces upstream rows byte for byte.
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Optional

import orjson
from datasets import Features, Json, List, Value

from tooluse_datasets.codec import loads as codec_loads, may_nest_deep, python_json_text
from tooluse_datasets.errors import (InvalidJsonError, InvalidValueError, MissingFieldError, ToolUseDataError,
                                     json_kind, shown, wrapped_rows_error)
from tooluse_datasets.schema import complete_row, message, tool_call, unified_row
from tooluse_datasets.shards.batches import joined_batches
from tooluse_datasets.shards.paths import display_path
from tooluse_datasets.shards.shard import RawBatch, Shard
from tooluse_datasets.source import (RowContext, Source, SourceOptions, SplitPlan, check_columns, ids_in_file,
                                     with_file_labels)

from . import protocol as P
from .splits import SplitSelection, plan_splits, read_split_rows
from .system_prompt import parse_system_prompt
from .upstream import CITATION, DESCRIPTION, UPSTREAM
from .writer import toolmind_messages

BRIDGES_COLUMN = "bridges"  # written by our `toolmind` writer: indices of reasoning turns it inserted
# Rows handed to the conversions carry this key when a split is read from several files, so ids stay unique.
SHARD_KEY = "@shard"

# Rows read at a time, and at most converted together whatever batch_size says (as JSON rows are read:
# shards.reading.JSON_BATCH_ROWS). Regrouped into 1,000-row batches of up to 4M characters, the first row of a
# stream waited for ~600 rows to be read and decoded; now for 64 (typically 7-8 instead of 8-9 ms CPU on generated
# rows of ~8K characters; more with longer rows). Throughput is the same.
READ_BATCH_ROWS = 64

RAW_FEATURES = Features(
    {
        # The conversation, decoded from the JSON string (or read from a native list column).
        "messages": List({"role": Value("string"), "content": Value("string")}),
        # The `split` column verbatim (source dataset identifier); null when the file has none.
        "split": Value("string"),
        # The `id_column` value if one is configured, else the row's position: "<row>", or
        # "<file>/<row>" when the load has several files (<file>: the stem, or the file's path where files of
        # the load share a stem; see Shard.label).
        "id": Value("string"),
        # Indices of bridge reasoning turns, from a `bridges` column (our writer's output); [] otherwise.
        "bridges": List(Value("int32")),
        # Any other column, by name ({} for the upstream file).
        "extra": Json(),
        # How `messages` was stored: json-ascii / json-utf8 (Python json.dumps with ensure_ascii on/off),
        # list (a native column), or verbatim (text json.dumps does not reproduce; kept in messages_text).
        "messages_encoding": Value("string"),
        "messages_text": Value("string"),
    }
)


@dataclass
class ToolMindOptions(SourceOptions):
    """Switches for the ToolMind family (spec §8): variations are options, not forks. ``ToolMindConfig`` mixes
    them in, so ``tooluse_datasets.load("toolmind", ..., <option>=...)`` sets them.

    Args:
        messages_column: column holding the conversation, a JSON string or a native list
            (``"conversations"`` for the DR-Tulu ancestor).
        split_column: column naming the source dataset; its values become HF splits when data_files names
            no splits. None: the files have no such column (HF splits = data_files keys).
        id_column: column with a row id (``"uuid"`` for Toucan / Nemotron siblings); default: row position.
        arguments_key: key of the call arguments inside ``<tool_call>`` (``"parameters"`` for DR-Tulu).
        strict: enforce the card's grammar (default): its transition FSM, one call per ``tool_call``
            message and one ``<think>``, ``<tool_response>`` or ``<answer>`` block per message. False converts
            any role sequence unified can express and keeps the original messages in ``meta`` (the validation
            rule ``toolmind.grammar`` reports such rows); a user turn of ``<tool_response>`` blocks right after
            calls, or a ``tool_output`` of several, is read as their results. Content the card calls invalid
            is refused in both modes: an empty ``<think>``, ``<tool_call>`` or ``<answer>`` block (an empty
            ``<tool_response>`` is a tool that returned nothing), and a call that does not parse or lacks
            ``name`` or ``arguments_key`` (an object, or a JSON string holding one).
        allow_trailing_call: accept rows that end on a ``tool_call`` (text_to_terminal samples).
        max_batch_chars: rows are 1K-131K characters, so a batch of ``batch_size`` rows can be 10x the
            average; capping batches by characters keeps peak memory independent of where long rows fall.
    """

    messages_column: str = "messages"
    split_column: Optional[str] = "split"
    id_column: Optional[str] = None
    arguments_key: str = "arguments"
    strict: bool = True
    allow_trailing_call: bool = False
    max_batch_chars: int = 4_000_000


class ToolMindSource(Source):
    name = "toolmind"
    pretty_name = "ToolMind (cleaned & rectified)"
    upstream = UPSTREAM
    raw_features = RAW_FEATURES
    citation = CITATION
    description = DESCRIPTION
    options_class = ToolMindOptions
    local_patterns = ("**/*.parquet", "**/*.jsonl", "**/*.json")

    def __init__(self, options: Optional[ToolMindOptions] = None):
        super().__init__(options)
        if self.options.arguments_key not in P.ARGUMENT_KEYS:
            raise ValueError(f"arguments_key must be one of {P.ARGUMENT_KEYS}, got {self.options.arguments_key!r}")
        if not self.options.messages_column:
            raise ValueError("messages_column must name a column")
        for option in ("split_column", "id_column"):  # "" would leave the column out silently, as None does
            if getattr(self.options, option) == "":
                raise ValueError(f"{option} must name a column, or be None to leave it out")

    # -- splits and reading ---------------------------------------------------------------------------

    def split_names(self, files_by_split: dict[str, list[str]]) -> Optional[list[str]]:
        return None if self._splits_from_column(files_by_split) else list(files_by_split)

    def _splits_from_column(self, files_by_split: dict[str, list[str]]) -> bool:
        return bool(self.options.split_column and list(files_by_split) == ["train"] and files_by_split["train"])

    def plan(self, files_by_split: dict[str, list[str]]) -> list[SplitPlan]:
        """One HF split per `split` value (card order, names from SPLIT_TABLE) when the files carry the
        column and data_files named no splits; otherwise one HF split per data_files key."""
        opts = self.options
        # A column the user named, which a file does not have: that file's error, not every row's. (Under the default
        # name, a file whose rows lack `messages` is rows gone bad: each is its row's error, skipped when asked.)
        named = {"messages_column": opts.messages_column, "id_column": opts.id_column}
        check_columns(self.name, files_by_split, {option: column for option, column in named.items()
                                                  if column and column != getattr(ToolMindOptions, option)})
        if self._splits_from_column(files_by_split):
            plans = plan_splits(list(files_by_split["train"]), opts.split_column, opts.shard_bytes,
                                column_required=opts.split_column != ToolMindOptions.split_column,
                                wanted=getattr(opts, "prepare_splits", None), messages_column=opts.messages_column)
            if plans is not None:
                return with_file_labels(plans, files_by_split)
        # Ids are positions in a file: with several files in the load (in one split or across splits) they carry
        # the file's name, else two files' rows at one position would share an id.
        several = len({path for files in files_by_split.values() for path in files}) > 1
        return [SplitPlan(plan.name, plan.shards, SplitSelection(None, False, False, several))
                for plan in super().plan(files_by_split)]

    def json_text_columns(self) -> frozenset[str]:
        # The messages text is parsed here, its spelling kept (meta.messages_text), as from a text column
        return frozenset((self.options.messages_column,))

    def read(self, shard: Shard, split: SplitPlan, resume: Optional[tuple[int, int]] = None) -> Iterator[RawBatch]:
        opts = self.options
        selection: Optional[SplitSelection] = split.selection
        stem = shard.file_label if selection is not None and selection.stem_ids else None
        if opts.id_column:
            # A repeated id gets "#<row>" after its first holder in the file, whichever part of it is read.
            self.unique_ids.prime_file(display_path(shard.file), ids_in_file(shard.file, opts.id_column))
        # Read small batches (long rows decode to large buffers) and regroup them into batches of at most
        # READ_BATCH_ROWS rows (fewer where a split's rows are selected) and `max_batch_chars` characters.
        rows = min(opts.batch_size, READ_BATCH_ROWS)
        batches = read_split_rows(shard, opts.split_column, selection, rows, resume, opts.messages_column,
                                  self.json_text_columns())
        for batch in joined_batches(batches, rows, _messages_chars(opts.messages_column), opts.max_batch_chars):
            if stem is not None:
                for _row_number, row in batch.items:
                    if isinstance(row, dict):
                        row[SHARD_KEY] = stem
            yield batch

    # -- native -> raw --------------------------------------------------------------------------------

    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        opts = self.options
        column = opts.messages_column
        if native.get(column) is None:
            raise wrapped_rows_error(native, (column,)) or MissingFieldError(
                f"row has no {column!r}{_messages_elsewhere(native)}", field=column)
        messages, encoding, verbatim = decode_messages(native[column], column)
        split_value = binary_text(native.get(opts.split_column), opts.split_column) if opts.split_column else None
        if split_value is not None and not isinstance(split_value, str):
            raise InvalidValueError(f"{opts.split_column} must be a string, got {json_kind(split_value)}",
                                    field=opts.split_column)
        known = {column, opts.split_column, opts.id_column, BRIDGES_COLUMN, SHARD_KEY}
        extra = {k: v for k, v in native.items() if k not in known}
        # The unified row's values (tools, calls, meta) then all come from the messages text; to_unified
        # withdraws this where the catalog or a call was not read exactly (ParsedRow.read_exactly).
        ctx.values_from_text = not extra and type(native[column]) is str
        return {
            "messages": messages,
            "split": split_value,
            "id": self._row_key(native, ctx),
            "bridges": _bridges(native.get(BRIDGES_COLUMN), messages),
            "extra": extra,
            "messages_encoding": encoding,
            "messages_text": verbatim,
        }

    def _row_key(self, native: dict, ctx: RowContext) -> str:
        id_column = self.options.id_column
        if id_column:
            value = binary_text(native.get(id_column), id_column)
            if value is None:
                raise MissingFieldError(f"row has no {id_column!r} (id_column)", field=id_column)
            if not isinstance(value, (str, int)) or isinstance(value, bool) or value == "":
                raise InvalidValueError(f"an id (id_column={id_column!r}) is a non-empty string or an integer, got "
                                        f"{shown(value)}", field=id_column)  # (JSON's true, not Python's True)
            return self.unique_ids(str(value), str(value), ctx)
        shard = native.get(SHARD_KEY)
        return f"{shard}/{ctx.row}" if shard else str(ctx.row)

    # -- raw -> unified -------------------------------------------------------------------------------

    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        opts = self.options
        messages = raw["messages"]
        violation = P.fsm_violation([m["role"] for m in messages], allow_trailing_call=opts.allow_trailing_call)
        if violation is not None and opts.strict:
            raise InvalidValueError(violation.message, field=f"{opts.messages_column}[{violation.index}].role")
        parsed = None
        if violation is None and not raw["bridges"]:
            parsed = _parse_card_row(messages, opts, raw["messages_encoding"] != P.ENCODING_UTF8)
        if parsed is None:
            parsed = _RowParser(opts, raw).parse(messages)
        for tool in parsed.tools:
            if tool.get("type") != "function":  # a custom tool (system_prompt.custom_tool)
                raise InvalidValueError(
                    f"the tool catalog declares {tool['custom']['name']!r}, a custom tool (free-form text input, no "
                    f"JSON parameters): the unified schema holds function tools only, whose calls take JSON "
                    f"arguments", field=f"{opts.messages_column}[0].content")
        canonical = violation is None and parsed.canonical
        if not parsed.read_exactly:
            ctx.values_from_text = False
        subset = raw["split"] if raw["split"] is not None else (ctx.split or "train")

        meta: dict[str, Any] = {}
        if raw["split"] is None:
            meta["no_split_value"] = True
        if parsed.system_text is not None:
            meta["system"] = parsed.system_text
            if not parsed.tools_found:
                meta["tools_not_found"] = True
            if parsed.tools_unreadable:
                meta["tools_unreadable"] = True
        if raw["messages_encoding"] != P.DEFAULT_ENCODING:
            meta["messages_encoding"] = raw["messages_encoding"]
        if raw["messages_text"] is not None:
            meta["messages_text"] = raw["messages_text"]
        if parsed.padding:
            meta["wrapper_padding"] = parsed.padding
        if parsed.call_key != "arguments":
            meta["call_key"] = parsed.call_key
        if parsed.bridge_texts:
            meta["bridges"] = parsed.bridge_texts
        if canonical:
            if parsed.content:
                meta["content"] = parsed.content
        else:
            # Outside the card's grammar our writer would not rebuild this sequence: keep it whole.
            meta["source_messages"] = messages
            if opts.allow_trailing_call and messages and messages[-1]["role"] == "tool_call":
                meta["trailing_call_allowed"] = True  # the load's grammar: toolmind.grammar checks the row by it
        if raw["extra"]:
            meta["extra"] = raw["extra"]
        return unified_row(id=f"toolmind/{subset}/{raw['id']}", source="toolmind", subset=subset,
                           tools=parsed.tools, messages=parsed.messages, meta=meta)

    # -- unified -> raw -------------------------------------------------------------------------------

    def from_unified(self, row: dict) -> dict:
        row = complete_row(row)
        meta = row["meta"] if isinstance(row.get("meta"), dict) else {}
        native = row["source"] == "toolmind"
        if native and "source_messages" in meta:
            messages = meta["source_messages"]
            bridges = sorted(int(i) for i in meta.get("bridges", {}))
        else:
            written = toolmind_messages(row, allow_trailing_call=True)
            messages, bridges = written.messages, written.bridges
        subset = row["subset"]
        prefix = f"toolmind/{subset}/"
        return {
            "messages": messages,
            "split": None if meta.get("no_split_value") else subset,
            "id": row["id"][len(prefix):] if native and row["id"].startswith(prefix) else row["id"],
            "bridges": bridges,
            "extra": meta.get("extra", {}) if native else {},
            "messages_encoding": meta.get("messages_encoding", P.DEFAULT_ENCODING) if native else P.ENCODING_UTF8,
            "messages_text": meta.get("messages_text") if native else None,
        }

    def input_field(self, row: dict, field: str) -> Optional[str]:
        """The message of the ToolMind row that unified ``row``'s ``messages[i]`` was read from (lenient rows are
        re-shaped: their unified positions are not the file's), for an error a writer raises about it."""
        index = _UNIFIED_MESSAGE.match(field)
        if index is None or row.get("source") != "toolmind":
            return None
        try:
            raw = self.from_unified(row)  # the row's own messages (kept whole, or rebuilt as they were read)
            parsed = _RowParser(replace(self.options, strict=False), raw).parse(raw["messages"])
        except ToolUseDataError:
            return None
        position = int(index.group(1))
        if parsed.messages != row["messages"] or position >= len(parsed.origins):
            return None  # the row was edited since it was read: its positions are its own
        origin = parsed.reasoning_origins.get(position) if index.group(2) else None  # (its own reasoning turn)
        return f"{self.options.messages_column}[{parsed.origins[position] if origin is None else origin}]"


_UNIFIED_MESSAGE = re.compile(r"messages\[(\d+)\](\.reasoning_content)?")


# --------------------------------------------------------------------------------------------------
# The messages column
# --------------------------------------------------------------------------------------------------


def _messages_elsewhere(native: dict) -> str:
    """Where a row lacks its messages column but another holds a list of messages (DR-Tulu's ``conversations``):
    the option that reads them, for the error to name."""
    for name, value in native.items():
        if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
            return f" (its {name!r} holds messages: read them with messages_column={name!r})"
    return ""


def binary_text(value: Any, column: str) -> Any:
    """The text of a cell of a binary column (Parquet written without the UTF-8 annotation); other values as
    they are."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidValueError(f"{column} is binary data that is not UTF-8 text ({exc.reason} at byte "
                                f"{exc.start})", field=column) from None


def decode_messages(value: Any, column: str) -> tuple[list[dict], str, Optional[str]]:
    """``(messages, encoding, verbatim text or None)`` from a JSON string or a native list, checked for the
    ``{role, content}`` shape and known roles."""
    value = binary_text(value, column)
    if isinstance(value, str):
        try:
            # orjson directly: a valid messages list holds only strings (checked below), so the exact
            # decoder's scan for integers beyond 64 bits would be pure cost on the largest column.
            messages = orjson.loads(value)
        except ValueError as exc:
            raise InvalidJsonError(f"{column} is not valid JSON ({exc}); {describe_truncation(value)}",
                                   field=column) from None
    elif isinstance(value, list):
        messages = value
    else:
        raise InvalidValueError(f"{column} must be a JSON string or an array, got {json_kind(value)}", field=column)
    if not isinstance(messages, list):
        raise InvalidValueError(f"{column} must hold a JSON array, got {json_kind(messages)}", field=column)
    roles = P.ROLES
    native = not isinstance(value, str)
    for i, m in enumerate(messages):
        # The check inline (it runs for every message of every row); the helper says what is wrong.
        if not (type(m) is dict and len(m) == 2 and m.get("role") in roles and type(m.get("content")) is str):
            if native and type(m) is dict and None in m.values():
                # A native list of structs: Arrow gives every message the fields any message of the column has,
                # null where it has none (`name: null` beside role and content). Such nulls are no data: left out.
                # (Not in JSON text, whose explicit nulls are the source's own, kept in the text.)
                if messages is value:
                    messages = list(value)  # (the row's own list is left as it is)
                m = messages[i] = {k: v for k, v in m.items() if v is not None or k in ("role", "content")}
            _check_message(m, f"{column}[{i}]")
    if isinstance(value, str):
        encoding, verbatim = _json_encoding(value, messages)
    else:
        encoding, verbatim = P.ENCODING_LIST, None
    return messages, encoding, verbatim


def _json_encoding(text: str, messages: list[dict]) -> tuple[str, Optional[str]]:
    # An ASCII-only text was written with ensure_ascii=True (or holds no non-ASCII character, where both
    # settings agree); anything else with ensure_ascii=False. So was an ASCII text holding a raw DEL: json.dumps
    # escapes DEL only with ensure_ascii. Rebuilding the text confirms it byte for byte: first from orjson's
    # escaping of each string (what json.dumps writes without ensure_ascii, at ~4x its speed; with it, the same
    # for a DEL-free ASCII text), then, if that differs, with json.dumps itself.
    ensure_ascii = text.isascii() and "\x7f" not in text
    encoding = P.ENCODING_ASCII if ensure_ascii else P.ENCODING_UTF8
    try:
        # An ASCII text whose messages are not all ASCII escapes them (\uXXXX), which orjson never writes: the
        # quick spelling cannot match, so it is not tried (str.isascii takes constant time). json.dumps of decoded
        # dicts keeps the text's key order, but the writer puts role first: a text written content first is kept.
        quick = not ensure_ascii or all(m["content"].isascii() for m in messages)
        reproduced = (quick and _quick_json_text(messages) == text.encode()) or (
            python_json_text(messages, ensure_ascii) == text and all(next(iter(m)) == "role" for m in messages))
    except (TypeError, ValueError):
        reproduced = False
    return (encoding, None) if reproduced else (P.ENCODING_VERBATIM, text)


def _quick_json_text(messages: list[dict]) -> bytes:
    """``json.dumps(messages, ensure_ascii=False)``, UTF-8 encoded, for checked ``{role, content}`` string
    messages written role first: orjson escapes every string as json.dumps does without ensure_ascii, at ~4x
    its speed, and each role's ``{"role": ..., "content": `` is written once. (A message written content
    first gives text other than its source's, and the caller falls back to json.dumps.)"""
    if not messages:
        return b"[]"
    dumps, prefix = orjson.dumps, _MESSAGE_PREFIX
    return b"[" + b"}, ".join([prefix[m["role"]] + dumps(m["content"]) for m in messages]) + b"}]"


_MESSAGE_PREFIX = {role: b'{"role": ' + orjson.dumps(role) + b', "content": ' for role in P.ROLES}


def _check_message(m: Any, where: str) -> None:
    if not isinstance(m, dict):
        raise InvalidValueError(f"message must be an object, got {json_kind(m)}", field=where)
    role, content = m.get("role"), m.get("content")
    if not isinstance(role, str):
        raise MissingFieldError("message has no role", field=f"{where}.role")
    if role not in P.ROLES:
        raise InvalidValueError(f"unknown role {shown(role)} (ToolMind roles: {', '.join(P.ROLES)})", field=f"{where}.role")
    if not isinstance(content, str):
        raise MissingFieldError("message has no string content", field=f"{where}.content")
    if len(m) != 2:
        extra = sorted(k for k in m if k not in ("role", "content"))
        raise InvalidValueError(f"message has keys besides role and content: {extra}", field=where)


def describe_truncation(text: str) -> str:
    """How far a broken messages text parses: the complete messages before the break, and the role of the
    message that is cut (viewer cells and interrupted downloads end mid-string)."""
    complete: list[str] = []
    pos = text.find("[")
    if pos < 0:
        return "it does not start with a JSON array"
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            value, pos = P.BALANCED_DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):  # the break, or nesting deeper than the stdlib reads
            break
        role = value.get("role") if isinstance(value, dict) else type(value).__name__
        complete.append(role if isinstance(role, str) else "?")
    if pos < len(text) and text[pos] == "]":
        # Every message reads with Python's json, up to the closing bracket: nothing is cut off; the text
        # holds what orjson refuses (a lone surrogate such as \ud800) or something after the list.
        return f"not truncated: {len(complete)} message(s) read up to the closing ']' by Python's json"
    cut_role = None
    rest = text[pos:]
    marker = '"role": "'
    if marker in rest:
        start = rest.index(marker) + len(marker)
        cut_role = rest[start: rest.find('"', start)] if '"' in rest[start:] else None
    parsed = f"{len(complete)} complete message(s) ({', '.join(complete)})" if complete else "no complete message"
    where = f", then a {cut_role!r} message cut off" if cut_role else ""
    return f"truncated? {parsed}{where}; text ends at character {len(text)}"


def _messages_chars(column: str) -> Callable[[Any], int]:
    """The characters of a row's messages text, for batches bounded in characters (rows are 1K-131K)."""
    def chars(item: Any) -> int:
        row = item[1]
        value = row.get(column) if isinstance(row, dict) else None
        return len(value) if isinstance(value, (str, bytes)) else 0  # (bytes: a binary column's UTF-8 text)

    return chars


def _bridges(value: Any, messages: list[dict]) -> list[int]:
    if value is None:
        return []
    n_messages = len(messages)
    if not isinstance(value, list) or not all(isinstance(i, int) and 0 <= i < n_messages for i in value) or \
            value != sorted(set(value)):
        raise InvalidValueError(f"{BRIDGES_COLUMN} must list distinct message indices below {n_messages}, in order",
                                field=BRIDGES_COLUMN)
    # Only reasoning turns are bridges: an index naming another turn would be ignored on reading and lost on writing
    # (as a repeat or an order the writer does not give would be).
    for i in value:
        if messages[i]["role"] != "reasoning":
            raise InvalidValueError(f"{BRIDGES_COLUMN} lists inserted reasoning turns, but message {i} is a "
                                    f"{messages[i]['role']!r} turn", field=BRIDGES_COLUMN)
    return list(value)


# --------------------------------------------------------------------------------------------------
# Messages -> unified
# --------------------------------------------------------------------------------------------------


@dataclass
class ParsedRow:
    tools: list
    messages: list
    system_text: Optional[str]
    tools_found: bool
    padding: str
    call_key: str
    content: dict          # str(index) -> original content our rendering would not reproduce
    bridge_texts: dict     # str(index) -> text of a bridge reasoning turn (from the bridges column)
    canonical: bool        # the writer can rebuild the message sequence from the unified turns
    # Every tool and call was read by the exact reader (not the catalog's balanced scan: SystemPrompt.scanned)
    # from text too short to nest as deep as storage allows: the row is storable as it is.
    read_exactly: bool = True
    tools_unreadable: bool = False  # a catalog value is not JSON (SystemPrompt.unreadable)
    # Index, in the row's messages, of the message each unified message was read from (_RowParser only: the
    # fast path leaves it out, hence not compared).
    origins: list = field(default_factory=list, compare=False)
    reasoning_origins: dict = field(default_factory=dict, compare=False)  # of reasoning_content, where it differs


class _RowParser:
    """One pass over a row's messages. Strict FSM checks happen before; here every role sequence that
    can be expressed in unified is converted, and anything the writer would not rebuild clears
    ``canonical``."""

    def __init__(self, opts: ToolMindOptions, raw: dict):
        self.opts = opts
        self.column = opts.messages_column
        self.ensure_ascii = raw["messages_encoding"] != P.ENCODING_UTF8
        self.bridge_indices = set(raw["bridges"])
        self.out: list[dict] = []
        self.tools: list = []
        self.system_text: Optional[str] = None
        self.tools_found = False
        self.tools_unreadable = False
        self.read_exactly = True
        self.padding: Optional[str] = None
        self.call_key: Optional[str] = None
        self.content: dict[str, str] = {}
        self.bridge_texts: dict[str, str] = {}
        self.canonical = True
        self.reasoning: Optional[str] = None      # pending reasoning for the next assistant turn
        self.open_calls: deque[tuple[str, str]] = deque()  # (call id, name) awaiting a tool_output
        self.calls_made = 0
        self.previous_role: Optional[str] = None
        self.origins: list[int] = []              # of each message of self.out: the message it was read from
        self.reasoning_at = 0                     # where the pending reasoning was read
        self.reasoning_origins: dict[int, int] = {}  # message of self.out -> where its reasoning_content was read

    def parse(self, messages: list[dict]) -> ParsedRow:
        handlers = {"system": self._system, "user": self._user, "reasoning": self._reasoning,
                    "tool_call": self._tool_call, "tool_output": self._tool_output, "answer": self._answer}
        for i, m in enumerate(messages):
            handlers[m["role"]](i, m["content"], f"{self.column}[{i}].content")
            self.origins.extend([i] * (len(self.out) - len(self.origins)))  # (a flushed reasoning turn has its own)
            self.previous_role = m["role"]
        self._flush_reasoning()
        return ParsedRow(self.tools, self.out, self.system_text, self.tools_found, self.padding or "",
                         self.call_key or "arguments", self.content, self.bridge_texts, self.canonical,
                         self.read_exactly, self.tools_unreadable, self.origins, self.reasoning_origins)

    # -- per role ------------------------------------------------------------------------------------

    def _system(self, i: int, content: str, where: str) -> None:
        if i != 0:
            self.canonical = False
            self._flush_reasoning()
            self.out.append(message("system", content))
            return
        self.system_text = content
        prompt = parse_system_prompt(content)
        self.tools, self.tools_found, self.tools_unreadable = prompt.tools, prompt.tools_found, prompt.unreadable
        self.read_exactly = self.read_exactly and not prompt.scanned
        if prompt.instructions:
            self.out.append(message("system", prompt.instructions))

    def _user(self, i: int, content: str, where: str) -> None:
        if self.open_calls and self._results_as_user_turn(i, content, where):
            return
        self._flush_reasoning()
        self.open_calls.clear()  # calls left unanswered (lenient rows) stay so: no later result answers them
        self.out.append(message("user", content))

    def _results_as_user_turn(self, i: int, content: str, where: str) -> bool:
        """A user turn right after calls that is nothing but ``<tool_response>`` blocks (lenient rows): the results
        of those calls, as chat templates that send results as user turns (Qwen, Hermes) write them, not text the
        user said. One block per open call at most; anything else is the user's."""
        s = content.strip()
        if not (s.startswith("<tool_response>") and s.endswith("</tool_response>")):
            return False
        found = P.blocks(P.unwrap(content, "tool_response", "", where).text, "tool_response")
        # A block still holding a closing tag has words after it, between two blocks: the user's, not a result
        if len(found) > len(self.open_calls) or any("</tool_response>" in block for block in found):
            return False
        for block in found:
            call_id, name = self.open_calls.popleft()
            self.out.append(message("tool", block, tool_call_id=call_id, name=name))
        return True

    def _reasoning(self, i: int, content: str, where: str) -> None:
        text = self._unwrap_block(i, content, "think", where)
        if i in self.bridge_indices:
            self.bridge_texts[str(i)] = text
            return
        if self.reasoning is not None:  # consecutive reasoning turns (lenient): merge, as the card did
            self.canonical = False
            self.reasoning = f"{self.reasoning}\n\n{text}"
        else:
            self.reasoning, self.reasoning_at = text, i

    def _tool_call(self, i: int, content: str, where: str) -> None:
        text = self._unwrap(i, content, "tool_call", where)
        blocks = _split_call_blocks(text, where)
        if len(blocks) > 1:
            if self.opts.strict:
                raise InvalidValueError(f"{len(blocks)} <tool_call> blocks in one message (the card: one tool per "
                                        "turn)", field=where)
            self.canonical = False
        extending = self.previous_role == "tool_call" and self.out and self.out[-1]["role"] == "assistant"
        if not extending:
            # A new call turn (lenient rows): a result after it answers its calls, not one an earlier turn left
            # unanswered, as unified pairs results with the turn they follow.
            self.open_calls.clear()
        calls = []
        for block in blocks:
            call = P.parse_call(block, where, arguments_key=self.opts.arguments_key)
            self.read_exactly = self.read_exactly and not may_nest_deep(block)
            if self.call_key is None:
                self.call_key = call.key
            if len(blocks) == 1 and str(i) not in self.content and not P.renders_call(
                    block, call.name, call.arguments, self.call_key, self.ensure_ascii):
                self.content[str(i)] = content  # key order, spacing, escaping or extra keys differ
            call_id = f"call_{self.calls_made}"
            self.calls_made += 1
            self.open_calls.append((call_id, call.name))
            calls.append(tool_call(call_id, call.name, call.arguments))
        if extending:
            self.canonical = False  # consecutive tool_call messages (lenient): parallel calls of one turn
            self.out[-1]["tool_calls"].extend(calls)
            return
        self.out.append(message("assistant", "", reasoning_content=self._take_reasoning(), tool_calls=calls))

    def _tool_output(self, i: int, content: str, where: str) -> None:
        text = self._unwrap_block(i, content, "tool_response", where)
        if not self.open_calls:
            raise InvalidValueError("tool_output without a preceding tool_call it could answer",
                                    field=f"{self.column}[{i}].role")
        # Several blocks (lenient rows), no more than the calls awaiting them: the results of those calls, in order,
        # as a user turn of such blocks is read; else one text, the row kept whole.
        found = P.blocks(text, "tool_response") if "</tool_response>" in text else [text]
        for block in found if len(found) <= len(self.open_calls) else [text]:
            call_id, name = self.open_calls.popleft()
            self.out.append(message("tool", block, tool_call_id=call_id, name=name))

    def _answer(self, i: int, content: str, where: str) -> None:
        text = self._unwrap_block(i, content, "answer", where)
        self.out.append(message("assistant", text, reasoning_content=self._take_reasoning()))

    # -- helpers -------------------------------------------------------------------------------------

    def _unwrap(self, i: int, content: str, tag: str, where: str) -> str:
        if self.padding is None:
            self.padding = P.wrapper_padding(content, tag)
        unwrapped = P.unwrap(content, tag, self.padding, where)
        if not unwrapped.text and tag not in P.MAY_BE_EMPTY:  # invalid in every mode: strict is about order only
            raise InvalidValueError(f"empty <{tag}> block (the card rejects empty <think>, <tool_call> and "
                                    "<answer> blocks)", field=where)
        if not unwrapped.exact:
            self.content[str(i)] = content
        return unwrapped.text

    def _unwrap_block(self, i: int, content: str, tag: str, where: str) -> str:
        """The text of a message the card wraps in one block. Several (``<think>a</think>\\n<think>b</think>``)
        are outside its grammar, as several calls in one tool_call message are: refused when strict, else
        kept as one text (the row kept whole); an empty one among them is invalid content in both modes (a
        lone empty ``<tool_response>`` is a result)."""
        text = self._unwrap(i, content, tag, where)
        if f"</{tag}>" not in text:
            return text
        found = P.blocks(text, tag)
        if len(found) > 1:
            if self.opts.strict:
                raise InvalidValueError(f"{len(found)} <{tag}> blocks in one message (the card wraps each turn in "
                                        "one block)", field=where)
            if not all(found):
                raise InvalidValueError(f"empty <{tag}> block among the blocks of one message (the card rejects "
                                        "empty blocks)", field=where)
            self.canonical = False
        return text

    def _take_reasoning(self) -> Optional[str]:
        """The pending reasoning, for the assistant message appended next."""
        text, self.reasoning = self.reasoning, None
        if text is not None:
            self.reasoning_origins[len(self.out)] = self.reasoning_at
        return text

    def _flush_reasoning(self) -> None:
        # Reasoning followed by neither a call nor an answer (lenient): an assistant turn of its own.
        if self.reasoning is not None:
            self.canonical = False
            self.out.append(message("assistant", "", reasoning_content=self._take_reasoning()))
            self.origins.append(self.reasoning_at)


_WRAPPERS = {role: (f"<{tag}>", f"</{tag}>") for role, tag in P.WRAPPER_TAG.items()}


def _parse_card_row(messages: list[dict], opts: ToolMindOptions, ensure_ascii: bool) -> Optional[ParsedRow]:
    """The common case in one tight loop: a row the card's FSM accepts, every wrapper exactly
    ``<tag>text</tag>`` and one block (one call per ``tool_call`` message). Anything else returns None and goes
    through :class:`_RowParser`, which gives the same result for such rows and reports what is wrong with others."""
    if len(messages) < 2 or messages[-1]["role"] != "answer":
        return None
    system_text = messages[0]["content"]
    prompt = parse_system_prompt(system_text)
    out: list[dict] = [{"role": "system", "content": prompt.instructions}] if prompt.instructions else []
    originals: dict[str, str] = {}
    open_calls: deque = deque()
    calls_made = 0
    reasoning = None
    key = opts.arguments_key
    loads = codec_loads
    read_exactly = not prompt.scanned
    for i in range(1, len(messages)):
        m = messages[i]
        role, content = m["role"], m["content"]
        if role == "user":
            out.append({"role": "user", "content": content})
            continue
        open_tag, close_tag = _WRAPPERS[role]
        if not (content.startswith(open_tag) and content.endswith(close_tag)) or \
                len(content) <= len(open_tag) + len(close_tag):
            return None
        text = content[len(open_tag):-len(close_tag)]
        if text[0].isspace() or text[-1].isspace() or close_tag in text:
            return None  # (a closing tag inside: a call quoting it, or several blocks the card has no room for)
        if role == "reasoning":
            reasoning = text
        elif role == "tool_call":
            try:
                call = loads(text)
            except ValueError:
                return None
            if not isinstance(call, dict):
                return None
            if read_exactly and may_nest_deep(text):
                read_exactly = False
            name, arguments = call.get("name"), call.get(key)
            if not (isinstance(name, str) and name and isinstance(arguments, dict)):
                return None
            if not P.renders_call(text, name, arguments, key, ensure_ascii):
                originals[str(i)] = content  # key order, spacing, escaping or extra keys differ
            call_id = f"call_{calls_made}"
            calls_made += 1
            open_calls.append((call_id, name))
            turn = {"role": "assistant", "content": ""}
            if reasoning is not None:  # keys in schema.message's order: streamed rows equal stored ones as JSON
                turn["reasoning_content"] = reasoning
                reasoning = None
            turn["tool_calls"] = [tool_call(call_id, name, arguments)]
            out.append(turn)
        elif role == "tool_output":
            call_id, name = open_calls.popleft()
            out.append({"role": "tool", "content": text, "tool_call_id": call_id, "name": name})
        else:  # answer
            turn = {"role": "assistant", "content": text}
            if reasoning is not None:
                turn["reasoning_content"] = reasoning
                reasoning = None
            out.append(turn)
    return ParsedRow(prompt.tools, out, system_text, prompt.tools_found, "", key if calls_made else "arguments",
                     originals, {}, True, read_exactly, prompt.unreadable)


def _split_call_blocks(text: str, where: str) -> list[str]:
    """The JSON bodies of a ``<tool_call>`` message: usually one; several when a message packs
    ``<tool_call>{...}</tool_call>\\n<tool_call>{...}</tool_call>`` (outer tags already removed). An empty
    block among them is invalid content, as an empty message is."""
    if "</tool_call>" not in text:
        return [text]
    # A call whose arguments quote the tag ({"code": "print('</tool_call>')"}) is one block: blocks end where
    # their JSON values end, not at any "</tool_call>" in the text. Text that does not scan so (a block that is
    # not JSON) is cut at every closing tag, for the parse of each piece to report.
    scanned = P.scan_call_blocks(text)
    if scanned is not None:
        return scanned
    parts = [p.strip() for p in text.split("</tool_call>")]
    blocks = [parts[0]] + [p[len("<tool_call>"):].strip() if p.startswith("<tool_call>") else p for p in parts[1:]]
    if not all(blocks):
        raise InvalidValueError("empty <tool_call> block (or a stray </tool_call>) among the calls of one message "
                                "(the card rejects empty blocks)", field=where)
    return blocks
