"""LLaMA-Factory sharegpt files (``formatting: sharegpt`` in its ``dataset_info.json``) -> unified rows.

``to_raw`` takes a row as the file holds it: ``conversations`` (``from``/``value``), ``system``, ``tools`` (JSON
text of a list), ``images``/``videos``/``audios``; other columns go to ``extra``. A file with other names (an
OpenAI-style ``messages`` list of ``role``/``content``, tags ``user``/``assistant``/``tool``...) is read through
LLaMA-Factory's own ``columns`` and ``tags`` (options, or the entry of its ``dataset_info.json``; see
:mod:`.layout`): the raw row restates it in the default names above (a role that is none of the file's tags is
an error naming ``<messages>[k].<role_tag>``), and errors name the file's own fields. ``to_unified`` follows
LLaMA-Factory 0.9.5's own reading (``SharegptDatasetConverter`` and ``FunctionFormatter``): a row it would drop
(roles out of alternation, an odd count, a conversation not ending on gpt/function_call) or crash on (a
``function_call`` that is not JSON of ``{name, arguments}``, ``tools`` that are not JSON text of a list), or
that it would mistrain on (an observation with no call before it, a call followed by a human turn, results that
do not match the calls' count) raises a typed error naming the field.

A ``function_call`` becomes one assistant turn with its calls (ids ``call_0``, ``call_1``... over the row; those
between ``<tool_call>`` and ``</tool_call>`` where the value holds them, as LLaMA-Factory reads them) and a
leading ``<think>`` block as reasoning; the ``observation`` after it becomes one tool message per call (parallel
results split on LLaMA-Factory's separator). Spellings the ``llamafactory`` writer would not reproduce byte for
byte are kept in ``meta["llamafactory_original"]``, so LLaMA-Factory -> unified -> LLaMA-Factory is exact.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
from typing import Any, Optional

from datasets import Features, Json

from tooluse_datasets.builders.ms_swift.parsing import split_think
from tooluse_datasets.errors import (ConversionError, InvalidValueError, MissingFieldError, ToolUseDataError,
                                     count_of, json_kind, shown, wrapped_rows_error)
from tooluse_datasets.schema import message, tool_call, unified_row
from tooluse_datasets.source import RowContext, Source, SourceOptions, SplitPlan, check_columns
from tooluse_datasets.trailing_results import DROP

from .layout import layout_of
from .upstream import CITATION, DESCRIPTION, UPSTREAM
from .writer import (EVEN_TAGS, FUNCTION, GPT, HUMAN, LLAMAFACTORY_FEATURES, MEDIA_COLUMNS, OBSERVATION, ODD_TAGS,
                     ORIGINAL_KEY, RESULT_SEPARATOR, read_call_value, respelled_tools, tools_of,
                     unified_to_llamafactory)

# The format's own columns, plus every other column of the file under its own name ({} if none).
RAW_FEATURES = Features({**LLAMAFACTORY_FEATURES, "extra": Json()})
_EMPTY_UNLESS_NAMED = ("system", "tools", *MEDIA_COLUMNS)  # the default names of the columns an entry may leave out
SYSTEM_TAG = "system"
PREFERENCE_COLUMNS = ("chosen", "rejected")  # the columns of its preference rows (DPO, ORPO...)
logger = logging.getLogger("tooluse_datasets")


@dataclasses.dataclass
class LlamaFactoryOptions(SourceOptions):
    """LLaMA-Factory's names for a file's columns and role tags; ``load("llamafactory", ..., <option>=...)`` sets
    them (see :mod:`.layout`).

    Args:
        columns: LLaMA-Factory's ``columns`` of a ``dataset_info.json`` entry, e.g. ``{"messages": "messages",
            "tools": "tools"}``: keys ``messages`` (default ``"conversations"``), ``system``, ``tools``,
            ``images``, ``videos``, ``audios`` (not read unless named, as LLaMA-Factory reads an entry; their
            columns then stay in ``extra``). None (default): every column under its default name.
        tags: LLaMA-Factory's ``tags``: ``role_tag`` (``"from"``), ``content_tag`` (``"value"``), ``user_tag``
            (``"human"``), ``assistant_tag`` (``"gpt"``), ``observation_tag`` (``"observation"``),
            ``function_tag`` (``"function_call"``), ``system_tag`` (``"system"``; null: no system message in
            the list). Keys left out keep these defaults.
        dataset_info: a ``dataset_info.json`` (or its folder) to take ``file_name``, ``columns`` and ``tags``
            from, with ``dataset``: the entry's name. Its ``formatting`` must be ``sharegpt``. ``file_name`` is
            relative to the file's folder (a folder: every file in it); data_files=/data_dir= replace it.
        dataset: the entry of ``dataset_info`` to read.
    """

    columns: Optional[dict] = None
    tags: Optional[dict] = None
    dataset_info: Optional[str] = None
    dataset: Optional[str] = None


class LlamaFactorySource(Source):
    name = "llamafactory"
    pretty_name = "LLaMA-Factory sharegpt format"
    upstream = UPSTREAM
    raw_features = RAW_FEATURES
    citation = CITATION
    description = DESCRIPTION
    options_class = LlamaFactoryOptions

    def __init__(self, options: Optional[LlamaFactoryOptions] = None):
        super().__init__(options)
        self.layout = layout_of(self.options)
        self._default_tag = self.layout.default_tag  # (a property that builds the dict: once, not per row)
        self._file_tag = {default: file for file, default in self._default_tag.items()}
        self._warned: set[str] = set()

    def plan(self, files_by_split: dict[str, list[str]]) -> list[SplitPlan]:
        layout = self.layout
        if layout.messages_named:
            # A conversations column named for the files that one lacks: that file's error, not every row's (the
            # default name, absent or left to its default by columns=, is each row's: its error says which columns
            # the row has)
            where = f"{layout.entry}: columns['messages']" if layout.entry else "columns['messages']"
            check_columns(self.name, files_by_split, {where: layout.columns["messages"]})
        return super().plan(files_by_split)

    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        layout = self.layout
        columns, role_tag, content_tag = layout.columns, layout.tags["role_tag"], layout.tags["content_tag"]
        column = columns["messages"]
        conversations = native.get(column)
        if conversations is None:
            raise wrapped_rows_error(native, (column,)) or MissingFieldError(
                f"sharegpt rows need {column!r}{self._layout_hint(native)}", field=column)
        if not isinstance(conversations, list):
            raise InvalidValueError(f"{column} must be a list of {{{role_tag}, {content_tag}}}, got "
                                    f"{_kind(conversations)}", field=column)
        default_tag = self._default_tag
        turns = []
        for k, turn in enumerate(conversations):
            where = f"{column}[{k}]"
            if not isinstance(turn, dict):
                raise InvalidValueError(f"a turn must be an object of {role_tag!r} and {content_tag!r}, got "
                                        f"{_kind(turn)}", field=where)
            if turn.get(role_tag) is None:
                raise InvalidValueError(f"a turn needs a {role_tag!r} tag{self._tags_hint(turn)}",
                                        field=f"{where}.{role_tag}")
            if not isinstance(turn[role_tag], str):
                raise InvalidValueError(f"a turn's {role_tag!r} tag must be a string, got {_kind(turn[role_tag])}",
                                        field=f"{where}.{role_tag}")
            tag = default_tag.get(turn[role_tag])
            if tag is None:
                raise InvalidValueError(f"{shown(turn[role_tag])} is none of the file's role tags "
                                        f"({layout.describe_tags()}): LLaMA-Factory drops the row",
                                        field=f"{where}.{role_tag}")
            # (Calls first: an OpenAI-style call turn's content is usually null, and the calls are the reason.)
            if turn.get("tool_calls") and "tool_calls" not in (role_tag, content_tag):
                # OpenAI-style calls: LLaMA-Factory's sharegpt converter reads role and content only, and would
                # train the turn without its calls
                raise InvalidValueError(f"LLaMA-Factory's sharegpt reading ignores tool_calls (the turn would be "
                                        f"trained without its calls): write each call turn as a "
                                        f"{self._file_tag.get(FUNCTION, FUNCTION)!r} turn holding the calls' JSON",
                                        field=f"{where}.tool_calls")
            if not isinstance(turn.get(content_tag), str):
                got = f", got {_kind(turn[content_tag])}" if content_tag in turn else ""
                raise InvalidValueError(f"a turn's {content_tag} must be a string{got}", field=f"{where}.{content_tag}")
            turns.append({"from": tag, "value": turn[content_tag]})
            if len(turn) > 2:
                self._warn_unread_turn_keys(turn)
        # Absent or null is "none" (LLaMA-Factory reads a column missing from some rows as null); a value of
        # another type is refused, falsy ones too (0, false, [], {}): LLaMA-Factory's features hold text here.
        system = native.get(columns["system"]) if columns["system"] is not None else None
        if system is None:
            system = ""
        elif not isinstance(system, str):
            raise InvalidValueError(f"{columns['system']} must be a string, got {_kind(system)}",
                                    field=columns["system"])
        tools = native.get(columns["tools"]) if columns["tools"] is not None else None
        if tools is None:
            tools = ""
        elif not isinstance(tools, str):
            why = "LLaMA-Factory fails on an array" if isinstance(tools, list) else "LLaMA-Factory reads the column as text"
            raise InvalidValueError(f"{columns['tools']} must be the JSON text of an array, got {_kind(tools)} ({why})",
                                    field=columns["tools"])
        raw = {"conversations": turns, "system": system, "tools": tools}
        for key in MEDIA_COLUMNS:
            name = columns[key]
            media = native.get(name) if name is not None else None
            if media is None:
                media = []
            elif isinstance(media, str) and media:
                media = [media]  # as LLaMA-Factory reads one path
            elif not isinstance(media, list):
                raise InvalidValueError(f"{name} must be a path or URL, or a list of them, got {_kind(media)}", field=name)
            for j, item in enumerate(media):
                if not isinstance(item, str) or not item:
                    # LLaMA-Factory also takes a video as the list of its frames' images: one path per video here.
                    frames = key == "videos" and isinstance(item, list) and item and all(isinstance(f, str) for f in item)
                    why = (" (a video given as a list of frame images, which the unified schema cannot hold: one "
                           "file or URL per video)") if frames else ""
                    if key == "images" and isinstance(item, dict) and "bytes" in item:  # datasets' Image feature
                        why = (" (a {bytes, path} struct, as datasets' Image feature stores an image: LLaMA-Factory "
                               "reads it, but the unified schema holds one path or URL per image; save the images "
                               "as files and give their paths)")
                    raise InvalidValueError(f"{name} entries must be paths or URLs, got {_kind(item)}{why}",
                                            field=f"{name}[{j}]")
            raw[key] = media
        known = {name for name in columns.values() if name is not None}
        # A default-named column the columns leave out that holds nothing (the "" and [] every exported row has,
        # or a file's null padding) is no column of the row's own: meta would differ from the same file's rows
        # read without the entry.
        raw["extra"] = {k: v for k, v in native.items()
                        if k not in known and not (k in _EMPTY_UNLESS_NAMED and v in (None, "", []))}
        if set(RAW_FEATURES) <= native.keys() and "extra" not in known and isinstance(native["extra"], dict):
            # The package's own raw row (a raw export read back: every raw column): its extra is taken as it is,
            # not kept as a column of the row (read back, it nested one level deeper each time)
            kept = raw["extra"].pop("extra")
            raw["extra"] = {**kept, **raw["extra"]}
        if layout.explicit_columns:
            self._warn_unread(raw["extra"])
        return raw

    def _layout_hint(self, native: dict) -> str:
        """Where a row's conversation is under another name: which options read it."""
        for name in ("messages", "conversations", "conversation"):
            value = native.get(name)
            if name != self.layout.columns["messages"] and isinstance(value, list):
                keys = next((sorted(t) for t in value if isinstance(t, dict)), [])
                return (f" (the row has {name!r}, turns with keys {keys}: name the columns and tags, e.g. "
                        f"columns={{'messages': {name!r}}}, tags={{'role_tag': 'role', 'content_tag': 'content', "
                        f"'user_tag': 'user', 'assistant_tag': 'assistant'}}, or read the file's dataset_info.json "
                        f"entry with dataset_info= and dataset=)")
        # A dataset_info.json given as a data file is LLaMA-Factory's registry, one object of entries, not rows
        entries = [name for name, value in native.items() if isinstance(value, dict) and "file_name" in value]
        if entries and len(entries) == len(native):
            return (f" (this is a dataset_info.json, entries {entries[:3]}{', ...' if len(entries) > 3 else ''}: "
                    f"read an entry with dataset_info=PATH and dataset=NAME, on the command line --option "
                    f"dataset_info=PATH --option dataset=NAME)")
        return ""

    def _tags_hint(self, turn: Any) -> str:
        """Where turns spell their role and text OpenAI's way (``role``/``content``): which options read them."""
        if isinstance(turn, dict) and isinstance(turn.get("role"), str) and "content" in turn:
            return (" (the turn has 'role' and 'content': name the file's tags, e.g. tags={'role_tag': 'role', "
                    "'content_tag': 'content', 'user_tag': 'user', 'assistant_tag': 'assistant', "
                    "'observation_tag': 'tool'}, or read its dataset_info.json entry with dataset_info= and "
                    "dataset=)")
        return ""

    def _warn_unread(self, extra: dict) -> None:
        """A column under a default name that the columns do not name: LLaMA-Factory does not read it either
        (it stays in extra), which is rarely what was meant; said once per column."""
        for key in ("system", "tools", *MEDIA_COLUMNS):
            if self.layout.columns[key] is None and extra.get(key) not in (None, "", []) and key not in self._warned:
                self._warned.add(key)
                where = self.layout.entry or "columns="
                logger.warning("llamafactory: the file has a %r column, which %s does not name: LLaMA-Factory does not "
                               "read it, nor does this reader (it stays in extra / meta); add \"%s\": \"%s\" to the "
                               "columns to read it", key, where, key, key)

    def _warn_unread_turn_keys(self, turn: dict) -> None:
        """A turn's other keys (``weight``, ``name``...): LLaMA-Factory's sharegpt reading takes the role and the
        text only, and so does this reader (the raw row has no place for them), which is said once per key."""
        tags = self.layout.tags
        for key, value in turn.items():
            if key in (tags["role_tag"], tags["content_tag"]) or value is None or f"turn:{key}" in self._warned:
                continue
            self._warned.add(f"turn:{key}")
            logger.warning("llamafactory: turns of the file have a %r key, which LLaMA-Factory's sharegpt reading "
                           "ignores (it reads %r and %r only): it is not read here either", key, tags["role_tag"],
                           tags["content_tag"])

    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        try:
            return self._to_unified(raw, ctx)
        except ToolUseDataError as exc:  # named in the raw row's default names: say them as the file does
            exc.field = self._field_in_file(exc.field)
            raise

    def _field_in_file(self, field: Optional[str]) -> Optional[str]:
        """``conversations[2].from`` (raw, default names) -> ``messages[2].role`` (the file's names)."""
        if not field:
            return field
        columns, tags = self.layout.columns, self.layout.tags
        match = _RAW_TURN_FIELD.match(field)
        if match:
            part = {"from": tags["role_tag"], "value": tags["content_tag"], None: None}[match.group(2)]
            return f"{columns['messages']}{match.group(1) or ''}{'.' + part if part else ''}{match.group(3)}"
        match = _RAW_COLUMN_FIELD.match(field)
        if match and columns.get(match.group(1)):
            return f"{columns[match.group(1)]}{match.group(2)}"
        return field

    def _to_unified(self, raw: dict, ctx: RowContext) -> dict:
        turns = raw["conversations"]
        system = raw["system"]
        original: dict[str, Any] = {}
        first = 0  # the file's index of turns[0]: errors name the file's turn
        if turns and turns[0]["from"] == SYSTEM_TAG:  # LLaMA-Factory also reads a leading system turn
            system, turns, first = turns[0]["value"], turns[1:], 1
            original["system_turn"] = True
            if raw["system"]:  # shadowed by the turn (LLaMA-Factory ignores it), kept for the way back
                original["system_column"] = raw["system"]
        if len(turns) % 2 and all(column in raw["extra"] for column in PREFERENCE_COLUMNS):
            # LLaMA-Factory's own preference files: a prompt of odd length, answered by chosen and rejected. It
            # trains them under a ranking entry; an odd-count error would wrongly say that it drops them.
            raise InvalidValueError(f"a preference row (a prompt of {count_of(len(turns), 'turn')}, with 'chosen' and "
                                    f"'rejected'): LLaMA-Factory trains it only as a ranking dataset (ranking: true "
                                    f"in its dataset_info.json entry); the llamafactory source reads conversations, "
                                    f"not preference pairs", field="chosen")
        if self.options.trailing_results == DROP and [t["from"] for t in turns[-2:]] == [FUNCTION, OBSERVATION] \
                and len(turns) % 2:
            # Results ending the conversation: trailing_results="drop" has the row end on its calls, as it has a
            # row of any other source (LLaMA-Factory drops it whole; the odd count was refused before the option).
            # After the check above: a preference row's prompt may end so, and is no conversation to trim.
            turns = turns[:-1]
        converted, origins = unified_messages(turns, first, self._file_tag)
        # The file's field of each unified message: the system column, or a turn of the conversation.
        origins = ([("system" if first == 0 else "conversations[0]")] if system else []) + origins
        messages = ([message("system", system)] if system else []) + converted
        tools = tools_of(raw["tools"])
        subset = ctx.file_label
        row = unified_row(id=f"llamafactory/{subset}/{ctx.row}", source="llamafactory", subset=subset, tools=tools,
                          messages=messages, images=raw["images"], videos=raw["videos"], audios=raw["audios"],
                          meta=dict(raw["extra"]))
        try:
            written = unified_to_llamafactory(row)
        except ConversionError as exc:  # e.g. a literal <tool_call> in an answer: LLaMA-Factory aborts on it
            raise InvalidValueError(f"LLaMA-Factory cannot train on this row: {exc.message}",
                                    field=tool_field(file_field(exc.field, origins), raw["tools"])) from None
        changed = {str(k): t["value"] for k, (t, w) in enumerate(zip(turns, written["conversations"]))
                   if t["value"] != w["value"]}
        if changed:
            original["conversations"] = changed
        if raw["tools"] != written["tools"]:
            original["tools"] = raw["tools"]
        if original:
            row["meta"][ORIGINAL_KEY] = original
        return row

    def from_unified(self, row: dict) -> dict:
        written = unified_to_llamafactory(row)
        meta = dict(row.get("meta") or {})
        original = meta.pop(ORIGINAL_KEY, None) or {}
        conversations = written["conversations"]
        system = written["system"]
        if original.get("system_turn"):
            conversations = [{"from": SYSTEM_TAG, "value": system}] + conversations
            system = original.get("system_column", "")
        tools = written["tools"]
        if isinstance(original.get("tools"), str) and original["tools"] != tools \
                and respelled_tools(original["tools"]) == tools:
            # the file's spelling, also one the llamafactory format respells because LLaMA-Factory's default tool
            # prompt fails on it (a tool without parameters): raw is the file as read (read again only then)
            tools = original["tools"]
        raw = {"conversations": conversations, "system": system, "tools": tools}
        raw.update({column: written[column] for column in MEDIA_COLUMNS})
        raw["extra"] = meta
        return raw


def _kind(value: Any) -> str:
    """A wrong value in an error message: its JSON type, with the value as JSON writes it when it is a short number
    or empty (``number 0``, ``object {}``); never a container's text, which may be large or nested past the
    recursion limit."""
    name = json_kind(value)
    short_int = not isinstance(value, int) or value.bit_length() <= 80  # (Python writes no int past 4,300 digits)
    if (isinstance(value, (bool, int, float)) and short_int) or (isinstance(value, (str, list, dict)) and not value):
        text = json.dumps(value)
        return f"{name} {text}" if len(text) <= 24 else name
    return name


def file_field(field: Optional[str], origins: list[str]) -> Optional[str]:
    """A field of the unified row (``messages[3].content``, as the writer names it) -> the file's field it was
    read from (``conversations[2].value``, ``system``), given each unified message's origin."""
    match = _UNIFIED_MESSAGE.match(field or "")
    if match is None or int(match.group(1)) >= len(origins):
        return field
    origin = origins[int(match.group(1))]
    if origin == "system":
        return origin
    return f"{origin}.from" if match.group(2) == ".role" else f"{origin}.value"


def tool_field(field: Optional[str], tools_text: str) -> Optional[str]:
    """``tools[i].function.<key>`` (the unified tool, as the writer names it) -> ``tools[i].<key>`` where the file
    spells tool i without the ``{"type": "function", "function": ...}`` wrapper, as LLaMA-Factory's own files do."""
    match = _UNIFIED_TOOL.match(field or "")
    if match is None:
        return field
    tool = json.loads(tools_text)[int(match.group(1))]  # (read by tools_of already: a list of objects)
    wrapped = isinstance(tool.get("function"), dict) and "type" in tool  # as check_tool_spelling reads it
    return field if wrapped else f"tools[{match.group(1)}]{match.group(2)}"


_UNIFIED_TOOL = re.compile(r"^tools\[(\d+)\]\.function((?:[.\[].*)?)$")
_UNIFIED_MESSAGE = re.compile(r"^messages\[(\d+)\](\.role)?")
_RAW_TURN_FIELD = re.compile(r"^conversations(\[\d+\])?(?:\.(from|value)(?=$|[.\[]))?(.*)$")
_RAW_COLUMN_FIELD = re.compile(r"^(system|tools|images|videos|audios)((?:[.\[].*)?)$")


def unified_messages(turns: list[dict], first: int = 0,
                     spell: Optional[dict] = None) -> tuple[list[dict], list[str]]:
    """Alternating sharegpt turns -> unified messages, with LLaMA-Factory's rules as typed errors, and the
    file's turn each message comes from (``conversations[k]``; ``first``: the file's index of ``turns[0]``).
    ``spell``: the file's spelling of each default tag, for the messages of errors."""
    def say(tag: str) -> str:
        return (spell or {}).get(tag, tag)

    if len(turns) % 2 or not turns:
        raise InvalidValueError(f"{count_of(len(turns), 'turn')}: LLaMA-Factory needs an even, non-zero count (it "
                                f"drops the row)", field="conversations")
    out: list[dict] = []
    origins: list[str] = []
    calls_seen = 0
    open_calls: Optional[list[dict]] = None  # calls of the function_call right before, awaiting results
    for k, turn in enumerate(turns):
        tag, value, where = turn["from"], turn["value"], f"conversations[{k + first}]"
        position = len(out)
        allowed = (EVEN_TAGS, ODD_TAGS)[k % 2]
        if tag not in allowed:
            # (only the file's own tags: one its tags leave out, mllm_demo's observation, is no turn it can have)
            named = [t for t in allowed if spell is None or t in spell]
            raise InvalidValueError(f"{say(tag)!r} at position {k}; LLaMA-Factory needs "
                                    f"{' or '.join(map(say, named))} there (it drops the row)", field=f"{where}.from")
        if tag == HUMAN:
            if open_calls:
                raise InvalidValueError(f"a {say(HUMAN)} turn right after a {say(FUNCTION)}: LLaMA-Factory would "
                                        f"train it as if the calls had answered", field=f"{where}.from")
            out.append(message("user", value))
        elif tag == GPT:
            reasoning, content = split_think(value)
            out.append(message("assistant", content, reasoning_content=reasoning))
        elif tag == FUNCTION:
            reasoning, parsed = read_call_value(value, f"{where}.value")
            calls = []
            for j, (name, arguments) in enumerate(parsed):
                calls.append(tool_call(f"call_{calls_seen}", name, arguments))
                calls_seen += 1
            out.append(message("assistant", "", reasoning_content=reasoning, tool_calls=calls))
            origins.append(where)
            open_calls = calls
            continue
        else:  # observation
            if not open_calls:
                # (results of no call: under tags naming no function tag, as mllm_demo's, there is no call at all)
                before = (f"no {say(FUNCTION)!r} turn" if spell is None or FUNCTION in spell
                          else "no call (the file's tags name no function tag)")
                raise InvalidValueError(f"{say(OBSERVATION)!r} turn (tool results) with {before} before it",
                                        field=f"{where}.from")
            results = value.split(RESULT_SEPARATOR) if len(open_calls) > 1 else [value]
            if len(results) != len(open_calls):
                raise InvalidValueError(f"{len(open_calls)} parallel calls but {count_of(len(results), 'result')} "
                                        f"in the {say(OBSERVATION)} turn", field=f"{where}.value")
            out += [message("tool", result, tool_call_id=call["id"], name=call["function"]["name"])
                    for call, result in zip(open_calls, results)]
        origins += [where] * (len(out) - position)
        open_calls = None
    return out, origins
