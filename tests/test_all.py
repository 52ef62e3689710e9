"""source="all": every source in one schema and one split, read by each source's own code."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import shared_data

import tooluse_datasets as td
from tooluse_datasets.codec import json_bytes


@pytest.mark.parametrize("config", ["unified", "swift"])
def test_all_mixes_every_source_identically_in_both_modes(config, cache_dir):
    files = td.sample_files("all")
    assert set(files) == set(td.registry.source_names())
    mapped = td.load("all", config, data_files=files, split="train", cache_dir=cache_dir)
    streamed = list(td.load("all", config, data_files=files, split="train", streaming=True))
    assert list(mapped) == streamed
    expected = {name: sum(len(list(split)) for split in td.load(name, config, data_files=td.sample_files(name),
                                                                 streaming=True).values())
                for name in td.registry.source_names()}
    if config == "unified":
        assert Counter(r["source"] for r in streamed) == Counter(expected)
        for row in streamed:
            td.validate_unified(row)
    assert len(streamed) == sum(expected.values())


def test_all_rejects_raw_and_unknown_sources(cache_dir):
    message = ("source 'all' has no 'raw' format (raw schemas differ per source); load each source's raw format on "
               "its own")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        td.load("all", "raw", data_files=td.sample_files("all"), split="train", cache_dir=cache_dir)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):  # validate() said only the first half
        td.validate("all", "raw", data_files=td.sample_files("all"))
    with pytest.raises(ValueError, match="unknown keys"):
        td.load("all", data_files={"nope": td.sample_files("nestful")["train"]}, split="train", cache_dir=cache_dir)
    # a key spelled as the source's project is ("ms-swift") was named without the sources or the one meant
    message = ("data_files for source 'all' maps source names to files; unknown keys ['ms-swift', 'nope'] ('ms-swift': "
               f"did you mean 'ms_swift'?); sources: {list(td.SOURCES)}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        td.load("all", data_files={"ms-swift": td.sample_files("ms_swift")["train"], "nope": []}, split="train",
                streaming=True)


@pytest.mark.parametrize("config", ["native", "rwa"])
def test_all_lists_its_own_formats_and_points_no_misspelling_to_raw(config):
    # the formats listed were every source's, raw among them, and "native" was asked whether 'raw' was meant
    message = f"all has no format {config!r}; formats: unified, swift, toolmind, llamafactory"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        td.load("all", config, data_files=td.sample_files("all"), split="train", streaming=True)


@pytest.mark.parametrize("files, held", [(None, "None (NoneType)"), ([""], "an empty path ('')")])
def test_all_names_the_source_whose_data_files_are_no_path(files, held):
    # said "data_files holds None", not which of the sources given it was
    data_files = {"nestful": td.sample_files("nestful")["train"], "ms_swift": files}
    message = f"data_files['ms_swift'] holds {held}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        td.load("all", data_files=data_files, split="train", streaming=True)


def test_all_names_the_member_source_of_a_bad_row(tmp_path, cache_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sample_id": "x", "input": "q", "output": [], "tools": "[not json"}\n')
    with pytest.raises(td.InvalidJsonError) as info:
        list(td.load("all", data_files={"nestful": [str(bad)]}, split="train", streaming=True))
    assert info.value.source == "nestful" and info.value.field == "tools" and info.value.row == 0


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_all_skip_records_name_the_member_source_of_unreadable_lines_and_files(tmp_path, cache_dir, streaming):
    """A line that is not JSON and a file that is not Parquet are found by the member's reader, before any
    conversion: their records said source 'all'."""
    lines = tmp_path / "agent.jsonl"
    lines.write_text(open(td.sample_files("ms_swift")["train"][0]).readline() + "{cut\n")
    not_parquet = tmp_path / "toolmind.parquet"
    not_parquet.write_bytes(b"PAR1 not really")
    report = td.SkipReport(keep_all=True)
    ds = td.load("all", data_files={"ms_swift": [str(lines)], "toolmind": [str(not_parquet)]}, split="train",
                 streaming=streaming, on_error="skip", report=report, cache_dir=cache_dir)
    assert [r["source"] for r in ds] == ["ms_swift"]
    assert sorted((r["source"], r["field"], r["row"]) for r in report.rows) == [
        ("ms_swift", "<line>", 1), ("toolmind", "<file>", None)]
    with pytest.raises(td.InvalidValueError) as info:
        list(td.load("all", data_files={"toolmind": [str(not_parquet)]}, split="train", streaming=True))
    assert info.value.source == "toolmind"


def test_all_offline_without_files_is_the_same_clear_error(monkeypatch, cache_dir):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(td.DataNotFoundError, match="data_files="):
        td.load("all", cache_dir=cache_dir)


def test_all_reads_each_member_as_it_reads_itself(tmp_path):
    """Two ToolMind files in the mix: the rows and ids are those of loading toolmind alone (ids carry the file
    stem when a split has several files), every id unique."""
    import shutil

    sample = td.sample_files("toolmind")["train"][0]
    files = [str(shutil.copy(sample, tmp_path / name)) for name in ("a.parquet", "b.parquet")]
    alone = [r for ds in td.load("toolmind", data_files=files, streaming=True).values() for r in ds]
    mixed = list(td.load("all", data_files={"toolmind": files}, split="train", streaming=True))
    assert sorted(r["id"] for r in mixed) == sorted(r["id"] for r in alone)
    assert len({r["id"] for r in mixed}) == len(mixed) == 2 * 21


def test_all_cuts_members_files_by_its_shard_size():
    """shard_bytes given to the mix reaches every member's planning: a file cut alone is cut the same there."""
    from pathlib import Path

    sample = td.sample_files("ms_swift")["train"][0]
    small = Path(sample).stat().st_size // 4
    alone = td.load("ms_swift", data_files=[sample], split="train", streaming=True, shard_bytes=small)
    mixed = td.load("all", data_files={"ms_swift": [sample]}, split="train", streaming=True, shard_bytes=small)
    assert mixed.num_shards == alone.num_shards > 1
    assert [r["id"] for r in mixed] == [r["id"] for r in alone]


def test_all_takes_each_source_s_files_as_its_split_dict_too(cache_dir):
    """``td.sample_files(name)`` maps split -> files; the mix has one split, so all of them are its files."""
    by_split = {name: td.sample_files(name) for name in ("nestful", "ms_swift")}
    flat = {name: [f for files in splits.values() for f in files] for name, splits in by_split.items()}
    expected = list(td.load("all", data_files=flat, split="train", streaming=True))
    assert {r["source"] for r in expected} == {"nestful", "ms_swift"}
    assert list(td.load("all", data_files=by_split, split="train", streaming=True)) == expected
    assert list(td.load("all", data_files=by_split, split="train", cache_dir=cache_dir)) == expected


def test_all_given_a_folder_for_a_source_advises_a_glob_not_the_data_dir_it_refuses(cache_dir):
    """A folder in a source's data_files was refused advising data_dir=, which source 'all' refuses too."""
    from pathlib import Path

    folder = str(Path(td.sample_files("nestful")["train"][0]).parent)
    with pytest.raises(ValueError, match="data_dir=") as alone:
        td.load("nestful", data_files=folder, split="train", cache_dir=cache_dir)
    with pytest.raises(ValueError, match=r"names the folder .*; pass a glob such as") as mixed:
        td.load("all", data_files={"nestful": folder}, split="train", cache_dir=cache_dir)
    assert "data_dir" not in str(mixed.value)
    glob = str(alone.value).rsplit("a glob such as ", 1)[1].strip("'")
    assert str(mixed.value).endswith(repr(glob))
    assert len(td.load("all", data_files={"nestful": glob}, split="train", cache_dir=cache_dir)) > 0


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_all_names_a_source_given_an_empty_split_dict(cache_dir, streaming):
    """{'nestful': {}} was refused as data_files holding None, which it does not."""
    with pytest.raises(ValueError, match=r"data_files\['nestful'\] for source 'all' is empty \(\{\}\)"):
        td.load("all", data_files={"nestful": {}, "ms_swift": td.sample_files("ms_swift")}, split="train",
                streaming=streaming, cache_dir=cache_dir)


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_all_refuses_data_dir_instead_of_reading_the_upstreams(tmp_path, cache_dir, monkeypatch, streaming):
    """data_dir used to be ignored by the mix, which went on to read every member's upstream files."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="source 'all' takes no data_dir.*data_files"):
        td.load("all", data_dir=str(tmp_path), split="train", streaming=streaming, cache_dir=cache_dir)


# Members for mixing by hand: one split of every source, rows without media only where TRL needs that.
MEMBERS = {"nestful": "train", "ms_swift": "train", "toolmind": "synthetic", "llamafactory": "train"}


@pytest.mark.parametrize("mix", ["concatenate", "interleave"])
def test_map_style_mixes_of_sources_decode_as_their_members_and_as_the_stream(mix, cache_dir):
    """datasets' concatenate_datasets / interleave_datasets over td.load results of several sources (the way to mix
    them with probabilities): the mixed rows are the members' rows, in the shape they decode in (no ``images: []``,
    no ``tool_calls: []``, which TRL takes for vision data and Hermes renders as an empty call turn), and a
    map-style mix gives the rows of the same mix streamed. datasets merges the members' infos into one without
    features, so the mix fell back to plain Features and rows came back with every key."""
    import datasets

    def members(streaming):
        return [td.load(name, data_files=td.sample_files(name), split=split, streaming=streaming, cache_dir=cache_dir)
                for name, split in MEMBERS.items()]

    def mixed(parts):
        if mix == "concatenate":
            return datasets.concatenate_datasets(parts)
        return datasets.interleave_datasets(parts, probabilities=[0.4, 0.3, 0.2, 0.1], seed=42,
                                            stopping_strategy="all_exhausted")

    parts = members(streaming=False)
    alone = {row["id"]: row for part in parts for row in part}
    rows = list(mixed(parts))
    assert len(rows) >= len(alone) and {r["id"] for r in rows} <= set(alone)
    assert [r for r in rows if r != alone[r["id"]]] == []
    assert sum("images" in r for r in rows) == sum("images" in alone[r["id"]] for r in rows) > 0
    assert list(mixed(members(streaming=True))) == rows
    # indexing and batches of the mix decode as a td.load dataset's do
    ds = mixed(parts)
    assert ds[0] == rows[0] and ds[:3]["id"] == [r["id"] for r in rows[:3]]


@pytest.mark.parametrize("mix", ["concatenate", "interleave"])
def test_map_and_filter_of_a_streamed_mix_see_rows_in_their_decoded_shape(mix, cache_dir):
    """datasets gives a mix of streams plain Features rebuilt from the members', and every map, filter or format
    of the mix (TRL's own tokenizing map) decodes through them: rows came back with every key (``images: []``,
    ``tool_calls: []``, ``reasoning_content: None``), so TRL refused a mix filtered after mixing as vision data and
    Hermes-3 rendered plain answers as empty call turns. The mix keeps the members' exact features."""
    import datasets

    parts = [td.load(name, data_files=td.sample_files(name), split=split, streaming=True, cache_dir=cache_dir)
             for name, split in MEMBERS.items()]
    mixed = (datasets.concatenate_datasets(parts) if mix == "concatenate"
             else datasets.interleave_datasets(parts, probabilities=[0.4, 0.3, 0.2, 0.1], seed=42,
                                               stopping_strategy="all_exhausted"))
    assert isinstance(mixed.features, td.ExactFeatures)
    rows = list(mixed)
    assert sum("images" in r for r in rows) > 0
    assert list(mixed.filter(lambda r: True)) == rows
    seen = list(mixed.map(lambda r: {"seen": td.dumps(r["messages"])}))
    assert [td.loads(r["seen"]) for r in seen] == [r["messages"] for r in rows]
    text = list(mixed.filter(lambda r: not r.get("images")))
    assert text == [r for r in rows if "images" not in r]
    assert not any("images" in r or any(m.get("tool_calls") == [] or "reasoning_content" in m
                                        and m["reasoning_content"] is None for m in r["messages"]) for r in text)


@pytest.mark.parametrize("mix", ["concatenate", "interleave"])
def test_streams_rewritten_by_map_mix_as_they_are(mix, cache_dir):
    """A stream's map has no features, and datasets infers a mix member's from its first rows with pyarrow, which
    failed on unified rows (``ArrowInvalid: Could not convert '$var_1.result$'``, arguments of differing types):
    each stream rewritten as the README says for Mistral (``ds.map(td.short_call_ids)``) could not be mixed. The
    members' rows are mixed as the map returned them, exact and in the decoded shape, media kept where a row has
    them, also through a map or filter of the mix."""
    import datasets

    parts = [td.load(name, data_files=td.sample_files(name), split=split, streaming=True, cache_dir=cache_dir)
             for name, split in MEMBERS.items()]
    alone = {r["id"]: td.short_call_ids(r) for part in parts for r in part}
    rewritten = [part.map(td.short_call_ids) for part in parts]
    mixed = (datasets.concatenate_datasets(rewritten) if mix == "concatenate"
             else datasets.interleave_datasets(rewritten, probabilities=[0.4, 0.3, 0.2, 0.1], seed=42,
                                               stopping_strategy="all_exhausted"))
    rows = list(mixed)
    assert len(rows) >= len(alone) and [r for r in rows if r != alone[r["id"]]] == []
    assert sum("images" in r for r in rows) == sum("images" in alone[r["id"]] for r in rows) > 0
    assert list(mixed.filter(lambda r: True)) == rows
    assert list(mixed.map(lambda r: {"n": 0}, remove_columns=["meta"])) == [
        {**{k: v for k, v in r.items() if k != "meta"}, "n": 0} for r in rows]


@pytest.mark.parametrize("mix", ["concatenate", "interleave"])
def test_a_map_style_dataset_made_a_stream_mixes_after_a_stream_in_its_decoded_shape(mix, cache_dir):
    """``ds.to_iterable_dataset()`` of a map-style ``td.load`` mixed after a ``td.load`` stream: datasets types the
    mix's rows only where its features differ from its first member's, and a ``td.load`` stream decodes its own
    rows, so the later members' rows came out as stored: arguments and tools as JSON text (a chat template
    refuses such tools), answers with ``tool_calls: []``, ``images: []`` on every row."""
    import datasets

    streams = [td.load(name, data_files=td.sample_files(name), split=split, streaming=True, cache_dir=cache_dir)
               for name, split in MEMBERS.items()]
    mapped = [td.load(name, data_files=td.sample_files(name), split=split, cache_dir=cache_dir)
              for name, split in MEMBERS.items()]
    alone = {r["id"]: r for part in mapped for r in part}
    made = [part.to_iterable_dataset() for part in mapped[1:]]
    for parts in ([streams[0], *made], [*made, streams[0]]):  # (a stream made so first was read right)
        mixed = (datasets.concatenate_datasets(parts) if mix == "concatenate"
                 else datasets.interleave_datasets(parts, probabilities=[0.4, 0.3, 0.2, 0.1], seed=42,
                                                   stopping_strategy="all_exhausted"))
        rows = list(mixed)
        assert {r["source"] for r in rows} == set(MEMBERS)
        assert [r["id"] for r in rows if r != alone[r["id"]]] == []
        assert json_bytes(rows) == json_bytes([alone[r["id"]] for r in rows])  # floats bit for bit
        assert list(mixed.filter(lambda r: True)) == rows
        # shuffle and each epoch (set_epoch, as Trainer calls it) reorder the members: a made stream may come first
        mixed.set_epoch(1)
        for moved in (mixed, mixed.shuffle(seed=0, buffer_size=4), mixed.shuffle(seed=1, buffer_size=4).map(lambda r: r)):
            again = list(moved)
            assert {r["id"] for r in again} == {r["id"] for r in rows}
            assert [r["id"] for r in again if r != alone[r["id"]]] == []


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("mix", ["concatenate", "interleave"])
def test_a_member_with_the_same_plain_features_mixes_in_the_decoded_shape(mix, streaming, tmp_path, cache_dir):
    """A ``td.load`` dataset saved and read back with ``load_from_disk`` has plain ``Features`` equal to the exact
    ones. Mixed with a ``td.load`` member, the whole mix fell back to plain features, the ``td.load`` member's rows
    too (in either order; where the members' infos were equal, only with the plain member first): every answer
    with ``tool_calls: []`` (an empty call turn under Hermes 3), ``images: []`` on every row (TRL takes the text
    for vision data). The mix reads every member's text as ``td.exact`` does."""
    import datasets

    nestful = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)
    toolmind = td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir)
    alone = {r["id"]: r for part in (nestful, toolmind) for r in part}
    for saved, name in ((toolmind, "other"), (nestful, "same")):  # same: infos equal in everything
        saved.save_to_disk(str(tmp_path / name))
        plain = datasets.load_from_disk(str(tmp_path / name))
        assert not isinstance(plain.features, td.ExactFeatures)
        first = td.load("nestful", data_files=td.sample_files("nestful"), split="train", streaming=True,
                        cache_dir=cache_dir) if streaming else nestful
        if streaming:
            plain = plain.to_iterable_dataset()
        for parts in ([first, plain], [plain, first]):
            mixed = (datasets.concatenate_datasets(parts) if mix == "concatenate"
                     else datasets.interleave_datasets(parts, stopping_strategy="all_exhausted"))
            assert isinstance(mixed.features, td.ExactFeatures) and mixed.features.foreign_text
            rows = list(mixed)
            assert {r["id"] for r in rows} == {r["id"] for part in (nestful, saved) for r in part}
            assert [r["id"] for r in rows if r != alone[r["id"]]] == [], (name, parts[0] is plain)
            assert json_bytes(rows) == json_bytes([alone[r["id"]] for r in rows])
            assert list(mixed.filter(lambda r: True)) == rows


def test_a_stream_map_handing_on_text_from_another_writer_mixes_it_exactly(cache_dir):
    """A stream's map may hand on Arrow tables whose JSON text another writer wrote, without this package's mark on
    integers beyond 64 bits: the features resolved for it read such text as ``td.exact`` does (read as ours,
    ``{"x": 2**70 + 1}`` came back as the float 1.1805916207174113e+21 in the mix)."""
    import datasets
    import pyarrow as pa

    def foreign_meta(table):
        text = pa.array(['{"x":%d}' % (2**70 + 1)] * table.num_rows, type=table.schema.field("meta").type)
        return table.set_column(table.schema.get_field_index("meta"), "meta", text)

    parts = [td.load(name, data_files=td.sample_files(name), split=split, streaming=True, cache_dir=cache_dir)
             for name, split in MEMBERS.items()]
    rewritten = parts[0].with_format("arrow").map(foreign_meta, batched=True).with_format(None)
    mixed = datasets.concatenate_datasets([rewritten, *parts[1:]])
    first = [r for r in mixed if r["source"] == "nestful"]
    assert first and [r["meta"] for r in first] == [{"x": 2**70 + 1}] * len(first)
    assert [r["messages"] for r in first] == [r["messages"] for r in parts[0]]


def test_a_mix_with_text_from_another_writer_decodes_as_foreign_text(cache_dir):
    """One member read through td.exact (JSON text from any writer) makes the merged mix read every text that way."""
    import datasets

    lf = td.load("llamafactory", data_files=td.sample_files("llamafactory"), split="train", cache_dir=cache_dir)
    plain = datasets.Dataset(lf.data, fingerprint="plain-llamafactory")  # features read from the Arrow schema
    parts = [td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir),
             td.exact(plain)]
    assert parts[1].features.foreign_text
    mixed = datasets.concatenate_datasets(parts)
    assert isinstance(mixed.features, td.ExactFeatures) and mixed.features.foreign_text
    assert list(mixed) == [row for part in parts for row in part]


def test_all_names_the_files_field_of_a_member_row_as_the_member_alone_does(tmp_path, cache_dir):
    """A member's error in an expanded row (ms-swift: OpenAI calls become several raw messages) names the file's
    message in the mix as it does when the member is loaded alone, map-style and streaming."""
    import json

    user = {"role": "user", "content": "Weather?"}
    calls = [{"type": "function", "id": i, "function": {"name": n, "arguments": "{}"}} for i, n in (("a", "f"), ("b", "g"))]
    bad = {"messages": [user, {"role": "assistant", "content": "x", "tool_calls": calls},
                        {"role": "tool", "tool_call_id": "a", "content": "r"}, {"role": "assistant", "content": "done"}]}
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (bad, {"messages": [user, {"role": "assistant", "content": "ok"}]})))
    fields = []
    for name, files in (("ms_swift", [str(path)]), ("all", {"ms_swift": [str(path)]})):
        for streaming in (False, True):
            report = td.SkipReport(keep_all=True)
            rows = list(td.load(name, data_files=files, split="train", streaming=streaming, on_error="skip",
                                report=report, cache_dir=cache_dir))
            assert len(rows) == 1
            fields.append([(r["row"], r["field"]) for r in report.rows])
    assert fields == [[(0, "messages[2]")]] * 4


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_all_writer_refusals_name_the_member_source(cache_dir, streaming):
    """A row a writer refuses (config toolmind/llamafactory of the mix) is named and counted under its member
    source, as when the member is loaded alone: it said source 'all'."""
    files = {name: td.sample_files(name) for name in ("nestful", "ms_swift")}
    with pytest.raises(td.ConversionError) as info:
        list(td.load("all", "toolmind", data_files=files, split="train", streaming=True))
    assert (info.value.source, info.value.row, info.value.field) == ("nestful", 0, "messages[1].tool_calls[0]")
    for config in ("toolmind", "llamafactory"):
        expected = []
        for name, member_files in files.items():
            report = td.SkipReport(keep_all=True)
            list(td.load(name, config, data_files=member_files, split="train", streaming=True, on_error="skip",
                         report=report))
            expected += [(r["source"], r["file"], r["row"], r["field"]) for r in report.rows]
        report = td.SkipReport(keep_all=True)
        list(td.load("all", config, data_files=files, split="train", streaming=streaming, on_error="skip",
                     report=report, cache_dir=cache_dir))
        assert expected and sorted((r["source"], r["file"], r["row"], r["field"]) for r in report.rows) == sorted(expected)


_UNFINISHED_MIX_SCRIPT = '''
import sys
import tooluse_datasets as td

files = {"ms_swift": sys.argv[1:], "nestful": td.sample_files("nestful")}
# The iterator is kept in a global: it is still open when the interpreter exits.
rows = iter(td.load("all", data_files=files, split="train", streaming=True))
print(next(rows)["id"])
'''


def test_a_stream_of_all_left_unfinished_at_interpreter_exit_prints_nothing(tmp_path):
    swift_files = sorted(str(p) for p in shared_data("ms_swift").glob("*.jsonl"))
    script = tmp_path / "unfinished_mix.py"
    script.write_text(_UNFINISHED_MIX_SCRIPT)
    env = dict(os.environ, HF_DATASETS_CACHE=str(tmp_path / "hf-cache"), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, str(script), *swift_files], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    first = next(iter(td.load("all", data_files={"ms_swift": swift_files, "nestful": td.sample_files("nestful")},
                              split="train", streaming=True)))
    assert done.stdout.split() == [first["id"]]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_all_names_the_toolmind_message_a_writer_refuses_as_toolmind_alone_does(tmp_path, cache_dir, streaming):
    """A writer's error about a ToolMind row names the file's own message (its reasoning turn), with the unified
    field in its text: read through the mix, it named the unified field only."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    native = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()[0]
    msgs = json.loads(native["messages"])
    assert [m["role"] for m in msgs[4:7]] == ["tool_output", "reasoning", "tool_call"]
    msgs[5]["content"] = msgs[5]["content"].replace("</think>", " The </think> tag closes this.</think>", 1)
    path = str(tmp_path / "quoted.parquet")
    pq.write_table(pa.Table.from_pylist([dict(native, messages=json.dumps(msgs, ensure_ascii=False))]), path)
    with pytest.raises(td.ConversionError, match=r"</think>.*the unified row's messages\[3\]\.reasoning_content"
                       ) as alone:
        list(td.load("toolmind", "swift", data_files=path, split=native["split"], streaming=True))
    with pytest.raises(td.ConversionError, match=r"</think>.*the unified row's messages\[3\]\.reasoning_content"
                       ) as mixed:
        list(td.load("all", "swift", data_files={"toolmind": [path]}, split="train", streaming=streaming,
                     cache_dir=cache_dir))
    assert (mixed.value.source, mixed.value.row, mixed.value.field) == ("toolmind", 0, "messages[5]") == (
        alone.value.source, alone.value.row, alone.value.field)
    # beside another member's rows, which its writer takes: only the ToolMind row is skipped, named the same
    swift_files = td.sample_files("ms_swift")["train"]
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("all", "swift", data_files={"toolmind": [path], "ms_swift": swift_files}, split="train",
                        streaming=streaming, on_error="skip", report=report, cache_dir=cache_dir))
    assert len(rows) == len(list(td.load("ms_swift", "swift", data_files=swift_files, split="train", streaming=True)))
    assert [(r["source"], r["row"], r["field"]) for r in report.rows] == [("toolmind", 0, "messages[5]")]


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_all_says_to_load_a_member_alone_where_its_error_advises_an_option_the_mix_refuses(tmp_path, cache_dir,
                                                                                         streaming):
    """A member's advice to pass its own option (columns=, tags=) was given as is, and following it in the mix
    was refused as an option source 'all' does not have."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n')
    with pytest.raises(td.MissingFieldError) as alone:
        list(td.load("llamafactory", data_files=[str(rows)], split="train", streaming=True))
    assert "columns=" in str(alone.value) and "'all'" not in str(alone.value)
    with pytest.raises(td.MissingFieldError) as mixed:
        list(td.load("all", data_files={"llamafactory": [str(rows)]}, split="train", streaming=streaming,
                     cache_dir=cache_dir))
    assert str(mixed.value).startswith(str(alone.value))
    assert str(mixed.value).endswith("load 'llamafactory' on its own to pass columns, tags, dataset_info, dataset")
    with pytest.raises(ValueError, match="has no option 'columns'"):
        td.load("all", data_files={"llamafactory": [str(rows)]}, split="train", columns={"messages": "messages"})


def test_all_says_which_source_an_option_it_refuses_is_of(cache_dir, capsys):
    """An option of one member (data_version) was refused listing the mix's own options only, without the way
    to pass it: loading that source on its own."""
    from tooluse_datasets.cli import main

    advice = "data_version is nestful's, strict is toolmind's: load the source on its own to pass its options"
    with pytest.raises(ValueError, match=advice):
        td.load("all", data_files=td.sample_files("all"), split="train", data_version="v1", strict=False,
                cache_dir=cache_dir)
    with pytest.raises(ValueError, match="data_version is nestful's"):
        td.validate("all", data_files=td.sample_files("all"), data_version="v1")
    assert main(["stats", "all", "--sample", "--option", "data_version=v1", "--option", "strict=false"]) == 2
    assert advice in capsys.readouterr().err
    with pytest.raises(ValueError) as info:
        td.load("all", data_files=td.sample_files("all"), split="train", nope=1, cache_dir=cache_dir)
    assert "load the source on its own" not in str(info.value)


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "map"])
def test_all_says_to_load_a_member_alone_where_its_plan_advises_an_option_the_mix_refuses(tmp_path, cache_dir,
                                                                                        streaming):
    """ToolMind's split column refused while its files are planned advised split_column=None as is, which the mix
    refuses (the advice of errors of rows said to load the member on its own, this one did not)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tooluse_datasets.builders.toolmind.splits import MAX_SPLIT_VALUES

    path = tmp_path / "rows.parquet"
    messages = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    n = MAX_SPLIT_VALUES + 1
    pq.write_table(pa.table({"messages": [messages] * n, "split": [f"s{i}" for i in range(n)]}), path)
    with pytest.raises(ValueError, match="split_column=None") as alone:
        td.load("toolmind", data_files=str(path), split="train", streaming=True)
    with pytest.raises(ValueError) as mixed:
        td.load("all", data_files={"toolmind": str(path)}, split="train", streaming=streaming, cache_dir=cache_dir)
    assert str(mixed.value) == (f"{alone.value}; source 'all' reads each source with its default options: load "
                                f"'toolmind' on its own to pass split_column")


def test_a_mix_state_resumes_only_the_mix_whose_sources_read_its_files():
    """A file read by another member source gives other rows: a state of the mix reading it as ms-swift rows does
    not resume a mix reading the same file as LLaMA-Factory rows (from a row in that file, or after it)."""
    nestful, swift = td.sample_files("nestful")["train"], td.sample_files("ms_swift")["train"]
    files = {"nestful": nestful, "ms_swift": swift}
    ds = td.load("all", data_files=files, split="train", streaming=True)
    iterator = iter(ds)
    rows = [next(iterator) for _ in range(len(list(td.load("nestful", data_files=nestful, split="train",
                                                                streaming=True))) + 1)]
    assert rows[-1]["source"] == "ms_swift"
    state = ds.state_dict()
    iterator.close()
    same = td.load("all", data_files=files, split="train", streaming=True)
    same.load_state_dict(state)
    assert next(iter(same)) == next(iterator_after(files, len(rows)))
    other = td.load("all", data_files={"nestful": nestful, "llamafactory": swift}, split="train", streaming=True,
                    on_error="skip")
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="taken from a stream of other shards"):
        next(iter(other))
    # as an earlier version saved it, whose digest named no member source: not told which read the file
    shards = same._ex_iterable.shards
    named = ["train", [[Path(s.file).name, s.kind, list(s.row_groups), s.start, s.stop] for s in shards]]
    state["examples_iterable"]["examples_iterable"]["shards"] = \
        f"{len(shards)} shards, {hashlib.sha256(json.dumps(named).encode()).hexdigest()[:16]}"
    same.load_state_dict(state)
    with pytest.raises(ValueError, match="do not name the source reading each file of a mix"):
        next(iter(same))


def iterator_after(files, n):
    iterator = iter(td.load("all", data_files=files, split="train", streaming=True))
    for _ in range(n):
        next(iterator)
    return iterator


def test_export_all_in_format_raw_is_refused_in_the_commands_terms(tmp_path, capsys):
    """load() refused it saying to load each source's raw format on its own: the command exports, it loads nothing."""
    from tooluse_datasets.cli import main

    out = tmp_path / "out"
    assert main(["export", "all", "--sample", "--format", "raw", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "export each source with --format raw on its own" in err and "load" not in err
    assert not out.exists()
    assert main(["export", "nestful", "--sample", "--format", "raw", "--out", str(out)]) == 0
    assert len((out / "nestful-raw-train.jsonl").read_text().splitlines()) == 5
