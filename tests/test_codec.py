"""The exact JSON codec: values come back bit-identical and with the same type, on both load paths."""
from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import uuid

import numpy
import pyarrow as pa
import pytest
from datasets import Dataset, Features, Json, List, Value

import tooluse_datasets as td
from tooluse_datasets.arrow_rows import RowEncoder
from tooluse_datasets.codec import dumps, loads
from tooluse_datasets.exact_features import ExactFeatures
from tricky_values import bits, nestful_row_with

# Values the issue names, plus the ones datasets' Json() gets wrong (see specs/hf_datasets.md §3.1).
EXACT_VALUES = [
    0.3,
    1e-7,
    3.141592653589793,
    2**63 - 1,
    -(2**63),
    -(2**63) - 1,
    -(2**63) - 1024,
    2**64 - 1,
    2**64,
    2**70,
    -(2**80) - 7,
    "123",
    "null",
    "true",
    '{"a": 1}',
    "héllo — 世界 🚀 \u0000 \n",
    -0.0,
    5e-324,
    1.7976931348623157e308,
    0.1 + 0.2,
    [1, 2.5, "x", None, True, {"k": [0.3]}],
    {"z": 1, "a": 2, "m": {"y": 0.30000000000000004}},
]


@pytest.mark.parametrize("value", EXACT_VALUES, ids=lambda v: repr(v)[:30])
def test_dumps_loads_round_trip_is_bit_exact(value):
    assert bits(loads(dumps(value))) == bits(value)


def test_big_integers_are_kept_exactly_where_orjson_would_round_them():
    text = '{"big": 1180591620717411303424, "neg": -1208925819614629174706183, "small": 7}'
    value = loads(text)
    assert value == {"big": 2**70, "neg": -(2**80) - 7, "small": 7}
    assert isinstance(value["big"], int)
    # A long digit run inside a string is not a number: no fallback needed, value unchanged.
    assert loads('"12345678901234567890123"') == "12345678901234567890123"


def test_integers_beyond_a_doubles_range_are_read_exactly_and_out_of_range_floats_refused():
    huge = 10**400 + 7  # orjson refuses the literal ("number is infinity when parsed as double")
    assert loads(f'{{"n": [{huge}, -{huge}, 1.5]}}') == {"n": [huge, -huge, 1.5]}
    assert loads(dumps({"n": huge})) == {"n": huge}
    for bad in (f'[{huge}, 1e400]', f'[{huge}, NaN]', f'[{huge}, -Infinity]', f'[{huge}', f'[{huge}, "\\ud800"]'):
        with pytest.raises(ValueError):
            loads(bad)


def test_integers_longer_than_python_writes_are_a_typed_error_without_advice_to_change_the_process():
    """Python reads and writes integer text of at most sys.get_int_max_str_digits() digits (4,300 by default);
    its ValueError tells the caller to raise that process-wide limit, which a library must not do."""
    import sys

    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    if not limit:
        pytest.skip("this interpreter has no limit on integer text (Python < 3.10.7, or the limit turned off)")
    assert loads(dumps({"n": 10**(limit - 1)})) == {"n": 10**(limit - 1)}
    with pytest.raises(td.JsonValueError, match=f"too long to write as text .more than {limit:,} digits") as written:
        dumps({"n": 10**(limit + 700)})
    with pytest.raises(td.JsonValueError, match=f"too long to read .*{limit + 700:,} digits.*at most {limit:,}") as read:
        loads('{"n": 1' + "0" * (limit + 699) + "}")
    assert "set_int_max_str_digits" not in str(written.value) + str(read.value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), {"x": [1, float("nan")]}])
def test_non_finite_numbers_are_refused_not_turned_into_null(bad):
    with pytest.raises(td.JsonValueError, match="NaN and infinities are refused"):
        dumps(bad)


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize("bad", [{1: "int key"}, {"s": {1, 2}}, {"b": b"bytes"}, object(),
                                 {"big": 10**30, 1: "int key"}, {"big": 10**30, "s": {1, 2}},
                                 {"when": datetime.datetime(2020, 1, 2)}, [datetime.date(2020, 1, 2)],
                                 {"big": 10**30, "when": datetime.time(3, 4)}, {"point": _Point(1)}])
def test_non_json_values_are_refused_with_a_typed_error(bad):
    with pytest.raises(td.JsonValueError):
        dumps(bad)


@pytest.mark.parametrize("bad, where", [({"extra": {"blob": b"x"}}, r"bytes at \$\.extra\.blob"),
                                        ([1, {"s": {1}}], r"set at \$\[1\]\.s"),
                                        ({"p": _Point(1)}, r"_Point at \$\.p")])
def test_a_non_json_value_is_named_by_where_it_is(bad, where):
    """orjson says only "Type is not JSON serializable: bytes": a binary Parquet column kept in ``meta`` was
    refused on the field ``meta`` without naming the column."""
    with pytest.raises(td.JsonValueError, match=where + " is not a JSON value"):
        dumps(bad)


@pytest.mark.parametrize("value", [[numpy.float64(0.5)], [numpy.float64(0.5), 2**70], {"a": [2**70, numpy.float32(1)]}],
                         ids=["alone", "with-big-int", "nested"])
def test_a_numpy_float_is_refused_by_where_it_is_with_or_without_an_integer_beyond_64_bits(value):
    """orjson refuses a float subclass ("Type is not JSON serializable: numpy.float64", naming no place), while the
    stdlib path (a value also holding an integer beyond 64 bits) wrote it: stored or refused by its neighbour."""
    with pytest.raises(td.JsonValueError, match=r"float(64|32) at \$(\[0\]|\.a\[1\]) is not a JSON value"):
        dumps(value)


class _Colour(enum.Enum):
    RED = "red"
    ID = uuid.UUID(int=7)
    PAIR = (1, 2)
    NAN = math.nan


@pytest.mark.parametrize("value", [uuid.UUID("12345678-1234-5678-1234-567812345678"), _Colour.RED, _Colour.ID,
                                   _Colour.PAIR, {"k": [_Colour.RED, uuid.UUID(int=1)]}],
                         ids=["uuid", "enum", "enum-of-uuid", "enum-of-tuple", "nested"])
def test_uuids_and_enums_are_written_alike_with_or_without_an_integer_beyond_64_bits(value):
    """orjson writes a UUID as its text and an enum member as its value; the stdlib path (a value that also holds
    an integer beyond 64 bits) refused them, so one value was stored or refused depending on its neighbour."""
    alone = loads(dumps(value))
    assert alone == json.loads(json.dumps(value, default=lambda o: str(o) if isinstance(o, uuid.UUID) else o.value))
    assert loads(dumps([value, 2**70])) == [alone, 2**70]


@pytest.mark.parametrize("value", [_Colour.NAN, {"k": [_Colour.NAN]}, [_Colour.NAN, 2**70]],
                         ids=["alone", "nested", "with-big-int"])
def test_an_enum_whose_value_is_nan_is_refused_not_written_as_null(value):
    with pytest.raises(td.JsonValueError, match="NaN and infinities are refused"):
        dumps(value)


def test_nulls_are_fine_alongside_the_non_finite_check():
    assert loads(dumps({"a": None, "b": [None]})) == {"a": None, "b": [None]}


FEATURES = Features({"id": Value("string"), "args": List(Json()), "meta": Json()})


def test_row_encoder_names_the_column_of_an_unstorable_value():
    encoder = RowEncoder(FEATURES)
    with pytest.raises(td.JsonValueError) as info:
        encoder.encode_row({"id": "a", "args": [], "meta": {"x": math.nan}})
    assert info.value.field == "meta"


def test_exact_features_decode_where_datasets_json_is_off_by_one_ulp():
    table = td.arrow_rows.rows_to_table([{"id": "a", "args": [0.3, "123"], "meta": {"pi": 3.141592653589793}}], FEATURES)
    plain = Dataset(table)
    datasets_decode = td.exact_features._DATASETS_WRITER["decode_example"]
    assert datasets_decode(Json(), "[0.3]")[0] != 0.3  # datasets' own decoder (ujson) is one ULP off here
    assert bits(plain[0]["args"]) == bits([0.3, "123"])  # which importing the package replaced
    exact = td.exact(plain)
    assert isinstance(exact.features, ExactFeatures)
    row = exact[0]
    assert bits(row["args"]) == bits([0.3, "123"])
    assert bits(row["meta"]) == bits({"pi": 3.141592653589793})
    # The swap survives the operations users chain, and map still sees exact values.
    assert exact.shuffle(seed=0).select([0])[0]["args"][0] == 0.3
    assert isinstance(exact.filter(lambda r: True).features, ExactFeatures)
    mapped = exact.map(lambda r: {"first": repr(r["args"][0])})
    assert mapped[0]["first"] == "0.3"
    assert next(iter(exact.to_iterable_dataset()))["args"][0] == 0.3


@pytest.mark.parametrize("streaming, num_proc", [(False, None), (True, None), (True, 2)],
                         ids=["map-style", "streaming", "streaming-2-workers"])
def test_exact_values_survive_both_load_paths(tmp_path, cache_dir, streaming, num_proc):
    values = [v for v in EXACT_VALUES]
    # Written with the stdlib (which writes big ints exactly) to show the reader keeps them too; two files, so
    # that worker processes (num_proc=2) convert a shard each and hand the rows over.
    paths = []
    for name in ("exact-a.jsonl", "exact-b.jsonl"):
        path = tmp_path / name
        path.write_text(json.dumps(nestful_row_with(values), ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(str(path))
    ds = td.load("nestful", data_files=paths, split="train", streaming=streaming, cache_dir=cache_dir,
                 num_proc=num_proc)
    for row in ds:
        got = [c["function"]["arguments"]["x"] for c in row["messages"][1]["tool_calls"]]
        assert bits(got) == bits(values)
        assert bits(row["meta"]["gold_answer"]) == bits(values[-1])
    raw = next(iter(td.load("nestful", "raw", data_files=paths, split="train", streaming=streaming,
                            cache_dir=cache_dir, num_proc=num_proc)))
    assert bits([c["arguments"]["x"] for c in raw["output"]]) == bits(values)


def test_nan_in_source_data_is_a_typed_error_or_a_counted_skip(tmp_path, cache_dir):
    path = tmp_path / "nan.jsonl"
    good = json.dumps(nestful_row_with([1.5], "ok"))
    bad = json.dumps(nestful_row_with([float("nan")], "nan"))  # the stdlib writes NaN, which is not JSON
    path.write_text(good + "\n" + bad + "\n")
    with pytest.raises(td.ToolUseDataError) as info:
        td.load("nestful", data_files=str(path), split="train", cache_dir=cache_dir)
    assert info.value.row == 1 and str(path) in str(info.value)
    report = td.SkipReport()
    ds = td.load("nestful", data_files=str(path), split="train", on_error="skip", report=report,
                 cache_dir=cache_dir + "-skip")
    assert [r["meta"]["sample_id"] for r in ds] == ["ok"]
    assert report.skipped == 1 and report.rows_read == 2


@pytest.mark.parametrize("value", EXACT_VALUES, ids=lambda v: repr(v)[:30])
def test_stored_text_decoder_is_exact_and_big_ints_are_marked(value):
    from tooluse_datasets.codec import BIG_INT_MARK, loads_stored
    text = dumps(value)
    assert bits(loads_stored(text)) == bits(value)
    holds_big_int = any(
        isinstance(v, int) and not isinstance(v, bool) and not (-(2**63) <= v <= 2**64 - 1)
        for v in (value if isinstance(value, list) else [value]))
    assert text.startswith(BIG_INT_MARK) == holds_big_int
    assert json.loads(text) == value  # still plain JSON for every other reader


@pytest.mark.parametrize("ensure_ascii", [False, True])
@pytest.mark.parametrize("value", EXACT_VALUES + [
    {"name": "f", "arguments": {"q": "caf\u00e9 \U0001f680 \x7f \x1f \\ \"", "n": [1e400, -1e400, 1e-320]}},
    [{"role": "user", "content": "\u2028\u2029 \ud7ff \ue000 \uffff"}],
], ids=lambda v: repr(v)[:30])
def test_python_json_text_writes_what_json_dumps_writes(value, ensure_ascii):
    # Row texts are compared with this writer to know whether they write back byte for byte.
    from tooluse_datasets.codec import python_json_text
    expected = json.dumps(value, ensure_ascii=ensure_ascii)
    assert python_json_text(value, ensure_ascii) == expected
    assert python_json_text(value, ensure_ascii, check_circular=True) == expected


def test_python_json_text_with_the_cycle_check_refuses_a_value_that_contains_itself():
    from tooluse_datasets.codec import python_json_text
    looped: dict = {"a": []}
    looped["a"].append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        python_json_text(looped, check_circular=True)


@pytest.mark.parametrize("batched", [False, True], ids=["row-map", "batched-map"])
def test_map_writes_json_values_back_exactly(tmp_path, batched):
    """A map that reads a Json column writes it back through datasets' Arrow writer, which by itself keeps 10
    significant digits (0.30000000000000004 became 0.3, 5e-324 4.940656458e-324) and quoted JSON text holding
    an integer beyond 64 bits as a plain string."""
    import json

    arguments = {f"v{i}": v for i, v in enumerate(EXACT_VALUES)}
    row = {"messages": [{"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                            "name": "f", "arguments": json.dumps(arguments)}}]},
                        {"role": "tool", "content": "1"}, {"role": "assistant", "content": "done"}]}
    path = tmp_path / "edge.jsonl"
    path.write_text(json.dumps(row) + "\n")
    ds = td.load("ms_swift", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))

    def count(r):
        return {"n": [len(m) for m in r["messages"]] if batched else len(r["messages"])}

    mapped = ds.map(count, batched=batched)
    for rows in (mapped, td.exact(mapped)):
        stored = rows[0]["messages"][1]["tool_calls"][0]["function"]["arguments"]
        assert bits(stored) == bits(arguments)


def test_plain_json_columns_decode_exactly_after_save_to_disk(tmp_path):
    """load_from_disk gives plain datasets Json features (no td.exact): their decoding is exact too. datasets'
    own raised "Value is too big!" on an integer beyond 64 bits and read 0.3 one ULP off."""
    import datasets

    values = {f"v{i}": v for i, v in enumerate(EXACT_VALUES)}
    table = td.arrow_rows.rows_to_table([{"id": "a", "args": list(values.values()), "meta": values}], FEATURES)
    Dataset(table).save_to_disk(str(tmp_path / "disk"))
    row = datasets.load_from_disk(str(tmp_path / "disk"))[0]
    assert bits(row["meta"]) == bits(values)
    assert bits(row["args"]) == bits(list(values.values()))


def test_plain_json_text_written_by_others_keeps_big_integers_exact(tmp_path):
    """JSON text datasets' writer keeps as it is, and Json columns of files we did not write, carry no mark of
    ours: an integer beyond 64 bits in them is still read exactly (orjson alone would read it as a float)."""
    import pyarrow.parquet as pq

    text = '{"id": 123456789012345678901234567890, "x": 0.30000000000000004}'
    mapped = Dataset.from_dict({"x": [1]}).map(lambda r: {"j": text}, features=Features({"x": Value("int64"),
                                                                                         "j": Json()}))
    assert bits(mapped[0]["j"]) == bits({"id": 123456789012345678901234567890, "x": 0.30000000000000004})
    path = tmp_path / "others.parquet"
    pq.write_table(pa.table({"j": pa.array([text], pa.json_())}), path)
    assert Dataset.from_parquet(str(path))[0]["j"]["id"] == 123456789012345678901234567890



def test_json_text_too_deep_for_our_writer_is_stored_as_it_is_like_any_json_text():
    """JSON text a map writes back is stored as it is (datasets' rule), written anew only to mark an integer beyond
    64 bits: text nesting deeper than our writer writes, holding such an integer, stopped the map with a
    JsonValueError instead. It is stored as it is, as the writer's last step (cast_storage) already kept it."""
    text = "[" * 300 + "12345678901234567890123" + "]" * 300
    mapped = Dataset.from_dict({"x": [1]}).map(lambda r: {"j": text}, features=Features({"x": Value("int64"),
                                                                                         "j": Json()}))
    assert mapped.data.column("j").to_pylist() == [text]
    value, depth = mapped[0]["j"], 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert (depth, value) == (300, 12345678901234567890123)

def test_one_value_json_cannot_hold_leaves_the_others_of_its_column_exact():
    """NaN is stored as null, as datasets' own writer stores it; the values beside it stay exact."""
    column = Dataset.from_dict({"x": [0.30000000000000004, 1 / 3, math.nan]}).cast_column("x", Json())
    assert column.data.column("x").to_pylist() == ["0.30000000000000004", "0.3333333333333333", "null"]
    mapped = Dataset.from_dict({"i": [0]}).map(lambda r: {"j": {"nan": math.nan, "x": 0.30000000000000004}},
                                              features=Features({"i": Value("int64"), "j": Json()}))
    assert mapped.data.column("j").to_pylist() == ['{"nan":null,"x":0.30000000000000004}']


def test_plain_json_columns_built_from_python_values_store_them_exactly(tmp_path):
    """Dataset.from_list / from_dict / from_generator with features encode each value with Json.encode_example,
    whose own version (pandas' ujson) keeps 10 significant digits: 3.141592653589793 became 3.1415926536, -0.0
    became 0.0. Rows rebuilt with td.UNIFIED_FEATURES (a stream collected into a Dataset) went that way."""
    import datasets

    values = {f"v{i}": v for i, v in enumerate(EXACT_VALUES)}
    features = Features({"v": Json()})
    built = [
        Dataset.from_list([{"v": values}], features=features),
        Dataset.from_dict({"v": [values]}, features=features),
        Dataset.from_generator(lambda: iter([{"v": values}]), features=features, cache_dir=str(tmp_path / "gen")),
    ]
    for ds in built:
        assert bits(ds[0]["v"]) == bits(values)
        assert bits(td.exact(ds)[0]["v"]) == bits(values)
    # text follows datasets' rule: JSON text is stored as it is, other text as a JSON string
    texts = Dataset.from_dict({"v": ['{"x": 0.30000000000000004}', "not json"]}, features=features)
    assert bits([texts[0]["v"], texts[1]["v"]]) == bits([{"x": 0.30000000000000004}, "not json"])

    row = td.complete_row(next(iter(td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train",
                                            cache_dir=str(tmp_path / "cache")))))
    row["meta"] = values
    rebuilt = datasets.Dataset.from_list([row], features=td.UNIFIED_FEATURES)
    assert bits(td.exact(rebuilt)[0]["meta"]) == bits(values)


@pytest.mark.parametrize("value", [{"s": "\udc00"}, {"big": 2**70, "s": "\udc00"}, {"big": 2**70, "\ud800": 1},
                                   [2**70, ["\ud83d"]]], ids=["alone", "with-big-int", "key", "nested"])
def test_a_lone_surrogate_is_refused_with_or_without_an_integer_beyond_64_bits(value):
    """orjson refuses a string that is not UTF-8 text; the stdlib, which writes values holding an integer beyond
    64 bits, wrote it as it is, and the text then failed where it was stored or read."""
    with pytest.raises(td.JsonValueError, match="surrogate"):
        dumps(value)


def test_ms_swift_arguments_with_a_big_integer_and_a_lone_surrogate_are_a_skip_naming_the_field(tmp_path, cache_dir):
    tools = json.dumps([{"type": "function", "function": {"name": "f", "description": "d",
                                                          "parameters": {"type": "object", "properties": {}}}}])
    # a Python literal (ms-swift reads one where the text is not JSON): JSON text refuses the escape itself
    arguments = "{'big': 123456789012345678901234567890, 's': '\\udc00'}"
    row = {"tools": tools, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
                                                             "function": {"name": "f", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "done"}]}
    path = tmp_path / "surrogate.jsonl"
    path.write_text(json.dumps(row) + "\n")
    for streaming in (False, True):
        report = td.SkipReport()
        ds = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", report=report,
                     streaming=streaming, cache_dir=cache_dir)
        assert list(ds) == []
        assert list(report.by_reason) == ["InvalidValueError:messages[1].tool_calls[0].function.arguments"]


def test_each_patch_into_datasets_wraps_datasets_own_function_once():
    """The patches into datasets (exact features kept by merges, mixes and column operations, a stream's
    remove_columns and rename_columns, take stopping at n, the row filter noting its state, a step over rows sharing
    skip reports among nodes, add_item encoding the item) are installed once per process:
    installing one again keeps the installed patch, never a patch of the patch."""
    from datasets import IterableDataset
    from datasets.arrow_writer import ArrowWriter
    from datasets.builder import DatasetBuilder
    from datasets.info import DatasetInfo
    from datasets.formatting.polars_formatter import PolarsFeaturesDecoder
    from datasets.io.json import JsonDatasetWriter
    from datasets.iterable_dataset import (FilteredExamplesIterable, MappedExamplesIterable, StepExamplesIterable,
                                           TakeExamplesIterable)
    from datasets.packaged_modules.generator.generator import Generator

    from tooluse_datasets import datasets_patches, json_export, node_share, resume_state, shuffle_resume, streaming
    from tooluse_datasets.validation import filtering

    def installed():
        return {"_keeps_exact_features": [DatasetInfo.from_merge.__func__, Dataset.select_columns,
                                          IterableDataset.cast, DatasetBuilder.as_dataset,
                                          DatasetBuilder.as_streaming_dataset],
                "_selects_the_rest": [IterableDataset.remove_columns],
                "_stops_at_n": [TakeExamplesIterable.__iter__],
                "_notes_counted": [FilteredExamplesIterable._init_state_dict],
                "_shares_reports": [StepExamplesIterable.__init__],
                "_encodes_the_item": [Dataset.add_item], "_renames_absent_media": [IterableDataset.rename_columns],
                "_leaves_absent_media": [IterableDataset.select_columns],
                "_reads_absent_media": [IterableDataset.__getitem__],
                "_hands_absent_media": [IterableDataset.map.__wrapped__, IterableDataset.filter.__wrapped__],
                "_types_mapped_rows_for_tables": [IterableDataset.map, IterableDataset.filter],
                "_refuses_non_finite_values": [MappedExamplesIterable.__init__],
                "_names_refused_rows": [MappedExamplesIterable.__iter__],
                "_takes_decoded_rows": [Dataset.from_list.__func__],
                "_checks_a_streams_state": [IterableDataset.load_state_dict],
                "_warns_of_the_shuffle_buffer": [IterableDataset.load_state_dict.__wrapped__],
                "_writes_exact_json": [JsonDatasetWriter._batch_json],
                "_keeps_json_text": [PolarsFeaturesDecoder.__init__],
                "_types_tables": [IterableDataset.to_list, IterableDataset.to_json],
                "_names_the_row": [Generator._generate_examples, ArrowWriter._write_batch, Dataset._map_single]}

    before = installed()
    for install in (datasets_patches._install_merged_info_features, datasets_patches._install_column_operations_keeping_features,
                    streaming._install_take_that_stops_at_n, filtering._install_filter_that_notes_counted,
                    node_share.install, datasets_patches._install_add_item_encoding_the_item,
                    datasets_patches._install_from_list_taking_decoded_rows, shuffle_resume.install,
                    resume_state.install, json_export._install_exact_to_json,
                    json_export._install_polars_format_keeping_json_text,
                    datasets_patches._install_file_builders_reading_foreign_text,
                    datasets_patches._install_stream_tables_encoding_decoded_rows,
                    datasets_patches._install_generated_rows_raising_typed_errors,
                    datasets_patches._install_map_writer_naming_rows,
                    datasets_patches._install_stream_maps_refusing_non_finite_values,
                    datasets_patches._install_stream_maps_of_tables_typing_mapped_rows):
        install()
    assert installed() == before
    for mark, patches in before.items():
        for patch in patches:
            assert getattr(patch, mark) and not getattr(patch.__wrapped__, mark, False)
            assert patch.__name__ == patch.__wrapped__.__name__
            assert datasets_patches.patched_once(patch, lambda *args: None, mark) is patch


def test_reloading_the_exact_writer_keeps_datasets_own_json_functions_under_its_patches():
    """Reloaded (``importlib.reload``, a notebook's autoreload), the module installing the exact Json writer took its
    own installed patches for datasets' functions: the fallback to datasets' own for text that is not JSON
    (``NaN``, ``not json`` in a plain ``Json()`` column) called the patch back, a RecursionError. (In a process of
    its own: a reload makes new feature classes, which the rest of this session must not see.)"""
    import subprocess
    import sys

    script = """
import importlib
import datasets.arrow_writer, datasets.utils.json
from datasets import Json
from tooluse_datasets import exact_features
importlib.reload(exact_features)
assert Json().decode_example("NaN") is None  # (datasets' way)
assert datasets.utils.json.json_decode_field("not json", []) == "not json"
assert all(f.__module__.startswith("datasets.") for f in exact_features._DATASETS_WRITER.values())
assert datasets.arrow_writer.json_encode_field is exact_features._exact_json_encode_field
assert Json().decode_example('{"x": 0.30000000000000004}') == {"x": 0.30000000000000004}
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_patched_datasets_functions_take_their_arguments_by_name_too(cache_dir):
    """The wrappers handed their hook only the arguments given by position: once the package was imported,
    ``DatasetInfo.from_merge(dataset_infos=...)`` (and ``concatenate_datasets`` of streams given ``dsets=``) raised
    TypeError (missing 'dataset_infos') after datasets had done its work. By name or by position, the merge keeps
    the members' exact features."""
    import copy

    from datasets import IterableDataset
    from datasets.info import DatasetInfo
    from datasets.iterable_dataset import _concatenate_iterable_datasets

    ds = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)
    other = copy.deepcopy(ds.info)
    other.description = "another description: datasets drops the features of infos that differ"
    by_position = DatasetInfo.from_merge([ds.info, other])
    by_name = DatasetInfo.from_merge(dataset_infos=[ds.info, other])
    assert type(by_name.features) is type(by_position.features) is ExactFeatures
    assert by_name.features == by_position.features == ds.features
    stream = ds.to_iterable_dataset()
    mixed = _concatenate_iterable_datasets(dsets=[stream, stream])
    assert isinstance(mixed, IterableDataset) and type(mixed.features) is ExactFeatures
    assert list(mixed) == list(ds) * 2
