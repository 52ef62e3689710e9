"""``td.exact`` of a dataset whose JSON text another tool wrote (DuckDB, Polars, pyarrow: no leading-space mark on
text holding integers beyond 64 bits) decodes it exactly, and text that is not JSON is a typed error naming the
column, in both modes. Datasets loaded by ``td.load`` keep the fast decoders that trust the mark."""
from __future__ import annotations

import copy
import json
import pickle

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td
from tooluse_datasets.exact_features import ExactFeatures, ForeignExactFeatures
from tricky_values import bits, nestful_row_with

TEXTS = ['{"x": 123456789012345678901234567890}', '{"x": 0.30000000000000004}',
         '[18446744073709551616, -18446744073709551617, 5e-324, -0.0]']
EXPECTED = [{"x": 123456789012345678901234567890}, {"x": 0.30000000000000004},
            [18446744073709551616, -18446744073709551617, 5e-324, -0.0]]


def _parquet(tmp_path, texts):
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"j": pa.array(texts, pa.json_()), "n": list(range(len(texts)))}), path)
    return str(path)


@pytest.mark.parametrize("streaming", [False, True])
def test_exact_reads_unmarked_big_integers_of_other_writers_exactly(tmp_path, streaming):
    ds = datasets.load_dataset("parquet", data_files=_parquet(tmp_path, TEXTS), split="train", streaming=streaming,
                               cache_dir=str(tmp_path / "cache"))
    rows = [row["j"] for row in td.exact(ds)]
    assert [repr(v) for v in rows] == [repr(v) for v in EXPECTED]
    assert [type(v) for v in rows[2]] == [int, int, float, float]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("text, error", [(' {"x": NaN}', td.InvalidJsonError), ('{"x": 1e400}', td.JsonValueError)])
def test_exact_refuses_text_that_is_not_json_naming_the_column(tmp_path, streaming, text, error):
    ds = datasets.load_dataset("parquet", data_files=_parquet(tmp_path, [text]), split="train", streaming=streaming,
                               cache_dir=str(tmp_path / "cache"))
    with pytest.raises(error) as info:
        list(td.exact(ds))
    assert info.value.field == "j"


def test_exact_of_a_stream_whose_features_are_unknown_is_refused_saying_what_to_do(tmp_path):
    """A stream after map() has no features (nor one from_generator made without features=): exact() cannot know
    its JSON columns, and said so with datasets' bare "'NoneType' object is not iterable"."""
    plain = datasets.load_dataset("parquet", data_files=_parquet(tmp_path, TEXTS), split="train", streaming=True)
    for stream in (plain.map(lambda row: row), datasets.IterableDataset.from_generator(lambda: iter([{"j": 1}]))):
        assert stream.features is None
        with pytest.raises(ValueError, match=r"features.*unknown.*call exact\(\) before map\(\)"):
            td.exact(stream)
    # before map(), or with the features given to map(), it reads as usual
    mapped = td.exact(plain).map(lambda row: row, features=plain.features)
    assert [repr(r["j"]) for r in td.exact(mapped)] == [repr(v) for v in EXPECTED]


def test_foreign_decoding_survives_pickling_and_copies_and_td_load_keeps_the_fast_path(tmp_path):
    ds = td.exact(datasets.load_dataset("parquet", data_files=_parquet(tmp_path, TEXTS), split="train",
                                        cache_dir=str(tmp_path / "cache")))
    assert type(ds.features) is ForeignExactFeatures
    assert type(pickle.loads(pickle.dumps(ds.features))) is ForeignExactFeatures
    assert type(ds.features.copy()) is ForeignExactFeatures
    assert [repr(r["j"]) for r in ds.shuffle(seed=0).sort("n")] == [repr(v) for v in EXPECTED]
    loaded = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=str(tmp_path / "c2"))
    assert type(loaded.features) is ExactFeatures
    assert type(td.exact(loaded).features) is ExactFeatures


def test_decode_row_with_plain_features_reads_unmarked_big_integers_exactly():
    """decode_row with plain features (a row of someone's dataset) reads the text as td.exact of that dataset does;
    with the package's own ExactFeatures it trusts the mark."""
    plain = datasets.Features({"j": datasets.Json()})
    rows = [td.decode_row({"j": text}, plain)["j"] for text in TEXTS]
    assert [repr(v) for v in rows] == [repr(v) for v in EXPECTED]
    with pytest.raises(td.InvalidJsonError):
        td.decode_row({"j": '{"x": NaN}'}, plain)


def test_decode_row_leaves_the_raw_row_as_it_was(tmp_path):
    """decode_row gives a new row: the raw row handed to it (its messages' structs, the JSON text in them) is not
    decoded in place, so it can be decoded again, with any features."""
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=str(tmp_path / "c"))
    raw_rows = ds.data.to_pylist()
    originals = copy.deepcopy(raw_rows)
    for i, raw in enumerate(raw_rows):
        for features in (ds.features, datasets.Features(ds.features), ds.features):
            assert td.decode_row(raw, features) == ds[i]
        assert raw == originals[i]


@pytest.mark.parametrize("text", ['{"x": 1', "NaN", ' {"x": NaN}', ' [-Infinity, 18446744073709551616]'])
def test_td_load_features_refuse_stored_text_that_is_not_json_naming_the_column(tmp_path, text):
    """Text in a JSON column of a td.load dataset (whose ExactFeatures trust the mark) that is not JSON, in a raw row
    given to decode_row or in the table itself: an InvalidJsonError naming the column, as with plain features, not
    orjson's bare error nor a NaN read from marked text."""
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=str(tmp_path / "c"))
    row = ds.data.slice(0, 1).to_pylist()[0]
    for features in (ds.features, datasets.Features(ds.features)):
        with pytest.raises(td.InvalidJsonError) as info:
            td.decode_row({**row, "meta": text}, features)
        assert info.value.field == "meta"
    table = ds.data.table.set_column(ds.data.column_names.index("meta"), "meta", pa.array([text] * len(ds), pa.json_()))
    with pytest.raises(td.InvalidJsonError) as info:
        list(datasets.Dataset(table, info=ds.info))
    assert info.value.field == "meta"


def _ms_swift_file_with_marked_looking_strings(tmp_path) -> tuple[str, str, str]:
    """A real ms-swift row whose tool description and call argument are strings starting with the mark character
    (a space) and a long run of digits: stored text like a marked integer beyond 64 bits, were it not quoted."""
    import json

    from conftest import shared_data

    row = json.loads(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()[0])
    description, city = " 123456789012345678901234", " 98765432109876543210987"
    tools = json.loads(row["tools"])
    tools[0]["function"]["description"] = description
    row["tools"] = json.dumps(tools)
    call = json.loads(row["messages"][1]["content"])
    call["arguments"]["city"] = city
    row["messages"][1]["content"] = json.dumps(call)
    path = tmp_path / "marked.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return str(path), description, city


def test_strings_starting_with_the_mark_character_round_trip_map_style_and_streamed(tmp_path):
    path, description, city = _ms_swift_file_with_marked_looking_strings(tmp_path)
    mapped = td.load("ms_swift", data_files=path, split="train", cache_dir=str(tmp_path / "c"))
    streamed = td.load("ms_swift", data_files=path, split="train", streaming=True)
    raw_streamed = next(streamed.with_format("arrow").iter(batch_size=1)).to_pylist()  # td.load's own Arrow path
    for rows in (list(mapped), list(streamed), [td.decode_row(r, mapped.features) for r in mapped.data.to_pylist()],
                 [td.decode_row(r, streamed.features) for r in raw_streamed]):
        (row,) = rows
        assert row["tools"][0]["function"]["description"] == description
        assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"city": city}


# Stored text starting with the mark, as no writer of the package writes it: each is a typed error naming the
# column (the marked path once read 1e400 as inf, a lone surrogate as a str, and raised RecursionError when deep).
# (1,000 levels with an integer beyond 64 bits: orjson reads them, the integer sends the text to Python's json,
# which reads it exactly where its recursion allows (3.13) and is a typed error where it does not (3.10-3.12))
CRAFTED_MARKED_TEXTS = [(" 1e400", td.JsonValueError), (' {"a": [-1e400]}', td.JsonValueError),
                        (' "\\ud800"', td.InvalidJsonError), (" " + "[" * 100_000 + "]" * 100_000, td.InvalidJsonError),
                        (" " + "[" * 1_000 + "18446744073709551616" + "]" * 1_000, td.JsonValueError)]


def _exact_or_refused(decode, text: str, error: type) -> None:
    """``decode()`` raises ``error`` naming the meta column, or, for the deep big integer that Python's json reads
    where its recursion allows, gives the value exactly."""
    try:
        value = decode()
    except error as exc:
        assert exc.field == "meta"
        return
    assert "18446744073709551616" in text, "decoded what must be refused"
    for _ in range(1_000):
        (value,) = value if isinstance(value, list) else value["meta"]
    assert value == 18446744073709551616 and type(value) is int


@pytest.mark.parametrize("text, error", CRAFTED_MARKED_TEXTS, ids=["1e400", "-1e400 inside", "lone surrogate",
                                                                    "deeper than orjson reads", "deep big integer"])
def test_marked_text_is_read_exactly_or_refused_with_a_typed_error(tmp_path, text, error):
    path, _, _ = _ms_swift_file_with_marked_looking_strings(tmp_path)
    mapped = td.load("ms_swift", data_files=path, split="train", cache_dir=str(tmp_path / "c"))
    streamed = td.load("ms_swift", data_files=path, split="train", streaming=True)
    (raw_mapped,) = mapped.data.to_pylist()
    (raw_streamed,) = next(streamed.with_format("arrow").iter(batch_size=1)).to_pylist()
    for raw, features in ((raw_mapped, mapped.features), (raw_streamed, streamed.features)):
        _exact_or_refused(lambda: td.decode_row({**raw, "meta": text}, features), text, error)
    table = mapped.data.table.set_column(mapped.data.column_names.index("meta"), "meta", pa.array([text], pa.json_()))
    _exact_or_refused(lambda: list(datasets.Dataset(table, info=mapped.info))[0], text, error)


@pytest.mark.parametrize("streaming", [False, True])
def test_exact_json_leaves_in_plain_features_read_unmarked_big_integers_exactly(tmp_path, streaming):
    """``load_dataset(..., features=ds.features)`` (and ``datasets.Features(ds.features)``) keep the ExactJson leaves
    in plain Features. A leaf read alone trusted the mark: another writer's 123456789012345678901234567890 came back
    1.2345678901234568e+29, without a word."""
    given = ExactFeatures({"j": datasets.Json(), "n": datasets.Value("int64")})
    plain = datasets.Features(given)
    assert not isinstance(plain, ExactFeatures)
    assert [repr(plain.decode_example({"j": text, "n": 0})["j"]) for text in TEXTS] == [repr(v) for v in EXPECTED]
    ds = datasets.load_dataset("parquet", data_files=_parquet(tmp_path, TEXTS), split="train", streaming=streaming,
                               features=given, cache_dir=str(tmp_path / "cache"))
    assert [repr(row["j"]) for row in ds] == [repr(v) for v in EXPECTED]


@pytest.mark.parametrize("reader", ["parquet", "json"])
def test_from_parquet_and_from_json_with_exact_features_read_text_as_exact_does_built_or_cached(tmp_path, reader):
    """Dataset.from_parquet/from_json(..., features=ds.features) gave the package's own ExactFeatures, which trust the
    mark (another writer's 123456789012345678901234567890 came back 1.2345678901234568e+29), and read from
    datasets' cache the second time, plain Features (rows with every key: images: [], tool_calls: [])."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(nestful_row_with([0.30000000000000004, -0.0, 5e-324], f"s{i}")) + "\n"
                            for i in range(2)), encoding="utf-8")
    ds = td.load("nestful", data_files=str(data), split="train", cache_dir=str(tmp_path / "c"))
    exported = str(tmp_path / f"out.{reader}")
    getattr(ds, f"to_{reader}")(exported)
    for _ in range(2):  # built, then read from the cache
        back = getattr(datasets.Dataset, f"from_{reader}")(exported, features=ds.features,
                                                            cache_dir=str(tmp_path / "c2"))
        assert type(back.features) is ForeignExactFeatures
        assert list(back)[0].keys() == list(ds)[0].keys()
        if reader == "parquet":
            assert bits(list(back)) == bits(list(ds))
    given = ExactFeatures({"j": datasets.Json(), "n": datasets.Value("int64")})
    for _ in range(2):
        back = datasets.Dataset.from_parquet(_parquet(tmp_path, TEXTS), features=given, cache_dir=str(tmp_path / "c3"))
        assert [repr(row["j"]) for row in back] == [repr(v) for v in EXPECTED]


@pytest.mark.parametrize("prompt", [[1, {"a": 1}], [None, {"role": "user", "content": "hi"}],
                                    [["role", "content"], {"a": 1}]], ids=["a number", "a null", "a list"])
def test_a_mapped_prompt_column_of_other_values_reads_back_as_written(cache_dir, prompt):
    """A map of unified rows writing its own ``prompt`` column (a name TRL reads conversations from): its items are
    decoded in the chat shape where they are messages, and given back as they are where they are not. A number,
    a null or a list among them was a bare TypeError ('int' object is not iterable) on every read of the row."""
    ds = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)
    mapped = ds.select(range(2)).map(lambda row: {"prompt": prompt})
    assert "prompt" in mapped.features.chat_columns
    rows = list(mapped)
    assert [row["prompt"] for row in rows] == [prompt, prompt]
    assert [row["messages"] for row in rows] == [row["messages"] for row in ds.select(range(2))]


@pytest.mark.parametrize("columns", [None, ["prompt", "completion", "tools"]], ids=["every column", "no media"])
def test_a_prompt_completion_map_saved_and_read_back_reads_as_the_map_gave_it_after_exact(cache_dir, tmp_path,
                                                                                           columns):
    """A prompt-completion map made without ``features=`` (columns typed by inference: ``Json``, or structs one row
    per write), saved and read back with ``load_from_disk``: ``td.exact`` gave every text row ``images: []`` (TRL
    then takes the dataset for vision data) and answers without reasoning ``reasoning_content: None``."""
    parts = [td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir),
             td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)]
    # (final answers: a call turn after them fails an inferred map written one row at a time, as the README says)
    ds = datasets.concatenate_datasets(parts).filter(
        lambda row: row["messages"][-1]["role"] == "assistant" and not row["messages"][-1].get("tool_calls"))
    for writer_batch_size in (1000, 1):
        pairs = ds.map(lambda r: {"prompt": r["messages"][:-1], "completion": r["messages"][-1:]},
                       remove_columns=["messages"], writer_batch_size=writer_batch_size)
        if columns:
            pairs = pairs.select_columns(columns)
        saved = str(tmp_path / f"pairs{writer_batch_size}")
        pairs.save_to_disk(saved)
        back = td.exact(datasets.load_from_disk(saved))
        rows = list(back)
        assert rows == list(pairs), writer_batch_size
        assert any(row.get("images") for row in rows) == (columns is None)
        assert any("images" not in row and "reasoning_content" not in row["completion"][0] for row in rows)


def test_exact_keeps_the_format_a_dataset_had(cache_dir, tmp_path):
    """A saved dataset read back and formatted before ``td.exact`` (``columns=``, numpy, a transform) lost its format
    there: every column came back, as Python values, the transform not applied."""
    ds = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)
    ds.save_to_disk(str(tmp_path / "saved"))
    plain = datasets.load_from_disk(str(tmp_path / "saved"))
    columns = td.exact(plain.select_columns(["id", "meta"]).with_format(columns=["meta"]))
    assert [row["meta"] for row in columns] == [row["meta"] for row in ds] and set(columns[0]) == {"meta"}
    assert td.exact(plain.with_format("numpy", columns=["id"]))[:2]["id"].tolist() == ds["id"][:2]
    transformed = td.exact(plain.with_transform(lambda batch: {"n": [len(m) for m in batch["messages"]]}))
    assert transformed[:] == {"n": [len(row["messages"]) for row in ds]}


def test_decode_row_refuses_a_dataset_given_for_the_row_or_the_features():
    """A dataset given as the row came back as a deep copy of the whole dataset; given as the features, datasets'
    bare "dictionary update sequence element #0 has length 7; 2 is required"."""
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train")
    raw = ds.with_format("arrow")[:1].to_pylist()[0]
    assert td.decode_row(raw, ds.features) == ds[0]
    assert td.decode_row(raw, dict(ds.features))["messages"] == ds[0]["messages"]  # (features as a plain dict too)
    for row, features, got in [(ds, ds.features, "ExactDataset and ExactFeatures"), (raw, ds, "dict and ExactDataset"),
                               (ds.with_format("arrow")[:1], ds.features, "Table and ExactFeatures")]:
        with pytest.raises(TypeError, match=rf"^decode_row takes one row of storage values .* got {got}$"):
            td.decode_row(row, features)
