"""Defects an audit found, each pinned by the behaviour that fixes it: the "all" mix and split dicts, LLaMA-Factory
columns of the wrong type, ms-swift values nested too deep and media tags, td.SOURCES, `show --row` across
splits, and the unknown-option message."""
from __future__ import annotations

import json
from collections import Counter

import pytest

import tooluse_datasets as td
from tooluse_datasets.builders.ms_swift.source import MsSwiftSource
from tooluse_datasets.builders.ms_swift.writer import unified_to_swift
from tooluse_datasets.cli import main
from tooluse_datasets.source import RowContext


def _write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


# -- 1. "all" has one train split: a source's {split: files} gives its train files only -----------------------


def test_all_refuses_a_sources_split_dict_with_splits_other_than_train(cache_dir):
    files = td.sample_files("ms_swift")["train"]
    given = {"ms_swift": {"train": files, "test": files[:1]}}
    for streaming in (True, False):
        with pytest.raises(ValueError, match=r"source 'all' has one split, 'train': data_files\['ms_swift'\].*"
                                             r"not its splits \['test'\]"):
            td.load("all", split="train", data_files=given, streaming=streaming, cache_dir=cache_dir)


def test_all_takes_a_sources_train_files_from_its_split_dict_with_unique_ids(cache_dir):
    files = td.sample_files("ms_swift")["train"]
    alone = [r["id"] for r in td.load("ms_swift", data_files=files, split="train", streaming=True)]
    mixed = td.load("all", split="train", data_files={"ms_swift": {"train": files}}, cache_dir=cache_dir)
    ids = [r["id"] for r in mixed]
    assert ids == alone and len(set(ids)) == len(ids)


# -- 2. LLaMA-Factory: system, tools and media of the wrong type are refused, falsy ones too -------------------


LF_TURNS = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]


@pytest.mark.parametrize("column", ["system", "tools", "images", "videos", "audios"])
@pytest.mark.parametrize("value", [0, False, 0.0, {}, 1, True])
def test_llamafactory_refuses_wrong_typed_columns_even_when_falsy(tmp_path, column, value):
    path = _write_jsonl(tmp_path / "x.jsonl", [{"conversations": LF_TURNS, column: value}])
    with pytest.raises(td.InvalidValueError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert info.value.field == column and info.value.row == 0


@pytest.mark.parametrize("column", ["system", "tools"])
def test_llamafactory_refuses_a_list_where_text_belongs(tmp_path, column):
    path = _write_jsonl(tmp_path / "x.jsonl", [{"conversations": LF_TURNS, column: []}])
    with pytest.raises(td.InvalidValueError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert info.value.field == column


@pytest.mark.parametrize("entry", ["", 0, None, ["a.png"]])
def test_llamafactory_refuses_media_entries_that_are_no_path(tmp_path, entry):
    path = _write_jsonl(tmp_path / "x.jsonl", [{"conversations": [{"from": "human", "value": "<image>hi"},
                                                                  LF_TURNS[1]], "images": [entry]}])
    with pytest.raises(td.InvalidValueError) as info:
        list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert info.value.field == "images[0]"


def test_llamafactory_still_reads_absent_null_and_empty_columns_as_none(tmp_path):
    rows = [{"conversations": LF_TURNS},
            {"conversations": LF_TURNS, "system": None, "tools": None, "images": None},
            {"conversations": LF_TURNS, "system": "", "tools": "", "images": [], "videos": [], "audios": []},
            {"conversations": LF_TURNS, "tools": "[]"}]
    path = _write_jsonl(tmp_path / "x.jsonl", rows)
    loaded = list(td.load("llamafactory", data_files=path, split="train", streaming=True))
    assert [r["messages"] for r in loaded] == [[{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "hello"}]] * 4
    assert all(r["tools"] == [] and "images" not in r for r in loaded)


# -- 3. ms-swift: a value nested too deep names its field -------------------------------------------------------


DEEP = "[" * 300 + "]" * 300
TOOLS = '[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}]'
DEEP_ROWS = {
    "text_call": ({"tools": TOOLS, "messages": [
        {"role": "user", "content": "hi"}, {"role": "tool_call", "content": '{"name": "f", "arguments": {"a": ' + DEEP + "}}"},
        {"role": "tool_response", "content": "r"}, {"role": "assistant", "content": "done"}]},
        "messages[1].content.arguments"),
    "object_call": ({"tools": TOOLS, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool_call", "content": {"name": "f", "arguments": {"a": json.loads(DEEP)}}},
        {"role": "tool_response", "content": "r"}, {"role": "assistant", "content": "done"}]},
        "messages[1].content.arguments"),
    "openai_call": ({"tools": TOOLS, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": ' + DEEP + "}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}, {"role": "assistant", "content": "done"}]},
        "messages[1].tool_calls[0].function.arguments"),
    "anthropic_call": ({"tools": TOOLS, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": json.loads(DEEP)}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
        {"role": "assistant", "content": "done"}]},
        "messages[1].content[0].input"),
    "tools": ({"tools": '[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object",'
                        '"properties":{"x":' + DEEP + "}}}}]",
               "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "done"}]},
              "tools[0]"),
}


@pytest.mark.parametrize("case", sorted(DEEP_ROWS))
def test_ms_swift_names_the_field_of_a_value_nested_too_deep(case, tmp_path, cache_dir):
    row, field = DEEP_ROWS[case]
    path = _write_jsonl(tmp_path / f"{case}.jsonl", [row, {"messages": [{"role": "user", "content": "q"},
                                                                        {"role": "assistant", "content": "a"}]}])
    with pytest.raises(td.JsonValueError) as info:
        list(td.load("ms_swift", data_files=path, split="train", streaming=True))
    assert info.value.field == field and info.value.row == 0 and "254 levels" in info.value.message
    for streaming in (True, False):
        report = td.SkipReport()
        ds = td.load("ms_swift", data_files=path, split="train", streaming=streaming, on_error="skip", report=report,
                     cache_dir=cache_dir)
        assert len(list(ds)) == 1
        assert report.by_reason == {f"JsonValueError:{field}": 1}


# -- 4. ms-swift: missing media tags are added as ms-swift adds them ---------------------------------------------


SOURCE = MsSwiftSource()
CTX = RowContext("ms_swift", "media.jsonl", 0, "train")
MEDIA_ROWS = [
    # the audit's row: two images, one tag -> one more before the first message's text
    ({"messages": [{"role": "user", "content": "<image>Compare"}, {"role": "assistant", "content": "Same."}],
      "images": ["a.png", "b.png"]}, 0, "<image><image>Compare"),
    # a system message is not the first message ms-swift adds tags to; its own tags count
    ({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Compare"},
                   {"role": "assistant", "content": "Same."}], "images": ["a.png"], "audios": ["x.wav"]},
     1, "<audio><image>Compare"),
    ({"messages": [{"role": "system", "content": "<image>"}, {"role": "user", "content": "Compare"},
                   {"role": "assistant", "content": "Same."}], "images": ["a.png", "b.png"]},
     1, "<image>Compare"),
    # the system column, and tags in a tool result counting
    ({"system": "S", "tools": TOOLS, "messages": [
        {"role": "user", "content": "Look"}, {"role": "tool_call", "content": '{"name": "f", "arguments": {}}'},
        {"role": "tool_response", "content": '{"images": "<image>"}'}, {"role": "assistant", "content": "Done."}],
      "images": ["a.png", "b.png", "c.png"]}, 1, "<image><image>Look"),
    # an assistant message first (after the system one) gets them, before its pre-call text
    ({"tools": TOOLS, "messages": [
        {"role": "assistant", "content": "Let me look.\n"}, {"role": "tool_call", "content": '{"name": "f", "arguments": {}}'},
        {"role": "tool_response", "content": "r"}, {"role": "assistant", "content": "Done."}],
      "videos": ["v.mp4"]}, 0, "<video>Let me look."),
]


@pytest.mark.parametrize("native, index, content", MEDIA_ROWS)
def test_ms_swift_adds_the_media_tags_a_row_lacks_as_ms_swift_does(native, index, content):
    raw = SOURCE.to_raw(json.loads(json.dumps(native)), CTX)
    unified = SOURCE.to_unified(raw, CTX)
    assert unified["messages"][index]["content"] == content
    written = unified_to_swift(unified)  # refused before: "2 images but 1 <image> tags"
    for column, tag in (("images", "<image>"), ("audios", "<audio>"), ("videos", "<video>")):
        assert sum(m["content"].count(tag) for m in written["messages"]) == len(native.get(column, []))
    assert SOURCE.from_unified(unified) == raw  # the file's text is kept (meta.ms_swift_original)
    assert raw["messages"] == SOURCE.to_raw(json.loads(json.dumps(native)), CTX)["messages"]  # raw: as written
    shortcut = SOURCE.native_to_unified(json.loads(json.dumps(native)), CTX)
    if shortcut is not None:  # the one-loop path, where it takes the row, gives the same row
        assert json.dumps(shortcut) == json.dumps(unified)


def test_ms_swift_rows_with_too_few_media_tags_load_validate_and_export_as_swift(tmp_path, cache_dir):
    path = _write_jsonl(tmp_path / "media.jsonl", [native for native, _, _ in MEDIA_ROWS])
    streamed = list(td.load("ms_swift", data_files=path, split="train", streaming=True))
    mapped = list(td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir))
    assert streamed == mapped and [r["messages"][i]["content"] for r, (_, i, _) in zip(streamed, MEDIA_ROWS)] == [
        content for _, _, content in MEDIA_ROWS]
    report = td.SkipReport()
    swift = list(td.load("ms_swift", "swift", data_files=path, split="train", streaming=True, on_error="skip",
                         report=report))
    assert report.skipped == 0 and len(swift) == len(MEDIA_ROWS)
    again = list(td.load("ms_swift", data_files=_write_jsonl(tmp_path / "again.jsonl", swift), split="train",
                         streaming=True))
    assert [r["messages"] for r in again] == [r["messages"] for r in streamed]  # swift -> ms_swift: same turns
    assert td.validate("ms_swift", config="swift", data_files=path).failures() == {}


def test_ms_swift_refuses_missing_tags_it_cannot_place(tmp_path):
    path = _write_jsonl(tmp_path / "x.jsonl", [
        {"messages": [{"role": "system", "content": "only"}], "images": ["a.png"]},
        {"tools": TOOLS, "messages": [{"role": "tool_call", "content": '{"name": "f", "arguments": {}}'},
                                      {"role": "tool_response", "content": "r"}], "images": ["a.png"]}])
    report = td.SkipReport()
    assert list(td.load("ms_swift", data_files=path, split="train", streaming=True, on_error="skip",
                        report=report)) == []
    assert report.by_reason == {"InvalidValueError:messages": 1, "InvalidValueError:messages[0].content": 1}


# -- 5. td.SOURCES: the four sources, "all" apart ---------------------------------------------------------------


def test_sources_are_the_sources_each_loading_raw_and_all_is_accepted_apart():
    assert td.SOURCES == ("nestful", "ms_swift", "toolmind", "llamafactory")
    for source in td.SOURCES:
        splits = td.load(source, "raw", data_files=td.sample_files(source), streaming=True)
        assert sum(len(list(split)) for split in splits.values()) > 0
    mixed = td.load("all", data_files=td.sample_files("all"), split="train", streaming=True)
    assert Counter(r["source"] for r in mixed).keys() == set(td.SOURCES)
    with pytest.raises(ValueError, match=r"unknown source 'ALL' \(did you mean 'all'\?\)"):
        td.load("ALL")


def test_the_mix_keeps_its_decoded_shape_checks(cache_dir):
    """tests/test_decoded_shape.py runs over td.SOURCES, which no longer holds "all": run its checks on it here."""
    import test_decoded_shape as decoded_shape

    decoded_shape.test_every_access_path_gives_chat_shaped_rows("all", cache_dir)
    decoded_shape.test_iterating_a_prepared_split_gives_datasets_own_rows_in_the_same_key_order("all", cache_dir)


# -- 6. show --row without --split counts through every split ---------------------------------------------------


def _split_sizes(source: str) -> dict[str, int]:
    splits = td.load(source, data_files=td.sample_files(source), streaming=True)
    return {name: sum(1 for _ in ds) for name, ds in splits.items()}


def test_show_row_without_split_counts_through_every_split(capsys):
    sizes = _split_sizes("toolmind")
    first, second = list(sizes)[:2]
    n = sizes[first]  # the first row of the second split
    want = next(iter(td.load("toolmind", data_files=td.sample_files("toolmind"), split=second, streaming=True)))
    assert main(["show", "toolmind", "--sample", "--row", str(n)]) == 0
    assert want["id"] in capsys.readouterr().out
    total = sum(sizes.values())
    assert main(["show", "toolmind", "--sample", "--row", str(total)]) == 2
    err = capsys.readouterr().err
    counts = ", ".join(f"{name} {rows}" for name, rows in sizes.items())
    assert err == f"error: toolmind: no row {total} in split(s) {', '.join(sizes)} ({total} rows: {counts})\n"


# -- 7. an unknown option lists the source's own options --------------------------------------------------------


@pytest.mark.parametrize("source", ["nestful", "toolmind", "all"])
def test_an_unknown_option_lists_the_sources_own_options_and_loads_arguments_apart(source):
    with pytest.raises(ValueError) as info:
        td.load(source, data_files=td.sample_files(source), streaming=True, nope=1)
    message = str(info.value)
    options = message.split("its options: ", 1)[1].split(" (", 1)[0].split(", ")
    assert message.startswith(f"{source} has no option 'nope'; its options: ")
    assert "batch_size" in options and "shard_bytes" in options
    assert not {"on_error", "prepare_splits", "revision", "validate"} & set(options)
    assert message.endswith("(load() itself also takes revision, on_error, cache_dir, num_proc, report, validate, "
                            "download_mode, keep_in_memory)")
    if source == "toolmind":
        assert "messages_column" in options


def test_an_unknown_option_on_the_command_line_lists_the_sources_options(capsys):
    assert main(["stats", "nestful", "--sample", "--option", "nope=1"]) == 2
    err = capsys.readouterr().err
    assert "nestful has no option 'nope'" in err and "prepare_splits" not in err.split("(load()")[0]


def test_an_unknown_option_given_to_the_builder_lists_the_sources_own_options_too():
    """validate and the mirror reach the builder without load()'s check: the same list, no internals."""
    with pytest.raises(ValueError) as info:
        td.validate("toolmind", data_files=td.sample_files("toolmind"), nope=1)
    options = str(info.value).split("its options: ", 1)[1].split(", ")
    assert "messages_column" in options and not {"on_error", "prepare_splits", "revision", "validate"} & set(options)
