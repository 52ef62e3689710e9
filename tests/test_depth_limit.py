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


def _nestful_too_deep(tmp_path) -> str:
    row = json.loads(open(_nestful_sample(), encoding="utf-8").readline())
    row["output"][1]["arguments"]["arg_1"] = _nested(MAX_DEPTH)
    return _write(tmp_path / "deep_nestful.jsonl", [row])


def _nestful_sample() -> str:
    return next(f for f in td.sample_files("nestful")["train"] if f.endswith("nestful_github.jsonl"))


def _toolmind_too_deep(tmp_path) -> str:
    import pyarrow.parquet as pq

    row = pq.read_table(td.sample_files("toolmind")["train"][0]).slice(0, 1).to_pylist()[0]
    messages = json.loads(row["messages"])
    call = messages[3]["content"]  # its 4th message (after system, user, reasoning) is its first call
    assert call.startswith("<tool_call>") and '"ids": [' in call
    messages[3]["content"] = call.replace('"ids": [', '"ids": [' + json.dumps(_nested(MAX_DEPTH)) + ", ", 1)
    return _write(tmp_path / "deep_toolmind.jsonl", [{"messages": json.dumps(messages), "split": row["split"]}])


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("source, make, field, unified", [
    ("nestful", _nestful_too_deep, "messages[1].tool_calls[1].function.arguments", None),
    ("toolmind", _toolmind_too_deep, "messages[3]", "messages[1].tool_calls[0].function.arguments")])
def test_arguments_too_deep_to_store_name_the_call_not_the_whole_column(tmp_path, cache_dir, streaming, source, make,
                                                                        field, unified):
    """The row was refused on the field 'messages' alone, which names no message (NESTFUL's file has no such
    field; ToolMind's messages column holds every message): it names the call's arguments, or for ToolMind the
    message of the row as read, as a writer's ConversionError does."""
    path = make(tmp_path)
    report = td.SkipReport(keep_all=True)
    rows = list(td.load(source, data_files=path, split="synthetic" if source == "toolmind" else "train",
                        streaming=streaming, on_error="skip", report=report, cache_dir=cache_dir))
    assert rows == [] and report.skipped == 1
    skipped = report.rows[0]
    assert (skipped["error"], skipped["row"], skipped["field"]) == ("JsonValueError", 0, field)
    assert "254 levels deep" in skipped["message"]
    if unified:
        assert f"the unified row's {unified}" in skipped["message"]
