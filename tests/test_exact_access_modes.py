"""Exact JSON values through every way of reading a dataset that `td.load` returns: datasets' own exports
(to_list, to_dict, to_pandas), formats switched back and forth, column operations, and streams cut, skipped,
shuffled or sharded. Each returns the values bit for bit (the README's *Exact JSON* table)."""
from __future__ import annotations

import json

import datasets
import pandas
import pytest
from datasets import Dataset, Features, Json, Value

import tooluse_datasets as td
from tricky_values import bits, nestful_row_with

VALUES = [2**70, -(2**80) - 7, 10**400, -0.0, 1e-320, 5e-324, 0.30000000000000004, 1.2345678901234567e-05,
          3.141592653589793, {"z": 1, "a": 0.1, "m": {"y": 2**65}},
          {"ключ": 1.5, "🚀": [1e-320, -0.0], "é": "x", "": None}]


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "exact.jsonl"
    # the stdlib writes every value above exactly (integers of any size, -0.0, subnormals)
    path.write_text("".join(json.dumps(nestful_row_with(VALUES, f"s{i}"), ensure_ascii=False) + "\n" for i in range(3)),
                    encoding="utf-8")
    return str(path)


def _arguments(row):
    return [call["function"]["arguments"]["x"] for call in row["messages"][1]["tool_calls"]]


def _first_of_batch(batch):
    return {name: column[0] for name, column in batch.items()}


def _assert_exact(row):
    assert bits(_arguments(row)) == bits(VALUES)
    assert bits(row["meta"]["gold_answer"]) == bits(VALUES[-1])


MAP_STYLE = {
    "to_list": lambda ds: ds.to_list()[0],
    "to_dict": lambda ds: _first_of_batch(ds.to_dict()),
    "to_dict batched": lambda ds: _first_of_batch(next(ds.to_dict(batched=True, batch_size=2))),
    "to_pandas": lambda ds: ds.to_pandas().iloc[0].to_dict(),
    "to_pandas batched": lambda ds: next(ds.to_pandas(batched=True, batch_size=2)).iloc[0].to_dict(),
    "iter batch_size": lambda ds: _first_of_batch(next(ds.iter(batch_size=2))),
    "arrow then python": lambda ds: ds.with_format("arrow").with_format("python")[0],
    "arrow then none": lambda ds: next(iter(ds.with_format("arrow").with_format(None))),
    "flatten": lambda ds: ds.flatten()[0],
    "cast_column of another column": lambda ds: ds.cast_column("subset", Value("large_string"))[0],
    "sort": lambda ds: list(ds.sort("id", reverse=True))[-1],
    "add_column": lambda ds: ds.add_column("n", [1, 2, 3])[0],
    "from_generator": lambda ds: Dataset.from_generator(_rows_of, features=ds.features,
                                                        gen_kwargs={"rows": list(ds)})[0],
}


def _rows_of(rows):
    yield from rows


@pytest.mark.parametrize("read", list(MAP_STYLE.values()), ids=list(MAP_STYLE))
def test_map_style_reads_are_exact(data_file, cache_dir, read):
    ds = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir)
    _assert_exact(read(ds))


STREAMS = {
    "take": lambda it: it.take(2),
    "skip": lambda it: it.skip(2),
    "shuffle with a buffer": lambda it: it.shuffle(seed=3, buffer_size=2),
    "arrow then python": lambda it: it.with_format("arrow").with_format("python"),
    "cast_column of another column": lambda it: it.cast_column("subset", Value("large_string")),
}


@pytest.mark.parametrize("step", list(STREAMS.values()), ids=list(STREAMS))
@pytest.mark.parametrize("origin", ["streaming load", "to_iterable_dataset(num_shards=3)"])
def test_streams_are_exact(data_file, cache_dir, origin, step):
    if origin == "streaming load":
        stream = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir, streaming=True)
    else:
        stream = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir).to_iterable_dataset(
            num_shards=3)
    rows = list(step(stream))
    assert rows
    for row in rows:
        _assert_exact(row)


STREAM_EXPORTS = {
    "to_list": lambda it: it.to_list()[0],
    "to_dict": lambda it: _first_of_batch(it.to_dict()),
    "to_pandas": lambda it: it.to_pandas().iloc[0].to_dict(),
    "to_pandas batched": lambda it: next(it.to_pandas(batched=True, batch_size=2)).iloc[0].to_dict(),
}


@pytest.mark.parametrize("export", list(STREAM_EXPORTS.values()), ids=list(STREAM_EXPORTS))
def test_stream_exports_are_exact(data_file, export):
    """A stream's to_list/to_dict/to_pandas go through a map-style Dataset of plain Json() columns."""
    _assert_exact(export(td.load("nestful", data_files=data_file, split="train", streaming=True)))


def test_to_list_of_a_plain_json_column_is_exact():
    """datasets' own exports of a plain ``Json()`` column (``load_from_disk``, a dataset built by datasets) read
    the text exactly once the package is imported; text that is not JSON stays the text, as datasets has it."""
    texts = [json.dumps(v, ensure_ascii=False) for v in VALUES] + ["NaN", "not json"]
    ds = Dataset.from_dict({"v": texts}, features=Features({"v": Json()}))
    assert bits(ds.to_list()[:len(VALUES)]) == bits([{"v": v} for v in VALUES])
    assert ds.to_dict()["v"][len(VALUES):] == ["NaN", "not json"]
    assert bits(list(ds.to_pandas()["v"])[:len(VALUES)]) == bits(VALUES)


def test_from_pandas_with_the_exact_features_takes_to_pandas_back_exactly(data_file, cache_dir):
    """datasets' from_pandas has Arrow infer the frame's types before casting to the features: the decoded JSON values
    of to_pandas() failed ("cannot mix struct and non-struct") and did not come back."""
    ds = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir)
    for frame in (ds.to_pandas(), pandas.DataFrame(list(ds))):
        back = Dataset.from_pandas(frame, features=ds.features)
        assert isinstance(back.features, td.ExactFeatures)
        assert bits(list(back)) == bits(list(ds))
    broken = ds.to_pandas()
    broken.at[1, "meta"] = {"x": float("nan")}
    with pytest.raises(td.JsonValueError) as info:
        Dataset.from_pandas(broken, features=ds.features)
    assert (info.value.row, info.value.field) == (1, "meta")


TO_JSON = {
    "JSON Lines": ({}, lambda text: [td.loads(line) for line in text.splitlines()]),
    "JSON Lines, force_ascii=False": ({"force_ascii": False},
                                      lambda text: [td.loads(line) for line in text.splitlines()]),
    "one JSON array": ({"lines": False}, td.loads),
    "orient=split": ({"orient": "split"}, lambda text: [dict(zip(td.loads(text)["columns"], values))
                                                        for values in td.loads(text)["data"]]),
    "two processes, a batch each": ({"num_proc": 2, "batch_size": 2},
                                    lambda text: [td.loads(line) for line in text.splitlines()]),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streamed"])
@pytest.mark.parametrize("kwargs, read", list(TO_JSON.values()), ids=list(TO_JSON))
def test_to_json_writes_json_values_exactly(data_file, cache_dir, tmp_path, streaming, kwargs, read):
    """datasets' to_json writes through pandas, whose ujson kept 10 significant digits: 0.30000000000000004 was
    written 0.3, 5e-324 4.940656458e-324, -0.0 0.0. JSON values are written as their stored text now; the rest is
    pandas' (orient, lines, force_ascii, the other columns)."""
    ds = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir, streaming=streaming)
    out = tmp_path / "out.json"
    ds.to_json(str(out), **kwargs)
    text = out.read_text(encoding="utf-8")
    assert text.isascii() == kwargs.get("force_ascii", True)
    expected = ds.to_list()
    assert bits(read(text)) == bits(expected)
    assert _arguments(expected[0]) == VALUES  # (compared as bits above: the values themselves)


def test_to_json_of_a_plain_json_column_writes_json_text_exactly_and_other_text_as_datasets_does(tmp_path):
    """A plain ``Json()`` column (``load_from_disk``): its JSON text is written exactly, unmarked text of another
    writer with its indentation on one line; text that is not JSON goes as datasets writes it (a string), and a
    string that looks like the writer's placeholder stays that string."""
    texts = ['{"x": 0.30000000000000004,\n "y": [-0.0, 123456789012345678901234567890]}', "not json",
             '"tooluse-json-0000000000000000-0"', None]
    ds = Dataset.from_dict({"v": texts, "n": [1.5, 2.5, 3.5, 4.5]},
                           features=Features({"v": Json(), "n": Value("float64")}))
    out = tmp_path / "out.jsonl"
    ds.to_json(str(out))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    rows = [td.loads(line) for line in lines]
    assert bits([row["v"] for row in rows]) == bits(
        [{"x": 0.30000000000000004, "y": [-0.0, 123456789012345678901234567890]}, "not json",
         "tooluse-json-0000000000000000-0", None])
    assert [row["n"] for row in rows] == [1.5, 2.5, 3.5, 4.5]


POLARS_READS = {
    "row": lambda frame: frame[0],
    "batch": lambda frame: frame[:2],
    "column": lambda frame: frame["messages"].to_frame(),
    "stream row": lambda frame: next(iter(frame)),
    "stream batch": lambda frame: next(frame.iter(batch_size=2)),
}


@pytest.mark.parametrize("read", list(POLARS_READS.values()), ids=list(POLARS_READS))
def test_polars_format_gives_json_leaves_as_their_stored_text(data_file, cache_dir, read):
    """Under with_format("polars") datasets decoded JSON leaves to Python values for polars to type: a row or batch
    failed in datasets' polars decoder (TypeError: 'dict' object is not callable), a column holding 10**400 was
    polars' OverflowError. They stay the stored text, as to_polars() gives them, which td.loads reads exactly."""
    pytest.importorskip("polars", reason="polars is in the test extra; pip install polars")
    streaming = read in (POLARS_READS["stream row"], POLARS_READS["stream batch"])
    ds = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir, streaming=streaming)
    frame = read(ds.with_format("polars"))
    exported = td.load("nestful", data_files=data_file, split="train", cache_dir=cache_dir).to_polars()
    assert dict(frame.schema) == {name: exported.schema[name] for name in frame.columns}
    first = frame.row(0, named=True)
    calls = first["messages"][1]["tool_calls"]
    assert bits([td.loads(call["function"]["arguments"])["x"] for call in calls]) == bits(VALUES)
    if "meta" in first:
        assert bits(td.loads(first["meta"])["gold_answer"]) == bits(VALUES[-1])


def test_polars_format_of_td_exact_keeps_each_objects_own_keys():
    """polars typed a decoded column by its first objects: {"b": 2} after {"a": 1} came back {"a": None}."""
    pytest.importorskip("polars", reason="polars is in the test extra; pip install polars")
    ds = td.exact(Dataset.from_dict({"v": ['{"a": 1}', '{"b": 2}']}, features=Features({"v": Json()})))
    assert [td.loads(text) for text in ds.with_format("polars")["v"].to_list()] == [{"a": 1}, {"b": 2}]


MAPPED_STREAM_EXPORTS = {
    "to_list": lambda it: it.to_list(),
    "to_dict": lambda it: [dict(zip(columns, values)) for columns in [list(it.to_dict())]
                           for values in zip(*it.to_dict().values())],
    "to_json": lambda it: [td.loads(line) for line in _to_json_text(it).splitlines()],
}


def _to_json_text(stream) -> str:
    import io

    buffer = io.BytesIO()
    stream.to_json(buffer)
    return buffer.getvalue().decode("utf-8")


@pytest.mark.parametrize("export", list(MAPPED_STREAM_EXPORTS), ids=list(MAPPED_STREAM_EXPORTS))
@pytest.mark.parametrize("source", ["nestful", "ms_swift", "llamafactory", "exact values"])
def test_a_mapped_streams_tables_and_exports_are_exact(data_file, source, export):
    """A stream's map hands on Python rows, which datasets' exports (to_list, to_dict, to_json, to_pandas...) turned
    into Arrow tables by inferring their types: ds.map(td.short_call_ids).to_list() of every source's sample
    failed (ArrowInvalid: "cannot mix struct and non-struct", "Could not convert '$var_1.result$'")."""
    files = data_file if source == "exact values" else td.sample_files(source)
    stream = td.load("nestful" if source == "exact values" else source, data_files=files, split="train",
                     streaming=True).map(td.short_call_ids)
    rows = MAPPED_STREAM_EXPORTS[export](stream)
    expected = [td.complete_row(row) for row in stream]
    assert bits([{name: row[name] for name in sorted(row)} for row in rows]) == \
        bits([{name: row[name] for name in sorted(row)} for row in expected])
    if source == "exact values":
        assert bits(_arguments(rows[0])) == bits(VALUES)


MAPPED_STREAM_SKIPS = {
    "to_list": lambda stream, tmp_path: stream.to_list(),
    "to_json": lambda stream, tmp_path: stream.to_json(str(tmp_path / "out.jsonl")),
    "to_pandas": lambda stream, tmp_path: stream.to_pandas(),
    "concatenate_datasets": lambda stream, tmp_path: list(datasets.concatenate_datasets([stream])),
}


@pytest.mark.parametrize("export", list(MAPPED_STREAM_SKIPS), ids=list(MAPPED_STREAM_SKIPS))
def test_a_mapped_streams_exports_count_each_skipped_row_once(tmp_path, export):
    """The exports (and mixes) of a mapped stream first read its head to type its columns: the rows skipped there were
    counted, and listed, a second time (rows_read 8 of a 4-row file, skipped 4 of 2), breaking rows returned +
    skipped == rows_read."""
    sample = td.sample_files("ms_swift")["train"][0]
    good = [line for line in open(sample, encoding="utf-8") if line.strip()]
    bad = json.dumps({"tools": "[]", "messages": [{"role": "bogus", "content": "x"}]}) + "\n"
    data = tmp_path / "rows.jsonl"
    data.write_text(bad + good[0] + bad + "".join(good[1:]), encoding="utf-8")
    report = td.SkipReport(rows_path=str(tmp_path / "skipped.jsonl"))
    stream = td.load("ms_swift", data_files=str(data), split="train", streaming=True, on_error="skip",
                     report=report).map(td.short_call_ids)
    MAPPED_STREAM_SKIPS[export](stream, tmp_path)
    assert (report.rows_read, report.skipped) == (len(good) + 2, 2)
    listed = (tmp_path / "skipped.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["row"] for line in listed] == [0, 2]  # (rows counted from 0)


@pytest.mark.parametrize("fmt", ["arrow", "pandas"])
@pytest.mark.parametrize("source", ["nestful", "ms_swift", "llamafactory"])
def test_a_mapped_stream_formatted_as_tables_iterates_as_one_given_its_features(source, fmt):
    """ds.map(f).with_format("arrow") (or "pandas"), without features=, failed at its second row with Arrow's
    "Schema at index 1 was different": each row's table had types of its own. Iterated, its columns are typed
    as its exports type them, so it gives what the map given features=ds.features gives, and counts each row once."""
    report = td.SkipReport()
    stream = td.load(source, data_files=td.sample_files(source), split="train", streaming=True, report=report)
    typed = td.load(source, data_files=td.sample_files(source), split="train", streaming=True)
    typed = typed.map(td.short_call_ids, features=typed.features).with_format(fmt)
    mapped = stream.map(td.short_call_ids).with_format(fmt)
    batches, expected = list(mapped.iter(batch_size=2)), list(typed.iter(batch_size=2))
    assert len(batches) == len(expected) >= 2 and [str(b) for b in batches] == [str(b) for b in expected]
    assert report.rows_read == sum(len(b) for b in batches)
    assert [str(row) for row in mapped] == [str(row) for row in typed]  # row by row too
    if fmt == "arrow":
        assert batches[0].schema == expected[0].schema  # JSON leaves as the json extension type, not inferred


def test_a_mapped_streams_arrow_batches_are_one_table_each_and_resume_between_them():
    """The exact encoding of a mapped stream's rows made one-row tables, so each Arrow batch (behind to_list,
    to_pandas, to_json...) was a table of as many chunks, each cast alone: to_list of 9,000 mapped ms_swift rows
    took twice as long. A batch is one table now, its rows the same, and a state saved between batches resumes
    the rest."""
    def batches():
        stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train",
                         streaming=True).map(td.short_call_ids)
        return stream._resolve_features().with_format("arrow")

    whole = list(batches().iter(batch_size=2))
    assert len(whole) >= 3 and all(column.num_chunks == 1 for table in whole for column in table.columns)
    rows = [row for table in whole for row in table.to_pylist()]
    assert rows == [row for table in batches().iter(batch_size=1) for row in table.to_pylist()]  # row by row
    stream = batches()
    first = stream.iter(batch_size=2)
    next(first)
    state = stream.state_dict()
    rest = [row for table in first for row in table.to_pylist()]
    resumed = batches()
    resumed.load_state_dict(state)
    assert [row for table in resumed.iter(batch_size=2) for row in table.to_pylist()] == rest == rows[2:]


@pytest.mark.parametrize(("source", "split"), [("toolmind", "synthetic"), ("ms_swift", "train")])
def test_a_stream_mapped_with_the_readme_pair_features_exports_the_map_style_rows(source, split, tmp_path):
    """The README's prompt-completion map gives datasets.Features({**ds.features, "prompt": ..., "completion": ...}):
    plain Features holding exact leaves. On a stream its to_list() (and to_pandas(), with_format("arrow")) failed with
    Arrow's "Schema at index 1 was different", as a map without features= did."""
    files = td.sample_files(source)
    ds = td.load(source, data_files=files, split=split, cache_dir=str(tmp_path / "cache"))
    stream = td.load(source, data_files=files, split=split, streaming=True)
    features = datasets.Features({**stream.features, "prompt": stream.features["messages"],
                                  "completion": stream.features["messages"]})
    del features["messages"]

    def pairs(d):
        return d.map(lambda r: {"prompt": r["messages"][:-1], "completion": r["messages"][-1:]},
                     remove_columns=["messages"], features=features)

    expected = pairs(ds).to_list()
    assert len(expected) >= 2 and pairs(stream).to_list() == expected
    assert len(pairs(stream).to_pandas()) == len(expected)
    assert sum(t.num_rows for t in pairs(stream).with_format("arrow").iter(batch_size=2)) == len(expected)
