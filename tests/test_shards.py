"""Shard plans cover every row of a file exactly once, whatever the cut: Parquet by row groups (also a file with a
single row group), JSON Lines by byte ranges (forced small with ``shard_bytes``), compressed files as one shard.
And the two defects found on the way to shard tasks: per-job skip reports, and options set to None."""
from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td
from tooluse_datasets.shards.plan import plan_file
from tooluse_datasets.shards.reading import read_shard
from tooluse_datasets.shards.shard import DOCUMENT, LINES, PARQUET


def _rows_read(path: str, target_bytes: int) -> tuple[list, list[int]]:
    """(shards, row numbers read from all of them, in plan order)."""
    shards = plan_file(path, target_bytes)
    numbers = [n for shard in shards for batch in read_shard(shard, batch_size=3) for n, _ in batch.items]
    return shards, numbers


def _jsonl(path: Path, n: int) -> list[dict]:
    rows = [{"i": i, "text": "x" * (i * 7 % 50)} for i in range(n)]
    lines = [json.dumps(r) for r in rows]
    lines.insert(4, "")  # a blank line is skipped but keeps its number
    path.write_text("\n".join(lines) + "\n")
    return rows


@pytest.mark.parametrize("target_bytes", [1, 37, 64, 150, 10**9])
def test_jsonl_byte_ranges_cover_every_row_once(tmp_path, target_bytes):
    path = tmp_path / "rows.jsonl"
    rows = _jsonl(path, 23)
    shards, numbers = _rows_read(str(path), target_bytes)
    assert all(s.kind == LINES for s in shards)
    if target_bytes < path.stat().st_size:
        assert len(shards) > 1  # the small bound really cut the file
    expected = [n for n in range(24) if n != 4]  # line 4 is blank
    assert numbers == expected  # in file order, each once
    values = [row for shard in shards for batch in read_shard(shard, 5) for _, row in batch.items]
    assert values == rows


def _parquet(path: Path, n: int, row_group_size: int) -> None:
    table = pa.table({"i": list(range(n)), "text": ["y" * (i % 13) for i in range(n)]})
    pq.write_table(table, path, row_group_size=row_group_size)


@pytest.mark.parametrize("row_group_size, target_bytes", [(4, 1), (4, 200), (7, 10**9), (100, 1)])
def test_parquet_row_groups_cover_every_row_once(tmp_path, row_group_size, target_bytes):
    path = tmp_path / "rows.parquet"
    _parquet(path, 30, row_group_size)
    groups = pq.ParquetFile(path).num_row_groups
    shards, numbers = _rows_read(str(path), target_bytes)
    assert all(s.kind == PARQUET for s in shards)
    assert [g for s in shards for g in s.row_groups] == list(range(groups))
    if target_bytes == 1:
        assert len(shards) == groups  # one shard per row group; a single row group is a single shard
    assert numbers == list(range(30))


def test_parquet_files_are_closed_once_read(tmp_path):
    """pyarrow leaves a file object it was handed open: each shard's file, the plan's and ToolMind's split scan
    are closed by the reader, not left to garbage collection (a ResourceWarning per shard under pytest or -X dev,
    and a descriptor held meanwhile)."""
    import gc
    import warnings

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()  # the bundled sample
    path = tmp_path / "toolmind.parquet"
    pq.write_table(pa.Table.from_pylist(rows * 12), path, row_group_size=9)
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for split in ("synthetic", None):  # by the split column, and the file's rows whatever their split
            ds = td.load("toolmind", data_files=str(path), split=split or "train", streaming=True, shard_bytes=20_000,
                         **({} if split else {"split_column": None}))
            assert len(list(ds)) > 0
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_compressed_file_is_one_shard_holding_every_row(tmp_path):
    plain = tmp_path / "rows.jsonl"
    rows = _jsonl(plain, 23)
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    # A byte range of compressed data cannot be read on its own: one shard, whatever the bound. The chained
    # URL is how datasets' download manager hands over a compressed file to read through.
    shards, numbers = _rows_read(f"gzip://rows.jsonl::{packed}", 1)
    assert len(shards) == 1 and shards[0].kind == LINES and shards[0].stop is None
    assert numbers == [n for n in range(24) if n != 4]
    assert [r for s in shards for b in read_shard(s, 5) for _, r in b.items] == rows
    json_document = tmp_path / "rows.json"
    json_document.write_text(json.dumps(rows))
    (document,) = plan_file(str(json_document), 1)
    assert document.kind == DOCUMENT


def test_a_local_compressed_path_is_read_decompressed(tmp_path):
    plain = tmp_path / "rows.jsonl"
    rows = _jsonl(plain, 23)
    packed = tmp_path / "rows.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    shards, _ = _rows_read(str(packed), 1)
    assert len(shards) == 1
    assert [r for s in shards for b in read_shard(s, 5) for _, r in b.items] == rows


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_truncated_compressed_file_keeps_its_rows_before_the_cut_and_reports_the_rest(tmp_path, cache_dir,
                                                                                         streaming):
    plain = tmp_path / "rows.jsonl"
    lines = [line for line in Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines() if line] * 40
    plain.write_text("\n".join(lines) + "\n")
    packed = gzip.compress(plain.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("ms_swift", data_files=[str(cut)], split="train", streaming=streaming, on_error="skip",
                        report=report, cache_dir=cache_dir))
    assert 0 < len(rows) < len(lines)
    assert [r["field"] for r in report.rows][-1] == "<file>" and "cannot be read on" in report.rows[-1]["message"]
    with pytest.raises(td.errors.InvalidValueError, match="cut.jsonl.gz"):
        list(td.load("ms_swift", data_files=[str(cut)], split="train", streaming=True))


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_0_byte_compressed_file_is_refused_naming_it_not_read_as_empty(tmp_path, cache_dir, streaming, suffix):
    """A download cut before its first byte is no compressed file (not even a header), where gzip's and zstd's
    readers gave no rows: an empty split, or a split short of that file's rows without a word."""
    if suffix == ".zst":
        pytest.importorskip("zstandard", reason="reading .zst files needs the zstandard package")
    empty = tmp_path / f"cut.jsonl{suffix}"
    empty.write_bytes(b"")
    with pytest.raises(td.errors.InvalidValueError, match=f"cut.jsonl\\{suffix}.*0 bytes"):
        list(td.load("ms_swift", data_files=[str(empty)], split="train", streaming=streaming, cache_dir=cache_dir))
    sample = td.sample_files("ms_swift")["train"]
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("ms_swift", data_files=[*sample, str(empty)], split="train", streaming=streaming,
                        on_error="skip", report=report, cache_dir=cache_dir))
    assert len(rows) == 6 and [(r["file"], r["field"]) for r in report.rows] == [(str(empty), "<file>")]
    # a compressed file of no rows is still an empty split
    (tmp_path / "none.jsonl.gz").write_bytes(gzip.compress(b""))
    assert list(td.load("ms_swift", data_files=[str(tmp_path / "none.jsonl.gz")], split="train",
                        streaming=streaming, cache_dir=cache_dir)) == []


def test_row_numbers_of_a_file_rewritten_in_place_are_counted_anew(tmp_path):
    """Readers remember where lines start to number later byte ranges without rescanning; a file rewritten at
    the same path must not reuse those numbers."""
    path = tmp_path / "rows.jsonl"
    _jsonl(path, 30)
    first = [n for s in plan_file(str(path), 200) for b in read_shard(s, 7) for n, _ in b.items]
    path.write_text("\n\n\n" + path.read_text())   # three more lines before every row
    again = [n for s in plan_file(str(path), 200) for b in read_shard(s, 7) for n, _ in b.items]
    assert again == [n + 3 for n in first]


def test_sample_files_cut_in_tiny_byte_ranges_give_the_same_rows(tmp_path):
    """Through the loader: ms-swift sample files cut into byte ranges give the same rows as one shard each."""
    files = td.sample_files("ms_swift")
    whole = list(td.load("ms_swift", data_files=files, split="train", streaming=True, on_error="skip"))
    builder = td.registry.builder_class("ms_swift")(config_name="unified", data_files=files, shard_bytes=500)
    (plan,) = builder.split_plans()
    assert len(plan.shards) > len(files["train"])
    cut = list(td.load("ms_swift", data_files=files, split="train", streaming=True, on_error="skip", shard_bytes=500))
    assert cut == whole and len({r["id"] for r in cut}) == len(cut)


def test_skip_reports_of_jobs_sharing_a_file_do_not_overwrite_each_other(tmp_path, cache_dir):
    """Prepared with num_proc=2 and a file cut in two shards: each job leaves its own skip report."""
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    broken = '{"sample_id": "x", "input": "truncated'
    path = tmp_path / "two_halves.jsonl"
    path.write_text("\n".join([good[0], broken, good[1], good[2], broken]) + "\n")
    builder = td.registry.builder_class("nestful")(config_name="unified", data_files=[str(path)],
                                                   shard_bytes=path.stat().st_size // 2)
    assert len(builder.split_plans()[0].shards) == 2
    report = td.SkipReport()
    ds = td.load("nestful", split="train", data_files=[str(path)], on_error="skip", report=report, num_proc=2,
                 cache_dir=cache_dir, shard_bytes=path.stat().st_size // 2)
    assert len(ds) == 3
    assert report.rows_read == 5 and report.skipped == 2
    assert sorted(e.row for e in report.examples) == [1, 4]


def test_an_option_set_to_none_is_applied(cache_dir):
    """``split_column=None``: the sample's split column is ignored and the data_files keys are the splits,
    map-style and streaming (datasets drops None config kwargs; the builder applies them)."""
    sample = td.sample_files("toolmind")["train"]
    with_column = td.load("toolmind", data_files=sample, streaming=True)
    assert len(with_column) == 7
    for streaming in (True, False):
        ds = td.load("toolmind", data_files={"first": sample, "again": sample}, split_column=None,
                     streaming=streaming, cache_dir=cache_dir)
        assert list(ds) == ["first", "again"]
        first, again = list(ds["first"]), list(ds["again"])
        assert {r["subset"] for r in first} == {"first"} and {r["subset"] for r in again} == {"again"}
        assert [r["messages"] for r in first] == [r["messages"] for r in again]
        assert len(first) == sum(1 for s in with_column.values() for _ in s)


@pytest.mark.parametrize("groups, expected", [(1, 1), (2, 2), (3, 2), (5, 4), (7, 6), (11, 6), (13, 12), (25, 24),
                                               (65, 60)])
def test_shard_counts_are_rounded_to_a_multiple_world_sizes_divide(tmp_path, groups, expected):
    """split_dataset_by_node only hands out whole shards when their number is a multiple of the world size:
    adjacent row groups are merged so that 2, 4, 6 or 12 divide it, and every row is still read once."""
    from tooluse_datasets.shards.plan import balanced

    path = tmp_path / "rows.parquet"
    _parquet(path, groups * 3, 3)
    shards = balanced(plan_file(str(path), 1))
    assert len(shards) == expected
    assert [g for s in shards for g in s.row_groups] == list(range(groups))
    assert max(len(s.row_groups) for s in shards) <= 2  # merges are spread, not piled on one shard
    numbers = [n for shard in shards for batch in read_shard(shard, batch_size=4) for n, _ in batch.items]
    assert numbers == list(range(groups * 3))


@pytest.mark.parametrize("groups_per_file, expected", [((1, 1, 1, 1, 1, 1, 14), 12), ((2, 2, 2, 2, 2, 2, 8), 12),
                                                       ((1, 1, 1, 1, 1, 1, 1, 3), 8), ((1, 1, 1), 3)])
def test_shard_counts_of_many_files_reach_the_largest_multiple_their_merges_allow(tmp_path, groups_per_file, expected):
    """Only shards of one file merge. 20 shards whose merges all lie in one file still become 12 (runs of
    three shards merge where two would not do); where 12 or 6 is out of reach the next multiple is taken,
    and where none is (three one-group files) nothing is merged. Every row is read once, in order."""
    from tooluse_datasets.shards.plan import balanced

    planned, rows = [], []
    for f, groups in enumerate(groups_per_file):
        path = tmp_path / f"rows-{f}.parquet"
        _parquet(path, groups * 3, 3)
        planned += plan_file(str(path), 1)
        rows += [(str(path), n) for n in range(groups * 3)]
    shards = balanced(planned)
    assert len(shards) == expected
    assert [(s.file, n) for s in shards for batch in read_shard(s, batch_size=4) for n, _ in batch.items] == rows


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_a_toolmind_splits_shards_with_gaps_are_grouped_and_balanced_for_nodes(tmp_path, monkeypatch, suffix):
    """A ToolMind split whose rows lie in three runs with other splits' rows between (Parquet row groups, JSON
    Lines ranges) is balanced like a file's shards: merged to a multiple of 2, so that two nodes each read their
    own shard, instead of 3 shards that every node read whole; Parquet groups are grouped up to shard_bytes.
    Every row still comes once, in order."""
    from datasets.distributed import split_dataset_by_node

    from tooluse_datasets.builders.toolmind import splits

    monkeypatch.setattr(splits, "MAX_GAP_BYTES", 0)  # a range ends at the first line of another split
    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    synthetic = [r for r in rows if r["split"] == "synthetic"]
    tau = [r for r in rows if r["split"] == "tau-train"]
    runs = [part for i in range(3) for part in (synthetic[3 * i:3 * i + 3], tau)]
    path = tmp_path / f"alternating{suffix}"
    if suffix == ".parquet":
        with pq.ParquetWriter(path, pa.Table.from_pylist(rows).schema) as writer:
            for run in runs:  # a row group each: synthetic, tau-train, synthetic, ...
                writer.write_table(pa.Table.from_pylist(run))
        whole = td.load("toolmind", data_files=str(path), split="synthetic", streaming=True)
        assert whole.n_shards == 1  # 16 MiB hold the three groups
        options = {"shard_bytes": 1}
    else:
        path.write_text("".join(json.dumps(row) + "\n" for run in runs for row in run))
        whole, options = None, {}
    stream = td.load("toolmind", data_files=str(path), split="synthetic", streaming=True, **options)
    assert stream.n_shards == 2
    nodes = [split_dataset_by_node(stream, rank=rank, world_size=2) for rank in range(2)]
    assert [node.n_shards for node in nodes] == [1, 1]  # whole shards, not every row read by both
    ids = [row["id"] for row in stream]
    assert len(ids) == 9 and (whole is None or ids == [row["id"] for row in whole])
    assert [row["id"] for node in nodes for row in node] == ids
    tau_ids = {size: [row["id"] for row in td.load("toolmind", data_files=str(path), split="tau_train", streaming=True,
                                                   shard_bytes=size)] for size in (1, 10**9)}
    assert len(tau_ids[1]) == 6 and tau_ids[1] == tau_ids[10**9]  # the other split, through the same gaps


def test_a_json_file_holding_one_object_over_several_lines_is_one_row(tmp_path):
    """``.json`` files hold an array, JSON Lines, or one object; an object written with indentation is one row,
    and a JSON Lines file whose first line is broken still gives its other lines (the first reported)."""
    lines = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    expected = list(td.load("nestful", data_files=td.sample_files("nestful"), split="train", streaming=True))
    pretty = tmp_path / "one.json"
    pretty.write_text(json.dumps(json.loads(lines[0]), indent=2))
    report = td.SkipReport()
    rows = list(td.load("nestful", data_files=str(pretty), split="train", streaming=True, report=report))
    assert [r["messages"] for r in rows] == [expected[0]["messages"]] and report.rows_read == 1
    broken = tmp_path / "broken_first.json"
    broken.write_text('{"sample_id": "cut\n' + "\n".join(lines[1:]) + "\n")
    report = td.SkipReport()
    rows = list(td.load("nestful", data_files=str(broken), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [r["messages"] for r in rows] == [r["messages"] for r in expected[1:len(lines)]]
    assert report.skipped == 1 and [e.row for e in report.examples] == [0]


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_one_object_over_several_lines_that_is_not_json_is_one_file_error_not_an_error_a_line(tmp_path, cache_dir,
                                                                                              streaming):
    """A pretty-printed object with one stray comma (hand-edited JSON) was read as JSON Lines: every line of it a
    row that is not JSON (101 errors for one row). It is one error for the file, saying where the parser stopped."""
    from conftest import shared_data

    row = json.loads(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text().splitlines()[1])
    text = json.dumps(row, indent=2)
    text = text[:text.rindex("\n")] + ",\n}\n"  # a trailing comma after the last key
    path = tmp_path / "one.json"
    path.write_text(text)
    report = td.SkipReport()
    rows = list(td.load("ms_swift", data_files=str(path), split="train", streaming=streaming, on_error="skip",
                        report=report, cache_dir=cache_dir))
    assert rows == [] and report.rows_read == report.skipped == 1
    [error] = report.examples
    assert (error.error, error.file, error.row, error.field) == ("InvalidJsonError", str(path), 0, "<file>")
    line = text.count("\n") - 1  # the comma's line
    assert error.message.startswith("file holds one JSON object written over several lines that is not valid JSON (")
    assert f"line {line} column" in error.message
    path.write_text(json.dumps(row, indent=2))  # the same object without the comma: one row
    assert len(list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))) == 1


@pytest.mark.parametrize("refused", ["-Infinity", "1" * 5000], ids=["-Infinity", "5000-digit integer"])
@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_json_lines_in_a_json_file_whose_first_row_holds_what_json_refuses_are_a_row_each(tmp_path, cache_dir,
                                                                                         streaming, refused):
    """A first line that is a whole value, but one the exact reader refuses (-Infinity; an integer past Python's
    4300-digit limit, which Python's json refuses too), was taken for the start of an object over several lines:
    with no later line an object of its own (a row that is a string), the file was one error and its other rows
    were never counted."""
    from conftest import shared_data

    lines = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["messages"][0]["content"] = "REFUSED"
    path = tmp_path / "rows.json"
    path.write_text("\n".join([json.dumps(first).replace('"REFUSED"', refused),
                                json.dumps("a row that is a string")]) + "\n")
    report = td.SkipReport()
    rows = list(td.load("ms_swift", data_files=str(path), split="train", streaming=streaming, on_error="skip",
                        report=report, cache_dir=cache_dir))
    assert rows == [] and report.rows_read == report.skipped == 2
    assert [(e.error, e.row, e.field != "<file>") for e in report.examples] == [
        ("InvalidJsonError", 0, True), ("InvalidJsonError", 1, True)]


# -- JSON arrays cut for workers (prepare with num_proc) --------------------------------------------------

# Elements of every kind the reader tells apart: brackets in strings, nesting deeper than the element regex,
# a non-object, non-ASCII text, NaN (an error at its index), a trailing comma (a file error after the last element);
# a BOM and white space around.
ARRAY_ELEMENTS = [json.dumps({"a": "]}\\\"[", "b": [1.5, None]}), json.dumps({"deep": [[[[[[[[[[{"x": 1}]]]]]]]]]]}),
                  "7", json.dumps({"c": "\u00e9\n"}, ensure_ascii=False), '{"d": NaN}', json.dumps({"e": [[[]]]})]
ARRAY_TEXT = "\ufeff [\n  " + ",\n  ".join(ARRAY_ELEMENTS * 3 + [""]) + "\n] \n"


def _items(shards) -> list:
    return [(n, v if isinstance(v, dict) else f"error {v.field}") for shard in shards
            for batch in read_shard(shard, batch_size=2) for n, v in batch.items]


@pytest.fixture(params=["regex", "by-tokens"])
def delimiting(request, monkeypatch):
    """Elements are found by one regex match each, or token by token (deep elements; everything on 3.10)."""
    from tooluse_datasets.shards import documents

    if request.param == "by-tokens":
        monkeypatch.setattr(documents, "_ELEMENT", None)
    monkeypatch.setattr(documents, "_ARRAY_READ_BYTES", 7)  # elements span many reads
    return request.param


@pytest.mark.parametrize("target_bytes", [1, 60, 200, 10**9])
def test_json_array_pieces_cover_every_element_once(tmp_path, target_bytes, delimiting):
    from tooluse_datasets.shards.plan import cut_array, whole_file_shard

    path = tmp_path / "rows.json"
    path.write_text(ARRAY_TEXT, encoding="utf-8")
    whole = _items([whole_file_shard(str(path))])
    assert len(whole) == 19 and whole[4] == (4, "error <element>") and whole[-1] == (18, "error <file>")
    pieces = cut_array(str(path), target_bytes)
    assert all(p.kind == DOCUMENT for p in pieces)
    if target_bytes < 200:
        assert len(pieces) > 3  # the small bound really cut the array
    assert pieces[0].start == 0 and pieces[-1].stop is None
    assert all(a.stop == b.start for a, b in zip(pieces, pieces[1:]))  # touching byte ranges
    assert _items(pieces) == whole  # in order, each element once, errors at the same indexes
    assert [p.first_row or 0 for p in pieces] == [_items([p])[0][0] for p in pieces]


def test_a_piece_of_a_json_array_resumes_after_any_of_its_rows(tmp_path, delimiting):
    """Resuming inside a piece gives the rest of that piece only, not the pieces after it."""
    from tooluse_datasets.shards.documents import read_document
    from tooluse_datasets.shards.plan import cut_array

    path = tmp_path / "rows.json"
    path.write_text(ARRAY_TEXT, encoding="utf-8")
    pieces = cut_array(str(path), 120)
    assert len(pieces) >= 3
    for piece in pieces:
        batches = list(read_document(piece, 2))
        items = _items([piece])
        for position in [p for batch in batches for p in batch.positions]:
            rest = [(n, v if isinstance(v, dict) else f"error {v.field}")
                    for batch in read_document(piece, 2, resume=position) for n, v in batch.items]
            assert rest == [(n, v) for n, v in items if n >= position[0]], (piece, position)


@pytest.mark.parametrize("text, pieces", [
    ('[{"a": 1}, {"b": 2}, {"c": "open}, {"d": 4}]', 3),   # a string that never ends: cut up to it
    ('{"a": 1}\n{"b": 2}\n', 1),                             # JSON Lines saved as .json
    ('{"a": [1, 2, 3]}', 1),                                  # one object
    ("[]", 1), ('[{"only": 1}]', 1),
])
def test_json_files_that_cannot_be_cut_further_read_as_before(tmp_path, text, pieces):
    from tooluse_datasets.shards.plan import cut_array, whole_file_shard

    path = tmp_path / "rows.json"
    path.write_text(text)
    cut = cut_array(str(path), 1)
    assert len(cut) == pieces
    assert _items(cut) == _items([whole_file_shard(str(path))])


def test_balancing_merges_touching_pieces_of_an_array(tmp_path):
    from tooluse_datasets.shards.plan import balanced, cut_array

    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"i": i} for i in range(7)]))
    pieces = cut_array(str(path), 1)
    assert len(pieces) == 7
    merged = balanced(pieces)
    assert len(merged) == 6 and _items(merged) == _items(pieces)


def _ms_swift_array(path: Path, copies: int, bad_at: int) -> int:
    rows = [json.loads(line) for f in td.sample_files("ms_swift")["train"] if f.endswith(".jsonl")
            for line in Path(f).read_text().splitlines() if line.strip()]
    elements = [json.dumps(r, ensure_ascii=False) for _ in range(copies) for r in rows]
    elements[bad_at] = '{"messages": [{"role": "user", "content": NaN}]}'
    path.write_text("[\n" + ",\n".join(elements) + "\n]\n", encoding="utf-8")
    return len(elements)


def test_prepare_with_num_proc_divides_a_json_array_and_counts_every_skip(tmp_path, cache_dir):
    """A JSON array is one shard to a stream (its first row waits for nothing) but pieces to prepare with
    num_proc=2, which then gives the same rows, and a skip report that counts the bad element once."""
    path = tmp_path / "agent.json"
    total = _ms_swift_array(path, copies=12, bad_at=40)
    shard_bytes = path.stat().st_size // 5
    builder = td.registry.builder_class("ms_swift")(config_name="unified", data_files=[str(path)],
                                                    shard_bytes=shard_bytes)
    assert len(builder.split_plans()[0].shards) == 1
    assert len(builder.split_plans(divide=True)[0].shards) == 4  # 5 pieces, balanced to a multiple of 4
    one = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", cache_dir=f"{cache_dir}/one",
                  shard_bytes=shard_bytes)
    report = td.SkipReport()
    two = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", cache_dir=f"{cache_dir}/two",
                  shard_bytes=shard_bytes, num_proc=2, report=report)
    assert len(two.cache_files) > 1  # really prepared by two jobs
    assert two.to_list() == one.to_list() and len(two) == total - 1
    assert report.rows_read == total and report.skipped == 1 and [e.row for e in report.examples] == [40]
    for num_proc in (None, 2):  # a stream's first row waits for no cutting pass, with workers or without
        stream = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", streaming=True,
                         shard_bytes=shard_bytes, num_proc=num_proc)
        assert stream.n_shards == 1 and [r["id"] for r in stream] == [r["id"] for r in one]



def test_a_json_array_rewritten_with_its_size_and_time_kept_is_cut_anew(tmp_path, cache_dir):
    """The cuts of a JSON array are kept for the process, by file version: the same rows in another order, padded
    to the same size and given back the old modification time (touch -r), were cut where the old elements began,
    and the prepare with num_proc read the middles of elements as bad rows."""
    import os

    rows = [json.loads(line) for line in open(td.sample_files("ms_swift")["train"][0], encoding="utf-8")]
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    stat = path.stat()
    options = dict(data_files=str(path), split="train", on_error="skip", cache_dir=cache_dir,
                   shard_bytes=stat.st_size // 3)
    assert len(td.load(num_proc=2, **options, source="ms_swift")) == len(rows)
    text = json.dumps(rows[::-1])
    with open(path, "r+", encoding="utf-8") as f:  # written in place, as an editor would
        f.write(text[:-1] + " " * (stat.st_size - len(text)) + "]")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    report = td.SkipReport()
    again = td.load(num_proc=2, report=report, **options, source="ms_swift")
    assert report.to_dict()["by_reason"] == {} and report.rows_read == len(rows)
    whole = td.load("ms_swift", **{**options, "cache_dir": f"{cache_dir}/whole"})  # no num_proc: not cut
    assert again.to_list() == whole.to_list() and again[0]["id"] == "ms_swift/agent/0"
    assert again[0]["messages"][0]["content"] == whole[0]["messages"][0]["content"] != rows[0]["messages"][0]["content"]

# -- JSON rows parsed a few at a time -----------------------------------------------------------------------

def test_json_rows_are_read_a_few_at_a_time_and_joined_where_a_batch_step_wants_batches(tmp_path):
    """A JSON file's rows are parsed JSON_BATCH_ROWS at a time whatever batch_size says, so each batch converts
    while it is still in the CPU's caches; NESTFUL with execute=True (one sandbox process per batch) joins them
    back into batch_size rows, and no row is lost or reordered either way."""
    from tooluse_datasets.builders.nestful.source import NestfulOptions, NestfulSource
    from tooluse_datasets.shards.reading import JSON_BATCH_ROWS
    from tooluse_datasets.source import SplitPlan

    lines = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    rows = [dict(json.loads(lines[i % len(lines)]), sample_id=f"s{i}") for i in range(400)]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(rows))
    for file in (path, array):
        batches = list(read_shard(plan_file(str(file))[0], batch_size=1000))
        assert [len(b.items) for b in batches] == [JSON_BATCH_ROWS] * 3 + [400 - 3 * JSON_BATCH_ROWS]
        assert [n for b in batches for n, _ in b.items] == list(range(400))
    split = SplitPlan("train", ())
    for execute, sizes in ((False, [JSON_BATCH_ROWS] * 3 + [25]), (True, [300, 100])):
        source = NestfulSource(NestfulOptions(execute=execute, batch_size=300))
        batches = list(source.read(plan_file(str(path))[0], split))
        assert [len(b.items) for b in batches] == sizes
        assert [row["sample_id"] for b in batches for _, row in b.items] == [r["sample_id"] for r in rows]


def test_prepare_writes_batch_size_rows_a_record_batch_though_rows_convert_a_few_at_a_time(tmp_path, cache_dir,
                                                                                        monkeypatch):
    """Each table handed to datasets becomes one record batch of the cache file, and reading the file back
    (memory-mapped) maps ~64 KB into the process for each: tables of the few rows converted at a time made
    that grow with the split. Prepare joins them into batch_size rows (or WRITE_BATCH_BYTES) a record batch."""
    import pyarrow as pa

    from tooluse_datasets import builder as builder_module

    def record_batches(ds) -> list[int]:
        sizes = []
        for cache_file in ds.cache_files:
            with pa.memory_map(cache_file["filename"]) as source:
                sizes += [b.num_rows for b in pa.ipc.open_stream(source)]
        return sizes

    lines = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(dict(json.loads(lines[i % len(lines)]), sample_id=f"s{i}"))
                              for i in range(700)) + "\n")
    ds = td.load("nestful", data_files=str(path), split="train", cache_dir=f"{cache_dir}/a", batch_size=300)
    assert record_batches(ds) == [300, 300, 100]
    assert [r["id"].rsplit("/", 1)[1] for r in ds] == [f"s{i}" for i in range(700)]
    # a byte bound of about 40 rows (datasets itself buffers tables of one row)
    monkeypatch.setattr(builder_module, "WRITE_BATCH_BYTES", ds.data.nbytes // 700 * 40)
    small = td.load("nestful", data_files=str(path), split="train", cache_dir=f"{cache_dir}/b", batch_size=300)
    assert 20 <= max(record_batches(small)) <= 60 and sum(record_batches(small)) == 700
    assert small.to_list() == ds.to_list()


def test_joined_batches_keep_the_rows_before_a_read_error():
    from tooluse_datasets.shards.batches import joined_batches
    from tooluse_datasets.shards.shard import RawBatch

    def broken():
        yield RawBatch([(0, {"a": 1})], [(1, 10)])
        yield RawBatch([(1, {"a": 2})], [(2, 20)])
        raise td.InvalidValueError("file cannot be read on", field="<file>")

    joined = joined_batches(broken(), 10)
    assert next(joined).items == [(0, {"a": 1}), (1, {"a": 2})]
    with pytest.raises(td.InvalidValueError):
        next(joined)


@pytest.mark.parametrize("damage", ["not lz4", "corrupt frame"])
@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_damaged_lz4_file_is_one_reported_file_not_a_runtime_error(tmp_path, cache_dir, streaming, damage):
    lz4_frame = pytest.importorskip("lz4.frame")
    data = "".join(line + "\n" for line in Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()
                   if line).encode() * 40
    packed = bytearray(lz4_frame.compress(data))
    if damage == "not lz4":
        packed = bytearray(data)
    else:
        middle = len(packed) // 2
        packed[middle:middle + 16] = bytes(b ^ 0xFF for b in packed[middle:middle + 16])
    path = tmp_path / "rows.jsonl.lz4"
    path.write_bytes(bytes(packed))
    report = td.SkipReport(keep_all=True)
    list(td.load("ms_swift", data_files=[str(path)], split="train", streaming=streaming, on_error="skip",
                 report=report, cache_dir=cache_dir))
    assert [(r["row"], r["field"]) for r in report.rows][-1:] == [(None, "<file>")]
    assert report.rows[-1]["file"] == str(path) and "LZ4F" in report.rows[-1]["message"]
    with pytest.raises(td.errors.InvalidValueError, match="rows.jsonl.lz4"):
        list(td.load("ms_swift", data_files=[str(path)], split="train", streaming=True))


@pytest.mark.parametrize("codec", ["bz2", "lz4"])
@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json"])
def test_bz2_or_lz4_data_under_a_json_name_is_one_file_error_saying_what_it_holds(tmp_path, cache_dir, codec, name):
    """As gzip, zstd and xz data named .jsonl are: one whole-file skip naming the suffix to use, not every
    "line" of the compressed bytes reported as a row that is not UTF-8."""
    data = Path(td.sample_files("ms_swift")["train"][0]).read_bytes() * 20
    if codec == "bz2":
        import bz2

        packed = bz2.compress(data)
    else:
        packed = pytest.importorskip("lz4.frame").compress(data)
    path = tmp_path / name
    path.write_bytes(packed)
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        rows = list(td.load("ms_swift", data_files=[str(path)], split="train", streaming=streaming, on_error="skip",
                            report=report, cache_dir=f"{cache_dir}-{streaming}"))
        assert rows == [] and (report.rows_read, report.skipped) == (1, 1)
        assert (report.rows[0]["row"], report.rows[0]["field"]) == (None, "<file>")
        assert f"{codec}-compressed data (name it .{codec})".replace("bz2-", "bzip2-") in report.rows[0]["message"]


def test_a_large_json_array_cut_short_keeps_every_element_before_the_cut(tmp_path, monkeypatch):
    """An array read a block at a time (over ARRAY_WHOLE_BYTES; the sizes made small here) whose compressed file
    is cut short: every element whole before the cut is a row, not only those before the last blocks read
    ahead, then the error naming the file."""
    from tooluse_datasets.shards import documents

    monkeypatch.setattr(documents, "ARRAY_WHOLE_BYTES", 64 << 10)
    monkeypatch.setattr(documents, "_ARRAY_READ_BYTES", 64 << 10)
    monkeypatch.setattr(documents, "RUN_BYTES", 16 << 10)
    sample = Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()
    elements = [json.loads(line) for line in sample if line.strip()] * 300  # 1 MB
    texts = [json.dumps(e) for e in elements]
    packed = gzip.compress(("[" + ", ".join(texts) + "]").encode())
    cut = tmp_path / "rows.json.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    prefix, end, kept = len(zlib.decompressobj(31).decompress(cut.read_bytes())), 1, 0
    for text in texts:  # the elements whose text and comma are before the cut
        end += len(text) + 1
        if end > prefix:
            break
        kept, end = kept + 1, end + 1
    assert 0 < kept < len(elements)
    (shard,) = plan_file(str(cut))
    got = []
    with pytest.raises(td.errors.InvalidValueError, match="rows.json.gz") as caught:
        for batch in read_shard(shard, 100):
            got += [row for _, row in batch.items]
    assert caught.value.field == "<file>"
    assert got == elements[:kept]


def _deleted_once_listed(monkeypatch, path: Path) -> None:
    """``path`` deleted right after a load lists its data files, before it plans them."""
    from tooluse_datasets.builder import ToolUseBuilder

    listed = ToolUseBuilder._resolve_files

    def listed_then_deleted(self, dl_manager):
        files = listed(self, dl_manager)
        path.unlink()
        return files

    monkeypatch.setattr(ToolUseBuilder, "_resolve_files", listed_then_deleted)


@pytest.mark.parametrize("source, suffix", [("ms_swift", "jsonl"), ("ms_swift", "parquet"), ("toolmind", "parquet")])
@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_data_file_deleted_between_listing_and_planning_is_a_data_not_found_error_naming_it(
        tmp_path, cache_dir, monkeypatch, source, suffix, streaming):
    """Planning reads each listed file (a JSON Lines file's size, a Parquet footer, ToolMind's split column): one
    deleted or moved in between was a bare FileNotFoundError. It is the DataNotFoundError naming the file that a
    file deleted after planning is."""
    path = tmp_path / f"rows.{suffix}"
    if suffix == "jsonl":
        _jsonl(path, 5)
    else:
        pq.write_table(pa.table({"messages": ["[]"], "split": ["x"]}), path)
    _deleted_once_listed(monkeypatch, path)
    with pytest.raises(td.DataNotFoundError, match="deleted or moved since") as caught:
        td.load(source, data_files=str(path), split="train", streaming=streaming, cache_dir=cache_dir)
    assert str(path) in str(caught.value)


def test_a_data_file_deleted_between_listing_and_planning_is_one_error_line_of_the_command(tmp_path, monkeypatch,
                                                                                            capsys):
    from tooluse_datasets.cli import main

    path = tmp_path / "rows.jsonl"
    _jsonl(path, 5)
    _deleted_once_listed(monkeypatch, path)
    assert main(["stats", "ms_swift", "--data-files", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: the file is not there any more") and "\n" not in err


@pytest.mark.parametrize("module, step", [("shards.plan", "_larger"), ("builder", "with_versions")],
                         ids=["sized-then-cut", "after-planning"])
def test_a_data_file_deleted_while_a_prepare_with_num_proc_plans_it_is_a_data_not_found_error_naming_it(
        tmp_path, cache_dir, monkeypatch, module, step):
    """A large JSON array deleted once sized for cutting into pieces (prepare with num_proc), before it was cut,
    was a bare FileNotFoundError; deleted once planned, datasets' "An error occurred while generating the
    dataset" came back from the num_proc worker that met the DataNotFoundError."""
    import importlib

    path = tmp_path / "rows.json"
    path.write_text(json.dumps([json.loads(line) for line in
                                Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()] * 40))
    patched = importlib.import_module(f"tooluse_datasets.{module}")
    real = getattr(patched, step)

    def then_deleted(*args, **kwargs):
        result = real(*args, **kwargs)
        path.unlink(missing_ok=True)
        return result

    monkeypatch.setattr(patched, step, then_deleted)
    with pytest.raises(td.DataNotFoundError, match="deleted or moved since") as caught:
        td.load("ms_swift", data_files=str(path), split="train", num_proc=2, shard_bytes=4096, cache_dir=cache_dir)
    assert str(path) in str(caught.value)
