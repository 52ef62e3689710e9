"""Values nested exactly as deep as storage allows (``codec.MAX_DEPTH``) load and write in every format.

The README: tools and call arguments nested *deeper* than 254 levels are a JsonValueError naming the field. The
ms-swift reader and the ``swift``/``llamafactory`` writers wrap such values (``{"name", "arguments"}``, the list
of tools, the list of messages they compare), which is one level more than orjson writes: values at the limit
must not be refused for that, and a refusal must name a field.
"""
from __future__ import annotations

import json

import pytest

import tooluse_datasets as td
from tooluse_datasets.codec import MAX_DEPTH
from tooluse_datasets.formats import output_format

FORMATS = ("unified", "swift", "toolmind", "llamafactory")


def _nested(depth: int) -> dict:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _tool(depth: int) -> dict:
    """A tool whose JSON nests ``depth`` levels (tool, function, parameters, then the rest)."""
    return {"type": "function", "function": {"name": "f", "description": "d",
                                             "parameters": {"type": "object", "x": _nested(depth - 3)}}}


def _swift_rows(depth: int) -> list[dict]:
    call = {"role": "tool_call", "content": json.dumps({"name": "f", "arguments": _nested(depth)})}
    return [
        {"messages": [{"role": "user", "content": "hi"}, call, {"role": "tool_response", "content": "r"},
                      {"role": "assistant", "content": "ok"}],
         "tools": json.dumps([{"type": "function", "function": {"name": "f", "description": "d",
                                                                 "parameters": {"type": "object"}}}])},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}],
         "tools": json.dumps([_tool(depth)])},
    ]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("streaming", [False, True])
def test_ms_swift_values_at_the_depth_limit_load_in_every_format(tmp_path, cache_dir, streaming):
    path = _write(tmp_path / "deep.jsonl", _swift_rows(MAX_DEPTH))
    unified = list(td.load("ms_swift", data_files=path, split="train", streaming=streaming, cache_dir=cache_dir))
    assert unified[0]["messages"][1]["tool_calls"][0]["function"]["arguments"] == _nested(MAX_DEPTH)
    assert unified[1]["tools"] == [_tool(MAX_DEPTH)]
    for fmt in FORMATS[1:]:
        rows = list(td.load("ms_swift", fmt, data_files=path, split="train", streaming=streaming,
                            cache_dir=cache_dir))
        assert len(rows) == 2, fmt
    # the swift rows read back to the same values
    swift = list(td.load("ms_swift", "swift", data_files=path, split="train", cache_dir=cache_dir))
    back = list(td.load("ms_swift", data_files=_write(tmp_path / "back.jsonl", swift), split="train",
                        cache_dir=cache_dir))
    assert back[0]["messages"][1]["tool_calls"] == unified[0]["messages"][1]["tool_calls"]
    assert back[1]["tools"] == unified[1]["tools"]


def test_llamafactory_values_at_the_depth_limit_load_in_every_format(tmp_path, cache_dir):
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
    row = {"conversations": [{"from": "human", "value": "hi"},
                             {"from": "function_call", "value": json.dumps({"name": "f", "arguments": _nested(MAX_DEPTH)})},
                             {"from": "observation", "value": "r"}, {"from": "gpt", "value": "ok"}],
           "system": "s", "tools": json.dumps(tools)}
    path = _write(tmp_path / "deep.jsonl", [row, {**row, "tools": json.dumps([_tool(MAX_DEPTH)]),
                                                   "conversations": [{"from": "human", "value": "hi"},
                                                                     {"from": "gpt", "value": "ok"}]}])
    for fmt in FORMATS:
        assert len(list(td.load("llamafactory", fmt, data_files=path, split="train", cache_dir=cache_dir))) == 2, fmt


@pytest.mark.parametrize("fmt", FORMATS[1:])
def test_writers_take_python_rows_at_the_depth_limit_and_name_the_field_past_it(fmt):
    write = output_format(fmt).write

    def row(arguments, tool):
        return {"id": "x/y/0", "source": "ms_swift", "subset": "y", "tools": [tool],
                "messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "", "tool_calls": [
                                 {"id": "c0", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
                             {"role": "tool", "content": "r", "tool_call_id": "c0", "name": "f"},
                             {"role": "assistant", "content": "ok"}], "call_graph": [], "meta": {}}

    write(row(_nested(MAX_DEPTH), _tool(MAX_DEPTH)))
    with pytest.raises(td.JsonValueError) as info:
        write(row(_nested(MAX_DEPTH + 1), _tool(MAX_DEPTH)))
    assert info.value.field == "messages[1].tool_calls[0].function.arguments"
    with pytest.raises(td.JsonValueError) as info:
        write(row(_nested(1), _tool(MAX_DEPTH + 1)))
    assert info.value.field == "tools[0]"


@pytest.mark.parametrize("form", ["object", "openai"])
def test_ms_swift_call_objects_kept_in_meta_are_refused_naming_a_field(tmp_path, form):
    """A call given as an object (not the canonical JSON text) is kept as written in ``meta``, several levels
    deeper than the arguments: near the limit that is refused, but naming the field, never an anonymous error."""
    arguments = _nested(MAX_DEPTH)
    if form == "object":
        call = {"role": "tool_call", "content": {"name": "f", "arguments": arguments}}
        result = {"role": "tool_response", "content": "r"}
    else:
        call = {"role": "assistant", "content": None,
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": arguments}}]}
        result = {"role": "tool", "content": "r"}
    path = _write(tmp_path / "deep.jsonl", [{"messages": [{"role": "user", "content": "hi"}, call, result,
                                                          {"role": "assistant", "content": "ok"}]}])
    with pytest.raises(td.JsonValueError) as info:
        list(td.load("ms_swift", data_files=path, split="train", streaming=True))
    assert info.value.field is not None and info.value.row == 0
