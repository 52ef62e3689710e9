"""The unified schema: one ``datasets.Features`` for every source.

A decoded row feeds training code as it is: ``tokenizer.apply_chat_template(row["messages"],
tools=row["tools"])`` (transformers), TRL's ``messages`` + ``tools`` columns, and our ``swift`` writer.
Conventions follow transformers/TRL: OpenAI function tools, ``arguments`` as a JSON object (not a
string), tool results as strings, reasoning in ``reasoning_content``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
from datasets import Features, Json, List, Value

from .errors import InvalidValueError, MissingFieldError, json_kind
from .registry import source_names


ROLES = ("system", "user", "assistant", "tool")

TOOL_CALL = {
    "id": Value("string"),
    "type": Value("string"),
    "function": {"name": Value("string"), "arguments": Json()},
}

MESSAGE = {
    "role": Value("string"),
    "content": Value("string"),
    "reasoning_content": Value("string"),
    "tool_calls": List(TOOL_CALL),
    "tool_call_id": Value("string"),
    "name": Value("string"),
}

CALL_EDGE = {
    "consumer": Value("string"),
    "argument": Value("string"),
    "producer": Value("string"),
    "output_field": Value("string"),
}

UNIFIED_FEATURES = Features(
    {
        "id": Value("string"),
        "source": Value("string"),
        "subset": Value("string"),
        "tools": List(Json()),
        "messages": List(MESSAGE),
        "call_graph": List(CALL_EDGE),
        "images": List(Value("string")),
        "audios": List(Value("string")),
        "videos": List(Value("string")),
        "meta": Json(),
    }
)

# (field, type as shown to users, meaning). Rendered into README.md and every dataset card.
FIELD_DOCS: list[tuple[str, str, str]] = [
    ("id", "string", 'Stable, unique: "<source>/<subset>/<upstream id or row number>".'),
    ("source", "string", "The registered source the row comes from: " + ", ".join(f"`{n}`" for n in source_names()) + "."),
    ("subset", "string", "The source's own partition: NESTFUL domain (`math`/`code`/`other`; v1: `v1-<group>`), ToolMind `split` value, ms-swift and LLaMA-Factory file stem (where files of one load share a stem, the file's path below their common folder: `a/data`)."),
    ("tools", "list<json>", 'OpenAI function tools `{"type": "function", "function": {name, description, parameters}}`; '
     "`parameters` is a JSON Schema object. Source extras stay inside `function` (NESTFUL `output_parameters`)."),
    ("messages", "list<struct>", "The conversation, in order."),
    ("messages[].role", "string", "`system`, `user`, `assistant` or `tool`."),
    ("messages[].content", "string", 'Text; `""` when an assistant turn only calls tools. Never null.'),
    ("messages[].reasoning_content", "string", "Reasoning of an assistant turn (`<think>` text without the tags); null when absent."),
    ("messages[].tool_calls", "list<struct>", "Calls made by an assistant turn, in order; `[]` otherwise."),
    ("messages[].tool_calls[].id", "string", "Call id, unique in the row (NESTFUL: the call's label, e.g. `$var_1`)."),
    ("messages[].tool_calls[].type", "string", 'Always `"function"`.'),
    ("messages[].tool_calls[].function.name", "string",
     "A tool in `tools`, where the row lists any (`call.no_tools`)."),
    ("messages[].tool_calls[].function.arguments", "json", "Arguments as a JSON object (dict), key order kept; NESTFUL references such as `$var_1.result$` kept verbatim."),
    ("messages[].tool_call_id", "string", "Tool messages: id of the call this result answers; null otherwise."),
    ("messages[].name", "string", "Tool messages: name of the tool that produced the result; null otherwise."),
    ("call_graph", "list<struct>", "Data dependencies between calls: `{consumer, argument, producer, output_field}` = call "
     "`producer`'s output `output_field` feeds argument `argument` of call `consumer`. `[]` where a source has none."),
    ("images", "list<string>", "Image paths/URLs referenced by `<image>` tags in order (ms-swift multimodal rows); `[]` otherwise."),
    ("audios", "list<string>", "Audio paths/URLs for `<audio>` tags; `[]` otherwise."),
    ("videos", "list<string>", "Video paths/URLs for `<video>` tags; `[]` otherwise."),
    ("meta", "json", "Every source field not mapped above (e.g. NESTFUL `gold_answer`), so that raw -> unified -> raw is lossless."),
]


def message(role: str, content: str = "", *, reasoning_content: Optional[str] = None,
            tool_calls: Optional[list[dict]] = None, tool_call_id: Optional[str] = None,
            name: Optional[str] = None) -> dict:
    """A unified message in the shape decoded rows have (chat templates' shape): ``role`` and ``content``
    always, the other keys only when they hold something. Converters build messages with this, so rows
    streamed straight from a converter equal rows read back from storage (where Arrow fills absent keys
    with null and decoding leaves them out again)."""
    m = {"role": role, "content": content}
    if reasoning_content is not None:
        m["reasoning_content"] = reasoning_content
    if tool_calls:
        m["tool_calls"] = tool_calls
    if tool_call_id is not None:
        m["tool_call_id"] = tool_call_id
    if name is not None:
        m["name"] = name
    return m


def tool_call(call_id: str, name: str, arguments: Any) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def unified_row(*, id: str, source: str, subset: str, tools: list, messages: list, meta: Any = None,
                call_graph: Optional[list] = None, images: Optional[list] = None,
                audios: Optional[list] = None, videos: Optional[list] = None) -> dict:
    return {
        "id": id,
        "source": source,
        "subset": subset,
        "tools": tools,
        "messages": messages,
        "call_graph": call_graph or [],
        "images": images or [],
        "audios": audios or [],
        "videos": videos or [],
        "meta": meta if meta is not None else {},
    }


# Decoded rows leave out what is empty (exact_features.ExactFeatures): null/empty message keys, and media columns
# without media. These restore the full form that writers and checks work on.
MEDIA_COLUMNS = ("images", "audios", "videos")


def complete_message(m: dict) -> dict:
    """A message with every unified key; an absent key means null (``[]`` for ``tool_calls``)."""
    return {"role": m["role"], "content": m.get("content", ""), "reasoning_content": m.get("reasoning_content"),
            "tool_calls": m.get("tool_calls") or [], "tool_call_id": m.get("tool_call_id"), "name": m.get("name")}


def check_role(message: Mapping, i: int) -> None:
    """A unified message's role is one of :data:`ROLES`: another (ms-swift's ``tool_call``) is a row of a format's
    own config (``swift``, ``raw``), which the row helpers would hand back unchanged or half rewritten."""
    role = message.get("role")
    if role is not None and role not in ROLES:
        raise InvalidValueError(f"role {json.dumps(role)} is not a unified role ({', '.join(ROLES)}): this takes "
                                "rows of the 'unified' config, not a format's own", field=f"messages[{i}].role")


def complete_row(row: dict) -> dict:
    """A unified row with every key, as the builder produces it (decoded rows leave empty ones out). Messages that
    are no list of objects with a ``role`` are a typed error naming the field."""
    if not isinstance(row, Mapping):
        raise InvalidValueError(f"a unified row must be an object, got {json_kind(row)}")
    messages = row.get("messages") or []
    if not isinstance(messages, list):
        raise InvalidValueError(f"messages must be a list, got {json_kind(messages)}", field="messages")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidValueError(f"a message must be an object, got {json_kind(m)}", field=f"messages[{i}]")
        if "role" not in m:
            raise MissingFieldError("message lacks 'role'", field=f"messages[{i}].role")
        check_role(m, i)
    out = dict(row)
    out["messages"] = [complete_message(m) for m in messages]
    for column in MEDIA_COLUMNS:
        out.setdefault(column, [])
    return out


def strip_empty(messages: list[dict]) -> list[dict]:
    """Messages without null/empty optional keys, for chat templates that test ``'key' in message``
    (e.g. Llama 3.1 treats any present ``tool_calls`` key as a call turn). ``messages`` is a row's list of
    messages (``row["messages"]``), not the row: iterating a row or a dataset gives keys or whole rows."""
    # (a NumPy array is what ds.with_format('numpy') gives as a row's messages)
    listed = isinstance(messages, (list, tuple, np.ndarray)) and np.ndim(messages) == 1
    if not listed or not all(isinstance(m, Mapping) for m in messages):
        given = type(messages).__name__ if not listed else "a list holding " + next(
            type(m).__name__ for m in messages if not isinstance(m, Mapping))
        raise TypeError(f"strip_empty takes a list of messages (row['messages']), got {given}")
    keep = ("role", "content")
    return [{k: v for k, v in m.items() if k in keep or v not in (None, [], "")} for m in messages]


def schema_table() -> str:
    """The unified schema as a Markdown table (README.md and the dataset cards embed it)."""
    lines = ["| field | type | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {meaning} |" for name, kind, meaning in FIELD_DOCS]
    return "\n".join(lines)


if __name__ == "__main__":
    print(schema_table())
