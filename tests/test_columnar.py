"""A batch's table built in one pass (columnar.TableBuilder) equals the general way's (RowEncoder.encode_row, then
RowEncoder.table), value for value, on real rows of every config and on generated rows of every odd shape; a row
either way refuses is refused the same way."""
from __future__ import annotations

import math

import pyarrow as pa
import pytest
from datasets import Features, Json, LargeList, List, Value

import tooluse_datasets as td
from tooluse_datasets.arrow_rows import RowEncoder
from tooluse_datasets.columnar import ColumnPlan
from tooluse_datasets.errors import JsonValueError
from tooluse_datasets.formats import FORMATS
from tooluse_datasets.pipeline import STORAGE_ERRORS
from tooluse_datasets.schema import UNIFIED_FEATURES

from conftest import SHARED_DATA

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install -e '.[test]'")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402


def general_way(encoder: RowEncoder, rows: list[dict], parsed: bool):
    """(accepted rows' table or the type of what building it raised, per row: None or the type it raised)."""
    encoded, refused = [], []
    for row in rows:
        try:
            encoded.append(encoder.encode_parsed_row(row) if parsed else encoder.encode_row(row))
            refused.append(None)
        except Exception as exc:  # noqa: BLE001 (compared by type below)
            refused.append(type(exc))
    try:
        return encoder.table(encoded), refused
    except STORAGE_ERRORS as exc:
        return type(exc), refused


def one_pass(encoder: RowEncoder, rows: list[dict], parsed: bool):
    builder = encoder.builder()
    refused = []
    for row in rows:
        try:
            builder.add(row, parsed=parsed)
            refused.append(None)
        except Exception as exc:  # noqa: BLE001
            refused.append(type(exc))
    try:
        return builder.table(), refused
    except STORAGE_ERRORS as exc:
        return type(exc), refused


def assert_same(encoder: RowEncoder, rows: list[dict], parsed: bool) -> None:
    want, want_refused = general_way(encoder, rows, parsed)
    got, got_refused = one_pass(encoder, rows, parsed)
    assert got_refused == want_refused
    if isinstance(want, pa.Table):
        assert isinstance(got, pa.Table) and got.schema == want.schema
        assert got.equals(want), (got.to_pylist(), want.to_pylist())
        assert got.to_pylist() == want.to_pylist()
    else:
        assert got is want


CASES = [
    ("nestful", {"data_files": str(SHARED_DATA / "nestful" / "third_party" / "AtakanTekparmak_NESTFUL_27c2028"
                                   / "data_v2" / "toy_data.jsonl")}),
    ("ms_swift", {"data_files": str(SHARED_DATA / "ms_swift" / "agent_support_doc_examples_en.jsonl")}),
    ("toolmind", {"data_files": td.sample_files("toolmind")}),  # the bundled samples
    ("llamafactory", {"data_files": td.sample_files("llamafactory")}),
]


@pytest.mark.parametrize("source,kwargs", CASES, ids=[c[0] for c in CASES])
def test_real_rows_of_every_config_give_the_same_table(source, kwargs):
    if source in ("nestful", "ms_swift") and not SHARED_DATA.exists():
        pytest.skip(f"../shared/data is absent ({SHARED_DATA})")
    compared = set()
    for config in FORMATS:
        try:
            loaded = td.load(source, config, streaming=True, on_error="skip", **kwargs)
        except ValueError:
            continue  # a format this source has no config of (raw for a writer-only source)
        for split in loaded.values():
            encoder = RowEncoder(split.features)
            rows = list(split)
            if not rows:
                continue  # a writer that refuses every row of this sample (NESTFUL in toolmind: no results)
            # Streamed rows leave empty keys out (absent tool_calls, reasoning_content...), which the table
            # fills in as the general way does.
            assert_same(encoder, rows, parsed=False)
            assert_same(encoder, rows, parsed=True)
            compared.add(config)
    assert {"unified", "raw"} <= compared


def test_every_unified_json_leaf_is_taken_apart():
    plan = ColumnPlan.compile(RowEncoder(UNIFIED_FEATURES).schema, RowEncoder(UNIFIED_FEATURES).storage_schema)
    assert plan is not None
    assert "write(" in plan.source and plan.source.count("write(") == 3  # tools, arguments, meta


def test_json_under_a_fixed_size_list_takes_the_general_way():
    features = Features({"pair": List(Json(), length=2)})
    encoder = RowEncoder(features)
    assert ColumnPlan.compile(encoder.schema, encoder.storage_schema) is None
    assert_same(encoder, [{"pair": [{"a": 1}, [2]]}, {"pair": None}], parsed=False)


def test_a_row_that_cannot_be_written_is_refused_and_the_others_kept():
    encoder = RowEncoder(UNIFIED_FEATURES)
    good = {"id": "a", "source": "s", "subset": "t", "tools": [{"x": 1}], "messages": [], "meta": {}}
    bad = dict(good, id="b", messages=[{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"v": math.nan}}}]}])
    builder = encoder.builder()
    builder.add(good, parsed=False)
    with pytest.raises(JsonValueError):
        builder.add(bad, parsed=False)
    builder.add(dict(good, id="c"), parsed=False)
    assert builder.table().column("id").to_pylist() == ["a", "c"]
    assert_same(encoder, [good, bad, dict(good, id="c")], parsed=False)


def test_a_value_its_column_cannot_hold_fails_the_table_as_before():
    encoder = RowEncoder(UNIFIED_FEATURES)
    rows = [{"id": "a", "messages": [{"role": 3, "content": "x"}]}]
    assert_same(encoder, rows, parsed=False)
    with pytest.raises(pa.ArrowTypeError):
        builder = encoder.builder()
        builder.add(rows[0], parsed=False)
        builder.table()


# Generated rows of the unified shape, with every odd value the compiled function must hand back: absent keys,
# nulls at every level, tuples for lists, lists and strings where structs go, numbers where text goes, NaN.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6)
texts = st.none() | st.text(max_size=4) | st.integers(0, 3)


def maybe_keys(fields: dict) -> st.SearchStrategy:
    return st.fixed_dictionaries({}, optional=fields)


functions = st.none() | st.tuples(st.text(max_size=2)) | maybe_keys({"name": texts, "arguments": json_values})
calls = st.none() | st.just("call") | maybe_keys({"id": texts, "type": texts, "function": functions})
call_lists = st.none() | st.lists(calls, max_size=3) | st.lists(calls, max_size=2).map(tuple) | st.just("ab")
messages = st.none() | st.integers(0, 1) | maybe_keys({"role": texts, "content": texts, "reasoning_content": texts,
                                                      "tool_calls": call_lists, "tool_call_id": texts,
                                                      "name": texts})
rows = maybe_keys({"id": texts, "source": texts, "subset": texts,
                   "tools": st.none() | st.lists(json_values, max_size=3),
                   "messages": st.none() | st.lists(messages, max_size=4) | st.lists(messages, max_size=2).map(tuple),
                   "call_graph": st.none() | st.lists(maybe_keys({"consumer": texts, "producer": texts}), max_size=2),
                   "images": st.none() | st.lists(texts, max_size=2), "meta": json_values})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(rows, min_size=1, max_size=4), parsed=st.booleans())
def test_generated_rows_give_the_same_table_or_the_same_refusal(batch, parsed):
    encoder = RowEncoder(UNIFIED_FEATURES)
    if parsed:  # parsed rows come from JSON text: no NaN, no infinity
        try:
            for row in batch:
                encoder.encode_row(row)
        except Exception:  # noqa: BLE001
            return
    assert_same(encoder, batch, parsed)


def test_a_nested_schema_of_other_types_gives_the_same_table():
    features = Features({"a": List({"b": List(Json()), "n": Value("int64"), "s": {"j": Json(), "f": Value("float32")}}),
                         "big": LargeList(List(Json()))})
    encoder = RowEncoder(features)
    assert ColumnPlan.compile(encoder.schema, encoder.storage_schema) is not None
    rows = [{"a": [{"b": [1, None, {"k": 2}], "n": 5, "s": {"j": [1.5], "f": 0.25}}, None, {"n": None}],
             "big": [[1, 2], None, [], [{"z": [None]}]]},
            {"a": None, "big": None},
            {"a": [{"s": None}], "big": [[None]]}]
    assert_same(encoder, rows, parsed=False)
    assert_same(encoder, rows + [{"a": [{"n": "five"}]}], parsed=False)  # a number column given text


def test_a_struct_holding_json_beside_another_extension_type_gives_the_same_table():
    from datasets import Array2D

    features = Features({"s": {"grid": Array2D((2, 2), "int32"), "j": Json()}, "grids": List(Array2D((1, 2), "int32"))})
    encoder = RowEncoder(features)
    rows = [{"s": {"grid": [[1, 2], [3, 4]], "j": {"k": [1]}}, "grids": [[[5, 6]]]}, {"s": None, "grids": None}]
    assert_same(encoder, rows, parsed=False)
