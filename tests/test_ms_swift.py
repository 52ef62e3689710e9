"""ms-swift agent format: the ``ms_swift`` reader, the ``swift`` writer and the round trips between them.

Real rows come from ../shared/data/ms_swift (the ms-swift docs' own examples) and NESTFUL; the variant
tables below are hand-written rows in every shape ms-swift 4.6 accepts or drops (spec §1-§10).
"""
from __future__ import annotations

import copy
import decimal
import json
import math
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td
from tooluse_datasets import arrow_rows, cli, codec
from tooluse_datasets.builders.ms_swift import SOURCE
from tooluse_datasets.builders import ms_swift as ms_swift_package
from tooluse_datasets.builders.ms_swift.source import RAW_FEATURES
from tooluse_datasets.builders.ms_swift.writer import SWIFT_FEATURES, unified_to_swift
from tooluse_datasets.errors import (ConversionError, DataNotFoundError, InvalidJsonError, InvalidValueError,
                                     MissingFieldError)
from tooluse_datasets.schema import message, tool_call, unified_row
from tooluse_datasets.source import RowContext

from conftest import SHARED_DATA, benchmark_module, count_calls, shared_data
from hermes_template import render

SHARED_FILES = [
    "agent_support_doc_examples_en.jsonl",
    "agent_support_doc_examples_zh.jsonl",
    "custom_dataset_doc_agent_rows_en.jsonl",  # OpenAI/Anthropic rows and one DPO row among plain ones
]
NESTFUL_TOY = ("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl")
CTX = RowContext("ms_swift", "variants.jsonl", 0, "train")
SOURCE_DIR = Path(ms_swift_package.__file__).parent


# --------------------------------------------------------------------------------------------------
# Helpers (independent of the reader: they read the native rows with json and nothing else)
# --------------------------------------------------------------------------------------------------


def native_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def native_calls(row: dict) -> list[dict]:
    """Every call of a native row, in order, as ``{"name", "arguments"}``, straight from the file."""
    calls = []
    for m in row["messages"]:
        if m["role"] == "tool_call":
            call = json.loads(m["content"])
            calls.append({"name": call["name"], "arguments": call["arguments"]})
        for c in m.get("tool_calls") or []:  # OpenAI
            calls.append({"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])})
        if isinstance(m["content"], list):  # Anthropic
            calls += [{"name": b["name"], "arguments": b["input"]} for b in m["content"] if b["type"] == "tool_use"]
    return calls


def unified_calls(row: dict) -> list[dict]:
    return [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for m in row["messages"] for c in m.get("tool_calls", [])]


def convert(native: dict) -> tuple[dict, dict]:
    raw = SOURCE.to_raw(copy.deepcopy(native), CTX)
    return raw, SOURCE.to_unified(raw, CTX)


def assert_skipped_fields(path, cache_dir: str, expected) -> list[dict]:
    """Loading ``path`` (map-style and streaming) keeps its one good row and reports row ``i`` skipped at
    ``expected[i]``. Returns the skipped rows both loads reported."""
    skipped = []
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        ds = td.load("ms_swift", data_files=path, split="train", on_error="skip", report=report, streaming=streaming,
                     cache_dir=cache_dir)
        assert len(list(ds)) == 1
        assert [(r["row"], r["field"]) for r in report.rows] == list(enumerate(expected))
        skipped += report.rows
    return skipped


def assert_refused(native: dict, error: type, field: str, match: str) -> td.ToolUseDataError:
    """Converting ``native`` raises exactly ``error``, saying ``match``, about ``field``; returns the error."""
    with pytest.raises(error, match=re.escape(match)) as info:
        convert(native)
    assert type(info.value) is error and info.value.field == field
    return info.value


def summarize(row: dict) -> list[tuple]:
    """A unified row's conversation as readable tuples: (role, content[, reasoning]), ("call", id, name,
    arguments), ("tool", call id, name, content)."""
    out: list[tuple] = []
    for m in row["messages"]:
        if m["role"] == "tool":
            out.append(("tool", m.get("tool_call_id"), m.get("name"), m["content"]))
        elif m["role"] == "assistant":
            out.append(("assistant", m["content"], m.get("reasoning_content")))
            out += [("call", c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls", [])]
        else:
            out.append((m["role"], m["content"]))
    return out


def same_json(a, b) -> bool:
    return td.dumps(a) == td.dumps(b)


def conversation(row: dict) -> dict:
    """The parts of a unified row the swift format carries."""
    return {key: row.get(key, []) for key in ("messages", "tools", "images", "audios", "videos")}


def write_jsonl(path: Path, rows) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return str(path)


# --------------------------------------------------------------------------------------------------
# Real rows: ms-swift documentation examples
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHARED_FILES)
def test_doc_rows_load_map_style_and_streaming_identically(name, cache_dir):
    path = shared_data("ms_swift", name)
    native = native_rows(path)
    rows = list(td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir))
    streamed = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, cache_dir=cache_dir))
    assert rows == streamed
    assert len(rows) == len(native)  # nothing dropped, the DPO row's neighbours included
    for i, (row, source_row) in enumerate(zip(rows, native)):
        td.validate_unified(row)
        assert row["id"] == f"ms_swift/{path.stem}/{i}" and row["subset"] == path.stem
        assert unified_calls(row) == native_calls(source_row)
        call_ids = [c["id"] for m in row["messages"] for c in m.get("tool_calls", [])]
        assert call_ids == [f"call_{k}" for k in range(len(call_ids))]
        for m in row["messages"]:
            if m["role"] == "tool":
                assert m["tool_call_id"] in call_ids and m["name"]


def test_loading_a_sources_every_split_by_name_fills_the_cache_a_load_of_all_splits_reads(monkeypatch, cache_dir):
    """load(split=...) converts only the splits it names, into a cache of their own; when the names are every
    split the files have (known from data_files, not from the rows), that is the full build's cache: `split="train"`
    then no split converts once."""
    from tooluse_datasets.builders.ms_swift.source import MsSwiftSource

    read = count_calls(monkeypatch, MsSwiftSource, "read")
    files = td.sample_files("ms_swift")
    train = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    shards = read["read"]
    assert len(train) > 0 and shards > 0
    everything = td.load("ms_swift", data_files=files, cache_dir=cache_dir)
    assert list(everything) == ["train"] and list(everything["train"]) == list(train)
    assert read["read"] == shards  # read from the cache the first load wrote
    # With two splits, one of them is a build of its own; both by name are the full build again.
    two = {"train": files["train"][:1], "test": files["train"][1:]}
    test = td.load("ms_swift", data_files=two, split="test", cache_dir=cache_dir)
    both = td.load("ms_swift", data_files=two, split="train+test", cache_dir=cache_dir)
    converted = read["read"]
    assert list(td.load("ms_swift", data_files=two, cache_dir=cache_dir)["test"]) == list(test)
    assert len(both) == len(train) and read["read"] == converted


def test_doc_rows_fields(cache_dir):
    path = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
    rows = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    openai_multimodal, anthropic_multimodal, dpo, think = rows[1], rows[3], rows[4], rows[6]
    assert openai_multimodal["messages"][0]["content"] == "Compare these images.<image><image>"
    assert openai_multimodal["images"] == ["data:image/png;base64,{base64_encoded}", "https://example.com/input.png"]
    assert openai_multimodal["messages"][1]["content"] == "I will inspect them."
    assert anthropic_multimodal["messages"][-1]["content"] == "<image>A sunny beach."
    assert anthropic_multimodal["images"] == ["data:image/png;base64,{base64_encoded}", "https://example.com/result.png"]
    assert anthropic_multimodal["meta"]["ms_swift_original"]["messages"]["1"][0]["extra"] == {"id": "toolu_01"}
    assert dpo["meta"]["rejected_response"] == [{"role": "assistant", "content": "I don't know."}]
    assert think["messages"][1]["reasoning_content"] == "I can check the current time by opening the calendar app."
    assert think["messages"][1]["content"] == "" and think["images"] == ["desktop.png", "calendar.png"]
    assert think["messages"][2]["content"] == '{"images": "<image>", "status": "success"}'  # tag untouched


@pytest.mark.parametrize("name", SHARED_FILES)
def test_doc_rows_round_trip_through_swift(name, cache_dir, tmp_path):
    path = shared_data("ms_swift", name)
    native = native_rows(path)
    unified = list(td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir))
    raw = list(td.load("ms_swift", "raw", data_files=str(path), split="train", cache_dir=cache_dir))
    swift = td.load("ms_swift", "swift", data_files=str(path), split="train", cache_dir=cache_dir)
    assert swift.features == SWIFT_FEATURES
    written = write_jsonl(tmp_path / f"{path.stem}.jsonl", swift)
    reread = list(td.load("ms_swift", data_files=written, split="train", cache_dir=cache_dir))
    assert [conversation(r) for r in reread] == [conversation(r) for r in unified]

    assert len(native) == len(raw) == len(swift) > 0
    for source_row, raw_row, swift_row in zip(native, raw, swift):
        assert isinstance(swift_row["tools"], str)
        assert td.loads(swift_row["tools"]) == [json.loads(t) if isinstance(t, str) else t for t in raw_row["tools"]]
        assert swift_messages_equivalent(swift_row["messages"]) == swift_messages_equivalent(raw_row["messages"])
        assert swift_row["images"] == source_row.get("images", raw_row["images"])
        if any(m["role"] == "tool_call" for m in source_row["messages"]):
            # Rows already in ms-swift's own format come back as the same JSON values...
            assert td.loads(swift_row["tools"]) == td.loads(source_row["tools"])
            assert swift_messages_equivalent(swift_row["messages"]) == swift_messages_equivalent(source_row["messages"])
            # ...and, being spelled as the docs spell them, as the same text (nothing kept aside in meta), each
            # result also naming its call.
            assert swift_row["messages"] == with_result_names(source_row["messages"])
            assert swift_row["tools"] == source_row["tools"]
    for row, source_row in zip(unified, native):
        if any(m["role"] == "tool_call" for m in source_row["messages"]):
            assert "ms_swift_original" not in row["meta"]


@pytest.mark.parametrize("name", SHARED_FILES)
def test_swift_rows_written_by_to_json_read_back_without_null_names(name, cache_dir, tmp_path):
    """datasets' ``to_json`` writes the ``swift`` config's Arrow rows with ``"name": null`` on every message but
    the results. ms-swift drops those keys; read back, they were kept in ``meta.ms_swift_original`` as originals of
    every user, call and answer turn. Only each result's own ``name`` (ms-swift keeps it) is kept there."""
    path = shared_data("ms_swift", name)
    unified = list(td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir))
    swift = td.load("ms_swift", "swift", data_files=str(path), split="train", cache_dir=cache_dir)
    written = tmp_path / f"{path.stem}.jsonl"
    swift.to_json(written)
    assert '"name":null' in written.read_text(encoding="utf-8")
    for streaming in (False, True):
        reread = list(td.load("ms_swift", data_files=str(written), split="train", streaming=streaming,
                              cache_dir=cache_dir))
        assert [conversation(r) for r in reread] == [conversation(r) for r in unified]
        for row in reread:
            kept = row["meta"].get("ms_swift_original", {}).get("messages", {})
            assert set(kept) == {str(t) for t, m in enumerate(row["messages"]) if m["role"] == "tool"}
            assert all(m["extra"] == {} for originals in kept.values() for m in originals)


def with_result_names(messages: list[dict]) -> list[dict]:
    """ms-swift messages as the ``swift`` writer spells them: each result with the ``name`` of the call it answers
    (by position)."""
    out, pending = [], []
    for m in messages:
        if m["role"] == "tool_call":
            pending.append(json.loads(m["content"])["name"])
        out.append({**m, "name": pending.pop(0)} if m["role"] in ("tool", "tool_response") else m)
    return out


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_swift_results_name_the_call_they_answer(cache_dir, tmp_path, streaming):
    """ms-swift 4.6 keeps `name` on tool results (and drops it on other messages): its gemma4 agent template
    prints it (`response:realtime_aqi{...}`; `response:unknown{...}` without it), kimi_k3 too. The writer left it
    out, so models trained with those templates on `swift` rows saw every result come from "unknown". Other
    messages have no `name` key (null in Arrow), and the export writes none."""
    path = shared_data("ms_swift", "agent_support_doc_examples_en.jsonl")
    unified = list(td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir))
    swift = list(td.load("ms_swift", "swift", data_files=str(path), split="train", cache_dir=cache_dir,
                         streaming=streaming))
    for row, written in zip(unified, swift, strict=True):
        assert written["messages"] == unified_to_swift(row)["messages"]
        results = [m for m in written["messages"] if m["role"] == "tool_response"]
        assert results and [m["name"] for m in results] == [m["name"] for m in row["messages"] if m["role"] == "tool"]
        assert all("name" not in m for m in written["messages"] if m["role"] != "tool_response")
    assert [m.get("name") for m in swift[0]["messages"]] == [None, None, None, "realtime_aqi", "realtime_aqi", None]
    assert cli.main(["export", "ms_swift", "--data-files", str(path), "--format", "swift", "--out",
                     str(tmp_path)]) == 0
    lines = (tmp_path / f"ms_swift-swift-train.jsonl").read_text().splitlines()
    assert [json.loads(line)["messages"] for line in lines] == [r["messages"] for r in swift]


def swift_messages_equivalent(messages: list[dict]) -> list[tuple]:
    """ms-swift messages compared as ms-swift reads them: ``tool`` = ``tool_response``, call contents as
    JSON values, and the one newline that separates pre-call text from the calls ignored (the writer adds it)."""
    out = []
    for i, m in enumerate(messages):
        role = "tool_response" if m["role"] == "tool" else m["role"]
        content = m["content"]
        if role == "tool_call":
            content = td.loads(content) if isinstance(content, str) else content
        if role == "assistant" and i + 1 < len(messages) and messages[i + 1]["role"] == "tool_call":
            content = content[:-1] if content.endswith("\n") else content
        out.append((role, content))
    return out


def test_anthropic_pre_call_text_gains_the_separating_newline(cache_dir):
    path = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
    swift = td.load("ms_swift", "swift", data_files=str(path), split="train", cache_dir=cache_dir)
    assert swift[2]["messages"][:2] == [
        {"role": "assistant", "content": "I will check.\n"},
        {"role": "tool_call", "content": '{"name": "get_weather", "arguments": {"city": "Beijing"}}'}]


@pytest.mark.parametrize("name", SHARED_FILES)
def test_doc_rows_render_hermes_tool_calls_in_order(name, cache_dir):
    path = shared_data("ms_swift", name)
    rows = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    for row, source_row in zip(rows, native_rows(path)):
        text = render(row["messages"], row["tools"])
        blocks = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.DOTALL)
        # The system prompt's format example ({"name": <function-name>, ...}) is not JSON: skip it.
        rendered_calls = [json.loads(b) for b in blocks if not b.startswith('{"name": <')]
        assert rendered_calls == native_calls(source_row)
        results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text, re.DOTALL)
        assert results == [m["content"] for m in row["messages"] if m["role"] == "tool"]


def test_hermes_rendering_of_the_parallel_call_example(cache_dir):
    path = shared_data("ms_swift", "agent_support_doc_examples_en.jsonl")
    rows = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    text = render(rows[0]["messages"], rows[0]["tools"])
    assert ('<tool_call>\n{"name": "realtime_aqi", "arguments": {"city": "Beijing"}}\n</tool_call>'
            '<tool_call>\n{"name": "realtime_aqi", "arguments": {"city": "Shanghai"}}\n</tool_call>') in text
    assert '<tool_response>\n{"city": "Beijing", "aqi": "10", "unit": "celsius"}\n</tool_response>' in text
    think = render(rows[1]["messages"], rows[1]["tools"])
    assert "<think>\nI can check the current time by opening the calendar app.\n</think><tool_call>" in think


def test_raw_to_unified_to_raw_is_exact_on_doc_and_sample_rows(cache_dir):
    files = [str(shared_data("ms_swift", name)) for name in SHARED_FILES] + td.sample_files("ms_swift")["train"]
    raw = td.load("ms_swift", "raw", data_files=files, split="train", cache_dir=cache_dir)
    unified = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    assert raw.features == td.ExactFeatures(RAW_FEATURES)
    assert len(raw) == len(unified) == 17
    for raw_row, unified_row_ in zip(raw, unified):
        assert same_json(SOURCE.from_unified(unified_row_), raw_row)


# --------------------------------------------------------------------------------------------------
# Accepted input variants
# --------------------------------------------------------------------------------------------------

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
BARE_NEWS = {"name": "get_news_headlines", "description": "Get the latest news headlines",
             "parameters": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}}


def call_json(name: str, arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


ACCEPTED = [
    pytest.param(
        {"system": "You are a helpful assistant with access to functions.", "tools": json.dumps([BARE_NEWS]),
         "conversations": [
             {"from": "human", "value": "Latest news for the United States, please."},
             {"from": "function-call", "value": "{\"name\": \"get_news_headlines\", \"arguments\": '{\"country\": \"United States\"}'}"},
             {"from": "function-response", "value": "{\"headlines\": [\"Storm hits Texas\", \"Markets rally\"]}"},
             {"from": "gpt", "value": "Storm hits Texas; markets rally."}]},
        [("system", "You are a helpful assistant with access to functions."),
         ("user", "Latest news for the United States, please."), ("assistant", "", None),
         ("call", "call_0", "get_news_headlines", {"country": "United States"}),
         ("tool", "call_0", "get_news_headlines", '{"headlines": ["Storm hits Texas", "Markets rally"]}'),
         ("assistant", "Storm hits Texas; markets rally.", None)],
        {"tools": [{"type": "function", "function": BARE_NEWS}]},
        id="function-calling-chatml: system column, from/value, hyphenated roles, quoted JSON arguments"),
    pytest.param(
        {"conversation": [
            {"role": "user", "content": "Where is order A-1009?"},
            {"role": "function_call", "content": {"name": "lookup_order", "arguments": {"order_id": "A-1009"}}},
            {"role": "observation", "content": {"status": "shipped", "eta": "2024-06-02"}},
            {"role": "bot", "content": "It has shipped and should arrive on 2 June."}],
         "tools": [{"type": "function", "function": {"name": "lookup_order", "description": "Order status.",
                                                     "parameters": {"type": "object", "properties": {}}}}]},
        [("user", "Where is order A-1009?"), ("assistant", "", None),
         ("call", "call_0", "lookup_order", {"order_id": "A-1009"}),
         ("tool", "call_0", "lookup_order", '{"status": "shipped", "eta": "2024-06-02"}'),
         ("assistant", "It has shipped and should arrive on 2 June.", None)],
        {}, id="conversation column, function_call/observation/bot, object contents"),
    pytest.param(
        {"messages": json.dumps([{"role": "user", "content": "Weather in Oslo?"},
                                 {"role": "tool_call", "content": call_json("get_weather", {"city": "Oslo"})},
                                 {"role": "tool", "content": "-3 C, snow"},
                                 {"role": "assistant", "content": "It is -3 C and snowing in Oslo."}]),
         "tools": json.dumps([WEATHER])},
        [("user", "Weather in Oslo?"), ("assistant", "", None), ("call", "call_0", "get_weather", {"city": "Oslo"}),
         ("tool", "call_0", "get_weather", "-3 C, snow"), ("assistant", "It is -3 C and snowing in Oslo.", None)],
        {"tools": [WEATHER]}, id="messages as JSON text, tool role"),
    pytest.param(
        {"messages": "[{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello! How can I help?'}]"},
        [("user", "Hi"), ("assistant", "Hello! How can I help?", None)], {"tools": []},
        id="messages as Python-literal text, no tools"),
    pytest.param(
        {"tools": [json.dumps(WEATHER)], "messages": [
            {"role": "user", "content": "Weather in Lima?"},
            {"role": "tool_call", "content": "{'name': 'get_weather', 'arguments': {'city': 'Lima', 'metric': True, 'days': None}}"}]},
        [("user", "Weather in Lima?"), ("assistant", "", None),
         ("call", "call_0", "get_weather", {"city": "Lima", "metric": True, "days": None})],
        {"tools": [WEATHER]}, id="tools as a list of JSON strings, call as a Python literal"),
    pytest.param(
        {"tools": BARE_NEWS, "messages": [
            {"role": "user", "content": "News from Chile?"},
            {"role": "tool_call", "content": json.dumps({"name": "get_news_headlines", "parameters": {"country": "Chile"}})}]},
        [("user", "News from Chile?"), ("assistant", "", None),
         ("call", "call_0", "get_news_headlines", {"country": "Chile"})],
        {"tools": [{"type": "function", "function": BARE_NEWS}]},
        id="tools as one bare dict, parameters instead of arguments"),
    pytest.param(
        {"tools": [{"name_for_model": "image_gen", "name_for_human": "Image generator",
                    "description_for_model": "Draws an image from a text prompt.",
                    "parameters": json.dumps({"type": "object", "properties": {"prompt": {"type": "string"}}})}],
         "messages": [{"role": "user", "content": "Draw a lighthouse."},
                      {"role": "tool_call", "content": json.dumps(
                          {"name": "image_gen", "arguments": json.dumps({"prompt": "a lighthouse at dusk"})})},
                      {"role": "tool_response", "content": "![image](lighthouse.png)"},
                      {"role": "assistant", "content": "Here is your lighthouse."}]},
        [("user", "Draw a lighthouse."), ("assistant", "", None),
         ("call", "call_0", "image_gen", {"prompt": "a lighthouse at dusk"}),
         ("tool", "call_0", "image_gen", "![image](lighthouse.png)"), ("assistant", "Here is your lighthouse.", None)],
        {"tools": [{"type": "function", "function": {
            "name": "image_gen", "description": "Draws an image from a text prompt.",
            "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}},
            "name_for_human": "Image generator"}}]},
        id="Qwen-Agent tool (name_for_model, description_for_model, parameters text), arguments as JSON text"),
    pytest.param(
        {"tools": json.dumps([{"name": "get_time", "description": "Current UTC time.", "parameters": {}}]),
         "messages": [{"role": "user", "content": "What time is it?"},
                      {"role": "tool_call", "content": call_json("get_time", {})},
                      {"role": "tool_response", "content": "12:00Z"},
                      {"role": "assistant", "content": "It is noon UTC."}]},
        [("user", "What time is it?"), ("assistant", "", None), ("call", "call_0", "get_time", {}),
         ("tool", "call_0", "get_time", "12:00Z"), ("assistant", "It is noon UTC.", None)],
        {}, id="empty arguments"),
    pytest.param(
        {"tools": json.dumps([WEATHER]), "messages": [
            {"role": "user", "content": "Is Rome or Madrid warmer?"},
            {"role": "assistant", "content": "<think>\nI need both cities.\n</think>\nChecking both cities.\n"},
            {"role": "tool_call", "content": call_json("get_weather", {"city": "Rome"})},
            {"role": "tool_call", "content": call_json("get_weather", {"city": "Madrid"})},
            {"role": "tool_response", "content": "21 C"},
            {"role": "tool_response", "content": "25 C"},
            {"role": "assistant", "content": "<think>\n25 > 21.\n</think>\n\nMadrid is warmer."}]},
        [("user", "Is Rome or Madrid warmer?"), ("assistant", "Checking both cities.", "I need both cities."),
         ("call", "call_0", "get_weather", {"city": "Rome"}), ("call", "call_1", "get_weather", {"city": "Madrid"}),
         ("tool", "call_0", "get_weather", "21 C"), ("tool", "call_1", "get_weather", "25 C"),
         ("assistant", "Madrid is warmer.", "25 > 21.")],
        {}, id="think and text before parallel calls, think before the answer"),
    pytest.param(
        {"tools": json.dumps([WEATHER]), "messages": [
            {"role": "user", "content": "Weather in Quito?"},
            {"role": "tool_call", "content": call_json("get_weather", {"city": "Quito"})},
            {"role": "tool", "name": "get_weather", "content": "14 C"},
            {"role": "assistant", "content": "14 C in Quito."}]},
        [("user", "Weather in Quito?"), ("assistant", "", None), ("call", "call_0", "get_weather", {"city": "Quito"}),
         ("tool", "call_0", "get_weather", "14 C"), ("assistant", "14 C in Quito.", None)],
        {}, id="tool message with name"),
    pytest.param(
        {"tools": [WEATHER], "messages": [
            {"role": "user", "content": "Oslo and Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "b", "content": "Rome: 20 C"},
            {"role": "tool", "tool_call_id": "a", "content": "Oslo: 2 C"}]},
        [("user", "Oslo and Rome?"), ("assistant", "", None),
         ("call", "call_0", "get_weather", {"city": "Oslo"}), ("call", "call_1", "get_weather", {"city": "Rome"}),
         ("tool", "call_0", "get_weather", "Oslo: 2 C"), ("tool", "call_1", "get_weather", "Rome: 20 C")],
        {}, id="OpenAI tool_calls with ids: results re-sorted into call order"),
    pytest.param(
        {"messages": [
            {"role": "user", "content": "Oslo and Rome?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
            {"role": "tool", "content": "Oslo: 2 C"},
            {"role": "tool", "content": "Rome: 20 C"}]},
        [("user", "Oslo and Rome?"), ("assistant", "Checking.", None),
         ("call", "call_0", "get_weather", {"city": "Oslo"}), ("call", "call_1", "get_weather", {"city": "Rome"}),
         ("tool", "call_0", "get_weather", "Oslo: 2 C"), ("tool", "call_1", "get_weather", "Rome: 20 C")],
        {}, id="OpenAI tool_calls without ids: paired by position"),
    pytest.param(
        {"messages": [{"role": "user", "content": "Any alarms set?"},
                      {"role": "assistant", "content": None, "tool_calls": [{"name": "list_alarms"}]},
                      {"role": "tool", "content": "[]"}, {"role": "assistant", "content": "No alarms are set."}]},
        [("user", "Any alarms set?"), ("assistant", "", None), ("call", "call_0", "list_alarms", {}),
         ("tool", "call_0", "list_alarms", "[]"), ("assistant", "No alarms are set.", None)],
        {}, id="OpenAI call without function wrapper or arguments"),
    pytest.param(
        {"messages": [
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "Rome: 20 C"},
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "Oslo: 2 C"}]}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Rome is warmer."}]}]},
        [("user", "Weather in Oslo and Rome?"), ("assistant", "Checking both.", None),
         ("call", "call_0", "get_weather", {"city": "Oslo"}), ("call", "call_1", "get_weather", {"city": "Rome"}),
         ("tool", "call_0", "get_weather", "Oslo: 2 C"), ("tool", "call_1", "get_weather", "Rome: 20 C"),
         ("assistant", "Rome is warmer.", None)],
        {}, id="Anthropic tool_use/tool_result blocks, results re-sorted"),
    pytest.param(
        {"image": "photos/cat.png", "audio": ["clips/purr.wav"], "video": "clips/jump.mp4",
         "messages": [{"role": "user", "content": "<image><audio>Is this cat happy?"},
                      {"role": "assistant", "content": "Yes: it is purring."},
                      {"role": "user", "content": "<video>And now?"},
                      {"role": "assistant", "content": "Still happy, and agile."}]},
        [("user", "<image><audio>Is this cat happy?"), ("assistant", "Yes: it is purring.", None),
         ("user", "<video>And now?"), ("assistant", "Still happy, and agile.", None)],
        {"images": ["photos/cat.png"], "audios": ["clips/purr.wav"], "videos": ["clips/jump.mp4"]},
        id="singular media aliases, a single path wrapped, tags untouched"),
    pytest.param(
        {"tools": json.dumps([WEATHER]), "label": True, "channel": "weather", "source_url": "https://example.org/x",
         "rejected_response": "I cannot check the weather.",
         "messages": [{"role": "user", "content": "Weather in Kyiv?"},
                      {"role": "tool_call", "content": call_json("get_weather", {"city": "Kyiv"}), "loss": False},
                      {"role": "tool_response", "content": "5 C"},
                      {"role": "assistant", "content": "5 C in Kyiv.", "loss_scale": 2.0}]},
        [("user", "Weather in Kyiv?"), ("assistant", "", None), ("call", "call_0", "get_weather", {"city": "Kyiv"}),
         ("tool", "call_0", "get_weather", "5 C"), ("assistant", "5 C in Kyiv.", None)],
        {"meta": {"label": True, "channel": "weather", "source_url": "https://example.org/x",
                  "rejected_response": "I cannot check the weather."},
         "original_messages": {"1": [{"role": "tool_call", "content": call_json("get_weather", {"city": "Kyiv"}),
                                      "loss": False, "loss_scale": None, "name": None, "extra": {}}],
                               "3": [{"role": "assistant", "content": "5 C in Kyiv.", "loss": None, "loss_scale": 2.0,
                                      "name": None, "extra": {}}]}},
        id="loss, loss_scale, rejected_response, label, channel and unknown columns kept in meta"),
    pytest.param(
        {"system_prompt": "Answer in French.", "messages": [{"role": "user", "content": "Hello"},
                                                            {"role": "assistant", "content": "Bonjour"}]},
        [("system", "Answer in French."), ("user", "Hello"), ("assistant", "Bonjour", None)], {},
        id="system_prompt column"),
    pytest.param(
        {"system": "Be brief.", "messages": [{"human": "2+2?", "assistant": "4"}, {"human": "3+3?", "gpt": "6"}]},
        [("system", "Be brief."), ("user", "2+2?"), ("assistant", "4", None), ("user", "3+3?"), ("assistant", "6", None)],
        {}, id="role-less ShareGPT pairs"),
    pytest.param(
        {"tools": json.dumps([WEATHER]), "messages": [
            {"role": "user", "content": "Weather in Accra and Lagos?"},
            {"role": "tool_call", "content": call_json("get_weather", {"city": "Accra"})},
            {"role": "tool_call", "content": call_json("get_weather", {"city": "Lagos"})}]},
        [("user", "Weather in Accra and Lagos?"), ("assistant", "", None),
         ("call", "call_0", "get_weather", {"city": "Accra"}), ("call", "call_1", "get_weather", {"city": "Lagos"})],
        {}, id="call-only row (xlam style), ends on calls"),
    pytest.param(
        {"tools": json.dumps([WEATHER]), "messages": [
            {"role": "user", "content": "Weather in Cairo?"},
            {"role": "tool_call", "content": call_json("get_weather", {"city": "Cairo"})},
            {"role": "assistant", "content": "I asked the weather service for Cairo."}]},
        [("user", "Weather in Cairo?"), ("assistant", "", None), ("call", "call_0", "get_weather", {"city": "Cairo"}),
         ("assistant", "I asked the weather service for Cairo.", None)],
        {}, id="calls followed by an assistant message without results"),
    pytest.param(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is this? "},
                                                   {"type": "image_url", "image_url": {"url": "https://x.org/a.png"}},
                                                   {"type": "image", "image": "b.png"}]},
                      {"role": "assistant", "content": "Two diagrams."}]},
        [("user", "What is this? <image><image>"), ("assistant", "Two diagrams.", None)],
        {"images": ["https://x.org/a.png", "b.png"]}, id="content blocks: text, image_url and image become tags"),
    pytest.param(
        {"tools": json.dumps([WEATHER]), "messages": [
            {"role": "user", "content": "Weather in Hanoi?"},
            {"role": "function-call", "content": call_json("get_weather", {"city": "Hanoi"})},
            {"role": "observations", "content": "31 C"},
            {"role": "assistant", "content": "31 C in Hanoi."}]},
        [("user", "Weather in Hanoi?"), ("assistant", "", None), ("call", "call_0", "get_weather", {"city": "Hanoi"}),
         ("tool", "call_0", "get_weather", "31 C"), ("assistant", "31 C in Hanoi.", None)],
        {}, id="observations role"),
]


@pytest.mark.parametrize("native, expected, checks", ACCEPTED)
def test_accepted_variant(native, expected, checks):
    raw, unified = convert(native)
    td.validate_unified(unified)
    assert summarize(unified) == expected
    if "tools" in checks:
        assert unified["tools"] == checks["tools"]
    for column in ("images", "audios", "videos"):
        assert unified[column] == checks.get(column, [])
    for key, value in checks.get("meta", {}).items():
        assert unified["meta"][key] == value
    if "original_messages" in checks:
        assert unified["meta"]["ms_swift_original"]["messages"] == checks["original_messages"]
    # raw -> unified -> raw is exact
    assert same_json(SOURCE.from_unified(unified), raw)
    # unified -> swift -> unified keeps the conversation (call ids are positional on both sides)
    swift = unified_to_swift(unified)
    assert conversation(convert(swift)[1]) == conversation(unified)


def test_accepted_variants_load_through_every_config(tmp_path, cache_dir):
    natives = [p.values[0] for p in ACCEPTED]
    path = write_jsonl(tmp_path / "variants.jsonl", natives)
    unified = list(td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir))
    assert unified == list(td.load("ms_swift", data_files=path, split="train", streaming=True, cache_dir=cache_dir))
    assert [summarize(r) for r in unified] == [p.values[1] for p in ACCEPTED]
    raw = td.load("ms_swift", "raw", data_files=path, split="train", cache_dir=cache_dir)
    assert all(same_json(SOURCE.from_unified(u), r) for u, r in zip(unified, raw))
    swift = td.load("ms_swift", "swift", data_files=path, split="train", cache_dir=cache_dir)
    assert len(swift) == len(natives)
    for row in swift:  # no nulls anywhere, same JSON types in every row
        assert isinstance(row["tools"], str) and all(isinstance(m["content"], str) for m in row["messages"])


def test_parquet_rows_with_null_padded_structs(tmp_path, cache_dir):
    rows = [
        {"tools": json.dumps([WEATHER]),
         "messages": [{"role": "user", "content": "Weather in Perth?"},
                      {"role": "tool_call", "content": call_json("get_weather", {"city": "Perth"})},
                      {"role": "tool_response", "content": "30 C"},
                      {"role": "assistant", "content": "30 C in Perth."}],
         "images": []},
        {"tools": "[]", "messages": [{"from": "human", "value": "<image>Hi"}, {"from": "gpt", "value": "Hello"}],
         "images": ["a.png"]},
    ]
    path = tmp_path / "agent.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)  # messages become structs {role, content, from, value}
    unified = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    assert summarize(unified[0])[2] == ("call", "call_0", "get_weather", {"city": "Perth"})
    assert summarize(unified[1]) == [("user", "<image>Hi"), ("assistant", "Hello", None)]
    assert unified[1]["images"] == ["a.png"] and unified[0]["subset"] == "agent"

    # Tools as structs: Arrow gives every tool every property of every other tool, as nulls.
    news = {"type": "function", "function": {**BARE_NEWS, "parameters": {
        "type": "object", "properties": {"country": {"type": "string", "enum": ["CL", "PE"]}}}}}
    struct_tools = tmp_path / "struct_tools.parquet"
    pq.write_table(pa.Table.from_pylist([{"tools": [WEATHER, news], "messages": [USER, ANSWER]}]), struct_tools)
    streamed = list(td.load("ms_swift", data_files=str(struct_tools), split="train", streaming=True))
    assert streamed[0]["tools"] == [WEATHER, news]


def test_null_columns_read_alike_from_json_lines_and_parquet(tmp_path, cache_dir):
    """A KTO file whose second row has a null label: Parquet cannot tell a null cell from a missing column, so the
    JSON Lines rows must not keep ``label: None`` in ``meta``/``extra`` where the Parquet rows lack it."""
    rows = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))
    rows = [{**rows[0], "label": True}, {**rows[1], "label": None}]
    lines = write_jsonl(tmp_path / "kto.jsonl", rows)
    parquet = tmp_path / "kto.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    for config, column in (("unified", "meta"), ("raw", "extra")):
        loads = [[r[column] for r in td.load("ms_swift", config, data_files=path, split="train", streaming=streaming,
                                             cache_dir=cache_dir)]
                 for path in (lines, str(parquet)) for streaming in (False, True)]
        assert all(got == [{"label": True}, {}] for got in loads), (config, loads)


def test_null_keys_of_provider_calls_and_blocks_are_absent(tmp_path, cache_dir):
    """The doc's OpenAI and Anthropic rows with the null keys other writers put on calls and blocks (``index``,
    ``cache_control``, ``is_error``) read as the rows without them, as they do from Parquet, where such nulls are
    struct padding: they were kept in ``meta.ms_swift_original`` from JSON only."""
    doc = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))
    openai, anthropic = copy.deepcopy(doc[0]), copy.deepcopy(doc[2])
    openai["messages"][1]["tool_calls"][0]["index"] = None
    anthropic["messages"][0]["content"][1]["cache_control"] = None
    anthropic["messages"][1]["content"][0]["is_error"] = None
    for name, plain, with_nulls in (("openai", doc[0], openai), ("anthropic", doc[2], anthropic)):
        expected = td.load("ms_swift", data_files=write_jsonl(tmp_path / f"{name}.jsonl", [plain]), split="train",
                           cache_dir=cache_dir)[0]
        parquet = tmp_path / f"{name}_nulls.parquet"
        pq.write_table(pa.Table.from_pylist([with_nulls]), parquet)
        for path in (write_jsonl(tmp_path / f"{name}_nulls.jsonl", [with_nulls]), str(parquet)):
            for streaming in (False, True):
                row = next(iter(td.load("ms_swift", data_files=path, split="train", streaming=streaming,
                                        cache_dir=cache_dir)))
                assert (row["messages"], row["meta"]) == (expected["messages"], expected["meta"]), (path, streaming)


def test_json_array_files_and_one_split_per_data_files_key(tmp_path, cache_dir):
    chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    array = tmp_path / "chats.json"
    array.write_text(json.dumps([chat, chat]))
    lines = write_jsonl(tmp_path / "held_out.jsonl", [chat])
    splits = td.load("ms_swift", data_files={"train": str(array), "test": lines}, cache_dir=cache_dir)
    assert {name: len(ds) for name, ds in splits.items()} == {"train": 2, "test": 1}
    assert [r["id"] for r in splits["train"]] == ["ms_swift/chats/0", "ms_swift/chats/1"]
    assert splits["test"][0]["subset"] == "held_out"


# --------------------------------------------------------------------------------------------------
# Rejected input: every row ms-swift would drop is a typed error naming the field
# --------------------------------------------------------------------------------------------------

USER = {"role": "user", "content": "Weather in Oslo?"}
CALL = {"role": "tool_call", "content": call_json("get_weather", {"city": "Oslo"})}
RESULT = {"role": "tool_response", "content": "2 C"}
ANSWER = {"role": "assistant", "content": "2 C in Oslo."}

CALLS_A_B = {"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "id": "a", "function": {"name": "f", "arguments": "{}"}},
    {"type": "function", "id": "b", "function": {"name": "g", "arguments": "{}"}}]}
REJECTED = [
    pytest.param({"messages": [USER, {"role": "function", "content": "2 C"}]},
                 InvalidValueError, "messages[1].role", "not one ms-swift accepts", id="OpenAI legacy function role"),
    pytest.param({"messages": [USER, {"role": "ipython", "content": "2 C"}]},
                 InvalidValueError, "messages[1].role", "'ipython'", id="ipython role"),
    pytest.param({"messages": [USER, {"role": "tool-call", "content": CALL["content"]}, RESULT, ANSWER]},
                 InvalidValueError, "messages[1].role", "'tool-call'",
                 id="tool-call role (ms-swift reads hyphens only in function-call/-response, observation)"),
    pytest.param({"messages": [USER, CALL, {"role": "tool-response", "content": "2 C"}, ANSWER]},
                 InvalidValueError, "messages[2].role", "'tool-response'", id="tool-response role"),
    pytest.param({"messages": [{"content": "no role"}]}, MissingFieldError, "messages[0].role", "no role",
                 id="message without role"),
    pytest.param({"messages": [{"role": "user", "content": None}, ANSWER]},
                 MissingFieldError, "messages[0].content", "null", id="null content"),
    # ms-swift tests loss for truth: the text "false" trains the message it was meant to mask
    pytest.param({"messages": [USER, {"role": "assistant", "content": "2 C in Oslo.", "loss": "false"}]},
                 InvalidValueError, "messages[1].loss", "loss is text ('false')", id="loss as the text false"),
    pytest.param({"messages": [USER, {"role": "assistant"}]},
                 MissingFieldError, "messages[1].content", "missing", id="message without content"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"arguments": {"city": "Oslo"}})}]},
                 MissingFieldError, "messages[1].content.name", "no name", id="call without name"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"name": None, "arguments": {}})}]},
                 InvalidValueError, "messages[1].content.name", "non-empty text, not null",
                 id="call with a null name (ms-swift keeps the row)"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"name": 7, "arguments": {}})}]},
                 InvalidValueError, "messages[1].content.name", "non-empty text, not number (",
                 id="call with a numeric name, named by its JSON type"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "", "arguments": "{}"}}]}]},
                 InvalidValueError, "messages[1].tool_calls[0].function.name", 'non-empty text, not ""',
                 id="OpenAI call with an empty name"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"arguments": "{}"}}]}]},
                 MissingFieldError, "messages[1].tool_calls[0].function.name", "no name",
                 id="OpenAI call without name"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"name": "get_weather"})}]},
                 MissingFieldError, "messages[1].content.arguments", "neither arguments nor parameters",
                 id="call without arguments"),
    # (was "neither arguments nor parameters", as if the key were missing)
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"name": "f", "arguments": None})}]},
                 InvalidValueError, "messages[1].content.arguments", "arguments are null, not an object",
                 id="call with null arguments"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "null"}}]}]},
                 InvalidValueError, "messages[1].tool_calls[0].function.arguments", "arguments are null",
                 id="OpenAI call whose arguments are the text null"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"name": "get_weather", "arguments": "city=Oslo"})}]},
                 InvalidJsonError, "messages[1].content.arguments", "neither JSON nor a Python literal",
                 id="unparseable arguments"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": "get_weather(city='Oslo')"}]},
                 InvalidJsonError, "messages[1].content", "neither JSON nor a Python literal", id="call as Python code"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps({"name": "get_weather", "arguments": ["Oslo"]})}]},
                 InvalidValueError, "messages[1].content.arguments", "must be a JSON object", id="arguments not an object"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": "{'name': 'f', 'arguments': {'ids': {1, 2}}}"}]},
                 InvalidValueError, "messages[1].content", "JSON cannot hold", id="Python literal with a set"),
    pytest.param({"messages": [USER, {"role": "tool_call", "content": json.dumps([
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Bergen"}}])}, RESULT, RESULT, ANSWER]}, InvalidValueError, "messages[1].content", "consecutive tool_call messages",
        id="several calls in one tool_call message"),
    pytest.param({"messages": [USER, CALL, CALL, RESULT, ANSWER]},
                 InvalidValueError, "messages[3]", "2 tool calls followed by 1 result;", id="fewer results than calls"),
    pytest.param({"messages": [USER, CALL, RESULT, RESULT, ANSWER]},
                 InvalidValueError, "messages[2]", "1 tool call followed by 2 results", id="more results than calls"),
    pytest.param({"messages": [RESULT, ANSWER]}, InvalidValueError, "messages[0].role", "without a tool_call",
                 id="tool result first"),
    pytest.param({"messages": [USER, ANSWER, {"role": "tool", "content": "late"}]}, InvalidValueError,
                 "messages[2].role", "without a tool_call", id="tool result after an answer"),
    pytest.param({"messages": [USER, CALL, RESULT, {"role": "user", "content": "And Bergen?"}, ANSWER]},
                 InvalidValueError, "messages[3].role", "right after tool results", id="user message after results"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "2 C"},
                                     {"type": "text", "text": "And Bergen?"}]}, ANSWER]},
        InvalidValueError, "messages[2].role", "right after tool results", id="Anthropic text after results"),
    # ms-swift removes OpenAI's legacy function_call with the keys it does not know, and trains the text alone
    pytest.param({"messages": [USER, {"role": "assistant", "content": "Let me check.", "function_call": {
        "name": "get_weather", "arguments": '{"city": "Oslo"}'}}, ANSWER]},
        InvalidValueError, "messages[1].function_call", "legacy function_call", id="OpenAI legacy function_call"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": None, "function_call": {
        "name": "get_weather", "arguments": '{"city": "Oslo"}'}}, ANSWER]},
        InvalidValueError, "messages[1].function_call", "legacy function_call",
        id="OpenAI legacy function_call, null content"),
    pytest.param({"messages": [USER, {"role": "system", "content": "late system"}, ANSWER]},
                 InvalidValueError, "messages[1].role", "only allowed first", id="system not first"),
    pytest.param({"messages": []}, MissingFieldError, "messages", "empty", id="empty messages"),
    pytest.param({"messages": "[{'role': 'user', 'content': "}, InvalidJsonError, "messages", "text is neither JSON",
                 id="truncated messages text"),
    pytest.param({"query": "hi", "response": "hello"}, MissingFieldError, "messages", "messages column",
                 id="no messages column"),
    pytest.param({"messages": [USER, ANSWER], "tools": "get_weather: weather for a city"},
                 InvalidJsonError, "tools[0]", "tool is neither JSON", id="plain-text tools"),
    pytest.param({"messages": [USER, ANSWER], "tools": "[{'name': 'f', 'description': 'd'}]"},
                 InvalidValueError, "tools[0]", "a tools column that is not JSON", id="tools as a Python literal"),
    pytest.param({"messages": [USER, ANSWER], "tools": ['[{"name": "f", "description": "d"}]']},
                 InvalidValueError, "tools[0]", "not the whole list as one", id="tools list as one JSON text entry"),
    pytest.param({"messages": [USER, ANSWER], "tools": [42]}, InvalidValueError, "tools[0]", "must be a JSON object",
                 id="tool that is not an object"),
    pytest.param({"messages": [USER, ANSWER], "tools": [{"type": "function", "function": {"description": "x"}}]},
                 MissingFieldError, "tools[0].function.name", "no name", id="tool without name"),
    # ms-swift unwraps {"type": "function", "function": {...}} only with both keys: without "type" it has no name
    pytest.param({"messages": [USER, ANSWER], "tools": [{"function": {"name": "f", "description": "x"}}]},
                 MissingFieldError, "tools[0].type", "'function' object but no 'type'",
                 id="tool function without type"),
    pytest.param({"messages": [USER, ANSWER], "tools": [{"name": "f", "parameters": "[1, 2]"}]},
                 InvalidValueError, "tools[0].parameters", "JSON Schema object", id="tool parameters not an object"),
    pytest.param({"messages": [USER, ANSWER], "rejected_response": None},
                 InvalidValueError, "rejected_response", "null", id="null rejected_response"),
    pytest.param({"messages": [USER, ANSWER], "rejected_response": "2 C in Oslo."},
                 InvalidValueError, "rejected_response", "equals the chosen", id="rejected_response equal to chosen"),
    pytest.param({"messages": [USER, ANSWER], "rejected_response": [{"role": "user", "content": "x"}]},
                 InvalidValueError, "rejected_response[0]", "user messages", id="rejected_response with a user turn"),
    pytest.param({"messages": [USER, CALL, RESULT, ANSWER], "rejected_response": "2 C in Oslo."},
                 InvalidValueError, "rejected_response", "equals the chosen",
                 id="rejected_response text equal to the last message after calls"),
    pytest.param({"messages": [USER, ANSWER], "rejected_response": [{"role": "assistant", "content": "2 C in Oslo."}]},
                 InvalidValueError, "rejected_response", "equals the chosen", id="rejected_response list equal to chosen"),
    pytest.param({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "a.png"}}]}, ANSWER],
                  "images": ["b.png"]},
                 InvalidValueError, "images", "content blocks and column",
                 id="block images mixed with the images column"),
    pytest.param({"messages": [{"role": "user", "content": [{"type": "input_file", "file_id": "f1"}]}, ANSWER]},
                 InvalidValueError, "messages[0].content[0].type", "'input_file'", id="unsupported content block"),
    pytest.param({"messages": [USER, ANSWER], "images": [{"bytes": b"\x89PNG", "path": None}]},
                 InvalidValueError, "images[0]", "embedded bytes", id="embedded image bytes"),
    pytest.param({"messages": [USER, ANSWER], "images": ["a.png", None]},
                 InvalidValueError, "images[1]", "(strings), got null", id="null image entry"),
    pytest.param({"messages": [USER, ANSWER], "audios": [7]},
                 InvalidValueError, "audios[0]", "(strings), got number", id="audio entry that is a number"),
    pytest.param({"messages": [USER, ANSWER], "videos": [["f1.jpg", "f2.jpg"]]},
                 ConversionError, "videos[0]", "list of frames", id="video as frame list has no unified form"),
    # ms-swift keeps a null tool and its template fails on it (given as a list in JSON Lines, the whole load fails)
    pytest.param({"messages": [USER, ANSWER], "tools": [{"name": "f", "description": "d"}, None]},
                 InvalidValueError, "tools[1]", "a tool is null", id="null tool in a list"),
    pytest.param({"messages": [USER, ANSWER], "tools": '[null, {"name": "f", "description": "d"}]'},
                 InvalidValueError, "tools[0]", "a tool is null", id="null tool in JSON text"),
    # ms-swift reads empty text as one tool, [""], which its template cannot parse: the row is not trained
    pytest.param({"messages": [USER, ANSWER], "tools": ""},
                 InvalidValueError, "tools", "tools is empty text", id="tools as empty text"),
    pytest.param({"messages": [USER, ANSWER], "tools": " \n"},
                 InvalidValueError, "tools", "tools is empty text", id="tools as blank text"),
    # ms-swift wraps a single object in a list for images only: an audio or video object is read as its keys
    pytest.param({"messages": [{"role": "user", "content": "<video>q"}, ANSWER], "videos": {"path": "v.mp4"}},
                 InvalidValueError, "videos", "single object", id="video given as one object"),
    pytest.param({"messages": [{"role": "user", "content": "<audio>q"}, ANSWER], "audios": {"path": "a.wav"}},
                 InvalidValueError, "audios", "single object", id="audio given as one object"),
    pytest.param({"messages": [USER, ANSWER], "audios": 3}, InvalidValueError, "audios", "must be a list of paths",
                 id="audios given as a number"),
    # ms-swift keeps an empty media path and fails loading it (an image "" is no file, or the working directory)
    pytest.param({"messages": [USER, ANSWER], "images": ""}, InvalidValueError, "images", "empty path",
                 id="images given as empty text"),
    pytest.param({"messages": [USER, ANSWER], "images": ["a.png", " "]}, InvalidValueError, "images[1]", "empty path",
                 id="blank image path"),
    pytest.param({"messages": [USER, ANSWER], "audios": [""]}, InvalidValueError, "audios[0]", "empty path",
                 id="empty audio path"),
    pytest.param({"messages": [USER, ANSWER], "videos": [["f1.jpg", ""]]}, InvalidValueError, "videos[0][1]",
                 "empty path", id="empty video frame path"),
    pytest.param({"messages": [USER, ANSWER], "ms_swift_original": {}},
                 InvalidValueError, "ms_swift_original", "reserved", id="reserved column name"),
    # ids that contradict the calls': ms-swift pairs such results by position, the second 'a' with call 'b'
    pytest.param({"messages": [USER, CALLS_A_B, {"role": "tool", "tool_call_id": "a", "content": "ra"},
                               {"role": "tool", "tool_call_id": "a", "content": "r2"}, ANSWER]},
                 InvalidValueError, "messages[3].tool_call_id", "answers a call already answered",
                 id="OpenAI call answered twice"),
    pytest.param({"messages": [USER, CALLS_A_B, {"role": "tool", "tool_call_id": "zz", "content": "ra"},
                               {"role": "tool", "tool_call_id": "b", "content": "rb"}, ANSWER]},
                 InvalidValueError, "messages[2].tool_call_id", "names no call of its turn",
                 id="OpenAI result naming no call"),
    # ms-swift re-sorts OpenAI results by id only when their role is written "role": "tool" (or "tool_response"):
    # with an alias or under "from" it pairs them by position, the result for 'b' with call 'a'
    pytest.param({"messages": [USER, CALLS_A_B, {"role": "observation", "tool_call_id": "b", "content": "rb"},
                               {"role": "observation", "tool_call_id": "a", "content": "ra"}, ANSWER]},
                 InvalidValueError, "messages[2].tool_call_id", "re-sorts results by id only when",
                 id="OpenAI results in other order under an alias role"),
    pytest.param({"messages": [USER, CALLS_A_B, {"from": "tool", "tool_call_id": "b", "value": "rb"},
                               {"from": "tool", "tool_call_id": "a", "value": "ra"}, ANSWER]},
                 InvalidValueError, "messages[2].tool_call_id", "re-sorts results by id only when",
                 id="OpenAI results in other order under from"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "a", "name": "f", "input": {}}, {"type": "tool_use", "id": "b", "name": "g", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "rb"},
                                     {"type": "tool_result", "tool_use_id": "b", "content": "rb2"}]}, ANSWER]},
        InvalidValueError, "messages[2].content[1].tool_use_id", "answers a call already answered",
        id="Anthropic call answered twice"),
    # ms-swift reads each rejected message's role, and the content of a one-message rejected response it compares
    pytest.param({"messages": [USER, ANSWER], "rejected_response": [{"content": "Rainy"}]},
                 InvalidValueError, "rejected_response[0].role", "has no role", id="rejected message without role"),
    pytest.param({"messages": [USER, ANSWER], "rejected_response": [{"role": "assistant"}]},
                 InvalidValueError, "rejected_response[0].content", "has no content",
                 id="one rejected message without content"),
]


# ms-swift reads messages from a conversations or conversation column as from messages: errors name the column the
# file has, down to the part of a message (conversations[1].content.name).
MESSAGES_COLUMN_NAMES = pytest.mark.parametrize("column", ["messages", "conversations", "conversation"])


def under_column(native: dict, field: str, column: str) -> tuple[dict, str]:
    """``native`` with its messages under ``column``, and ``field`` as an error about it names it there."""
    if "messages" not in native:
        return native, field
    native = {(column if key == "messages" else key): value for key, value in native.items()}
    if field == "messages" or field.startswith(("messages[", "messages.")):
        field = column + field[len("messages"):]
    return native, field


@MESSAGES_COLUMN_NAMES
@pytest.mark.parametrize("native, error, field, match", REJECTED)
def test_rejected_variant(native, error, field, match, column):
    native, field = under_column(native, field, column)
    assert_refused(native, error, field, match)



def under_from_and_value(native: dict, field: str):
    """``native`` with its messages written under ``from``/``value`` (ms-swift's ShareGPT keys), and ``field`` as
    an error about one of them names it there; None for a row whose messages are not all role/content objects
    without Anthropic blocks (calls and Anthropic blocks under those keys are read otherwise)."""
    def anthropic(content) -> bool:
        return isinstance(content, list) and any(
            isinstance(b, dict) and (b.get("type") in ("tool_use", "tool_result") or "source" in b) for b in content)

    messages = native.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and set(m) <= {"role", "content"} and not anthropic(m.get("content"))
            for m in messages):
        return None
    respelled = [{("from" if key == "role" else "value"): value for key, value in m.items()} for m in messages]
    # (a message's missing role or content is named as the message spells its other key: from, value)
    match = re.match(r"messages\[(\d+)\]\.(role|content)\b", field)
    if match is not None:
        field = field[:match.start(2)] + ("from" if match.group(2) == "role" else "value") + field[match.end(2):]
    return {**native, "messages": respelled}, field


# The rejected rows whose messages are plain role/content objects, written under from/value instead.
FROM_VALUE_REJECTED = [pytest.param(*under_from_and_value(p.values[0], p.values[2]), *p.values[1:2], p.values[3],
                                    id=p.id)
                       for p in REJECTED if under_from_and_value(p.values[0], p.values[2]) is not None]


@pytest.mark.parametrize("native, field, error, match", FROM_VALUE_REJECTED)
def test_errors_name_the_from_and_value_keys_a_message_is_written_with(native, field, error, match):
    assert_refused(native, error, field, match)


@pytest.mark.parametrize("listed", [False, True], ids=["text", "list-of-texts"])
def test_a_tools_column_of_binary_type_is_refused_naming_the_column(tmp_path, listed):
    """Parquet written without the UTF-8 annotation gives the tools text as bytes: it was refused as
    "tools[0]: value is not JSON-serializable: Type is not JSON serializable: bytes" (also each text of a list)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "binary_tools.parquet"
    tool = {"name": "f", "description": "d"}
    tools = [json.dumps(tool).encode()] if listed else json.dumps([tool]).encode()
    pq.write_table(pa.Table.from_pylist([{"messages": [USER, ANSWER], "tools": tools}]), path)
    field = "tools[0]" if listed else "tools"
    for streaming in (False, True):
        with pytest.raises(td.JsonValueError, match=re.escape(f"{field} is binary data")) as info:
            list(td.load("ms_swift", data_files=str(path), split="train", streaming=streaming,
                         cache_dir=str(tmp_path / "cache")))
        assert (info.value.row, info.value.field) == (0, field)


def test_errors_name_the_from_and_value_keys_when_loading(tmp_path, cache_dir):
    written = [p for p in FROM_VALUE_REJECTED if p.id != "embedded image bytes"]  # (bytes: not in a JSON file)
    rows = [{"conversations": p.values[0]["messages"], **{k: v for k, v in p.values[0].items() if k != "messages"}}
            for p in written]
    expected = [re.sub(r"^messages\b", "conversations", p.values[1]) for p in written]
    assert any(".from" in field for field in expected) and any(".value" in field for field in expected)
    path = write_jsonl(tmp_path / "sharegpt.jsonl", [*rows, {"conversations": [{"from": "human", "value": "Hi"},
                                                                                {"from": "gpt", "value": "Hello"}]}])
    assert_skipped_fields(path, cache_dir, expected)


MEDIA_KINDS = ("images", "audios", "videos")
# The rejected rows whose error is about a media column, the media given under that one column.
MEDIA_REJECTED = [p for p in REJECTED if p.values[2].split("[")[0] in MEDIA_KINDS
                  and [k for k in p.values[0] if k in MEDIA_KINDS] == [p.values[2].split("[")[0]]]


def under_media_alias(native: dict, field: str, spelling) -> tuple[dict, str]:
    """``native`` with its media column under another name ms-swift reads it from (``spelling("images")``), and
    ``field`` as an error about that column names it there."""
    kind = field.split("[")[0]
    alias = spelling(kind)
    return {(alias if key == kind else key): value for key, value in native.items()}, alias + field[len(kind):]


MEDIA_ALIASES = pytest.mark.parametrize("spelling", [lambda kind: kind[:-1], str.capitalize],
                                        ids=["singular (image)", "capitalized (Images)"])


def assert_text_names_column(message: str, field: str) -> None:
    """An error about a media column (``field``, as the file names it) names that column in its text as the file
    spells it (``image``, ``Images``), never by the name it is read as (``images``), which the file does not have."""
    column = field.split("[")[0]
    kind = column.lower() if column.lower().endswith("s") else column.lower() + "s"
    assert f"column {column!r}" in message
    assert column == kind or not re.search(rf"\b{kind}\b", message), message


@pytest.mark.parametrize("spelling", [str, lambda kind: kind[:-1], str.capitalize],
                         ids=["as named (images)", "singular (image)", "capitalized (Images)"])
@pytest.mark.parametrize("native, error, field, match", MEDIA_REJECTED)
def test_media_errors_name_the_files_media_column(native, error, field, match, spelling):
    native, field = under_media_alias(native, field, spelling)
    assert_text_names_column(assert_refused(native, error, field, match).message, field)


@MEDIA_ALIASES
def test_media_errors_name_the_files_media_column_when_loading(tmp_path, cache_dir, spelling):
    written = [p for p in MEDIA_REJECTED if p.id != "embedded image bytes"]  # (bytes: not in a JSON file)
    rows, expected = zip(*(under_media_alias(p.values[0], p.values[2], spelling) for p in written))
    path = write_jsonl(tmp_path / "media.jsonl", [*rows, {"messages": [USER, ANSWER]}])
    for skipped in assert_skipped_fields(path, cache_dir, expected):
        assert_text_names_column(skipped["message"], skipped["field"])


def _openai_call(name, call_id=None, arguments="{}"):
    call = {"type": "function", "function": {"arguments": arguments}}
    if name is not None:
        call["function"]["name"] = name
    if call_id is not None:
        call["id"] = call_id
    return call


# Rows whose raw messages are more than the file's (OpenAI calls, Anthropic blocks, the system column, ShareGPT
# pairs): errors found in the raw messages still name the file's message, and the part of it that is wrong.
FILE_FIELDS = [
    pytest.param({"messages": [USER, {"role": "assistant", "content": "x", "tool_calls": [
        _openai_call("f", "a"), _openai_call("g", "b")]}, {"role": "tool", "tool_call_id": "a", "content": "r"}, ANSWER]},
        InvalidValueError, "messages[2]", "2 tool calls followed by 1 result;", id="OpenAI calls, too few results"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": "x", "tool_calls": [
        _openai_call("f"), _openai_call(None)]}, {"role": "tool", "content": "r"}, {"role": "tool", "content": "s"}]},
        MissingFieldError, "messages[1].tool_calls[1].function.name", "no name", id="OpenAI call without a name"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": "x", "tool_calls": [
        {"name": "f", "arguments": "city=Oslo"}]}, {"role": "tool", "content": "r"}]},
        InvalidJsonError, "messages[1].tool_calls[0].arguments", "neither JSON", id="flat OpenAI call, bad arguments"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": "x", "tool_calls": [_openai_call("f")]},
                               {"role": "tool", "content": "r"}, {"role": "system", "content": "late"}]},
                 InvalidValueError, "messages[3].role", "only allowed first", id="OpenAI row, late system message"),
    pytest.param({"system": "Be brief.", "messages": [USER, CALL, CALL, RESULT, ANSWER]},
                 InvalidValueError, "messages[3]", "2 tool calls followed by 1 result;",
                 id="system column, too few results"),
    pytest.param({"system": "Be brief.", "messages": [{"role": "tool_call", "content": CALL["content"]}, RESULT],
                  "images": ["a.png"]},
                 InvalidValueError, "messages[0].content", "fewer media tags", id="system column, tags before a call"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "t1", "input": {"city": "Oslo"}}]}]},
        MissingFieldError, "messages[1].content[1].name", "no name", id="Anthropic tool_use without a name"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "t1", "name": "f", "input": "Oslo"}]}]},
        InvalidJsonError, "messages[1].content[1].input", "neither JSON", id="Anthropic tool_use, input not an object"),
    pytest.param({"messages": [USER, {"role": "assistant", "content": "Hi."}, {"role": "user", "content": [
        {"type": "text", "text": "Here: "}, {"type": "tool_result", "tool_use_id": "t9", "content": "r"}]}]},
        InvalidValueError, "messages[2].content[1].type", "without a tool_call", id="Anthropic result without a call"),
    pytest.param({"messages": [{"human": "Hi", "gpt": "Hello"}, {"human": "Again", "gpt": ["not", "text"]}]},
                 InvalidValueError, "messages[1].gpt", "must be a string", id="ShareGPT pair, answer not text"),
]


@MESSAGES_COLUMN_NAMES
@pytest.mark.parametrize("native, error, field, match", FILE_FIELDS)
def test_errors_in_expanded_messages_name_the_files_message(native, error, field, match, column):
    native, field = under_column(native, field, column)
    assert_refused(native, error, field, match)


def with_user_after_results(row: dict) -> dict:
    """A doc row with the user speaking again right after its tool results: as a text block after the
    tool_result (Anthropic), or as a user message before the final answer."""
    row = copy.deepcopy(row)
    messages = row["messages"]
    follow_up = "And tomorrow?"
    for k, m in enumerate(messages):
        if isinstance(m["content"], list) and m["content"][-1].get("type") == "tool_result":
            m["content"].append({"type": "text", "text": follow_up})
            return row
        if m["role"] in ("tool", "tool_response") and messages[k + 1]["role"] not in ("tool", "tool_response"):
            messages.insert(k + 1, {"role": "user", "content": follow_up})
            return row
    raise AssertionError("no tool results in the row")


def test_a_user_message_right_after_tool_results_is_refused_as_ms_swift_cannot_encode_it(tmp_path, cache_dir):
    """ms-swift's template pairs each user or result turn with the assistant turn after it: results followed by
    a user message make it pair the results with that user message, which fails (``AssertionError:
    response_role: "user"``), and ``swift sft`` drops the row. Read from a file, such a row is an error naming
    the user message (counted with on_error="skip"); the swift writer refuses to write one."""
    en = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))
    custom = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))
    parallel, anthropic = en[0], custom[2]  # parallel calls, plain rows; an Anthropic tool_use/tool_result row
    for native, field in [(with_user_after_results(parallel), "messages[5].role"),
                          (with_user_after_results(anthropic), "messages[1].role")]:
        with pytest.raises(InvalidValueError, match="right after tool results") as info:
            convert(native)
        assert info.value.field == field
    path = write_jsonl(tmp_path / "follow_up.jsonl", [parallel, with_user_after_results(parallel), anthropic,
                                                      with_user_after_results(anthropic)])
    report = td.SkipReport(keep_all=True)
    rows = td.load("ms_swift", data_files=path, split="train", on_error="skip", report=report, cache_dir=cache_dir)
    assert [r["id"] for r in rows] == ["ms_swift/follow_up/0", "ms_swift/follow_up/2"]
    assert [(r["row"], r["reason"]) for r in report.rows] == [(1, "InvalidValueError:messages[5].role"),
                                                              (3, "InvalidValueError:messages[1].role")]

    unified = copy.deepcopy(rows[0])  # user, 2 calls, 2 results, answer
    unified["messages"].insert(4, message("user", "And tomorrow?"))
    with pytest.raises(ConversionError, match="right after tool results") as info:
        unified_to_swift(unified)
    assert info.value.field == "messages[4].role"
    del unified["messages"][5:]  # a row ending on that user message fails in ms-swift the same way
    with pytest.raises(ConversionError, match="right after tool results"):
        unified_to_swift(unified)
    assert unified_to_swift(rows[0])["messages"] == with_result_names(parallel["messages"])


def respelled(message: dict, role_key: str = "role", role: str = None, content_key: str = "content") -> dict:
    """``message`` with its role and content under other (ms-swift alias) keys, its other keys kept."""
    out = {role_key: message["role"] if role is None else role, content_key: message["content"]}
    out.update((k, v) for k, v in message.items() if k not in ("role", "content"))
    return out


def test_provider_calls_spelled_with_aliases_ms_swift_does_not_convert_are_refused(tmp_path, cache_dir):
    """ms-swift converts OpenAI ``tool_calls`` and Anthropic blocks before it reads key and role aliases: it
    converts ``tool_calls`` only on ``"role": "assistant"`` messages, reading their text from ``content``, and
    Anthropic blocks only under ``content``. Elsewhere it drops the calls (``"role": "gpt"``, ``"from"``), drops the
    text beside them (``"value"``), or trains on ``<tool_use>``/``<tool_result>`` as literal text. Such rows are an
    error naming the field, not calls ms-swift never sees; the doc rows as written still read."""
    custom = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))
    openai, anthropic = custom[0], custom[2]
    call_turn = openai["messages"][1]
    with_text = {**call_turn, "content": "Let me check."}
    variants = [
        ({"messages": [openai["messages"][0], respelled(call_turn, role="gpt"), *openai["messages"][2:]]},
         "messages[1].tool_calls"),
        ({"messages": [respelled(m, "from", content_key="value") for m in openai["messages"]]}, "messages[1].tool_calls"),
        # calls on a message of another role: ms-swift converts them on "role": "assistant" only
        ({"messages": [{**openai["messages"][0], "tool_calls": call_turn["tool_calls"]}, *openai["messages"][1:]]},
         "messages[0].tool_calls"),
        ({"messages": [openai["messages"][0], respelled(with_text, content_key="value"), *openai["messages"][2:]]},
         "messages[1].value"),
        ({"messages": [respelled(m, content_key="value") for m in anthropic["messages"]]}, "messages[0].value"),
        # the from key: ms-swift's Anthropic conversion reads message["role"] for text beside the blocks (KeyError)
        ({"messages": [respelled(m, "from") for m in anthropic["messages"]]}, "messages[0].from"),
        # a row with OpenAI calls is converted as OpenAI only: its Anthropic blocks are trained on as text
        ({"messages": openai["messages"] + anthropic["messages"]}, "messages[3].content"),
    ]
    for native, field in variants:
        with pytest.raises(InvalidValueError, match="ms-swift") as info:
            convert(native)
        assert info.value.field == field, native
    path = write_jsonl(tmp_path / "aliases.jsonl", [openai, anthropic] + [native for native, _ in variants])
    report = td.SkipReport(keep_all=True)
    rows = td.load("ms_swift", "raw", data_files=path, split="train", on_error="skip", report=report,
                   cache_dir=cache_dir)
    assert len(rows) == 2 and [r["row"] for r in report.rows] == [2, 3, 4, 5, 6, 7, 8]
    assert [m["role"] for m in rows[0]["messages"]] == ["user", "tool_call", "tool"]


def test_a_list_content_with_an_element_that_is_not_an_object_is_refused_where_ms_swift_drops_the_row(
        tmp_path, cache_dir):
    """Without OpenAI ``tool_calls``, ms-swift looks for Anthropic blocks by reading ``type`` from the elements of
    every list content: a tool result given as ``[10, 72]`` fails there and ms-swift drops the row (checked with
    ms-swift 4.6 in ``test_ms_swift_real.py``). It is an error naming the element, not the text ``"[10, 72]"``; a
    result that is a list of objects, or any list in a row converted as OpenAI, still reads."""
    doc = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))[0]

    def with_result(content):
        row = copy.deepcopy(doc)
        row["messages"][3]["content"] = content
        return row

    for content, field in (([10, 72], "messages[3].content[0]"), (["Beijing", {"aqi": 10}], "messages[3].content[0]"),
                           ([{"aqi": 10}, 72], "messages[3].content[1]")):
        with pytest.raises(InvalidValueError, match="ms-swift") as info:
            convert(with_result(content))
        assert info.value.field == field
    _, unified = convert(with_result([{"aqi": 10}]))
    assert unified["messages"][2]["content"] == '[{"aqi": 10}]'

    path = write_jsonl(tmp_path / "results.jsonl", [doc, with_result([10, 72]), with_result([{"aqi": 10}])])
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        rows = list(td.load("ms_swift", data_files=path, split="train", on_error="skip", report=report,
                            streaming=streaming, cache_dir=cache_dir))
        assert [r["messages"][2]["content"] for r in rows] == [doc["messages"][3]["content"], '[{"aqi": 10}]']
        assert [(r["row"], r["field"]) for r in report.rows] == [(1, "messages[3].content[0]")]


def anthropic_variants() -> list[tuple[dict, str | None]]:
    """The real Anthropic doc row (image, tool_use, and a tool_result of image and text blocks), changed one block
    at a time: (row, the field refused, or None for a row ms-swift converts)."""
    doc = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))[3]

    def changed(edit) -> dict:
        row = copy.deepcopy(doc)
        edit(row["messages"])
        return row

    url_image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    return [
        (doc, None),
        (changed(lambda m: m[0]["content"].__setitem__(1, url_image)), None),
        (changed(lambda m: m[0]["content"].append({"type": "image_url", "image_url": {"url": "a.png"}})),
         "messages[0].content[2].type"),
        (changed(lambda m: m[0]["content"].__setitem__(1, {"type": "image", "image": "a.png"})),
         "messages[0].content[1].source"),
        (changed(lambda m: m[0]["content"][1]["source"].pop("media_type")), "messages[0].content[1].source"),
        (changed(lambda m: m[2]["content"][0]["content"].append({"a": 1})),
         "messages[2].content[0].content[2].type"),
        (changed(lambda m: m[2]["content"][0]["content"].append({"type": "tool_use", "name": "f", "input": {}})),
         "messages[2].content[0].content[2].type"),
        (changed(lambda m: m[2]["content"][0].__setitem__("content", "A sunny beach.")), None),
    ]


def test_blocks_ms_swift_cannot_convert_in_an_anthropic_row_are_refused(tmp_path, cache_dir):
    """A row with tool_use/tool_result (or Anthropic image) blocks is converted by ms-swift as Anthropic, block by
    block: text, image (with a base64 or URL source), tool_use and tool_result only, and a tool_result's list of
    text and image blocks only. Any other block makes ms-swift drop the row (checked with ms-swift 4.6 in
    ``test_ms_swift_real.py``): refused here naming the block, the other rows read."""
    variants = anthropic_variants()
    for native, field in variants:
        if field is None:
            convert(native)
            continue
        with pytest.raises(InvalidValueError, match="ms-swift") as info:
            convert(native)
        assert info.value.field == field
    path = write_jsonl(tmp_path / "anthropic.jsonl", [native for native, _ in variants])
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        rows = list(td.load("ms_swift", data_files=path, split="train", on_error="skip", report=report,
                            streaming=streaming, cache_dir=cache_dir))
        assert len(rows) == sum(field is None for _, field in variants)
        assert [(r["row"], r["field"]) for r in report.rows] == [
            (k, field) for k, (_, field) in enumerate(variants) if field is not None]


def test_a_messages_column_named_in_other_case_is_refused_as_ms_swift_drops_the_file_rows(tmp_path, cache_dir):
    """ms-swift picks its messages preprocessor only for a column named exactly messages, conversations or
    conversation; with ``Messages`` it reads the file as query/response rows and drops every row (checked with
    ms-swift 4.6 in ``test_ms_swift_real.py``). Such a row is a ``MissingFieldError`` saying so, while the other
    columns (``System``, ``Images``) are still found in any case, as ms-swift renames them."""
    doc = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))[1]
    renamed = [{("Messages" if k == "messages" else k): v for k, v in doc.items()},
               {("CONVERSATIONS" if k == "messages" else k): v for k, v in doc.items()}]
    for native, column in zip(renamed, ("Messages", "CONVERSATIONS")):
        with pytest.raises(MissingFieldError, match=f"'{column}'.*exact") as info:
            convert(native)
        assert info.value.field == "messages"
    other_case = {"messages": doc["messages"], "tools": doc["tools"], "System": "Be brief.", "Images": doc["images"]}
    raw, unified = convert(other_case)
    assert raw["images"] == doc["images"] and unified["messages"][0] == {"role": "system", "content": "Be brief."}

    path = write_jsonl(tmp_path / "cased.jsonl", [doc, *renamed, other_case])
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        rows = list(td.load("ms_swift", data_files=path, split="train", on_error="skip", report=report,
                            streaming=streaming, cache_dir=cache_dir))
        assert len(rows) == 2 and [(r["row"], r["field"]) for r in report.rows] == [(1, "messages"), (2, "messages")]


@MESSAGES_COLUMN_NAMES
def test_read_errors_name_the_files_message_when_loading_and_validating(tmp_path, cache_dir, column):
    """The same fields in a load's skip report (map-style and streaming) and in `validate`'s read errors, under the
    file's name for the messages column."""
    rows, expected = zip(*(under_column(p.values[0], p.values[2], column) for p in FILE_FIELDS))
    expected = list(expected)
    path = write_jsonl(tmp_path / "expanded.jsonl", [*rows, {column: [USER, ANSWER]}])
    assert_skipped_fields(path, cache_dir, expected)
    skipped = tmp_path / "skipped.jsonl"
    result = td.validate("ms_swift", data_files=path, skipped_rows=str(skipped))
    assert result.failures() == {"read": len(rows)}
    assert [json.loads(line)["field"] for line in skipped.read_text().splitlines()] == expected


XLAM_ROW = {"id": 0, "query": "Where can I find live giveaways for beta access?",
            "answers": json.dumps([{"name": "live_giveaways_by_type", "arguments": {"type": "beta"}}]),
            "tools": json.dumps([{"name": "live_giveaways_by_type", "description": "Live giveaways by type.",
                                  "parameters": {"type": {"description": "beta, game or loot", "type": "str"}}}])}
CHATML_FUNCTIONS = json.dumps(BARE_NEWS, indent=4)
CHATML_ROW = {"system_message": "You are a helpful assistant with access to the following functions.",
              "function_description": CHATML_FUNCTIONS, "conversations": [
                  {"from": "system", "value": "You are a helpful assistant with access to the following functions.\n"
                                              + CHATML_FUNCTIONS},
                  {"from": "human", "value": "Latest news for Chile?"},
                  {"from": "function-call", "value": "{\"name\": \"get_news_headlines\", \"arguments\": '{\"country\": \"Chile\"}'}"},
                  {"from": "function-response", "value": "{\"headlines\": [\"Rain in Santiago\"]}"},
                  {"from": "gpt", "value": "Rain in Santiago."}]}


def test_hub_layouts_ms_swift_converts_with_its_own_preprocessors(tmp_path, cache_dir):
    """ms-swift's registered xlam-function-calling-60k and function-calling-chatml datasets go through
    preprocessors of their own; their Hub files are read here as `swift sft --dataset file` reads them. xLAM's
    query/answers rows have no messages: the error names the layout. function-calling-chatml's tools live in its
    function_description column, which only the registered preprocessor reads: here tools stay empty and the
    column is kept in meta (ms-swift 4.6, given the file as a path, drops it)."""
    with pytest.raises(MissingFieldError, match="xlam-function-calling-60k") as info:
        convert(XLAM_ROW)
    assert info.value.field == "messages"
    row = td.load("ms_swift", data_files=write_jsonl(tmp_path / "chatml.jsonl", [CHATML_ROW]), split="train",
                  cache_dir=cache_dir)[0]
    assert row["tools"] == [] and row["meta"]["function_description"] == CHATML_FUNCTIONS
    assert row["messages"][0]["role"] == "system" and CHATML_FUNCTIONS in row["messages"][0]["content"]
    assert unified_calls(row) == [{"name": "get_news_headlines", "arguments": {"country": "Chile"}}]


def test_rejected_response_repeating_the_answer_of_a_trajectory_with_calls_is_a_valid_pair(tmp_path, cache_dir):
    """ms-swift compares a one-message rejected_response list with the chosen response only when that is one
    message too (``_compat_rejected_response``): a rejected answer given without the lookup, in the same words
    as the chosen trajectory's final answer, is a preference pair ms-swift trains on, not a row it drops."""
    native = {"tools": json.dumps([WEATHER]), "messages": [USER, CALL, RESULT, ANSWER],
              "rejected_response": [{"role": "assistant", "content": ANSWER["content"]}]}
    raw, unified = convert(native)
    assert unified["meta"]["rejected_response"] == native["rejected_response"]
    assert same_json(SOURCE.from_unified(unified), raw)
    ds = td.load("ms_swift", data_files=write_jsonl(tmp_path / "dpo.jsonl", [native]), split="train",
                 cache_dir=cache_dir)
    assert ds[0]["meta"]["rejected_response"] == native["rejected_response"]


def _doc_call() -> tuple[dict, dict]:
    """The doc's OpenAI row (a call written with ``content: null``): its question, and its call."""
    user, call = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))[0]["messages"][:2]
    assert call["content"] is None and len(call["tool_calls"]) == 1
    return user, call


def _edited_call(content=None, arguments=None) -> dict:
    call = copy.deepcopy(_doc_call()[1])
    call["content"] = content
    if arguments is not None:
        call["tool_calls"][0]["function"]["arguments"] = arguments
    return call


@pytest.mark.parametrize("rejected, equal", [
    pytest.param(lambda: _edited_call(), True, id="the same call, content null"),
    pytest.param(lambda: _edited_call(content=""), True, id="the same call, content empty"),
    pytest.param(lambda: _edited_call(arguments={"city": "Beijing"}), True, id="the same arguments as an object"),
    pytest.param(lambda: _edited_call(content="I will check."), False, id="the same call after text"),
    pytest.param(lambda: _edited_call(arguments='{"city": "Paris"}'), False, id="another argument"),
])
def test_rejected_call_equal_to_the_chosen_call_is_refused_as_ms_swift_drops_it(rejected, equal, tmp_path, cache_dir):
    """ms-swift compares a one-message rejected response with a one-message chosen one after reading OpenAI
    ``tool_calls`` as call messages (``normalize_openai_tool_calls``): the chosen call repeated, with null or empty
    content, is equal to it and ms-swift drops the row (tests/test_ms_swift_real.py runs ms-swift on these)."""
    user, call = _doc_call()
    native = {"messages": [user, call], "rejected_response": [rejected()]}
    if equal:
        with pytest.raises(InvalidValueError, match="equals the chosen response") as info:
            convert(native)
        assert info.value.field == "rejected_response"
        report = td.SkipReport()
        ds = td.load("ms_swift", "raw", data_files=write_jsonl(tmp_path / "dpo.jsonl", [native]), split="train",
                     on_error="skip", report=report, cache_dir=cache_dir)
        assert len(ds) == 0 and list(report.by_reason) == ["InvalidValueError:rejected_response"]
    else:
        raw, _ = convert(native)
        assert raw["extra"]["rejected_response"] == native["rejected_response"]


def test_a_rejected_call_without_a_name_is_a_typed_error():
    """ms-swift reads the rejected call's name to compare it (a KeyError, the row dropped)."""
    user, call = _doc_call()
    nameless = copy.deepcopy(call)
    del nameless["tool_calls"][0]["function"]["name"]
    with pytest.raises(InvalidValueError, match="needs a function name") as info:
        convert({"messages": [user, call], "rejected_response": [nameless]})
    assert info.value.field == "rejected_response[0].tool_calls[0]"


def _tool_use(block_id: str, city: str) -> dict:
    return {"type": "tool_use", "id": block_id, "name": "get_weather", "input": {"city": city}}


def _raw_turns(native: dict) -> list[tuple]:
    return [(m["role"], m["content"]) for m in SOURCE.to_raw(copy.deepcopy(native), CTX)["messages"]]


def test_anthropic_blocks_keep_their_order_around_calls_and_results():
    """ms-swift 4.6 (``anthropic_to_messages``) turns blocks into messages in block order: text after a
    ``tool_use`` follows the call, text before a ``tool_result`` precedes the result. The raw rows (ms-swift's
    preprocessed rows, observed with ms-swift 4.6.0) keep that order; text is never moved across a call, and
    a row whose unified form would need such a move is a typed error."""
    ask = {"role": "user", "content": "Weather?"}
    interleaved = {"messages": [
        ask, {"role": "assistant", "content": [{"type": "text", "text": "First Oslo."}, _tool_use("t1", "Oslo"),
                                              {"type": "text", "text": "Then Rome."}, _tool_use("t2", "Rome")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"},
                                     {"type": "tool_result", "tool_use_id": "t2", "content": "Rain"}]},
        {"role": "assistant", "content": "Done."}]}
    assert _raw_turns(interleaved) == [
        ("user", "Weather?"), ("assistant", "First Oslo."), ("tool_call", {"name": "get_weather", "arguments": {"city": "Oslo"}}),
        ("assistant", "Then Rome."), ("tool_call", {"name": "get_weather", "arguments": {"city": "Rome"}}),
        ("tool_response", "Sunny"), ("tool_response", "Rain"), ("assistant", "Done.")]
    with pytest.raises(InvalidValueError, match="1 tool call followed by 2 results"):
        convert(interleaved)

    text_after_call = {"messages": [
        ask, {"role": "assistant", "content": [_tool_use("t1", "Oslo"), {"type": "text", "text": "Checking."}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}]}]}
    assert _raw_turns(text_after_call) == [
        ("user", "Weather?"), ("tool_call", {"name": "get_weather", "arguments": {"city": "Oslo"}}),
        ("assistant", "Checking."), ("tool_response", "Sunny")]
    with pytest.raises(InvalidValueError, match="without a tool_call before it"):
        convert(text_after_call)

    text_before_result = {"messages": [
        ask, {"role": "assistant", "content": [_tool_use("t1", "Oslo")]},
        {"role": "user", "content": [{"type": "text", "text": "Here:"},
                                     {"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}]}]}
    assert _raw_turns(text_before_result) == [
        ("user", "Weather?"), ("tool_call", {"name": "get_weather", "arguments": {"city": "Oslo"}}),
        ("user", "Here:"), ("tool_response", "Sunny")]
    with pytest.raises(InvalidValueError, match="without a tool_call before it"):
        convert(text_before_result)

    # Text after the last call of a row that ends there: the calls, then that text as the next turn.
    call_then_text = {"messages": [ask, {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."}, _tool_use("t1", "Oslo"), {"type": "text", "text": "Asked."}]}]}
    raw, unified = convert(call_then_text)
    assert summarize(unified) == [("user", "Weather?"), ("assistant", "Let me look.", None),
                                  ("call", "call_0", "get_weather", {"city": "Oslo"}), ("assistant", "Asked.", None)]
    assert same_json(SOURCE.from_unified(unified), raw)


def test_results_after_calls_written_as_assistant_text_say_the_text_is_not_read_as_calls():
    # ms-swift trains these rows (its agent template takes the assistant text for the calls); here they are
    # refused, and the error says why rather than only that no tool_call came first.
    for text in ("Thought: look it up\nAction: get_weather\nAction Input: {\"city\": \"Oslo\"}",
                 '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'):
        row = {"conversations": [{"from": "user", "value": "Weather?"}, {"from": "assistant", "value": text},
                                 {"from": "tool", "value": "Sunny"}, {"from": "assistant", "value": "Sunny."}]}
        assert_refused(row, InvalidValueError, "conversations[2].from",
                       "takes the assistant message before it to hold the calls as text")
        # (README: refused in every config but raw, which keeps them as ms-swift reads them)
        assert [m["content"] for m in SOURCE.to_raw(copy.deepcopy(row), CTX)["messages"]] == \
            [m["value"] for m in row["conversations"]]
    # After a user message the usual reason stands.
    assert_refused({"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "Sunny"}]},
                   InvalidValueError, "messages[1].role", "a result must follow the calls it answers")


def test_card_does_not_promise_what_the_swift_rows_leave_out(cache_dir):
    """The doc's DPO row (rejected_response) and a row with per-message loss lose those in `swift` rows
    (a per-row writer cannot emit them): the card must say so rather than call `swift` an exact rebuild."""
    path = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
    dpo_line = next(i for i, row in enumerate(native_rows(path)) if "rejected_response" in row)
    swift_row = td.load("ms_swift", "swift", data_files=str(path), split="train", cache_dir=cache_dir)[dpo_line]
    assert "rejected_response" not in swift_row
    card = " ".join((Path(SOURCE_DIR) / "card.md").read_text(encoding="utf-8").split())
    assert "`raw` and `swift` are rebuilt" not in card
    assert "`rejected_response`, `label` and `channel` are not in them" in card


def test_anthropic_tool_use_without_input_is_a_call_without_arguments():
    """ms-swift 4.6 reads a ``tool_use`` block without ``input`` as a call with ``{}`` arguments (as an OpenAI
    call without ``arguments``) and trains on the row; an explicit null input is still refused."""
    native = {"messages": [
        {"role": "user", "content": "Any alarms set?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "list_alarms"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "[]"}]},
        {"role": "assistant", "content": "No alarms are set."}]}
    raw, unified = convert(native)
    assert summarize(unified) == [("user", "Any alarms set?"), ("assistant", "", None),
                                  ("call", "call_0", "list_alarms", {}), ("tool", "call_0", "list_alarms", "[]"),
                                  ("assistant", "No alarms are set.", None)]
    assert same_json(SOURCE.from_unified(unified), raw)
    native["messages"][1]["content"][0]["input"] = None
    with pytest.raises(InvalidValueError, match="arguments are null, not an object"):
        convert(native)

def test_bad_rows_raise_with_location_or_are_counted_when_skipped(tmp_path, cache_dir):
    good = {"messages": [USER, CALL, RESULT, ANSWER], "tools": json.dumps([WEATHER])}
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([json.dumps(good), "{not json", json.dumps({"messages": [USER, CALL, CALL, RESULT]}),
                               json.dumps({"messages": [USER, {"role": "function", "content": "x"}]}),
                               json.dumps(good)]) + "\n")
    with pytest.raises(InvalidJsonError) as info:
        td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    assert info.value.row == 1 and info.value.file.endswith("mixed.jsonl") and info.value.field == "<line>"

    report = td.SkipReport()
    ds = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", report=report,
                 cache_dir=cache_dir + "-skip")
    assert [r["id"] for r in ds] == ["ms_swift/mixed/0", "ms_swift/mixed/4"]
    assert report.skipped == 3 and report.rows_read == 5
    assert report.by_reason == {"InvalidJsonError:<line>": 1, "InvalidValueError:messages[3]": 1,
                                "InvalidValueError:messages[1].role": 1}


def test_no_data_files_is_a_clear_error(cache_dir):
    with pytest.raises(DataNotFoundError, match="data_files"):
        td.load("ms_swift", cache_dir=cache_dir)


# --------------------------------------------------------------------------------------------------
# The common-row shortcut (common.py) against the general stages
# --------------------------------------------------------------------------------------------------


def general_unified(text: str):
    """The unified row the two general stages make of the row in JSON ``text``, or the typed error they raise."""
    try:
        return SOURCE.to_unified(SOURCE.to_raw(codec.loads(text), CTX), CTX)
    except td.ToolUseDataError as exc:
        return exc


def shortcut_agrees(text: str) -> bool:
    """True if the shortcut took the row in JSON ``text`` (asserting it gives the general stages' row), False
    if it left the row to them. Each path reads its own copy of the row."""
    shortcut = SOURCE.native_to_unified(codec.loads(text), CTX)
    if shortcut is None:
        return False
    general = general_unified(text)
    assert not isinstance(general, Exception), f"the shortcut took a row the general stages refuse: {general}"
    assert json.dumps(shortcut) == json.dumps(general)  # (the stdlib writes lone surrogates too)
    UNIFIED_ENCODER.check_row(shortcut)  # storable as it is: streaming does not check it again
    return True


UNIFIED_ENCODER = arrow_rows.RowEncoder(td.UNIFIED_FEATURES)


def test_common_row_shortcut_gives_the_general_stages_row_on_real_and_generated_rows():
    fuzz_rows = benchmark_module("fuzz_rows")
    generator = benchmark_module("generate_ms_swift")
    real = fuzz_rows.seed_rows("ms_swift", SHARED_DATA)
    generated = [generator.generate_row(i) for i in range(300)]
    taken = [shortcut_agrees(json.dumps(row)) for row in real + generated]
    # Every generated row is plain (tool results, escaped calls and odd think spacing kept in meta), and
    # so are the docs' rows without a system column, OpenAI or Anthropic blocks.
    assert all(taken[len(real):])
    assert 0 < sum(taken[:len(real)]) < len(real)
    originals = [SOURCE.native_to_unified(row, CTX)["meta"].get("ms_swift_original") for row in generated]
    assert sum(o is not None for o in originals) > 30


def test_common_row_shortcut_never_takes_a_row_the_general_stages_read_otherwise():
    """Mutated rows (deleted and renamed keys, wrong types, odd numbers, deep nesting, broken think and call
    text): whatever the shortcut takes, it converts as the general stages do; everything else it leaves."""
    fuzz_rows = benchmark_module("fuzz_rows")
    rng = random.Random(11)
    mutator = fuzz_rows.Mutator(rng, huge_chars=3000)
    seeds = fuzz_rows.seed_rows("ms_swift", SHARED_DATA) + [SOURCE_ROW_WITH_EVERY_TURN]
    taken = refused = 0
    for _ in range(3000):
        text = fuzz_rows.to_json(mutator.mutate("ms_swift", rng.choice(seeds)).value)
        ok, native = codec.try_loads(text)
        if not ok or not isinstance(native, dict):
            continue
        if shortcut_agrees(text):
            taken += 1
        elif isinstance(general_unified(text), Exception):
            refused += 1
    assert taken > 300 and refused > 500, (taken, refused)  # 499 and 865 with this seed


def test_common_row_shortcut_leaves_rows_with_an_empty_media_path_to_the_general_stages():
    """A row whose media lists hold an empty path is plain in every other way: the shortcut leaves it, and the
    general stages refuse it naming the entry."""
    blank = [p for p in REJECTED if p.values[3] == "empty path"]
    assert len(blank) == 4
    for p in blank:
        text = json.dumps(p.values[0])
        assert not shortcut_agrees(text)
        assert general_unified(text).field == p.values[2]


def prepared_tables(texts: list[str]) -> tuple[pa.Table, pa.Table]:
    """(the table prepare builds from the shortcut's rows appended straight to its columns, the table of the
    same rows built from their dicts); rows the shortcut leaves are left out of both. Each reads its own copy."""
    filled, from_dicts = UNIFIED_ENCODER.builder(), UNIFIED_ENCODER.builder()
    for text in texts:
        row, native = SOURCE.native_to_unified(codec.loads(text), CTX), codec.loads(text)
        taken = filled.add_columns(SOURCE.fill_unified_columns, native, CTX,
                                   lambda: SOURCE.native_to_unified(native, CTX))
        assert taken == (row is not None)
        if row is not None:
            from_dicts.add(row, parsed=True)
    return filled.table(), from_dicts.table()


def ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_prepare_fills_the_columns_of_the_shortcuts_rows_as_their_dicts_fill_them():
    """Real, generated and mutated rows in batches (rows the shortcut leaves between rows it takes, which must
    append nothing): the table is the one built from the shortcut's dicts, byte for byte."""
    fuzz_rows = benchmark_module("fuzz_rows")
    generator = benchmark_module("generate_ms_swift")
    rng = random.Random(5)
    mutator = fuzz_rows.Mutator(rng, huge_chars=3000)
    seeds = fuzz_rows.seed_rows("ms_swift", SHARED_DATA) + [SOURCE_ROW_WITH_EVERY_TURN]
    rows = [json.dumps(row) for row in seeds + [generator.generate_row(i) for i in range(300)]]
    for _ in range(1500):
        text = fuzz_rows.to_json(mutator.mutate("ms_swift", rng.choice(seeds)).value)
        ok, native = codec.try_loads(text)
        if ok and isinstance(native, dict):
            rows.append(text)
    rng.shuffle(rows)
    taken = 0
    for start in range(0, len(rows), 125):
        filled, from_dicts = prepared_tables(rows[start:start + 125])
        assert filled.equals(from_dicts) and ipc_bytes(filled) == ipc_bytes(from_dicts)
        taken += filled.num_rows
    assert taken > 500, taken


def tool(name: str, parameters: dict, description: str = "d") -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def row_with_tools(tools_text: str) -> str:
    return json.dumps({"tools": tools_text, "messages": [USER, {"role": "assistant", "content": "a"}]})


OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}


def nested_array(depth: int) -> dict:
    """A parameter schema of arrays of arrays, ``depth`` objects deep."""
    schema = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"type": "array", "items": schema}
    return schema


def test_prepare_reads_each_distinct_tool_of_the_tools_texts_once(monkeypatch):
    """Rows list their own tools (a tools text rarely repeats) from a set of tools that does: prepare reads and
    writes each distinct tool once, for the same table."""
    from tooluse_datasets.builders.ms_swift import common

    monkeypatch.setattr(common, "_STORED_TOOLS", {}, raising=False)  # nothing cached by earlier tests
    catalog = [tool(f"counted_tool_{i}", OBJECT) for i in range(5)]
    rng = random.Random(3)
    texts = [row_with_tools(json.dumps(rng.sample(catalog, rng.randint(1, 5)))) for _ in range(60)]
    read = []
    monkeypatch.setattr(common, "loads", lambda text: read.append(text) or codec.loads(text))
    filled = UNIFIED_ENCODER.builder()
    for text in texts:
        native = codec.loads(text)
        assert filled.add_columns(SOURCE.fill_unified_columns, native, CTX, lambda: SOURCE.native_to_unified(native, CTX))
    assert len(read) == 5  # one a distinct tool, none a row
    monkeypatch.undo()
    built, from_dicts = prepared_tables(texts)
    assert ipc_bytes(filled.table()) == ipc_bytes(built) == ipc_bytes(from_dicts)


def test_the_tools_prepare_keeps_are_bounded_by_their_text(monkeypatch):
    from tooluse_datasets.builders.ms_swift import common

    monkeypatch.setattr(common, "_STORED_TOOLS", {})
    monkeypatch.setattr(common, "_stored_tools_chars", 0)
    monkeypatch.setattr(common, "_STORED_TOOLS_CHARS", 600)
    catalog = [tool(f"bounded_tool_{i}", OBJECT) for i in range(12)]
    rng = random.Random(4)
    texts = [row_with_tools(json.dumps(rng.sample(catalog, 4))) for _ in range(40)]
    built, from_dicts = prepared_tables(texts)
    assert ipc_bytes(built) == ipc_bytes(from_dicts)
    kept = [piece for cache in common._STORED_TOOLS.values() for piece in cache]
    assert kept and sum(map(len, kept)) <= 600 and len(kept) < len(catalog)


@pytest.mark.parametrize("tools", [
    pytest.param([tool("a", OBJECT, "ends }, {"), tool("b", OBJECT, '}, {"type": "function"')], id="separator-in-a-string"),
    pytest.param([tool("a", {"type": "object", "oneOf": [{"type": "function"}, {"type": "function", "x": 1}]})],
                 id="separator-in-a-nested-list"),
    pytest.param([tool("a", {"type": "object", "default": 123456789012345678901234567890}), tool("b", OBJECT)],
                 id="integer-beyond-64-bits"),
    pytest.param([tool("a", {"type": "object", "properties": {"q": {"type": "string", "enum": None}}}), tool("b", OBJECT)],
                 id="a-null-ms-swift-drops"),
    pytest.param([tool("a", {"type": "object", "nullable": True}), tool("b", OBJECT)], id="null-in-a-key-only"),
    pytest.param([tool("a", OBJECT), {"type": "function", "function": {"name": "b", "parameters": OBJECT}}],
                 id="a-tool-without-description"),
    pytest.param([tool("a", OBJECT), {"function": {"name": "b", "description": "", "parameters": OBJECT}, "type": "function"}],
                 id="a-tool-in-another-key-order"),
    pytest.param([tool("a", OBJECT), 1], id="a-number-among-tools"),
    pytest.param([tool(f"t{i}", {"type": "object", "properties": {"q": {"type": "array", "items": [[[]]]}}})
                  for i in range(40)], id="more-brackets-than-storage-nests-in-all"),
    pytest.param([tool("a", {"type": "object", "properties": {"q": nested_array(codec.MAX_DEPTH)}})],
                 id="a-tool-nesting-deeper-than-storage"),
    pytest.param([tool("a", OBJECT), tool("b", {"type": "object", "properties": {"q": nested_array(codec.MAX_DEPTH)}})],
                 id="a-second-tool-nesting-deeper-than-storage"),
    pytest.param([tool("a", OBJECT)] * 3, id="the-same-tool-thrice"),
])
@pytest.mark.parametrize("spelling", ["dumps", "ascii", "compact", "spaced"])
def test_prepare_of_tools_texts_cut_anywhere_gives_the_whole_texts_table(tools, spelling):
    """A tools text cut where json.dumps separates objects, but also inside strings and nested lists, or not
    cut at all (other spellings): the rows the shortcut takes and their table are those of the whole text."""
    text = {"dumps": json.dumps(tools, ensure_ascii=False), "ascii": json.dumps(tools),
            "compact": json.dumps(tools, separators=(",", ":")),
            "spaced": " " + json.dumps(tools, indent=1) + " "}[spelling]
    if spelling == "spaced":
        text = text.strip()[:1] + " " + text.strip()[1:-1] + " " + text.strip()[-1:]
    texts = [row_with_tools(text), row_with_tools(text)]  # the second reads the pieces the first cached
    built, from_dicts = prepared_tables(texts)
    assert ipc_bytes(built) == ipc_bytes(from_dicts)


def test_prepare_of_any_tools_text_gives_the_whole_texts_table():
    """Tools texts drawn at random (the separator json.dumps writes between objects inside strings, keys and
    nested lists; escapes, duplicate keys, integers beyond 64 bits, nulls ms-swift drops, tools that are not plain,
    nesting about as deep as storage allows; each spelled several ways): prepare, which reads a text's pieces
    when each is a JSON text, takes the rows the whole text's check takes, into the same table."""
    pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install -e '.[test]'")
    from hypothesis import HealthCheck, given, settings, strategies as st

    text = st.lists(st.sampled_from(["}, {", '"}, {"', "\\", '"', "null", "é", "😀", " ", "\n", "[", "}", "a"]),
                    max_size=4).map("".join)
    leaf = st.one_of(text, st.integers(), st.integers(2**63, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                     st.booleans(), st.none())
    key = st.one_of(st.sampled_from(["type", "items", "enum", "properties", "default", "x-a", "nullable"]), text)
    value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(key, inner, max_size=3),
                         max_leaves=10)
    plain = st.builds(lambda name, description, parameters: tool(name, parameters, description),
                      text.map("f".__add__), text, st.dictionaries(key, value, max_size=3))
    deep = st.builds(lambda depth: tool("f", {"type": "object", "properties": {"q": nested_array(depth)}}),
                     st.integers(codec.MAX_DEPTH - 8, codec.MAX_DEPTH - 2))  # storable or not
    other = st.one_of(value, plain.map(lambda t: {"function": t["function"], "type": "function"}),
                      plain.map(lambda t: {**t, "function": {**t["function"], "description": 1}}),
                      plain.map(lambda t: {**t, "function": {**t["function"], "name_for_model": "f"}}))
    spellings = [json.dumps, lambda v: json.dumps(v, ensure_ascii=False), lambda v: json.dumps(v, indent=1),
                 lambda v: json.dumps(v, separators=(",", ":")), lambda v: "[ " + json.dumps(v)[1:-1] + " ]",
                 lambda v: json.dumps(v).replace('{"type": "function"', '{"type": 0, "type": "function"')]

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data):
        tools = data.draw(st.lists(plain, max_size=4))
        odd = data.draw(st.sampled_from([None, None, deep, other]))  # half the lists all plain
        if odd is not None:
            tools.insert(data.draw(st.integers(0, len(tools))), data.draw(odd))
        texts = [row_with_tools(data.draw(st.sampled_from(spellings))(tools))] * 2  # the second: pieces cached
        built, from_dicts = prepared_tables(texts)
        assert ipc_bytes(built) == ipc_bytes(from_dicts)

    check()


def test_a_tool_nesting_deeper_than_storage_is_named_by_prepare_as_by_streaming(tmp_path, cache_dir):
    """A tools text whose one tool nests deeper than JSON text is stored: prepare read the tool on its own (its
    piece of the text) and writing it raised inside the row's columns, so the row was skipped as "row could not
    be converted (TypeError: ...)", no field named. Both loads name the tool, as the whole text's check does."""
    deep = [tool("a", {"type": "object", "properties": {"q": nested_array(codec.MAX_DEPTH)}})]
    rows = [json.loads(row_with_tools(json.dumps(deep))), {"messages": [USER, ANSWER]}]
    path = write_jsonl(tmp_path / "deep.jsonl", rows)
    for skipped in assert_skipped_fields(path, cache_dir, ["tools[0]"]):
        assert skipped["reason"] == "JsonValueError:tools[0]" and "too deep to store" in skipped["message"]


def test_a_row_whose_columns_fail_half_filled_sends_the_batch_the_general_way():
    generator = benchmark_module("generate_ms_swift")
    natives = [codec.loads(json.dumps(generator.generate_row(i))) for i in range(6)]

    def fill(native, ctx, lists, write):
        if native is natives[3]:  # appends part of the row, then fails
            lists["id"].append("half")
            raise RuntimeError("failed half way")
        return SOURCE.fill_unified_columns(native, ctx, lists, write)

    filled, from_dicts = UNIFIED_ENCODER.builder(), UNIFIED_ENCODER.builder()
    taken = []
    for native in natives:  # as the pipeline adds them: a row not taken is added as its dict
        taken.append(filled.add_columns(fill, native, CTX, lambda native=native: SOURCE.native_to_unified(native, CTX)))
        if not taken[-1]:
            filled.add(SOURCE.native_to_unified(native, CTX), parsed=True)
        from_dicts.add(SOURCE.native_to_unified(native, CTX), parsed=True)
    assert taken == [True] * 3 + [False] * 3  # the failed row is added the general way, then the rows after it
    assert ipc_bytes(filled.table()) == ipc_bytes(from_dicts.table())


def test_a_row_whose_columns_fail_and_that_has_no_shortcut_row_goes_to_the_general_stages():
    """A fill that fails for a row the shortcut then refuses (native_to_unified gives None): the row was encoded
    from None (a TypeError, "row could not be converted", no field named); now it is left to the general stages."""
    generator = benchmark_module("generate_ms_swift")
    natives = [codec.loads(json.dumps(generator.generate_row(i))) for i in range(3)]

    def fill(native, ctx, lists, write):
        if native is natives[1]:
            lists["id"].append("half")
            raise RuntimeError("failed half way")
        return SOURCE.fill_unified_columns(native, ctx, lists, write)

    filled = UNIFIED_ENCODER.builder()
    assert filled.add_columns(fill, natives[0], CTX, lambda: SOURCE.native_to_unified(natives[0], CTX))
    assert not filled.add_columns(fill, natives[1], CTX, lambda: None)  # nothing added, no error
    filled.add(SOURCE.native_to_unified(natives[2], CTX), parsed=True)
    assert filled.table().column("id").to_pylist() == [SOURCE.native_to_unified(n, CTX)["id"] for n in natives[::2]]


def test_prepare_of_ms_swift_rows_skips_their_dicts_and_keeps_the_table(tmp_path, cache_dir, monkeypatch):
    """Prepare of the unified config appends the shortcut's rows straight to the table; the general stages
    and the other configs still build the dicts."""
    natives = [codec.loads(line) for name in ("custom_dataset_doc_agent_rows_en.jsonl", "agent_support_doc_examples_en.jsonl")
               for line in shared_data("ms_swift", name).read_text(encoding="utf-8").splitlines() if line.strip()]
    # Rows the general stages convert before and between the shortcut's rows: the order is kept.
    left = [SOURCE.native_to_unified(native, CTX) is None for native in natives]
    assert left[0] and not all(left) and any(a and not b for a, b in zip(left, left[1:])), left
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(native) + "\n" for native in natives), encoding="utf-8")
    calls = count_calls(monkeypatch, type(SOURCE), "fill_unified_columns", "native_to_unified")
    ds = td.load("ms_swift", data_files=str(path), split="train", cache_dir=str(tmp_path / "a"))
    assert calls["fill_unified_columns"] > 0 and calls["native_to_unified"] < len(natives)  # fewer dicts
    streamed = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))
    assert len(ds) == len(streamed) == len(natives) and list(ds) == streamed


# A row with every turn the shortcut reads: think before calls, parallel calls, results as "tool" and
# "tool_response", a plain answer, media columns.
SOURCE_ROW_WITH_EVERY_TURN = {
    "tools": json.dumps([WEATHER]),
    "images": ["a.png"],
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "<image>Weather in Oslo and Bergen?"},
        {"role": "assistant", "content": "<think>\nTwo cities.\n</think>\nChecking both.\n"},
        {"role": "tool_call", "content": call_json("get_weather", {"city": "Oslo"})},
        {"role": "tool_call", "content": call_json("get_weather", {"city": "Bergen", "unit": 1.5e-7})},
        {"role": "tool_response", "content": "2 C"},
        {"role": "tool", "content": "5 C"},
        {"role": "assistant", "content": "<think>Done.</think>\n\nOslo 2 C, Bergen 5 C."},
    ],
}


# --------------------------------------------------------------------------------------------------
# The swift writer on unified rows
# --------------------------------------------------------------------------------------------------

UNIFIED_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Current weather.",
                                                 "parameters": {"type": "object", "properties": {}}}}


def weather_row(messages: list[dict], **kwargs) -> dict:
    return unified_row(id="t/0", source="test", subset="t", tools=kwargs.pop("tools", [UNIFIED_TOOL]),
                       messages=messages, **kwargs)


def two_calls(content: str = "", reasoning=None) -> dict:
    return message("assistant", content, reasoning_content=reasoning, tool_calls=[
        tool_call("a", "get_weather", {"city": "Oslo"}), tool_call("b", "get_weather", {"city": "Rome"})])


def test_writer_orders_results_by_call_id_and_inlines_reasoning():
    row = weather_row([message("system", "Be brief."), message("user", "Oslo and Rome?"),
                       two_calls("Checking.", "Two cities, two calls."),
                       message("tool", "Rome: 20 C", tool_call_id="b", name="get_weather"),
                       message("tool", "Oslo: 2 C", tool_call_id="a", name="get_weather"),
                       message("assistant", "Rome is warmer.")])
    swift = unified_to_swift(row)
    assert swift["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Oslo and Rome?"},
        {"role": "assistant", "content": "<think>\nTwo cities, two calls.\n</think>\nChecking.\n"},
        {"role": "tool_call", "content": '{"name": "get_weather", "arguments": {"city": "Oslo"}}'},
        {"role": "tool_call", "content": '{"name": "get_weather", "arguments": {"city": "Rome"}}'},
        {"role": "tool_response", "content": "Oslo: 2 C", "name": "get_weather"},
        {"role": "tool_response", "content": "Rome: 20 C", "name": "get_weather"},
        {"role": "assistant", "content": "Rome is warmer."}]
    assert td.loads(swift["tools"]) == [UNIFIED_TOOL]
    assert (swift["images"], swift["audios"], swift["videos"]) == ([], [], [])


def test_writer_fills_missing_parameters_and_keeps_values_exact():
    tool = {"type": "function", "function": {"name": "f", "description": "Does f.", "output_parameters": {"r": {}}}}
    arguments = {"x": 0.1 + 0.2, "big": 2**70, "tiny": 5e-324, "neg": -0.0, "text": "é \u2028 \"q\""}
    row = weather_row([message("user", "go"), message("assistant", "", tool_calls=[tool_call("c", "f", arguments)])],
                      tools=[tool])
    swift = unified_to_swift(row)
    assert td.loads(swift["tools"])[0]["function"] == {"name": "f", "description": "Does f.",
                                                      "output_parameters": {"r": {}},
                                                      "parameters": {"type": "object", "properties": {}}}
    _, back = convert(swift)
    assert same_json(back["messages"][1]["tool_calls"][0]["function"]["arguments"], arguments)


CALL_TURN = message("assistant", "", tool_calls=[tool_call("a", "get_weather", {"city": "Oslo"})])

WRITER_REJECTS = [
    pytest.param(weather_row([message("user", "q"), two_calls(), message("tool", "x", tool_call_id="a")]),
                 "messages[1].tool_calls", "makes 2 tool calls, followed by 1 tool result;",
                 id="result count mismatch"),
    pytest.param(weather_row([message("user", "q"), CALL_TURN, message("tool", "x")]),
                 "messages[2].tool_call_id", "no tool_call_id", id="result without call id"),
    pytest.param(weather_row([message("user", "q"), two_calls(), message("tool", "x", tool_call_id="a"),
                              message("tool", "y", tool_call_id="a")]),
                 "messages[3].tool_call_id", "two tool results answer", id="two results for one call"),
    pytest.param(weather_row([message("user", "q"), CALL_TURN, message("assistant", "hm"),
                              message("tool", "x", tool_call_id="a")]),
                 "messages[3].role", "does not directly follow", id="result separated from its call"),
    pytest.param(weather_row([message("user", "q"), message("system", "late"), message("assistant", "a")]),
                 "messages[1].role", "system message as the first", id="system not first"),
    pytest.param(weather_row([message("user", "q"), message("assistant", "a")],
                             tools=[{"type": "function", "function": {"name": "f", "description": "",
                                                                      "parameters": {}}}]),
                 "tools[0].function.description", "has no description", id="tool without description"),
    pytest.param(weather_row([message("user", "q"), message("assistant", "", tool_calls=[
        tool_call("a", "get_weather", "city=Oslo")])]),
                 "messages[1].tool_calls[0].function.arguments", "must be a JSON object", id="arguments not an object"),
    pytest.param(weather_row([message("user", "two pictures: <image>"), message("assistant", "ok")],
                             images=["a.png", "b.png"]),
                 "images", "2 images but 1 <image> tag in", id="fewer image tags than images"),
    pytest.param(weather_row([message("user", "a picture"), message("assistant", "ok")], images=["a.png"]),
                 "images", "1 image but 0 <image> tags in", id="an image without its tag"),
    pytest.param(weather_row([]), "messages", "no messages", id="no messages"),
    # 2**63 fits pandas' ujson (unsigned): ms-swift's map-style load keeps it, its streaming load (int64) fails
    pytest.param(weather_row([message("user", "q"), message("assistant", "a")], tools=[
        {"type": "function", "function": {"name": "f", "description": "Does f.", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": -2**63, "maximum": 2**63}}}}}]),
                 "tools[0].function.parameters.properties.n.maximum", "64-bit integer; ms-swift's streaming load",
                 id="tool integer beyond int64"),
    # beyond 64 bits: ms-swift's load fails on the whole file ("Value is too big!"), map-style and streaming alike
    pytest.param(weather_row([message("user", "q"), message("assistant", "a")], tools=[
        {"type": "function", "function": {"name": "f", "description": "Does f.", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "maximum": 2**64}}}}}]),
                 "tools[0].function.parameters.properties.n.maximum", "ms-swift fails to load a file whose tools",
                 id="tool integer beyond 64 bits"),
    # below -2**63 pandas' ujson fails too ("Value is too small"): not only the streaming load
    pytest.param(weather_row([message("user", "q"), message("assistant", "a")], tools=[
        {"type": "function", "function": {"name": "f", "description": "Does f.", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": -2**63 - 1}}}}}]),
                 "tools[0].function.parameters.properties.n.minimum", "ms-swift fails to load a file whose tools",
                 id="tool integer below int64"),
]


def test_grounding_rows_are_not_written_without_their_objects(tmp_path, cache_dir):
    """ms-swift replaces <ref-object>/<bbox> tags with the entries of the row's `objects` column; a swift row
    without that column would be trained on the tags as literal text. Such rows are a ConversionError naming
    meta.objects (skipped and counted with on_error="skip"); the other rows of the file are written."""
    grounding = {"messages": [{"role": "user", "content": "<image>Where is <ref-object>?"},
                              {"role": "assistant", "content": "<bbox>"}], "images": ["cat.png"],
                 "objects": {"ref": ["the cat"], "bbox": [[10, 20, 200, 220]], "bbox_type": "real"}}
    plain = {"messages": [USER, ANSWER]}
    path = write_jsonl(tmp_path / "grounding.jsonl", [grounding, plain])
    unified = td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir)
    assert unified[0]["meta"]["objects"] == grounding["objects"]  # the reader keeps them
    with pytest.raises(ConversionError, match="grounding objects") as info:
        unified_to_swift(unified[0])
    assert info.value.field == "meta.objects"
    report = td.SkipReport(keep_all=True)
    swift = td.load("ms_swift", "swift", data_files=path, split="train", on_error="skip", report=report,
                    cache_dir=cache_dir)
    assert [r["messages"] for r in swift] == [[USER, ANSWER]]
    assert [(r["row"], r["reason"]) for r in report.rows] == [(0, "ConversionError:meta.objects")]
    assert unified_to_swift({**unified[1], "meta": {"objects": None}})["messages"] == [USER, ANSWER]


@pytest.mark.parametrize("row, field, match", WRITER_REJECTS)
def test_writer_rejects_rows_it_cannot_write_faithfully(row, field, match):
    with pytest.raises(ConversionError, match=re.escape(match)) as info:
        unified_to_swift(row)
    assert info.value.field == field


# --------------------------------------------------------------------------------------------------
# Other sources through the writer: NESTFUL -> swift -> ms_swift reader
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["sample", "toy"])
def test_nestful_rows_survive_swift_export_and_ms_swift_reading(which, tmp_path, cache_dir):
    data_files = td.sample_files("nestful") if which == "sample" else str(shared_data(*NESTFUL_TOY))
    nestful = list(td.load("nestful", data_files=data_files, split="train", cache_dir=cache_dir))
    swift = td.load("nestful", "swift", data_files=data_files, split="train", cache_dir=cache_dir)
    path = write_jsonl(tmp_path / "nestful-swift.jsonl", swift)
    back = list(td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir))
    assert len(back) == len(nestful) > 0
    for original, reread in zip(nestful, back):
        assert reread["tools"] == original["tools"]  # output_parameters included
        assert [m["role"] for m in reread["messages"]] == [m["role"] for m in original["messages"]] == ["user", "assistant"]
        assert reread["messages"][0]["content"] == original["messages"][0]["content"]
        assert reread["messages"][1]["content"] == original["messages"][1]["content"] == ""
        assert "reasoning_content" not in reread["messages"][1]
        assert unified_calls(reread) == unified_calls(original)  # names, arguments ($var refs verbatim), order
        # Not representable in ms-swift: call labels become positional ids, the call graph and meta are dropped.
        assert [c["id"] for c in reread["messages"][1]["tool_calls"]] == [
            f"call_{k}" for k in range(len(unified_calls(original)))]


def test_cli_export_swift_is_readable_by_the_reader(tmp_path, cache_dir, capsys):
    assert cli.main(["export", "nestful", "--sample", "--format", "swift", "--out", str(tmp_path)]) == 0
    written = tmp_path / "nestful-swift-train.jsonl"
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    assert lines and all(set(row) == set(SWIFT_FEATURES) for row in lines)
    back = td.load("ms_swift", data_files=str(written), split="train", cache_dir=cache_dir)
    nestful = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)
    assert [unified_calls(r) for r in back] == [unified_calls(r) for r in nestful]


def test_a_row_that_cannot_be_stored_is_reported_and_the_batch_kept(tmp_path, cache_dir):
    """ms-swift tools from Parquet may hold NaN (no JSON text in between): that row is skipped with its
    field named, in prepare and streaming alike, and the other rows of its batch are written."""
    weather = {"type": "function", "function": {"name": "w", "description": "d",
                                                 "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    bad = {"type": "function", "function": {"name": "w", "description": "d",
                                             "parameters": {"type": "object", "default": math.nan}}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    rows = [{"messages": messages, "tools": [weather]}] * 3 + [{"messages": messages, "tools": [bad]}]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    prepared = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", cache_dir=cache_dir)
    streamed = list(td.load("ms_swift", data_files=str(path), split="train", on_error="skip", streaming=True))
    assert len(prepared) == len(streamed) == 3
    assert [r["id"] for r in prepared] == [r["id"] for r in streamed] == [f"ms_swift/rows/{i}" for i in range(3)]
    with pytest.raises(td.JsonValueError, match="NaN") as info:
        td.load("ms_swift", data_files=str(path), split="train", cache_dir=str(tmp_path / "raise"))
    assert info.value.row == 3 and info.value.field.startswith("tools")


@pytest.mark.parametrize("config, field", [("unified", "meta"), ("raw", "extra")])
def test_a_binary_or_decimal_column_kept_in_meta_is_named_where_it_is(tmp_path, cache_dir, config, field):
    # As a NaN there is named ("NaN at $.score"): the column, not only Python's type error
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    table = pa.table({"messages": [messages], "blob": pa.array([b"\x00\xff"], pa.binary()),
                      "price": pa.array([decimal.Decimal("1.10")], pa.decimal128(5, 2))})
    for column, shown in (("blob", "bytes at $.blob"), ("price", "Decimal at $.price")):
        path = tmp_path / f"{column}.parquet"
        pq.write_table(table.select(["messages", column]), path)
        for streaming in (False, True):
            report = td.SkipReport(keep_all=True)
            rows = td.load("ms_swift", config, data_files=str(path), split="train", on_error="skip", report=report,
                           streaming=streaming, cache_dir=cache_dir)
            assert list(rows) == []
            assert [(r["field"], r["message"]) for r in report.rows] == [(field, f"{shown} is not a JSON value")]


@pytest.mark.parametrize("ids", [(1, 2), (101, "call_gwy"), (True, False)])
def test_openai_call_ids_that_are_not_strings_never_pair_results_against_what_they_say(tmp_path, ids):
    # The bundled OpenAI-style row answers its two calls in reverse order, naming them by id. With the same ids
    # as numbers (or mixed, or booleans) results pair by position, so results that name the other call are a
    # typed error, not each paired silently with the other city's call; given in call order, they load.
    lines = Path(td.sample_files("ms_swift")["train"][1]).read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    calls, results = row["messages"][1]["tool_calls"], row["messages"][2:4]
    assert [c["id"] for c in calls] == [r["tool_call_id"] for r in reversed(results)]
    for call, result, new in zip(calls, reversed(results), ids):
        call["id"] = result["tool_call_id"] = new
    path = tmp_path / "numbered.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(InvalidValueError) as err:
        list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))
    assert err.value.field == "messages[2].tool_call_id" and err.value.row == 0
    row["messages"][2:4] = reversed(results)
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (loaded,) = td.load("ms_swift", data_files=str(path), split="train", streaming=True)
    answers = [m["content"] for m in loaded["messages"] if m["role"] == "tool"]
    assert [c["function"]["arguments"]["city"] for c in loaded["messages"][1]["tool_calls"]] == ["Bergen", "Galway"]
    assert [a.split(":")[0] for a in answers] == ["Bergen", "Galway"]


def test_messages_aliases_in_one_row_are_read_as_ms_swift_reads_them(tmp_path):
    """ms-swift renames ``conversations``/``conversation`` to ``messages`` only when one of them is there (and no
    ``messages``): a row with ``messages`` reads it and keeps the alias in ``meta``; a row with both aliases and
    no ``messages`` is dropped by ms-swift (read from ``conversations`` here before), so it is a typed error."""
    rows = [json.loads(line) for line in shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
            .read_text().splitlines() if line.strip()]
    sharegpt = [{"from": {"user": "human", "assistant": "gpt"}.get(m["role"], m["role"]), "value": m["content"]}
                for m in rows[0]["messages"]]
    both_aliases = {**{k: v for k, v in rows[0].items() if k != "messages"}, "conversations": sharegpt,
                    "conversation": sharegpt}
    messages_and_alias = {**rows[1], "conversations": sharegpt}
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (both_aliases, messages_and_alias, rows[2])) + "\n")
    plain = tmp_path / "plain.jsonl"
    plain.write_text("\n".join(json.dumps(r) for r in rows[1:3]) + "\n")
    expected = list(td.load("ms_swift", data_files=str(plain), split="train", streaming=True))
    for streaming in (True, False):
        report = td.SkipReport()
        loaded = list(td.load("ms_swift", data_files=str(path), split="train", streaming=streaming,
                              on_error="skip", report=report, cache_dir=str(tmp_path / "cache")))
        assert [(e.row, e.field, e.error) for e in report.examples] == [(0, "conversations", "InvalidValueError")]
        assert "drops the row" in report.examples[0].message
        assert [r["messages"] for r in loaded] == [r["messages"] for r in expected]
        assert loaded[0]["meta"]["conversations"] == sharegpt
    with pytest.raises(InvalidValueError, match="both 'conversations' and 'conversation'"):
        list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))


@pytest.mark.parametrize("tools, field, kind", [('[{"name": 3}]', "tools[0].name", "number"),
                                                ([{"type": "function", "function": {"name": ["f"]}}],
                                                 "tools[0].function.name", "array"),
                                                ([{"name_for_model": True}], "tools[0].name_for_model", "boolean")])
def test_a_tool_name_of_the_wrong_type_is_refused_as_such_not_as_missing(tools, field, kind, cache_dir, tmp_path):
    """A tool whose name is a number was "tool has no name (name or name_for_model)": the name is there, of the
    wrong type."""
    row = {"tools": tools, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    path = write_jsonl(tmp_path / "named.jsonl", [row])
    with pytest.raises(InvalidValueError, match=f"tool name must be a string, got {kind}") as raised:
        td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir)
    assert (raised.value.row, raised.value.field) == (0, field)


def test_a_custom_tool_is_refused_as_not_a_function_tool(cache_dir, tmp_path):
    """A custom tool (OpenAI: free-form text input, no JSON parameters), flat as the Responses API writes it or
    wrapped under `custom`, is not a function tool: read as one it got empty parameters (the flat shape) or a
    "tool has no name" error (the wrapped one). Both are refused on the tool's `type`, naming what it is."""
    doc = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))[0]
    custom = {"name": "run_sql", "description": "Run one SQL query", "format": {"type": "text"}}
    rows = [{**doc, "tools": json.dumps([{"type": "custom", **custom}])},
            {**doc, "tools": [{"type": "custom", "custom": custom}]},
            doc]
    path = write_jsonl(tmp_path / "custom.jsonl", rows)
    with pytest.raises(InvalidValueError, match="got type 'custom': a custom tool takes free-form text") as raised:
        td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir)
    assert (raised.value.row, raised.value.field) == (0, "tools[0].type")
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        ds = td.load("ms_swift", data_files=path, split="train", on_error="skip", report=report, streaming=streaming,
                     cache_dir=cache_dir)
        assert [r["id"] for r in ds] == ["ms_swift/custom/2"]
        assert [(r["row"], r["field"], r["error"]) for r in report.rows] == [
            (0, "tools[0].type", "InvalidValueError"), (1, "tools[0].type", "InvalidValueError")]


def test_tools_lose_the_nulls_ms_swift_drops_as_arrow_padding(tmp_path):
    """ms-swift 4.6 removes from every tool the nulls Arrow pads schemas with (``Dataset.to_json`` writes them into
    JSONL too): a null property, ``"enum": null``, a null description; nulls under ``default``/``const``, in an
    ``enum`` and under ``x-`` keys stay. The unified tools are the ones ms-swift's model sees, the file's are kept
    in meta (raw -> unified -> raw stays exact), on the common and the general path alike."""
    doc = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))[0]
    tool = json.loads(doc["tools"])[0]
    expected = copy.deepcopy(tool)
    city = expected["function"]["parameters"]["properties"]["city"]
    city.update({"default": None, "enum": ["Beijing", None], "x-note": None})
    padded = copy.deepcopy(expected)
    padded["function"]["parameters"]["properties"]["city"]["examples"] = None
    padded["function"]["parameters"]["properties"]["unit"] = None
    padded["function"]["parameters"]["description"] = None
    rows = [{**doc, "tools": [padded]}, {**doc, "tools": json.dumps([padded])}, {**doc, "tools": json.dumps([padded]),
                                                                                 "system": "Be brief."}]
    path = write_jsonl(tmp_path / "padded.jsonl", rows)
    for streaming in (True, False):
        unified = list(td.load("ms_swift", data_files=path, split="train", streaming=streaming,
                               cache_dir=str(tmp_path / "cache")))
        assert [row["tools"] for row in unified] == [[expected]] * 3
        assert [row["meta"]["ms_swift_original"]["tools"] for row in unified] == [[padded]] * 3
    for native in rows:
        raw, unified_row_ = convert(native)
        assert unified_row_["tools"] == [expected]
        assert same_json(SOURCE.from_unified(unified_row_), raw)


@pytest.mark.parametrize("role", ["tool", "tool_response", "observation"])
def test_anthropic_results_in_a_tool_message_read_as_in_a_user_message(role):
    """ms-swift converts ``tool_result`` blocks whatever the role of the message holding them: in a ``tool``
    message they are one result per block, in call order, as in the ``user`` message Anthropic writes (not one
    result whose text is the blocks' JSON)."""
    doc = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))[3]
    as_tool = copy.deepcopy(doc)
    as_tool["messages"][2]["role"] = role
    raw, unified = convert(as_tool)
    assert unified["messages"] == convert(doc)[1]["messages"] and unified["images"] == convert(doc)[1]["images"]
    assert same_json(SOURCE.from_unified(unified), raw)

    calls = {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}},
                                              {"type": "tool_use", "id": "b", "name": "f", "input": {"x": 2}}]}
    results = [{"type": "tool_result", "tool_use_id": "b", "content": "rb"},
               {"type": "tool_result", "tool_use_id": "a", "content": "ra"}]
    _, unified = convert({"messages": [USER, calls, {"role": role, "content": results}, ANSWER]})
    assert summarize(unified)[1:6] == [("assistant", "", None), ("call", "call_0", "f", {"x": 1}),
                                       ("call", "call_1", "f", {"x": 2}), ("tool", "call_0", "f", "ra"),
                                       ("tool", "call_1", "f", "rb")]


def test_two_aliases_of_a_column_are_read_as_ms_swift_reads_them(tmp_path):
    """ms-swift renames an alias column (``System``, ``system_prompt``, ``Images``, ``image``, ``conversations``...)
    only when no other alias of it is there: beside each other it renames neither and reads only a column already
    named ``system``/``images``/``messages``, so ``System`` with ``system_prompt`` gives no system message and
    ``conversations`` with ``Messages`` drops the row. Checked with ms-swift 4.6 in ``test_ms_swift_real.py``."""
    doc = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))[1]
    messages = doc["messages"]
    _, unified = convert({"messages": messages, "System": "A", "system_prompt": "B", "Images": ["a.png"],
                          "image": ["b.png"]})
    assert unified["messages"][0] == convert({"messages": messages})[1]["messages"][0] and unified["images"] == []
    assert {key: unified["meta"][key] for key in ("System", "system_prompt", "Images", "image")} == {
        "System": "A", "system_prompt": "B", "Images": ["a.png"], "image": ["b.png"]}
    _, unified = convert({"messages": messages, "system": "A", "System_Prompt": "B", "images": ["a.png"]})
    assert unified["messages"][0] == {"role": "system", "content": "A"} and unified["images"] == ["a.png"]
    assert unified["meta"] == {"System_Prompt": "B"}
    with pytest.raises(InvalidValueError, match="'conversations' and 'Messages'") as info:
        convert({"conversations": messages, "Messages": messages})
    assert info.value.field == "conversations"


def test_loss_of_a_message_of_anthropic_results_goes_to_every_result():
    """ms-swift gives the ``loss``/``loss_scale`` of a message holding ``tool_result`` blocks to every result it
    makes of them (checked with ms-swift 4.6 in ``test_ms_swift_real.py``), not to the first one only."""
    calls = {"role": "assistant", "loss": False, "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}},
                                                            {"type": "tool_use", "id": "b", "name": "f", "input": {}}]}
    results = {"role": "user", "loss": True, "loss_scale": 0.5, "content": [
        {"type": "tool_result", "tool_use_id": "b", "content": "rb"},
        {"type": "tool_result", "tool_use_id": "a", "content": "ra"}]}
    raw, unified = convert({"messages": [USER, calls, results, ANSWER]})
    assert [(m["role"], m["content"], m["loss"], m["loss_scale"]) for m in raw["messages"][3:5]] == [
        ("tool_response", "ra", True, 0.5), ("tool_response", "rb", True, 0.5)]
    assert same_json(SOURCE.from_unified(unified), raw)


def test_plain_rows_whose_tools_keep_their_nulls_take_the_common_path():
    """Only tools that lose a null as ms-swift reads them leave the one-loop path: the word null in a description,
    or a ``"default": null`` ms-swift keeps, does not (both paths give the same row)."""
    from tooluse_datasets.builders.ms_swift.common import common_unified

    doc = native_rows(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))[0]
    tool = json.loads(doc["tools"])[0]
    tool["function"]["parameters"]["properties"]["city"].update({"description": "City name, or null", "default": None})
    padded = copy.deepcopy(tool)
    padded["function"]["parameters"]["properties"]["unit"] = None
    for tools, common in ((json.dumps([tool]), True), ([tool], True), (json.dumps([padded]), False), ([padded], False)):
        row = {**doc, "tools": tools}
        fast = common_unified(copy.deepcopy(row), "ms_swift/variants/0", "variants")  # as CTX names it
        assert (fast is not None) is common
        if common:
            assert same_json(fast, convert(row)[1])


def test_text_blocks_of_an_anthropic_row_under_from_are_refused_where_ms_swift_drops_the_row():
    """ms-swift's Anthropic conversion makes the text and image blocks of a message a message of its ``role`` key:
    under ``from`` that is a KeyError and ms-swift drops the row (checked with ms-swift 4.6), whether or not the
    message also holds tool blocks. A message of tool blocks alone makes no such message and reads."""
    doc = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))[3]
    for k, refused in ((0, True), (1, False), (2, False)):  # [text, image], [tool_use], [tool_result]
        native = copy.deepcopy(doc)
        native["messages"][k] = respelled(native["messages"][k], "from")
        if not refused:
            assert convert(native)[1]["messages"] == convert(doc)[1]["messages"]
            continue
        with pytest.raises(InvalidValueError, match="ms-swift converts as Anthropic") as info:
            convert(native)
        assert info.value.field == f"messages[{k}].from"


def test_blocks_are_read_the_anthropic_way_only_where_ms_swift_converts_them_so():
    """ms-swift converts blocks as Anthropic only in a row without OpenAI ``tool_calls``, and there only a list under
    a message's own ``content`` key (``normalize_provider_messages``, checked with ms-swift 4.6). Elsewhere its
    template reads them: an image block's ``image`` key (one holding its image in an Anthropic ``source`` keeps its
    ``<image>`` tag and loses the image: refused, naming the block), and a result's blocks as their JSON text."""
    custom = native_rows(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))
    openai, anthropic = custom[1], custom[3]
    source_image = anthropic["messages"][0]["content"][1]
    in_openai = copy.deepcopy(openai)
    in_openai["messages"][0]["content"][1] = source_image
    with pytest.raises(InvalidValueError, match="ms-swift does not convert") as info:
        convert(in_openai)
    assert info.value.field == "messages[0].content[1]"

    blocks = [{"type": "text", "text": "A sunny beach."}]
    under_value = {"messages": [anthropic["messages"][0], CALL, {"role": "tool_response", "value": blocks}, ANSWER]}
    _, unified = convert(under_value)
    assert unified["images"] == ["data:image/png;base64,{base64_encoded}"]
    assert [m["content"] for m in unified["messages"] if m["role"] == "tool"] == [json.dumps(blocks)]


def test_a_result_given_as_content_blocks_outside_an_anthropic_row_is_read_as_their_json_text():
    """ms-swift converts content blocks of results only in a row it converts as Anthropic. Elsewhere (OpenAI and
    ms-swift rows) its template writes a result's list content as JSON text (``StdTemplateInputs.from_dict``:
    ``json.dumps(content, ensure_ascii=False)``), so the model reads the blocks' JSON and no image is taken."""
    blocks = [{"type": "text", "text": "Oslo: 2 C"}, {"type": "image_url", "image_url": {"url": "a.png"}}]
    openai = {"messages": [USER, {"role": "assistant", "content": "", "tool_calls": [_openai_call("f", "a")]},
                           {"role": "tool", "tool_call_id": "a", "content": blocks}, ANSWER]}
    swift = {"messages": [USER, CALL, {"role": "tool_response", "content": blocks}, ANSWER]}
    for native in (openai, swift):
        raw, unified = convert(native)
        results = [m for m in unified["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in results] == [json.dumps(blocks, ensure_ascii=False)]
        assert unified["images"] == []
        assert same_json(SOURCE.from_unified(unified), raw)
