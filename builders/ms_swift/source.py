"""ms-swift agent format (``--dataset path.jsonl`` rows of ``swift sft``): reader and raw <-> unified.

Three stages, each the counterpart of a stage in ms-swift 4.6:

* ``read``: JSONL / JSON / Parquet rows (``data_files=``). Parquet's struct null-padding is removed.
* ``to_raw`` (:mod:`.native`): ms-swift's dataset preprocessing: aliases, provider formats, system column.
* ``to_unified``: ms-swift's template stage: consecutive ``tool_call`` messages become one assistant turn
  with the assistant text right before them (and its leading ``<think>``) as content/reasoning; the
  results that follow pair with the calls by position and get explicit ids ``call_0``, ``call_1``...
  A row with fewer media tags than media gets the missing tags before the text of its first message after
  the system message, as ms-swift adds them (the file's text is kept in ``meta``).

Plain rows (most rows) go from ``read`` to their unified row in one loop (``native_to_unified``,
:mod:`.common`), with the result the two stages give them, when no config needs the raw row.

Unified ``meta`` holds every column without a unified field (``rejected_response``, ``label``, ``channel``,
...) under its own name, and under ``ms_swift_original`` the source text the unified fields do not
reproduce exactly: ``{"messages": {"<unified message index>": [raw messages]}, "tools": [raw tools]}``.
Message ``loss``/``loss_scale``, provider call ids, tool-message ``name`` and call text spelled differently
from the canonical form live there. ``from_unified`` rebuilds each unified message's raw messages with the
``swift`` writer's rules and takes the original where one was kept, so raw -> unified -> raw is exact.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional

from datasets import Features, Json, List, Value

from tooluse_datasets.codec import json_bytes, python_json_text
from tooluse_datasets.errors import (ConversionError, InvalidValueError, JsonValueError, ToolUseDataError, count_of,
                                     json_kind)
from tooluse_datasets.schema import complete_row, message, tool_call, unified_row
from tooluse_datasets.source import RowContext, Source

from .common import common_columns, common_unified
from .native import ORIGINAL_KEY, RESULT_ROLES, Message, in_columns, native_to_raw
from .parsing import (json_text, missing_media_tags, parse_call, parse_tool, split_pre_call_text,
                      split_think, swift_tool)
from .upstream import CITATION, DESCRIPTION, UPSTREAM
from .writer import USER_AFTER_RESULTS, turn_messages

RAW_MESSAGE = {
    "role": Value("string"),  # one of system, user, assistant, tool_call, tool_response, tool
    "content": Json(),  # text; tool_call/tool contents may also be objects
    "loss": Json(),  # bool (or 0/1), per message
    "loss_scale": Json(),  # number, per message
    "name": Json(),  # tool messages only (ms-swift 4.6 keeps it there)
    "extra": Json(),  # message keys ms-swift ignores (provider call ids, reasoning_content...); {} if none
}

RAW_FEATURES = Features(
    {
        "messages": List(RAW_MESSAGE),
        "tools": List(Json()),  # each a tool object or the text of one, as the row gave it
        "images": List(Value("string")),
        "audios": List(Value("string")),
        "videos": List(Json()),  # a path/URL, or a list of frame paths
        "extra": Json(),  # every other column (rejected_response, label, channel, objects, ...); {} if none
    }
)


class MsSwiftSource(Source):
    name = "ms_swift"
    pretty_name = "ms-swift agent format"
    upstream = UPSTREAM
    raw_features = RAW_FEATURES
    citation = CITATION
    description = DESCRIPTION

    # -- reading --------------------------------------------------------------------------------------

    # (as ms-swift 4.6 strips Arrow's padding of tools)
    parquet_null_fields_absent = True

    def to_raw(self, native: dict, ctx: RowContext) -> dict:
        raw, messages, columns = native_to_raw(native)
        # Errors found in the raw messages by to_unified (given this row's ctx) name the file's messages, not
        # the raw list's (which counts the messages calls, blocks and the system column expand to), and every
        # column by the file's name for it (conversations, image...).
        ctx.origins = (raw["messages"], messages, columns)
        return raw

    def native_to_unified(self, native: dict, ctx: RowContext) -> Optional[dict]:
        subset = ctx.file_label
        row = common_unified(native, f"ms_swift/{subset}/{ctx.row}", subset)
        ctx.values_from_text = row is not None  # its tools and calls are JSON text, or checked lists
        return row

    def fill_unified_columns(self, native: dict, ctx: RowContext, lists: dict, write: Callable[[Any], str]) -> bool:
        subset = ctx.file_label
        return common_columns(native, f"ms_swift/{subset}/{ctx.row}", subset, lists, write)

    # -- raw <-> unified ------------------------------------------------------------------------------

    def to_unified(self, raw: dict, ctx: RowContext) -> dict:
        tools = [parse_tool(swift_tool(tool, f"tools[{i}]"), f"tools[{i}]") for i, tool in enumerate(raw["tools"])]
        traced = ctx.origins
        if traced is not None and traced[0] is not raw["messages"]:
            traced = None  # not the raw row to_raw made of the file's row: its names are the raw ones
        try:
            tagged = with_default_tags(raw["messages"], raw)
            turns = group_turns(tagged)
            for j, video in enumerate(raw["videos"]):
                if not isinstance(video, str):
                    column = traced[2].get("videos", "videos") if traced is not None else "videos"
                    raise ConversionError(f"a video given as a list of frames has no unified form (entries of "
                                          f"column {column!r} are paths or URLs)", field=f"videos[{j}]")
        except ToolUseDataError as exc:
            if traced is not None:
                raise in_columns(in_file_fields(exc, traced[1]), traced[2])
            raise
        if tagged is not raw["messages"]:  # the message given tags is compared as the file wrote it (kept in meta)
            written = {id(t): m for t, m in zip(tagged, raw["messages"]) if t is not m}
            turns = [(m, [written.get(id(x), x) for x in raw_slice]) for m, raw_slice in turns]
        original: dict = {}
        changed = {str(t): raw_slice for t, (m, raw_slice) in enumerate(turns)
                   if not same_json(canonical_raw_messages(m, f"messages[{t}]"), raw_slice)}
        if changed:
            original["messages"] = changed
        if not same_json(tools, raw["tools"]):
            original["tools"] = raw["tools"]
        meta = dict(raw["extra"])
        if original:
            meta[ORIGINAL_KEY] = original
        subset = ctx.file_label
        return unified_row(
            id=f"ms_swift/{subset}/{ctx.row}",
            source="ms_swift",
            subset=subset,
            tools=tools,
            messages=[m for m, _ in turns],
            images=raw["images"],
            audios=raw["audios"],
            videos=raw["videos"],
            meta=meta,
        )

    def from_unified(self, row: dict) -> dict:
        row = complete_row(row)
        meta = dict(row.get("meta") or {})
        original = meta.pop(ORIGINAL_KEY, None) or {}
        kept_messages = original.get("messages", {})
        messages: list[dict] = []
        for t, m in enumerate(row["messages"]):
            kept = kept_messages.get(str(t))
            messages += kept if kept is not None else canonical_raw_messages(m, f"messages[{t}]")
        return {
            "messages": messages,
            "tools": original["tools"] if "tools" in original else list(row["tools"]),
            "images": list(row["images"]),
            "audios": list(row["audios"]),
            "videos": list(row["videos"]),
            "extra": meta,
        }


# --------------------------------------------------------------------------------------------------
# Template stage: raw messages -> unified turns
# --------------------------------------------------------------------------------------------------


def group_turns(messages: list[dict]) -> list[tuple[dict, list[dict]]]:
    """Raw messages -> ``[(unified message, the raw messages it came from)]``.

    Rows ms-swift would fail to encode or would train on in a way unified rows cannot state (a system
    message after the first, results without calls, results whose count differs from the calls', a user
    message right after results) raise a typed error naming the message.
    """
    turns: list[tuple[dict, list[dict]]] = []
    calls_seen = 0
    i, n = 0, len(messages)
    while i < n:
        m, where = messages[i], f"messages[{i}]"
        role = m["role"]
        if role in ("system", "user"):
            if role == "system" and i != 0:
                raise InvalidValueError("a system message is only allowed first; ms-swift cannot encode the row",
                                        field=f"{where}.role")
            turns.append((message(role, text_of(m, where)), [m]))
            i += 1
        elif role == "assistant" and (i + 1 >= n or messages[i + 1]["role"] != "tool_call"):
            reasoning, content = split_think(text_of(m, where))
            turns.append((message("assistant", content, reasoning_content=reasoning), [m]))
            i += 1
        elif role in ("assistant", "tool_call"):
            start = i
            reasoning, content = None, ""
            if role == "assistant":  # text right before the calls: same turn (ms-swift concatenates them)
                reasoning, content = split_pre_call_text(text_of(m, where))
                i += 1
            calls = []
            while i < n and messages[i]["role"] == "tool_call":
                name, arguments = parse_call(messages[i]["content"], f"messages[{i}].content")
                calls.append(tool_call(f"call_{calls_seen}", name, arguments))
                calls_seen += 1
                i += 1
            turns.append((message("assistant", content, reasoning_content=reasoning, tool_calls=calls),
                          messages[start:i]))
            results_start = i
            while i < n and messages[i]["role"] in RESULT_ROLES:
                i += 1
            results = messages[results_start:i]
            if results and len(results) != len(calls):
                raise InvalidValueError(f"{count_of(len(calls), 'tool call')} followed by "
                                        f"{count_of(len(results), 'result')}; results pair with calls by position, "
                                        f"so the counts must match",
                                        field=f"messages[{results_start}]")
            for call, result in zip(calls, results):
                turns.append((message("tool", json_text(result["content"]), tool_call_id=call["id"],
                                      name=call["function"]["name"]), [result]))
            if results and i < n and messages[i]["role"] == "user":
                raise InvalidValueError(USER_AFTER_RESULTS, field=f"messages[{i}].role")
        else:
            why = "a result must follow the calls it answers"
            if i and messages[i - 1]["role"] == "assistant" and (i < 2 or messages[i - 2]["role"] != "tool_call"):
                # ms-swift trains such a row: the assistant text is taken to hold the calls (agent template text)
                why = ("ms-swift takes the assistant message before it to hold the calls as text (ReAct "
                       "'Action:'/'Action Input:' or hermes '<tool_call>'), which is not read as calls here: give "
                       "each call as a tool_call message before its results")
            raise InvalidValueError(f"{role} message without a tool_call before it; {why}", field=f"{where}.role")
    return turns


def with_default_tags(messages: list[dict], raw: dict) -> list[dict]:
    """``messages``, or a copy in which the first message after the system message starts with the media tags
    the row lacks, as ms-swift 4.6's template stage adds them (``Template._add_default_tags``, spec §6): tags
    are counted in the text of every message, the system message's too, and in the JSON text of call and result
    contents that are objects (ms-swift writes them as such first); when a user message's content is not text
    ms-swift adds none. So a unified row has one tag per media entry, as the ``swift`` writer requires."""
    if not (raw["images"] or raw["audios"] or raw["videos"]):
        return messages
    texts = []
    for m in messages:
        content = m["content"]
        if content is None:
            content = ""
        if not isinstance(content, str):
            if m["role"] == "user":
                return messages  # ms-swift gives up adding tags (the content is refused later, naming it)
            if m["role"] == "assistant":
                continue
            try:
                content = python_json_text(content)
            except (TypeError, ValueError, RecursionError):  # refused where the call or result is read
                continue
        texts.append(content)
    prefix = missing_media_tags(texts, raw)
    if not prefix:
        return messages
    k = 1 if messages and messages[0]["role"] == "system" else 0
    if k >= len(messages):
        raise InvalidValueError(f"the row has media but no message other than the system message for their "
                                f"{prefix[:prefix.index('>') + 1]} tags; ms-swift fails on it", field="messages")
    target = messages[k]
    if target["role"] not in ("user", "assistant") or not isinstance(target["content"], str):
        raise InvalidValueError(f"the row has fewer media tags than media, and ms-swift puts the missing ones "
                                f"({prefix}) before the text of this {target['role']} message, which it then "
                                f"cannot read", field=f"messages[{k}].content")
    out = list(messages)
    out[k] = {**target, "content": prefix + target["content"]}
    return out


_RAW_MESSAGE_FIELD = re.compile(r"messages\[(\d+)\]")


def in_file_fields(exc: ToolUseDataError, messages: list[Message]) -> ToolUseDataError:
    """``exc`` naming the file's field instead of a raw message's (``messages`` being the :class:`Message`
    each raw message came from)."""
    match = _RAW_MESSAGE_FIELD.match(exc.field or "")
    if match is not None and int(match.group(1)) < len(messages):
        exc.field = messages[int(match.group(1))].file_field(exc.field[match.end():])
    return exc


def text_of(m: dict, where: str) -> str:
    if not isinstance(m["content"], str):
        raise InvalidValueError(f"{m['role']} content must be a string, got {json_kind(m['content'])}",
                                field=f"{where}.content")
    return m["content"]


# --------------------------------------------------------------------------------------------------
# Unified -> raw
# --------------------------------------------------------------------------------------------------


def canonical_raw_messages(m: dict, where: str) -> list[dict]:
    """The raw messages the ``swift`` writer makes of one unified message, with the raw-only keys empty."""
    return [{**written, "loss": None, "loss_scale": None, "name": None, "extra": {}}
            for written in turn_messages(m, where)]


def same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON (``1``, ``1.0`` and ``True`` differ; key order counts). They are
    lists of messages or tools whose values may nest as deep as storage allows, so the list around them may be
    deeper than orjson writes: then compared item by item."""
    try:
        return json_bytes(a) == json_bytes(b)
    except JsonValueError:
        if type(a) is not type(b):
            return False
        if isinstance(a, list):
            return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
        if isinstance(a, dict):
            return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
        raise

