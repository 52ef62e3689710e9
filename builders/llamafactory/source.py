"""LLaMA-Factory sharegpt files (``formatting: sharegpt`` in its ``dataset_info.json``) -> unified rows.

``to_raw`` takes a row as the file holds it: ``conversations`` (``from``/``value``), ``system``, ``tools`` (JSON
text of a list), ``images``/``videos``/``audios``; other columns go to ``extra``. ``to_unified`` follows
LLaMA-Factory 0.9.5's own reading (``SharegptDatasetConverter`` and ``FunctionFormatter``): a row it would drop
(roles out of alternation, an odd count, a conversation not ending on gpt/function_call) or crash on (a
``function_call`` that is not JSON of ``{name, arguments}``, ``tools`` that are not JSON text of a list), or
that it would mistrain on (an observation with no call before it, a call followed by a human turn, results that
do not match the calls' count) raises a typed error naming the field.

A ``function_call`` becomes one assistant turn with its calls (ids ``call_0``, ``call_1``... over the row) and a
leading ``<think>`` block as reasoning; the ``observation`` after it becomes one tool message per call (parallel
results split on LLaMA-Factory's separator). Spellings the ``llamafactory`` writer would not reproduce byte for
byte are kept in ``meta["llamafactory_original"]``, so LLaMA-Factory -> unified -> LLaMA-Factory is exact.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from datasets import Features, Json

from tooluse_datasets.builders.ms_swift.parsing import split_think
from tooluse_datasets.errors import ConversionError, InvalidValueError, MissingFieldError
from tooluse_datasets.schema import message, tool_call, unified_row
from tooluse_datasets.shards import file_stem
from tooluse_datasets.source import RowContext, Source

from .upstream import CITATION, DESCRIPTION, UPSTREAM
from .writer import (EVEN_TAGS, FUNCTION, GPT, HUMAN, LLAMAFACTORY_FEATURES, MEDIA_COLUMNS, ODD_TAGS, ORIGINAL_KEY,
                     RESULT_SEPARATOR, parse_calls, split_call_thought, tools_of, unified_to_llamafactory)

# The format's own columns, plus every other column of the file under its own name ({} if none).
RAW_FEATURES = Features({**LLAMAFACTORY_FEATURES, "extra": Json()})
SYSTEM_TAG = "system"


class LlamaFactorySource(Source):
    name = "llamafactory"
    pretty_name = "LLaMA-Factory sharegpt format"
    upstream = UPSTREAM
    raw_features = RAW_FEATURES
    citation = CITATION
    description = DESCRIPTION

    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        conversations = native.get("conversations")
        if conversations is None:
            raise MissingFieldError("sharegpt rows need 'conversations'", field="conversations")
        if not isinstance(conversations, list):
            raise InvalidValueError("conversations must be a list of {from, value}", field="conversations")
        turns = []
        for k, turn in enumerate(conversations):
            where = f"conversations[{k}]"
            if not isinstance(turn, dict) or not isinstance(turn.get("from"), str):
                raise InvalidValueError("a turn needs a 'from' tag", field=f"{where}.from")
            if not isinstance(turn.get("value"), str):
                raise InvalidValueError("a turn's value must be a string", field=f"{where}.value")
            turns.append({"from": turn["from"], "value": turn["value"]})
        # Absent or null is "none" (LLaMA-Factory reads a column missing from some rows as null); a value of
        # another type is refused, falsy ones too (0, false, [], {}): LLaMA-Factory's features hold text here.
        system = native.get("system")
        if system is None:
            system = ""
        elif not isinstance(system, str):
            raise InvalidValueError(f"system must be a string, got {_kind(system)}", field="system")
        tools = native.get("tools")
        if tools is None:
            tools = ""
        elif not isinstance(tools, str):
            why = "LLaMA-Factory fails on a list" if isinstance(tools, list) else "LLaMA-Factory reads the column as text"
            raise InvalidValueError(f"tools must be the JSON text of a list, got {_kind(tools)} ({why})", field="tools")
        raw = {"conversations": turns, "system": system, "tools": tools}
        for column in MEDIA_COLUMNS:
            media = native.get(column)
            if media is None:
                media = []
            elif not isinstance(media, list):
                raise InvalidValueError(f"{column} must be a list of paths or URLs, got {_kind(media)}", field=column)
            for j, item in enumerate(media):
                if not isinstance(item, str) or not item:
                    raise InvalidValueError(f"{column} entries must be paths or URLs, got {_kind(item)}",
                                            field=f"{column}[{j}]")
            raw[column] = media
        known = {"conversations", "system", "tools", *MEDIA_COLUMNS}
        raw["extra"] = {k: v for k, v in native.items() if k not in known}
        return raw

    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        turns = raw["conversations"]
        system = raw["system"]
        original: dict[str, Any] = {}
        first = 0  # the file's index of turns[0]: errors name the file's turn
        if turns and turns[0]["from"] == SYSTEM_TAG:  # LLaMA-Factory also reads a leading system turn
            system, turns, first = turns[0]["value"], turns[1:], 1
            original["system_turn"] = True
            if raw["system"]:  # shadowed by the turn (LLaMA-Factory ignores it), kept for the way back
                original["system_column"] = raw["system"]
        converted, origins = unified_messages(turns, first)
        # The file's field of each unified message: the system column, or a turn of the conversation.
        origins = ([("system" if first == 0 else "conversations[0]")] if system else []) + origins
        messages = ([message("system", system)] if system else []) + converted
        tools = tools_of(raw["tools"])
        subset = file_stem(ctx.file)
        row = unified_row(id=f"llamafactory/{subset}/{ctx.row}", source="llamafactory", subset=subset, tools=tools,
                          messages=messages, images=raw["images"], videos=raw["videos"], audios=raw["audios"],
                          meta=dict(raw["extra"]))
        try:
            written = unified_to_llamafactory(row)
        except ConversionError as exc:  # e.g. a literal <tool_call> in an answer: LLaMA-Factory aborts on it
            raise InvalidValueError(f"LLaMA-Factory cannot train on this row: {exc.message}",
                                    field=file_field(exc.field, origins)) from None
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
        raw = {"conversations": conversations, "system": system, "tools": written["tools"]}
        raw.update({column: written[column] for column in MEDIA_COLUMNS})
        raw["extra"] = meta
        return raw


def _kind(value: Any) -> str:
    """A wrong value in an error message: its type, with the value when it is a number or empty (``int 0``,
    ``dict {}``); never the repr of a container, which may be large or nested past the recursion limit."""
    name = type(value).__name__
    if isinstance(value, (bool, int, float)) or (isinstance(value, (str, list, dict)) and not value):
        text = repr(value)
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


_UNIFIED_MESSAGE = re.compile(r"^messages\[(\d+)\](\.role)?")


def unified_messages(turns: list[dict], first: int = 0) -> tuple[list[dict], list[str]]:
    """Alternating sharegpt turns -> unified messages, with LLaMA-Factory's rules as typed errors, and the
    file's turn each message comes from (``conversations[k]``; ``first``: the file's index of ``turns[0]``)."""
    if len(turns) % 2 or not turns:
        raise InvalidValueError(f"{len(turns)} turns: LLaMA-Factory needs an even, non-zero count (it drops the "
                                f"row)", field="conversations")
    out: list[dict] = []
    origins: list[str] = []
    calls_seen = 0
    open_calls: Optional[list[dict]] = None  # calls of the function_call right before, awaiting results
    for k, turn in enumerate(turns):
        tag, value, where = turn["from"], turn["value"], f"conversations[{k + first}]"
        position = len(out)
        allowed = (EVEN_TAGS, ODD_TAGS)[k % 2]
        if tag not in allowed:
            raise InvalidValueError(f"{tag!r} at position {k}; LLaMA-Factory needs {' or '.join(allowed)} there "
                                    f"(it drops the row)", field=f"{where}.from")
        if tag == HUMAN:
            if open_calls:
                raise InvalidValueError("a human turn right after a function_call: LLaMA-Factory would train it "
                                        "as if the calls had answered", field=f"{where}.from")
            out.append(message("user", value))
        elif tag == GPT:
            reasoning, content = split_think(value)
            out.append(message("assistant", content, reasoning_content=reasoning))
        elif tag == FUNCTION:
            reasoning, text = split_call_thought(value)
            calls = []
            for j, (name, arguments) in enumerate(parse_calls(text, f"{where}.value")):
                calls.append(tool_call(f"call_{calls_seen}", name, arguments))
                calls_seen += 1
            out.append(message("assistant", "", reasoning_content=reasoning, tool_calls=calls))
            origins.append(where)
            open_calls = calls
            continue
        else:  # observation
            if not open_calls:
                raise InvalidValueError("an observation with no function_call before it", field=f"{where}.from")
            results = value.split(RESULT_SEPARATOR) if len(open_calls) > 1 else [value]
            if len(results) != len(open_calls):
                raise InvalidValueError(f"{len(open_calls)} parallel calls but {len(results)} results in the "
                                        f"observation", field=f"{where}.value")
            out += [message("tool", result, tool_call_id=call["id"], name=call["function"]["name"])
                    for call, result in zip(open_calls, results)]
        origins += [where] * (len(out) - position)
        open_calls = None
    return out, origins
