"""LLaMA-Factory files with their own column and tag names: the ``columns=`` / ``tags=`` options and entries of a
``dataset_info.json`` (``dataset_info=`` + ``dataset=``), read as LLaMA-Factory 0.9.5's ``DatasetAttr`` and
``SharegptDatasetConverter`` read them, on LLaMA-Factory's own demo files (``tests/data/llamafactory``).
``tests/test_llamafactory_real.py`` compares the same entries with LLaMA-Factory's own converter output."""
from __future__ import annotations

import ast
import gzip
import json
import logging
import re
import shutil
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.errors import DataNotFoundError, ToolUseDataError

LF_DATA = Path(__file__).parent / "data" / "llamafactory"
OPENAI_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
               "observation_tag": "tool", "function_tag": "function_call", "system_tag": "system"}
OPENAI = {"columns": {"messages": "messages", "tools": "tools"}, "tags": OPENAI_TAGS}


def entries() -> dict:
    return json.loads((LF_DATA / "dataset_info.json").read_text())


def entry_rows(name: str, config: str = "unified", **kwargs) -> list[dict]:
    return list(td.load("llamafactory", config, dataset_info=str(LF_DATA), dataset=name, split="train",
                        streaming=True, **kwargs))


def file_rows(name: str) -> list[dict]:
    path = LF_DATA / entries()[name]["file_name"]
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return json.loads(path.read_text(encoding="utf-8"))


def write_rows(tmp_path: Path, rows: list[dict], name: str = "rows.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def without_system(row: dict) -> list[dict]:
    return [m for m in row["messages"] if m["role"] != "system"]


# -- LLaMA-Factory's own entries -------------------------------------------------------------------------------


def test_the_glaive_entry_reads_as_the_default_names_do():
    by_entry = entry_rows("glaive_toolcall_en_demo")
    by_file = list(td.load("llamafactory", data_files=str(LF_DATA / "glaive_toolcall_en_demo.json"), split="train",
                           streaming=True))
    assert by_entry == by_file and len(by_entry) == 20
    assert sum(bool(m.get("tool_calls")) for r in by_entry for m in r["messages"]) > 5


def test_openai_style_rows_read_as_the_same_conversations():
    """The glaive rows spelled messages/role/content with tags user/assistant/tool/function_call and a system
    message first in every other row: the same conversations, calls and tools."""
    sharegpt = entry_rows("glaive_toolcall_en_demo")
    openai = entry_rows("glaive_toolcall_openai_style")
    assert [without_system(r) for r in openai] == [r["messages"] for r in sharegpt]
    assert [r["tools"] for r in openai] == [r["tools"] for r in sharegpt]
    for k, (row, native) in enumerate(zip(openai, file_rows("glaive_toolcall_openai_style"))):
        assert row["id"] == f"llamafactory/glaive_toolcall_openai_style/{k}"
        if native["messages"][0]["role"] == "system":  # LLaMA-Factory reads a system message first as the system
            assert row["messages"][0] == {"role": "system", "content": native["messages"][0]["content"]}
        else:
            assert row["messages"][0]["role"] == "user"


def test_the_options_read_as_the_entry_does():
    by_entry = entry_rows("glaive_toolcall_openai_style")
    path = str(LF_DATA / "glaive_toolcall_openai_style.jsonl")
    by_options = list(td.load("llamafactory", data_files=path, split="train", streaming=True, **OPENAI))
    assert by_options == by_entry


@pytest.mark.parametrize("name, column", [("mllm_demo", "images"), ("mllm_video_demo", "videos")])
def test_mllm_demo_entries(name, column):
    rows = entry_rows(name)
    native = file_rows(name)
    assert len(rows) == len(native) > 0
    for row, original in zip(rows, native):
        assert row[column] == original[column]
        assert [(m["role"], m["content"]) for m in row["messages"]] == \
               [(t["role"], t["content"]) for t in original["messages"]]


@pytest.mark.parametrize("name", sorted(entries()))
def test_map_style_and_streaming_are_identical(name, cache_dir):
    for config in ("unified", "raw", "llamafactory"):
        streamed = entry_rows(name, config)
        prepared = list(td.load("llamafactory", config, dataset_info=str(LF_DATA), dataset=name, split="train",
                                cache_dir=cache_dir))
        assert prepared == streamed and streamed, config


def test_raw_and_written_rows_use_the_default_names():
    """raw and llamafactory rows are in LLaMA-Factory's default spelling (conversations, from/value, human/gpt/
    function_call/observation/system), whatever the file's names; values are the file's, byte for byte."""
    raw = entry_rows("glaive_toolcall_openai_style", "raw")
    written = entry_rows("glaive_toolcall_openai_style", "llamafactory")
    default = entry_rows("glaive_toolcall_en_demo", "llamafactory")
    names = {"system": "system", "user": "human", "assistant": "gpt", "tool": "observation",
             "function_call": "function_call"}
    for r, native in zip(raw, file_rows("glaive_toolcall_openai_style")):
        assert r["conversations"] == [{"from": names[m["role"]], "value": m["content"]} for m in native["messages"]]
        assert r["tools"] == native["tools"] and r["extra"] == {}
    assert [{**w, "system": ""} for w in written] == default  # the system message is written as the system column
    assert all(w["system"] for w in written[::2]) and not any(w["system"] for w in written[1::2])


def test_cli_export_of_an_entry_declares_the_default_names(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "llamafactory", "--option", f"dataset_info={LF_DATA}", "--option", "dataset=mllm_demo",
                 "--format", "llamafactory", "--out", str(out)]) == 0
    info = json.loads((out / "dataset_info.json").read_text())
    assert info == {"llamafactory-llamafactory-train": {
        "file_name": "llamafactory-llamafactory-train.jsonl", "formatting": "sharegpt",
        "columns": {"messages": "conversations", "images": "images"}}}
    rows = [json.loads(line) for line in (out / "llamafactory-llamafactory-train.jsonl").read_text().splitlines()]
    assert [r["images"] for r in rows] == [r["images"] for r in file_rows("mllm_demo")]


def test_an_exports_entry_reads_its_file_as_the_file_reads_alone(tmp_path, capsys):
    """The export writes "" and [] for the columns its entry leaves out (videos, audios here): read through the
    entry, they are no columns of the rows' own, so meta is the same as without it."""
    out = tmp_path / "out"
    assert main(["export", "llamafactory", "--sample", "--format", "llamafactory", "--out", str(out)]) == 0
    (name, entry), = json.loads((out / "dataset_info.json").read_text()).items()
    assert "videos" not in entry["columns"]
    by_entry = list(td.load("llamafactory", dataset_info=str(out), dataset=name, split="train", streaming=True))
    alone = list(td.load("llamafactory", data_files=str(out / entry["file_name"]), split="train", streaming=True))
    assert by_entry == alone and len(alone) == 5


def test_file_name_is_relative_to_the_dataset_info_folder_and_data_files_replace_it(tmp_path):
    info = tmp_path / "conf" / "dataset_info.json"
    info.parent.mkdir()
    shutil.copy(LF_DATA / "glaive_toolcall_openai_style.jsonl", tmp_path / "rows.jsonl")
    entry = {**entries()["glaive_toolcall_openai_style"], "file_name": "../rows.jsonl"}
    info.write_text(json.dumps({"x": entry}))
    expected = [{**r, "id": r["id"].replace("glaive_toolcall_openai_style", "rows"), "subset": "rows"}
                for r in entry_rows("glaive_toolcall_openai_style")]
    assert list(td.load("llamafactory", dataset_info=str(info), dataset="x", split="train", streaming=True)) == expected
    # data_files replace the entry's file_name (which may then be absent, or a Hub entry)
    info.write_text(json.dumps({"x": {**entry, "file_name": "gone.jsonl"},
                                "hub": {**entry, "hf_hub_url": "someone/rows"}}))
    for name in ("x", "hub"):
        rows = td.load("llamafactory", dataset_info=str(info), dataset=name, split="train", streaming=True,
                       data_files=str(tmp_path / "rows.jsonl"))
        assert list(rows) == expected
    with pytest.raises(DataNotFoundError, match="gone.jsonl"):
        td.load("llamafactory", dataset_info=str(info), dataset="x", split="train", streaming=True)
    with pytest.raises(ValueError, match="'hub'.*hf_hub_url 'someone/rows'.*data_files="):
        td.load("llamafactory", dataset_info=str(info), dataset="hub", split="train", streaming=True)


def test_a_folder_file_name_reads_every_file_in_it(tmp_path):
    (tmp_path / "parts").mkdir()
    rows = file_rows("glaive_toolcall_openai_style")
    write_rows(tmp_path / "parts", rows[:8], "a.jsonl")
    write_rows(tmp_path / "parts", rows[8:], "b.jsonl")
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"parts": {**entries()["glaive_toolcall_openai_style"], "file_name": "parts"}}))
    loaded = list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="parts", split="train", streaming=True))
    assert [without_system(r) for r in loaded] == [without_system(r) for r in entry_rows("glaive_toolcall_openai_style")]


def test_an_edited_entry_is_not_served_from_the_cache(tmp_path, cache_dir):
    shutil.copy(LF_DATA / "glaive_toolcall_openai_style.jsonl", tmp_path)
    entry = entries()["glaive_toolcall_openai_style"]
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": entry}))
    first = td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", cache_dir=cache_dir)[0]
    assert first["tools"]
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": {**entry, "columns": {"messages": "messages"}}}))
    again = td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", cache_dir=cache_dir)[0]
    assert again["tools"] == [] and "tools" in again["meta"]  # not read, as LLaMA-Factory would not read it


# -- what LLaMA-Factory's converter reads, and errors in the file's names ---------------------------------------


U, A = ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
CALL = {"role": "function_call", "content": '{"name": "f", "arguments": {"x": 1}}'}


@pytest.mark.parametrize("messages, field, message", [
    ([U, U], "messages[1].role", "'user' at position 1; LLaMA-Factory needs assistant or function_call"),
    ([U, {"role": "human", "content": "b"}], "messages[1].role", "none of the file's role tags"),
    ([U, {"role": "assistant", "content": 3}], "messages[1].content", "content must be a string"),
    ([U, {"role": "assistant"}], "messages[1].content", "content must be a string"),
    ([U, {"content": "b"}], "messages[1].role", "needs a 'role' tag"),
    ([U, CALL, U, A], "messages[2].role", "a user turn right after a function_call"),
    ([U, {"role": "function_call", "content": '{"name": "f", "parameters": {}}'}], "messages[1].content.arguments",
     "parameters"),
    ([U, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
     "messages[1].tool_calls", "ignores tool_calls"),
    # OpenAI's own spelling of a call turn (content null): the calls are the reason, not the content
    ([U, {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
     "messages[1].tool_calls", "ignores tool_calls"),
    ([{"role": "system", "content": "s"}, U, U, A], "messages", "3 turns"),
    ([{"role": "system", "content": "s"}, U, A, {"role": "user", "content": "{{idx}}"}, A], "messages[3].content",
     "{{idx}}"),
    ([U, {"role": "function_call", "content": '[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]'},
      {"role": "tool", "content": "one result"}, A], "messages[2].content", "2 parallel calls but 1 result in"),
])
def test_errors_name_the_files_own_fields(tmp_path, messages, field, message):
    path = write_rows(tmp_path, [{"messages": messages}])
    for streaming in (True, False):
        with pytest.raises(ToolUseDataError) as info:
            list(td.load("llamafactory", data_files=path, split="train", streaming=streaming,
                         cache_dir=str(tmp_path / "cache"), **OPENAI))
        assert (info.value.field, info.value.row) == (field, 0) and message in info.value.message, info.value


@pytest.mark.parametrize("row, field", [({"messages": [U, A], "tools": [{"name": "f"}]}, "functions"),
                                        ({"messages": [U, A], "tools": "[1"}, "functions"),
                                        ({"messages": [U, A], "sys": 3}, "sys"),
                                        ({"messages": [U, A], "pics": "a.png"}, "pics"),
                                        ({"messages": [U, A], "pics": [""]}, "pics[0]"),
                                        ({"messages": "hi"}, "messages"),
                                        ({"conversations": []}, "messages")])
def test_column_errors_name_the_files_column(tmp_path, row, field):
    if "tools" in row:
        row["functions"] = row.pop("tools")
    path = write_rows(tmp_path, [row])
    columns = {"messages": "messages", "tools": "functions", "system": "sys", "images": "pics"}
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True, columns=columns,
                     tags=OPENAI_TAGS))
    assert info.value.field == field


def test_a_system_column_and_a_system_message(tmp_path):
    """As LLaMA-Factory: a system message first wins over the system column; with system_tag null a system message
    is an unknown role (LLaMA-Factory drops the row) and the column is the system."""
    rows = [{"messages": [U, A], "sys": "from the column"},
            {"messages": [{"role": "system", "content": "from the list"}, U, A], "sys": "shadowed"}]
    path = write_rows(tmp_path, rows)
    columns = {"messages": "messages", "system": "sys"}
    loaded = list(td.load("llamafactory", data_files=path, split="train", streaming=True, columns=columns,
                          tags=OPENAI_TAGS))
    assert [r["messages"][0]["content"] for r in loaded] == ["from the column", "from the list"]
    raw = list(td.load("llamafactory", "raw", data_files=path, split="train", streaming=True, columns=columns,
                       tags=OPENAI_TAGS))
    assert raw[1]["system"] == "shadowed" and raw[1]["conversations"][0] == {"from": "system", "value": "from the list"}
    report = td.SkipReport(keep_all=True)
    kept = list(td.load("llamafactory", data_files=path, split="train", streaming=True, columns=columns,
                        tags={**OPENAI_TAGS, "system_tag": None}, on_error="skip", report=report))
    assert [r["messages"][0]["content"] for r in kept] == ["from the column"]
    assert [(r["row"], r["field"]) for r in report.rows] == [(1, "messages[0].role")]


def test_columns_left_out_are_not_read_and_said_so(tmp_path, caplog):
    path = write_rows(tmp_path, [{"messages": [U, A], "tools": "[]", "note": 1}] * 2)
    with caplog.at_level(logging.WARNING, logger="tooluse_datasets"):
        rows = list(td.load("llamafactory", data_files=path, split="train", streaming=True,
                            columns={"messages": "messages"}, tags=OPENAI_TAGS))
    assert [r["meta"] for r in rows] == [{"tools": "[]", "note": 1}] * 2
    warned = [r.getMessage() for r in caplog.records if "'tools' column" in r.getMessage()]
    assert len(warned) == 1 and '"tools": "tools"' in warned[0]


def test_rows_of_another_layout_say_which_options_read_them(tmp_path):
    path = write_rows(tmp_path, [{"messages": [U, A]}])
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert info.value.field == "conversations" and "columns={'messages': 'messages'}" in info.value.message


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_a_conversations_column_the_file_lacks_is_one_error_about_the_file(tmp_path, cache_dir, streaming):
    """columns={"messages": "msgs"} on a file whose conversations are under another name skipped every row
    (on_error="skip": an empty dataset): the file is refused once, naming it and the columns it has; an entry
    naming such a column says which entry."""
    path = write_rows(tmp_path, [{"messages": [U, A], "note": 1}] * 3)
    with pytest.raises(td.MissingFieldError, match=r"columns\['messages'\]='msgs': the file has no column by that "
                                                   r"name \(the keys of its first rows: 'messages', 'note'\)$") as err:
        td.load("llamafactory", data_files=path, columns={"messages": "msgs"}, tags=OPENAI_TAGS, on_error="skip",
                streaming=streaming, cache_dir=cache_dir)
    assert (err.value.file, err.value.field) == (path, "msgs")
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"mine": {"file_name": "rows.jsonl", "formatting": "sharegpt", "columns": {"messages": "msgs"}}}))
    with pytest.raises(td.MissingFieldError, match=r"entry 'mine' .*: columns\['messages'\]='msgs': the file"):
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="mine", on_error="skip", streaming=streaming,
                cache_dir=cache_dir)
    # columns= that leaves messages to its default names no conversations column: each row is its own error, as
    # without columns= (it was the file's, "columns['messages']='conversations'", a key the user never gave)
    report = td.SkipReport()
    ds = td.load("llamafactory", data_files=path, split="train", columns={"system": "sys"}, on_error="skip",
                 report=report, streaming=streaming, cache_dir=cache_dir)
    assert len(list(ds)) == 0 and report.by_reason == {"MissingFieldError:conversations": 3}
    # so is an entry without columns (its conversations under the default name): it was the file's error naming
    # "columns['messages']='conversations'", which the entry never gave
    (tmp_path / "dataset_info.json").write_text(json.dumps({"plain": {"file_name": "rows.jsonl",
                                                                      "formatting": "sharegpt"}}))
    report = td.SkipReport()
    ds = td.load("llamafactory", dataset_info=str(tmp_path), dataset="plain", on_error="skip", report=report,
                 streaming=streaming, cache_dir=cache_dir)
    assert sum(len(list(split)) for split in ds.values()) == 0
    assert report.by_reason == {"MissingFieldError:conversations": 3}


def test_preference_rows_are_refused_as_preference_pairs_not_as_rows_llamafactory_drops(tmp_path):
    """LLaMA-Factory's preference (DPO) rows, made from its glaive demo: a prompt of odd length and the chosen and
    rejected answers. LLaMA-Factory trains them under a ranking entry; the error says what they are."""
    demo = file_rows("glaive_toolcall_en_demo")
    rows = [{"conversations": row["conversations"][:1], "chosen": row["conversations"][1],
             "rejected": {"from": "gpt", "value": "I cannot help with that."}, "tools": row["tools"]}
            for row in demo[:3]]
    rows.append(demo[3])  # a conversation among them reads as one
    path = write_rows(tmp_path, rows)
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert info.value.row == 0 and info.value.field == "chosen"
    assert "a preference row (a prompt of 1 turn, with" in info.value.message and "ranking: true" in info.value.message
    assert "drops" not in info.value.message
    report = td.SkipReport()
    kept = list(td.load("llamafactory", data_files=path, split="train", streaming=True, on_error="skip",
                        report=report))
    assert [row["id"] for row in kept] == ["llamafactory/rows/3"]
    assert report.skipped == 3 and report.by_reason == {"InvalidValueError:chosen": 3}


def test_turns_spelled_with_role_and_content_say_which_tags_read_them(tmp_path):
    """LLaMA-Factory's OpenAI-style demo rows under the default column name: the tags the error suggests read them
    as the file's own entry does."""
    rows = [{"conversations": row["messages"], "tools": row["tools"]}
            for row in file_rows("glaive_toolcall_openai_style")]
    path = write_rows(tmp_path, rows)
    with pytest.raises(ToolUseDataError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert info.value.field == "conversations[0].from"
    suggested = ast.literal_eval(re.search(r"tags=(\{.*?\})", info.value.message).group(1))
    read = list(td.load("llamafactory", data_files=path, split="train", streaming=True,
                        columns={"messages": "conversations", "tools": "tools"},
                        tags=suggested))
    assert [row["messages"] for row in read] == [row["messages"] for row in entry_rows("glaive_toolcall_openai_style")]


@pytest.mark.parametrize("options, message", [
    ({"columns": {"messages": "messages", "prompt": "p"}}, "'prompt' is an alpaca column"),
    ({"columns": {"messages": "messages", "kto_tag": "label"}}, "'kto_tag' is a KTO label column"),
    ({"columns": {"message": "messages"}}, "unknown key 'message'"),
    ({"columns": {"messages": None}}, "'messages' must name a column"),
    ({"columns": {"messages": "m", "images": "m"}}, "'messages' and 'images' both name 'm'"),
    ({"columns": "messages"}, "option columns must be an object"),
    ({"tags": {"user": "user"}}, "unknown key 'user'"),
    ({"tags": {"user_tag": None}}, "'user_tag' must name a tag"),
    ({"tags": {"user_tag": "gpt"}}, "'user_tag' and 'assistant_tag' both name 'gpt'"),
    ({"dataset": "mllm_demo"}, "give dataset_info=PATH"),
    ({"dataset_info": str(LF_DATA)}, "needs dataset=NAME"),
    ({"dataset_info": str(LF_DATA), "dataset": "mllm_dem"}, "no entry 'mllm_dem' (did you mean 'mllm_demo'?)"),
    ({"dataset_info": str(LF_DATA), "dataset": "mllm_demo", "tags": {}}, "tags and dataset_info exclude each other"),
])
def test_wrong_options_are_value_errors_naming_the_key(tmp_path, options, message):
    path = write_rows(tmp_path, [{"messages": [U, A]}])
    with pytest.raises(ValueError) as info:
        td.load("llamafactory", data_files=path, split="train", streaming=True, **options)
    assert message in str(info.value)


@pytest.mark.parametrize("entry, message", [
    ({"file_name": "a.json"}, "entry 'x' (%s) has formatting 'alpaca' (LLaMA-Factory's default"),
    ({"file_name": "a.json", "formatting": "openai"}, "entry 'x' (%s) has formatting 'openai'"),
    ({"file_name": "a.json", "formatting": "openai"}, "read with the ms_swift source"),
    ({"file_name": "a.json", "formatting": "sharegpt", "ranking": True}, "entry 'x' (%s) is a preference dataset"),
    ({"file_name": "a.json", "formatting": "sharegpt", "columns": {"messages": "m", "chosen": "c"}},
     "'chosen' is a preference (ranking) column"),
    ({"file_name": "a.json", "formatting": "sharegpt", "tags": ["role"]}, "tags must be a JSON object, got array"),
    ({"file_name": "a.json", "formatting": "sharegpt", "columns": None}, "columns must be a JSON object, got null"),
    (["not", "an", "entry"], "entry 'x' (%s) must be a JSON object, got array"),
    (None, "entry 'x' (%s) must be a JSON object, got null"),
    ({"file_name": 5, "formatting": "sharegpt"}, "names no file_name (file_name must be a path, got number)"),
    # a name of another type is quoted as the file holds it, and a tag the entry cannot leave out is not offered null
    ({"file_name": "a.json", "formatting": "sharegpt", "columns": {"messages": "m", "system": ["s"]}},
     """columns: 'system' must name a column (or null: not read), got ["s"]"""),
    ({"file_name": "a.json", "formatting": "sharegpt",
      "tags": {"role_tag": "role", "content_tag": "content", "user_tag": True, "assistant_tag": "assistant"}},
     "tags: 'user_tag' must name a tag, got true"),
    ({"file_name": "a.json", "formatting": "sharegpt", "split": ["train"]},
     """split must be a split name such as 'train', got ["train"]"""),
])
def test_entries_that_are_not_sharegpt_conversations_are_refused_naming_the_entry(tmp_path, entry, message):
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": entry}))
    with pytest.raises(ValueError) as info:
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True)
    assert message.replace("%s", str(tmp_path / "dataset_info.json")) in str(info.value)


def test_a_dataset_info_under_the_home_folder_is_found_by_a_leading_tilde(tmp_path, monkeypatch):
    # "~/data" was looked for as a folder named "~" in the current one, where data_dir= and data_files= expand it
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "data").mkdir()
    shutil.copy(LF_DATA / "glaive_toolcall_en_demo.json", tmp_path / "data")
    (tmp_path / "data" / "dataset_info.json").write_text(json.dumps({"x": entries()["glaive_toolcall_en_demo"]}))
    loaded = list(td.load("llamafactory", dataset_info="~/data", dataset="x", split="train", streaming=True))
    assert [r["messages"] for r in loaded] == [r["messages"] for r in entry_rows("glaive_toolcall_en_demo")]


def test_a_dataset_info_that_is_not_an_object_is_named_by_its_json_type(tmp_path):
    """The file's JSON was named by Python's types ("got list", "got NoneType"), as no other message names data."""
    (tmp_path / "dataset_info.json").write_text("[]")
    with pytest.raises(ValueError, match="must be a JSON object of entries, got array$"):
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True)


def test_cli_options_reach_the_reader(tmp_path, capsys):
    path = write_rows(tmp_path, [{"messages": [U, A], "tools": "[]"}])
    assert main(["export", "llamafactory", "--data-files", path, "--format", "llamafactory", "--out",
                 str(tmp_path / "out"), "--option", 'columns={"messages": "messages"}', "--option",
                 'tags={"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}'
                 ]) == 0
    rows = (tmp_path / "out" / "llamafactory-llamafactory-train.jsonl").read_text().splitlines()
    assert json.loads(rows[0])["conversations"] == [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]
    assert main(["export", "llamafactory", "--format", "llamafactory", "--out", str(tmp_path / "none")]) == 2
    assert "--option dataset_info=PATH --option dataset=NAME" in capsys.readouterr().err


def test_an_export_into_the_folder_of_the_entry_it_reads_does_not_replace_the_entrys_file(tmp_path, capsys):
    """The entry's file is an input as --data-files are: an export of it into that folder, under the same name (an
    earlier export read back through its entry), was written over the file it read, rows skipped or respelled."""
    out = tmp_path / "out"
    assert main(["export", "llamafactory", "--sample", "--format", "llamafactory", "--out", str(out)]) == 0
    data = out / "llamafactory-llamafactory-train.jsonl"
    before = data.read_bytes()
    assert main(["export", "llamafactory", "--option", f"dataset_info={out}", "--option",
                 "dataset=llamafactory-llamafactory-train", "--format", "llamafactory", "--out", str(out)]) == 2
    assert "which this run reads as input" in capsys.readouterr().err and data.read_bytes() == before


def test_a_mirror_of_an_entry(tmp_path, capsys):
    """``mirror`` takes the entry's file_name as the data (as load() does), and its rows are the stream's."""
    assert main(["mirror", "llamafactory", "--option", f"dataset_info={LF_DATA}", "--option",
                 "dataset=glaive_toolcall_openai_style", "--configs", "unified", "llamafactory",
                 "--out", str(tmp_path / "m")]) == 0
    folder = tmp_path / "m" / "llamafactory"
    from datasets import load_dataset

    mirrored = td.exact(load_dataset(str(folder), "unified", split="train", cache_dir=str(tmp_path / "c")))
    assert list(mirrored) == entry_rows("glaive_toolcall_openai_style")
    assert "glaive_toolcall_openai_style.jsonl" in (folder / "README.md").read_text()


# -- an entry's columns and tags have no defaults for the keys they leave out (DatasetAttr.join) -----------------


MLLM_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}


def test_tags_an_entry_leaves_out_are_no_tags_as_llamafactory_reads_them(tmp_path):
    """mllm_demo's tags name no observation, function or system tag: LLaMA-Factory 0.9.5 then has none (it drops
    a row holding such a turn, a leading system message too), where the defaults would read them."""
    system = {"role": "system", "content": "Be brief."}
    call = {"role": "function_call", "content": '{"name": "w", "arguments": {}}'}
    rows = [{"messages": [system, U, A]},
            {"messages": [U, call, {"role": "observation", "content": "sunny"}, A]},
            {"messages": [U, A]}]
    write_rows(tmp_path, rows)
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": {
        "file_name": "rows.jsonl", "formatting": "sharegpt", "columns": {"messages": "messages"}, "tags": MLLM_TAGS}}))
    loaded = list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True,
                          on_error="skip"))
    assert [r["id"] for r in loaded] == ["llamafactory/rows/2"]
    for row, field in ((0, "messages[0].role"), (1, "messages[1].role")):
        path = write_rows(tmp_path, [rows[row]], "one.jsonl")
        with pytest.raises(ToolUseDataError, match="none of the file's role tags") as info:
            list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", data_files=path, split="train",
                         streaming=True))
        assert info.value.field == field


@pytest.mark.parametrize("tags, messages, field, needs", [
    (MLLM_TAGS, [U, A, A, U], "messages[2].role", "needs user there"),
    (MLLM_TAGS, [U, U], "messages[1].role", "needs assistant there"),
    # results of no call: "an tool with no function_call before it", under tags naming no function tag too
    ({**MLLM_TAGS, "observation_tag": "tool", "function_tag": "function_call"},
     [U, A, {"role": "tool", "content": "r"}, A], "messages[2].role", "'tool' turn .* no 'function_call' turn before"),
    ({**MLLM_TAGS, "observation_tag": "tool"}, [U, A, {"role": "tool", "content": "r"}, A], "messages[2].role",
     r"'tool' turn \(tool results\) with no call \(the file's tags name no function tag\)"),
])
def test_turns_out_of_place_are_told_in_the_file_own_tags_only(tmp_path, tags, messages, field, needs):
    # mllm_demo's tags name no observation or function tag: "needs user or observation" named a turn it cannot have
    write_rows(tmp_path, [{"messages": messages}])
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": {
        "file_name": "rows.jsonl", "formatting": "sharegpt", "columns": {"messages": "messages"}, "tags": tags}}))
    with pytest.raises(ToolUseDataError, match=needs) as info:
        list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True))
    assert info.value.field == field


@pytest.mark.parametrize("entry, message", [
    ({"columns": {"tools": "tools"}}, "columns names no 'messages' column"),
    ({"tags": {"role_tag": "role", "content_tag": "content"}}, "tags name no 'user_tag' and no 'assistant_tag'"),
    ({"tags": {"user_tag": "user", "assistant_tag": "assistant"}}, "tags name no 'role_tag' and no 'content_tag'"),
])
def test_an_entry_leaving_out_names_llamafactory_cannot_do_without_is_refused(tmp_path, entry, message):
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": {"file_name": "a.json", "formatting": "sharegpt",
                                                                  **entry}}))
    with pytest.raises(ValueError, match=message):
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True)


def test_a_folder_of_json_and_jsonl_files_reads_as_llamafactory_reads_it(tmp_path):
    # LLaMA-Factory's loader types files by extension (FILEEXT2TYPE): .json and .jsonl are both json, so a folder
    # holding both is one dataset to it; a .parquet beside them is another type, which it refuses.
    (tmp_path / "parts").mkdir()
    rows = file_rows("glaive_toolcall_en_demo")
    (tmp_path / "parts" / "a.json").write_text(json.dumps(rows[:4]))
    write_rows(tmp_path / "parts", rows[4:6], "b.jsonl")
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"parts": {**entries()["glaive_toolcall_en_demo"], "file_name": "parts"}}))
    loaded = list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="parts", split="train", streaming=True))
    assert [r["messages"] for r in loaded] == [r["messages"] for r in entry_rows("glaive_toolcall_en_demo")[:6]]
    (tmp_path / "parts" / "c.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match=r"several types \(.json, .jsonl, .parquet\)"):
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="parts", split="train", streaming=True)


@pytest.mark.parametrize("file_name", ["rows[1].jsonl", "run[1]"])
@pytest.mark.parametrize("streaming", [False, True])
def test_an_entry_file_name_holding_glob_characters_is_read_as_named(tmp_path, file_name, streaming):
    # LLaMA-Factory opens file_name as it is; read as a glob, "rows[1].jsonl" was "rows1.jsonl", another file
    # of the folder (its rows read instead), and the folder "run[1]" matched none
    named = tmp_path / file_name
    if file_name.endswith(".jsonl"):
        write_rows(tmp_path, [{"conversations": [{"from": "human", "value": "named"}, {"from": "gpt", "value": "b"}]}],
                   named.name)
    else:
        named.mkdir()
        write_rows(named, [{"conversations": [{"from": "human", "value": "named"}, {"from": "gpt", "value": "b"}]}])
    write_rows(tmp_path, [{"conversations": [{"from": "human", "value": "other"}, {"from": "gpt", "value": "b"}]}],
               "rows1.jsonl")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"x": {"file_name": file_name, "formatting": "sharegpt"}}))
    loaded = td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=streaming,
                     cache_dir=str(tmp_path / "cache"))
    assert [r["messages"][0]["content"] for r in loaded] == ["named"]


# -- an entry's split: LLaMA-Factory loads a local file with load_dataset(..., split=entry["split"]) --------------


def split_entry(tmp_path: Path, split) -> str:
    shutil.copy(LF_DATA / "glaive_toolcall_en_demo.json", tmp_path)
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"x": {**entries()["glaive_toolcall_en_demo"], "split": split}}))
    return str(tmp_path)


def test_a_sliced_split_is_said_and_read_by_load_with_that_split(tmp_path, caplog, cache_dir):
    # LLaMA-Factory trains only train[:2] of the file: reading every row without a word would train on more.
    info = split_entry(tmp_path, "train[:2]")
    with caplog.at_level(logging.WARNING, logger="tooluse_datasets"):
        everything = list(td.load("llamafactory", dataset_info=info, dataset="x", split="train", streaming=True))
    said = [r.getMessage() for r in caplog.records if "split='train[:2]'" in r.getMessage()]
    assert said and "LLaMA-Factory trains only those rows" in said[0]
    assert len(everything) == len(file_rows("glaive_toolcall_en_demo"))
    sliced = td.exact(td.load("llamafactory", dataset_info=info, dataset="x", split="train[:2]", cache_dir=cache_dir))
    assert [r["messages"] for r in sliced] == [r["messages"] for r in entry_rows("glaive_toolcall_en_demo")[:2]]


@pytest.mark.parametrize("split, message", [
    ("test", "has split 'test', but a local file has only a 'train' split"),
    ("train+validation", "has split 'train+validation'"),
    (5, "split must be a split name such as 'train', got 5"),
])
def test_a_split_llamafactory_fails_on_is_refused_naming_the_entry(tmp_path, split, message):
    info = split_entry(tmp_path, split)
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        td.load("llamafactory", dataset_info=info, dataset="x", split="train", streaming=True)
    assert "entry 'x'" in str(raised.value)


# -- an entry's files: LLaMA-Factory types each by its extension (FILEEXT2TYPE) and loads it with that loader -----


@pytest.mark.parametrize("name, message", [
    ("demo.txt", "reads {path} with its text loader, not as JSON or Parquet"),
    ("demo.csv", "reads {path} with its csv loader"),
    ("demo.jsonl.gz", "{path} is a .gz file, which LLaMA-Factory refuses (allowed file types: arrow, csv"),
    ("demo", "{path} is a file without an extension, which LLaMA-Factory refuses"),
])
def test_a_file_llamafactory_does_not_read_as_json_is_refused_naming_the_entry(tmp_path, name, message):
    # Read as JSON here, these rows would be read where LLaMA-Factory fails on the file (a .txt file's lines are
    # one 'text' column to it, with no conversations; a .gz file it refuses).
    rows = file_rows("glaive_toolcall_en_demo")[:2]
    text = "".join(json.dumps(row) + "\n" for row in rows).encode()
    (tmp_path / name).write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"x": {**entries()["glaive_toolcall_en_demo"], "file_name": name}}))
    with pytest.raises(ValueError) as raised:
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True)
    assert message.format(path=tmp_path / name) in str(raised.value)
    assert "entry 'x'" in str(raised.value)


def test_a_folder_holding_a_subfolder_is_refused_as_llamafactory_refuses_it(tmp_path):
    (tmp_path / "parts" / "old").mkdir(parents=True)
    (tmp_path / "parts" / "a.json").write_text(json.dumps(file_rows("glaive_toolcall_en_demo")[:2]))
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"parts": {**entries()["glaive_toolcall_en_demo"], "file_name": "parts"}}))
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'parts' / 'old'} is a folder, which LLaMA-Factory "
                                                   f"refuses")):
        td.load("llamafactory", dataset_info=str(tmp_path), dataset="parts", split="train", streaming=True)
    (tmp_path / "parts" / "old").rmdir()
    assert len(list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="parts", split="train",
                            streaming=True))) == 2


def test_a_key_llamafactory_does_not_read_is_said_with_the_key_meant(tmp_path, caplog):
    # LLaMA-Factory ignores "colums": the defaults (no tools column) apply there, and here, but not silently.
    shutil.copy(LF_DATA / "glaive_toolcall_en_demo.json", tmp_path)
    entry = entries()["glaive_toolcall_en_demo"]
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {"x": {"file_name": entry["file_name"], "formatting": "sharegpt", "colums": entry["columns"]}}))
    with caplog.at_level(logging.WARNING, logger="tooluse_datasets"):
        rows = list(td.load("llamafactory", dataset_info=str(tmp_path), dataset="x", split="train", streaming=True))
    said = [r.getMessage() for r in caplog.records if "'colums'" in r.getMessage()]
    assert said and "is not one LLaMA-Factory reads" in said[0] and "did you mean 'columns'?" in said[0]
    assert all(row["tools"] == [] for row in rows)  # as LLaMA-Factory reads the entry: no tools column


def test_a_turn_key_llamafactory_does_not_read_is_said(tmp_path, caplog):
    # A per-turn "weight" (another trainer's loss mask): LLaMA-Factory trains every gpt turn regardless, and this
    # reader drops the key as it does, but not silently. A null key (an OpenAI-style "tool_calls": null) says nothing.
    rows = file_rows("glaive_toolcall_en_demo")[:2]
    rows[0]["conversations"][1]["weight"] = 0
    rows[1]["conversations"][0]["tool_calls"] = None
    path = write_rows(tmp_path, rows)
    with caplog.at_level(logging.WARNING, logger="tooluse_datasets"):
        read = list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    said = [r.getMessage() for r in caplog.records if "turns of the file have" in r.getMessage()]
    assert len(said) == 1 and "'weight' key, which LLaMA-Factory's sharegpt reading ignores" in said[0]
    assert [r["messages"] for r in read] == [r["messages"] for r in entry_rows("glaive_toolcall_en_demo")[:2]]
