"""LLaMA-Factory sharegpt: the reader, the ``llamafactory`` writer and ``export --format llamafactory``.

``accepted_by_llamafactory`` restates, independently of the writer, what LLaMA-Factory 0.9.5 does with a row
(``SharegptDatasetConverter``: alternation, count, ending; ``FunctionFormatter``: thought words, then JSON of
``{name, arguments}`` or a list; ``ToolFormatter``/``DefaultToolUtils``: tools JSON text, ``parameters.properties``)
and returns the calls it would train on, so the tests check that no row is dropped, altered or loses a call.
LLaMA-Factory itself is not run here (0.9.5 pins ``datasets<=4.0``, which cannot share this environment):
``tests/test_llamafactory_real.py`` runs it, in its own environment, when ``LLAMAFACTORY_PYTHON`` is set.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.errors import ConversionError, InvalidValueError, MissingFieldError, ToolUseDataError
from tooluse_datasets.registry import source_names

from tooluse_datasets.builders.llamafactory.source import LlamaFactorySource
from tooluse_datasets.builders.llamafactory.writer import LLAMAFACTORY_FEATURES, RESULT_SEPARATOR, unified_to_llamafactory
from tooluse_datasets.source import RowContext

from conftest import shared_data
from mirror_support import build_on_a_callers_ray

THOUGHT = re.compile(r"<think>\n(.*?)\n</think>\n\n", re.DOTALL)
EVEN, ODD = ("human", "observation"), ("gpt", "function_call")
LF_DATA = Path(__file__).parent / "data" / "llamafactory"  # LLaMA-Factory's own demo files


def accepted_by_llamafactory(row: dict) -> list[tuple[str, str]]:
    """The (name, arguments JSON) LLaMA-Factory would train on; fails where it would drop or crash."""
    turns = row["conversations"]
    assert turns and len(turns) % 2 == 0, "odd count: dropped"
    for k, turn in enumerate(turns):
        assert turn["from"] in (EVEN, ODD)[k % 2], f"{turn['from']} at {k}: dropped"
        assert isinstance(turn["value"], str)
    assert turns[-1]["from"] in ODD
    if row["tools"]:
        tools = json.loads(row["tools"])
        assert isinstance(tools, list)
        for tool in tools:
            tool = tool.get("function", "") if tool.get("type") == "function" else tool
            for name, param in tool["parameters"]["properties"].items():  # DefaultToolUtils.tool_formatter
                name in tool["parameters"].get("required", [])  # noqa: B015 - a TypeError where it is not a list
                ", ".join(param.get("enum") or [])
                (param.get("items") or {}).get("type", "")
    calls = []
    for k, turn in enumerate(turns):
        if turn["from"] == "function_call":
            match = THOUGHT.search(turn["value"])
            json_part = turn["value"].replace(match.group(0), "") if match else turn["value"]
            # (FunctionFormatter parses a <tool_call>...</tool_call> span first; one tag alone matches nothing)
            assert not re.search(r"<tool_call>(.*?)</tool_call>", turn["value"], re.DOTALL)
            parsed = json.loads(json_part)
            parsed = parsed if isinstance(parsed, list) else [parsed]
            calls += [(c["name"], json.dumps(c["arguments"], ensure_ascii=False)) for c in parsed]
            assert k + 1 == len(turns) or turns[k + 1]["from"] == "observation", "call followed by a human turn"
        if turn["from"] == "observation":
            assert turns[k - 1]["from"] == "function_call", "observation without a call"
        if turn["from"] == "human":  # StringFormatter.apply fills {{idx}} in after the content: altered
            assert "{{idx}}" not in turn["value"]
    return calls


def with_react_fixes(tool: dict) -> dict:
    """A unified tool as the writer may respell it for LLaMA-Factory's default tool prompt, and no more (README):
    ``parameters.properties`` added where absent (``parameters`` too), a null ``required`` left out."""
    function = dict(tool["function"])
    parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
    parameters.setdefault("properties", {})
    if "required" in parameters and parameters["required"] is None:
        del parameters["required"]
    return {**tool, "function": {**function, "parameters": parameters}}


def unified_calls(row: dict) -> list[tuple[str, str]]:
    return [(c["function"]["name"], json.dumps(c["function"]["arguments"], ensure_ascii=False))
            for m in row["messages"] for c in m.get("tool_calls", [])]


@pytest.mark.parametrize("source", source_names())
def test_every_source_exports_rows_llamafactory_trains_on_with_every_call(source):
    files = td.sample_files(source)
    unified = [r for ds in td.load(source, data_files=files, streaming=True).values() for r in ds]
    written, refused = [], []
    for row in unified:
        try:
            written.append((row, unified_to_llamafactory(row)))
        except ConversionError as exc:
            refused.append((row["id"], exc.field, exc.message))
    for row, lf in written:
        assert accepted_by_llamafactory(lf) == unified_calls(row), row["id"]
        results = [m["content"] for m in row["messages"] if m["role"] == "tool"]
        observations = [t["value"] for t in lf["conversations"] if t["from"] == "observation"]
        assert RESULT_SEPARATOR.join(results) == RESULT_SEPARATOR.join(observations)
        answers = [m["content"] for m in row["messages"] if m["role"] == "assistant" and not m.get("tool_calls")]
        assert all(any(t["value"].endswith(a) for t in lf["conversations"] if t["from"] == "gpt") for a in answers)
        users = [m["content"] for m in row["messages"] if m["role"] == "user"]
        assert [t["value"] for t in lf["conversations"] if t["from"] == "human"] == users
        system = [m["content"] for m in row["messages"] if m["role"] == "system"]
        assert lf["system"] == (system[0] if system else "")
        # The whole catalog, every key kept (NESTFUL's output_parameters: what a reference's field is), values
        # exact, in order: what LLaMA-Factory's JSON tool formats (qwen, llama3...) show the model.
        written_tools = td.loads(lf["tools"]) if lf["tools"] else []
        assert td.dumps(written_tools) == td.dumps([with_react_fixes(t) for t in row["tools"]]), row["id"]
    # What cannot be written is refused with its reason, never dropped silently; the samples' refusals are known.
    expected_refusals = {"ms_swift": 2}.get(source, 0)
    assert len(refused) == expected_refusals, refused
    assert all("text beside tool calls" in message for _, _, message in refused)
    assert len(written) + len(refused) == len(unified) > 0


def test_llamafactory_rows_round_trip_exactly(cache_dir):
    path = td.sample_files("llamafactory")["train"][0]
    native = [json.loads(line) for line in Path(path).read_text().splitlines()]
    exported = list(td.load("llamafactory", "llamafactory", data_files=path, split="train", cache_dir=cache_dir))
    raw = list(td.load("llamafactory", "raw", data_files=path, split="train", cache_dir=cache_dir))
    assert len(exported) == len(raw) == len(native) == 5
    for original, lf, r in zip(native, exported, raw):
        assert lf["conversations"] == r["conversations"] == original["conversations"]
        assert lf["tools"] == original.get("tools", "") and lf["system"] == original.get("system", "")
        assert lf["images"] == original.get("images", [])
    unified = list(td.load("llamafactory", data_files=path, split="train", cache_dir=cache_dir))
    assert [unified_calls(r) for r in unified] == [accepted_by_llamafactory(lf) for lf in exported]
    parallel = unified[1]["messages"]
    assert [m["role"] for m in parallel] == ["user", "assistant", "tool", "tool", "assistant"]
    assert parallel[1]["reasoning_content"] == "Two independent lookups; call both at once."
    assert [m["tool_call_id"] for m in parallel[2:4]] == ["call_0", "call_1"]
    assert unified[2]["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"radius": 1e-3}


def test_other_columns_of_a_file_are_kept_in_meta_and_raw_but_not_in_llamafactory_rows(tmp_path, cache_dir):
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"id": "a-1", "score": 0.5, "conversations": [{"from": "human", "value": "q"},
                                                                           {"from": "gpt", "value": "a"}]}) + "\n")

    def load(config: str) -> dict:
        return td.load("llamafactory", config, data_files=str(path), split="train", cache_dir=cache_dir)[0]

    assert load("unified")["meta"] == load("raw")["extra"] == {"id": "a-1", "score": 0.5}
    assert set(load("llamafactory")) == set(LLAMAFACTORY_FEATURES)


def test_respelled_rows_come_back_byte_for_byte(tmp_path, cache_dir):
    row = {"conversations": [{"from": "human", "value": "hi"},
                             {"from": "function_call", "value": '{"name":"f","arguments":{"x":0.1}}'},
                             {"from": "observation", "value": "ok"}, {"from": "gpt", "value": "done"}],
           "system": "sys", "tools": '[{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}]'}
    path = tmp_path / "compact.jsonl"
    path.write_text(json.dumps(row) + "\n")
    back = td.load("llamafactory", "llamafactory", data_files=str(path), split="train", cache_dir=cache_dir)[0]
    assert {k: back[k] for k in row} == row



@pytest.mark.parametrize("column", ["", "a system column LLaMA-Factory ignores"])
def test_a_leading_system_turn_and_the_system_column_both_come_back(column):
    """LLaMA-Factory reads a leading ``from: system`` turn and then ignores the ``system`` column; the reader
    does the same, and keeps the shadowed column so that raw -> unified -> raw is exact."""
    source = LlamaFactorySource()
    native = {"conversations": [{"from": "system", "value": "the turn"}, {"from": "human", "value": "hi"},
                                {"from": "gpt", "value": "hello"}], "system": column}
    raw = source.to_raw(native, RowContext("llamafactory", "chat.jsonl", 0, "train"))
    unified = source.to_unified(raw, RowContext("llamafactory", "chat.jsonl", 0, "train"))
    assert unified["messages"][0] == {**unified["messages"][0], "role": "system", "content": "the turn"}
    assert source.from_unified(unified) == raw


def test_a_flat_tool_keeps_its_type_on_the_tool_not_in_its_function(tmp_path):
    """A tool spelled flat as OpenAI's Responses API spells it ({"type": "function", "name", ...}): its type is
    the tool's; copied into ``function`` too, templates rendering the function printed a key no function has."""
    tools = '[{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", ' \
            '"properties": {}}, "strict": true}]'
    path = tmp_path / "flat.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}],
                                "tools": tools}) + "\n")
    row, = td.load("llamafactory", data_files=str(path), split="train", streaming=True)
    assert row["tools"] == [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {}}, "strict": True}}]
    assert json.loads(unified_to_llamafactory(row)["tools"]) == row["tools"]


def test_tools_the_default_tool_prompt_fails_on_come_back_in_raw_as_the_file_spells_them():
    """The llamafactory format writes a tool without parameters with them (LLaMA-Factory's default tool prompt
    fails on it); raw -> unified -> raw still gives the file's spelling."""
    source = LlamaFactorySource()
    native = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}],
              "tools": '[{"name":"f","description":"d"}]'}
    ctx = RowContext("llamafactory", "chat.jsonl", 0, "train")
    raw = source.to_raw(native, ctx)
    unified = source.to_unified(raw, ctx)
    assert source.from_unified(unified) == raw
    assert json.loads(unified_to_llamafactory(unified)["tools"])[0]["function"]["parameters"]["properties"] == {}


def test_an_edited_row_is_written_as_edited_not_in_its_recorded_spelling(tmp_path, cache_dir):
    """The original spelling of a turn or of the tools is put back only while the row still says the same:
    an edited call, answer or tool list is written from the row, not replaced by what the file said."""
    row = {"conversations": [{"from": "human", "value": "hi"},
                             {"from": "function_call", "value": '{"name":"f","arguments":{"x":0.1}}'},
                             {"from": "observation", "value": "ok"},
                             {"from": "gpt", "value": "<think>\nhm\n</think>\ndone"}],
           "system": "sys", "tools": '[{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}]'}
    path = tmp_path / "compact.jsonl"
    path.write_text(json.dumps(row) + "\n")
    unified = td.load("llamafactory", data_files=str(path), split="train", cache_dir=cache_dir)[0]
    assert set(unified["meta"]["llamafactory_original"]) == {"conversations", "tools"}  # spellings recorded
    assert unified_to_llamafactory(unified)["conversations"] == row["conversations"]  # and put back
    unified["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"x": 0.2}
    unified["messages"][4]["content"] = "done, edited"
    unified["tools"][0]["function"]["description"] = "edited"
    written = unified_to_llamafactory(unified)
    assert json.loads(written["conversations"][1]["value"]) == {"name": "f", "arguments": {"x": 0.2}}
    assert written["conversations"][3]["value"].endswith("done, edited")
    assert json.loads(written["tools"])[0]["function"]["description"] == "edited"

@pytest.mark.parametrize("conversations, field, message", [
    ([{"from": "human", "value": "a"}, {"from": "human", "value": "b"}], "conversations[1].from", "position 1"),
    ([{"from": "human", "value": "a"}], "conversations", "1 turn: LLaMA-Factory needs an even"),
    ([], "conversations", "0 turns: LLaMA-Factory needs an even"),
    ([{"from": "observation", "value": "r"}, {"from": "gpt", "value": "b"}], "conversations[0].from",
     "'observation' turn (tool results) with no 'function_call' turn before it"),
    ([{"from": "human", "value": "a"}, {"from": "function_call", "value": '{"name": "f", "arguments": {}}'},
      {"from": "human", "value": "b"}, {"from": "gpt", "value": "c"}], "conversations[2].from", "as if the calls"),
    ([{"from": "human", "value": "a"}, {"from": "function_call", "value": '{"name": "f", "parameters": {}}'}],
     "conversations[1].value.arguments", "parameters"),
    ([{"from": "human", "value": "a"}, {"from": "function_call", "value": '{"name": "f", "arguments": "{}"}'}],
     "conversations[1].value.arguments", "double-encoded"),
    # arguments of another type are said as what they are: nothing is text there
    ([{"from": "human", "value": "a"}, {"from": "function_call", "value": '{"name": "f", "arguments": [1]}'}],
     "conversations[1].value.arguments", "must be a JSON object, got array"),
    # a turn that is not an object, or whose tag or text is of another type: said as what it is
    (["a", {"from": "gpt", "value": "b"}], "conversations[0]", "a turn must be an object of 'from' and 'value', "
                                                               "got string"),
    ([{"from": 1, "value": "a"}, {"from": "gpt", "value": "b"}], "conversations[0].from",
     "'from' tag must be a string, got number 1"),
    ([{"from": "human", "value": 5}, {"from": "gpt", "value": "b"}], "conversations[0].value",
     "must be a string, got number 5"),
    ('[{"from": "human", "value": "a"}]', "conversations", "must be a list of {from, value}, got string"),
])
def test_rows_llamafactory_would_drop_or_mistrain_are_typed_errors(tmp_path, conversations, field, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"conversations": conversations}) + "\n")
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == field and message in info.value.message


@pytest.mark.parametrize("row, field", [
    # a leading system turn is the file's turn 0: the bad turn is [2], not [1] of the turns after it
    ({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "a"},
                        {"from": "human", "value": "b"}, {"from": "gpt", "value": "c"},
                        {"from": "human", "value": "d"}]}, "conversations[2].from"),
    # what the writer's check finds is named in the file, not by the unified message (messages[2] here)
    ({"system": "sys", "conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"},
                                         {"from": "human", "value": "turn {{idx}}"},
                                         {"from": "gpt", "value": "c"}]}, "conversations[2].value"),
    ({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "a"},
                        {"from": "function_call", "value": '[{"name": "f", "arguments": {}}, '
                                                           '{"name": "g", "arguments": {}}]'},
                        {"from": "observation", "value": "r1\n</tool_response>\n<tool_response>\nr2"},
                        {"from": "gpt", "value": "x"}, {"from": "human", "value": "{{idx}}"},
                        {"from": "gpt", "value": "y"}]}, "conversations[5].value"),
])
def test_errors_name_the_files_turn(tmp_path, row, field):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n")
    for streaming in (True, False):
        with pytest.raises(ToolUseDataError) as info:
            list(td.load("llamafactory", data_files=str(path), split="train", streaming=streaming,
                         cache_dir=str(tmp_path / "cache")))
        assert info.value.field == field and info.value.row == 0


def test_tools_given_as_a_list_are_refused(tmp_path):
    path = tmp_path / "list_tools.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}],
                                "tools": [{"name": "f"}]}) + "\n")
    with pytest.raises(InvalidValueError, match="JSON text of an array"):
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))


@pytest.mark.parametrize("tools", [{}, {"name": "f"}, 0, True])
def test_tools_of_another_type_are_refused_without_calling_them_a_list(tmp_path, tools):
    path = tmp_path / "dict_tools.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}],
                                "tools": tools}) + "\n")
    with pytest.raises(InvalidValueError, match="JSON text of an array") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "tools" and "fails on an array" not in info.value.message


@pytest.mark.parametrize("text, held", [('{"name": "f"}', "object"), ("null", "null"), ('"[]"', "string")])
def test_tools_text_of_another_json_type_says_what_it_holds(tmp_path, text, held):
    path = tmp_path / "object_tools.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}],
                                "tools": text}) + "\n")
    with pytest.raises(InvalidValueError, match=f"JSON text of an array; it holds a JSON {held}$") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "tools"


def _glaive_row_with_tool(respell) -> dict:
    """The first tool-using row of LLaMA-Factory's own glaive demo, its first tool respelled by ``respell``."""
    row = next(r for r in json.loads((LF_DATA / "glaive_toolcall_en_demo.json").read_text(encoding="utf-8"))
               if json.loads(r["tools"]))
    tools = json.loads(row["tools"])
    return {**row, "tools": json.dumps([respell(tools[0]), *tools[1:]])}


@pytest.mark.parametrize("respell, field, message", [
    (json.dumps, "tools[0]", "a tool must be a JSON object, got string"),
    (lambda t: {**t, "parameters": json.dumps(t["parameters"])}, "tools[0].parameters",
     "tool parameters must be a JSON object, not JSON text"),
    (lambda t: {**{k: v for k, v in t.items() if k != "name"}, "name_for_model": t["name"]}, "tools[0].name",
     "reads a tool's name from 'name', not 'name_for_model'"),
    (lambda t: {"type": "function", "function": {**t, "parameters": json.dumps(t["parameters"])}},
     "tools[0].function.parameters", "not JSON text"),
])
def test_tools_spelled_as_only_ms_swift_reads_them_are_refused(tmp_path, respell, field, message):
    # ms-swift's tool parsing takes these; LLaMA-Factory's tool formatters do not: a tool as JSON text fails the
    # file under every template (tool.get), parameters as JSON text under its default one, and it reads "name"
    path = tmp_path / "tools.jsonl"
    path.write_text(json.dumps(_glaive_row_with_tool(respell)) + "\n")
    with pytest.raises(InvalidValueError, match=re.escape(message)) as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == field and info.value.row == 0
    path.write_text(json.dumps(_glaive_row_with_tool(lambda t: t)) + "\n")
    assert len(list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))) == 1


@pytest.mark.parametrize("value, error, field, message", [
    ('{"arguments": {}}', MissingFieldError, "conversations[1].value.name", "a call needs a name"),
    ('{"name": 7, "arguments": {}}', InvalidValueError, "conversations[1].value.name", "not number"),
    ('{"name": "", "arguments": {}}', InvalidValueError, "conversations[1].value.name", 'not ""'),
    ("[3]", InvalidValueError, "conversations[1].value[0]", "a call must be a JSON object of name and arguments, got "
                                                            "number"),
])
def test_a_function_call_without_a_usable_name_says_what_it_holds(tmp_path, value, error, field, message):
    """A name given as a number or "", and a call that is no object, were all "a call needs a name", as if the
    name were missing."""
    path = tmp_path / "calls.jsonl"
    turns = [{"from": "human", "value": "hi"}, {"from": "function_call", "value": value},
             {"from": "observation", "value": "ok"}, {"from": "gpt", "value": "done"}]
    path.write_text(json.dumps({"conversations": turns, "tools": "[]"}) + "\n")
    with pytest.raises(error, match=re.escape(message)) as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert type(info.value) is error and (info.value.row, info.value.field) == (0, field)


@pytest.mark.parametrize("wrap, field", [
    (lambda t: t, "tools[0].parameters.required"),  # glaive's own spelling: no "function" in the file
    (lambda t: {"type": "function", "function": t}, "tools[0].function.parameters.required"),
])
def test_a_tool_the_writer_refuses_is_named_as_the_file_spells_it(tmp_path, wrap, field):
    path = tmp_path / "tools.jsonl"
    path.write_text(json.dumps(_glaive_row_with_tool(
        lambda t: wrap({**t, "parameters": {**t["parameters"], "required": "x"}}))) + "\n")
    with pytest.raises(InvalidValueError, match="required as a list") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == field and info.value.row == 0


@pytest.mark.parametrize("column", ["images", "videos", "audios"])
def test_one_media_path_given_as_a_string_reads_as_a_list_of_it(tmp_path, cache_dir, column):
    """LLaMA-Factory wraps a lone path in a list (its converter's _find_medias); such files were refused."""
    path = tmp_path / "one_path.jsonl"
    tag = {"images": "<image>", "videos": "<video>", "audios": "<audio>"}[column]
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": f"{tag}what is it?"},
                                                  {"from": "gpt", "value": "a cat"}], column: "cat.bin"}) + "\n")
    for streaming in (True, False):
        row = next(iter(td.load("llamafactory", data_files=str(path), split="train", streaming=streaming,
                                cache_dir=cache_dir)))
        assert row[column] == ["cat.bin"]
    raw = next(iter(td.load("llamafactory", "raw", data_files=str(path), split="train", streaming=True)))
    assert raw[column] == ["cat.bin"]


@pytest.mark.parametrize("media", ["", 0, False, {}, {"path": "a.png"}, [""], [["a.png"]]])
def test_media_values_llamafactory_cannot_open_are_refused(tmp_path, media):
    path = tmp_path / "bad_media.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "<image>a"},
                                                  {"from": "gpt", "value": "b"}], "images": media}) + "\n")
    with pytest.raises(InvalidValueError, match="path") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field.startswith("images") and info.value.row == 0


def test_an_image_stored_by_datasets_image_feature_is_refused_saying_what_it_is(tmp_path):
    # Parquet written with datasets' Image feature holds {bytes, path} structs, which LLaMA-Factory opens. (Written
    # in that feature's storage, schema metadata included, without encoding images: that would need Pillow.)
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Features, Image, List, Value

    path = tmp_path / "images.parquet"
    features = Features({"conversations": List({"from": Value("string"), "value": Value("string")}),
                         "images": List(Image())})
    pq.write_table(pa.Table.from_pylist([{"conversations": [{"from": "human", "value": "<image>a"},
                                                            {"from": "gpt", "value": "b"}],
                                          "images": [{"bytes": b"not decoded here", "path": None}]}],
                                        schema=features.arrow_schema), path)
    with pytest.raises(InvalidValueError, match=re.escape("a {bytes, path} struct")) as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "images[0]" and info.value.row == 0


def test_writer_refuses_what_llamafactory_would_mistrain(cache_dir):
    base = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)[0]
    row = td.complete_row(base)
    follow = row["messages"] + [{"role": "user", "content": "and then?"}, {"role": "assistant", "content": "ok"}]
    with pytest.raises(ConversionError, match="no results but the conversation goes on"):
        unified_to_llamafactory({**row, "messages": [td.schema.complete_message(m) for m in follow]})
    ends_on_user = row["messages"][:1]
    with pytest.raises(ConversionError, match="end on an assistant turn"):
        unified_to_llamafactory({**row, "messages": ends_on_user})


@pytest.mark.parametrize("arguments, said", [([1], "got array$"), ('{"x": 1}', r"got string \(text would be")])
def test_writer_says_what_call_arguments_that_are_no_object_are(arguments, said, cache_dir):
    """Arguments of a unified row that are a list were refused as text that would be double-encoded."""
    row = td.complete_row(td.load("nestful", data_files=td.sample_files("nestful"), split="train",
                                  cache_dir=cache_dir)[0])
    turn = next(i for i, m in enumerate(row["messages"]) if m["tool_calls"])
    row["messages"][turn]["tool_calls"][0]["function"]["arguments"] = arguments
    with pytest.raises(ConversionError, match=f"must be a JSON object for LLaMA-Factory, {said}") as info:
        unified_to_llamafactory(row)
    assert info.value.field == f"messages[{turn}].tool_calls[0].function.arguments"


def test_an_empty_system_message_and_a_results_name_read_back_as_the_readme_says(tmp_path):
    # The llamafactory format has no place for either: the system column is "" (no system prompt to LLaMA-Factory)
    # and an observation holds the results' text only.
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"messages": [
        {"role": "system", "content": ""}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "r"}, {"role": "assistant", "content": "a"}]}) + "\n")
    row = next(iter(td.load("ms_swift", data_files=str(path), split="train", streaming=True)))
    row["messages"][3]["name"] = None
    written = unified_to_llamafactory(row)
    assert written["system"] == ""
    (tmp_path / "lf.jsonl").write_text(json.dumps(written) + "\n")
    back = next(iter(td.load("llamafactory", data_files=str(tmp_path / "lf.jsonl"), split="train", streaming=True)))
    assert [m["role"] for m in back["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert back["messages"][2]["name"] == "f"


def ms_swift_rows_ending_on_results() -> list[dict]:
    """ms-swift's own documentation rows that end on a tool result (an agent trace cut after its last call)."""
    path = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
    rows = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip"))
    ending = [row for row in rows if row["messages"][-1]["role"] == "tool"]
    assert ending
    return ending


def test_a_conversation_ending_on_results_is_refused_at_the_results_with_what_to_do():
    row = ms_swift_rows_ending_on_results()[0]
    first_result = next(i for i in range(len(row["messages"]), 0, -1) if row["messages"][i - 1]["role"] != "tool")
    with pytest.raises(ConversionError, match=r"ends on tool results.*trailing_results='drop'.*td\.drop_trailing_results") \
            as info:
        unified_to_llamafactory(row)
    assert info.value.field == f"messages[{first_result}]"


def test_drop_trailing_results_lets_the_row_be_written_ending_on_its_calls():
    written_rows = 0
    for row in ms_swift_rows_ending_on_results():
        trimmed = td.drop_trailing_results(row)
        assert trimmed["messages"] == [m for m in row["messages"] if m is not row["messages"][-1]]
        assert td.drop_trailing_results(trimmed) == trimmed  # nothing more to drop
        calls = [(c["function"]["name"], c["function"]["arguments"]) for m in row["messages"]
                 for c in m.get("tool_calls") or []]
        try:
            written = unified_to_llamafactory(trimmed)
        except ConversionError as exc:  # refused for another reason (text beside calls, an image in the result)
            assert "ends on tool results" not in exc.message
            continue
        assert written["conversations"][-1]["from"] == "function_call"
        value = json.loads(written["conversations"][-1]["value"])
        assert [(c["name"], c["arguments"]) for c in (value if isinstance(value, list) else [value])] == calls
        written_rows += 1
    assert written_rows  # the plain one: user, call, result



def _doc_agent_rows() -> str:
    """ms-swift's documentation rows: rows 0, 2 and 3 end on tool results; rows 1 and 2 hold text beside calls, and
    row 3's last result holds one of its two <image> tags."""
    return str(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))


def test_load_with_trailing_results_drop_writes_what_the_helper_and_the_writer_make_in_every_mode(tmp_path):
    """``load(..., "llamafactory", trailing_results="drop")``: each row as ``td.drop_trailing_results`` then the
    writer make it, streamed or prepared, with two processes too (several shards), each load with the option in a
    cache of its own: a load without it, before and after, still refuses the rows ending on results."""
    path = _doc_agent_rows()
    expected = []
    for row in td.load("ms_swift", data_files=path, split="train", streaming=True):
        try:
            expected.append(unified_to_llamafactory(td.drop_trailing_results(row)))
        except ConversionError:
            continue
    expected = json.loads(json.dumps(expected))
    assert len(expected) == 4 and expected[0]["conversations"][-1]["from"] == "function_call"
    cache = str(tmp_path / "cache")
    load = dict(data_files=path, split="train", on_error="skip", cache_dir=cache, shard_bytes=1500)

    def rows(**kwargs):
        return json.loads(json.dumps(list(td.load("ms_swift", "llamafactory", **load, **kwargs))))

    plain = rows()
    assert len(plain) == 3 and plain == expected[1:]  # the rows not ending on results
    for mode in (dict(streaming=True), dict(streaming=True, num_proc=2), dict(), dict(num_proc=2)):
        report = td.SkipReport()
        assert rows(trailing_results="drop", report=report, **mode) == expected, mode
        assert (report.rows_read, report.skipped) == (7, 3), mode
    assert rows() == plain  # the prepared cache without the option is its own


def test_a_row_the_writer_refuses_after_the_trim_is_named_by_its_file_row_and_input_field(tmp_path):
    """Row 3's two images had one <image> tag in the result that ended it: trimmed, the writer refuses the row,
    which is named as every other export error is (file, row number, the field as read), skipped or raised."""
    path = _doc_agent_rows()
    report = td.SkipReport(keep_all=True)
    list(td.load("ms_swift", "llamafactory", data_files=path, split="train", streaming=True, on_error="skip",
                 trailing_results="drop", report=report))
    refused = {entry["row"]: entry for entry in report.rows}
    assert sorted(refused) == [1, 2, 3]
    assert (refused[3]["file"].endswith("custom_dataset_doc_agent_rows_en.jsonl"), refused[3]["field"]) == \
        (True, "images")
    alone = tmp_path / "row3.jsonl"
    alone.write_text(Path(path).read_text().splitlines()[3] + "\n")
    for streaming in (True, False):
        with pytest.raises(ConversionError, match=r"<image> tag") as info:
            list(td.load("ms_swift", "llamafactory", data_files=str(alone), split="train", streaming=streaming,
                         trailing_results="drop", cache_dir=str(tmp_path / "cache")))
        assert (Path(info.value.file).name, info.value.row, info.value.field) == ("row3.jsonl", 0, "images")


@pytest.mark.parametrize("source", ["llamafactory", "all"])  # (the mix's member trims it too)
@pytest.mark.parametrize("mode", [{}, {"streaming": True}, {"num_proc": 2}])
def test_a_llamafactory_row_ending_on_its_results_is_written_ending_on_its_calls_with_trailing_results_drop(
        tmp_path, mode, source):
    # (refused for its odd count before the option could apply; an observation after an answer is no result of a call)
    call = {"from": "function_call", "value": '[{"name": "f", "arguments": {}},{"name": "g", "arguments": {}}]'}
    ends_on_results = [{"from": "system", "value": "s"}, {"from": "human", "value": "a"}, call,
                       {"from": "observation", "value": "r"}]
    after_an_answer = [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"},
                       {"from": "observation", "value": "r"}]
    path = tmp_path / "rows.jsonl"
    # (a preference row's prompt ending on results is refused as one, not trimmed into a conversation)
    preference = {"conversations": ends_on_results[1:], "chosen": {"from": "gpt", "value": "c"},
                  "rejected": {"from": "gpt", "value": "r"}}
    path.write_text("".join(json.dumps(row) + "\n" for row in (
        {"conversations": ends_on_results}, {"conversations": after_an_answer}, preference)))
    report = td.SkipReport(keep_all=True)
    files = {"llamafactory": str(path)} if source == "all" else str(path)
    written = list(td.load(source, "llamafactory", data_files=files, split="train", on_error="skip",
                           trailing_results="drop", report=report, cache_dir=str(tmp_path / "cache"), **mode))
    assert [(r["conversations"], r["system"]) for r in written] == [(ends_on_results[1:3], "s")]
    assert [(entry["row"], entry["field"]) for entry in report.rows] == [(1, "conversations"), (2, "chosen")]

@pytest.mark.parametrize("config, value, message", [
    ("swift", "drop", r"trailing_results='drop' applies to .*\(llamafactory\), not 'swift'"),
    ("unified", "drop", r"not 'unified'"),
    ("llamafactory", "dorp", r"must be 'refuse' or 'drop', got 'dorp' \(did you mean 'drop'\?\)"),
    ("llamafactory", 1, r"option trailing_results must be a string, got 1"),
])
def test_trailing_results_is_refused_where_it_would_change_nothing_or_is_misspelt(config, value, message):
    with pytest.raises(ValueError, match=message):
        td.load("ms_swift", config, data_files=td.sample_files("ms_swift"), split="train", streaming=True,
                trailing_results=value)
    td.load("ms_swift", config, data_files=td.sample_files("ms_swift"), split="train", streaming=True,
            trailing_results="refuse")  # the default, anywhere


def test_a_mirror_of_llamafactory_rows_drops_trailing_results_as_load_does(tmp_path):
    """Mirrors write llamafactory too: with the option (llamafactory alone: the other configs would not use it),
    the mirror's rows are those of the load, from one process and from two Ray workers alike."""
    import pyarrow.parquet as pq

    from tooluse_datasets.mirror import MirrorError, MirrorRequest, build_mirror, mirror_files
    from tooluse_datasets.mirror.manifest import read_manifest

    path = _doc_agent_rows()
    options = {"trailing_results": "drop", "shard_bytes": 1500}
    # (each config the option does not fit is named as NESTFUL's raw with execute=True is, first or not)
    for configs, refused in ((None, "unified"), (["toolmind", "llamafactory"], "toolmind"),
                             (["llamafactory", "swift"], "swift")):
        every = {"configs": configs} if configs else {}
        with pytest.raises(MirrorError, match=rf"^ms_swift, config {refused}: trailing_results='drop' applies to "
                                              rf".*, not '{refused}' \(mirror the other configs with configs / "
                                              rf"--configs\)"):
            build_mirror(MirrorRequest("ms_swift", data_files=path, source_options=options, **every),
                         tmp_path / "every")
    # (a value wrong whatever the config is the ValueError load gives, naming no config)
    with pytest.raises(ValueError, match=r"^option trailing_results must be 'refuse' or 'drop', got 'dorp'"):
        build_mirror(MirrorRequest("ms_swift", configs=["llamafactory"], data_files=path,
                                   source_options={"trailing_results": "dorp"}), tmp_path / "every")
    request = MirrorRequest("ms_swift", configs=["llamafactory"], data_files=path, source_options=options)
    folder = build_mirror(request, tmp_path / "local")
    files = read_manifest(folder).configs["llamafactory"].splits["train"].files
    mirrored = [row for f in files for row in pq.read_table(folder / f).to_pylist()]
    loaded = list(td.load("ms_swift", "llamafactory", data_files=path, split="train", streaming=True,
                          on_error="skip", trailing_results="drop"))
    assert len(mirrored) == 4 and [r["conversations"] for r in mirrored] == [r["conversations"] for r in loaded]
    on_ray = build_on_a_callers_ray(request, tmp_path / "ray")
    assert {rel: (on_ray / rel).read_bytes() for rel in mirror_files(on_ray) if rel.endswith(".parquet")} == \
        {rel: (folder / rel).read_bytes() for rel in mirror_files(folder) if rel.endswith(".parquet")}

def test_cli_export_writes_files_and_dataset_info(tmp_path, capsys):
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(tmp_path)]) == 0
    assert main(["export", "ms_swift", "--sample", "--format", "llamafactory", "--out", str(tmp_path),
                 "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    assert "2 skipped" in out and "text beside tool calls" in out
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert set(info) == {"nestful-llamafactory-train", "ms_swift-llamafactory-train"}
    for name, entry in info.items():
        assert entry["file_name"] == f"{name}.jsonl" and entry["formatting"] == "sharegpt"
        assert entry["columns"]["messages"] == "conversations" and entry["columns"]["tools"] == "tools"
        rows = [json.loads(line) for line in (tmp_path / entry["file_name"]).read_text().splitlines()]
        assert rows and all(accepted_by_llamafactory(r) is not None for r in rows)
        assert ("system" in entry["columns"]) == any(r["system"] for r in rows)


def test_an_exports_dataset_info_given_as_a_data_file_names_the_options_that_read_its_entries(tmp_path, capsys):
    """An export's dataset_info.json given as --data-files was only "sharegpt rows need 'conversations'" (its one
    object read as a row) -> the error says it is the registry and how to read an entry."""
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    info = str(tmp_path / "dataset_info.json")
    assert main(["stats", "llamafactory", "--data-files", info]) == 2
    err = capsys.readouterr().err
    assert f"{info}, row 0, field 'conversations'" in err and "this is a dataset_info.json" in err
    assert "entries ['nestful-llamafactory-train']" in err and "--option dataset_info=PATH --option dataset=NAME" in err
    assert main(["stats", "llamafactory", "--option", f"dataset_info={info}",
                 "--option", "dataset=nestful-llamafactory-train"]) == 0


@pytest.mark.parametrize("text", ["[1, 2]\n", "notjson{"])
def test_cli_export_stops_before_any_row_on_a_dataset_info_it_cannot_extend(tmp_path, capsys, text):
    """A broken dataset_info.json was 'unexpected AttributeError (a bug)' or a JSON error naming no file, after
    the rows were written and left unregistered."""
    (tmp_path / "dataset_info.json").write_text(text)
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'dataset_info.json'}, field '<file>': ") and "a bug" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset_info.json"]
    assert (tmp_path / "dataset_info.json").read_text() == text


def test_cli_export_keeps_the_values_of_other_dataset_info_entries_exactly(tmp_path, capsys):
    """Registering an export rewrote the folder's other entries through orjson, which read an integer beyond 64
    bits as a float: an entry's num_samples 123456789012345678901234567890 became 1.2345678901234568e+29."""
    entry = '{"file_name": "mine.jsonl", "num_samples": 123456789012345678901234567890, "ratio": 0.30000000000000004}'
    (tmp_path / "dataset_info.json").write_text(f'{{"mine": {entry}}}\n')
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(tmp_path)]) == 0
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert set(info) == {"mine", "nestful-llamafactory-train"} and info["mine"] == json.loads(entry)


def test_cli_export_registers_no_empty_file_and_fails_when_nothing_is_exported(tmp_path, capsys):
    """LLaMA-Factory refuses an empty dataset: a split whose rows were all skipped is not registered (an entry
    left by an earlier run of the same name is taken out), and an export of no row at all exits 1."""
    sample = td.sample_files("ms_swift")["train"][0]
    unreadable = tmp_path / "agent_rows.jsonl"
    unreadable.write_text("not json\n")
    out = tmp_path / "out"
    assert main(["export", "ms_swift", "--data-files", sample, "--format", "llamafactory", "--out", str(out),
                 "--on-error", "skip"]) == 0
    assert set(json.loads((out / "dataset_info.json").read_text())) == {"ms_swift-llamafactory-train"}
    assert main(["export", "ms_swift", "--data-files", str(unreadable), "--format", "llamafactory",
                 "--out", str(out), "--on-error", "skip"]) == 1
    captured = capsys.readouterr()
    assert "not registered, no rows: ms_swift-llamafactory-train" in captured.out
    assert "error: no rows to export" in captured.err
    assert json.loads((out / "dataset_info.json").read_text()) == {}
    assert (out / "ms_swift-llamafactory-train.jsonl").read_text() == ""


def _call_row(reasoning: str) -> dict:
    from tooluse_datasets.schema import message, tool_call, unified_row
    tools = [{"type": "function", "function": {"name": "f", "description": "d",
                                               "parameters": {"type": "object", "properties": {}}}}]
    return unified_row(id="t/0", source="t", subset="s", tools=tools, messages=[
        message("user", "hi"),
        message("assistant", "", reasoning_content=reasoning, tool_calls=[tool_call("c0", "f", {"x": 1})]),
        message("tool", "ok", tool_call_id="c0", name="f"), message("assistant", "done")])


@pytest.mark.parametrize("value", ['<think>Call f.</think>\n{"name": "f", "arguments": {}}',
                                   '<think>\nCall f.\n</think>\n{"name": "f", "arguments": {}}'])
def test_a_call_thought_llamafactory_does_not_find_is_refused_by_the_reader(tmp_path, value):
    # FunctionFormatter takes the thought as <think>\n...\n</think>\n\n only; any other spelling stays in the
    # text it parses as JSON, and it raises (the whole run stops) - so the reader may not accept the row.
    turns = [{"from": "human", "value": "a"}, {"from": "function_call", "value": value},
             {"from": "observation", "value": "r"}, {"from": "gpt", "value": "b"}]
    with pytest.raises(ValueError):  # json.JSONDecodeError, as LLaMA-Factory's RuntimeError comes from
        accepted_by_llamafactory({"conversations": turns, "tools": ""})
    path = tmp_path / "thought.jsonl"
    path.write_text(json.dumps({"conversations": turns}) + "\n")
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "conversations[1].value" and info.value.row == 0


def test_call_reasoning_holding_think_tags_is_split_as_llamafactory_does():
    inline = _call_row("The tag </think> closes a thought; call f.")
    written = unified_to_llamafactory(inline)
    assert accepted_by_llamafactory(written) == [("f", '{"x": 1}')]
    ctx = RowContext("llamafactory", "x.jsonl", 0, "train")
    source = LlamaFactorySource()
    back = source.to_unified(source.to_raw(written, ctx), ctx)
    assert back["messages"][1]["reasoning_content"] == "The tag </think> closes a thought; call f."
    for reasoning in ("one\n</think>\n\ntwo", "ends on\n</think>\n"):  # LLaMA-Factory's thought would end early
        with pytest.raises(ConversionError) as info:
            unified_to_llamafactory(_call_row(reasoning))
        assert info.value.field == "messages[1].reasoning_content"


def test_grounding_rows_are_not_written_without_their_objects(tmp_path, cache_dir):
    """ms-swift grounding rows (an `objects` column whose entries its <ref-object>/<bbox> tags stand for) have
    no place in LLaMA-Factory's sharegpt rows, which would train on the tags as literal text: the llamafactory
    writer refuses them as the swift writer does, naming meta.objects; the file's other rows are written. A
    column named `objects` in a LLaMA-Factory file (not read by LLaMA-Factory) does not stop its own rows."""
    grounding = {"messages": [{"role": "user", "content": "<image>Where is <ref-object>?"},
                              {"role": "assistant", "content": "<bbox>"}], "images": ["cat.png"],
                 "objects": {"ref": ["the cat"], "bbox": [[10, 20, 200, 220]], "bbox_type": "real"}}
    plain = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    path = tmp_path / "grounding.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (grounding, plain)), encoding="utf-8")
    unified = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    with pytest.raises(ConversionError, match="grounding objects") as info:
        unified_to_llamafactory(unified[0])
    assert info.value.field == "meta.objects" and "LLaMA-Factory" in str(info.value)
    report = td.SkipReport(keep_all=True)
    rows = td.load("ms_swift", "llamafactory", data_files=str(path), split="train", on_error="skip", report=report,
                   cache_dir=cache_dir)
    assert [r["conversations"] for r in rows] == [[{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]]
    assert [(r["row"], r["reason"]) for r in report.rows] == [(0, "ConversionError:meta.objects")]

    own = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}],
           "objects": {"ref": ["x"]}}
    lf_path = tmp_path / "lf.jsonl"
    lf_path.write_text(json.dumps(own) + "\n", encoding="utf-8")
    back = td.load("llamafactory", "llamafactory", data_files=str(lf_path), split="train", cache_dir=cache_dir)
    assert [r["conversations"] for r in back] == [own["conversations"]]


@pytest.mark.parametrize("name, arguments, field", [
    ("f", {"text": "use <tool_call>{...}</tool_call> tags"}, "messages[1].tool_calls[0].function.arguments"),
    ("f", {"a": "<tool_call>", "b": "</tool_call>"}, "messages[1].tool_calls[0].function.arguments"),
])
def test_a_call_holding_llamafactorys_tool_call_words_is_refused(tmp_path, name, arguments, field):
    # FunctionFormatter searches a function_call value for <tool_call>(.*?)</tool_call> (every template's
    # tool_call_words) before anything else, and parses what is between as the calls: not JSON, the run stops.
    row = _call_row(None)
    row["messages"][1]["tool_calls"][0]["function"].update(name=name, arguments=arguments)
    with pytest.raises(ConversionError) as info:
        unified_to_llamafactory(row)
    assert info.value.field == field and "<tool_call>...</tool_call>" in info.value.message
    turns = [{"from": "human", "value": "a"},
             {"from": "function_call", "value": json.dumps({"name": name, "arguments": arguments})},
             {"from": "observation", "value": "r"}, {"from": "gpt", "value": "b"}]
    path = tmp_path / "calls.jsonl"
    path.write_text(json.dumps({"conversations": turns}) + "\n")
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "conversations[1].value" and info.value.row == 0
    # one marker alone is not a match for LLaMA-Factory: the call is written
    row["messages"][1]["tool_calls"][0]["function"]["arguments"] = {"text": "a <tool_call> tag"}
    assert "a <tool_call> tag" in unified_to_llamafactory(row)["conversations"][1]["value"]


@pytest.mark.parametrize("reasoning, arguments, refused", [
    ("I will write <tool_call> now", {"x": 1}, False),
    ("a closing </tool_call> alone", {"x": 1}, False),
    ("close </tool_call> before <tool_call>", {"x": 1}, False),
    ("both <tool_call> and </tool_call>", {"x": 1}, True),
    ("open <tool_call>", {"x": "</tool_call>"}, True),  # the span runs on into the calls
])
def test_a_call_turns_reasoning_is_refused_only_where_it_opens_a_tool_call_span(tmp_path, reasoning, arguments,
                                                                               refused):
    # FunctionFormatter searches the value for <tool_call>(.*?)</tool_call>: one tag alone matches nothing, and
    # LLaMA-Factory 0.9.5 trains the reasoning as written (every tag alone was refused)
    row = _call_row(reasoning)
    row["messages"][1]["tool_calls"][0]["function"]["arguments"] = arguments
    if refused:
        with pytest.raises(ConversionError, match="followed by </tool_call>") as info:
            unified_to_llamafactory(row)
        assert info.value.field == "messages[1].reasoning_content"
        return
    written = unified_to_llamafactory(row)
    assert accepted_by_llamafactory(written) == [("f", json.dumps(arguments))]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(written) + "\n")
    [back] = td.load("llamafactory", data_files=str(path), split="train", streaming=True)
    assert back["messages"][1]["reasoning_content"] == reasoning


def test_parallel_results_that_would_split_back_differently_are_refused():
    from tooluse_datasets.schema import message, tool_call, unified_row
    calls = [tool_call("c0", "f", {}), tool_call("c1", "g", {})]

    def row(first: str, second: str) -> dict:
        return unified_row(id="t/0", source="t", subset="s", tools=[], messages=[
            message("user", "hi"), message("assistant", "", tool_calls=calls),
            message("tool", first, tool_call_id="c0", name="f"), message("tool", second, tool_call_id="c1", name="g"),
            message("assistant", "done")])

    # the first result ends in all of the separator but its last newline: joined, the separator is found there
    with pytest.raises(ConversionError) as info:
        unified_to_llamafactory(row("a" + RESULT_SEPARATOR[:-1], "b"))
    assert info.value.field == "messages[2].content"
    ctx = RowContext("llamafactory", "x.jsonl", 0, "train")
    source = LlamaFactorySource()
    for first, second in (("a\n</tool_response>", "b"), ("", "</tool_response>\n<tool_response>\nb"), ("a\n", "b")):
        written = unified_to_llamafactory(row(first, second))
        back = source.to_unified(source.to_raw(written, ctx), ctx)
        assert [m["content"] for m in back["messages"][2:4]] == [first, second]


@pytest.mark.parametrize("tools", ['[{"name": "a"}]',
                                   '[{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]',
                                   '[{"name": "a", "parameters": {"type": "object", "properties": {"x": {"enum": [1]}}}}]'])
def test_a_tools_spelling_the_default_tool_prompt_fails_on_is_not_written_back(tmp_path, tools):
    # LLaMA-Factory's DefaultToolUtils.tool_formatter reads tool["parameters"]["properties"] (KeyError otherwise,
    # which stops the run): such a file is read, but written with parameters.properties, not in its spelling.
    turns = [{"from": "human", "value": "q"}, {"from": "function_call", "value": '{"name": "a", "arguments": {}}'},
             {"from": "observation", "value": "r"}, {"from": "gpt", "value": "b"}]
    path = tmp_path / "tools.jsonl"
    path.write_text(json.dumps({"conversations": turns, "tools": tools}) + "\n")
    if "enum" in tools:
        with pytest.raises(ToolUseDataError, match="enum"):
            list(td.load("llamafactory", "llamafactory", data_files=str(path), split="train", streaming=True))
        return
    [written] = td.load("llamafactory", "llamafactory", data_files=str(path), split="train", streaming=True)
    assert written["conversations"] == turns and written["tools"] != tools
    assert accepted_by_llamafactory(written) == [("a", "{}")]
    assert json.loads(written["tools"])[0]["function"]["parameters"]["properties"] == {}


def test_the_card_names_the_tools_the_llamafactory_config_does_not_write_back_as_read():
    # (it said the config was exact but for a leading system turn; the test above writes such tools respelled)
    path = Path(sys.modules[LlamaFactorySource.__module__].__file__).parent / "card.md"
    card = " ".join(path.read_text(encoding="utf-8").split())
    assert "and so is `llamafactory` except that it writes a leading system turn as the `system` column." not in card
    assert "a tool without `parameters.properties`" in card


def _ms_swift_sample_with_required(tmp_path, required) -> Path:
    """The first ms-swift sample row with its tool's ``required`` replaced."""
    native = json.loads(Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()[0])
    tools = json.loads(native["tools"])
    tools[0]["function"]["parameters"]["required"] = required
    path = tmp_path / "required.jsonl"
    path.write_text(json.dumps({**native, "tools": json.dumps(tools)}) + "\n")
    return path


def test_tools_with_a_null_required_are_written_so_the_default_tool_prompt_reads_them(tmp_path):
    # DefaultToolUtils.tool_formatter tests `name in parameters.get("required", [])`: a null required is a
    # TypeError that stops LLaMA-Factory's whole run (seen with LLaMA-Factory 0.9.5 itself), so it is left out.
    path = _ms_swift_sample_with_required(tmp_path, None)
    [row] = td.load("ms_swift", data_files=str(path), split="train", streaming=True)
    # the ms_swift reader drops it as ms-swift does (Arrow padding); a unified row of another source may hold it
    assert "required" not in row["tools"][0]["function"]["parameters"]
    row["tools"][0]["function"]["parameters"]["required"] = None
    written = unified_to_llamafactory(row)
    assert accepted_by_llamafactory(written) == unified_calls(row)
    parameters = json.loads(written["tools"])[0]["function"]["parameters"]
    assert "required" not in parameters and parameters["properties"] == row["tools"][0]["function"]["parameters"][
        "properties"]
    # A LLaMA-Factory file holding such tools reads, and is written back in the spelling its tool prompt reads.
    lf_tools = json.loads(written["tools"])
    lf_tools[0]["function"]["parameters"]["required"] = None
    lf_path = tmp_path / "lf.jsonl"
    lf_path.write_text(json.dumps({"conversations": written["conversations"], "system": written["system"],
                                   "tools": json.dumps(lf_tools)}) + "\n")
    [again] = td.load("llamafactory", "llamafactory", data_files=str(lf_path), split="train", streaming=True)
    assert again["tools"] == written["tools"] and accepted_by_llamafactory(again) == unified_calls(row)


@pytest.mark.parametrize("required", ["base", 5, {"base": True}])
def test_a_required_that_is_not_a_list_is_refused_naming_it(tmp_path, required):
    path = _ms_swift_sample_with_required(tmp_path, required)
    with pytest.raises(ConversionError, match="required as a list") as info:
        list(td.load("ms_swift", "llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "tools[0].function.parameters.required" and info.value.row == 0


@pytest.mark.parametrize("enum", [5, True, "USD", {"USD": "dollar"}])
def test_an_enum_that_is_not_a_list_is_refused_naming_it(tmp_path, enum):
    # DefaultToolUtils.tool_formatter joins the enum: a number fails, a text is joined letter by letter
    # ("U, S, D"); it was a TypeError here, reported without its field.
    native = json.loads(Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()[0])
    tools = json.loads(native["tools"])
    tools[0]["function"]["parameters"]["properties"]["base"]["enum"] = enum
    path = tmp_path / "enum.jsonl"
    path.write_text(json.dumps({**native, "tools": json.dumps(tools)}) + "\n")
    field = "tools[0].function.parameters.properties.base.enum"
    with pytest.raises(ConversionError, match="list of strings") as info:
        list(td.load("ms_swift", "llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == field and info.value.row == 0
    # The same tools in a LLaMA-Factory file: refused by the reader, naming the same field.
    lf_path = tmp_path / "lf.jsonl"
    lf_path.write_text(json.dumps({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}],
                                   "tools": json.dumps(tools)}) + "\n")
    with pytest.raises(InvalidValueError, match="list of strings") as info:
        list(td.load("llamafactory", data_files=str(lf_path), split="train", streaming=True))
    assert info.value.field == field and info.value.row == 0


@pytest.mark.parametrize("items", [[], False], ids=["empty list", "false"])
def test_a_falsy_items_the_default_tool_prompt_skips_is_read_and_written(tmp_path, items):
    """DefaultToolUtils.tool_formatter tests ``param.get("items")`` by truth: a falsy one is skipped and the row
    trains as if it were absent (LLaMA-Factory 0.9.5 encodes such rows, tests/test_llamafactory_real.py). It was
    refused by the writer, and so by the reader, which checks that a row can be written back."""
    demo = json.loads((Path(__file__).parent / "data" / "llamafactory" / "glaive_toolcall_en_demo.json").read_text())
    native = next(row for row in demo if '"items"' in row["tools"])
    tools = json.loads(native["tools"])
    specs = [spec for tool in tools for spec in tool["parameters"]["properties"].values() if "items" in spec]
    for spec in specs:
        spec["items"] = items
    native = {**native, "tools": json.dumps(tools)}
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(native) + "\n")
    [row] = td.load("llamafactory", data_files=str(path), split="train", streaming=True)
    assert [spec["items"] for tool in row["tools"] for spec in tool["function"]["parameters"]["properties"].values()
            if "items" in spec] == [items] * len(specs)
    [written] = td.load("llamafactory", "llamafactory", data_files=str(path), split="train", streaming=True)
    assert written["tools"] == native["tools"] and written["conversations"] == native["conversations"]
    assert accepted_by_llamafactory(written) == unified_calls(row) != []
    # a truthy items that is not an object fails its tool prompt: still refused, naming it
    for spec in specs:
        spec["items"] = ["string"]
    path.write_text(json.dumps({**native, "tools": json.dumps(tools)}) + "\n")
    with pytest.raises(InvalidValueError, match="reads items as an object") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field.endswith(".items") and info.value.row == 0


def test_a_user_turn_holding_the_user_formatters_placeholder_is_refused(tmp_path):
    # LLaMA-Factory's user formatter is applied with content= then idx=: "{{idx}}" in the user's own text becomes
    # the turn number under every template (seen with LLaMA-Factory 0.9.5 itself: the turn is not verbatim).
    native = json.loads(Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()[0])
    assert native["messages"][1]["role"] == "user"
    native["messages"][1]["content"] = "In Vue, why does {{idx}} print nothing in my v-for? " + native["messages"][1][
        "content"]
    path = tmp_path / "idx.jsonl"
    path.write_text(json.dumps(native) + "\n")
    [row] = td.load("ms_swift", data_files=str(path), split="train", streaming=True)
    with pytest.raises(ConversionError, match="turn number") as info:
        unified_to_llamafactory(row)
    assert info.value.field == "messages[1].content"
    # Such a turn in a LLaMA-Factory file: refused by the reader, naming the file's turn.
    lf_path = tmp_path / "lf.jsonl"
    lf_path.write_text(json.dumps({"conversations": [{"from": "system", "value": "s"},
                                                     {"from": "human", "value": "hi"}, {"from": "gpt", "value": "a"},
                                                     {"from": "human", "value": row["messages"][1]["content"]},
                                                     {"from": "gpt", "value": "b"}]}) + "\n")
    with pytest.raises(InvalidValueError, match="turn number") as info:
        list(td.load("llamafactory", data_files=str(lf_path), split="train", streaming=True))
    assert info.value.field == "conversations[3].value" and info.value.row == 0
    # Spelled otherwise ("{{ idx }}", as Vue writes it), the text is not LLaMA-Factory's placeholder: written.
    spaced = {**row, "messages": [{**m, "content": m["content"].replace("{{idx}}", "{{ idx }}")} for m in row[
        "messages"]]}
    assert accepted_by_llamafactory(unified_to_llamafactory(spaced)) == unified_calls(row)


def test_an_image_without_its_tag_is_refused_as_llamafactorys_rule(tmp_path):
    # LLaMA-Factory's vision plugins fail on a row whose images and <image> tags do not match one for one;
    # the reason named ms-swift, which the row has nothing to do with.
    lines = Path(td.sample_files("llamafactory")["train"][0]).read_text().splitlines()
    native = next(json.loads(line) for line in lines if json.loads(line).get("images"))
    native["conversations"][0]["value"] = native["conversations"][0]["value"].replace("<image>", "")
    path = tmp_path / "untagged.jsonl"
    path.write_text(json.dumps(native) + "\n")
    with pytest.raises(InvalidValueError, match="LLaMA-Factory needs one tag per entry") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert info.value.field == "images" and "ms-swift" not in info.value.message


def test_a_video_given_as_its_frames_is_refused_saying_so(tmp_path):
    # LLaMA-Factory takes a video as the list of its frame images; the unified schema holds one file per video.
    path = tmp_path / "frames.jsonl"
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "<video>what happens?"},
                                                  {"from": "gpt", "value": "a cat jumps"}],
                                "videos": [["f1.jpg", "f2.jpg"]]}) + "\n")
    with pytest.raises(InvalidValueError, match="list of frame images") as info:
        list(td.load("llamafactory", data_files=str(path), split="train", streaming=True))
    assert (info.value.field, info.value.row) == ("videos[0]", 0)


def test_calls_spelled_in_tool_call_tags_read_as_llamafactorys_function_formatter_reads_them(tmp_path, cache_dir):
    # FunctionFormatter parses the text between <tool_call> and </tool_call> (every template's default
    # tool_call_words) as the calls, and trains the rest of the value before them as it is. LLaMA-Factory's glaive
    # demo with its calls spelled Qwen's way reads as the file itself, and is written back as spelled.
    demo = json.loads((Path(__file__).parent / "data" / "llamafactory" / "glaive_toolcall_en_demo.json").read_text())
    tagged = [{**row, "conversations": [
        {**turn, "value": f"<tool_call>\n{turn['value']}\n</tool_call>"} if turn["from"] == "function_call" else turn
        for turn in row["conversations"]]} for row in demo]
    calls = sum(turn["from"] == "function_call" for row in demo for turn in row["conversations"])
    assert calls > 5
    for rows, name in ((demo, "plain.json"), (tagged, "tagged.json")):
        (tmp_path / name).write_text(json.dumps(rows))
    plain = td.load("llamafactory", data_files=str(tmp_path / "plain.json"), split="train", streaming=True)
    read = td.load("llamafactory", data_files=str(tmp_path / "tagged.json"), split="train", streaming=True)
    assert [r["messages"] for r in read] == [r["messages"] for r in plain]
    written = td.load("llamafactory", "llamafactory", data_files=str(tmp_path / "tagged.json"), split="train",
                      cache_dir=cache_dir)
    assert [r["conversations"] for r in written] == [r["conversations"] for r in tagged]
    # The rest of the value may be a thought in LLaMA-Factory's spelling only: other text would be trained before
    # the calls, and a second block is such text (only the first is read as calls).
    first = next(row for row in tagged if row["conversations"][1]["from"] == "function_call")
    human, call, after = first["conversations"][0], first["conversations"][1]["value"], first["conversations"][2:]

    def with_call(value: str) -> Path:
        path = tmp_path / "one.json"
        path.write_text(json.dumps([{**first, "conversations": [human, {"from": "function_call", "value": value},
                                                                  *after]}]))
        return path

    thought = with_call(f"<think>\nWhy.\n</think>\n\n{call}")
    (row,) = td.load("llamafactory", data_files=str(thought), split="train", streaming=True)
    turn = next(m for m in row["messages"] if m.get("tool_calls"))
    assert turn["reasoning_content"] == "Why." and turn["content"] == ""
    for value in (f"Let me look.\n{call}", f"{call}\n{call}", f"{call}\n"):
        with pytest.raises(InvalidValueError) as info:
            list(td.load("llamafactory", data_files=str(with_call(value)), split="train", streaming=True))
        assert info.value.field == "conversations[1].value"
        assert "text beside the <tool_call> block" in info.value.message


def test_answers_quoting_the_tool_call_tags_are_trained_as_written(tmp_path, cache_dir):
    # Only a function_call value is parsed for calls (FunctionFormatter); LLaMA-Factory trains an answer, and its
    # reasoning, as written, <tool_call> tags included. Here a glaive demo answer quotes the ToolMind card's line.
    card = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    quote = card["toolmind_cleaned_card"]["message_roles_table"][3][1]
    assert quote.startswith("<tool_call>") and "</tool_call>" in quote
    demo = json.loads((Path(__file__).parent / "data" / "llamafactory" / "glaive_toolcall_en_demo.json").read_text())
    row = demo[0]
    last = row["conversations"][-1]
    assert last["from"] == "gpt"
    quoting = {**row, "conversations": [*row["conversations"][:-1],
                                        {"from": "gpt", "value": f"<think>\nThey asked about {quote}\n</think>\n\n"
                                                                 f"{last['value']} Calls look like {quote}"}]}
    path = tmp_path / "quoting.json"
    path.write_text(json.dumps([quoting]))
    (unified,) = td.load("llamafactory", data_files=str(path), split="train", streaming=True)
    answer = unified["messages"][-1]
    assert answer["content"].endswith(f"Calls look like {quote}") and answer["reasoning_content"].endswith(quote)
    (written,) = td.load("llamafactory", "llamafactory", data_files=str(path), split="train", cache_dir=cache_dir)
    assert written["conversations"] == quoting["conversations"]
    assert accepted_by_llamafactory(written) == unified_calls(unified)
    unified["meta"] = {}  # as from another source: written by the rules, not from a recorded spelling
    assert unified_to_llamafactory(unified)["conversations"] == quoting["conversations"]


def _toolmind_rows_file(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _toolmind_sample_rows(split: str) -> list[dict]:
    import pyarrow.parquet as pq

    table = pq.read_table(td.sample_files("toolmind")["train"][0])
    return [r for r in table.to_pylist() if r["split"] == split]


def test_cli_export_registry_matches_the_files_when_a_later_split_fails(tmp_path, monkeypatch, capsys):
    """dataset_info.json was written once every split was done: a run stopped at its second split (Ctrl-C, a bad
    row) had replaced the first split's file but left the earlier run's entry for it, here an empty file still
    registered (LLaMA-Factory refuses an empty dataset)."""
    from tooluse_datasets.commands import export

    first, second = _toolmind_sample_rows("When2Call"), _toolmind_sample_rows("tau-train")
    out = tmp_path / "out"
    good = _toolmind_rows_file(tmp_path / "good.jsonl", first + second)
    assert main(["export", "toolmind", "--data-files", good, "--format", "llamafactory", "--out", str(out)]) == 0
    assert set(json.loads((out / "dataset_info.json").read_text())) == {
        "toolmind-llamafactory-When2Call", "toolmind-llamafactory-tau_train"}
    # the next run: every When2Call row unreadable (skipped), then Ctrl-C while tau_train is written
    broken = [{**r, "messages": "not json"} for r in first]
    bad = _toolmind_rows_file(tmp_path / "bad.jsonl", broken + second)
    real_progress = export.progress

    def interrupted_at_second_split(rows, what):
        if what.endswith("tau_train"):
            raise KeyboardInterrupt
        return real_progress(rows, what)

    monkeypatch.setattr(export, "progress", interrupted_at_second_split)
    assert main(["export", "toolmind", "--data-files", bad, "--format", "llamafactory", "--out", str(out),
                 "--on-error", "skip"]) == 130
    assert (out / "toolmind-llamafactory-When2Call.jsonl").read_text() == ""
    info = json.loads((out / "dataset_info.json").read_text())
    assert "toolmind-llamafactory-When2Call" not in info and "toolmind-llamafactory-tau_train" in info
    assert sorted(p.name for p in out.iterdir()) == [
        "dataset_info.json", "toolmind-llamafactory-When2Call.jsonl", "toolmind-llamafactory-tau_train.jsonl"]


def test_cli_export_keeps_entries_another_export_registered_meanwhile(tmp_path, monkeypatch, capsys):
    """dataset_info.json was read at the start and written back at the end: two sources exported at once into one
    folder lost the entries of the one that finished first."""
    from tooluse_datasets.commands import export

    out = tmp_path / "lf"
    real_progress = export.progress

    def other_export_finishes_meanwhile(rows, what):
        info_path = out / "dataset_info.json"
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
        info["other-llamafactory-train"] = {"file_name": "other-llamafactory-train.jsonl", "formatting": "sharegpt",
                                            "columns": {"messages": "conversations"}}
        info_path.write_text(json.dumps(info))
        return real_progress(rows, what)

    monkeypatch.setattr(export, "progress", other_export_finishes_meanwhile)
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(out)]) == 0
    assert set(json.loads((out / "dataset_info.json").read_text())) == {
        "other-llamafactory-train", "nestful-llamafactory-train"}


def test_exports_registering_at_once_in_one_folder_keep_dataset_info_json_whole(tmp_path):
    """Two exports registering their files at once wrote the same dataset_info.json.partial together: the registry
    became two registries run into one (not JSON: every later export into the folder stopped on it), or lost the
    entries one of them had read before the other wrote."""
    import subprocess
    import sys

    # each registers its entries once both have started (a file of its own says it has)
    register = ("import sys\nfrom pathlib import Path\nfrom tooluse_datasets.commands.export import _register\n"
                "info, name, ready = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])\n"
                "(ready / name).touch()\n"
                "while len(list(ready.iterdir())) < 2:\n"
                "    pass\n"
                "for i in range(200):\n"
                "    _register(info, f'{name}-{i}', {'file_name': f'{name}-{i}.jsonl'})\n")
    out, ready = tmp_path / "lf", tmp_path / "ready"
    out.mkdir()
    ready.mkdir()
    exports = [subprocess.Popen([sys.executable, "-c", register, str(out / "dataset_info.json"), name, str(ready)],
                                stderr=subprocess.PIPE, text=True)
               for name in ("nestful-llamafactory", "toolmind-llamafactory")]
    assert [(p.wait(timeout=120), p.stderr.read()) for p in exports] == [(0, ""), (0, "")]
    assert len(json.loads((out / "dataset_info.json").read_text())) == 400
    assert [p.name for p in out.iterdir()] == ["dataset_info.json"]


def test_an_export_into_a_folder_it_can_write_but_not_read_registers_its_files(tmp_path, monkeypatch, capsys):
    """The lock on the folder opens it for reading: a folder of mode -wx (writable, not readable) failed with a
    PermissionError once the split's file was written, before it was registered. (Opening is refused here as such
    a folder refuses it, also to root.)"""
    from tooluse_datasets.cli import main

    out = tmp_path / "lf"
    out.mkdir()
    real_open = os.open

    def unreadable_folder(path, flags, *args, **kwargs):
        if os.fspath(path) == str(out) and not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", unreadable_folder)
    assert main(["export", "ms_swift", "--sample", "--format", "llamafactory", "--on-error", "skip",
                 "--out", str(out)]) == 0
    monkeypatch.undo()
    assert list(json.loads((out / "dataset_info.json").read_text())) == ["ms_swift-llamafactory-train"]


def test_a_tool_description_that_is_not_text_is_refused_not_written_unreadable(tmp_path, capsys):
    """NESTFUL reads a tool whose description is a number (a damaged spec); the writer wrote it as it was, and the
    export did not read back: the llamafactory reader refuses it ('tool description must be a string'), and
    LLaMA-Factory's tool prompt prints it as text."""
    sample = Path(td.sample_files("nestful")["train"][0])
    rows = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    rows[0]["tools"][0]["description"] = 1.5
    data = tmp_path / "nestful.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "lf"
    assert main(["export", "nestful", "--data-files", str(data), "--format", "llamafactory", "--out", str(out),
                 "--on-error", "skip"]) == 0
    printed = capsys.readouterr().out
    assert f"{len(rows)} rows read, 1 skipped (ConversionError:tools[0].function.description x1)" in printed
    written = out / "nestful-llamafactory-train.jsonl"
    report = td.SkipReport()
    back = list(td.load("llamafactory", "llamafactory", data_files=str(written), split="train", streaming=True,
                        on_error="skip", report=report))
    assert report.skipped == 0 and len(back) == len(rows) - 1


@pytest.mark.parametrize("fmt, out", [("llamafactory", "mine"), ("unified", "mine"), ("unified", "mine/sub")])
def test_cli_export_refuses_an_out_in_the_folder_a_dataset_info_entry_reads(fmt, out, tmp_path, capsys):
    """An entry whose file_name is a folder: LLaMA-Factory reads every file in it, so an export written there joined
    the entry's rows (every row twice) with its dataset_info.json read as rows, or (below it) was a folder the
    entry refused; the first run wrote it, breaking the entry."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "part-0.jsonl").write_bytes(open(td.sample_files("llamafactory")["train"][0], "rb").read())
    (tmp_path / "dataset_info.json").write_text('{"mine": {"file_name": "mine", "formatting": "sharegpt"}}\n')
    entry = ["export", "llamafactory", "--option", f"dataset_info={tmp_path}", "--option", "dataset=mine",
             "--format", fmt]
    assert main([*entry, "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert f"is in the folder '{tmp_path / 'mine'}' that dataset_info entry 'mine' reads" in err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["part-0.jsonl"]
    assert main(["stats", "llamafactory", "--option", f"dataset_info={tmp_path}", "--option", "dataset=mine"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["rows"] == 5
    # beside the folder, it is written as ever
    assert main([*entry, "--out", str(tmp_path / "lf")]) == 0
    assert len((tmp_path / "lf" / f"llamafactory-{fmt}-train.jsonl").read_text().splitlines()) == 5


def test_a_raw_export_reads_back_as_the_same_rows_its_extra_not_nested(tmp_path, capsys):
    """A raw export read back kept its extra column as a column of the file, one level down in extra: each round
    nested the file's own columns once more ({"extra": {"extra": {"label": ...}}})."""
    rows = [json.loads(line) for line in open(td.sample_files("llamafactory")["train"][0], encoding="utf-8")]
    for i, row in enumerate(rows):
        row["label"] = {"split": "train", "n": i}
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    first = list(td.load("llamafactory", "raw", data_files=str(data), split="train", streaming=True))
    assert [row["extra"] for row in first] == [{"label": {"split": "train", "n": i}} for i in range(len(rows))]
    files = str(data)
    for n in (1, 2):
        out = tmp_path / f"round{n}"
        assert main(["export", "llamafactory", "--data-files", files, "--format", "raw", "--out", str(out)]) == 0
        files = str(out / "llamafactory-raw-train.jsonl")
        assert list(td.load("llamafactory", "raw", data_files=files, split="train", streaming=True)) == first
    unified = list(td.load("llamafactory", data_files=files, split="train", streaming=True))
    assert [row["meta"].get("label") for row in unified] == [row["extra"]["label"] for row in first]


def test_cli_export_beside_an_entry_named_dataset_info_registers_its_file(tmp_path, capsys):
    """An entry named "dataset_info" read from the dataset_info.json of --out was taken for one the export replaces
    (its registry file's name, dataset_info.json, is no entry): the export was refused."""
    (tmp_path / "mine.jsonl").write_bytes(open(td.sample_files("llamafactory")["train"][0], "rb").read())
    info = '{"dataset_info": {"file_name": "mine.jsonl", "formatting": "sharegpt"}}'
    (tmp_path / "dataset_info.json").write_text(info)
    assert main(["export", "llamafactory", "--option", f"dataset_info={tmp_path}", "--option", "dataset=dataset_info",
                 "--format", "llamafactory", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    registry = json.loads((tmp_path / "dataset_info.json").read_text())
    assert registry["dataset_info"]["file_name"] == "mine.jsonl"
    assert registry["llamafactory-llamafactory-train"]["file_name"] == "llamafactory-llamafactory-train.jsonl"


def test_cli_export_refuses_to_replace_the_dataset_info_entry_it_reads(tmp_path, capsys):
    """An entry named as the export's file (llamafactory-llamafactory-train) in the dataset_info.json of --out: the
    export registered its own file under that name, and the entry the run read (its file, its columns) was gone."""
    (tmp_path / "mine.jsonl").write_bytes(open(td.sample_files("llamafactory")["train"][0], "rb").read())
    info = '{"llamafactory-llamafactory-train": {"file_name": "mine.jsonl", "formatting": "sharegpt"}}\n'
    (tmp_path / "dataset_info.json").write_text(info)
    entry = ["export", "llamafactory", "--option", f"dataset_info={tmp_path}", "--option",
             "dataset=llamafactory-llamafactory-train", "--format", "llamafactory"]
    assert main([*entry, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "replacing the entry this run reads" in err
    assert (tmp_path / "dataset_info.json").read_text() == info
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset_info.json", "mine.jsonl"]
    # another --out, or another entry name, registers as ever
    assert main([*entry, "--out", str(tmp_path / "lf")]) == 0
    assert json.loads((tmp_path / "lf" / "dataset_info.json").read_text())["llamafactory-llamafactory-train"][
        "file_name"] == "llamafactory-llamafactory-train.jsonl"
