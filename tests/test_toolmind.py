"""ToolMind (cleaned & rectified): reader, splits, `toolmind` writer, generator, family options."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td
from tooluse_datasets import arrow_rows, codec
from tooluse_datasets.builders.toolmind import SOURCE, ToolMindSource
from tooluse_datasets.builders.toolmind import protocol as P
from tooluse_datasets.builders.toolmind.source import ToolMindOptions, decode_messages
from tooluse_datasets.builders.toolmind.system_prompt import (PROTOCOL_TEXT, parse_system_prompt,
                                                               render_system_prompt)
from tooluse_datasets.builders.toolmind.upstream import SPLIT_TABLE, hf_split_name
from tooluse_datasets.builders.toolmind.writer import TOOLMIND_FORMAT, toolmind_messages, write_toolmind_row
from tooluse_datasets.errors import (ConversionError, InvalidJsonError, InvalidValueError, MissingFieldError,
                                     SkipReport)
from tooluse_datasets.schema import message, tool_call, unified_row
from tooluse_datasets.validation import check_row, validate_unified
from tooluse_datasets.shards.plan import plan_file
from tooluse_datasets.source import RowContext, SplitPlan

from conftest import SHARED_DATA, benchmark_module, count_calls, shared_data
from hermes_template import render


gen = benchmark_module("generate_toolmind")

GENERATED_ROWS = 350
SMALL = gen.GeneratorOptions(seed=11, max_chars=20_000)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("toolmind") / "generated.parquet"
    gen.write_parquet(str(path), GENERATED_ROWS, SMALL, row_group_size=50)
    return str(path)


@pytest.fixture(scope="module")
def generated_rows(generated):
    return pq.read_table(generated).to_pylist()


def convert(native: dict, source: ToolMindSource = SOURCE, row: int = 0, split: str = "train") -> dict:
    ctx = RowContext("toolmind", "test", row, split)
    return source.to_unified(source.to_raw(native, ctx), ctx)


def write_parquet(path, rows: list[dict]) -> str:
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return str(path)


def write_jsonl(path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


TOOLS = [{"type": "function", "function": {"name": "get_time", "description": "Current time in a zone",
                                           "parameters": {"type": "object",
                                                          "properties": {"tz": {"type": "string"}},
                                                          "required": ["tz"]}}}]


def conversation(*, call_key: str = "arguments", end_on_call: bool = False) -> list[dict]:
    """A small FSM-valid row written the way the card shows it."""
    call = json.dumps({"name": "get_time", call_key: {"tz": "Europe/Paris"}})
    msgs = [{"role": "system", "content": render_system_prompt(TOOLS, "Answer briefly.")},
            {"role": "user", "content": "What time is it in Paris?"},
            {"role": "reasoning", "content": "<think>The get_time tool answers this.</think>"},
            {"role": "tool_call", "content": f"<tool_call>{call}</tool_call>"}]
    if end_on_call:
        return msgs
    return msgs + [{"role": "tool_output", "content": '<tool_response>{"time": "10:00"}</tool_response>'},
                   {"role": "reasoning", "content": "<think>It is 10:00.</think>"},
                   {"role": "answer", "content": "<answer>It is 10:00 in Paris.</answer>"}]


def native_row(messages: list[dict], split: str = "synthetic", **extra) -> dict:
    return {"messages": json.dumps(messages), "split": split, **extra}


# --------------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------------


def test_generator_mix_is_the_cards_and_every_row_passes_the_fsm(generated_rows):
    counts = dict(gen.split_counts(GENERATED_ROWS))
    assert list(counts) == [s.value for s in SPLIT_TABLE]
    assert sum(counts.values()) == GENERATED_ROWS and min(counts.values()) >= 1
    # proportions within one row of the card's
    for split in SPLIT_TABLE:
        assert abs(counts[split.value] - GENERATED_ROWS * split.rows / 279_737) <= 1.0
    seen = [r["split"] for r in generated_rows]
    assert seen == gen.split_of_rows(GENERATED_ROWS)  # grouped, card order
    lengths = []
    calls_per_turn_max = 0
    for r in generated_rows:
        msgs = json.loads(r["messages"])
        roles = [m["role"] for m in msgs]
        assert P.fsm_violation(roles) is None, roles
        lengths.append(len(r["messages"]))
        run = 0
        for role in roles:
            run = run + 1 if role == "tool_call" else (run if role in ("tool_output", "reasoning") else 0)
            calls_per_turn_max = max(calls_per_turn_max, run)
    assert min(lengths) >= 1_000 and max(lengths) <= SMALL.max_chars
    assert calls_per_turn_max >= 2  # several calls in one user turn
    assert sum(1 for r in generated_rows if not r["messages"].isascii() or "\\u" in r["messages"]) > 10  # unicode
    assert sum(r["messages"].count('"role": "user"') > 1 for r in generated_rows) > 10  # multi-turn loops


def test_generator_is_deterministic_and_independent_of_workers(tmp_path):
    a = gen.write_parquet(str(tmp_path / "a.parquet"), 40, SMALL, row_group_size=7, workers=1)
    b = gen.write_parquet(str(tmp_path / "b.parquet"), 40, SMALL, row_group_size=13, workers=2)
    assert a["text_chars"] == b["text_chars"]
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    meta = pq.ParquetFile(tmp_path / "a.parquet").metadata
    assert meta.num_row_groups == 6 and meta.row_group(0).column(0).compression == "ZSTD"
    other = next(gen.generate_rows(40, gen.GeneratorOptions(seed=12, max_chars=20_000)))
    assert other["messages"] != pq.read_table(tmp_path / "a.parquet").column("messages")[0].as_py()


# --------------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------------


def test_generated_rows_round_trip_exactly(generated_rows):
    padded = 0
    for i, native in enumerate(generated_rows):
        ctx = RowContext("toolmind", "generated.parquet", i, "")
        raw = SOURCE.to_raw(native, ctx)
        row = SOURCE.to_unified(raw, ctx)
        validate_unified(row)
        assert "source_messages" not in row["meta"] and "messages_text" not in row["meta"]
        written = write_toolmind_row(row)
        assert written["messages"] == native["messages"], i
        assert written["split"] == native["split"] and written["bridges"] == []
        assert SOURCE.from_unified(row) == raw
        padded += row["meta"].get("wrapper_padding") == "\n"
    assert padded >= 1  # both wrapper styles were exercised


def test_utf8_encoded_rows_round_trip_exactly(tmp_path):
    rows = list(gen.generate_rows(30, gen.GeneratorOptions(seed=3, ensure_ascii=False, unicode_share=1.0,
                                                            max_chars=8_000)))
    assert not all(r["messages"].isascii() for r in rows)
    for i, native in enumerate(rows):
        row = convert(native, row=i)
        assert row["meta"].get("messages_encoding") == "json-utf8"
        assert write_toolmind_row(row)["messages"] == native["messages"]


def test_a_raw_del_character_round_trips_in_both_spellings():
    """json.dumps escapes DEL (U+007F) only with ensure_ascii, although DEL is ASCII: a text holding a raw DEL
    was written without it, and one holding \\u007f with it."""
    msgs = conversation()
    msgs[1]["content"] = "What time is it in Paris?\x7f"
    msgs[6]["content"] = "<answer>It is 10:00 in Par\x7fis.</answer>"
    for ensure_ascii, encoding in ((False, "json-utf8"), (True, None)):
        text = json.dumps(msgs, ensure_ascii=ensure_ascii)
        assert text.isascii() and ("\x7f" in text) != ensure_ascii
        row = convert({"messages": text, "split": "synthetic"})
        assert row["meta"].get("messages_encoding") == encoding and "messages_text" not in row["meta"]
        assert row["messages"][-1]["content"] == "It is 10:00 in Par\x7fis."
        assert write_toolmind_row(row)["messages"] == text


def test_unreproducible_text_is_kept_verbatim_and_restored():
    msgs = conversation()
    text = json.dumps(msgs, indent=1)  # not how the upstream serializer writes
    msgs[3]["content"] = '<tool_call>{"arguments": {"tz": "Europe/Paris"}, "name": "get_time"}</tool_call>'
    msgs[2]["content"] = "<think>  The get_time tool answers this.\n</think>"
    text = json.dumps(msgs, indent=1)
    row = convert({"messages": text, "split": "synthetic"})
    assert row["meta"]["messages_encoding"] == "verbatim"
    assert set(row["meta"]["content"]) == {"2", "3"}
    assert row["messages"][2]["reasoning_content"] == "The get_time tool answers this."
    assert write_toolmind_row(row)["messages"] == text
    # an edit invalidates the recorded originals instead of resurrecting stale text
    row["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"tz": "Asia/Tokyo"}
    edited = json.loads(write_toolmind_row(row)["messages"])
    assert edited[3]["content"] == '<tool_call>{"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}</tool_call>'



def test_an_edit_that_python_equality_cannot_see_invalidates_the_recorded_call():
    """1, 1.0 and True are equal in Python but not in JSON: changing one into another is an edit."""
    msgs = conversation()
    msgs[3]["content"] = '<tool_call>{"name":"get_time","arguments":{"tz":"Europe/Paris","n":1}}</tool_call>'
    row = convert({"messages": json.dumps(msgs), "split": "synthetic"})
    assert set(row["meta"]["content"]) == {"3"}
    assert json.loads(write_toolmind_row(row)["messages"])[3]["content"] == msgs[3]["content"]
    for value, text in ((True, "true"), (1.0, "1.0")):
        row["messages"][2]["tool_calls"][0]["function"]["arguments"]["n"] = value
        edited = json.loads(write_toolmind_row(row)["messages"])
        assert edited[3]["content"] == ('<tool_call>{"name": "get_time", "arguments": {"tz": "Europe/Paris", '
                                        f'"n": {text}}}}}</tool_call>')


def test_a_tool_edit_that_python_equality_cannot_see_invalidates_the_recorded_system_text():
    tools = json.loads(json.dumps(TOOLS))
    tools[0]["function"]["parameters"]["properties"]["n"] = {"type": "integer", "default": 1}
    rendered = render_system_prompt(tools, "Answer briefly.")
    compact = rendered.replace(json.dumps(tools[0], ensure_ascii=False), json.dumps(tools[0], separators=(",", ":")))
    assert compact != rendered  # a spelling the writer would not reproduce: the row keeps it in meta
    msgs = conversation()
    msgs[0]["content"] = compact
    row = convert({"messages": json.dumps(msgs), "split": "synthetic"})
    assert json.loads(write_toolmind_row(row)["messages"])[0]["content"] == compact
    row["tools"][0]["function"]["parameters"]["properties"]["n"]["default"] = True
    written = json.loads(write_toolmind_row(row)["messages"])[0]["content"]
    assert parse_system_prompt(written).tools[0]["function"]["parameters"]["properties"]["n"]["default"] is True

def test_toolmind_config_reproduces_the_file_and_map_style_equals_streaming(generated, generated_rows, cache_dir):
    streamed = td.load("toolmind", "toolmind", data_files=generated, streaming=True)
    by_split = {name: list(ds) for name, ds in streamed.items()}
    assert [r["messages"] for name in by_split for r in by_split[name]] == [r["messages"] for r in generated_rows]
    mapped = td.load("toolmind", "unified", data_files=generated, cache_dir=cache_dir)
    unified_stream = td.load("toolmind", "unified", data_files=generated, streaming=True)
    assert list(mapped) == list(unified_stream)
    for name in mapped:
        assert list(mapped[name]) == list(unified_stream[name])
        assert mapped[name].features.arrow_schema == td.features("toolmind").arrow_schema


# --------------------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------------------


def test_each_split_holds_exactly_its_rows(generated):
    expected = dict(gen.split_counts(GENERATED_ROWS))
    splits = td.load("toolmind", "raw", data_files=generated, streaming=True)
    assert list(splits) == [s.hf_name for s in SPLIT_TABLE]
    first = 0
    for info in SPLIT_TABLE:
        rows = list(splits[info.hf_name])
        assert len(rows) == expected[info.value]
        assert {r["split"] for r in rows} == {info.value}
        assert [int(r["id"]) for r in rows] == list(range(first, first + len(rows)))  # file row numbers
        first += len(rows)


def test_reading_one_split_never_decodes_other_splits_and_skips_their_row_groups(tmp_path, monkeypatch):
    good = native_row(conversation(), split="tau-train")
    rows = [{"messages": "[{not json", "split": "synthetic"}] * 6 + [good] * 3
    path = tmp_path / "mixed.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=3)
    read_groups = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        read_groups.append(tuple(kwargs.get("row_groups") or ()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    tau = list(td.load("toolmind", data_files=str(path), split="tau_train", streaming=True))
    assert [r["id"] for r in tau] == ["toolmind/tau-train/6", "toolmind/tau-train/7", "toolmind/tau-train/8"]
    assert read_groups == [(2,)]  # the synthetic row groups were pruned by their statistics
    with pytest.raises(InvalidJsonError) as err:
        list(td.load("toolmind", data_files=str(path), split="synthetic", streaming=True))
    assert err.value.row == 0 and err.value.field == "messages"


def test_a_map_style_load_of_one_split_converts_that_split_only(generated, monkeypatch, cache_dir):
    """datasets prepares every split a builder has; load(split=...) prepares the ones it reads, so one split
    of ToolMind does not cost the conversion of all seven. A split that does not exist is refused before any
    row is converted."""
    converted = count_calls(monkeypatch, ToolMindSource, "to_raw")
    tau = td.load("toolmind", data_files=generated, split="tau_train", cache_dir=cache_dir)
    expected = dict(gen.split_counts(GENERATED_ROWS))
    assert len(tau) == expected["tau-train"] == converted["to_raw"] > 0
    assert {row["subset"] for row in tau} == {"tau-train"}
    both = td.load("toolmind", data_files=generated, split="tau_train[:2]+When2Call", cache_dir=cache_dir)
    assert len(both) == 2 + expected["When2Call"]
    converted["to_raw"] = 0
    with pytest.raises(ValueError, match=r"no split 'xlam' \(did you mean 'xlam_function_calling_60k'\?\); its splits here: synthetic, "):
        td.load("toolmind", data_files=generated, split="xlam", cache_dir=cache_dir)
    assert converted["to_raw"] == 0
    everything = td.load("toolmind", data_files=generated, cache_dir=cache_dir)
    assert list(everything) == [info.hf_name for info in SPLIT_TABLE]
    assert list(everything["tau_train"]) == list(tau)
    # Once every split is cached, a split is read from that cache: nothing is converted again.
    converted["to_raw"] = 0
    button = td.load("toolmind", data_files=generated, split="BUTTONInstruct", cache_dir=cache_dir)
    assert list(button) == list(everything["BUTTONInstruct"]) and converted["to_raw"] == 0
    with pytest.raises(ValueError, match=r"no split 'xlam' \(did you mean 'xlam_function_calling_60k'\?\); its splits here: synthetic, "):
        td.load("toolmind", data_files=generated, split="xlam", cache_dir=cache_dir)


def test_a_map_style_split_expression_reading_rows_twice_is_refused(generated, cache_dir):
    """"tau_train+tau_train" gave every row of the split twice with the same ids (a stream of it is refused);
    parts that overlap are refused too, and parts that do not overlap are read as given."""
    tau = td.load("toolmind", data_files=generated, split="tau_train", cache_dir=cache_dir)
    for split in ("tau_train+tau_train", "tau_train[:2]+When2Call+tau_train[1:3]", "tau_train+tau_train[-1:]"):
        with pytest.raises(ValueError, match=r"of 'tau_train' more than once: they would come twice with the same ids"):
            td.load("toolmind", data_files=generated, split=split, cache_dir=cache_dir)
    halves = td.load("toolmind", data_files=generated, split="tau_train[:50%]+tau_train[50%:]", cache_dir=cache_dir)
    assert [row["id"] for row in halves] == [row["id"] for row in tau]


def test_batches_are_capped_by_rows_and_by_characters(generated, generated_rows):
    source = ToolMindSource(ToolMindOptions(batch_size=40, max_batch_chars=200_000))
    (shard,) = plan_file(generated, target_bytes=1 << 40)  # the whole file as one shard
    batches = [b.items for b in source.read(shard, SplitPlan("train", (shard,)))]
    numbers = [n for batch in batches for n, _ in batch]
    assert numbers == list(range(GENERATED_ROWS))  # nothing lost, order kept
    for batch in batches:
        chars = [len(row["messages"]) for _, row in batch]
        assert len(batch) <= 40 and (sum(chars) <= 200_000 or len(batch) == 1)
    assert any(len(b) == 40 for b in batches) and any(len(b) < 40 for b in batches[:-1])


def test_split_names_follow_the_table_and_the_rule():
    assert [hf_split_name(s.value) for s in SPLIT_TABLE] == [
        "synthetic", "xlam_function_calling_60k", "APIGen_MT_5k", "glaive_function_calling_v2", "When2Call",
        "BUTTONInstruct", "tau_train"]
    assert hf_split_name("mobile-actions v2") == "mobile_actions_v2"
    assert hf_split_name(None) == "unlabeled"


def test_files_without_a_split_column_use_data_files_splits(tmp_path):
    row = {"messages": json.dumps(conversation())}
    files = {"train": write_jsonl(tmp_path / "a.jsonl", [row, row]), "test": write_jsonl(tmp_path / "b.jsonl", [row])}
    ds = td.load("toolmind", data_files=files, streaming=True)
    assert {name: len(list(d)) for name, d in ds.items()} == {"train": 2, "test": 1}
    r = next(iter(ds["test"]))
    assert r["subset"] == "test" and r["id"] == "toolmind/test/b/0" and r["meta"]["no_split_value"] is True
    raw = next(iter(td.load("toolmind", "raw", data_files=files, split="test", streaming=True)))
    assert raw["split"] is None


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_a_split_column_the_user_names_must_exist(tmp_path, cache_dir, streaming):
    """The default column may be absent (one train split); a column named by the user and found in no file is
    an error, not every row silently put in ``train`` (a typo such as ``split_column="sourc"``)."""
    parquet = td.sample_files("toolmind")["train"][0]
    jsonl = write_jsonl(tmp_path / "a.jsonl", [native_row(conversation())])
    with pytest.raises(MissingFieldError, match="split_column='sourc': the file has no column") as err:
        td.load("toolmind", data_files=parquet, split_column="sourc", streaming=streaming, cache_dir=cache_dir)
    assert (err.value.file, err.value.field) == (parquet, "sourc")
    assert str(err.value).startswith(f"toolmind, {parquet}, field 'sourc': ")  # as every reader's error names it
    with pytest.raises(MissingFieldError, match="^toolmind, field 'sourc': split_column='sourc': none of the 2 files"):
        td.load("toolmind", data_files=[parquet, jsonl], split_column="sourc", streaming=streaming,
                cache_dir=cache_dir)
    renamed = write_jsonl(tmp_path / "b.jsonl", [{"messages": native_row(conversation())["messages"], "origin": "x"}])
    ds = td.load("toolmind", data_files=renamed, split_column="origin", streaming=streaming, cache_dir=cache_dir)
    assert list(ds) == ["x"]


@pytest.mark.parametrize("option", ["messages_column", "id_column"])
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_a_column_the_file_lacks_is_one_error_about_the_file_not_a_skip_of_every_row(tmp_path, cache_dir, option,
                                                                                      streaming):
    """messages_column="conversations" on a file that has no such column reported every row (row has no
    'conversations') and, with on_error="skip", gave an empty dataset: the file is refused once, naming it and
    its columns, whatever on_error says. JSON: when none of its first rows has the column; a first row without
    it among rows that have it is that row's error."""
    parquet = td.sample_files("toolmind")["train"][0]
    rows = pq.read_table(parquet).to_pylist()
    jsonl = write_jsonl(tmp_path / "a.jsonl", rows)
    for path, listed in ((parquet, "its columns: 'messages', 'split'"),
                         (jsonl, "the keys of its first rows: 'messages', 'split'")):
        with pytest.raises(MissingFieldError, match=f"{option}='conversations': the file has no column by that name "
                                                    f"\\({listed}\\)$") as err:
            td.load("toolmind", data_files=path, streaming=streaming, cache_dir=cache_dir, on_error="skip",
                    **{option: "conversations"})
        assert (err.value.file, err.value.field) == (path, "conversations")
    column = "messages" if option == "messages_column" else "uuid"
    later = write_jsonl(tmp_path / "b.jsonl", [{"split": "synthetic"}] + [{**row, "uuid": str(n)} for n, row in
                                                                         enumerate(rows)])
    report = SkipReport()
    ds = td.load("toolmind", data_files=later, streaming=streaming, cache_dir=cache_dir, on_error="skip",
                 report=report, **{option: column})
    assert sum(len(list(split)) for split in ds.values()) == len(rows) and report.skipped == 1


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_a_file_whose_rows_lack_the_default_messages_column_is_rows_skipped_not_the_load_stopped(tmp_path, cache_dir,
                                                                                                streaming):
    """The column check is for columns the user names: a one-row file whose row lost its `messages` (the default
    column) is that row's error, skipped and counted under on_error="skip", the other files read."""
    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    good = write_jsonl(tmp_path / "a.jsonl", rows)
    broken = write_jsonl(tmp_path / "b.jsonl", [{"split": rows[0]["split"]}])
    report = SkipReport()
    ds = td.load("toolmind", data_files=[good, broken], streaming=streaming, cache_dir=cache_dir, on_error="skip",
                 report=report)
    assert sum(len(list(split)) for split in ds.values()) == len(rows)
    assert report.skipped == 1 and list(report.by_reason) == ["MissingFieldError:messages"]


def test_a_row_whose_messages_are_in_another_column_names_the_option_that_reads_them(tmp_path):
    path = write_parquet(tmp_path / "drtulu.parquet", [{"id": "dr-1", "conversations": conversation()}])
    with pytest.raises(MissingFieldError) as err:
        list(td.load("toolmind", data_files=path, split="train", split_column=None, streaming=True))
    assert err.value.field == "messages" and "messages_column='conversations'" in str(err.value)


@pytest.mark.parametrize("option", ["split_column", "id_column", "messages_column"])
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_an_empty_column_name_is_refused_before_anything_is_read(tmp_path, cache_dir, option, streaming):
    """split_column="" (``--option split_column=`` on the command line) put every row in one `train` split, and
    id_column="" numbered rows by position, both silently, where an empty messages_column was refused: None is
    how a column is left out."""
    with pytest.raises(ValueError, match=f"^{option} must name a column"):
        td.load("toolmind", data_files=td.sample_files("toolmind"), streaming=streaming, cache_dir=cache_dir,
                **{option: ""})
    assert not list(Path(cache_dir).glob("**/*.arrow"))


def test_jsonl_rows_outside_every_split_are_reported_not_dropped(tmp_path):
    good = native_row(conversation())
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(good) + "\n{broken\n" + json.dumps({**good, "split": 7}) + "\n")
    report = SkipReport()
    ds = td.load("toolmind", data_files=str(path), streaming=True, on_error="skip", report=report)
    assert [len(list(d)) for d in ds.values()] == [1]
    assert report.skipped == 2 and set(report.by_reason) == {"InvalidJsonError:<line>", "InvalidValueError:split"}


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_rows_of_no_split_are_reported_by_the_one_split_read(tmp_path, cache_dir, streaming):
    """Rows that belong to no split (a Parquet file that cannot be read, a JSON line that does not parse) are
    reported by the first split read: loading one split other than the first used to lose them silently,
    with on_error="raise" too."""
    import shutil

    sample = td.sample_files("toolmind")["train"][0]
    good = shutil.copy(sample, tmp_path / "part-0.parquet")
    truncated = tmp_path / "part-1.parquet"
    truncated.write_bytes(Path(sample).read_bytes()[:-100])
    files = [str(good), str(truncated)]
    with pytest.raises(InvalidValueError, match="cannot be read as Parquet") as info:
        list(td.load("toolmind", data_files=files, split="tau_train", streaming=streaming, cache_dir=cache_dir))
    assert info.value.file.endswith("part-1.parquet")
    report = SkipReport()
    ds = td.load("toolmind", data_files=files, split="tau_train", streaming=streaming, on_error="skip",
                 report=report, cache_dir=cache_dir)
    assert [r["id"] for r in ds] == ["toolmind/tau-train/part-0/19", "toolmind/tau-train/part-0/20"]
    assert (report.rows_read, report.skipped, dict(report.by_reason)) == (3, 1, {"InvalidValueError:<file>": 1})

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(native_row(conversation())) + "\n{broken\n"
                    + json.dumps({**native_row(conversation()), "split": "tau-train"}) + "\n")
    with pytest.raises(td.InvalidJsonError):
        list(td.load("toolmind", data_files=str(rows), split="tau_train", streaming=streaming,
                     cache_dir=cache_dir))
    report = SkipReport()
    ds = td.load("toolmind", data_files=str(rows), split="tau_train", streaming=streaming, on_error="skip",
                 report=report, cache_dir=cache_dir)
    assert len(list(ds)) == 1 and report.skipped == 1 and set(report.by_reason) == {"InvalidJsonError:<line>"}


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_a_split_asked_of_a_file_that_cannot_be_read_is_that_files_error(tmp_path, cache_dir, streaming):
    """Not "toolmind has no split 'tau_train'; its splits here: train", which hid why."""
    truncated = tmp_path / "data.parquet"
    truncated.write_bytes(Path(td.sample_files("toolmind")["train"][0]).read_bytes()[:-100])
    for on_error in ("raise", "skip"):
        with pytest.raises(InvalidValueError, match="cannot be read as Parquet") as info:
            list(td.load("toolmind", data_files=str(truncated), split="tau_train", streaming=streaming,
                         on_error=on_error, cache_dir=cache_dir))
        assert info.value.source == "toolmind" and info.value.file.endswith("data.parquet")


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_a_truncated_compressed_file_keeps_every_row_before_the_cut(tmp_path, cache_dir, streaming):
    """Rows read before a read error are converted, and the error is one reported skip: batches regrouped
    in characters used to drop the rows they held when the error came (23 of 151 here)."""
    import gzip
    import zlib

    rows = list(gen.generate_rows(200, gen.GeneratorOptions(seed=3, max_chars=3_000)))
    packed = gzip.compress("".join(json.dumps({"messages": r["messages"]}) + "\n" for r in rows).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    complete = zlib.decompressobj(31).decompress(cut.read_bytes()).count(b"\n")
    report = SkipReport(keep_all=True)
    loaded = list(td.load("toolmind", data_files=str(cut), split="train", streaming=streaming, on_error="skip",
                          report=report, cache_dir=cache_dir, split_column=None))
    assert 64 < complete < 200 and len(loaded) == complete
    assert [r["field"] for r in report.rows] == ["<file>"] and report.rows_read == complete + 1


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_a_truncated_compressed_file_keeps_its_rows_in_their_splits(tmp_path, cache_dir, streaming):
    """A file cut short was taken for one that cannot be read at all: its rows before the cut all loaded into
    one `train` split (or, beside another file, were each reported as having no split value), and a split
    asked of it was the file's error. Its rows keep their splits, and the cut is one error, reported once."""
    import gzip
    import zlib

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist() * 20
    packed = gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    complete = zlib.decompressobj(31).decompress(cut.read_bytes()).count(b"\n")
    expected: dict[str, int] = {}
    for row in rows[:complete]:
        expected[hf_split_name(row["split"])] = expected.get(hf_split_name(row["split"]), 0) + 1
    assert 21 < complete < len(rows) and len(expected) == 7
    report = SkipReport(keep_all=True)
    loaded = td.load("toolmind", "raw", data_files=str(cut), streaming=streaming, on_error="skip", report=report,
                     cache_dir=cache_dir)
    assert {name: [r["split"] for r in ds] for name, ds in loaded.items()} == \
        {name: [r["split"] for r in rows[:complete] if hf_split_name(r["split"]) == name] for name in expected}
    assert [(r["row"], r["field"]) for r in report.rows] == [(None, "<file>")]
    assert report.rows_read == complete + 1
    for split in ("tau_train", "synthetic"):  # one split alone: its rows, and the cut reported by it
        report = SkipReport(keep_all=True)
        ds = td.load("toolmind", "raw", data_files=str(cut), split=split, streaming=streaming, on_error="skip",
                     report=report, cache_dir=f"{cache_dir}/{split}")  # (not from the cache of every split)
        assert len(list(ds)) == expected[split]
        assert [(r["row"], r["field"]) for r in report.rows] == [(None, "<file>")]
    with pytest.raises(InvalidValueError, match="cannot be read") as info:
        for ds in td.load("toolmind", data_files=str(cut), streaming=streaming, cache_dir=f"{cache_dir}/raise").values():
            list(ds)
    assert info.value.file.endswith("cut.jsonl.gz") and info.value.field == "<file>"


@pytest.mark.parametrize("split_column", ["split", None])
def test_a_truncated_compressed_file_with_an_id_column_keeps_its_rows(tmp_path, cache_dir, split_column):
    """Reading the ids of a file cut short (id_column=) met the cut and failed the whole file before its rows
    were read: every row was lost, and with splits the cut was reported by each of them."""
    import gzip
    import zlib

    rows = [{**row, "uuid": f"u{i}"} for i, row in
            enumerate(pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist() * 20)]
    packed = gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    complete = zlib.decompressobj(31).decompress(cut.read_bytes()).count(b"\n")
    assert 21 < complete < len(rows)
    for streaming in (False, True):
        report = SkipReport(keep_all=True)
        loaded = td.load("toolmind", data_files=str(cut), streaming=streaming, on_error="skip", report=report,
                         cache_dir=cache_dir, id_column="uuid", split_column=split_column)
        ids = sorted(r["id"].rsplit("/", 1)[1] for ds in loaded.values() for r in ds)
        assert ids == sorted(f"u{i}" for i in range(complete)), streaming
        assert [(r["row"], r["field"]) for r in report.rows] == [(None, "<file>")], streaming


def test_a_parquet_file_is_planned_once_for_the_loads_of_its_splits(tmp_path, monkeypatch, generated):
    """The training split, then the evaluation split, of one file: the second load reuses the plan (the split
    values of every row group); a file rewritten since is planned anew."""
    from tooluse_datasets.builders.toolmind import splits

    path = tmp_path / "rows.parquet"
    path.write_bytes(Path(generated).read_bytes())
    planned: list[str] = []
    original = splits._parquet_values
    monkeypatch.setattr(splits, "_parquet_values", lambda *a: planned.append(a[0]) or original(*a))
    first = [r["id"] for r in td.load("toolmind", data_files=str(path), split="synthetic", streaming=True)]
    tau = [r["id"] for r in td.load("toolmind", data_files=str(path), split="tau_train", streaming=True)]
    assert len(planned) == 1 and first and tau
    rows = pq.read_table(path).slice(0, 60)
    pq.write_table(rows, path)
    again = [r["id"] for r in td.load("toolmind", data_files=str(path), split="synthetic", streaming=True)]
    assert len(planned) == 2 and again == [i for i in first if int(i.rsplit("/", 1)[1]) < 60]


@pytest.mark.parametrize("member", ["rows.parquet", "rows.jsonl"])
def test_a_zip_archive_rewritten_is_planned_anew(tmp_path, member):
    """A file of a zip archive is known by the archive's size and time too: the plan of the archive's earlier
    contents (row groups, line ranges) read the new rows as its old splits, here every one of them lost."""
    import os
    import zipfile

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    archive = tmp_path / "rows.zip"

    def write(part: list[dict], mtime: int) -> None:
        inner = tmp_path / member
        if member.endswith(".parquet"):
            pq.write_table(pa.Table.from_pylist(part), inner, row_group_size=2)
        else:
            write_jsonl(inner, part)
        with zipfile.ZipFile(archive, "w") as zf:
            zf.write(inner, member)
        os.utime(archive, (mtime, mtime))

    def splits() -> dict[str, list[str]]:
        loaded = td.load("toolmind", "raw", data_files=str(archive), streaming=True, on_error="skip")
        return {name: [r["messages"][1]["content"] for r in ds] for name, ds in loaded.items()}

    def expected(part: list[dict]) -> dict[str, list[str]]:
        by_split: dict[str, list[str]] = {}
        for row in part:
            by_split.setdefault(hf_split_name(row["split"]), []).append(json.loads(row["messages"])[1]["content"])
        return by_split

    synthetic = [r for r in rows if r["split"] == "synthetic"]
    others = [r for r in rows if r["split"] != "synthetic"]
    write(synthetic, 1_700_000_000)
    assert splits() == expected(synthetic)
    write(others, 1_700_000_100)
    assert splits() == expected(others)


def test_a_split_of_a_jsonl_file_parses_only_its_own_lines(tmp_path, monkeypatch):
    """Planning reads every line once and notes each row's split, parsing only the lines that do not end with
    a plain split value; a split then parses only its own lines (and the first split also those of no split,
    which it reports: the first split read, so loading one split alone reports them too), while rows and
    reports stay as before. A second load of the same file (the evaluation split after the training one)
    reuses the plan; a file rewritten since is planned anew."""
    good = native_row(conversation())
    lines = [json.dumps({**good, "split": "tau-train" if i in (0, 3, 6, 9) else "synthetic"}) for i in range(20)]
    lines[4:4] = ["", "{broken", json.dumps({**good, "split": 7})]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    parsed: list[bytes] = []
    original = codec.loads

    def spy(text):
        if isinstance(text, bytes) and text.startswith((b"{", b"\xef\xbb\xbf")):
            parsed.append(text)
        return original(text)

    monkeypatch.setattr(codec, "loads", spy)
    report = SkipReport()
    tau = list(td.load("toolmind", data_files=str(path), split="tau_train", streaming=True, on_error="skip",
                       report=report))
    assert [row["id"] for row in tau] == [f"toolmind/tau-train/{n}" for n in (0, 3, 9, 12)]
    assert report.skipped == 2  # the lines of no split: reported by the one split read
    # the plan: the broken line and the one whose split is 7; the split: its 4 and those 2, which it reports
    assert len(parsed) == 2 + 4 + 2
    parsed.clear()
    report = SkipReport()
    synthetic = list(td.load("toolmind", data_files=str(path), split="synthetic", streaming=True,
                             on_error="skip", report=report))
    assert len(synthetic) == 16 and report.skipped == 2
    assert len(parsed) == 16 + 2  # the plan of the first load
    parsed.clear()
    path.write_text("\n".join(lines + [json.dumps({**good, "split": "tau-train"})]) + "\n")
    tau = list(td.load("toolmind", data_files=str(path), split="tau_train", streaming=True, on_error="skip"))
    assert [row["id"] for row in tau] == [f"toolmind/tau-train/{n}" for n in (0, 3, 9, 12, 23)]
    assert len(parsed) == 2 + 5 + 2


def test_planning_reads_a_split_value_from_the_line_end_only_where_that_is_the_rows_own(tmp_path, monkeypatch):
    """A line ending with the split key and a plain string is planned without parsing; every other spelling is
    parsed: a split key inside a nested object or a string, an escaped value, a key that is not last, a
    duplicated key (its last value counts, as the parsers take it). The rows are those that parsing every line
    plans, and a broken line that ends like a row of tau-train is reported once, by that split."""
    from tooluse_datasets.builders.toolmind import splits

    good = native_row(conversation())
    messages = json.dumps(good["messages"])
    lines = [json.dumps({**good, "split": "synthetic"}),                                    # 0 planned unparsed
             '{"messages": %s, "meta": {"split": "tau-train"}}' % messages,                 # 1 no split: parsed
             '{"messages": %s, "split": "tau\\u002dtrain"}' % messages,                    # 2 escaped: parsed
             '{"split": "When2Call", "messages": %s}' % messages,                           # 3 not last: parsed
             '{"split": "synthetic", "messages": %s, "split": "When2Call"} ' % messages,    # 4 last counts
             '{"messages": %s, "x": [1, "split": "tau-train"}' % messages,               # 5 not JSON
             '{"messages": %s,"split":"tau-train"}\r' % messages,                           # 6 compact, CRLF
             '{"messages": "%s, \\"split\\": \\"When2Call\\"}"}' % "x"]              # 7 inside a string
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")

    def load(report):
        return {name: [row["id"] for row in ds] for name, ds in td.load(
            "toolmind", data_files=str(path), streaming=True, on_error="skip", report=report).items()}

    parsed: list[bytes] = []
    original = codec.loads
    monkeypatch.setattr(codec, "loads", lambda text: parsed.append(text) or original(text))
    splits._PLANS.clear()
    planned = splits._plan_json(str(path), "split", 1 << 20)
    assert [text.rstrip(b"\n") for text in parsed] == [lines[n].encode() for n in (1, 2, 3, 7)]
    report = SkipReport()
    fast = load(report)
    assert fast == {"synthetic": ["toolmind/synthetic/0"], "unlabeled": ["toolmind/unlabeled/1"],
                    "When2Call": ["toolmind/When2Call/3", "toolmind/When2Call/4"],
                    "tau_train": ["toolmind/tau-train/2", "toolmind/tau-train/6"]}
    assert report.rows_read == 8 and [(e.row, e.field) for e in report.examples] == [(5, "<line>"), (7, "messages")]

    monkeypatch.setattr(splits, "_TAIL_BYTES", 0)  # every line parsed, as before
    splits._PLANS.clear()
    assert splits._plan_json(str(path), "split", 1 << 20).bitmap_by_value.keys() == planned.bitmap_by_value.keys()
    slow_report = SkipReport()
    assert load(slow_report) == fast and slow_report.rows_read == 8
    assert sorted((e.row, e.field) for e in slow_report.examples) == [(5, "<line>"), (7, "messages")]


@pytest.mark.parametrize("layout", ["grouped", "interleaved"])
@pytest.mark.parametrize("shard_bytes", [1, 10**6])
def test_jsonl_splits_read_their_own_byte_ranges(tmp_path, monkeypatch, layout, shard_bytes):
    """Planning notes the byte ranges each split's lines fill. In a file grouped by split (upstream's layout) a
    split's shards hold its own lines and no other split's, so reading one split, or all seven, reads no line
    twice; where splits interleave, a range also spans the other lines between two of its own (unparsed).
    Either way every row is read by one split, once, numbered from the file's start without counting lines."""
    from tooluse_datasets.shards import lines as line_reader

    good = native_row(conversation())
    values = ["synthetic"] * 6 + ["tau-train"] * 4 + ["When2Call"] * 3
    if layout == "interleaved":
        values = [values[i] for i in (0, 6, 10, 1, 7, 11, 2, 8, 12, 3, 9, 4, 5)]
    values[2:2] = [None, None]  # a blank line, and a row of no split (the first split reports it)
    lines = [json.dumps({**good, "split": value}) for value in values]
    lines[2:4] = ["", "{broken"]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    monkeypatch.setattr(line_reader, "_count_lines_before", lambda *a: pytest.fail("a planned range counted lines"))

    source = ToolMindSource(ToolMindOptions(shard_bytes=shard_bytes))
    plans = source.plan({"train": [str(path)]})
    assert [p.name for p in plans] == ["synthetic", "When2Call", "tau_train"]  # the card's order
    rows_read = {}
    for plan in plans:
        own = [n for n, value in enumerate(values) if value == plan.selection.value]
        if plan.name == "synthetic":
            own = sorted(own + [3])  # the broken line: read and reported by the first split
        in_ranges = [n for shard in plan.shards for n, start in enumerate(starts[:-1]) if shard.start <= start < shard.stop]
        assert in_ranges == sorted(set(in_ranges))  # ranges in file order, none overlapping
        if layout == "grouped":
            assert set(in_ranges) <= set(own) | {2}  # no other split's line (2 is the blank one)
        if shard_bytes == 1:
            assert len(plan.shards) == len(own)  # one range a row
        rows_read[plan.name] = [n for shard in plan.shards for batch in source.read(shard, plan) for n, _ in batch.items]
        assert rows_read[plan.name] == own

    report = SkipReport()
    loaded = td.load("toolmind", data_files=str(path), streaming=True, on_error="skip", report=report,
                     shard_bytes=shard_bytes)
    ids = {name: [row["id"] for row in ds] for name, ds in loaded.items()}
    assert ids == {plan.name: [f"toolmind/{plan.selection.value}/{n}" for n in rows_read[plan.name] if n != 3]
                   for plan in plans}
    assert report.skipped == 1 and report.rows_read == len(values) - 1


# --------------------------------------------------------------------------------------------------
# Unified shape
# --------------------------------------------------------------------------------------------------


def test_unified_mapping_of_a_card_shaped_row():
    row = convert(native_row(conversation()), row=4)
    assert row["id"] == "toolmind/synthetic/4" and row["subset"] == "synthetic"
    assert row["tools"] == TOOLS
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    system, user, call_turn, result, answer = row["messages"]
    assert system["content"] == "Answer briefly."
    assert row["meta"]["system"].startswith(PROTOCOL_TEXT)
    assert call_turn == message("assistant", "", reasoning_content="The get_time tool answers this.",
                                tool_calls=[tool_call("call_0", "get_time", {"tz": "Europe/Paris"})])
    assert result == message("tool", '{"time": "10:00"}', tool_call_id="call_0", name="get_time")
    assert answer == message("assistant", "It is 10:00 in Paris.", reasoning_content="It is 10:00.")


def test_unified_rows_render_with_a_hermes_template(generated_rows):
    for i, native in enumerate(generated_rows[:: 25]):
        row = convert(native, row=i)
        text = render(td.strip_empty(row["messages"]), row["tools"])
        calls = [c for m in row["messages"] for c in m.get("tool_calls", [])]
        assert text.count('<tool_call>\n{"name": "') == len(calls)
        for c in calls:
            assert f'"name": "{c["function"]["name"]}", "arguments": {json.dumps(c["function"]["arguments"], ensure_ascii=False)}' in text
        assert text.count("<tool_response>") == sum(m["role"] == "tool" for m in row["messages"])
        reasoning = [m["reasoning_content"] for m in row["messages"] if m.get("reasoning_content")]
        assert text.count("<think>") == len(reasoning) and reasoning[-1] in text
        assert all(json.dumps(t, ensure_ascii=False) in text for t in row["tools"])


# --------------------------------------------------------------------------------------------------
# System prompt tolerance
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graphsyn_tools():
    data = json.loads(shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json").read_text())
    return data["rows"][0]["tools"]


@pytest.mark.parametrize("layout", ["array", "lines", "tools_block", "pretty"])
def test_tool_catalog_layouts_from_real_toolmind_tools(graphsyn_tools, layout):
    catalog = gen._catalog_text(graphsyn_tools, layout, ensure_ascii=True)
    text = f"{PROTOCOL_TEXT}\n\n{catalog}\n\n# Domain\nBe polite."
    prompt = parse_system_prompt(text)
    assert prompt.tools_found and prompt.tools == graphsyn_tools
    assert prompt.instructions == "# Domain\nBe polite."


@pytest.mark.parametrize("layout", ["array", "lines", "tools_block", "pretty"])
def test_an_openai_declaration_with_only_a_name_is_a_tool_and_keeps_its_catalog(graphsyn_tools, layout):
    """OpenAI makes a function's description and parameters optional (and sibling cleaners strip null schema
    fields): {"type": "function", "function": {"name": ...}} declares a tool. Refused, it took the whole
    catalog with it where the catalog is one JSON array (tools = [], every call to an unknown tool)."""
    bare = {"type": "function", "function": {"name": graphsyn_tools[1]["function"]["name"]}}
    tools = [graphsyn_tools[0], bare]
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{gen._catalog_text(tools, layout, ensure_ascii=True)}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    row = convert(native)
    assert [t["function"]["name"] for t in row["tools"]] == [t["function"]["name"] for t in tools]
    assert row["tools"][1] == {"type": "function", "function": {"name": bare["function"]["name"],
                                                                "parameters": {"type": "object", "properties": {}}}}
    assert "tools_not_found" not in row["meta"] and row["messages"][0]["content"] == "# Domain\nBe polite."
    assert write_toolmind_row(row)["messages"] == native["messages"]
    # an OpenAI-style call in prose names its arguments: still no tool
    call = {"type": "function", "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}}
    assert parse_system_prompt(PROTOCOL_TEXT + "\n\nExample call:\n" + json.dumps(call) + "\n").tools == []


def test_bare_xlam_when2call_and_glaive_tools_from_real_samples():
    native = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())
    xlam = parse_system_prompt(PROTOCOL_TEXT + "\n\n" + native["xlam_function_calling_60k"]["row_xlam_origin_via_argilla_merge"]["tools"])
    split_list = xlam.tools[0]["function"]
    assert split_list["name"] == "split_list"
    assert split_list["parameters"] == {"type": "object", "properties": {
        "lst": {"type": "array", "description": "The input list."},
        "chunk_size": {"type": "integer", "description": "The size of each chunk."}}, "required": ["lst", "chunk_size"]}
    assert xlam.tools[1]["function"]["parameters"]["properties"]["arr"]["items"] == {"type": "integer"}

    w2c = native["when2call"]["train_sft_example_verbatim"]["tools"]
    prompt = parse_system_prompt(PROTOCOL_TEXT + "\n\n" + json.dumps(w2c))
    params = prompt.tools[0]["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["region", "latitude", "longitude"]
    assert params["properties"]["latitude"]["type"] == "integer" and params["properties"]["latitude"]["default"] == "40.733"

    glaive = native["glaive_function_calling_v2"]["row_25475_exact"]["system"]
    prompt = parse_system_prompt(glaive)
    assert [t["function"]["name"] for t in prompt.tools] == ["detect_language"]
    assert prompt.instructions == "SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -"


def test_system_prompt_without_a_catalog_is_flagged_not_fatal():
    excerpt = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    prefix = excerpt["toolmind_cleaned_viewer"]["decoded_system_prompt_prefix"]
    msgs = conversation()
    msgs[0]["content"] = prefix
    row = convert(native_row(msgs))
    assert row["tools"] == [] and row["meta"]["tools_not_found"] is True
    assert row["meta"]["system"] == prefix and row["messages"][0]["role"] == "user"  # protocol-only: no system turn
    assert json.loads(write_toolmind_row(row)["messages"])[0]["content"] == prefix
    # a call example in prose is not a tool
    prose = PROTOCOL_TEXT + '\n\nExample call:\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n'
    assert parse_system_prompt(prose).tools == []


def test_a_one_line_prompt_starting_with_the_protocol_heading_keeps_its_instructions():
    """Taken for the heading alone, the whole prompt was left out: no system turn, nothing in swift or
    llamafactory exports."""
    prompt = "## Tool-Use Protocol: reason inside <think> tags, then answer. You are an airline agent."
    msgs = conversation()
    msgs[0]["content"] = prompt
    row = convert(native_row(msgs))
    assert row["messages"][0] == message("system", prompt) and row["meta"]["tools_not_found"] is True
    assert json.loads(write_toolmind_row(row)["messages"])[0]["content"] == prompt
    # nor is its first line lost where more lines follow
    two_lines = prompt.replace(" You are", "\nYou are")
    assert parse_system_prompt(two_lines).instructions == two_lines
    # a heading over the protocol's list is still left out, as is one alone
    assert parse_system_prompt(PROTOCOL_TEXT + "\n\nBe brief.").instructions == "Be brief."
    assert parse_system_prompt("## Tool-Use Protocol").instructions == ""


def test_a_prompt_whose_lines_end_in_cr_alone_gives_its_tools_and_instructions():
    """Read as one line, its catalog was not found and the protocol heading took the whole text with it."""
    msgs = conversation()
    msgs[0]["content"] = render_system_prompt(TOOLS, "Answer briefly.\nNo jokes.").replace("\n", "\r")
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == TOOLS and "tools_not_found" not in row["meta"]
    assert row["messages"][0] == message("system", "Answer briefly.\nNo jokes.")
    assert write_toolmind_row(row)["messages"] == native["messages"]


@pytest.mark.parametrize("catalog", ["## Available Tools\n\n[]", "Tools: []", "<tools>[ ]</tools>"])
def test_an_empty_catalog_where_one_is_introduced_is_no_instructions(catalog):
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog}\n\nAnswer briefly."
    row = convert(native_row(msgs))
    assert row["tools"] == [] and "tools_not_found" not in row["meta"]
    assert row["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert write_toolmind_row(row)["messages"] == native_row(msgs)["messages"]
    # an empty array the prose does not introduce as the catalog stays in it
    prose = PROTOCOL_TEXT + "\n\nReturn an empty list:\n[]"
    assert parse_system_prompt(prose).instructions == "Return an empty list:\n[]"


# --------------------------------------------------------------------------------------------------
# Upstream excerpts and malformed rows
# --------------------------------------------------------------------------------------------------


def test_viewer_cell_parses_as_far_as_it_goes_then_fails_typed():
    excerpt = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    cell = excerpt["toolmind_cleaned_viewer"]["messages_cell_prefix_verbatim_as_displayed"]
    # the part before the cut decodes to the documented system prompt prefix
    assert json.loads(cell[cell.index('"## ') : cell.index("5. When done or") + 15] + '"') == \
        excerpt["toolmind_cleaned_viewer"]["decoded_system_prompt_prefix"]
    with pytest.raises(InvalidJsonError) as err:
        convert({"messages": cell, "split": "synthetic"}, row=0)
    assert err.value.field == "messages"
    assert "truncated?" in str(err.value) and "no complete message, then a 'system' message cut off" in str(err.value)
    two_complete = json.dumps(conversation()[:2])[:-1] + ', {"role": "reasoning", "content": "<think>cut'
    with pytest.raises(InvalidJsonError, match=r"2 complete message\(s\) \(system, user\), then a 'reasoning'"):
        decode_messages(two_complete, "messages")


def test_a_complete_text_orjson_refuses_is_not_called_truncated():
    """A lone surrogate (\\ud800) in a bundled sample row's text: orjson refuses it, Python's json reads every message; the
    error said "truncated?" and sent the user looking for a cut that is not there."""
    import pyarrow.parquet as pq

    text = pq.read_table(td.sample_files("toolmind")["train"][0], columns=["messages"]).column(0)[0].as_py()
    messages = json.loads(text)
    messages[1]["content"] += "\ud800"
    text = json.dumps(messages)
    assert "\\ud800" in text
    with pytest.raises(InvalidJsonError) as err:
        decode_messages(text, "messages")
    assert "truncated?" not in str(err.value)
    assert f"not truncated: {len(messages)} message(s) read up to the closing ']'" in str(err.value)


def test_card_role_table_examples_parse_until_the_placeholder_json():
    excerpt = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    examples = {role: text.split(" — ")[0].strip("`") for role, text in excerpt["toolmind_cleaned_card"]["message_roles_table"]}
    assert P.unwrap(examples["reasoning"], "think", "", "x").text == "…"
    assert P.unwrap(examples["tool_output"], "tool_response", "", "x").text == "…"
    assert P.unwrap(examples["answer"], "answer", "", "x").text == "…"
    msgs = conversation()
    msgs[3]["content"] = examples["tool_call"]  # {"name": "...", "arguments": {...}} is a placeholder
    with pytest.raises(InvalidJsonError) as err:
        convert(native_row(msgs))
    assert err.value.field == "messages[3].content"


MALFORMED = {
    "bad_json": ({"messages": '[{"role": "system", "content": "x"}', "split": "synthetic"}, InvalidJsonError, "messages"),
    "unknown_role": (lambda m: m[2].update(role="thought"), InvalidValueError, "messages[2].role"),
    "output_without_call": (lambda m: m.__setitem__(slice(3, 4), []), InvalidValueError, "messages[3].role"),
    "unterminated": (lambda m: m[5].update(content="<think>It is 10:00."), InvalidValueError, "messages[5].content"),
    "missing_arguments": (lambda m: m[3].update(content='<tool_call>{"name": "get_time"}</tool_call>'),
                          MissingFieldError, "messages[3].content.arguments"),
    "missing_name": (lambda m: m[3].update(content='<tool_call>{"arguments": {}}</tool_call>'),
                     MissingFieldError, "messages[3].content.name"),
    # a name of the wrong kind is given, not missing ("tool call has no name" misled)
    "numeric_name": (lambda m: m[3].update(content='<tool_call>{"name": 7, "arguments": {}}</tool_call>'),
                     InvalidValueError, "messages[3].content.name"),
    "empty_answer": (lambda m: m[6].update(content="<answer> </answer>"), InvalidValueError, "messages[6].content"),
}


def _malformed_native(case: str) -> dict:
    spec = MALFORMED[case][0]
    if isinstance(spec, dict):
        return spec
    msgs = conversation()
    spec(msgs)
    return native_row(msgs)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_row_raises_a_typed_error_naming_row_and_field(tmp_path, case):
    _, error, field = MALFORMED[case]
    rows = [native_row(conversation()), _malformed_native(case)]
    path = write_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(error) as err:
        list(td.load("toolmind", data_files=path, split="synthetic", streaming=True))
    assert (err.value.row, err.value.field) == (1, field)
    assert "bad.parquet" in str(err.value) and "row 1" in str(err.value)


def test_text_after_a_closed_wrapper_is_named_as_such_not_as_an_unterminated_block(tmp_path):
    """A tool result with the assistant's reply run on after it (glaive's FUNCTION RESPONSE, then its
    ASSISTANT text) is closed: the error names the text after </tool_response>, the file, row and field."""
    native = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())
    turns = native["glaive_function_calling_v2"]["row_25475_exact"]["chat"].split("\n\n\n")
    result = next(t for t in turns if t.startswith("FUNCTION RESPONSE: "))[len("FUNCTION RESPONSE: "):]
    reply = turns[turns.index(f"FUNCTION RESPONSE: {result}") + 1][len("ASSISTANT: "):]
    msgs = conversation()
    msgs[4]["content"] = f"<tool_response>{result}</tool_response>\n{reply}"
    path = write_parquet(tmp_path / "mixed.parquet", [native_row(conversation()), native_row(msgs)])
    with pytest.raises(InvalidValueError) as err:
        list(td.load("toolmind", data_files=path, split="synthetic", streaming=True))
    assert (err.value.row, err.value.field) == (1, "messages[4].content") and "mixed.parquet" in str(err.value)
    assert "text after the closing </tool_response>" in err.value.message and reply[:20] in err.value.message
    assert "unterminated" not in err.value.message
    msgs[4]["content"] = f"<tool_response>{result}"  # a block that is not closed is still called unterminated
    with pytest.raises(InvalidValueError, match="unterminated <tool_response>"):
        convert(native_row(msgs))


def test_malformed_rows_are_counted_and_skipped(tmp_path, cache_dir):
    rows = [native_row(conversation())] + [_malformed_native(c) for c in sorted(MALFORMED)] + [native_row(conversation())]
    path = write_parquet(tmp_path / "bad.parquet", rows)
    report = SkipReport()
    ds = td.load("toolmind", data_files=path, split="synthetic", on_error="skip", report=report, cache_dir=cache_dir)
    assert [r["id"] for r in ds] == ["toolmind/synthetic/0", f"toolmind/synthetic/{len(rows) - 1}"]
    assert report.skipped == len(MALFORMED) and report.rows_read == len(rows)
    assert sum(report.by_reason.values()) == len(MALFORMED)
    assert "InvalidJsonError:messages" in report.by_reason and "MissingFieldError:messages[3].content.arguments" in report.by_reason


def test_a_binary_column_kept_in_meta_is_refused_naming_the_column(tmp_path):
    """A column without a unified field goes to ``meta``, where bytes are no JSON value: refused naming the column,
    not only the field ``meta`` (orjson's "Type is not JSON serializable: bytes")."""
    table = pq.read_table(td.sample_files("toolmind")["train"][0])
    path = tmp_path / "blob.parquet"
    pq.write_table(table.append_column("blob", pa.array([b"\x00"] * len(table), pa.binary())), path)
    with pytest.raises(td.JsonValueError, match=r"bytes at \$\.extra\.blob is not a JSON value") as err:
        list(td.load("toolmind", data_files=str(path), split="synthetic", streaming=True))
    assert (err.value.row, err.value.field) == (0, "meta")


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary()], ids=["binary", "large_binary"])
def test_a_messages_column_of_binary_type_is_read_as_its_text(tmp_path, cache_dir, binary):
    """Parquet written without the UTF-8 annotation gives the JSON text as binary: every row was an
    InvalidValueError ("got binary data"). Its rows are those of the same text as strings; bytes that are not
    UTF-8 are the row's error."""
    sample = td.sample_files("toolmind")["train"][0]
    table = pq.read_table(sample)
    cells = table.column("messages").cast(binary).to_pylist()
    cells[1] = b"\xff" + cells[1]
    bad = tmp_path / "binary.parquet"
    pq.write_table(table.set_column(0, "messages", pa.array(cells, binary)), bad)
    for streaming in (False, True):
        report = SkipReport()
        got = td.load("toolmind", data_files=str(bad), split="synthetic", streaming=streaming, on_error="skip",
                      report=report, cache_dir=cache_dir)
        want = td.load("toolmind", data_files=sample, split="synthetic", streaming=streaming, cache_dir=cache_dir)
        assert list(got) == [row for row in want if row["id"] != "toolmind/synthetic/1"]
        assert report.by_reason == {"InvalidValueError:messages": 1}
    with pytest.raises(InvalidValueError, match="messages is binary data that is not UTF-8 text") as err:
        list(td.load("toolmind", data_files=str(bad), split="synthetic", streaming=True))
    assert (err.value.row, err.value.field) == (1, "messages")


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary()], ids=["binary", "large_binary"])
def test_a_split_column_of_binary_type_gives_its_splits(tmp_path, cache_dir, binary):
    """A `split` column written without the UTF-8 annotation (as the messages column beside it) made every row an
    InvalidValueError ("split must be a string") in one `train` split: its values are the splits, as the same text
    as strings gives them; a cell that is not UTF-8 is that row's error, naming the column."""
    sample = td.sample_files("toolmind")["train"][0]
    table = pq.read_table(sample)
    table = table.cast(pa.schema([pa.field(name, binary) for name in table.column_names]))
    cells = table.column("split").to_pylist()
    cells[1] = b"\xff" + cells[1]
    path, bad = tmp_path / "binary.parquet", tmp_path / "bad.parquet"
    pq.write_table(table, path, row_group_size=4)
    pq.write_table(table.set_column(1, "split", pa.array(cells, binary)), bad, row_group_size=4)
    for streaming in (False, True):
        want = td.load("toolmind", data_files=sample, streaming=streaming, cache_dir=cache_dir)
        got = td.load("toolmind", data_files=str(path), streaming=streaming, cache_dir=cache_dir)
        assert {name: list(rows) for name, rows in got.items()} == {name: list(rows) for name, rows in want.items()}
        report = SkipReport()
        got = td.load("toolmind", data_files=str(bad), streaming=streaming, on_error="skip", report=report,
                      cache_dir=cache_dir)
        assert [row["id"] for name in got for row in got[name]] == \
            [row["id"] for name in want for row in want[name] if row["id"] != "toolmind/synthetic/1"]
        assert report.by_reason == {"InvalidValueError:split": 1} and report.examples[0].row == 1
    with pytest.raises(InvalidValueError, match="split is binary data that is not UTF-8 text") as err:
        list(td.load("toolmind", data_files={"test": str(bad)}, split="test", streaming=True))
    assert (err.value.row, err.value.field) == (1, "split")
    # A row group whose messages cannot be read: its rows are reported by the splits their values name (they were
    # compared as bytes with the split's name, and lost)
    damaged = tmp_path / "damaged.parquet"
    pq.write_table(table, damaged, row_group_size=4, write_statistics=False)
    chunk = pq.ParquetFile(damaged).metadata.row_group(1).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(damaged.read_bytes())
    data[start + 40:start + chunk.total_compressed_size - 10] = b"U" * (chunk.total_compressed_size - 50)
    damaged.write_bytes(bytes(data))
    report = SkipReport()
    got = td.load("toolmind", data_files=str(damaged), streaming=True, on_error="skip", report=report)
    assert sum(len(list(rows)) for rows in got.values()) == table.num_rows - 4
    assert report.rows_read == table.num_rows and report.skipped == 4


def test_an_id_column_of_binary_type_gives_its_ids(tmp_path, cache_dir):
    """An id_column written without the UTF-8 annotation: every row was "an id ... is a non-empty string or an
    integer, got b'...'"; its values are the ids, as the same text as strings gives them."""
    sample = td.sample_files("toolmind")["train"][0]
    table = pq.read_table(sample)
    ids = [f"uid-{n}" for n in range(table.num_rows)]
    text, binary = tmp_path / "text.parquet", tmp_path / "binary.parquet"
    pq.write_table(table.append_column("uid", pa.array(ids)), text)
    pq.write_table(table.append_column("uid", pa.array([i.encode() for i in ids], pa.binary())), binary)
    for streaming in (False, True):
        want = td.load("toolmind", data_files=str(text), split="synthetic", id_column="uid", streaming=streaming,
                       cache_dir=cache_dir)
        got = td.load("toolmind", data_files=str(binary), split="synthetic", id_column="uid", streaming=streaming,
                      cache_dir=cache_dir)
        assert list(got) == list(want) and {row["id"].rsplit("/", 1)[1] for row in got} <= set(ids)


# --------------------------------------------------------------------------------------------------
# Family options (spec §8)
# --------------------------------------------------------------------------------------------------


def test_uuid_id_column(tmp_path):
    rows = [native_row(conversation(), uuid="e96ea105-34ba-5ca0-8f24-8e8746655d64"), native_row(conversation(), uuid=None)]
    path = write_parquet(tmp_path / "toucan.parquet", rows)
    ds = td.load("toolmind", data_files=path, split="synthetic", streaming=True, id_column="uuid", on_error="skip")
    assert [r["id"] for r in ds] == ["toolmind/synthetic/e96ea105-34ba-5ca0-8f24-8e8746655d64"]
    with pytest.raises(MissingFieldError, match="uuid"):
        list(td.load("toolmind", data_files=path, split="synthetic", streaming=True, id_column="uuid"))
    # without the option the column is kept, not lost
    first = next(iter(td.load("toolmind", data_files=path, split="synthetic", streaming=True)))
    assert first["meta"]["extra"] == {"uuid": "e96ea105-34ba-5ca0-8f24-8e8746655d64"}


def test_an_id_column_named_twice_in_a_parquet_file_gives_the_last_ones_ids(tmp_path, cache_dir):
    """Two Parquet columns named by id_column (a careless concat) made reading the ids a bare KeyError ('Field
    "uuid" exists 2 times in schema') in the middle of a stream. A row holds the last column's value (as JSON
    keeps a repeated key's last value): its ids are read, repeats numbered by them."""
    table = pa.Table.from_pylist([native_row(conversation()) for _ in range(4)])
    stale, uuids = pa.array(["x", "y", "z", "w"]), pa.array(["a", "b", "a", "c"])
    path = tmp_path / "twice.parquet"
    pq.write_table(table.append_column("uuid", stale).append_column("uuid", uuids), path, row_group_size=2)
    for streaming in (True, False):
        ds = td.load("toolmind", data_files=str(path), split="synthetic", id_column="uuid", streaming=streaming,
                     cache_dir=cache_dir)
        assert [r["id"].removeprefix("toolmind/synthetic/") for r in ds] == ["a", "b", "a#2", "c"], streaming


def test_an_id_column_value_refused_is_quoted_as_json(tmp_path, cache_dir):
    """Messages quote a wrong value as JSON writes it, as sample_id's do: the id_column's said "got True" and
    "got {'k': 'v'}" (Python's spelling), and cut a long value at 80 characters with no mark that it was cut."""
    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()[:4]
    for row, uid in zip(rows, [True, {"k": "v"}, ["x" * 200], "ok"]):
        row["uid"] = uid
    path = tmp_path / "ids.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        ds = td.load("toolmind", data_files=str(path), split="synthetic", id_column="uid", on_error="skip",
                     report=report, streaming=streaming, cache_dir=cache_dir)
        assert [r["id"] for r in ds] == ["toolmind/synthetic/ok"]
        got = [skipped["message"].split(", got ", 1)[1] for skipped in report.rows]
        assert got[:2] == ["true", '{"k": "v"}'], streaming
        assert got[2].startswith('["xxx') and got[2].endswith("...") and len(got[2]) == 83, streaming


def test_ids_from_an_id_column_stay_unique_and_the_same_whoever_reads_the_row(tmp_path, cache_dir):
    """A repeated id gets '#<row>' after its first holder in the file (it was repeated as it was: 21 rows of
    the sample had 7 ids with id_column='split'), in every reader: a later shard, a resumed stream, a worker
    process. An id that is not a non-empty string or integer is a typed error naming the column."""
    uuids = ["a", "b", "a", 7, "7", "a", True, [1], "", "c"]
    rows = [native_row(conversation(), uuid=u) for u in uuids]
    jsonl = write_jsonl(tmp_path / "toucan.jsonl", rows)
    expected = ["a", "b", "a#2", "7", "7#4", "a#5", "c"]
    for kwargs in ({}, {"shard_bytes": 1}, {"num_proc": 2, "shard_bytes": 1}):
        report = td.SkipReport()
        ds = td.load("toolmind", data_files=jsonl, split="synthetic", id_column="uuid", on_error="skip",
                     report=report, cache_dir=cache_dir, **kwargs)
        assert [r["id"].removeprefix("toolmind/synthetic/") for r in ds] == expected, kwargs
        assert report.skipped == 3 and report.by_reason == {"InvalidValueError:uuid": 3}
    streamed = td.load("toolmind", data_files=jsonl, split="synthetic", id_column="uuid", on_error="skip",
                       streaming=True, shard_bytes=1)
    assert streamed.num_shards > 1
    assert [r["id"].removeprefix("toolmind/synthetic/") for r in streamed] == expected
    # Parquet: a stream resumed in its third row group still knows the ids of the first two
    path = write_parquet(tmp_path / "toucan.parquet", [native_row(conversation(), uuid=u) for u in "abacadb"])
    pq.write_table(pq.read_table(path), path, row_group_size=3)
    stream = td.load("toolmind", data_files=path, split="synthetic", id_column="uuid", streaming=True)
    whole = [r["id"].removeprefix("toolmind/synthetic/") for r in stream]
    assert whole == ["a", "b", "a#2", "c", "a#4", "d", "b#6"]
    rows_seen = iter(stream)
    for _ in range(6):
        next(rows_seen)
    state = stream.state_dict()
    resumed = td.load("toolmind", data_files=path, split="synthetic", id_column="uuid", streaming=True)
    resumed.load_state_dict(state)
    assert [r["id"].removeprefix("toolmind/synthetic/") for r in resumed] == ["b#6"]


def test_parameters_call_key(tmp_path):
    native = native_row(conversation(call_key="parameters"))
    with pytest.raises(MissingFieldError) as err:
        convert(native)
    assert err.value.field == "messages[3].content.arguments"
    assert "arguments_key='parameters'" in str(err.value)  # the option that reads it is named
    source = ToolMindSource(ToolMindOptions(arguments_key="parameters"))
    row = convert(native, source)
    assert row["meta"]["call_key"] == "parameters" and "content" not in row["meta"]
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"tz": "Europe/Paris"}
    assert write_toolmind_row(row)["messages"] == native["messages"]
    # strict=False relaxes the order of turns only: a call without the configured key is refused as well
    with pytest.raises(MissingFieldError) as lenient:
        convert(native, ToolMindSource(ToolMindOptions(strict=False)))
    assert lenient.value.field == "messages[3].content.arguments"


def test_native_list_column_with_data_files_splits(tmp_path):
    rows = [{"id": "dr-1", "question": "q", "conversations": conversation()}]
    path = write_parquet(tmp_path / "drtulu.parquet", rows)
    kwargs = dict(data_files={"train": path}, messages_column="conversations", split_column=None, streaming=True)
    row = next(iter(td.load("toolmind", split="train", **kwargs)))
    assert row["meta"]["messages_encoding"] == "list" and row["meta"]["extra"] == {"id": "dr-1", "question": "q"}
    raw = next(iter(td.load("toolmind", "raw", split="train", **kwargs)))
    assert raw["messages"] == conversation() and SOURCE.from_unified(row) == raw
    assert json.loads(write_toolmind_row(row)["messages"]) == conversation()


def test_null_fields_arrow_adds_to_a_native_list_columns_messages_are_no_extra_keys(tmp_path):
    """Messages of a list<struct> column get every field any message of the column has (pyarrow unifies the
    structs), null where they have none: `tool_calls: null`, `name: null` beside role and content. Every row
    failed with "keys besides role and content". A field holding a value is still refused, naming it."""
    plain = conversation()
    named = [dict(m) for m in plain]
    named[1]["name"] = "alice"
    named[3]["tool_calls"] = [{"id": "c0"}]
    path = write_parquet(tmp_path / "drtulu.parquet", [{"conversations": plain}, {"conversations": named}])
    assert pq.read_schema(path).field("conversations").type.value_type.get_field_index("name") >= 0
    kwargs = dict(data_files={"train": path}, messages_column="conversations", split_column=None, streaming=True)
    report = td.SkipReport()
    rows = list(td.load("toolmind", split="train", on_error="skip", report=report, **kwargs))
    assert [r["id"] for r in rows] == ["toolmind/train/0"]
    assert rows[0]["messages"] == convert(native_row(plain))["messages"]
    raw = next(iter(td.load("toolmind", "raw", split="train", on_error="skip", **kwargs)))
    assert raw["messages"] == plain
    assert report.skipped == 1 and list(report.by_reason) == ["InvalidValueError:conversations[1]"]
    with pytest.raises(InvalidValueError, match=r"besides role and content: \['name'\]") as error:
        list(td.load("toolmind", split="train", **{**kwargs, "data_files": {"train": write_parquet(
            tmp_path / "named.parquet", [{"conversations": named}])}}))
    assert error.value.field == "conversations[1]" and error.value.row == 0


def test_several_shards(tmp_path, generated_rows):
    files = [write_parquet(tmp_path / f"train-0000{i}-of-00003.parquet", generated_rows[i * 40:(i + 1) * 40])
             for i in range(3)]
    ds = td.load("toolmind", data_files=files, streaming=True)
    ids = [r["id"] for split in ds.values() for r in split]
    assert len(ids) == len(set(ids)) == 120
    assert "toolmind/synthetic/train-00002-of-00003/0" in ids
    text = [r["messages"] for split in td.load("toolmind", "toolmind", data_files=files, streaming=True).values()
            for r in split]
    assert sorted(text) == sorted(r["messages"] for r in generated_rows[:120])


def test_rows_ending_on_a_call(tmp_path):
    native = native_row(conversation(end_on_call=True))
    with pytest.raises(InvalidValueError, match='ending on "tool_call"') as err:
        convert(native)
    assert err.value.field == "messages[3].role"
    source = ToolMindSource(ToolMindOptions(allow_trailing_call=True))
    ctx = RowContext("toolmind", "t", 0, "")
    raw = source.to_raw(native, ctx)
    row = source.to_unified(raw, ctx)
    assert row["messages"][-1]["tool_calls"][0]["function"]["name"] == "get_time"
    assert "source_messages" not in row["meta"] and source.from_unified(row) == raw
    with pytest.raises(ConversionError, match="has no result"):
        write_toolmind_row(row)  # the card's FSM has no room for it
    path = write_parquet(tmp_path / "terminal.parquet", [native])
    assert len(list(td.load("toolmind", data_files=path, split="synthetic", streaming=True, allow_trailing_call=True))) == 1


def test_a_toolmind_row_the_writer_refuses_is_named_by_its_own_message(tmp_path):
    """The toolmind writer names fields of the unified row, whose positions are not the file's (the system
    message without instructions is no unified message, reasoning joins its call, a lenient row is re-shaped):
    exporting ToolMind rows back, "messages[1].tool_calls[0]" named a message the row in the file does not
    have there. The error names the row's own message, and the unified field in its text."""
    msgs = conversation()
    msgs[0]["content"] = PROTOCOL_TEXT  # (no instructions: no unified system message)
    msgs[4] = {"role": "user", "content": "Never mind, which zone am I in?"}  # the call goes unanswered
    path = write_jsonl(tmp_path / "lenient.jsonl", [native_row(msgs), native_row(conversation(end_on_call=True))])
    load = dict(data_files=path, split="synthetic", streaming=True, strict=False, allow_trailing_call=True)
    with pytest.raises(ConversionError, match=r"has no result.*\(the unified row's messages\[1\]\.tool_calls\[0\]\)") as error:
        list(td.load("toolmind", "toolmind", **load))
    assert (error.value.row, error.value.field) == (0, "messages[3]") and msgs[3]["role"] == "tool_call"
    report = td.SkipReport()
    assert list(td.load("toolmind", "toolmind", on_error="skip", report=report, **load)) == []
    # a row read as the card writes it, ending on its call (allowed by the load, not by the format)
    assert sorted(report.by_reason) == ["ConversionError:messages[3]"] and report.by_reason[
        "ConversionError:messages[3]"] == 2
    assert [e.row for e in report.examples] == [0, 1]


@pytest.mark.parametrize("fmt", ["swift", "llamafactory"])
def test_a_reasoning_error_names_the_rows_reasoning_turn(tmp_path, fmt):
    """Unified reasoning_content is read from the reasoning turn before a call or answer: an error about it names
    that turn, not the call or answer the unified message was made of."""
    msgs = conversation()
    msgs[5]["content"] = "<think>It is 10:00; the </think> tag closes this.</think>"
    path = write_jsonl(tmp_path / "quoted.jsonl", [native_row(msgs)])
    with pytest.raises(ConversionError, match=r"</think>.*the unified row's messages\[4\]\.reasoning_content") as error:
        list(td.load("toolmind", fmt, data_files=path, split="synthetic", streaming=True))
    assert error.value.field == "messages[5]" and msgs[5]["role"] == "reasoning"


def test_write_toolmind_row_called_alone_names_the_rows_own_message(tmp_path):
    """Loading named the ToolMind row's own message in a writer error; the writer called alone (or as
    output_format("toolmind").write) named the unified field, `messages[1].tool_calls[0]` for the file's
    `messages[3]`. Both name the file's message now, once: a load whose messages column has another name still
    names that column, not the writer's default."""
    from tooluse_datasets.formats import output_format

    msgs = conversation()
    msgs[0]["content"] = PROTOCOL_TEXT  # (no instructions: no unified system message)
    msgs[4] = {"role": "user", "content": "Never mind, which zone am I in?"}  # the call goes unanswered
    path = write_jsonl(tmp_path / "lenient.jsonl", [native_row(msgs)])
    (row,) = td.load("toolmind", data_files=path, split="synthetic", streaming=True, strict=False)
    for write in (write_toolmind_row, output_format("toolmind").write):
        unified_named = r"has no result.*\(the unified row's messages\[1\]\.tool_calls\[0\]\)$"
        with pytest.raises(ConversionError, match=unified_named) as error:
            write(row)
        assert error.value.field == "messages[3]" and msgs[3]["role"] == "tool_call"
        assert str(error.value).count("the unified row's") == 1
    # a row edited since it was read: its own positions are the unified ones
    edited = {**row, "messages": [*row["messages"], {"role": "user", "content": "And now?"}]}
    with pytest.raises(ConversionError) as error:
        write_toolmind_row(edited)
    assert error.value.field == "messages[1].tool_calls[0]" and "the unified row's" not in str(error.value)
    # another messages column: the load names it (from the unified field, not from the writer's naming)
    renamed = write_jsonl(tmp_path / "conversations.jsonl", [{"conversations": native_row(msgs)["messages"]}])
    with pytest.raises(ConversionError) as error:
        list(td.load("toolmind", "toolmind", data_files={"train": renamed}, messages_column="conversations",
                     split_column=None, split="train", streaming=True, strict=False))
    assert error.value.field == "conversations[3]" and str(error.value).count("the unified row's") == 1


def test_lenient_mode_reads_what_strict_refuses_and_keeps_it(tmp_path):
    msgs = conversation()
    two_calls = ('<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>\n'
                 '<tool_call>{"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}</tool_call>')
    msgs[2:4] = [msgs[2], {"role": "reasoning", "content": "<think>Two zones.</think>"},
                 {"role": "tool_call", "content": two_calls}]
    msgs[5:5] = [{"role": "tool_output", "content": "<tool_response>11:00</tool_response>"}]
    native = native_row(msgs)
    with pytest.raises(InvalidValueError):
        convert(native)
    source = ToolMindSource(ToolMindOptions(strict=False))
    ctx = RowContext("toolmind", "t", 0, "")
    raw = source.to_raw(native, ctx)
    row = source.to_unified(raw, ctx)
    turn = row["messages"][2]
    assert turn["reasoning_content"] == "The get_time tool answers this.\n\nTwo zones."
    assert [c["function"]["arguments"]["tz"] for c in turn["tool_calls"]] == ["UTC", "Asia/Tokyo"]
    assert [m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"] == ["call_0", "call_1"]
    assert row["meta"]["source_messages"] == msgs and source.from_unified(row) == raw
    validate_unified(row)
    written = json.loads(write_toolmind_row(row)["messages"])  # re-shaped to satisfy the FSM
    assert P.fsm_violation([m["role"] for m in written]) is None


@pytest.fixture(scope="module")
def graphsyn_unified(tmp_path_factory):
    """The real graph_syn rows of Nanbeige/ToolMind (the cleaned dataset's origin): OpenAI messages, read by the
    ms-swift reader. Like every upstream turn-level row, each ends on a call."""
    rows = json.loads(shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json").read_text())["rows"]
    path = tmp_path_factory.mktemp("graphsyn") / "graphsyn.json"
    path.write_text(json.dumps(rows))
    return list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))


@pytest.fixture(scope="module")
def graphsyn_card_rows(graphsyn_unified):
    """The graph_syn rows in the card's message form, as the cleaned dataset converted them: a reasoning turn
    before each call and answer (a bridge where the row has none), one tool_call and one tool_output per call.
    Rows 0 and 3 replay one dialogue: system, user, reasoning, tool_call, tool_output, reasoning, answer, user,
    reasoning, tool_call."""
    return [toolmind_messages(row, allow_trailing_call=True).messages for row in graphsyn_unified]


# role -> (index of its message in the first exchange of rows 0 and 3, index of the real text packed into it)
PACKED_BLOCKS = {"reasoning": (5, 8), "tool_output": (4, 4), "answer": (6, 6)}


@pytest.mark.parametrize("role", sorted(PACKED_BLOCKS))
def test_several_blocks_in_one_message_are_refused_when_strict_and_kept_whole_when_lenient(
        tmp_path, cache_dir, graphsyn_card_rows, role):
    """The card wraps each reasoning, result and answer turn in one block (several results are several
    tool_output turns; consecutive reasoning turns were merged). A message packing two blocks, here the real
    texts of graph_syn rows 0 and 3, was read as one text even in strict mode."""
    index, real = PACKED_BLOCKS[role]
    tag = P.WRAPPER_TAG[role]
    row0, row3 = graphsyn_card_rows[0], graphsyn_card_rows[3]
    good = row0[:7]  # the first exchange, ending on its answer
    packed = [dict(m) for m in good]
    packed[index] = {"role": role, "content": f"{row0[real]['content']}\n{row3[real]['content']}"}
    field = f"messages[{index}].content"
    path = write_parquet(tmp_path / "packed.parquet", [native_row(good), native_row(packed)])

    with pytest.raises(InvalidValueError) as err:
        list(td.load("toolmind", data_files=path, split="synthetic", streaming=True))
    assert (err.value.row, err.value.field) == (1, field) and "packed.parquet" in str(err.value)
    assert f"2 <{tag}> blocks in one message" in err.value.message
    report = SkipReport()
    strict_rows = list(td.load("toolmind", data_files=path, split="synthetic", on_error="skip", report=report,
                               cache_dir=cache_dir))
    assert [r["id"] for r in strict_rows] == ["toolmind/synthetic/0"]
    assert report.skipped == 1 and dict(report.by_reason) == {f"InvalidValueError:{field}": 1}

    # strict=False: read, kept whole and written back exactly; the grammar rule names the message
    lenient = list(td.load("toolmind", data_files=path, split="synthetic", streaming=True, strict=False))
    assert "source_messages" not in lenient[0]["meta"] and lenient[1]["meta"]["source_messages"] == packed
    raw = list(td.load("toolmind", "raw", data_files=path, split="synthetic", streaming=True, strict=False))
    assert [r["messages"] for r in raw] == [good, packed]
    source = ToolMindSource(ToolMindOptions(strict=False))
    ctx = RowContext("toolmind", "t", 1, "")
    native_raw = source.to_raw(native_row(packed), ctx)
    assert source.from_unified(source.to_unified(native_raw, ctx)) == native_raw
    result = td.validate("toolmind", data_files=path, strict=False).to_dict()["total"]["validation"]
    found = result["rules"]["toolmind.grammar"]
    assert (found["rows"], found["findings"]) == (1, 1)
    assert [(e["id"], e["field"]) for e in found["examples"]] == [("toolmind/synthetic/1",
                                                                   f"meta.source_messages[{index}].content")]
    assert f"2 <{tag}> blocks in one {role} message" == found["examples"][0]["message"]
    # ... and the toolmind format, whose rows pass strict reading, refuses to write it that way
    with pytest.raises(ConversionError, match=f"several <{tag}> blocks"):
        write_toolmind_row(lenient[1])
    # An empty block among them is invalid content, refused in both modes as an empty message is.
    packed[index]["content"] = f"{row0[real]['content']}\n<{tag}> </{tag}>"
    for strict in (True, False):
        with pytest.raises(InvalidValueError, match=f"<{tag}> block") as err:
            convert(native_row(packed), ToolMindSource(ToolMindOptions(strict=strict)))
        assert err.value.field == field


def test_a_lenient_tool_output_of_several_blocks_answers_the_calls_awaiting_them(tmp_path, graphsyn_card_rows):
    """Two calls packed into one tool_call message, their results into one tool_output (the real texts of graph_syn
    rows 0 and 3): the second result was glued into the first call's, tags and all, and the second call left
    unanswered, so that every format refused the row."""
    row0, row3 = graphsyn_card_rows[0], graphsyn_card_rows[3]
    calls, results = ([P.unwrap(row[k]["content"], tag, "", "t").text for row in (row0, row3)]
                      for k, tag in ((3, "tool_call"), (4, "tool_response")))
    packed = row0[:3] + [{"role": "tool_call", "content": f"{row0[3]['content']}\n{row3[3]['content']}"},
                         {"role": "tool_output", "content": f"{row0[4]['content']}\n{row3[4]['content']}"}] + row0[5:7]
    path = write_parquet(tmp_path / "packed.parquet", [native_row(packed)])
    [row] = td.load("toolmind", data_files=path, split="synthetic", streaming=True, strict=False)
    turn, *answers = row["messages"][1:4]
    assert [json.loads(c) for c in calls] == [
        {"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in turn["tool_calls"]]
    assert answers == [message("tool", text, tool_call_id=call["id"], name=call["function"]["name"])
                       for text, call in zip(results, turn["tool_calls"])]
    assert row["meta"]["source_messages"] == packed
    [written] = td.load("toolmind", "toolmind", data_files=path, split="synthetic", streaming=True, strict=False)
    assert [m["role"] for m in json.loads(written["messages"])].count("tool_output") == 2
    # one result for two calls is still one text: the second call's result is not made up
    packed[4] = row0[4]
    one = convert(native_row(packed), ToolMindSource(ToolMindOptions(strict=False)))
    assert [m["content"] for m in one["messages"] if m["role"] == "tool"] == [results[0]]


def test_the_grammar_rule_takes_a_trailing_call_the_load_allowed_as_within_the_grammar(tmp_path, graphsyn_card_rows):
    """graph_syn rows end on a call, as text_to_terminal's do: read with allow_trailing_call=True, that ending is
    within the load's grammar. A row kept whole for something else (here its last tool_call message packs both
    of its real calls) was also reported by td.validate for ending on a call."""
    row0 = graphsyn_card_rows[0]
    packed = [dict(m) for m in row0]
    packed[-1]["content"] = f"{row0[3]['content']}\n{row0[-1]['content']}"
    path = write_parquet(tmp_path / "trailing.parquet", [native_row(row0), native_row(packed)])
    last = len(row0) - 1

    def findings(**options):
        rows = td.load("toolmind", data_files=path, split="synthetic", streaming=True, strict=False, **options)
        found = [[(f.field, f.message) for f in check_row(row) if f.rule == "toolmind.grammar"] for row in rows]
        rule = td.validate("toolmind", data_files=path, strict=False, **options).to_dict()
        counts = rule["total"]["validation"]["rules"].get("toolmind.grammar", {})
        assert (counts.get("rows", 0), counts.get("findings", 0)) == (sum(map(bool, found)), sum(map(len, found)))
        return found

    calls = (f"meta.source_messages[{last}].content", "2 calls in one tool_call message")
    assert findings(allow_trailing_call=True) == [[], [calls]]
    # Only the row kept whole carries the flag: the other is read in the grammar, its trailing call as it is
    rows = td.load("toolmind", data_files=path, split="synthetic", streaming=True, strict=False,
                   allow_trailing_call=True)
    assert [row["meta"].get("trailing_call_allowed") for row in rows] == [None, True]
    # Without the option the ending is outside the grammar: still reported, for both rows
    ending = (f"meta.source_messages[{last}].role",
              'a conversation ending on "tool_call" breaks the ToolMind FSM (it must end on "answer")')
    assert findings() == [[ending], [ending, calls]]


def test_the_grammar_rule_counts_the_calls_of_a_message_as_the_reader_does(tmp_path, graphsyn_card_rows):
    """A call whose arguments quote ``<tool_call>`` (here the card's real protocol text) is one call to the reader,
    but the rule counted every ``<tool_call>`` in the text: a row kept whole for another reason (ending on a
    call) was also reported for packing 2 calls in one message."""
    excerpt = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    protocol = excerpt["toolmind_cleaned_viewer"]["decoded_system_prompt_prefix"]
    assert protocol.count("<tool_call>") == 1
    msgs = [dict(m) for m in graphsyn_card_rows[0]]
    call = json.loads(P.unwrap(msgs[-1]["content"], "tool_call", "", "content").text)
    call["arguments"]["note"] = protocol
    msgs[-1]["content"] = P.wrap(json.dumps(call), "tool_call")
    path = write_parquet(tmp_path / "quoted.parquet", [native_row(msgs)])
    [row] = td.load("toolmind", data_files=path, split="synthetic", streaming=True, strict=False)
    assert [c["function"]["arguments"]["note"] for c in row["messages"][-1]["tool_calls"]] == [protocol]
    found = [f.field for f in check_row(row) if f.rule == "toolmind.grammar"]
    assert found == [f"meta.source_messages[{len(msgs) - 1}].role"]  # its ending only


def test_the_writer_refuses_text_that_would_read_back_as_several_blocks(graphsyn_unified):
    """Unified text holding a block seam (two results in one tool message, written the Hermes way) was written
    as is: a ToolMind row the strict reader refuses. Each such field is named."""
    row = graphsyn_unified[0]
    roles = [m["role"] for m in row["messages"]]
    result_at, answer_at, last = roles.index("tool"), roles.index("assistant", roles.index("tool")), len(roles) - 1
    assert toolmind_messages(row, allow_trailing_call=True).messages  # the row as it is writes
    second_result = graphsyn_unified[3]["messages"][result_at]["content"]
    edits = {f"messages[{result_at}].content": (result_at, "content", "</tool_response>\n<tool_response>"),
             f"messages[{answer_at}].content": (answer_at, "content", "</answer>\n<answer>"),
             f"messages[{last}].reasoning_content": (last, "reasoning_content", "</think><think>")}
    for field, (i, key, seam) in edits.items():
        edited = json.loads(json.dumps(row))
        edited["messages"][i][key] += f"{seam}{second_result}"
        with pytest.raises(ConversionError, match="several") as err:
            toolmind_messages(edited, allow_trailing_call=True)
        assert err.value.field == field


def test_unknown_option_and_bad_values_are_refused():
    with pytest.raises(ValueError):
        td.load("toolmind", data_files=td.sample_files("toolmind"), streaming=True, arguments_key="args")
    with pytest.raises(ValueError):
        td.load("toolmind", data_files=td.sample_files("toolmind"), streaming=True, messages_col="x")


# --------------------------------------------------------------------------------------------------
# Writer on rows from other sources
# --------------------------------------------------------------------------------------------------


def _foreign(messages: list[dict], tools=TOOLS) -> dict:
    return unified_row(id="other/x/1", source="other", subset="x", tools=tools, messages=messages)


def test_writer_inserts_marked_bridges_only_where_the_fsm_needs_them():
    row = _foreign([
        message("system", "Be brief."),
        message("user", "Paris and Tokyo?"),
        message("assistant", "", tool_calls=[tool_call("a", "get_time", {"tz": "Europe/Paris"}),
                                             tool_call("b", "get_time", {"tz": "Asia/Tokyo"})]),
        message("tool", "11:00", tool_call_id="b", name="get_time"),
        message("tool", "10:00", tool_call_id="a", name="get_time"),
        message("assistant", "10:00 and 17:00.", reasoning_content="Both known."),
    ])
    out = write_toolmind_row(row)
    msgs = json.loads(out["messages"])
    assert [m["role"] for m in msgs] == ["system", "user", "reasoning", "tool_call", "tool_output", "reasoning",
                                        "tool_call", "tool_output", "reasoning", "answer"]
    assert out["bridges"] == [2, 5] and out["split"] == "other/x"
    assert msgs[4]["content"] == "<tool_response>10:00</tool_response>"  # paired by id, not by position
    assert msgs[8]["content"] == "<think>Both known.</think>"
    system = parse_system_prompt(msgs[0]["content"])
    assert system.tools == TOOLS and system.instructions == "Be brief."
    # read back: bridges are not mistaken for reasoning of the turn
    back = convert({**out, "bridges": out["bridges"]}, row=0)
    assert [m.get("reasoning_content") for m in back["messages"] if m["role"] == "assistant"] == [None, None, "Both known."]
    assert write_toolmind_row(back)["messages"] == out["messages"]


@pytest.mark.parametrize("messages, field", [
    ([message("user", "hi"), message("tool", "orphan", tool_call_id=None)], "messages[1]"),
    ([message("user", "hi"), message("assistant", "", tool_calls=[tool_call("a", "get_time", {})])],
     "messages[1].tool_calls[0]"),
    ([message("user", "hi"), message("user", "again"), message("assistant", "ok")], "messages[1]"),
    ([message("user", "hi"), message("assistant", "")], "messages[1].content"),
    ([message("user", "hi")], "messages[0]"),
])
def test_writer_refuses_rows_it_would_have_to_invent_content_for(messages, field):
    with pytest.raises(ConversionError) as err:
        TOOLMIND_FORMAT.write(_foreign(messages))
    assert err.value.field == field


def test_a_row_opening_on_an_assistant_turn_is_refused_as_such_not_as_one_after_a_system_turn_it_lacks():
    with pytest.raises(ConversionError) as err:
        TOOLMIND_FORMAT.write(_foreign([message("assistant", "Hello."), message("user", "hi")]))
    assert err.value.field == "messages[0]" and "assistant turn at the start" in str(err.value)
    assert "system" not in str(err.value)


def test_a_row_without_user_turns_is_refused_as_such_not_as_ending_on_a_system_turn():
    for messages in ([], [message("system", "Be brief.")]):  # was "conversation ends on 'system'"
        with pytest.raises(ConversionError, match="conversation has no user turn; ") as err:
            TOOLMIND_FORMAT.write(_foreign(messages))
        assert err.value.field == "messages[0]"


def test_writer_rerenders_the_system_prompt_after_tools_change(generated_rows):
    row = convert(generated_rows[0])
    row["tools"] = row["tools"][:1]
    system = json.loads(write_toolmind_row(row)["messages"])[0]["content"]
    assert system != row["meta"]["system"] and parse_system_prompt(system).tools == row["tools"]
    assert toolmind_messages(row).messages[0]["content"] == system


def test_cli_export_of_the_sample_in_toolmind_format(tmp_path):
    from tooluse_datasets.cli import main

    assert main(["export", "toolmind", "--sample", "--format", "toolmind", "--out", str(tmp_path)]) == 0
    exported = [json.loads(line) for f in sorted(tmp_path.glob("toolmind-toolmind-*.jsonl")) for line in f.open()]
    sample = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    assert len(exported) == len(sample) == gen.SAMPLE_ROWS
    assert sorted(r["messages"] for r in exported) == sorted(r["messages"] for r in sample)
    assert {f.name for f in tmp_path.glob("*.jsonl")} == {f"toolmind-toolmind-{s.hf_name}.jsonl" for s in SPLIT_TABLE}


@pytest.mark.parametrize("utf8", [False, True], ids=["json-ascii", "json-utf8"])
def test_the_card_shape_fast_path_gives_what_the_general_parser_gives(tmp_path, utf8):
    """Rows the card's FSM accepts go through one tight loop; the general parser must give the same row,
    key order included, for every generated row (calls, padding, encodings, catalogs of every layout)."""
    from tooluse_datasets.builders.toolmind.source import _parse_card_row, _RowParser

    path = tmp_path / "rows.parquet"
    gen.write_parquet(str(path), 200, gen.GeneratorOptions(seed=21, max_chars=12_000, ensure_ascii=not utf8), row_group_size=50)
    fast = 0
    for i, native in enumerate(pq.read_table(path).to_pylist()):
        raw = SOURCE.to_raw(native, RowContext("toolmind", "t", i, "train"))
        ensure_ascii = raw["messages_encoding"] != P.ENCODING_UTF8
        quick = _parse_card_row(raw["messages"], SOURCE.options, ensure_ascii)
        if quick is None:
            continue
        fast += 1
        general = _RowParser(SOURCE.options, raw).parse(raw["messages"])
        # (where each message was read: the general parser's, for error messages)
        assert quick.origins == [] and quick.reasoning_origins == {}
        assert json.dumps(quick.__dict__) == json.dumps({**general.__dict__, "origins": [], "reasoning_origins": {}}), i
    assert fast > 150  # the fast path is the common case


def test_rows_marked_as_read_from_text_are_storable_as_they_are(generated_rows):
    """Rows whose values all come from the messages text are marked, so the pipeline neither checks them
    again nor looks for NaN when writing them: every marked row must pass that check. Mutated rows
    (deep nesting, odd numbers, extra columns, broken JSON) and real ones included."""
    import random

    fuzz_rows = benchmark_module("fuzz_rows")
    encoder = arrow_rows.RowEncoder(td.UNIFIED_FEATURES)
    rng = random.Random(5)
    mutator = fuzz_rows.Mutator(rng, huge_chars=3000)
    seeds = fuzz_rows.seed_rows("toolmind", SHARED_DATA) + generated_rows[:50]
    mutated = [codec.try_loads(fuzz_rows.to_json(mutator.mutate("toolmind", rng.choice(seeds)).value))
               for _ in range(1500)]
    natives = generated_rows + [value for ok, value in mutated if ok]
    marked = unmarked = 0
    for i, native in enumerate(natives):
        if not isinstance(native, dict):
            continue
        ctx = RowContext("toolmind", "t", i, "train")
        try:
            unified = SOURCE.to_unified(SOURCE.to_raw(native, ctx), ctx)
        except td.ToolUseDataError:
            continue
        if ctx.values_from_text:
            marked += 1
            encoder.check_row(unified)
            assert encoder.encode_parsed_row(unified) == encoder.encode_row(unified)
        else:
            unmarked += 1
    assert marked > 500 and unmarked > 10, (marked, unmarked)  # 898 and 18 with this seed


def _escaped_brackets(text: str) -> str:
    return text.replace("[", "\\u005b").replace("]", "\\u005d").replace("{", "\\u007b").replace("}", "\\u007d")


def _row_with(system: str, call: str = None, escape_brackets: bool = False) -> dict:
    turns = [("system", system), ("user", "hi"), ("reasoning", "<think>ok</think>")]
    if call is not None:
        turns += [("tool_call", f"<tool_call>{call}</tool_call>"), ("tool_output", "<tool_response>r</tool_response>"),
                  ("reasoning", "<think>ok</think>")]
    turns.append(("answer", "<answer>done</answer>"))
    quote = (lambda s: _escaped_brackets(json.dumps(s))) if escape_brackets else json.dumps
    return {"messages": "[" + ", ".join(f'{{"role": "{r}", "content": {quote(c)}}}' for r, c in turns) + "]",
            "split": "s"}


def _deep_call() -> str:
    value: object = 0
    for _ in range(300):
        value = [value]
    return json.dumps({"name": "f", "arguments": {"a": value}})


_CATALOG = "## Tools\n\n" + json.dumps({"type": "function", "function": {"name": "f", "description": "d",
                                                                        "parameters": {"type": "object"}}})


@pytest.mark.parametrize("native, field", [
    # 1e400 in a catalog only the stdlib's balanced scan reads (orjson refuses the line): inf
    (_row_with('## Tools\n\n{"type": "function", "function": {"name": "f", "description": "d", "parameters": '
               '{"type": "object", "properties": {"x": {"type": "number", "maximum": 1e400}}}}}'), "tools"),
    (_row_with('## Tools\n\n{"type": "function", "function": {"name": "f", "description": "d",\n "parameters": '
               '{"type": "object", "properties": {"x": {"type": "number", "maximum": -1e400}}}}}'), "tools"),
    # a lone surrogate, which the balanced scan keeps
    (_row_with('## Tools\n\n{"type": "function", "function": {"name": "f", "description": "bad \\ud800", '
               '"parameters": {"type": "object"}}}'), "tools"),
    # arguments 300 deep, their brackets written as escapes in the messages text
    (_row_with(_CATALOG, _deep_call(), escape_brackets=True), "messages"),
], ids=["inf-in-line", "inf-pretty-printed", "lone-surrogate", "deep-escaped"])
def test_rows_not_read_exactly_are_not_marked_and_are_skipped_alike(native, field, tmp_path, cache_dir):
    ctx = RowContext("toolmind", "t", 0, "train")
    SOURCE.to_unified(SOURCE.to_raw(native, ctx), ctx)
    assert not ctx.values_from_text
    path = write_jsonl(tmp_path / "rows.jsonl", [native])
    for streaming in (False, True):
        report = td.SkipReport()
        rows = list(td.load("toolmind", data_files=path, split="s", on_error="skip", report=report,
                            streaming=streaming, cache_dir=cache_dir))
        assert rows == [] and report.skipped == 1
        assert report.examples[0].field.startswith(field)


def test_a_catalog_tool_too_deep_to_store_is_reported_on_its_field_in_either_layout(tmp_path, cache_dir):
    """A tool nested as deep as storage allows, on one line or pretty-printed: the row is skipped naming
    ``tools[0]`` (parsing the system prompt never raises)."""
    value: object = {"type": "string"}
    for _ in range(251):
        value = {"type": "object", "properties": {"x": value}}
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": value}}
    rows = [_row_with("## Tools\n\n" + json.dumps(tool)), _row_with("## Tools\n\n" + json.dumps(tool, indent=1))]
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    for streaming in (False, True):
        report = td.SkipReport()
        assert list(td.load("toolmind", data_files=path, split="s", on_error="skip", report=report,
                            streaming=streaming, cache_dir=cache_dir)) == []
        assert report.skipped == 2 and {e.field for e in report.examples} == {"tools[0]"}, report.examples


def test_splits_of_a_json_array_prepared_with_num_proc_read_each_row_once(tmp_path, cache_dir):
    """Prepare with num_proc=2 cuts a JSON array into pieces; each split reads its own rows from them (and the
    first split the row of no split, which it reports), as one process reading the whole array does."""
    good = native_row(conversation())
    values = ["synthetic", "tau-train", "synthetic", 7, "When2Call"] * 6
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{**good, "split": value} for value in values], indent=1))
    shard_bytes = path.stat().st_size // 6
    builder = td.registry.builder_class("toolmind")(config_name="unified", data_files=[str(path)],
                                                    shard_bytes=shard_bytes)
    assert {len(plan.shards) for plan in builder.split_plans()} == {1}  # the whole array, undivided
    assert {len(plan.shards) for plan in builder.split_plans(divide=True)} == {6}
    loaded = {}
    for num_proc in (None, 2):
        report = SkipReport()
        splits = td.load("toolmind", data_files=str(path), on_error="skip", report=report, num_proc=num_proc,
                         shard_bytes=shard_bytes, cache_dir=f"{cache_dir}/{num_proc}")
        loaded[num_proc] = {name: ds.to_list() for name, ds in splits.items()}
        assert report.rows_read == len(values) and report.skipped == 6, num_proc
    assert loaded[2] == loaded[None]
    assert {name: len(rows) for name, rows in loaded[2].items()} == {"synthetic": 12, "When2Call": 6, "tau_train": 6}


def test_tools_of_array_catalogs_are_normalised_once_per_definition(graphsyn_tools, monkeypatch):
    """An array catalog is one line that rarely repeats, its tools often do: each distinct tool is normalised
    once, and every row still gets its own fresh tools, equal to a first reading."""
    from tooluse_datasets.builders.toolmind import system_prompt as sp

    monkeypatch.setattr(sp, "_NORMALIZED", {})
    monkeypatch.setattr(sp, "_LINE_TOOLS", {})
    calls, normalize = [], sp.normalize_tool
    monkeypatch.setattr(sp, "normalize_tool", lambda obj: calls.append(obj) or normalize(obj))

    def catalog(tools):
        return sp.parse_system_prompt(PROTOCOL_TEXT + "\n\n" + json.dumps(tools)).tools

    subsets = [graphsyn_tools[:k] + graphsyn_tools[k + 1:] for k in range(len(graphsyn_tools))]
    read = [catalog(tools) for tools in [graphsyn_tools] + subsets]
    assert len(calls) == len(graphsyn_tools)  # each row's array is new; its tools are not
    assert read == [graphsyn_tools] + subsets
    read[0][0]["function"]["name"] = "changed"  # rows share no objects
    assert catalog(graphsyn_tools) == graphsyn_tools


def test_a_cached_tool_is_never_the_one_of_an_infinite_value():
    """The balanced scan reads 1e400 as infinity, which orjson would write as null: such a tool is not stored
    (the row is refused on ``tools``), whatever tool with null in that place was read before."""
    from tooluse_datasets.builders.toolmind import system_prompt as sp

    def tool(maximum):
        return ('{"name": "f", "description": "d", "parameters": {"type": "object", "properties": '
                '{"x": {"type": "number", "maximum": %s}}}}' % maximum)

    with_null = sp.parse_system_prompt(PROTOCOL_TEXT + "\n\n" + tool("null") + " trailing text")
    assert with_null.tools[0]["function"]["parameters"]["properties"]["x"]["maximum"] is None
    infinite = sp.parse_system_prompt(PROTOCOL_TEXT + "\n\n" + tool("1e400") + " trailing text")
    assert infinite.tools[0]["function"]["parameters"]["properties"]["x"]["maximum"] == float("inf")


def test_instructions_between_catalog_values_are_kept_and_a_repeated_tool_is_one_tool(tmp_path):
    # The card's order is protocol, schemas, then the original domain instructions; a glaive row's original
    # system text (real, row 25475) lists its tool again as pretty JSON.
    native = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())
    glaive_system = native["glaive_function_calling_v2"]["row_25475_exact"]["system"]
    prompt = parse_system_prompt(glaive_system)
    system = render_system_prompt(prompt.tools, "Be polite; never guess.") + "\n\n" + glaive_system
    parsed = parse_system_prompt(system)
    assert [t["function"]["name"] for t in parsed.tools] == ["detect_language"]
    assert parsed.instructions == ("Be polite; never guess.\n\nSYSTEM: You are a helpful assistant with access to "
                                   "the following functions. Use them if required -")
    # two catalogs, each with its own heading: the text between them is the domain's, the headings are not
    two = (f"{PROTOCOL_TEXT}\n\n## Tools\n{json.dumps(TOOLS[0])}\n\nCall tools sparingly.\n\n## More tools\n"
           f"{json.dumps({**TOOLS[0], 'function': {**TOOLS[0]['function'], 'name': 'other'}})}\n\nBe brief.")
    assert parse_system_prompt(two).instructions == "Call tools sparingly.\n\nBe brief."
    assert [t["function"]["name"] for t in parse_system_prompt(two).tools] == ["get_time", "other"]

    msgs = conversation()
    msgs[0]["content"] = system
    path = write_jsonl(tmp_path / "glaive.jsonl", [native_row(msgs, split="glaive-function-calling-v2")])
    row = next(iter(td.load("toolmind", data_files=path, split="glaive_function_calling_v2", streaming=True)))
    assert row["messages"][0] == {"role": "system", "content": parsed.instructions}
    assert [t["function"]["name"] for t in row["tools"]] == ["detect_language"]
    assert json.loads(write_toolmind_row(row)["messages"])[0]["content"] == system  # still byte for byte


@pytest.mark.parametrize("layout", ["array", "lines", "inline"])
def test_a_catalog_in_buttons_tool_tag_leaves_no_tag_in_the_instructions(tmp_path, layout):
    # BUTTONInstruct's own system template (real, verbatim) wraps the tool list in <tool>...</tool>
    button = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())["button_instruct"]
    template = button["system_template_verbatim"].replace("{parallel}", button["parallel_placeholder_values_verbatim"]["off"])
    bare = [t["function"] for t in TOOLS]
    tool_list = {"array": json.dumps(bare), "lines": "\n".join(json.dumps(t) for t in bare),
                 "inline": json.dumps(bare)}[layout]
    system = template.replace("{tool_list}", tool_list)
    if layout == "inline":
        system = system.replace("<tool>\n" + tool_list + "\n</tool>", "<tool>" + tool_list + "</tool>")
        assert "<tool>[" in system
    prompt = parse_system_prompt(system)
    assert prompt.tools_found and [t["function"]["name"] for t in prompt.tools] == [t["name"] for t in bare]
    assert "<tool>" not in prompt.instructions and "</tool>" not in prompt.instructions
    # the sentence that introduces the catalog goes, as a Hermes "<tools></tools> XML tags:" line does; the one
    # before it on that line, the role the prompt gives the model, is the instructions' own and stays
    assert prompt.instructions.startswith("You are an expert in using functions (i.e., tools) to solve users' "
                                          "tasks.\n\nIn your response, you need first provide your observation")
    assert "detailed below" not in prompt.instructions
    assert prompt.instructions.endswith("enclose the final answer within the tag \"<final></final>\".")

    msgs = conversation()
    msgs[0]["content"] = system
    path = write_jsonl(tmp_path / "button.jsonl", [native_row(msgs, split="BUTTONInstruct")])
    row = next(iter(td.load("toolmind", data_files=path, split="BUTTONInstruct", streaming=True)))
    assert row["messages"][0] == {"role": "system", "content": prompt.instructions}
    assert json.loads(write_toolmind_row(row)["messages"])[0]["content"] == system  # the file's text, byte for byte
    # A numbered lead-in ("2. The tools:") is one sentence: nothing of it stays
    assert parse_system_prompt(f"{PROTOCOL_TEXT}\n\nRules.\n2. Use these tools:\n{tool_list}").instructions == "Rules."


@pytest.mark.parametrize("open_tag, close_tag", [("<TOOLS>", "</TOOLS>"), ('<tools type="json">', "</tools>"),
                                                 ("<Tool>", "</Tool>"), ("<tools >", "</tools >")])
@pytest.mark.parametrize("inline", [False, True])
def test_tools_tags_are_read_in_any_case_and_with_attributes(graphsyn_tools, open_tag, close_tag, inline):
    """Prompts spell the catalog's tags in capitals or with attributes: with the tools on lines of their own the
    tools were read but the tag lines stayed in the instructions; right after the tag, no tool was read at all
    (meta.tools_not_found on a row whose catalog is there)."""
    sep = "" if inline else "\n"
    catalog = "\n".join(json.dumps(t) for t in graphsyn_tools)
    msgs = conversation()
    msgs[0]["content"] = (f"{PROTOCOL_TEXT}\n\nYou are a travel agent. Here are the tools:\n"
                          f"{open_tag}{sep}{catalog}{sep}{close_tag}\n\n# Domain\nBe polite.")
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == graphsyn_tools and "tools_not_found" not in row["meta"]
    assert row["messages"][0] == {"role": "system", "content": "You are a travel agent.\n\n# Domain\nBe polite."}
    assert write_toolmind_row(row)["messages"] == native["messages"]  # the text as written, byte for byte
    # <tool_call>, <toolbox> and an empty <tools /> element open no catalog: a definition after them is no tool
    example = '{"name": "get_time", "description": "example", "parameters": {"type": "object"}}'
    for tag in ("<tool_call>", "<toolbox>", "<tools />", "<TOOL/>"):
        assert parse_system_prompt(f"{PROTOCOL_TEXT}\n\nFor example: {tag}{example}").tools == []


@pytest.mark.parametrize("layout", ["array", "objects", "object-then-lines", "one"])
@pytest.mark.parametrize("lead_in", ["Tools:", "You have access to the following tools:",
                                     "You are a travel agent. The functions you may call:"])
def test_a_catalog_that_starts_on_its_lead_in_line_is_read(lead_in, layout):
    """`Tools: {"name": ...}` or `You have access to the following tools: [{...}]`: a catalog starting on the line
    that introduces it was not read (meta.tools_not_found, or its first tool silently missing where the others
    were on lines of their own); the lead-in sentence goes, as on a line of its own."""
    tools = TOOLS + [{"type": "function", "function": {"name": "other", "description": "Another tool",
                                                       "parameters": {"type": "object", "properties": {}}}}]
    one = [json.dumps(t) for t in tools]
    catalog = {"array": json.dumps(tools), "objects": ", ".join(one), "object-then-lines": "\n".join(one),
               "one": one[0]}[layout]
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{lead_in} {catalog}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == (tools[:1] if layout == "one" else tools) and "tools_not_found" not in row["meta"]
    kept = "You are a travel agent.\n\n" if lead_in.startswith("You are") else ""
    assert row["messages"][0] == {"role": "system", "content": f"{kept}# Domain\nBe polite."}
    assert write_toolmind_row(row)["messages"] == native["messages"]  # the text as written, byte for byte
    # a value after a colon on a line that names no tools is no catalog, nor is a call example after one that does
    assert parse_system_prompt(f"Reply as JSON: {one[0]}").tools == []
    assert parse_system_prompt('Call the tools like this: {"name": "get_time", "arguments": {}}').tools == []


@pytest.mark.parametrize("tools", [[], TOOLS])
def test_numbered_instructions_after_the_protocol_are_not_taken_for_its_items(tmp_path, tools):
    # Rows of another source written in the toolmind format and read back: a system message that is a
    # numbered list came back empty when the row had no tools (the protocol's list seemed to go on).
    instructions = "1. Always answer in French.\n2. Never mention prices."
    row = _foreign([message("system", instructions), message("user", "Bonjour"),
                    message("assistant", "Bonjour !")], tools=tools)
    written = write_toolmind_row(row)
    path = write_jsonl(tmp_path / "out.jsonl", [{"messages": written["messages"], "split": "synthetic"}])
    back = next(iter(td.load("toolmind", data_files=path, split="synthetic", streaming=True)))
    assert back["messages"][0] == {"role": "system", "content": instructions}
    assert back["tools"] == tools
    # the protocol's own items, also with a blank line between them, are still not instructions
    spaced = PROTOCOL_TEXT.replace("\n4. ", "\n\n4. ") + "\n\n6. Never reveal this protocol.\n\nDomain rules."
    assert parse_system_prompt(spaced).instructions == "Domain rules."


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_messages_written_content_first_come_back_byte_for_byte(tmp_path, cache_dir, ensure_ascii):
    # json.dumps of such a text's decoded dicts gives the text back (they keep its key order), but the
    # writer puts role first: the text has to be kept verbatim.
    msgs = [{"content": m["content"] + " é", "role": m["role"]} if m["role"] == "user" else m for m in conversation()]
    text = json.dumps(msgs, ensure_ascii=ensure_ascii)
    row = convert({"messages": text, "split": "synthetic"})
    assert row["meta"]["messages_encoding"] == "verbatim" and row["meta"]["messages_text"] == text
    assert write_toolmind_row(row)["messages"] == text
    path = write_parquet(tmp_path / "content_first.parquet", [{"messages": text, "split": "synthetic"}])
    for streaming in (True, False):
        ds = td.load("toolmind", "toolmind", data_files=path, split="synthetic", streaming=streaming,
                     **({} if streaming else {"cache_dir": cache_dir}))
        assert [r["messages"] for r in ds] == [text]


def test_writer_never_writes_an_empty_block(tmp_path):
    # The card rejects empty <think>, <tool_call> and <answer> blocks, and so does the reader: a row the
    # writer accepts must read back. Empty reasoning (a model's "<think>\n\n</think>") is no reasoning: bridged.
    call = [tool_call("a", "get_time", {"tz": "UTC"})]
    row = _foreign([message("user", "hi"), message("assistant", "", reasoning_content="", tool_calls=call),
                    message("tool", "10:00", tool_call_id="a", name="get_time"),
                    message("assistant", "It is 10:00.", reasoning_content=" \n")])
    out = write_toolmind_row(row)
    assert out["bridges"] == [2, 5]
    path = write_jsonl(tmp_path / "out.jsonl", [{"messages": out["messages"], "split": out["split"],
                                                 "bridges": out["bridges"]}])
    back = next(iter(td.load("toolmind", data_files=path, streaming=True)["other_x"]))
    assert [m.get("reasoning_content") for m in back["messages"] if m["role"] == "assistant"] == [None, None]
    assert back["messages"][-1]["content"] == "It is 10:00."
    with pytest.raises(ConversionError) as err:
        write_toolmind_row(_foreign([message("user", "hi"), message("assistant", " \n ")]))
    assert err.value.field == "messages[1].content"


def test_an_empty_tool_response_is_a_tool_that_returned_nothing(tmp_path, cache_dir):
    # The card rejects empty <think>, <tool_call> and <answer> blocks, not empty <tool_response> ones: a tool
    # message with empty content, wrapped, is within its format. Such a row reads (strict) as a result "",
    # the toolmind config gives it back byte for byte, and a foreign row's empty result is written that way.
    msgs = conversation()
    msgs[4]["content"] = "<tool_response></tool_response>"
    native = native_row(msgs)
    row = convert(native)
    assert row["messages"][3] == message("tool", "", tool_call_id="call_0", name="get_time")
    path = write_parquet(tmp_path / "empty_result.parquet", [native])
    ds = td.load("toolmind", "toolmind", data_files=path, split="synthetic", cache_dir=cache_dir)
    assert [r["messages"] for r in ds] == [native["messages"]]
    call = [tool_call("a", "get_time", {"tz": "UTC"})]
    out = write_toolmind_row(_foreign([message("user", "hi"), message("assistant", "", tool_calls=call),
                                       message("tool", "", tool_call_id="a", name="get_time"),
                                       message("assistant", "It returned nothing.")]))
    assert json.loads(out["messages"])[4] == {"role": "tool_output", "content": "<tool_response></tool_response>"}
    back = convert({"messages": out["messages"], "split": out["split"], "bridges": out["bridges"]})
    assert [m["content"] for m in back["messages"] if m["role"] == "tool"] == [""]
    for i, empty in ((2, "<think></think>"), (3, "<tool_call></tool_call>"), (6, "<answer>\n</answer>")):
        msgs = conversation()
        msgs[i]["content"] = empty
        with pytest.raises(InvalidValueError) as err:
            convert(native_row(msgs))
        assert err.value.field == f"messages[{i}].content"


def test_a_call_whose_arguments_quote_the_closing_tag_is_one_call(tmp_path, cache_dir):
    # "</tool_call>" inside a JSON string of the call (code or prompts about tool calls) ends no block: the row
    # reads as the card wrote it, the toolmind config gives it back byte for byte, and a foreign row with such
    # an argument that the writer accepts reads back with the same arguments.
    arguments = {"code": "print('<tool_call>{}</tool_call>')", "note": "</tool_call> <tool_call>"}
    msgs = conversation()
    msgs[3]["content"] = "<tool_call>" + json.dumps({"name": "get_time", "arguments": arguments}) + "</tool_call>"
    native = native_row(msgs)
    row = convert(native)
    assert [c["function"]["arguments"] for m in row["messages"] for c in m.get("tool_calls", [])] == [arguments]
    assert "source_messages" not in row["meta"]
    path = write_parquet(tmp_path / "tag.parquet", [native])
    for streaming in (True, False):
        ds = td.load("toolmind", "toolmind", data_files=path, split="synthetic", streaming=streaming,
                     **({} if streaming else {"cache_dir": cache_dir}))
        assert [r["messages"] for r in ds] == [native["messages"]]
    foreign = _foreign([message("user", "run it"), message("assistant", "", reasoning_content="Run the code.",
                                                            tool_calls=[tool_call("a", "get_time", arguments)]),
                        message("tool", "ok", tool_call_id="a", name="get_time"), message("assistant", "Done.")])
    out = write_toolmind_row(foreign)
    back = convert({"messages": out["messages"], "split": out["split"], "bridges": out["bridges"]})
    assert [c["function"]["arguments"] for m in back["messages"] for c in m.get("tool_calls", [])] == [arguments]
    # Packed calls (strict=False) are still told apart, a tag quoted in one of them included.
    second = json.dumps({"name": "get_time", "arguments": {"tz": "</tool_call>"}})
    packed = conversation()
    packed[3]["content"] = (packed[3]["content"] + "\n<tool_call>" + second + "</tool_call>")
    packed[4:5] = [packed[4], dict(packed[4])]
    lenient = ToolMindSource(ToolMindOptions(strict=False))
    calls = [c["function"]["arguments"] for m in convert(native_row(packed), lenient)["messages"]
             for c in m.get("tool_calls", [])]
    assert calls == [{"tz": "Europe/Paris"}, {"tz": "</tool_call>"}]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_split_value_named_all_gets_a_split_of_its_own_in_both_modes(tmp_path, cache_dir, streaming):
    # "all" is datasets' keyword for the union of the splits; map-style preparing refused it with a bare
    # ValueError while a stream loaded it. It gets a hashed name, as colliding names do; the value stays in subset.
    rows = [native_row(conversation(), split) for split in ("synthetic", "all", "ALL")]
    path = write_parquet(tmp_path / "all.parquet", rows)
    ds = td.load("toolmind", data_files=path, streaming=streaming, **({} if streaming else {"cache_dir": cache_dir}))
    names = {name: [r["subset"] for r in split] for name, split in ds.items()}
    assert names["synthetic"] == ["synthetic"]
    assert sorted(v for name, values in names.items() if name != "synthetic" for v in values) == ["ALL", "all"]
    assert all(name.lower() != "all" for name in names)


def test_split_values_whose_names_differ_in_case_alone_get_names_that_differ_otherwise(tmp_path, cache_dir):
    """Split names become file names (``toolmind-<split>.arrow`` in the cache, an export's ``<split>.jsonl``): on
    a file system that ignores case (macOS, Windows) `Tau` and `tau` were one file, one split's rows written over
    the other's. The second name gets a short hash, as names that collide outright do."""
    rows = [native_row(conversation(), split) for split in ("tau", "Tau", "When2Call", "when2call")]
    path = write_parquet(tmp_path / "case.parquet", rows)
    ds = td.load("toolmind", data_files=path, cache_dir=cache_dir)
    assert len({name.lower() for name in ds}) == len(ds) == 4
    assert ds["When2Call"]["subset"] == ["When2Call"] and ds["Tau"]["subset"] == ["Tau"]
    assert sorted(r["subset"] for name in ds if name not in ("When2Call", "Tau") for r in ds[name]) == \
        ["tau", "when2call"]
    files = {Path(f["filename"]).name.lower() for name in ds for f in ds[name].cache_files}
    assert len(files) == 4


def test_a_bridge_read_back_is_reused_only_where_it_still_bridges_to_the_same_tool(tmp_path):
    # Rows written in toolmind form and read back keep their bridge texts by position. Dropping the first exchange
    # (splitting a multi-turn row) shifts the positions: the first call's bridge ("... `get_time` ...") must not
    # end up before a call of another tool. Unedited rows still come back byte for byte.
    tools = TOOLS + [{"type": "function", "function": {"name": "get_date", "description": "Today's date",
                                                        "parameters": {"type": "object", "properties": {}}}}]
    row = _foreign([
        message("user", "Time?"), message("assistant", "", tool_calls=[tool_call("a", "get_time", {"tz": "UTC"})]),
        message("tool", "10:00", tool_call_id="a", name="get_time"),
        message("assistant", "10:00.", reasoning_content="Known."),
        message("user", "Date?"), message("assistant", "", tool_calls=[tool_call("b", "get_date", {})]),
        message("tool", "May 1", tool_call_id="b", name="get_date"),
        message("assistant", "May 1.", reasoning_content="Known.")], tools=tools)
    out = write_toolmind_row(row)
    assert out["bridges"] == [2, 8]
    path = write_jsonl(tmp_path / "out.jsonl", [{"messages": out["messages"], "split": out["split"],
                                                 "bridges": out["bridges"]}])
    back = next(iter(td.load("toolmind", data_files=path, streaming=True)["other_x"]))
    assert write_toolmind_row(back)["messages"] == out["messages"]
    system, turns = back["messages"][:1], back["messages"][1:]
    second = dict(back, messages=system + turns[4:])
    written = json.loads(write_toolmind_row(second)["messages"])
    bridge = written[2]["content"]
    assert written[3]["role"] == "tool_call" and "get_date" in written[3]["content"]
    assert "get_date" in bridge and "get_time" not in bridge


@pytest.mark.parametrize("with_tools", [True, False])
def test_a_foreign_system_prompt_that_lists_a_tool_in_its_text_reads_back_as_it_was(tmp_path, with_tools):
    # A glaive system prompt (real, row 25475: a tool spelled out as pretty JSON in the text) and BUTTON's real
    # template (a <tool> block) as the system message of real ms-swift rows: the toolmind writer's text must
    # read back as the same system message and tools, not with the text's tools moved into `tools`.
    native = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())
    button = native["button_instruct"]
    prompts = [native["glaive_function_calling_v2"]["row_25475_exact"]["system"],
               button["system_template_verbatim"].replace("{parallel}", button["parallel_placeholder_values_verbatim"]["off"])
               .replace("{tool_list}", json.dumps([t["function"] for t in TOOLS])),
               "  Answer in this shape:\n{\"name\": \"reply\", \"description\": \"the answer\"}\n"]
    lines = shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text(encoding="utf-8").splitlines()
    rows = []
    for prompt in prompts:
        row = json.loads(lines[1])  # user, assistant, tool_call, tool_response, assistant
        if not with_tools:
            row = {"messages": [m for m in row["messages"] if m["role"] in ("user", "assistant")][:1] + [
                {"role": "assistant", "content": row["messages"][-1]["content"]}]}
        row["messages"].insert(0, {"role": "system", "content": prompt})
        rows.append(row)
    original = list(td.load("ms_swift", data_files=write_jsonl(tmp_path / "swift.jsonl", rows), split="train"))
    assert original[0]["tools"] if with_tools else not original[0]["tools"]
    written = write_jsonl(tmp_path / "toolmind.jsonl", [TOOLMIND_FORMAT.write(row) for row in original])
    back = list(td.load("toolmind", data_files=written, split="ms_swift_swift", streaming=True))
    for before, after in zip(original, back, strict=True):
        assert after["messages"][0] == before["messages"][0]
        assert codec.dumps(after["tools"]) == codec.dumps(before["tools"])
        assert [m["role"] for m in after["messages"]] == [m["role"] for m in before["messages"]]


def test_a_bridges_column_naming_a_turn_that_is_no_reasoning_is_that_rows_error(tmp_path, cache_dir, graphsyn_unified):
    """The `bridges` column lists the reasoning turns our writer inserted. An index naming another turn (a column
    edited, or kept while messages were filtered) was dropped without a word: the row loaded, and written back
    lost its `bridges` value, so raw -> unified -> raw was not exact. It is a typed error naming the column."""
    out = write_toolmind_row(dict(graphsyn_unified[0], messages=graphsyn_unified[0]["messages"][:4]))
    messages = json.loads(out["messages"])
    assert [messages[i]["role"] for i in out["bridges"]] == ["reasoning", "reasoning"]
    call = next(i for i, m in enumerate(messages) if m["role"] == "tool_call")
    good = {"messages": out["messages"], "split": out["split"], "bridges": out["bridges"]}
    bad = dict(good, bridges=[out["bridges"][0], call])
    path = write_parquet(tmp_path / "bridged.parquet", [good, bad])
    with pytest.raises(InvalidValueError) as err:
        list(td.load("toolmind", data_files=path, streaming=True)[hf_split_name(out["split"])])
    assert (err.value.row, err.value.field) == (1, "bridges") and "bridged.parquet" in str(err.value)
    assert f"message {call} is a 'tool_call' turn" in err.value.message
    report = SkipReport()
    kept = td.load("toolmind", data_files=path, on_error="skip", report=report, cache_dir=cache_dir)
    assert [len(split) for split in kept.values()] == [1] and report.skipped == 1
    assert dict(report.by_reason) == {"InvalidValueError:bridges": 1}
    # a repeated index, or indices out of order, would not come back as they were either
    ctx = RowContext("toolmind", "t", 0, "")
    for indices in ([out["bridges"][0]] * 2, out["bridges"][::-1]):
        with pytest.raises(InvalidValueError, match="distinct message indices") as err:
            SOURCE.to_raw(dict(good, bridges=indices), ctx)
        assert err.value.field == "bridges"
    # the rows it wrote read back exactly, bridges included
    raw = SOURCE.to_raw(good, ctx)
    assert SOURCE.from_unified(SOURCE.to_unified(raw, ctx)) == raw


@pytest.mark.parametrize("layout", ["lines", "tools_block", "pretty"])
@pytest.mark.parametrize("broken", [0, 1, 2])
def test_a_catalog_tool_that_is_not_json_is_flagged_not_lost_without_a_word(tmp_path, layout, broken):
    """One tool of a catalog cut short (or mistyped) is no tool: the others were read, the row carried no flag,
    and no validation rule could tell (a tool nobody calls in the row). It stays in the instructions, where its
    text is, `meta.tools_unreadable` is set, and the row reads back byte for byte."""
    samples = json.loads(shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json").read_text())["rows"]
    tools = list({t["function"]["name"]: t for row in samples for t in row["tools"]}.values())[:3]
    assert len(tools) == 3
    catalog = gen._catalog_text(tools, layout, ensure_ascii=True)
    whole = json.dumps(tools[broken], indent=4 if layout == "pretty" else None)
    cut = whole[:-1]  # the tool's closing brace lost
    assert catalog.count(whole) == 1
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog}\n\n# Domain\nBe polite."
    read = convert(native_row(msgs))["tools"]  # (xLAM-style parameters read as JSON Schema)
    assert [t["function"]["name"] for t in read] == [t["function"]["name"] for t in tools]
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog.replace(whole, cut)}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    for source in (SOURCE, ToolMindSource(ToolMindOptions(strict=False))):
        row = convert(native, source)
        assert row["tools"] == [t for k, t in enumerate(read) if k != broken]
        assert row["meta"]["tools_unreadable"] is True and "tools_not_found" not in row["meta"]
        assert cut in row["messages"][0]["content"] and row["messages"][0]["content"].endswith("# Domain\nBe polite.")
        if layout == "tools_block":
            # the tags and the sentence announcing them go whichever tool is cut short: with the first or the
            # last, the tag beside it stayed (`<tools>`, or `</tools>` with nothing opening it)
            assert "tools>" not in row["messages"][0]["content"] and "XML tags" not in row["messages"][0]["content"]
        assert write_toolmind_row(row)["messages"] == native["messages"]
    # read whole, the same text carries no flag; nor does prose after a catalog that opens a line with a bracket
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog}\n\n[Note] {{name}} is the tool's name.\n{{name}} first."
    assert "tools_unreadable" not in convert(native_row(msgs))["meta"]



def test_a_fenced_catalog_whose_first_tool_is_not_json_is_flagged(graphsyn_tools):
    """The first tool of a catalog in a code fence cut short was taken for a code block of the instructions: the
    row carried no flag for the tool missing from `tools`, and the opening fence stayed in the instructions."""
    texts = [json.dumps(t) for t in graphsyn_tools]
    cut = texts[0][:len(texts[0]) // 2].rstrip("}]")  # (cut where no bracket ends it, as most cuts are)
    msgs = conversation()
    msgs[0]["content"] = (f"{PROTOCOL_TEXT}\n\nBe polite.\n```json\n" + "\n".join([cut, *texts[1:]])
                          + "\n```\n\n# Domain\nBe brief.")
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == graphsyn_tools[1:] and row["meta"]["tools_unreadable"] is True
    assert row["messages"][0]["content"] == f"Be polite.\n\n{cut}\n\n# Domain\nBe brief."
    assert write_toolmind_row(row)["messages"] == native["messages"]
    # a code block of the instructions, with no tool in it, is none of the catalog's
    msgs[0]["content"] = (f"{PROTOCOL_TEXT}\n\nBe polite.\n```json\n{cut}\n```\n" + "\n".join(texts[1:])
                          + "\n\n# Domain\nBe brief.")
    assert "tools_unreadable" not in convert(native_row(msgs))["meta"]


def test_a_fenced_catalog_whose_last_tool_is_not_json_loses_its_closing_fence(graphsyn_tools):
    """The last tool of a catalog in a code fence cut short: the fence closing the catalog, after that tool's
    text, stayed in the instructions, a code block closed there with none opened."""
    texts = [json.dumps(t) for t in graphsyn_tools]
    cut = texts[-1][:-1]
    msgs = conversation()
    msgs[0]["content"] = (f"{PROTOCOL_TEXT}\n\n## Available Tools\n```json\n" + "\n".join([*texts[:-1], cut])
                          + "\n```\n\n# Domain\nBe polite.")
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == graphsyn_tools[:-1] and row["meta"]["tools_unreadable"] is True
    assert row["messages"][0]["content"] == f"{cut}\n\n# Domain\nBe polite."
    assert write_toolmind_row(row)["messages"] == native["messages"]

def test_generated_rows_have_no_unreadable_catalog_tool(generated_rows):
    counts = [convert(r)["meta"].get("tools_unreadable") for r in generated_rows]
    assert counts == [None] * len(generated_rows)


@pytest.mark.parametrize("arguments, reason", [
    ('{"x": 1e400}', "beyond the range of a double"),
    ('{"x": NaN}', "unexpected character"),
    ('{"x": "cut', "unexpected end of data"),
])
def test_a_call_that_does_not_parse_says_why(arguments, reason):
    """A number beyond a double's range is JSON to the letter, yet not readable as one: the error says which
    (as a NaN or a call cut short does), not only that the call "is not valid JSON"."""
    msgs = conversation()
    msgs[3]["content"] = '<tool_call>{"name": "get_time", "arguments": ' + arguments + '}</tool_call>'
    with pytest.raises(InvalidJsonError, match=reason) as err:
        convert(native_row(msgs))
    assert err.value.field.startswith("messages[3]")


def _format_examples() -> dict[str, str]:
    """Call-format examples with placeholders, as real prompts spell them: the Qwen2.5 template's system turn and
    the card's role table (its `tool_call` example)."""
    import re

    from chat_templates import QWEN25
    excerpt = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    card_call = dict(excerpt["toolmind_cleaned_card"]["message_roles_table"])["tool_call"].split(" — ")[0]
    qwen = re.search(r'\{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>\}', QWEN25).group()
    return {"qwen": qwen.replace('\\"', '"'), "card": P.unwrap(card_call, "tool_call", "", "x").text}


@pytest.mark.parametrize("layout", ["lines", "array", "pretty"])
@pytest.mark.parametrize("example", ["qwen", "card"])
@pytest.mark.parametrize("where", ["before", "after", "between"])
def test_a_call_format_example_next_to_the_catalog_does_not_flag_its_tools_unreadable(tmp_path, layout, example,
                                                                                      where):
    """A format example with placeholders ({"name": <function-name>, ...}) is not JSON, and it is no tool either:
    next to a catalog read whole (right before it, right after it, or in a domain prompt that lists a tool again,
    as glaive's does) it set `meta.tools_unreadable`, which then said nothing. The flag means a catalog tool could
    not be read: a tool cut short beside the same example still sets it."""
    samples = json.loads(shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json").read_text())["rows"]
    tools = list({t["function"]["name"]: t for row in samples for t in row["tools"]}.values())[:3]
    glaive = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())[
        "glaive_function_calling_v2"]["row_25475_exact"]["system"]
    sample = _format_examples()[example]
    catalog = gen._catalog_text(tools, layout, ensure_ascii=True)
    if where == "before":
        system = f"{PROTOCOL_TEXT}\n\n{sample}\n{catalog.split(chr(10), 2)[2]}\n\n# Domain\nBe polite."
    elif where == "after":
        system = f"{PROTOCOL_TEXT}\n\n{catalog}\n{sample}\n\n# Domain\nBe polite."
    else:
        system = f"{PROTOCOL_TEXT}\n\n{catalog}\n\nCall tools like this:\n{sample}\n\n{glaive}"
    msgs = conversation()
    msgs[0]["content"] = system
    native = native_row(msgs)
    row = convert(native)
    names = [t["function"]["name"] for t in tools] + (["detect_language"] if where == "between" else [])
    assert [t["function"]["name"] for t in row["tools"]] == names
    assert "tools_unreadable" not in row["meta"] and "tools_not_found" not in row["meta"]
    assert sample in row["messages"][0]["content"]
    assert write_toolmind_row(row)["messages"] == native["messages"]

    if layout == "array":
        return  # (one tool cut short makes the whole array no JSON: no catalog, tools_not_found)
    whole = json.dumps(tools[1], indent=4 if layout == "pretty" else None)
    assert system.count(whole) == 1
    msgs[0]["content"] = system.replace(whole, whole[:-1])
    native = native_row(msgs)
    row = convert(native)
    assert row["meta"]["tools_unreadable"] is True
    assert write_toolmind_row(row)["messages"] == native["messages"]


@pytest.mark.parametrize("layout", ["array", "lines", "tools_block", "pretty"])
def test_a_responses_api_tool_becomes_the_chat_completions_tool_and_writes_back_byte_for_byte(graphsyn_tools, layout):
    """OpenAI's Responses API declares a function flat: {"type": "function", "name", "description", "parameters",
    "strict"}. Its `type` is the tool's, not the function's: it was copied into `function` as well, a key no
    function has (and templates that render `function` print it). `strict` belongs to the function in Chat
    Completions too, and stays there."""
    flat = [{"type": "function", **t["function"], "strict": k == 0} for k, t in enumerate(graphsyn_tools)]
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{gen._catalog_text(flat, layout, ensure_ascii=True)}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == [{"type": "function", "function": {**t["function"], "strict": k == 0}}
                            for k, t in enumerate(graphsyn_tools)]
    assert "tools_unreadable" not in row["meta"] and "tools_not_found" not in row["meta"]
    assert write_toolmind_row(row)["messages"] == native["messages"]
    # the same tools from another source are written in the Chat Completions shape and read back as they are
    foreign = dict(row, source="ms_swift", meta={})
    again = convert(native_row(json.loads(write_toolmind_row(foreign)["messages"])))
    assert again["tools"] == row["tools"] and again["messages"][1:] == row["messages"][1:]


# An OpenAI custom tool: free-form text input (here a Lark grammar) instead of JSON parameters.
CUSTOM_TOOL = {"type": "custom", "name": "code_exec", "description": "Executes arbitrary Python code.",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}


@pytest.mark.parametrize("layout", ["array", "lines", "tools_block", "pretty"])
@pytest.mark.parametrize("shape", ["responses", "chat_completions"])
def test_a_custom_tool_in_the_catalog_is_refused_naming_the_system_message(tmp_path, graphsyn_tools, layout, shape):
    """A custom tool (OpenAI's Responses API spells it flat, Chat Completions under `custom`) takes free text, not
    JSON arguments. Read as a function it became a tool with empty parameters (teaching calls with `{}`), or, nested,
    no tool at all, its declaration left in the instructions without a word. The unified schema holds function
    tools: the row is an InvalidValueError naming the system message and the tool, a counted skip on request."""
    declared = CUSTOM_TOOL if shape == "responses" else {
        "type": "custom", "custom": {k: v for k, v in CUSTOM_TOOL.items() if k != "type"}}
    catalog = gen._catalog_text([*graphsyn_tools, declared], layout, ensure_ascii=True)
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog}\n\n# Domain\nBe polite."
    with pytest.raises(InvalidValueError, match="'code_exec', a custom tool") as info:
        convert(native_row(msgs))
    assert info.value.field == "messages[0].content"

    path = write_jsonl(tmp_path / "rows.jsonl", [native_row(conversation()), native_row(msgs)])
    report = SkipReport()
    rows = list(td.load("toolmind", data_files=path, split="synthetic", streaming=True, on_error="skip",
                        report=report))
    assert len(rows) == 1 and report.by_reason == {"InvalidValueError:messages[0].content": 1}


@pytest.mark.parametrize("layout", ["array", "lines", "tools_block", "pretty"])
def test_a_call_example_spelled_with_parameters_is_no_tool(graphsyn_tools, layout):
    """DR-Tulu's card (a sibling this reader takes with arguments_key="parameters") shows its call format as
    <tool_call>{"name": "google_search", "parameters": {"query": "query text", ...}}</tool_call>, as Llama 3.1
    spells calls. Such a line in a system prompt was read as a tool: a `google_search` whose "schema" is the
    example's values, beside the real one of that name. Parameters that are values, not parameter
    descriptions, make a call; a tool with a description or a schema is read as before."""
    excerpt = json.loads(shared_data("toolmind", "cleaned_variant_card_and_viewer_excerpts.json").read_text())
    tulu = excerpt["siblings_different_prompt_or_schema"][
        "SupritiVijay/tool-reasoning-sft-RESEARCH-dr-tulu-sft-deep-research-agent-data-cleaned-rectified"]
    domain = tulu["system_prefix_as_displayed"].replace("\\n", "\n").removesuffix("...")
    example = tulu["tool_call_example_from_its_card"]
    msgs = conversation()
    msgs[0]["content"] = (f"{PROTOCOL_TEXT}\n\n{gen._catalog_text(graphsyn_tools, layout, ensure_ascii=True)}\n\n"
                          f"{domain}\n\nFor example:\n{example}")
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == graphsyn_tools
    assert row["messages"][0]["content"].endswith(f"For example:\n{example}")
    assert write_toolmind_row(row)["messages"] == native["messages"]
    # the same call spelled as a tool definition (parameters described) is a tool
    described = {"name": "google_search", "parameters": {"query": {"type": "str", "description": "query text"}}}
    assert [t["function"]["name"] for t in parse_system_prompt(f"{PROTOCOL_TEXT}\n\n{json.dumps(described)}").tools] \
        == ["google_search"]


@pytest.mark.parametrize("fence", ["```", "~~~"])
@pytest.mark.parametrize("layout", ["array", "lines", "pretty"])
def test_a_catalog_in_a_markdown_code_fence_leaves_no_empty_fence_in_the_instructions(graphsyn_tools, layout, fence):
    """A catalog written inside a ```json fence (markdown, as prompts often hold JSON) was read, but the fence lines
    and the heading above them stayed in the system message: "## Available Tools\\n\\n```json\\n\\n```" ahead of
    the instructions, an empty code block announcing tools. The fence is left out as <tools> tags are; a code
    block of the instructions' own, closed before the catalog or after it, is kept whole. A ~~~ fence (markdown's
    other kind, closed by ~~~ only) was left in so, its tools read."""
    catalog = gen._catalog_text(graphsyn_tools, layout, ensure_ascii=True)
    heading, body = catalog.split("\n\n", 1)
    code = "Dates look like this:\n```python\nstr(datetime.date.today())\n```"
    for system, instructions in [
        (f"{PROTOCOL_TEXT}\n\n{heading}\n\n{fence}json\n{body}\n{fence}\n\n# Domain\nBe polite.",
         "# Domain\nBe polite."),
        (f"{PROTOCOL_TEXT}\n\n{code}\n\n{heading}\n{fence}\n{body}\n{fence}\n{code}", f"{code}\n\n{code}"),
        (f"{PROTOCOL_TEXT}\n\n{heading}\n{body}\n\n{code}", code),
    ]:
        msgs = conversation()
        msgs[0]["content"] = system
        native = native_row(msgs)
        row = convert(native)
        assert row["tools"] == graphsyn_tools and "tools_unreadable" not in row["meta"]
        assert row["messages"][0] == {"role": "system", "content": instructions}
        assert write_toolmind_row(row)["messages"] == native["messages"]


@pytest.mark.parametrize("opening, closing", [("```json", "```"), ("~~~json", "~~~"), ("<tools>", "</tools>")])
@pytest.mark.parametrize("layout", ["lines", "pretty"])
def test_a_fenced_or_tagged_catalog_with_crlf_line_ends_is_read_as_with_lf(graphsyn_tools, layout, opening, closing):
    """A fence line ending in CRLF was not taken for the one closing the catalog: "```\\r\\n\\r\\n# Domain..." in the
    system message (also after a tool cut short in the fence); after a tool cut short before </tools>, the tag's
    line break stayed, an empty line more."""
    heading, body = gen._catalog_text(graphsyn_tools, layout, ensure_ascii=True).split("\n\n", 1)
    cut = '{"type": "function", "function": {"name": "cut"'
    for catalog in (body, f"{body}\n{cut}"):
        system = f"{PROTOCOL_TEXT}\n\n{heading}\n\n{opening}\n{catalog}\n{closing}\n\n# Domain\nBe polite."
        with_lf = parse_system_prompt(system)
        assert closing not in with_lf.instructions
        msgs = conversation()
        msgs[0]["content"] = system.replace("\n", "\r\n")
        native = native_row(msgs)
        row = convert(native)
        assert row["tools"] == graphsyn_tools and row["meta"].get("tools_unreadable", False) is with_lf.unreadable
        assert row["messages"][0] == message("system", with_lf.instructions.replace("\n", "\r\n"))
        assert write_toolmind_row(row)["messages"] == native["messages"]


@pytest.mark.parametrize("lead_in", ["## Available Tools", "You may call these functions:", "<tools>"])
def test_a_broken_array_catalog_beside_another_tool_is_flagged(graphsyn_tools, lead_in):
    """A catalog written as one JSON array with one tool cut short is no JSON: none of its tools can be read.
    With a tool listed again further on (glaive's domain prompt), that one tool was read and neither flag set:
    the catalog's tools were lost without a word. A value that does not parse right where a catalog is
    introduced sets `meta.tools_unreadable`; read whole, the same prompt sets nothing."""
    glaive = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())[
        "glaive_function_calling_v2"]["row_25475_exact"]["system"]
    array = json.dumps(graphsyn_tools)
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{lead_in}\n{array}\n\n{glaive}"
    row = convert(native_row(msgs))
    assert [t["function"]["name"] for t in row["tools"]][:len(graphsyn_tools)] == \
        [t["function"]["name"] for t in graphsyn_tools]
    assert "tools_unreadable" not in row["meta"]
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{lead_in}\n{array[:-2]}]\n\n{glaive}"
    native = native_row(msgs)
    row = convert(native)
    assert [t["function"]["name"] for t in row["tools"]] == ["detect_language"]
    assert row["meta"]["tools_unreadable"] is True and "tools_not_found" not in row["meta"]
    assert write_toolmind_row(row)["messages"] == native["messages"]


def test_writer_pairs_results_without_ids_by_position_only_where_their_names_agree():
    """Results without tool_call_id are paired with the calls in order; one whose name says it answers another
    call is refused, rather than written (and read back) as the result of the wrong call."""
    calls = [tool_call("a", "get_time", {"tz": "Europe/Paris"}), tool_call("b", "get_date", {"tz": "Asia/Tokyo"})]
    tools = TOOLS + [{"type": "function", "function": {"name": "get_date", "description": "Current date",
                                                       "parameters": {"type": "object", "properties": {}}}}]

    def row(first: str, second: str) -> dict:
        return _foreign([message("user", "Paris time, Tokyo date?"), message("assistant", "", tool_calls=calls),
                         message("tool", "10:00", name=first), message("tool", "May 1", name=second),
                         message("assistant", "10:00, May 1.")], tools)

    msgs = json.loads(write_toolmind_row(row("get_time", "get_date"))["messages"])
    assert [m["content"] for m in msgs if m["role"] in ("tool_call", "tool_output")] == [
        '<tool_call>{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}</tool_call>',
        "<tool_response>10:00</tool_response>",
        '<tool_call>{"name": "get_date", "arguments": {"tz": "Asia/Tokyo"}}</tool_call>',
        "<tool_response>May 1</tool_response>"]
    with pytest.raises(ConversionError) as err:
        write_toolmind_row(row("get_date", "get_time"))
    assert err.value.field == "messages[2].tool_call_id" and "'get_date'" in err.value.message


def test_a_lenient_result_answers_the_call_turn_it_follows_not_a_call_left_unanswered_before(graphsyn_card_rows):
    """Rows outside the grammar (strict=False) may leave a call unanswered. A later result answers the calls of
    the turn right before it, as unified pairs them, not the oldest open call of the row: here the real calls
    of graph_syn row 0, the first one's result missing (the assistant answers without it and the user asks on)."""
    row0 = graphsyn_card_rows[0]
    first_call, later_call = row0[3], row0[-1]
    result = {"role": "tool_output", "content": "<tool_response>{\"time\": \"15:00\"}</tool_response>"}
    msgs = row0[:3] + [first_call] + row0[5:8] + row0[8:9] + [later_call, result,
                                                               {"role": "reasoning", "content": "<think>Known.</think>"},
                                                               {"role": "answer", "content": "<answer>15:00.</answer>"}]
    assert [m["role"] for m in msgs] == ["system", "user", "reasoning", "tool_call", "reasoning", "answer", "user",
                                         "reasoning", "tool_call", "tool_output", "reasoning", "answer"]
    row = convert(native_row(msgs), ToolMindSource(ToolMindOptions(strict=False)))
    calls = [c for m in row["messages"] for c in m.get("tool_calls", [])]
    assert [c["function"]["arguments"] for c in calls] == [{"timezone": "America/New_York"},
                                                           {"timezone": "Europe/London"}]
    results = [m for m in row["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [(calls[1]["id"], '{"time": "15:00"}')]
    assert row["meta"]["source_messages"] == msgs
    # Nor does a result after a user turn answer a call left open before it: it follows no call turn
    user = {"role": "user", "content": "Never mind that. What time is it in London?"}
    after_user = row0[:3] + [first_call, user, result] + msgs[-2:]
    with pytest.raises(InvalidValueError, match="tool_output without a preceding tool_call") as err:
        convert(native_row(after_user), ToolMindSource(ToolMindOptions(strict=False)))
    assert err.value.field == "messages[5].role"


def test_a_lenient_user_turn_of_tool_response_blocks_right_after_calls_is_their_results(graphsyn_card_rows):
    """Chat templates that send tool results as user turns (Qwen, Hermes) write ``<tool_response>`` blocks in
    a user message. Outside the card's grammar (refused when strict), such a turn right after calls is read with
    strict=False as their results, paired with them, not as text the user said; the row is kept whole."""
    row0 = graphsyn_card_rows[0]
    card = row0[:7]  # system, user, reasoning, tool_call, tool_output, reasoning, answer (real texts)
    expected = convert(native_row(card))["messages"]
    result = P.unwrap(card[4]["content"], "tool_response", "", "content").text
    as_user = [dict(m) for m in card]
    as_user[4] = {"role": "user", "content": f"<tool_response>\n{result}\n</tool_response>"}
    with pytest.raises(InvalidValueError) as err:
        convert(native_row(as_user))
    assert err.value.field == "messages[4].role"
    source = ToolMindSource(ToolMindOptions(strict=False))
    row = convert(native_row(as_user), source)
    assert row["messages"] == expected and row["meta"]["source_messages"] == as_user
    ctx = RowContext("toolmind", "t", 0, "")
    native_raw = source.to_raw(native_row(as_user), ctx)
    assert source.from_unified(source.to_unified(native_raw, ctx)) == native_raw
    # Text the user wrote stays the user's: a block more than the calls awaiting results, or none awaiting, or
    # words between the blocks.
    two = f"<tool_response>{result}</tool_response>\n<tool_response>{result}</tool_response>"
    said = f"<tool_response>{result}</tool_response>\nThanks. And this one?\n<tool_response>{result}</tool_response>"
    for content, messages in ((two, card[:4] + [{"role": "user", "content": two}] + card[5:]),
                              (two, card[:2] + [{"role": "user", "content": two}] + card[5:]),
                              (said, card[:4] + [{"role": "user", "content": said}] + card[5:])):
        read = convert(native_row(messages), source)["messages"]
        assert {"role": "user", "content": content} in read and not any(m["role"] == "tool" for m in read)


def test_call_arguments_given_as_a_json_string_are_read_as_the_object_it_holds(tmp_path, cache_dir):
    """The card validates that each call has `name` and `arguments`; glaive's calls give the arguments as a JSON
    string. A row of the real glaive sample's call in that spelling reads with the arguments it holds, and the
    toolmind config gives the row back byte for byte. A string that holds no JSON object stays refused."""
    native = json.loads(shared_data("toolmind", "source_native_samples.json").read_text())
    glaive = native["glaive_function_calling_v2"]["row_25475_exact"]
    call_line = next(t for t in glaive["chat"].split("\n\n\n") if "<functioncall>" in t)
    name = re.search(r'"name": "([^"]+)"', call_line).group(1)
    arguments_text = re.search(r"\"arguments\": '(.*)'\}", call_line).group(1)
    result = next(t for t in glaive["chat"].split("\n\n\n") if t.startswith("FUNCTION RESPONSE: "))
    msgs = conversation()
    msgs[0]["content"] = PROTOCOL_TEXT + "\n\n" + glaive["system"]
    msgs[3]["content"] = "<tool_call>" + json.dumps({"name": name, "arguments": arguments_text}) + "</tool_call>"
    msgs[4]["content"] = f"<tool_response>{result[len('FUNCTION RESPONSE: '):]}</tool_response>"
    row = convert(native_row(msgs))
    assert [c["function"] for m in row["messages"] for c in m.get("tool_calls", [])] == [
        {"name": "detect_language", "arguments": {"text": "Je suis un étudiant"}}]
    assert [t["function"]["name"] for t in row["tools"]] == ["detect_language"]
    path = write_parquet(tmp_path / "string_arguments.parquet", [native_row(msgs)])
    ds = td.load("toolmind", "toolmind", data_files=path, split="synthetic", cache_dir=cache_dir)
    assert [r["messages"] for r in ds] == [native_row(msgs)["messages"]]
    for text in ("text=Je suis", '["Je suis"]'):
        msgs[3]["content"] = "<tool_call>" + json.dumps({"name": name, "arguments": text}) + "</tool_call>"
        with pytest.raises(InvalidValueError) as err:
            convert(native_row(msgs))
        assert err.value.field == "messages[3].content.arguments" and "JSON string holding one" in err.value.message


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_a_split_column_of_thousands_of_values_is_refused_naming_it(tmp_path, suffix, capsys):
    """A split column that holds an id or a text (a value per row) made a split of every value: planning JSON kept
    a bitmap of rows per value (memory grew with values x rows: 20K values took 543 MB and half a minute)."""
    good = native_row(conversation())
    rows = [{**good, "split": f"row-{i}"} for i in range(1001)]
    path = tmp_path / f"rows.{suffix}"
    if suffix == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(ValueError, match=r"split_column='split': the column of .*rows\.\w+ holds more than 1,000 "
                                         r"distinct values"):
        td.load("toolmind", data_files=str(path), streaming=True)
    # a thousand values are still splits
    path.unlink()
    kept = rows[:1000]
    if suffix == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in kept))
    else:
        pq.write_table(pa.Table.from_pylist(kept), path)
    assert len(td.load("toolmind", data_files=str(path), streaming=True)) == 1000


@pytest.mark.parametrize("separator", [" ", ", ", "", "\t,\t"], ids=["space", "comma", "none", "tab-comma"])
@pytest.mark.parametrize("lead_in", ["## Available Tools\n\n", "<tools>", "<tools>\n"])
def test_tools_sharing_a_line_are_each_read_and_their_separators_are_no_instructions(graphsyn_tools, lead_in,
                                                                                    separator):
    """Tools written one after another on one line (`<tools>{...} {...}</tools>`, or `{...}, {...}`): only the
    first was read; the others stayed in the system message as text, with no flag, gone from `tools`."""
    tools = graphsyn_tools
    assert len(tools) == 2
    close = "</tools>" if lead_in.startswith("<tools>") else ""
    catalog = lead_in + separator.join(json.dumps(t) for t in tools) + close
    prompt = parse_system_prompt(f"{PROTOCOL_TEXT}\n\n{catalog}\n\n# Domain\nBe polite.")
    assert prompt.tools == tools and not prompt.unreadable
    assert prompt.instructions == "# Domain\nBe polite."
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == tools and row["messages"][0]["content"] == "# Domain\nBe polite."
    assert write_toolmind_row(row)["messages"] == native["messages"]  # the file's text, byte for byte


def test_a_comma_between_tools_on_lines_of_their_own_is_no_instruction(graphsyn_tools):
    # glaive-style pretty objects, separated by ",\n" as a list's elements are
    catalog = ",\n".join(json.dumps(t, indent=4) for t in graphsyn_tools[:2])
    prompt = parse_system_prompt(f"{PROTOCOL_TEXT}\n\nUse these functions:\n{catalog}\n\nBe polite.")
    assert prompt.tools == graphsyn_tools[:2] and prompt.instructions == "Be polite."


@pytest.mark.parametrize("catalog", [
    "## Available Tools\n\n{0},\n{1},", "## Available Tools\n\n{0}, {1} ,", "<tools>\n{0},\n{1},\n</tools>",
    "<tools>{0}, {1},</tools>", "<tools>\n{0},\n</tools>\n\n# Domain\nBe polite.\n{1},"],
    ids=["lines", "one-line", "tools-block", "tools-block-one-line", "between-values"])
def test_a_comma_after_the_last_tool_of_a_catalog_is_no_instruction(graphsyn_tools, catalog):
    """A scraped catalog whose last tool keeps its list comma (`{...},\n{...},`): the comma, and in a `<tools>`
    block the closing tag after it, became the start of the system message a model is trained on (","
    alone where the prompt has no instructions); a comma between tools never was."""
    first, second = (json.dumps(t) for t in graphsyn_tools)
    text = f"{PROTOCOL_TEXT}\n\n{catalog.format(first, second)}\n\n# Domain\nBe polite."
    prompt = parse_system_prompt(text)
    assert prompt.tools == graphsyn_tools and not prompt.unreadable
    assert prompt.instructions == "# Domain\nBe polite." + ("\n\n# Domain\nBe polite." if "Be polite" in catalog else "")
    assert parse_system_prompt(f"{PROTOCOL_TEXT}\n\n{catalog.format(first, second)}").instructions == \
        ("# Domain\nBe polite." if "Be polite" in catalog else "")
    msgs = conversation()
    msgs[0]["content"] = text
    native = native_row(msgs)
    row = convert(native)
    assert row["messages"][0] == message("system", prompt.instructions)
    assert write_toolmind_row(row)["messages"] == native["messages"]  # the file's text, byte for byte
    # a comma prose goes on after is the prose's
    assert parse_system_prompt(f"{PROTOCOL_TEXT}\n\n{first}, then call it.").instructions == ", then call it."


def assert_catalog_read_whole(catalog: str, tools: list[dict]) -> None:
    """A system prompt of the protocol, ``catalog`` and a domain line: its tools are ``tools``, unflagged, the
    system message is the domain line, and the row writes back the file's text byte for byte."""
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n## Available Tools\n\n{catalog}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == tools
    assert "tools_unreadable" not in row["meta"] and "tools_not_found" not in row["meta"]
    assert row["messages"][0] == message("system", "# Domain\nBe polite.")
    assert write_toolmind_row(row)["messages"] == native["messages"]


@pytest.mark.parametrize("layout", ["array", "pretty-array", "tools-block-array", "object"])
def test_a_comma_before_a_closing_bracket_of_a_catalog_loses_no_tool(graphsyn_tools, layout):
    """Hand-edited JSON keeps a comma before a closing bracket (`[{...}, {...},]`, `{..., "required": [...],}`). A
    catalog array so written lost every tool (`tools_not_found`, the whole catalog in the system message); written
    one element a line, its tools were read but the row was flagged `tools_unreadable` and its brackets stayed in
    the system message; a tool so written was left out. The comma is read as absent; the text is kept whole."""
    first, second = (json.dumps(t) for t in graphsyn_tools)
    catalog = {"array": f"[{first}, {second},]",
               "pretty-array": f"[\n  {first},\n  {second},\n]",
               "tools-block-array": f"<tools>\n[{first}, {second}, ]\n</tools>",
               "object": first[:-1] + ",}\n" + second.replace('["keyword"]', '["keyword",]')}[layout]
    assert_catalog_read_whole(catalog, graphsyn_tools)
    # anything else that is not JSON still is no tool: a comma with no value after it inside the array
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n## Available Tools\n\n[{first},, {second}]\n\n# Domain\nBe polite."
    assert convert(native_row(msgs))["tools"] == []


@pytest.mark.parametrize("catalog", ["{0};\n{1};", "{0}; {1};", "[{0}, {1}];", "{0}.\n{1}.", "<tools>\n{0};\n{1};\n</tools>"],
                         ids=["lines", "one-line", "array", "full-stops", "tools-block"])
def test_a_semicolon_or_full_stop_after_each_tool_of_a_catalog_is_no_instruction(graphsyn_tools, catalog):
    """A catalog written as statements (`{...};` a line): its tools were read, but each `;` (or `.`) was kept as a
    paragraph of the system message (";\n\n;\n\n# Domain...", with `</tools>` after them in a block), and on
    one line the second tool was not read, unflagged."""
    assert_catalog_read_whole(catalog.format(*(json.dumps(t) for t in graphsyn_tools)), graphsyn_tools)


@pytest.mark.parametrize("markers", [("- ", "- "), ("* ", "* "), ("1. ", "2. ")], ids=["dash", "star", "numbered"])
def test_a_catalog_written_as_a_markdown_list_is_read(graphsyn_tools, markers):
    """A catalog of one tool per list item (`- {...}`): no tool was read (`tools_not_found`, the list left in the
    system message). A tool cut short in the list is flagged, its item left in the instructions as written."""
    first, second = (json.dumps(t) for t in graphsyn_tools)
    assert_catalog_read_whole(f"{markers[0]}{first}\n{markers[1]}{second}", graphsyn_tools)
    cut = f"{markers[0]}{first[:40]}"
    prompt = parse_system_prompt(f"{PROTOCOL_TEXT}\n\n## Available Tools\n\n{cut}\n{markers[1]}{second}\n\nBe polite.")
    assert prompt.tools == graphsyn_tools[1:] and prompt.unreadable
    assert prompt.instructions == f"{cut}\n\nBe polite."


@pytest.mark.parametrize("marker", ["", "- "], ids=["line", "list-item"])
def test_a_call_example_with_empty_arguments_in_the_instructions_is_no_tool(graphsyn_tools, marker):
    """`{"name": "f", "arguments": {}}` (a call taking no arguments) was read as a tool without parameters: a second
    `f` in tools, and the line introducing it and the call were cut out of the instructions."""
    example = f'{marker}{{"name": "{graphsyn_tools[0]["function"]["name"]}", "arguments": {{}}}} calls it'
    prompt = parse_system_prompt(f"{PROTOCOL_TEXT}\n\n## Available Tools\n\n{json.dumps(graphsyn_tools[0])}\n\n"
                                 f"Rules:\n{example}")
    assert prompt.tools == graphsyn_tools[:1] and prompt.instructions == f"Rules:\n{example}"


@pytest.mark.parametrize("layout", ["lines", "pretty-array"])
def test_a_catalog_of_many_tools_each_with_a_comma_before_a_closing_bracket_loses_no_tool(graphsyn_tools, layout):
    """Such commas were left out one at a time, each a copy of the whole text and a decode anew, at most 64 in one
    text: of 70 tools each so written, one a line, the last 6 were lost (the row flagged `tools_unreadable`); in one
    array, all 70 (`tools_not_found`, the whole catalog in the system message). A value is read in one pass now."""
    tools = [copy.deepcopy(graphsyn_tools[1]) for _ in range(70)]
    for i, tool in enumerate(tools):
        tool["function"]["name"] += f"_{i}"
    lines = [json.dumps(tool).replace('["keyword"]', '["keyword",]') for tool in tools]
    assert all(',]' in line for line in lines)
    catalog = "\n".join(lines) if layout == "lines" else "[\n" + ",\n".join(lines) + ",\n]"
    assert_catalog_read_whole(catalog, tools)

@pytest.mark.parametrize("reported", [("Illegal trailing comma before end of array", 9), ("Expecting value", 11)],
                         ids=["python-3.13", "python-3.12"])
def test_a_comma_before_a_closing_bracket_is_left_out_as_each_python_reports_it(reported):
    """Python 3.13 reports a comma before a closing bracket as such, at the comma ("Illegal trailing comma before
    end of array"), where older versions expect a value at the bracket: on 3.13 no such comma was read as absent,
    and every catalog written so lost its tools (the test above failed there)."""
    from tooluse_datasets.builders.toolmind.system_prompt import _decode_without_trailing_commas

    text = '[{"a": 1}, ] and prose'
    exc = json.JSONDecodeError(reported[0], text, reported[1])
    assert _decode_without_trailing_commas(text, 0, exc, [1]) == ([{"a": 1}], 12)
    assert _decode_without_trailing_commas(text, 0, exc, [0]) is None  # (no repair left in this text)


@pytest.mark.parametrize("separator", [", ", ",\n"], ids=["same-line", "own-line"])
@pytest.mark.parametrize("broken", [0, 1], ids=["first-cut", "last-cut"])
def test_a_tool_cut_short_beside_a_comma_separated_tool_is_flagged(graphsyn_tools, separator, broken):
    """A catalog whose tools a comma separates: one of them cut short (or mistyped) was not flagged, the comma
    between it and the tool read hiding it from the check."""
    texts = [json.dumps(t) for t in graphsyn_tools]
    texts[broken] = texts[broken][:-1]  # the tool's closing brace lost
    msgs = conversation()
    # (no lead-in that names tools: the check that a catalog starts there would flag a first tool cut short)
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\nBe polite.\n{separator.join(texts)}\n\n# Domain\nBe brief."
    native = native_row(msgs)
    row = convert(native)
    assert texts[broken] in row["messages"][0]["content"]
    assert write_toolmind_row(row)["messages"] == native["messages"]
    # (the first cut short on the line of the second: the second was not found either, tools_not_found set)
    assert row["tools"] == [t for k, t in enumerate(graphsyn_tools) if k != broken]
    assert row["meta"]["tools_unreadable"] is True and not row["meta"].get("tools_not_found")


@pytest.mark.parametrize("separator", [" ", ", ", ""], ids=["space", "comma", "none"])
def test_a_whole_tool_after_a_cut_one_in_a_tools_block_is_read(graphsyn_tools, separator):
    """`<tools>{cut} {whole}</tools>`: the whole tool was lost with the cut one and the row said no catalog was
    found; the whole one is a tool, the cut one stays in the instructions, flagged, and the tags go."""
    texts = [json.dumps(t) for t in graphsyn_tools]
    cut = texts[0][:-2]  # the tool's last two closing braces lost
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n<tools>{cut}{separator}{texts[1]}</tools>\n\n# Domain\nBe brief."
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == graphsyn_tools[1:]
    assert row["meta"]["tools_unreadable"] is True and not row["meta"].get("tools_not_found")
    assert row["messages"][0]["content"] == f"{cut}{separator}".strip() + "\n\n# Domain\nBe brief."
    assert write_toolmind_row(row)["messages"] == native["messages"]


def test_an_array_cut_short_before_a_tool_on_its_line_is_still_no_catalog(graphsyn_tools):
    """Where the tools of an array cut short end is unknown: none of them (nor a tool after it) is taken for the
    catalog, as before; the row says no tool was read."""
    texts = [json.dumps(t) for t in graphsyn_tools]
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\nBe polite.\n[{texts[0]}, {texts[1]}\n\n# Domain\nBe brief."
    row = convert(native_row(msgs))
    assert row["tools"] == [] and row["meta"]["tools_not_found"] is True


@pytest.mark.parametrize("layout", ["lines", "array"])
def test_tool_parameters_spelled_as_json_text_are_the_schema_it_holds(graphsyn_tools, layout):
    """A catalog tool whose `parameters` is the schema's JSON text (as a tools column stored as text spells it)
    became a tool that takes no parameters: the schema was dropped without a word."""
    spelled = [{**t, "function": {**t["function"], "parameters": json.dumps(t["function"]["parameters"])}}
               for t in graphsyn_tools]
    catalog = gen._catalog_text(spelled, layout, ensure_ascii=True)
    msgs = conversation()
    msgs[0]["content"] = f"{PROTOCOL_TEXT}\n\n{catalog}\n\n# Domain\nBe polite."
    native = native_row(msgs)
    row = convert(native)
    assert row["tools"] == graphsyn_tools
    assert write_toolmind_row(row)["messages"] == native["messages"]


@pytest.mark.parametrize("parameters", [[{"name": "keyword", "type": "string"}], "keyword: string", 3],
                         ids=["list", "text", "number"])
def test_tool_parameters_that_are_no_schema_are_kept_for_validation_to_report(graphsyn_tools, parameters):
    """Parameters of no shape the reader converts were replaced by an empty schema: a tool that takes no
    parameters, the row's calls then passing for calls with undeclared arguments. Kept as given, the schema is
    what `tool.invalid_schema` reports."""
    tool = {**graphsyn_tools[0], "function": {**graphsyn_tools[0]["function"], "parameters": parameters}}
    msgs = conversation()
    msgs[0]["content"] = render_system_prompt([tool], "Be polite.")
    row = convert(native_row(msgs))
    assert row["tools"] == [tool]
    assert [f.field for f in check_row(row) if f.rule == "tool.invalid_schema"] == ["tools[0].function.parameters"]
    # a `required` beside such parameters stays beside them
    tool["function"]["required"] = ["keyword"]
    msgs[0]["content"] = render_system_prompt([tool], "Be polite.")
    assert convert(native_row(msgs))["tools"] == [tool]


@pytest.mark.parametrize("properties", [[{"name": "keyword", "type": "string"}], '{"keyword": {"type": "string"}}'],
                         ids=["list", "text"])
def test_schema_properties_that_are_no_object_are_kept_for_validation_to_report(graphsyn_tools, properties):
    """A schema whose `properties` is no object lost them: `{}` in their place, `required` still naming them."""
    function = graphsyn_tools[0]["function"]
    parameters = {**function["parameters"], "properties": properties}
    tool = {**graphsyn_tools[0], "function": {**function, "parameters": parameters}}
    msgs = conversation()
    msgs[0]["content"] = render_system_prompt([tool], "Be polite.")
    row = convert(native_row(msgs))
    assert row["tools"] == [tool]
    assert [f.field for f in check_row(row) if f.rule == "tool.invalid_schema"] == ["tools[0].function.parameters"]
