"""The common ms-swift row straight to its unified row, in one loop.

Most ms-swift agent rows are plain: ``messages`` of ``{role, content}`` text with ms-swift's own role names,
calls as JSON objects ``{"name", "arguments"}``, ``tools`` as OpenAI function tools (a list, or the JSON
text of one), media as lists of paths. For such a row :func:`common_unified` builds the unified row that
the general stages (:func:`.native.native_to_raw`, then :meth:`.source.MsSwiftSource.to_unified`) would
build, including what they keep in ``meta["ms_swift_original"]`` for turns the ``swift`` writer would
spell differently (a ``tool`` result role, escaped non-ASCII in a call, a think block with other spacing).

It returns None for any other row, and for every row the general stages refuse: such rows take the
general stages, which report what is wrong. ``tests/test_ms_swift.py`` compares both paths on real,
generated and mutated rows.

Prepare of the unified config takes :func:`common_columns` instead, which appends the same row's values to
the table's columns without making its dicts (making them and walking them again in the generic appender
cost about a quarter of prepare's CPU time on generated rows). Both read the row in :func:`_plain_row`.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from tooluse_datasets.codec import MAX_DEPTH, dumps, loads, may_nest_deep, python_json_text
from tooluse_datasets.errors import JsonValueError

from .native import ORIGINAL_KEY, Message
from .parsing import join_think, missing_media_tags, split_pre_call_text, split_think, without_arrow_padding

_MEDIA_COLUMNS = ("images", "audios", "videos")
_FUNCTION_KEYS = ("name", "description", "parameters")


def common_unified(native: dict, row_id: str, subset: str) -> Optional[dict]:
    """The unified row of ``native`` if it is a plain row (see the module docstring), else None."""
    plain = _plain_row(native)
    if plain is None:
        return None
    turns, tools, media, changed = plain
    out = []
    for role, content, reasoning, calls, call_id, name in turns:
        if call_id is not None:
            out.append({"role": "tool", "content": content, "tool_call_id": call_id, "name": name})
            continue
        turn = {"role": role, "content": content}
        if reasoning is not None:
            turn["reasoning_content"] = reasoning
        if calls is not None:
            turn["tool_calls"] = [{"id": number, "type": "function", "function": {"name": name, "arguments": arguments}}
                                  for number, name, arguments in calls]
        out.append(turn)
    meta = {ORIGINAL_KEY: {"messages": changed}} if changed else {}
    return {"id": row_id, "source": "ms_swift", "subset": subset, "tools": tools, "messages": out,
            "call_graph": [], "images": media.get("images", []), "audios": media.get("audios", []),
            "videos": media.get("videos", []), "meta": meta}


def common_columns(native: dict, row_id: str, subset: str, lists: dict, write: Callable[[Any], str]) -> bool:
    """:func:`common_unified`'s row appended straight to a unified table's columns (``ColumnPlan.lists``;
    ``write`` spells a JSON leaf), without building its dicts: prepare's shortcut. False for any other row,
    having appended nothing."""
    plain = _plain_row(native, write)
    if plain is None:
        return False
    turns, tool_texts, media, changed = plain
    roles, contents, reasonings = lists["messages[].role"], lists["messages[].content"], \
        lists["messages[].reasoning_content"]
    call_ends, result_ids, result_names = lists["messages[].tool_calls"], lists["messages[].tool_call_id"], \
        lists["messages[].name"]
    call_ids, arguments_texts = lists["messages[].tool_calls[].id"], lists["messages[].tool_calls[].function.arguments"]
    call_types, call_names = lists["messages[].tool_calls[].type"], lists["messages[].tool_calls[].function.name"]
    for role, content, reasoning, calls, call_id, name in turns:
        roles.append(role)
        contents.append(content)
        reasonings.append(reasoning)
        if calls is not None:
            for number, function, arguments in calls:
                call_ids.append(number)
                call_types.append("function")
                call_names.append(function)
                arguments_texts.append(write(arguments))
        call_ends.append(len(call_ids))
        result_ids.append(call_id)
        result_names.append(name)
    lists["messages"].append(len(roles))
    tools = lists["tools[]"]
    tools.extend(tool_texts)
    lists["tools"].append(len(tools))
    lists["id"].append(row_id)
    lists["source"].append("ms_swift")
    lists["subset"].append(subset)
    lists["call_graph"].append([])
    for key in _MEDIA_COLUMNS:
        lists[key].append(media.get(key, []))
    lists["meta"].append(write({ORIGINAL_KEY: {"messages": changed}} if changed else {}))
    return True


# A unified message of a plain row: (role, content, reasoning or None, calls or None, the result's call id or
# None, the result's tool name or None); a call: (id, name, arguments).
_Turn = tuple


def _plain_row(native: dict, write: Optional[Callable[[Any], str]] = None) \
        -> Optional[tuple[list[_Turn], list, dict, dict]]:
    """(turns, tools, media, the raw messages kept by unified index) of a plain row, else None. With ``write``
    the tools come as their stored JSON texts (:func:`_stored_tools`)."""
    media = {}
    for key in native:
        if key in _MEDIA_COLUMNS:
            paths = native[key]
            if paths is None:
                paths = []
            elif type(paths) is not list or not all(type(p) is str and p.strip() for p in paths):
                return None  # (an empty path is refused by the general stages)
            media[key] = paths
        elif key != "messages" and key != "tools":
            return None  # other columns (system, aliases, extra) take the general stages
    messages = native.get("messages")
    if type(messages) is not list or not messages:
        return None
    for m in messages:
        if type(m) is not dict or len(m) != 2 or type(m.get("content")) is not str:
            return None
    tagged_at, written = -1, None  # a user message given the media tags the row lacks (source.with_default_tags)
    if media and any(media.values()):
        prefix = missing_media_tags([m["content"] for m in messages], media)
        if prefix:
            tagged_at = 1 if messages[0].get("role") == "system" else 0
            if tagged_at >= len(messages) or messages[tagged_at].get("role") != "user":
                return None  # the general stages add them elsewhere, or name what is wrong
            written = messages[tagged_at]
            messages = list(messages)
            messages[tagged_at] = {"role": "user", "content": prefix + written["content"]}
    out: list[_Turn] = []
    changed: dict[str, list] = {}  # unified message index -> the raw messages kept as they were written
    calls_seen = 0
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        role, content = m.get("role"), m["content"]
        if role == "user" or (role == "system" and i == 0):
            if i == tagged_at:
                changed[str(len(out))] = [_raw(written)]
            out.append((role, content, None, None, None, None))
            i += 1
            continue
        start = i
        if role == "assistant":
            i += 1
            if i == n or messages[i].get("role") != "tool_call":
                reasoning, text = split_think(content)
                if join_think(reasoning, text) != content:
                    changed[str(len(out))] = [_raw(m)]
                out.append(("assistant", text, reasoning, None, None, None))
                continue
            reasoning, text = split_pre_call_text(content)
            exact = bool(content) and join_think(reasoning, text + "\n" if text else text) == content
        elif role == "tool_call":
            reasoning, text, exact = None, "", True
        else:
            return None  # a result without calls, a system message after the first, or another role name
        calls = []
        while i < n and messages[i].get("role") == "tool_call":
            parsed = _call(messages[i]["content"], calls_seen)
            if parsed is None:
                return None
            call, same = parsed
            calls.append(call)
            exact = exact and same
            calls_seen += 1
            i += 1
        if not exact:
            changed[str(len(out))] = [_raw(c) for c in messages[start:i]]
        out.append(("assistant", text, reasoning, calls, None, None))
        results = 0
        while i < n and messages[i].get("role") in ("tool_response", "tool"):
            if results == len(calls):
                return None
            result, call = messages[i], calls[results]
            if result["role"] == "tool":
                changed[str(len(out))] = [_raw(result)]
            out.append(("tool", result["content"], None, None, call[0], call[1]))
            results += 1
            i += 1
        if results and (results != len(calls) or (i < n and messages[i].get("role") == "user")):
            return None  # a count mismatch, or a user message right after the results: the general stages refuse
    # Last: a row refused above has not paid for its tools.
    tools = _plain_tools(native.get("tools")) if write is None else _stored_tools(native.get("tools"), write)
    if tools is None:
        return None
    return out, tools, media, changed


def _raw(m: dict) -> dict:
    """The raw form of a ``{role, content}`` message (as the general stages keep it)."""
    return Message(-1, m["role"], m["content"]).as_raw()


def _call(text: str, number: int) -> Optional[tuple[tuple, bool]]:
    """A call's JSON text -> ((its id, name, arguments), whether the text is exactly as the writer spells it); None
    for text the general stages read another way (a Python literal, arguments as text) or refuse."""
    call = _shallow_json(text)
    if type(call) is not dict:
        return None
    name, arguments = call.get("name"), call.get("arguments")
    if type(name) is not str or not name or type(arguments) is not dict:
        return None
    same = len(call) == 2 and text.startswith('{"name": ') and python_json_text(call) == text
    return (f"call_{number}", name, arguments), same


def _shallow_json(text: str) -> Any:
    """The value of JSON ``text`` if it nests less deep than storage allows, else None (the general stages
    name what is wrong)."""
    if may_nest_deep(text):
        return None
    try:
        return loads(text)
    except ValueError:
        return None


def _plain_tools(value: Any) -> Optional[list]:
    """``tools`` (absent, a list, or the JSON text of a list) if every tool is an OpenAI function tool in the
    unified key order, else None."""
    if value is None:
        return []
    if type(value) is str:
        if not value.strip():
            return None  # ms-swift cannot parse it: the general stages refuse the row
        text = value
        value = _shallow_json(value)
    elif type(value) is list:  # from JSON, or from Parquet (where floats may be NaN)
        try:
            text = dumps(value)
        except JsonValueError:
            return None  # nested too deep, or holding what JSON cannot: the general stages name it
    if type(value) is not list:
        return None
    if "null" in text and without_arrow_padding(value) != value:
        return None  # nulls ms-swift drops from tools (parsing.swift_tool): the general stages drop them
    return value if all(_is_plain_tool(tool) for tool in value) else None


def _is_plain_tool(tool: Any) -> bool:
    """An OpenAI function tool in the unified key order (name, description, parameters)."""
    if type(tool) is not dict or tool.get("type") != "function" or tuple(tool)[:2] != ("type", "function"):
        return False
    function = tool["function"]
    if type(function) is not dict or tuple(function)[:3] != _FUNCTION_KEYS \
            or "name_for_model" in function or "description_for_model" in function:
        return False
    name, description = function["name"], function["description"]
    return type(name) is str and bool(name) and type(description) is str and type(function["parameters"]) is dict


# Each row lists its own tools, so a ``tools`` text rarely repeats, but its tools do (300 distinct tools in the
# 70K of 20K generated rows): reading, checking and writing each distinct tool once saved 10-26% of prepare's
# CPU time there (alternating runs). Cache: ``write`` -> a tool's JSON text as json.dumps writes it in a list ->
# (its stored text, or False if it is no plain tool; the brackets it opens, so that the list's nesting is
# screened without a scan). Emptied when its pieces reach _STORED_TOOLS_CHARS characters (their stored texts
# are about as long).
_STORED_TOOLS: dict[Callable[[Any], str], dict[str, tuple[Any, int]]] = {}
_STORED_TOOLS_CHARS = 8 << 20
_stored_tools_chars = 0
_TOOLS_SEPARATOR = "}, {"  # between two objects in a list, as json.dumps writes it


def _stored_tools(value: Any, write: Callable[[Any], str]) -> Optional[list[str]]:
    """:func:`_plain_tools` as the stored JSON text of each tool (``write``), else None. The JSON text of a list
    (``[{...}, {...}]``) is cut where json.dumps separates two objects; when every piece is a JSON text itself
    (cut inside a string or a nested list, a piece is not), the text is the list of their values, so each
    piece is read and written once for all rows. Any other value or cut: the whole value is read."""
    if type(value) is str and len(value) > 2 and value[0] == "[" and value[-1] == "]":
        parts = value[1:-1].split(_TOOLS_SEPARATOR)
        pieces = [parts[0]] if len(parts) == 1 else \
            [parts[0] + "}", *["{" + part + "}" for part in parts[1:-1]], "{" + parts[-1]]
        cache = _STORED_TOOLS.get(write)
        if cache is None:
            cache = _STORED_TOOLS[write] = {}
        texts = []
        brackets = 1  # the list's own
        for piece in pieces:
            known = cache.get(piece)
            if known is None:
                known = _stored_tool(piece, write)
                if known is None:
                    break  # not a JSON text: the whole value is read below
                _remember_tool(cache, piece, known)
            text, opened = known
            if text is False:
                return None
            texts.append(text)
            brackets += opened
        else:
            # The whole text's brackets are its pieces' and the list's: too many, and _plain_tools refuses it.
            if brackets < MAX_DEPTH or not may_nest_deep(value):
                return texts
    tools = _plain_tools(value)
    return None if tools is None else [write(tool) for tool in tools]


def _remember_tool(cache: dict, piece: str, known: tuple[Any, int]) -> None:
    global _stored_tools_chars
    if _stored_tools_chars + len(piece) > _STORED_TOOLS_CHARS:
        for other in _STORED_TOOLS.values():
            other.clear()
        _stored_tools_chars = 0
    cache[piece] = known
    _stored_tools_chars += len(piece)


def _stored_tool(text: str, write: Callable[[Any], str]) -> Optional[tuple[Any, int]]:
    """(the stored text of the tool in JSON ``text``, read exactly as the whole list's text would be, or False if
    it is no plain tool or holds nulls ms-swift drops, see :func:`_plain_tools`; the brackets ``text`` opens);
    None if ``text`` is no JSON text, or may nest too deep to store: the whole text, holding its brackets, is then
    refused by :func:`_plain_tools`, where writing the tool here would raise."""
    if may_nest_deep(text):
        return None
    try:
        tool = loads(text)
    except ValueError:
        return None
    opened = text.count("{") + text.count("[")
    if not _is_plain_tool(tool) or ("null" in text and without_arrow_padding(tool) != tool):
        return False, opened
    return write(tool), opened
