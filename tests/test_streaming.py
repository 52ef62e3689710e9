"""Streaming by shards: every file type divides into shards that ``n_shards``, ``split_dataset_by_node`` and
worker processes share out; a state dict resumes at the next row without converting consumed rows again (also
after sharding); ``num_proc`` streams the same rows; skip counts add up under ``num_proc=2``."""
from __future__ import annotations

import gc
import json
import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from datasets.distributed import split_dataset_by_node

import tooluse_datasets as td
from tooluse_datasets.builders.toolmind.source import ToolMindSource

from conftest import benchmark_module


@pytest.fixture(scope="module")
def toolmind_file(tmp_path_factory) -> str:
    """240 generated rows in 12 row groups of 20: the synthetic split spans several row groups."""
    gen = benchmark_module("generate_toolmind")
    path = tmp_path_factory.mktemp("stream") / "toolmind.parquet"
    gen.write_parquet(str(path), 240, gen.GeneratorOptions(seed=3, max_chars=12_000), row_group_size=20)
    return str(path)


def _stream(path: str, split: str = "synthetic", **kw):
    return td.load("toolmind", data_files=path, split=split, streaming=True, shard_bytes=1, **kw)


def _read_then_save(ds, rows: int, key: Optional[str] = None) -> tuple[list, dict]:
    """The first ``rows`` rows of the stream ``ds`` (their ``key`` alone, if given), then its ``state_dict()``."""
    iterator = iter(ds)
    head = [next(iterator) if key is None else next(iterator)[key] for _ in range(rows)]
    return head, ds.state_dict()


def test_a_split_has_one_shard_per_row_group_and_nodes_partition_it(toolmind_file):
    whole = list(_stream(toolmind_file))
    ds = _stream(toolmind_file)
    assert ds.n_shards > 1
    parts = [list(split_dataset_by_node(ds, rank=rank, world_size=2)) for rank in (0, 1)]
    ids = [r["id"] for part in parts for r in part]
    assert sorted(ids) == sorted(r["id"] for r in whole) and len(set(ids)) == len(ids)
    assert all(parts)  # both nodes got work


def test_shuffled_and_interleaved_streams_give_the_same_rows(toolmind_file):
    """What a trainer does with a stream: a shuffle buffer (shards shuffled too, a new order each epoch) and
    sources mixed with interleave_datasets; datasets reads both from threads."""
    from datasets import interleave_datasets

    from tooluse_datasets.codec import json_bytes

    exact = lambda rows: sorted(json_bytes(r) for r in rows)  # noqa: E731  (values, key order and types)
    whole = list(_stream(toolmind_file))
    shuffled = _stream(toolmind_file).shuffle(seed=0, buffer_size=16)
    first = list(shuffled)
    shuffled.set_epoch(1)
    second = list(shuffled)
    assert exact(first) == exact(second) == exact(whole)
    ids = lambda rows: [r["id"] for r in rows]  # noqa: E731
    assert ids(first) != ids(whole) and ids(second) != ids(whole) and ids(first) != ids(second)

    swift = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    swift_rows = list(swift)
    mixed = list(interleave_datasets([_stream(toolmind_file), swift], stopping_strategy="all_exhausted"))
    by_source = {s: [r for r in mixed if r["source"] == s] for s in ("toolmind", "ms_swift")}
    assert exact(by_source["toolmind"]) == exact(whole)
    # the shorter source is cycled until the longer one ends
    assert len(by_source["ms_swift"]) > len(swift_rows)
    assert set(map(json_bytes, by_source["ms_swift"])) == set(map(json_bytes, swift_rows))


def test_the_first_streamed_row_waits_for_a_few_rows_read_not_a_whole_batch(tmp_path, monkeypatch):
    """Parquet rows are read and converted 64 at a time, whatever batch_size says, so the first row of a stream
    waits for one such read, not for a 1,000-row batch to be read and decoded."""
    from tooluse_datasets.builders.toolmind import source as toolmind_source, splits

    gen = benchmark_module("generate_toolmind")
    path = str(tmp_path / "one_row_group.parquet")
    gen.write_parquet(path, 300, gen.GeneratorOptions(seed=5, max_chars=3_000), row_group_size=300)
    read: list[int] = []
    original = splits._select
    monkeypatch.setattr(splits, "_select", lambda *a, **k: read.append(a[0].num_rows) or original(*a, **k))
    converted: list[int] = []
    to_raw = ToolMindSource.to_raw
    monkeypatch.setattr(ToolMindSource, "to_raw", lambda self, native, ctx: converted.append(len(read)) or
                        to_raw(self, native, ctx))
    rows = iter(td.load("toolmind", data_files=path, split="synthetic", streaming=True))
    next(rows)
    assert read == [toolmind_source.READ_BATCH_ROWS] == [64]
    rest = list(rows)
    assert sum(read) == 300 and len(rest) + 1 == len(converted) > 64
    # the split's first 64 rows (the file's first) converted after the first read, the next 64 after the second
    assert converted[:128] == [1] * 64 + [2] * 64 and converted == sorted(converted)


def _ms_swift_rows(copies: int) -> list[str]:
    rows = [line for f in td.sample_files("ms_swift")["train"] if f.endswith(".jsonl")
            for line in Path(f).read_text().splitlines() if line.strip()]
    return [line.replace('"messages"', f'"n": {i}, "messages"', 1) for i, line in enumerate(rows * copies)]


@pytest.mark.parametrize("layout", ["json array", "json lines", "parquet"])
def test_reshard_cuts_a_file_that_is_one_shard_and_gives_the_same_rows(tmp_path, toolmind_file, layout):
    """datasets' IterableDataset.reshard(), which its DataLoader advises when workers outnumber shards, cuts
    each kind of shard further: a JSON array (one shard to a stream) between elements, JSON Lines into smaller
    byte ranges, Parquet into single row groups. The rows and their order are the same, nodes partition them,
    and a state dict saved in the middle of a piece resumes at the next row."""
    if layout == "parquet":
        size = Path(toolmind_file).stat().st_size
        load = lambda: td.load("toolmind", data_files=toolmind_file, split="synthetic", streaming=True,  # noqa: E731
                               shard_bytes=10 * size)
    else:
        path = tmp_path / ("rows.json" if layout == "json array" else "rows.jsonl")
        elements = _ms_swift_rows(copies=30)
        path.write_text("[\n" + ",\n".join(elements) + "\n]\n" if layout == "json array" else
                        "\n".join(elements) + "\n")
        load = lambda: td.load("ms_swift", data_files=str(path), split="train", streaming=True,  # noqa: E731
                               shard_bytes=path.stat().st_size)
    whole = list(load())
    assert load().num_shards == 1 and len(whole) > 50
    resharded = load().reshard()
    assert resharded.num_shards >= 4 and resharded.num_shards % 2 == 0
    assert list(resharded) == whole
    parts = [[r["id"] for r in split_dataset_by_node(load().reshard(), rank=rank, world_size=2)] for rank in (0, 1)]
    ids = parts[0] + parts[1]
    assert all(parts) and sorted(ids) == sorted(r["id"] for r in whole) and len(set(ids)) == len(ids)
    ds = load().reshard()
    iterator = iter(ds)
    head = [next(iterator) for _ in range(len(whole) // 3)]
    resumed = load().reshard()
    resumed.load_state_dict(ds.state_dict())
    assert head + list(resumed) == whole


def test_reshard_of_a_streams_part_gives_that_parts_rows(tmp_path):
    """``stream.shard(2, i, contiguous=False)`` keeps every other byte range of a file; reshard() cut them and
    joined a piece of one with a piece of the next across the range between, whose rows (another part's) the
    joined piece then read too: 181 rows for a part of 121."""
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(_ms_swift_rows(copies=40)) + "\n")
    stream = td.load("ms_swift", data_files=str(path), split="train", streaming=True,
                     shard_bytes=path.stat().st_size // 4 + 1)
    assert stream.num_shards == 4
    for index in (0, 1):
        part = stream.shard(2, index, contiguous=False)
        assert [row["id"] for row in part.reshard()] == [row["id"] for row in part]


def test_reshard_gives_every_row_group_a_shard_where_a_multiple_would_give_no_more(tmp_path):
    """A split of 3 row groups is planned as 2 shards (a multiple of 2); reshard(), which datasets' DataLoader
    advises when 3 workers outnumber them, merged its 3 single row groups back to 2, so the third worker still
    had none and 3 nodes each read every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(td.sample_files("toolmind")["train"][0])
    path = tmp_path / "three_groups.parquet"
    pq.write_table(pa.concat_tables([table] * 3), path, row_group_size=table.num_rows)

    def load():
        return td.load("toolmind", data_files=str(path), split="train", streaming=True, split_column=None,
                       shard_bytes=1)

    assert pq.ParquetFile(path).num_row_groups == 3 and load().num_shards == 2
    resharded = load().reshard()
    assert resharded.num_shards == 3
    whole = [row["id"] for row in load()]
    assert [row["id"] for row in resharded] == whole
    nodes = [split_dataset_by_node(load().reshard(), rank=rank, world_size=3) for rank in range(3)]
    assert [node.num_shards for node in nodes] == [1, 1, 1]  # not every node reading every row
    assert sum(([row["id"] for row in node] for node in nodes), []) == whole


@pytest.fixture
def conversions(monkeypatch):
    """Counts the rows ToolMind converts in this process."""
    seen: list[int] = []
    original = ToolMindSource.to_raw

    def counting(self, native, ctx):
        seen.append(ctx.row)
        return original(self, native, ctx)

    monkeypatch.setattr(ToolMindSource, "to_raw", counting)
    return seen


@pytest.mark.parametrize("consumed", [1, 7, 27])
def test_resuming_from_a_state_dict_starts_at_the_next_row(toolmind_file, conversions, consumed):
    whole = list(_stream(toolmind_file))
    ds = _stream(toolmind_file)
    head, state = _read_then_save(ds, consumed)
    assert head == whole[:consumed]

    resumed = _stream(toolmind_file)
    resumed.load_state_dict(state)
    conversions.clear()
    rest = list(resumed)
    assert head + rest == whole
    # Nothing consumed is converted again: the reader starts at the next row of the shard in the middle.
    first_resumed_row = int(rest[0]["id"].rsplit("/", 1)[1])
    assert conversions[0] == first_resumed_row
    assert len(conversions) == len(rest)


def test_resuming_after_split_dataset_by_node(toolmind_file, conversions):
    node = lambda: split_dataset_by_node(_stream(toolmind_file), rank=1, world_size=2)  # noqa: E731
    whole = list(node())
    ds = node()
    iterator = iter(ds)
    head = [next(iterator) for _ in range(5)]
    resumed = node()
    resumed.load_state_dict(ds.state_dict())
    conversions.clear()
    rest = list(resumed)
    assert head + rest == whole
    assert len(conversions) == len(rest)


def test_a_state_from_a_stream_planned_otherwise_is_refused_not_silently_resumed(toolmind_file, tmp_path):
    """Loaded into other shards (another shard_bytes, another file, another node), the positions would name other
    rows: 600 of 1,100 rows were lost without a word. Data moved to another folder still resumes."""
    ds = _stream(toolmind_file)
    head, state = _read_then_save(ds, 25)
    other_shards = td.load("toolmind", data_files=toolmind_file, split="synthetic", streaming=True)  # one shard
    other_file = tmp_path / "other.parquet"
    benchmark_module("generate_toolmind").write_parquet(str(other_file), 60, row_group_size=20)
    for stream in (other_shards, _stream(str(other_file)),
                   split_dataset_by_node(_stream(toolmind_file), rank=1, world_size=2)):
        stream.load_state_dict(state)
        with pytest.raises(ValueError, match="this state_dict was taken from a stream of other shards"):
            next(iter(stream))

    moved = tmp_path / "moved" / Path(toolmind_file).name
    moved.parent.mkdir()
    moved.write_bytes(Path(toolmind_file).read_bytes())
    resumed = _stream(str(moved))
    resumed.load_state_dict(state)
    assert head + list(resumed) == list(_stream(toolmind_file))



@pytest.mark.parametrize("other", [(4, 1), (5, 0)], ids=["another node", "another world size"])
def test_a_state_of_a_node_that_keeps_every_nth_row_is_refused_by_another_node(toolmind_file, other):
    """Where the world size does not divide the shards (6 shards, 4 nodes), every node reads every row and keeps
    every world_size-th: the nodes' streams have the same shards, so node 0's state, loaded into node 1, was
    resumed from node 0's position and node 1's first rows (3 of its 28) were never handed out. A state names the
    node it was taken from; any other refuses it. Its own node resumes it."""
    def node(world_size, rank):
        return split_dataset_by_node(_stream(toolmind_file), rank=rank, world_size=world_size)

    head, state = _read_then_save(node(4, 0), 3, key="id")
    resumed = node(*other)
    resumed.load_state_dict(state)
    nodes, rank = other
    with pytest.raises(ValueError, match=rf"taken from node 0 of 4 \(split_dataset_by_node\), where this stream is "
                                         rf"node {rank} of {nodes} \(split_dataset_by_node\): a state resumes the "
                                         "node it was taken from"):
        next(iter(resumed))
    own = node(4, 0)
    own.load_state_dict(state)
    assert head + [r["id"] for r in own] == [r["id"] for r in node(4, 0)]


def test_a_state_of_one_file_of_a_zip_archive_is_refused_by_another_file_of_it(tmp_path):
    """A file of a zip archive was known to a state by the archive's name alone: a state saved 5 rows into one
    JSON array of the archive resumed another at its 6th element, its first 5 rows lost without a word (a
    plain file of another name is refused). The archive moved to another folder still resumes."""
    import zipfile

    from conftest import shared_data

    rows = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    archive = tmp_path / "agent.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("part1.json", "[" + ",".join(rows) + "]")
        zipped.writestr("part2.json", "[" + ",".join(reversed(rows)) + "]")

    def stream(member, folder=tmp_path):
        return td.load("ms_swift", split="train", data_files=f"zip://{member}::{folder / 'agent.zip'}",
                       streaming=True)

    first = stream("part1.json")
    head, state = _read_then_save(first, 5, key="id")
    other = stream("part2.json")
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="this state_dict was taken from a stream of other shards"):
        next(iter(other))
    (tmp_path / "moved").mkdir()
    (tmp_path / "moved" / "agent.zip").write_bytes(archive.read_bytes())
    moved = stream("part1.json", tmp_path / "moved")
    moved.load_state_dict(state)
    assert head + [row["id"] for row in moved] == [row["id"] for row in stream("part1.json")]


def test_a_state_of_one_split_is_refused_by_another_split_of_the_same_file(tmp_path):
    """A Parquet file of one row group (as pandas and pyarrow write up to a million rows) is one shard for every
    split, so a state saved 10 rows into the xlam split named the shards of the synthetic split too: loaded
    there, synthetic resumed at xlam's position, past every synthetic row, and handed out nothing without a
    word."""
    gen = benchmark_module("generate_toolmind")
    path = tmp_path / "toolmind.parquet"
    gen.write_parquet(str(path), 120, gen.GeneratorOptions(seed=5, max_chars=3_000), row_group_size=1_000)

    def stream(split):
        return td.load("toolmind", data_files=str(path), split=split, streaming=True)

    assert list(stream("synthetic")), "the synthetic split has rows, which the wrong resume lost"
    xlam = stream("xlam_function_calling_60k")
    head, state = _read_then_save(xlam, 10, key="id")
    synthetic = stream("synthetic")
    synthetic.load_state_dict(state)
    with pytest.raises(ValueError, match="this state_dict was taken from a stream of other shards"):
        next(iter(synthetic))
    resumed = stream("xlam_function_calling_60k")
    resumed.load_state_dict(state)
    assert head + [row["id"] for row in resumed] == [row["id"] for row in stream("xlam_function_calling_60k")]


def test_a_state_saved_before_states_named_their_split_is_refused_saying_so(tmp_path):
    """States saved before the split was part of their shards' digest named the file names and regions alone, so
    a state of train/rows.jsonl and one of test/rows.jsonl (of one size) are alike, and accepting the old digest
    would resume either split from the other's position. After upgrading, such a state was refused as taken from
    "a stream of other shards", which it was not; it is still refused, saying why and what to do."""
    import hashlib

    from conftest import shared_data

    rows = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "rows.jsonl").write_text("\n".join(rows) + "\n")
    files = {split: str(tmp_path / split / "rows.jsonl") for split in ("train", "test")}
    ds = td.load("ms_swift", data_files=files, split="test", streaming=True)
    iterator = iter(ds)
    next(iterator)
    state = ds.state_dict()
    iterator.close()
    shards = ds._ex_iterable.shards
    regions = [(Path(s.file).name, s.kind, list(s.row_groups), s.start, s.stop) for s in shards]
    legacy = f"{len(shards)} shards, {hashlib.sha256(json.dumps(regions).encode()).hexdigest()[:16]}"
    state["examples_iterable"]["examples_iterable"]["shards"] = legacy  # as the earlier version saved it
    for split in ("train", "test"):
        resumed = td.load("ms_swift", data_files=files, split=split, streaming=True)
        resumed.load_state_dict(state)
        with pytest.raises(ValueError, match="saved by an earlier version of tooluse_datasets, whose states do not"):
            next(iter(resumed))


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_parquet_file_replaced_by_one_of_fewer_row_groups_under_a_stream_is_a_typed_error(toolmind_file, tmp_path,
                                                                                            on_error):
    """A stream plans a file's row groups when it starts; the file replaced meanwhile (data regenerated during a
    long run) by one of fewer row groups failed at the next shard with a bare IndexError from the reader. It is
    the file's error now, naming it: raised, or with on_error="skip" one reported skip for each shard of it."""
    path = tmp_path / "toolmind.parquet"
    path.write_bytes(Path(toolmind_file).read_bytes())
    report = td.SkipReport()
    ds = _stream(str(path), on_error=on_error, report=report)
    assert ds.n_shards > 3

    def read_while_replaced():
        rows = 0
        for rows, _ in enumerate(ds, 1):
            if rows == 5:
                smaller = tmp_path / "smaller.parquet"
                benchmark_module("generate_toolmind").write_parquet(str(smaller), 60, row_group_size=20)
                os.replace(smaller, path)  # 3 row groups
        return rows

    if on_error == "raise":
        with pytest.raises(td.InvalidValueError, match="changed since") as caught:
            read_while_replaced()
        assert caught.value.file == str(path) and caught.value.field == "<file>"
    else:
        read_while_replaced()
        assert report.by_reason["InvalidValueError:<file>"] >= 1


def _swift_rows() -> list[str]:
    from conftest import shared_data

    return [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]


def _same_layout(kind: str, path: Path, tmp_path: Path) -> None:
    """``path`` replaced by a file of the same layout and other rows: Parquet of the same row-group count (another
    seed), or JSON Lines of the same length (its lines reversed after the first 5, so a saved offset there still
    starts a line)."""
    if kind == "parquet":
        other = tmp_path / "other.parquet"
        gen = benchmark_module("generate_toolmind")
        gen.write_parquet(str(other), 240, gen.GeneratorOptions(seed=11, max_chars=12_000), row_group_size=20)
        os.replace(other, path)
    else:
        lines = path.read_text().splitlines()
        path.write_text("\n".join(lines[:5] + lines[:4:-1]) + "\n")


def _planned_stream(kind: str, path: Path, tmp_path: Path, **kw):
    """A stream of several shards over one file of ``kind``: generated ToolMind Parquet (12 row groups of 20
    rows), or real ms-swift rows in JSON Lines."""
    if kind == "parquet":
        gen = benchmark_module("generate_toolmind")
        gen.write_parquet(str(path), 240, gen.GeneratorOptions(seed=3, max_chars=12_000), row_group_size=20)
        return _stream(str(path), **kw)
    path.write_text("\n".join(_swift_rows() * 6) + "\n")
    return td.load("ms_swift", split="train", data_files=str(path), streaming=True,
                   shard_bytes=path.stat().st_size // 4, **kw)


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_file_replaced_by_one_of_the_same_layout_under_a_stream_is_the_files_error(tmp_path, kind, on_error):
    """A stream plans a file's shards when it starts. A file replaced meanwhile by one of the same layout (the
    same row-group count, a JSON Lines file of the same length) was read as it was now, its rows mixed with those
    already handed out from the old one, without a word. Each shard records its file's version (size,
    modification time, the Parquet footer or the JSON file's first and last bytes): the replaced file is its
    error, raised or with on_error="skip" reported once for each of its shards not yet read, and for the shard
    being read when it was replaced (checked again after its last row is read)."""
    path = tmp_path / f"rows.{kind}"
    report = td.SkipReport()
    ds = _planned_stream(kind, path, tmp_path, on_error=on_error, report=report)
    assert ds.n_shards >= 4
    handed = []

    def read_while_replaced():
        for row in ds:
            handed.append(row["id"])
            if len(handed) == 3:
                _same_layout(kind, path, tmp_path)

    if on_error == "raise":
        with pytest.raises(td.InvalidValueError, match="changed since the stream or load was planned") as caught:
            read_while_replaced()
        assert caught.value.file == str(path) and caught.value.field == "<file>"
    else:
        read_while_replaced()
        # The shard being read when the file was replaced is reported too where its end was read after that:
        # JSON Lines, read 125 rows at a time; a ToolMind Parquet shard's batches are joined, read whole first.
        assert report.by_reason["InvalidValueError:<file>"] == ds.n_shards - (kind == "parquet")
    assert len(handed) == len(set(handed)), "rows of the new file were read after those of the old one"


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_a_state_saved_before_its_file_was_replaced_by_one_of_the_same_layout_is_the_files_error(tmp_path, kind):
    """A saved state resumed at its position in whatever the file held now: replaced by one of the same layout,
    it read the new file's rows from there (with a JSON Lines offset that still starts a line) without a word.
    The state names the contents it was saved from; the same contents moved to another folder still resume."""
    path = tmp_path / f"rows.{kind}"
    ds = _planned_stream(kind, path, tmp_path)
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(3)]
    state = ds.state_dict()
    iterator.close()
    whole = [row["id"] for row in _planned_stream(kind, tmp_path / f"again.{kind}", tmp_path)]

    moved = tmp_path / "moved" / path.name
    moved.parent.mkdir()
    moved.write_bytes(path.read_bytes())  # new modification time, same contents
    reader = (_stream(str(moved)) if kind == "parquet" else
              td.load("ms_swift", split="train", data_files=str(moved), streaming=True,
                      shard_bytes=path.stat().st_size // 4))
    reader.load_state_dict(state)
    assert head + [row["id"] for row in reader] == [i.replace("again", "rows") for i in whole]

    _same_layout(kind, path, tmp_path)
    for on_error in ("raise", "skip"):
        report = td.SkipReport()
        reader = (_stream(str(path), on_error=on_error, report=report) if kind == "parquet" else
                  td.load("ms_swift", split="train", data_files=str(path), streaming=True, on_error=on_error,
                          report=report, shard_bytes=path.stat().st_size // 4))
        reader.load_state_dict(state)
        if on_error == "raise":
            with pytest.raises(td.InvalidValueError, match="changed since") as caught:
                next(iter(reader))
            assert caught.value.file == str(path) and caught.value.field == "<file>"
        else:
            rest = [row["id"] for row in reader]
            assert report.by_reason["InvalidValueError:<file>"] == 1
            assert len(head) + len(rest) < len(whole)  # the shard resumed is reported, not read


def test_a_file_rewritten_while_its_shard_is_read_is_the_files_error(tmp_path):
    """A shard is read a buffer at a time: a file rewritten while one of its shards is read (after its version
    was checked at the shard's start) gave the rest of the shard from the new file, after rows of the old one,
    without a word. The version is checked again after the shard's last row."""
    widest = max(len(line.encode()) for line in _swift_rows())
    lines = [line + " " * (widest - len(line.encode())) for line in _swift_rows()]  # one length: lines of the
    path = tmp_path / "rows.jsonl"                                                    # new file start where the old's did
    text = "\n".join(lines * (3_000_000 // len("\n".join(lines)) + 1)) + "\n"  # ~3 MB: more than a read buffer
    path.write_text(text)
    ds = td.load("ms_swift", split="train", data_files=str(path), streaming=True)
    assert ds.n_shards == 1
    handed = 0
    with pytest.raises(td.InvalidValueError, match="changed since the stream or load was planned") as caught:
        for _ in ds:
            handed += 1
            if handed == 3:
                path.write_text("\n".join(reversed(text.rstrip("\n").split("\n"))) + "\n")  # same size
    assert caught.value.file == str(path) and caught.value.field == "<file>"


def test_a_file_replaced_with_its_size_and_modification_time_kept_under_a_stream_is_the_files_error(tmp_path):
    """A shard's version is read again only when the file's size or times changed. Those were the size and
    modification time alone: a file replaced by one of the same size with its time kept (cp -p, rsync -a, touch -r)
    passed unread, and the stream's next shards read the new rows. Every write sets the status-change time, which
    nothing sets back: it is compared too."""
    path = tmp_path / "rows.jsonl"
    ds = _planned_stream("jsonl", path, tmp_path)
    assert ds.n_shards >= 4
    handed = []
    with pytest.raises(td.InvalidValueError, match="changed since the stream or load was planned") as caught:
        for row in ds:
            handed.append(row["id"])
            if len(handed) == 3:
                stat = path.stat()
                _same_layout("jsonl", path, tmp_path)  # as long, other rows
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # touch -r
                assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert caught.value.file == str(path) and caught.value.field == "<file>"
    assert len(handed) == len(set(handed))


@pytest.mark.parametrize("kind", ["jsonl", "json", "parquet"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_file_deleted_between_planning_and_reading_is_a_data_not_found_error_naming_it(tmp_path, kind, on_error):
    """A stream plans its files when it is made and opens each when it reaches it: one deleted (or moved) in
    between was datasets' bare FileNotFoundError from inside its iterator. It is the DataNotFoundError a missing
    path is at planning, naming the file and why it is missing, whatever on_error says (no row of it is bad)."""
    path = tmp_path / f"rows.{kind}"
    if kind == "parquet":
        ds = _planned_stream(kind, path, tmp_path, on_error=on_error)  # ToolMind's reader
    else:
        rows = [json.loads(line) for line in _swift_rows()]
        path.write_text(json.dumps(rows) if kind == "json" else "".join(json.dumps(r) + "\n" for r in rows))
        ds = td.load("ms_swift", split="train", data_files=str(path), streaming=True, on_error=on_error)
    path.unlink()
    with pytest.raises(td.DataNotFoundError, match="deleted or moved since the stream or load was planned") as caught:
        next(iter(ds))
    assert str(path) in str(caught.value)


def test_a_state_saved_before_a_json_array_was_replaced_is_the_files_error(tmp_path):
    """A JSON array (a .json document, not JSON Lines) resumes by element index: replaced by another array since
    the state was saved, it was read on from that index in the new rows, which followed the old ones without a
    word. Its version is checked as a JSON Lines file's is; the same array copied elsewhere still resumes."""
    rows = [json.loads(line) for line in _swift_rows()]
    assert len(rows) >= 8
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows[:6]))

    def stream(where: Path, **kw):
        return td.load("ms_swift", split="train", data_files=str(where), streaming=True, **kw)

    ds = stream(path)
    iterator = iter(ds)
    head = [next(iterator)["messages"] for _ in range(3)]
    state = ds.state_dict()
    iterator.close()

    moved = tmp_path / "moved" / path.name
    moved.parent.mkdir()
    moved.write_bytes(path.read_bytes())
    reader = stream(moved)
    reader.load_state_dict(state)
    assert head + [row["messages"] for row in reader] == [row["messages"] for row in stream(path)]

    path.write_text(json.dumps(rows[-6:]))  # as many elements, other rows
    reader = stream(path)
    reader.load_state_dict(state)
    with pytest.raises(td.InvalidValueError, match="changed since") as caught:
        next(iter(reader))
    assert caught.value.file == str(path) and caught.value.field == "<file>"


def _with_steps(ds, steps: Optional[str]):
    if steps is None:
        return ds
    return ds.map(lambda row: row) if steps == "map" else ds.with_format("arrow")


def _row_ids(rows: list) -> list:
    """The ids of rows handed out by a stream, as dicts or (formatted as Arrow) one-row tables."""
    return [row["id"] if isinstance(row, dict) else row.column("id")[0].as_py() for row in rows]


@pytest.mark.parametrize("kind", ["json", "parquet"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("steps", [None, "map", "arrow"])
def test_a_state_saved_at_the_end_of_a_file_replaced_since_is_the_files_error(tmp_path, kind, on_error, steps):
    """A stream read to its end saves a state past its last shard, which opens no shard on resume: the file
    rewritten since (a JSON array with more rows, Parquet of the same layout) gave no row and no error, where a
    state saved in the file was its error. The version the state names is checked against the file all the same.
    Through a map or an Arrow format, which replay the last batch from a state before it (in an earlier shard, one
    whose rows the report had counted), the error is reported too."""
    path = tmp_path / f"rows.{kind}"
    rows = [json.loads(line) for line in _swift_rows()]

    def stream(**kw):
        return _with_steps(td.load("ms_swift", split="train", data_files=str(path), streaming=True, **kw), steps)

    if kind == "json":
        path.write_text(json.dumps(rows[:6]))
        ds = stream()
    else:
        ds = _with_steps(_planned_stream(kind, path, tmp_path), steps)
    assert len(list(ds)) > 0
    state = ds.state_dict()
    reader = _with_steps(_stream(str(path)), steps) if kind == "parquet" else stream()
    reader.load_state_dict(state)
    assert list(reader) == []  # unchanged: nothing more
    if kind == "json":
        path.write_text(json.dumps(rows[:8]))
    else:
        _same_layout(kind, path, tmp_path)
    report = td.SkipReport()
    reader = _with_steps(_stream(str(path), on_error=on_error, report=report), steps) if kind == "parquet" else \
        stream(on_error=on_error, report=report)
    reader.load_state_dict(state)
    if on_error == "raise":
        with pytest.raises(td.InvalidValueError, match="changed since") as caught:
            list(reader)
        assert caught.value.file == str(path) and caught.value.field == "<file>"
    else:
        assert list(reader) == [] and report.by_reason == {"InvalidValueError:<file>": 1}


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_state_saved_at_the_end_of_a_file_deleted_since_is_a_data_not_found_error_naming_it(tmp_path, kind, on_error):
    """A state past the last shard opens no file on resume: the file deleted (or moved) since the stream was planned
    gave no row and no error, where a state saved in it was the DataNotFoundError naming it."""
    path = tmp_path / f"rows.{kind}"
    ds = _planned_stream(kind, path, tmp_path)
    assert len(list(ds)) > 0
    state = ds.state_dict()
    reader = _stream(str(path), on_error=on_error) if kind == "parquet" else td.load(
        "ms_swift", split="train", data_files=str(path), streaming=True, on_error=on_error,
        shard_bytes=path.stat().st_size // 4)
    reader.load_state_dict(state)
    path.unlink()
    with pytest.raises(td.DataNotFoundError, match="deleted or moved since the stream or load was planned") as caught:
        list(reader)
    assert str(path) in str(caught.value)


def test_a_state_saved_at_the_end_of_a_zip_archives_file_is_a_data_not_found_error_once_the_archive_is_deleted(
        tmp_path):
    """The same for a file read from a local zip archive, the archive deleted since: no row and no error."""
    import zipfile

    archive = tmp_path / "agent.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("rows.jsonl", "\n".join(_swift_rows()) + "\n")

    def stream():
        return td.load("ms_swift", split="train", data_files=f"zip://rows.jsonl::{archive}", streaming=True,
                       on_error="skip")

    ds = stream()
    assert len(list(ds)) > 0
    reader = stream()
    reader.load_state_dict(ds.state_dict())
    archive.unlink()
    with pytest.raises(td.DataNotFoundError, match="deleted or moved since the stream or load was planned") as caught:
        list(reader)
    assert str(archive) in str(caught.value)


@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
@pytest.mark.parametrize("steps", ["map", "arrow"])
def test_a_state_saved_in_a_files_first_batch_through_a_map_or_format_is_the_files_error_once_replaced(
        tmp_path, kind, steps):
    """A map or an Arrow format reads its stream a batch at a time and replays a resumed batch from the state it
    began at: within a file's first batch that is the stream's start, which names no version of the file, so a file
    replaced since was read from its start without a word. The state saved with the batch names the file, which
    the replayed batch is read against; the same contents moved elsewhere still resume."""
    path = tmp_path / f"rows.{kind}"
    ds = _with_steps(_planned_stream(kind, path, tmp_path), steps)
    shard_bytes = path.stat().st_size // 4
    head, state = _read_then_save(ds, 2)

    def reader(where: Path):
        ds = _stream(str(where)) if kind == "parquet" else td.load(
            "ms_swift", split="train", data_files=str(where), streaming=True, shard_bytes=shard_bytes)
        return _with_steps(ds, steps)

    moved = tmp_path / "moved" / path.name
    moved.parent.mkdir()
    moved.write_bytes(path.read_bytes())
    resumed = reader(moved)
    resumed.load_state_dict(state)
    assert _row_ids(head) + _row_ids(list(resumed)) == _row_ids(list(reader(path)))

    _same_layout(kind, path, tmp_path)
    resumed = reader(path)
    resumed.load_state_dict(state)
    with pytest.raises(td.InvalidValueError, match="changed since") as caught:
        next(iter(resumed))
    assert caught.value.file == str(path) and caught.value.field == "<file>"


def test_a_state_saved_in_the_first_batch_of_a_later_file_through_a_map_is_that_files_error_once_replaced(tmp_path):
    """Past a stream's first file, a map's batch replays from the end of the file before, whose version its state
    names: the later file, replaced since, was read without a word."""
    lines = _swift_rows()
    first, later = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(lines[:7]) + "\n")
    later.write_text("\n".join(lines[7:]) + "\n")

    def stream():
        return td.load("ms_swift", split="train", data_files=[str(first), str(later)], streaming=True).map(
            lambda row: row)

    ds = stream()
    _, state = _read_then_save(ds, 9)
    later.write_text("\n".join(reversed(lines[7:])) + "\n")
    resumed = stream()
    resumed.load_state_dict(state)
    with pytest.raises(td.InvalidValueError, match="changed since") as caught:
        next(iter(resumed))
    assert caught.value.file == str(later) and caught.value.field == "<file>"


@pytest.mark.parametrize("consumed", [9, 47])
def test_num_proc_streams_the_same_rows_and_resumes(toolmind_file, conversions, consumed):
    """Row 9 is in the first shard (converted in this process), row 47 in the third (converted by a worker):
    either way a resumed stream converts here only the rest of that shard, from the next row on."""
    whole = list(_stream(toolmind_file))
    ds = _stream(toolmind_file, num_proc=2)
    iterator = iter(ds)
    head = [next(iterator) for _ in range(consumed)]
    state = ds.state_dict()
    rest_of_first = list(iterator)
    assert head + rest_of_first == whole
    resumed = _stream(toolmind_file, num_proc=2)
    resumed.load_state_dict(state)
    conversions.clear()
    assert head + list(resumed) == whole
    assert conversions == list(range(consumed, consumed - consumed % 20 + 20))  # shards of 20 rows


@pytest.mark.parametrize("consumed_batches", [1, 3, 41])
def test_a_stateful_dataloader_with_two_workers_resumes_mid_epoch(toolmind_file, consumed_batches):
    """What a training job that checkpoints does: torchdata's StatefulDataLoader with worker processes saves
    each worker's stream state with the loader's; a loader restored from it hands out every remaining row once
    (the synthetic split has 6 shards, 3 for each worker). After one batch, the second worker's saved state is
    the one it reported at start-up, taken before it divided the shards: it resumes that worker from its start."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")

    def loader():
        return stateful.StatefulDataLoader(_stream(toolmind_file), batch_size=2, num_workers=2,
                                           collate_fn=lambda rows: [r["id"] for r in rows])

    whole = [row_id for batch in loader() for row_id in batch]
    assert len(whole) == len(set(whole)) > 2 * consumed_batches
    head, rest = _stopped_and_resumed(loader, consumed_batches)
    assert len(head) == 2 * consumed_batches
    assert sorted(head + rest) == sorted(whole) and not set(head) & set(rest)


def _stopped_and_resumed(loader, consumed_batches: int) -> tuple[list, list]:
    """The batches' items a StatefulDataLoader from ``loader()`` hands out before its state is taken after
    ``consumed_batches`` batches, and those a new one given that state hands out."""
    first = loader()
    head = []
    for number, batch in enumerate(first):
        head += batch
        if number + 1 == consumed_batches:
            break
    state = first.state_dict()
    del first
    resumed = loader()
    resumed.load_state_dict(state)
    return head, [row_id for batch in resumed for row_id in batch]


def _with_bad_rows(tmp_path: Path) -> str:
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    lines = []
    for i in range(40):
        lines.append(good[i % len(good)].replace('"sample_id": "', f'"sample_id": "{i}-', 1))
        if i % 6 == 0:
            lines.append('{"sample_id": "bad", "input": "trunc')
        if i % 9 == 0:
            lines.append(json.dumps({"sample_id": f"no-output-{i}", "input": "x", "tools": []}))
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
def test_skip_counts_add_up_with_num_proc_2(tmp_path, streaming):
    path = _with_bad_rows(tmp_path)
    lines = Path(path).read_text().splitlines()
    reports = {}
    rows = {}
    for num_proc in (None, 2):
        report = td.SkipReport()
        ds = td.load("nestful", split="train", data_files=path, on_error="skip", report=report, num_proc=num_proc,
                     streaming=streaming, shard_bytes=len(Path(path).read_bytes()) // 5,
                     cache_dir=str(tmp_path / f"cache-{num_proc}"))
        rows[num_proc] = [r["id"] for r in ds]
        reports[num_proc] = report
    assert rows[2] == rows[None]
    for report in reports.values():
        assert report.rows_read == len(lines)
        assert report.skipped == len(lines) - len(rows[None]) == 7 + 5
        assert dict(report.by_reason) == dict(reports[None].by_reason)


def test_a_num_proc_jobs_skip_line_says_it_counts_its_shards_not_the_splits(tmp_path):
    """Each num_proc job logged "nestful train: N rows read, M skipped" for its own shards, which read as the
    whole split's counts; td.load's line after the jobs gives the split's. (The jobs log from worker processes:
    read from the stderr of a process that loads.)"""
    path = _with_bad_rows(tmp_path)
    code = ("import logging, sys; logging.basicConfig(format='%(message)s'); import tooluse_datasets as td; "
            "td.load('nestful', split='train', data_files=sys.argv[1], on_error='skip', num_proc=2, "
            "shard_bytes=int(sys.argv[2]), cache_dir=sys.argv[3])")
    done = subprocess.run([sys.executable, "-c", code, path, str(len(Path(path).read_bytes()) // 5),
                           str(tmp_path / "cache")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "rows read" in line]
    jobs = [line for line in said if line.startswith("nestful train")]
    # (a job whose shards held no bad row says nothing; which job converts which shards is datasets' choice)
    assert jobs and all(re.match(r"nestful train \(\d+ of its \d+ shards\): ", line) for line in jobs)
    lines = Path(path).read_text().splitlines()
    assert [line for line in said if line.startswith("nestful/unified: ")] == [
        f"nestful/unified: {len(lines)} rows read, 12 skipped (InvalidJsonError:<line> x7, MissingFieldError:output x5)"]


@pytest.mark.parametrize("num_proc", [None, 2])
@pytest.mark.parametrize("stop_after", [1, 9, 30])
def test_a_report_counts_the_rows_passed_so_a_stream_resumed_with_it_counts_each_row_once(tmp_path, num_proc,
                                                                                      stop_after):
    """Rows are converted a few ahead (a piece here, a whole shard in a worker): their reads and skips used to
    be counted then, so a stream saved after 1 row and resumed with the same report counted rows 1-3 twice
    (11 read for 8 lines). Counts now follow the consumer: read = handed out + skipped, at every stop."""
    path = _with_bad_rows(tmp_path)
    lines = Path(path).read_text().splitlines()
    report = td.SkipReport(keep_all=True)
    ds = td.load("nestful", split="train", data_files=path, on_error="skip", report=report, streaming=True,
                 num_proc=num_proc, shard_bytes=len(Path(path).read_bytes()) // 5)
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(stop_after)]
    assert report.rows_read == stop_after + report.skipped
    state = ds.state_dict()
    iterator.close()
    resumed = td.load("nestful", split="train", data_files=path, on_error="skip", report=report, streaming=True,
                      num_proc=num_proc, shard_bytes=len(Path(path).read_bytes()) // 5)
    resumed.load_state_dict(state)
    rest = [r["id"] for r in resumed]
    assert report.rows_read == len(lines) and report.skipped == len(lines) - len(head) - len(rest) == 7 + 5
    rows = [r["row"] for r in report.rows]
    assert rows == sorted(set(rows)) and len(rows) == report.skipped  # each skipped line listed once, in order


def test_num_proc_streams_a_row_nested_close_to_the_json_depth_limit(tmp_path):
    """A call argument nested 250 deep is storable (its JSON text is within the writers' 254 levels), so every
    mode keeps the row; the worker path must hand it over too, although inside a shard's list of rows it sits
    more than 254 levels deep."""
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    rows = []
    for i in range(12):
        row = json.loads(good[i % len(good)])
        row["sample_id"] = f"row-{i}"
        rows.append(row)
    deep: object = 1
    for _ in range(250):
        deep = [deep]
    rows[9]["output"][0]["arguments"]["arg_0"] = deep
    path = tmp_path / "deep.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kw = dict(split="train", data_files=str(path), streaming=True, on_error="skip",
              shard_bytes=path.stat().st_size // 4)
    serial = list(td.load("nestful", **kw))
    assert len(serial) == 12
    assert list(td.load("nestful", num_proc=2, **kw)) == serial


def test_streamed_rows_are_converted_a_few_at_a_time_unless_the_source_has_a_batch_step(monkeypatch, tmp_path):
    """Rows are converted in small pieces of the source's batches (streamed: each handed out before the next is
    converted; prepared: each encoded); a source whose batch step works on batches (NESTFUL with execute=True:
    one sandbox per batch) streams larger pieces. The rows are the same either way."""
    from tooluse_datasets.builders.nestful.source import NestfulSource
    from tooluse_datasets.pipeline import BATCH_STEP_ROWS, PIECE_ROWS

    sizes: list[int] = []
    original = NestfulSource.complete_unified
    monkeypatch.setattr(NestfulSource, "complete_unified",
                        lambda self, rows, contexts: sizes.append(len(rows)) or original(self, rows, contexts))
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    path = tmp_path / "rows.jsonl"
    n = BATCH_STEP_ROWS + 6
    path.write_text("\n".join(good[i % len(good)].replace('"sample_id": "', f'"sample_id": "{i}-', 1)
                              for i in range(n)) + "\n")
    stream = lambda: list(td.load("nestful", data_files=str(path), split="train", streaming=True))  # noqa: E731
    rows = stream()
    pieces = [PIECE_ROWS] * (n // PIECE_ROWS) + [n % PIECE_ROWS]
    assert len(rows) == n and sizes == pieces
    sizes.clear()
    prepared = td.load("nestful", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    assert list(prepared) == rows and sizes == pieces  # into Arrow too, one table for the batch
    sizes.clear()
    monkeypatch.setattr(NestfulSource, "has_batch_step", property(lambda self: True))
    assert stream() == rows and sizes == [BATCH_STEP_ROWS, 6]  # the source read them in one batch
    sizes.clear()
    prepared = td.load("nestful", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache-step"))
    assert list(prepared) == rows and sizes == [n]  # prepared: the whole batch (no row waits on a piece)


def test_a_stream_with_num_proc_read_by_dataloader_workers_converts_in_each_worker(toolmind_file):
    """DataLoader workers are daemonic processes, which cannot start processes of their own: a stream loaded
    with num_proc=2 and read by DataLoader(num_workers=2) converts each worker's shards in that worker (it
    crashed with "daemonic processes are not allowed to have children")."""
    torch_data = pytest.importorskip("torch.utils.data", reason="torch (the [trl] extra) is needed for DataLoader workers")
    whole = [r["id"] for r in _stream(toolmind_file)]
    loader = torch_data.DataLoader(_stream(toolmind_file, num_proc=2), batch_size=None, num_workers=2,
                                   collate_fn=lambda row: row["id"])
    ids = list(loader)
    assert sorted(ids) == sorted(whole) and len(ids) == len(whole)


def test_a_nestful_stream_from_the_start_learns_its_ids_as_it_reads(tmp_path, monkeypatch):
    """A reader starting at a NESTFUL file's first row does not read every sample_id of the file before its
    first row (the first row waited for a pass over the whole file); ids are those of a prepared split all the
    same, also for a repeat whose first holder is refused."""
    import tooluse_datasets.builders.nestful.source as nestful_source

    good = json.loads(Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()[0])
    rows = []
    for i in range(60):
        row = dict(good, sample_id=f"id-{i % 7}")
        if i == 2:
            del row["output"]  # refused: the next holder of id-2 is still a repeat (#9)
        rows.append(json.dumps(row))
    path = tmp_path / "nestful_rows.jsonl"
    path.write_text("\n".join(rows) + "\n")
    passes = []
    real = nestful_source.ids_in_file
    monkeypatch.setattr(nestful_source, "ids_in_file", lambda *a: passes.append(a) or real(*a))

    def stream(**kw):
        return td.load("nestful", data_files=str(path), split="train", streaming=True, on_error="skip", **kw)

    first = next(iter(stream()))
    assert passes == [] and first["id"].endswith("/id-0")
    streamed = [r["id"] for r in stream(shard_bytes=2_000)]
    prepared = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", on_error="skip",
                                         cache_dir=str(tmp_path / "cache"))]
    assert streamed == prepared and len(streamed) == 59
    assert [i for i in streamed if "/id-2" in i][:2] == [streamed[8], streamed[15]] and streamed[8].endswith("id-2#9")
    assert len(set(streamed)) == len(streamed)
    # Later shards need the file's ids: read once per process, not once per copy of the source (each task of a
    # num_proc worker gets its own copy; a worker read the ids again for every shard)
    assert [r["id"] for r in stream(shard_bytes=2_000)] == streamed
    assert len(passes) == 1


def _swift_with_bad_rows(tmp_path: Path) -> str:
    """400 lines of real ms-swift rows, with unparsable lines and rows of an unknown role among them."""
    good = [line for f in td.sample_files("ms_swift")["train"] for line in Path(f).read_text().splitlines() if line]
    lines = []
    for i in range(400):
        if i % 23 == 5:
            lines.append('{"messages": [')
        elif i % 31 == 7:
            lines.append(json.dumps({"messages": [{"role": "bogus", "content": "x"}]}))
        else:
            lines.append(good[i % len(good)])
    path = tmp_path / "swift_mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("transform", ["map", "batched_map", "filter", "numpy"])
@pytest.mark.parametrize("stop_after", [1, 130, 300])
def test_a_stream_with_a_transform_resumed_with_its_report_counts_each_row_once(tmp_path, transform, stop_after):
    """A map, a filter or a format makes datasets read the stream as Arrow batches and, on resume, read the
    batch the state was taken in again from its start (or a map's batch); the report counted those rows and
    skips a second time (125 rows and 4 skips too many after one row, 3096 read for 2971 lines)."""
    path = _swift_with_bad_rows(tmp_path)
    size = Path(path).stat().st_size

    def stream(report):
        ds = td.load("ms_swift", split="train", data_files=path, on_error="skip", report=report, streaming=True,
                     shard_bytes=size // 4)
        if transform == "map":
            return ds.map(lambda r: {"n": len(r["messages"])})
        if transform == "batched_map":
            return ds.map(lambda b: {"n": [len(m) for m in b["messages"]]}, batched=True, batch_size=50)
        if transform == "filter":
            return ds.filter(lambda r: len(r["messages"]) % 3 != 0)
        return ds.with_format("numpy")

    whole_report = td.SkipReport()
    whole = [r["id"] for r in stream(whole_report)]
    assert whole_report.skipped > 20 and whole_report.rows_read == 400

    report = td.SkipReport(keep_all=True)
    ds = stream(report)
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(min(stop_after, len(whole) - 1))]
    state = ds.state_dict()
    iterator.close()
    resumed = stream(report)
    resumed.load_state_dict(state)
    rest = [r["id"] for r in resumed]
    assert head + rest == whole
    assert (report.rows_read, report.skipped) == (whole_report.rows_read, whole_report.skipped)
    rows = [r["row"] for r in report.rows]
    assert sorted(rows) == sorted(set(rows)) and len(rows) == report.skipped  # each skipped line listed once

    # A second pass over the same stream is read, and counted, again.
    again = td.SkipReport()
    twice = stream(again)
    assert [r["id"] for r in twice] == [r["id"] for r in twice] == whole
    assert again.rows_read == 800


def test_a_state_resumed_on_a_json_lines_file_edited_since_is_refused_not_read_from_mid_line(tmp_path):
    """A state records the byte offset of the next line. A file edited in place (a row fixed above that point)
    moved its lines: the stream resumed in the middle of a line, reported that tail as a bad row and lost the
    real row (with on_error="raise", an InvalidJsonError about a row that is fine). Rows appended to the file
    still resume."""
    path = Path(_swift_with_bad_rows(tmp_path))
    lines = path.read_text().splitlines()

    def stream():
        return td.load("ms_swift", split="train", data_files=str(path), on_error="skip", streaming=True)

    ds = stream()
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(3)]
    state = ds.state_dict()
    iterator.close()

    appended = path.read_text() + lines[0] + "\n"
    path.write_text(appended)
    resumed = stream()
    resumed.load_state_dict(state)
    rest = [r["id"] for r in resumed]
    assert head + rest == [r["id"] for r in stream()] and rest[-1] == "ms_swift/swift_mixed/400"

    # The state names the file's contents (shards.versions): edited or cut short since, the file is its error,
    # reported here (on_error="skip"). A state saved before versions were kept has the byte offset checked alone.
    old_state = _without_key(state, "file_version")
    first = json.loads(lines[0])
    first["messages"] = first["messages"][:1]  # the first row made shorter: every later line moved
    path.write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    report = td.SkipReport()
    resumed = td.load("ms_swift", split="train", data_files=str(path), on_error="skip", streaming=True, report=report)
    resumed.load_state_dict(state)
    assert list(resumed) == [] and report.by_reason == {"InvalidValueError:<file>": 1}
    resumed = stream()
    resumed.load_state_dict(old_state)
    with pytest.raises(ValueError, match="is not the start of a line: the file changed"):
        next(iter(resumed))
    path.write_text("\n".join(lines[:2]) + "\n")  # cut short before the saved offset
    resumed = td.load("ms_swift", split="train", data_files=str(path), streaming=True)
    resumed.load_state_dict(state)
    with pytest.raises(td.InvalidValueError, match="cut short"):
        next(iter(resumed))
    resumed = stream()
    resumed.load_state_dict(old_state)
    with pytest.raises(ValueError, match="past the end of the file"):
        next(iter(resumed))


def _without_key(state, key: str):
    """A (nested) state dict without ``key``, as a version of the package that did not keep it saved it."""
    if isinstance(state, dict):
        return {k: _without_key(v, key) for k, v in state.items() if k != key}
    return state


@pytest.mark.parametrize("num_proc", [None, 2])
def test_rows_appended_after_a_stream_was_read_to_its_end_come_on_resume(tmp_path, num_proc):
    """A stream read to its end saved a state past its last shard, so rows appended to the file since never came
    on resume (and a stream stopped right after its last row, without asking for one more, did get them): the
    state of a split's last shard, a JSON Lines file read to its end, is that end, and a resume reads on from
    there, as often as the file grows. With num_proc, the last file is converted in a worker."""
    from conftest import shared_data

    rows = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    first, growing = tmp_path / "first.jsonl", tmp_path / "growing.jsonl"
    first.write_text("\n".join(rows) + "\n")
    growing.write_text("\n".join(rows[:4]) + "\n")

    def stream():
        return td.load("ms_swift", split="train", data_files=[str(first), str(growing)], streaming=True,
                       num_proc=num_proc)

    ds = stream()
    read = [row["id"] for row in ds]  # to the end: the loop asks for one more row
    assert read[-1] == "ms_swift/growing/3"
    for grown in (6, 9):
        state = ds.state_dict()
        growing.write_text("\n".join(rows[:grown]) + "\n")
        ds = stream()
        ds.load_state_dict(state)
        rest = [row["id"] for row in ds]
        assert rest == [f"ms_swift/growing/{n}" for n in range(len(read) - len(rows), grown)]
        read += rest
    assert read == [row["id"] for row in stream()]
    state = ds.state_dict()
    ds = stream()
    ds.load_state_dict(state)
    assert list(ds) == []  # nothing appended: nothing more


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_rows_appended_to_a_file_whose_last_line_had_no_newline_come_on_resume(tmp_path, newline):
    """A stream read to the end of a file whose last line has no newline saves the end of that line; rows appended
    since, after the newline that now ends it, were refused on resume ("not the start of a line: the file
    changed"), though the file still holds the bytes read. They come, numbered as a fresh read numbers them."""
    from conftest import shared_data

    rows = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    growing = tmp_path / "growing.jsonl"
    growing.write_bytes(newline.join(rows[:4]).encode())

    def stream():
        return td.load("ms_swift", split="train", data_files=str(growing), streaming=True)

    ds = stream()
    read = [row["id"] for row in ds]
    state = ds.state_dict()
    growing.write_bytes(newline.join(rows[:7]).encode() + newline.encode())
    ds = stream()
    ds.load_state_dict(state)
    rest = [row["id"] for row in ds]
    assert rest == [f"ms_swift/growing/{n}" for n in range(4, 7)]
    assert read + rest == [row["id"] for row in stream()]


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_json_lines_file_cut_short_under_a_stream_is_the_files_error(tmp_path, on_error):
    """A stream plans a JSON Lines file's byte ranges when it starts; the file cut short meanwhile (rewritten with
    fewer rows during a long run) left its later ranges past its end, and the stream ended early without a word,
    those rows neither handed out nor reported. A range past the file's end is the file's error now: raised, or
    with on_error="skip" reported."""
    from conftest import shared_data

    rows = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(rows * 4) + "\n")
    report = td.SkipReport()
    ds = td.load("ms_swift", split="train", data_files=str(path), streaming=True, shard_bytes=path.stat().st_size // 4,
                 on_error=on_error, report=report)
    assert ds.n_shards >= 4

    def read_while_cut():
        for n, _ in enumerate(ds, 1):
            if n == 2:
                path.write_text("\n".join(rows[:2]) + "\n")

    if on_error == "raise":
        with pytest.raises(td.InvalidValueError, match="cut short since") as caught:
            read_while_cut()
        assert caught.value.file == str(path) and caught.value.field == "<file>"
    else:
        read_while_cut()
        assert report.by_reason["InvalidValueError:<file>"] >= 1


def test_stream_workers_end_when_the_process_that_started_them_is_killed(tmp_path):
    """A training process killed outright (kill -9, out of memory) left its streaming workers waiting for ever,
    each holding its memory: they now end within seconds of it."""
    import os
    import subprocess
    import sys
    import time

    script = tmp_path / "stream.py"
    script.write_text(
        "import multiprocessing, os, sys\n"
        "import tooluse_datasets as td\n"
        "if __name__ == '__main__':\n"
        f"    ds = td.load('ms_swift', data_files=td.sample_files('ms_swift'), split='train', streaming=True,\n"
        "                 num_proc=2, shard_bytes=600)\n"
        "    rows = iter(ds)\n"
        "    next(rows)\n"
        "    with open(sys.argv[1], 'w') as f:\n"
        "        f.write(' '.join(str(p.pid) for p in multiprocessing.active_children()))\n"
        "    os._exit(0)\n")
    # (no pipes: workers left running would hold them open, and the run would wait for them)
    pid_file, log = tmp_path / "pids", tmp_path / "log"
    with open(log, "w") as err:
        done = subprocess.run([sys.executable, str(script), str(pid_file)], stdout=subprocess.DEVNULL, stderr=err,
                              timeout=300)
    pids = [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []
    assert done.returncode == 0 and pids, log.read_text()[-2000:]

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()

    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in pids if alive(pid)]
    for pid in left:
        os.kill(pid, 9)
    assert not left


def test_a_stream_with_workers_read_to_its_end_leaves_no_pool_behind():
    """A pool left shutting down after the last row raced the interpreter's exit: its manager thread closed the
    wakeup pipe that concurrent.futures' exit hook writes to, and a finished command printed "Exception ignored
    ... OSError: [Errno 9] Bad file descriptor" (about 1 run in 20 of `stats --option num_proc=2`). Read to
    its end, the stream waits for its workers, so nothing of the pool outlives the iteration."""
    import threading

    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True, num_proc=2,
                 shard_bytes=600)
    assert ds.n_shards > 1  # the workers convert the shards after the first
    rows = list(ds)
    managers = [t for t in threading.enumerate() if type(t).__name__ == "_ExecutorManagerThread"]
    assert not managers and not multiprocessing.active_children()
    alone = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    assert [r["id"] for r in rows] == [r["id"] for r in alone]


def _toolmind_with_a_bad_row_per_split(tmp_path: Path) -> str:
    """The ToolMind sample's rows as JSON Lines, each followed by a copy whose first role ToolMind does not have."""
    import pyarrow.parquet as pq

    lines = []
    for row in pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist():
        lines.append(json.dumps(row))
        lines.append(json.dumps(dict(row, messages=row["messages"].replace('"role": "system"', '"role": "bogus"', 1))))
    path = tmp_path / "toolmind_bad_rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("join", ["split expression", "concatenate_datasets", "interleave_datasets"])
def test_a_report_counts_the_streams_datasets_joins(tmp_path, join):
    """datasets deep-copies the streams it joins (a split 'a+b', concatenate_datasets, interleave_datasets): the
    report passed to load() used to be copied with them, so it said 0 rows read and none skipped while rows
    were dropped (`export --split a+b --on-error skip` printed that summary)."""
    from datasets import concatenate_datasets, interleave_datasets

    path = _toolmind_with_a_bad_row_per_split(tmp_path)
    splits = ["When2Call", "tau_train"]
    alone = td.SkipReport()
    rows = [r["id"] for split in splits
            for r in td.load("toolmind", split=split, data_files=path, streaming=True, on_error="skip", report=alone)]
    assert alone.skipped == len(rows) > 0  # every row has its bad copy

    report = td.SkipReport()
    if join == "split expression":
        joined = td.load("toolmind", split="+".join(splits), data_files=path, streaming=True, on_error="skip",
                         report=report)
    else:
        parts = [td.load("toolmind", split=split, data_files=path, streaming=True, on_error="skip", report=report)
                 for split in splits]
        joined = (concatenate_datasets(parts) if join == "concatenate_datasets" else
                  interleave_datasets(parts, stopping_strategy="all_exhausted_without_replacement"))
    assert sorted(r["id"] for r in joined) == sorted(rows)
    assert (report.rows_read, report.skipped, report.by_reason) == (alone.rows_read, alone.skipped, alone.by_reason)


def test_a_mix_resumed_with_its_report_counts_again_the_two_rows_of_each_member_read_ahead(tmp_path):
    """interleave_datasets holds a row of each member and has a thread fetch the next: neither is in the saved
    state, so a mix resumed with the same report counts those two rows of each member twice, as README says (it
    said one row), and hands out every row once."""
    from datasets import interleave_datasets

    rows = [line for f in td.sample_files("ms_swift")["train"] for line in Path(f).read_text().splitlines()
            if line.strip()]
    paths = [tmp_path / f"{name}.jsonl" for name in ("a", "b")]
    for path in paths:
        path.write_text("\n".join(rows * 4) + "\n")

    def mix(report):
        return interleave_datasets([td.load("ms_swift", data_files=str(path), split="train", streaming=True,
                                            report=report) for path in paths])

    uninterrupted = td.SkipReport()
    whole = [row["id"] for row in mix(uninterrupted)]
    assert len(whole) > 8
    report = td.SkipReport()
    stream, got = mix(report), []
    for row in stream:
        got.append(row["id"])
        if len(got) == 4:
            break
    resumed = mix(report)
    resumed.load_state_dict(stream.state_dict())
    assert got + [row["id"] for row in resumed] == whole
    assert report.rows_read == uninterrupted.rows_read + 2 * 2


def test_a_first_exhausted_mix_counts_the_rows_its_other_members_read_ahead():
    """README said a first_exhausted mix's report counts one read beyond its rows and skips per member run out; the
    members still running had also read up to two rows ahead, never handed out, which it counts too."""
    from datasets import interleave_datasets

    files = td.sample_files("all")
    reports = {name: td.SkipReport() for name in ("nestful", "ms_swift")}
    parts = [td.load(name, data_files=files[name], split="train", streaming=True, report=report)
             for name, report in reports.items()]
    handed = [row["source"] for row in interleave_datasets(parts, stopping_strategy="first_exhausted")]
    rows = {name: sum(1 for _ in td.load(name, data_files=files[name], split="train", streaming=True))
            for name in reports}
    assert handed.count("nestful") == rows["nestful"] < rows["ms_swift"]  # nestful runs out first
    assert reports["nestful"].rows_read == rows["nestful"] + 1  # its first row again, read ahead
    assert 1 <= reports["ms_swift"].rows_read - handed.count("ms_swift") <= 2


def test_take_n_counts_the_n_rows_it_hands_out(tmp_path):
    """datasets' take(n) pulled one more row from the stream before stopping: the report counted it, and the
    bad lines before it, as read (n + 1 + skips for n rows handed out). It now counts what a loop stopping
    after n rows counts: read = handed out + skipped."""
    from conftest import shared_data

    good = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    lines = []
    for i, line in enumerate(good):  # real upstream rows, a bad line after every third
        lines.append(line)
        if i % 3 == 2:
            lines.append('{"messages": [')
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(lines) + "\n")

    def stream(report):
        return td.load("ms_swift", split="train", data_files=str(path), on_error="skip", report=report,
                       streaming=True)

    for n in range(1, len(good)):
        taken_report = td.SkipReport()
        taken = [r["id"] for r in stream(taken_report).take(n)]
        looped_report = td.SkipReport()
        looped = []
        for row in stream(looped_report):
            looped.append(row["id"])
            if len(looped) == n:
                break
        assert taken == looped and len(taken) == n
        assert (taken_report.rows_read, taken_report.skipped) == (looped_report.rows_read, looped_report.skipped)
        assert taken_report.rows_read == n + taken_report.skipped == n + (n - 1) // 3


def _real_agent_rows_with_bad_lines(tmp_path: Path, rows: int) -> tuple[str, list[int]]:
    """``rows`` real upstream ms-swift rows (repeated) with a truncated line after every fourth, as JSON Lines;
    and the numbers of the bad lines."""
    from conftest import shared_data

    good = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    lines, bad = [], []
    for i in range(rows):
        lines.append(good[i % len(good)])
        if i % 4 == 3:
            bad.append(len(lines))
            lines.append('{"messages": [')
    path = tmp_path / "agent.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path), bad


def _listed(rows_path: Path) -> list[int]:
    return [json.loads(line)["row"] for line in rows_path.read_text().splitlines()] if rows_path.exists() else []


def _stateful_loader(path: str, rows_path: Path, epoch: int = 0):
    """A maker of StatefulDataLoaders with two workers over the stream of ``path`` in six shards, skips listed in
    ``rows_path``, at ``epoch``."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")

    def loader():
        ds = td.load("ms_swift", split="train", data_files=path, on_error="skip", streaming=True,
                     report=td.SkipReport(rows_path=rows_path), shard_bytes=os.path.getsize(path) // 6)
        assert ds.n_shards == 6
        ds.set_epoch(epoch)
        return stateful.StatefulDataLoader(ds, batch_size=4, num_workers=2,
                                           collate_fn=lambda rows: [r["id"] for r in rows])
    return loader


@pytest.mark.parametrize("consumed_batches", [1, 4])
def test_a_stateful_dataloader_resumed_with_its_rows_path_lists_each_skipped_row_once(tmp_path, consumed_batches):
    """DataLoader workers convert batches ahead of the loader (prefetch_factor): a worker appended the skipped
    rows of batches the loader never took to the shared rows_path, and the restored loader, reading those rows
    again from the saved state, appended them a second time (91-95 lines for 86 skipped rows of 600). A resumed
    stream now leaves out the rows the file lists already: each skipped row is listed once."""
    path, bad = _real_agent_rows_with_bad_lines(tmp_path, 160)
    rows_path = tmp_path / "skipped.jsonl"
    head, rest = _stopped_and_resumed(_stateful_loader(path, rows_path), consumed_batches)
    assert len(head) + len(rest) == len(set(head + rest)) == 160
    assert sorted(_listed(rows_path)) == bad


def test_a_stateful_dataloader_resumed_in_a_later_epoch_lists_that_epochs_skipped_rows(tmp_path):
    """DataLoader workers read copies of the stream made for their shards: those copies started at epoch 0, so a
    loader resumed in epoch 1 took every skipped row epoch 0 had listed as listed already and listed none."""
    path, bad = _real_agent_rows_with_bad_lines(tmp_path, 160)
    rows_path = tmp_path / "skipped.jsonl"
    loader = _stateful_loader(path, rows_path, epoch=1)
    epoch_0 = td.load("ms_swift", split="train", data_files=path, on_error="skip", streaming=True,
                      report=td.SkipReport(rows_path=rows_path))
    assert len(list(epoch_0)) == 160 and sorted(_listed(rows_path)) == bad
    head, rest = _stopped_and_resumed(loader, 4)
    assert len(head) + len(rest) == len(set(head + rest)) == 160
    assert sorted(_listed(rows_path)) == sorted(bad + bad)


def test_a_stream_resumed_from_a_checkpoint_it_read_past_lists_each_skipped_row_once(tmp_path):
    """A training job saves the stream's state with each checkpoint and goes on reading until it is stopped; the
    next job resumes from the last checkpoint, reading again the rows after it, whose skips rows_path lists
    already. They are counted in that job's report (it counts from the checkpoint on), not listed again."""
    path, bad = _real_agent_rows_with_bad_lines(tmp_path, 40)
    rows_path = tmp_path / "skipped.jsonl"

    def stream(report):
        return td.load("ms_swift", split="train", data_files=path, on_error="skip", streaming=True, report=report)

    first = stream(td.SkipReport(rows_path=rows_path))
    iterator = iter(first)
    head = [next(iterator)["id"] for _ in range(10)]
    checkpoint = first.state_dict()
    read_on = [next(iterator)["id"] for _ in range(20)]  # the job goes on, then is stopped
    iterator.close()
    assert len(_listed(rows_path)) == 7
    report = td.SkipReport(rows_path=rows_path)
    resumed = stream(report)
    resumed.load_state_dict(checkpoint)
    rest = [r["id"] for r in resumed]
    assert rest[:20] == read_on and len(head + rest) == len(set(head + rest)) == 40
    assert _listed(rows_path) == bad
    assert (report.rows_read, report.skipped) == (30 + 8, 8)  # rows 11-40 and the bad lines after row 10


def test_a_stream_resumed_in_a_later_epoch_lists_that_epochs_skipped_rows_as_an_uninterrupted_one_does(tmp_path):
    """Each epoch lists its skipped rows in rows_path; a job stopped in epoch 1 and resumed from its checkpoint listed
    none of the skipped rows after the checkpoint, since epoch 0 had listed them. The rows it read past the
    checkpoint before it was stopped are still listed once in epoch 1."""
    path, bad = _real_agent_rows_with_bad_lines(tmp_path, 40)
    rows_path = tmp_path / "skipped.jsonl"

    def stream(report):
        return td.load("ms_swift", split="train", data_files=path, on_error="skip", streaming=True, report=report)

    first = stream(td.SkipReport(rows_path=rows_path))
    assert len(list(first)) == 40 and _listed(rows_path) == bad
    first.set_epoch(1)
    iterator = iter(first)
    head = [next(iterator)["id"] for _ in range(10)]
    checkpoint = first.state_dict()
    read_on = [next(iterator)["id"] for _ in range(20)]  # the job goes on, then is stopped
    iterator.close()
    resumed = stream(td.SkipReport(rows_path=rows_path))
    resumed.load_state_dict(checkpoint)
    rest = [r["id"] for r in resumed]
    assert rest[:20] == read_on and len(head + rest) == 40
    assert sorted(_listed(rows_path)) == sorted(bad + bad)


@pytest.mark.parametrize("saved_with, resumed_with", [
    ("nothing", "map"), ("map", "nothing"), ("nothing", "shuffle"), ("take", "skip")])
def test_a_state_loaded_into_a_stream_built_with_other_steps_is_a_value_error_saying_so(saved_with, resumed_with):
    """A training script that gained or lost a step (a tokenizing map, a shuffle) between its checkpoint and the
    resume failed at the first row with datasets' bare KeyError ('shard_idx', 'examples_iterable', 'taken'),
    naming neither the state nor the stream."""
    from conftest import shared_data

    files = [str(f) for f in sorted(shared_data("ms_swift").glob("*.jsonl"))]
    steps = {"nothing": lambda ds: ds, "map": lambda ds: ds.map(lambda row: {"turns": len(row["messages"])}),
             "shuffle": lambda ds: ds.shuffle(seed=0, buffer_size=4), "take": lambda ds: ds.take(8),
             "skip": lambda ds: ds.skip(1)}

    def stream(step):
        return steps[step](td.load("ms_swift", split="train", data_files=files, streaming=True))

    saved = stream(saved_with)
    head, state = _read_then_save(saved, 3, key="id")
    resumed = stream(resumed_with)
    resumed.load_state_dict(state)
    with pytest.raises(ValueError, match="this state_dict was saved from a stream built otherwise: state.* is the "
                                         "state of .*, where this stream has the state of "):
        next(iter(resumed))
    same = stream(saved_with)  # the stream it was saved from resumes
    same.load_state_dict(state)
    assert len(head) + len([row["id"] for row in same]) == len([row["id"] for row in stream(saved_with)])


@pytest.mark.parametrize("join", ["interleave_datasets", "concatenate_datasets"])
@pytest.mark.parametrize("saved_members, resumed_members", [(2, 3), (3, 2)])
def test_a_state_of_a_mix_of_other_members_is_a_value_error_saying_so(join, saved_members, resumed_members):
    """A mix that gained or lost a member between its checkpoint and the resume failed at the first row with
    datasets' bare IndexError ('list index out of range', 'index 2 is out of bounds for axis 0'), or resumed a
    concatenation of fewer members without a word."""
    import datasets

    from conftest import shared_data

    files = [str(f) for f in sorted(shared_data("ms_swift").glob("*.jsonl"))]
    assert len(files) >= 3

    def mix(members):
        return getattr(datasets, join)([td.load("ms_swift", split="train", data_files=f, streaming=True)
                                        for f in files[:members]])

    head, state = _read_then_save(mix(saved_members), 3, key="id")
    resumed = mix(resumed_members)
    resumed.load_state_dict(state)
    with pytest.raises(ValueError, match=f"this state_dict was saved from a stream built otherwise: state.* holds "
                                         f"{saved_members} streams' states, where this stream has {resumed_members}"):
        next(iter(resumed))
    same = mix(saved_members)  # the mix it was saved from resumes
    same.load_state_dict(state)
    assert head + [row["id"] for row in same] == [row["id"] for row in mix(saved_members)]


@pytest.mark.parametrize("saved, resumed_with", [(2, 3), (3, 2)])
@pytest.mark.parametrize("join", ["interleave_datasets", "concatenate_datasets"])
def test_a_state_saved_before_any_row_of_a_mix_of_fewer_or_more_members_is_a_value_error(join, saved, resumed_with):
    """Saved before a row, the state of a 2-member mix loaded into a mix of 3 failed with datasets' bare
    IndexError, and that of a 3-member mix loaded into a mix of 2 was taken without a word (only a DataLoader
    worker's start-up state, the whole stream's, starts a part of other streams afresh)."""
    import datasets

    from conftest import shared_data

    files = [str(f) for f in sorted(shared_data("ms_swift").glob("*.jsonl"))][:3]
    members = [td.load("ms_swift", split="train", data_files=f, streaming=True) for f in files]
    state = getattr(datasets, join)(members[:saved]).state_dict()
    resumed = getattr(datasets, join)(members[:resumed_with])
    resumed.load_state_dict(state)
    with pytest.raises(ValueError, match=f"holds {saved} streams' states, where this stream has {resumed_with}"):
        next(iter(resumed))


class _CollectedWhere:
    """Cyclic garbage that records which process collected it (a stand-in for what a stopped stream leaves: its
    worker pool, whose collection takes a lock that pool's manager thread may hold when the next pool forks)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.cycle = self

    def __del__(self):
        (self.folder / f"collected-in-{os.getpid()}").touch()


def test_workers_forked_for_a_stream_never_collect_the_parents_garbage(toolmind_file, tmp_path):
    """Workers forked for ``num_proc`` inherited the caller's uncollected garbage and collected it themselves,
    running its finalizers: a worker pool of a stream stopped earlier took that pool's lock, held by its manager
    thread in the parent when the worker was forked, and the worker hung for ever (seen on 3.13). The caller's
    own collector is untouched: it collects the garbage (on 3.12, whose interpreter starts with frozen objects,
    a freeze of the caller's heap would never have been undone)."""
    if multiprocessing.get_start_method() != "fork":
        pytest.skip("workers start from a fresh interpreter with this start method")
    ds = _stream(toolmind_file, num_proc=2)
    gc.collect()
    _CollectedWhere(tmp_path)  # garbage from here on, collected at the next collection of its generation
    rows = list(ds)
    gc.collect()
    assert len(rows) > 0
    assert [p.name for p in tmp_path.iterdir()] == [f"collected-in-{os.getpid()}"]


@pytest.mark.parametrize("formatted", [False, True], ids=["rows", "arrow"])
@pytest.mark.parametrize("world_size", [3, 5])
def test_nodes_that_keep_every_nth_row_share_the_skip_report_out(tmp_path, world_size, formatted):
    """A shard count the world size does not divide: datasets has every node read every row and keep every
    world_size-th. Each node used to count the whole split's reads and skips (and list every skipped row in a
    shared rows_path), so the nodes' reports added up to world_size times the split's. Now each node counts the
    rows it keeps and the skipped rows just before them: the reports add up to the split's, and each skipped
    row is listed once."""
    path = _with_bad_rows(tmp_path)
    shard_bytes = len(Path(path).read_bytes()) // 4
    whole = td.SkipReport(keep_all=True)
    ids = [r["id"] for r in td.load("nestful", split="train", data_files=path, on_error="skip", report=whole,
                                     streaming=True, shard_bytes=shard_bytes)]
    listing = tmp_path / "skipped.jsonl"
    kept, reports = [], []
    for rank in range(world_size):
        report = td.SkipReport(rows_path=str(listing))
        ds = td.load("nestful", split="train", data_files=path, on_error="skip", report=report, streaming=True,
                     shard_bytes=shard_bytes)
        assert ds.n_shards % world_size != 0  # the every-nth-row fallback
        node = split_dataset_by_node(ds, rank=rank, world_size=world_size)
        if formatted:
            node = node.with_format("arrow")
            rows = [i for table in node.iter(batch_size=7) for i in table.column("id").to_pylist()]
        else:
            rows = [r["id"] for r in node]
        report.close()
        assert report.rows_read == len(rows) + report.skipped, rank  # read = handed out + skipped, per node
        kept += rows
        reports.append(report)
    assert sorted(kept) == sorted(ids)
    assert sum(r.rows_read for r in reports) == whole.rows_read
    assert sum(r.skipped for r in reports) == whole.skipped == 7 + 5
    by_reason = {}
    for report in reports:
        for reason, count in report.by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + count
    assert by_reason == dict(whole.by_reason)
    listed = sorted(json.loads(line)["row"] for line in listing.read_text().splitlines())
    assert listed == sorted(r["row"] for r in whole.rows)


def test_a_shuffled_stream_with_num_proc_hands_out_every_row_and_does_not_hang(tmp_path):
    """datasets' shuffle reads up to 10 shards at once, each from a thread of its own, and each of those streams
    starts its num_proc workers from that thread: a worker forked while another thread was opening a Parquet
    file inherited the package's pool-swap lock held and waited for it for ever. Run in a process of its own,
    so a hang fails the test instead of stopping the suite."""
    import subprocess
    import sys

    gen = benchmark_module("generate_toolmind")
    toolmind_file = str(tmp_path / "toolmind.parquet")  # the synthetic split in 12 shards: more than 10
    gen.write_parquet(toolmind_file, 240, gen.GeneratorOptions(seed=3, max_chars=6_000), row_group_size=9)
    script = f"""
import tooluse_datasets as td
ds = td.load("toolmind", data_files={toolmind_file!r}, split="synthetic", streaming=True, num_proc=2,
             shard_bytes=20_000)
whole = [r["id"] for r in td.load("toolmind", data_files={toolmind_file!r}, split="synthetic", streaming=True,
                                  shard_bytes=20_000)]
assert ds.n_shards > 10
shuffled = ds.shuffle(seed=1, buffer_size=10)
for epoch in range(2):
    shuffled.set_epoch(epoch)
    ids = [r["id"] for r in shuffled]
    assert sorted(ids) == sorted(whole) and ids != whole, epoch
print("ok")
"""
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a shuffled stream with num_proc=2 hung")
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_a_process_forked_while_another_thread_swaps_the_arrow_pool_can_swap_it_too():
    """The fork itself, made deterministic: a thread holds the swap lock while a process is forked."""
    import threading

    from tooluse_datasets import arrow_memory

    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    holding, release = threading.Event(), threading.Event()

    def hold():
        with arrow_memory.default_pool(arrow_memory.replacement_pool() or arrow_memory.pa.system_memory_pool()):
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(30)
    try:
        ctx = multiprocessing.get_context("fork")
        child = ctx.Process(target=_swap_pool_once)
        child.start()
        child.join(30)
        stuck = child.is_alive()
        if stuck:
            child.kill()
            child.join()
    finally:
        release.set()
        holder.join()
    assert not stuck and child.exitcode == 0


def _swap_pool_once():
    from tooluse_datasets import arrow_memory

    with arrow_memory.default_pool(arrow_memory.pa.system_memory_pool()):
        pass


def _worker_and_id(rows: list) -> list:
    import torch.utils.data

    worker = torch.utils.data.get_worker_info()
    return [(worker.id if worker else 0, row["id"]) for row in rows]


@pytest.mark.parametrize("world_size,stop", [(2, 2), (3, 1), (4, 3)])
def test_nodes_with_two_dataloader_workers_each_hand_out_every_row_once_in_order_and_resume(toolmind_file, world_size,
                                                                                           stop):
    """``split_dataset_by_node`` (whole shards for 2 nodes of 6 shards and 3, every world_size-th row for 4) read by
    a StatefulDataLoader with two workers on each node: every row of the split once over all nodes, each worker's
    rows in stream order; a loader restored from a state taken after ``stop`` batches hands out the rest of each
    worker's rows, in order, none again."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")
    whole = [r["id"] for r in _stream(toolmind_file)]
    order = {row_id: n for n, row_id in enumerate(whole)}

    def loader(rank):
        node = split_dataset_by_node(_stream(toolmind_file), rank=rank, world_size=world_size)
        return stateful.StatefulDataLoader(node, batch_size=3, num_workers=2, collate_fn=_worker_and_id)

    def by_worker(items):
        return [[row_id for worker, row_id in items if worker == w] for w in (0, 1)]

    handed = []
    for rank in range(world_size):
        first = loader(rank)
        items = [item for batch in first for item in batch]
        for rows in by_worker(items):
            assert [order[r] for r in rows] == sorted(order[r] for r in rows), (rank, "out of stream order")
        head, rest = _stopped_and_resumed(lambda: loader(rank), stop)
        assert by_worker(head + rest) == by_worker(items), rank
        handed += [row_id for _, row_id in items]
    assert sorted(handed) == sorted(whole) and len(handed) == len(whole)


@pytest.mark.parametrize("build", ["mixed, then split by node", "shuffled"])
def test_a_stateful_dataloader_with_two_workers_resumes_where_the_whole_has_more_sub_streams_than_a_worker(
        toolmind_file, build):
    """In a DataLoader worker, datasets loaded the worker's saved state first into the whole stream, then into the
    worker's part. Where the whole has more sub-streams than the part (a mix of streams split by node: 10 shards,
    5 a node, 3 and 2 a worker; a shuffle reading every shard at once), that first load failed with a bare
    ``IndexError: list index out of range`` and the loader could not resume. Now it resumes: every row once (a
    shuffle buffer's rows excepted: datasets refills the buffer on resume, as without workers)."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")
    from datasets import concatenate_datasets

    def stream():
        if build == "shuffled":
            return _stream(toolmind_file).shuffle(seed=0, buffer_size=4)
        mixed = concatenate_datasets([_stream(toolmind_file),
                                      _stream(toolmind_file, split="xlam_function_calling_60k")])
        assert mixed.n_shards == 10
        return split_dataset_by_node(mixed, rank=1, world_size=2)

    def loader():
        return stateful.StatefulDataLoader(stream(), batch_size=2, num_workers=2,
                                           collate_fn=lambda rows: [r["id"] for r in rows])

    whole = [row_id for batch in loader() for row_id in batch]
    head, rest = _stopped_and_resumed(loader, 3)
    assert len(head) == 6 and not set(head) & set(rest) and len(set(rest)) == len(rest)
    if build == "shuffled":
        assert set(head + rest) <= set(whole) and len(whole) - len(head + rest) <= 2 * 4  # each worker's buffer
    else:
        assert sorted(head + rest) == sorted(whole)


@pytest.mark.parametrize("world_size", [1, 3])
def test_a_stateful_dataloader_resumes_a_concatenation_a_worker_had_not_started(toolmind_file, world_size):
    """``concatenate_datasets`` of two streams (also split by node row by row, 10 shards for 3 nodes) read by a
    StatefulDataLoader with two workers, saved after one batch: the second worker's saved state is its start-up
    state, the whole stream's, of 2 streams, where the worker's part of a concatenation is its single shards.
    Loading it failed in the worker ("holds 2 streams' states, where this stream has 5"), and the loader could
    not resume. That state names no row: the worker starts its part afresh, every row once."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")
    from datasets import concatenate_datasets

    def loader():
        mixed = concatenate_datasets([_stream(toolmind_file),
                                      _stream(toolmind_file, split="xlam_function_calling_60k")])
        node = split_dataset_by_node(mixed, rank=0, world_size=world_size) if world_size > 1 else mixed
        return stateful.StatefulDataLoader(node, batch_size=2, num_workers=2,
                                           collate_fn=lambda rows: [r["id"] for r in rows])

    whole = [row_id for batch in loader() for row_id in batch]
    head, rest = _stopped_and_resumed(loader, 1)
    assert len(head) == 2
    assert sorted(head + rest) == sorted(whole) and len(set(whole)) == len(whole)


def test_a_toolmind_json_lines_shard_checks_its_files_version_once_before_and_once_after(toolmind_file, tmp_path,
                                                                                         monkeypatch):
    """A ToolMind shard's reading (rows of one split) is checked against the file's version before its first row
    and after its last, around the shard reader's own reading, which checked it as well: four checks per shard, each
    a request for a URL. Two, and a file rewritten meanwhile is still the file's error."""
    import pyarrow.parquet as pq

    from tooluse_datasets.shards import versions

    path = tmp_path / "toolmind.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in pq.read_table(toolmind_file).to_pylist()))
    checked = []
    check = versions.changed
    monkeypatch.setattr(versions, "changed", lambda *args: checked.append(args[0]) or check(*args))
    ds = td.load("toolmind", data_files=str(path), split="synthetic", streaming=True, shard_bytes=1)
    assert ds.n_shards >= 2
    rows = list(ds)
    assert len(rows) == 110 and len(checked) == 2 * ds.n_shards  # (the synthetic split's rows)
    handed = []
    with pytest.raises(td.InvalidValueError, match="changed since the stream or load was planned"):
        for row in ds:
            handed.append(row)
            if len(handed) == 1:
                lines = path.read_text().splitlines(keepends=True)
                path.write_text("".join(lines[::-1]))  # the same length, other rows
    assert len(handed) < len(rows)


@pytest.mark.parametrize("stopping_strategy", ["first_exhausted", "all_exhausted"])
def test_a_stateful_dataloader_resumes_a_weighted_mix_a_worker_had_not_started_with_that_workers_own_draws(
        toolmind_file, stopping_strategy):
    """``interleave_datasets(..., probabilities=...)`` read by a StatefulDataLoader with two workers, saved after
    one batch: the second worker had handed out nothing, and its saved state is the one it reported at start-up,
    the whole stream's, with the whole stream's random generator. Loaded into the worker's part, that generator
    replaced the worker's own (datasets shifts it by the worker's id), so the resumed worker drew its members in
    another order than the uninterrupted one and handed out rows it would not have (106 rows where the loader
    gives 100, 6 of them twice). Now it draws as it would have: the rows of the uninterrupted loader, each once."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")
    from datasets import interleave_datasets

    def loader():
        mixed = interleave_datasets([_stream(toolmind_file), _stream(toolmind_file, split="xlam_function_calling_60k")],
                                    probabilities=[0.5, 0.5], seed=1, stopping_strategy=stopping_strategy)
        return stateful.StatefulDataLoader(mixed, batch_size=2, num_workers=2,
                                           collate_fn=lambda rows: [r["id"] for r in rows])

    whole = [row_id for batch in loader() for row_id in batch]
    head, rest = _stopped_and_resumed(loader, 1)
    assert len(head) == 2
    assert sorted(head + rest) == sorted(whole)


def _shuffled(path: str):
    return _stream(path).shuffle(seed=0, buffer_size=10)


def test_a_shuffled_stream_resumed_past_its_start_warns_that_its_buffers_rows_are_not_handed_out(toolmind_file,
                                                                                                caplog):
    """datasets saves a shuffle's read position, not its buffer: the rows in the buffer when the state was saved are
    never handed out after the resume. datasets warns of it only where the shuffle is the stream's last step, which
    it never is in a stream of this package: a resumed job lost up to buffer_size rows without a word. The resume
    now says so, with the buffer size; a state taken before the first row, or a stream without a shuffle, does
    not warn."""
    whole = [r["id"] for r in _shuffled(toolmind_file)]
    head, state = _read_then_save(_shuffled(toolmind_file), 3, key="id")
    fresh_state = _shuffled(toolmind_file).state_dict()
    resumed = _shuffled(toolmind_file)
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        resumed.load_state_dict(state)
    warned = [r.getMessage() for r in caplog.records if "shuffle buffer" in r.getMessage()]
    assert warned == ["resuming a shuffled stream from a saved state: the rows that were in its shuffle buffer when "
                      "the state was saved (up to buffer_size=10 rows) are not handed out after the resume (datasets "
                      "saves the position of the rows read into the buffer, not the buffer)"]
    rest = [r["id"] for r in resumed]
    lost = set(whole) - set(head + rest)
    assert len(head + rest) == len(set(head + rest)) and 0 < len(lost) <= 10  # as the warning says
    caplog.clear()
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        _shuffled(toolmind_file).load_state_dict(fresh_state)
        _, unshuffled_state = _read_then_save(_stream(toolmind_file), 3)
        _stream(toolmind_file).load_state_dict(unshuffled_state)
    assert not [r for r in caplog.records if "shuffle buffer" in r.getMessage()]


def test_a_stateful_dataloader_resuming_a_shuffled_stream_warns_in_each_worker_that_had_started(toolmind_file,
                                                                                               tmp_path):
    """Each DataLoader worker has its own shuffle buffer and resumes its own state: a worker saved past its start
    says its buffer's rows (up to buffer_size) are not handed out; one saved before its first row says nothing."""
    import logging

    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")
    if multiprocessing.get_start_method() != "fork":
        pytest.skip("the workers' log is collected through a handler they inherit when forked")

    def loader():
        return stateful.StatefulDataLoader(_shuffled(toolmind_file), batch_size=2, num_workers=2,
                                           collate_fn=lambda rows: [r["id"] for r in rows])

    log = tmp_path / "workers.log"
    handler = logging.FileHandler(log)
    logging.getLogger("tooluse_datasets").addHandler(handler)
    try:
        head, rest = _stopped_and_resumed(loader, 1)  # the second worker had handed out nothing
    finally:
        logging.getLogger("tooluse_datasets").removeHandler(handler)
        handler.close()
    warned = [line for line in log.read_text().splitlines() if "shuffle buffer" in line]
    assert warned == ["resuming a shuffled stream from a saved state: the rows that were in this DataLoader worker's "
                      "shuffle buffer when the state was saved (up to buffer_size=10 rows) are not handed out after "
                      "the resume (datasets saves the position of the rows read into the buffer, not the buffer)"]
    assert len(head + rest) == len(set(head + rest))


def test_a_streams_state_with_a_key_datasets_does_not_read_resumes_where_it_was_saved(toolmind_file):
    """datasets reads a stream's state by its 'examples_iterable' and 'epoch' and passes over any other key (one a
    training script keeps beside them, or one a later datasets 5 writes): such a state was refused as no stream's
    state_dict, though datasets resumes it. It resumes where it was saved."""
    head, state = _read_then_save(_stream(toolmind_file), 3, key="id")
    resumed = _stream(toolmind_file)
    resumed.load_state_dict({**state, "global_step": 3})
    assert head + [r["id"] for r in resumed] == [r["id"] for r in _stream(toolmind_file)]


def test_a_state_saved_in_a_later_epoch_resumes_where_it_was_saved_in_a_new_stream(toolmind_file):
    """A state saved in epoch 1 (after ``set_epoch(1)``), loaded into the stream a restarted job builds (epoch 0),
    was passed over, as datasets applies a state only in the epoch it was saved in: that epoch was read again from
    its first row, the rows handed out before the checkpoint twice. The stream takes the state's epoch and resumes
    where it was saved; ``set_epoch`` of a later epoch then starts that one afresh."""
    def epoch(n: int):  # datasets orders the shards of each epoch after the first anew
        ds = _stream(toolmind_file)
        ds.set_epoch(n)
        return ds

    head, state = _read_then_save(epoch(1), 3, key="id")
    assert state["epoch"] == 1
    resumed = _stream(toolmind_file)
    resumed.load_state_dict(state)
    assert head + [r["id"] for r in resumed] == [r["id"] for r in epoch(1)]
    resumed.set_epoch(2)
    assert [r["id"] for r in resumed] == [r["id"] for r in epoch(2)]


def test_what_is_not_a_streams_state_dict_is_a_value_error_when_loaded(toolmind_file):
    """A StatefulDataLoader's state given to the stream (instead of the loader), the state of the stream's steps
    (``state_dict()["examples_iterable"]``), or no dict at all failed at the first row with datasets' bare
    ``KeyError: 'epoch'`` or ``TypeError: string indices must be integers``. Each is a ValueError when loaded,
    saying what a stream's state is and what was given; no state (None, {}) still starts the stream afresh."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for the DataLoader")
    stateful = pytest.importorskip("torchdata.stateful_dataloader",
                                   reason="torchdata (the [trl] extra) has the StatefulDataLoader")
    loader = stateful.StatefulDataLoader(_stream(toolmind_file), batch_size=2,
                                         collate_fn=lambda rows: [r["id"] for r in rows])
    next(iter(loader))
    with pytest.raises(ValueError, match=r"^this is not a stream's state_dict .*'examples_iterable' and 'epoch'.*"
                                         r"a StatefulDataLoader's state: restore it with the loader's "
                                         r"load_state_dict"):
        _stream(toolmind_file).load_state_dict(loader.state_dict())
    _, state = _read_then_save(_stream(toolmind_file), 3)
    with pytest.raises(ValueError, match=r"the state of the stream's steps \(RebatchedArrowExamplesIterable\): "
                                         r"load the whole state_dict\(\)"):
        _stream(toolmind_file).load_state_dict(state["examples_iterable"])
    with pytest.raises(ValueError, match=r"^this is not a stream's state_dict .* got str 'garbage'"):
        _stream(toolmind_file).load_state_dict("garbage")
    whole = [r["id"] for r in _stream(toolmind_file)]
    for nothing in (None, {}):
        fresh = _stream(toolmind_file)
        fresh.load_state_dict(nothing)
        assert [r["id"] for r in fresh] == whole
