"""Rows read through datasets' tensor formatters (``with_format("numpy")``, ``"torch"``; jax and tf extract rows
the same way) decode as they do in the python format: the same exact JSON values, in the shape datasets gives a
plain ``Json()`` column under that format. Those formatters hand the decoders numpy values (object arrays,
``numpy.str_``) instead of Python lists and str."""
from __future__ import annotations

import numpy as np
import pytest
from datasets import Dataset, DatasetInfo, Features, Json, List, Value
from datasets.formatting.formatting import NumpyArrowExtractor, PythonArrowExtractor

import tooluse_datasets as td
from tooluse_datasets.arrow_rows import rows_to_table
from tooluse_datasets.codec import json_bytes
from tooluse_datasets.registry import source_names
from tooluse_datasets.schema import UNIFIED_FEATURES

try:
    import torch
except ImportError:  # torch comes with the trl extra
    torch = None

FORMATS = ["numpy", pytest.param("torch", marks=pytest.mark.skipif(
    torch is None, reason="torch is not installed (pip install -e '.[trl]')"))]
SOURCES = source_names()


def to_python(value):
    """A formatted value as plain Python: arrays and tensors as lists, numpy scalars as int/float/str/bool."""
    if isinstance(value, dict):
        return {k: to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_python(v) for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype != object:
            return value.tolist()
        return to_python(value.item()) if value.ndim == 0 else [to_python(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if torch is not None and isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def structure(value):
    """Types, dtypes and shapes of a formatted value, recursively (what a training loop would see)."""
    if isinstance(value, dict):
        return {k: structure(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [structure(v) for v in value])
    if isinstance(value, np.ndarray):
        inner = [structure(v) for v in value.flat] if value.dtype == object else None
        return ("ndarray", str(value.dtype), value.shape, inner)
    if torch is not None and isinstance(value, torch.Tensor):
        return ("Tensor", str(value.dtype), tuple(value.shape))
    return type(value).__name__


def arguments(row) -> list:
    """Every call's arguments in a row (decoded rows leave an empty ``tool_calls`` out; plain rows keep it)."""
    out = []
    for m in row["messages"]:
        calls = m.get("tool_calls")
        out.extend(c["function"]["arguments"] for c in (calls if calls is not None else ()))
    return out


def json_columns(row) -> dict:
    return {"tools": row["tools"], "meta": row["meta"], "arguments": arguments(row)}


def row_id(row) -> str:
    return str(row["id"])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """source -> [(map-style split, the same split streamed, plain datasets' Dataset over the same table)]."""
    cache = str(tmp_path_factory.mktemp("formats-cache"))
    out = {}
    for source in SOURCES:
        files = td.sample_files(source)
        mapped = td.load(source, data_files=files, cache_dir=cache)
        streamed = td.load(source, data_files=files, streaming=True)
        out[source] = []
        for split, ds in mapped.items():
            # The features as any datasets reads them from the files: plain Json() leaves, datasets' decoding.
            plain_features = Features.from_dict(ds.features.to_dict())
            assert type(plain_features["meta"]).__name__ == "Json"
            plain = Dataset(ds.data, info=DatasetInfo(features=plain_features))
            out[source].append((ds, streamed[split], plain))
    return out


def formatted_rows(ds, fmt: str, streaming: bool) -> dict:
    """id -> row, read row by row and (as DataLoaders do with batches) in batches of two, which must agree."""
    formatted = ds.with_format(fmt)
    rows = {row_id(r): r for r in formatted}
    if streaming:
        batches = list(formatted.iter(batch_size=2))
    else:
        batches = [formatted[i:i + 2] for i in range(0, len(ds), 2)]
    from_batches = [{k: batch[k][i] for k in batch} for batch in batches for i in range(len(batch["id"]))]
    assert [row_id(r) for r in from_batches] == list(rows)
    for r in from_batches:
        assert json_bytes(to_python(json_columns(r))) == json_bytes(to_python(json_columns(rows[row_id(r)])))
    return rows


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("source", SOURCES)
def test_tensor_formats_give_the_python_rows_json_values(loaded, source, streaming, fmt):
    for mapped, streamed, _ in loaded[source]:
        ds = streamed if streaming else mapped
        python_rows = {row_id(r): r for r in ds}
        rows = formatted_rows(ds, fmt, streaming)
        assert list(rows) == list(python_rows)
        for rid, row in rows.items():
            expected = json_columns(python_rows[rid])
            if fmt == "torch":
                # torch makes every JSON number a tensor (floats float32): what it does to the python row's values.
                from datasets.formatting import TorchFormatter  # exported only where torch is installed

                expected = TorchFormatter().recursive_tensorize(expected)
            assert json_bytes(to_python(json_columns(row))) == json_bytes(to_python(expected)), rid


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("source", SOURCES)
def test_tensor_formats_give_the_shape_of_a_plain_json_column(loaded, source, streaming, fmt):
    for mapped, streamed, plain in loaded[source]:
        ours = formatted_rows(streamed if streaming else mapped, fmt, streaming)
        plain_ds = plain.to_iterable_dataset() if streaming else plain
        theirs = {row_id(r): r for r in plain_ds.with_format(fmt)}
        assert list(ours) == list(theirs)
        for rid, row in ours.items():
            assert structure(json_columns(row)) == structure(json_columns(theirs[rid])), rid


# Values datasets' own Json() decoding changes or refuses (see tests/test_codec.py).
EXACT_ARGUMENTS = {"big": 2**70, "neg": -(2**80) - 7, "u64": 2**64 - 1, "third": 0.1 + 0.2, "pi": 3.141592653589793,
                   "tiny": 5e-324, "zero": -0.0, "text": "123", "mixed": [1, 2.5, "x", None, True, {"k": [0.3]}]}


@pytest.fixture(scope="module")
def exact_table():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": EXACT_ARGUMENTS}}
    rows = [{"id": f"t/x/{i}", "source": "t", "subset": "x", "tools": [{"n": 0.3}, {"n": 2**70}],
             "messages": [{"role": "user", "content": "go"},
                          {"role": "assistant", "content": "", "tool_calls": [call]}],
             "call_graph": [], "images": [], "audios": [], "videos": [], "meta": {"big": 2**70 + i, "f": 1e-7}}
            for i in range(3)]
    rows[1]["meta"] = None  # a null JSON leaf among text ones
    encoded = [td.complete_row(r) for r in rows]
    return rows_to_table(encoded, UNIFIED_FEATURES)


def test_numpy_extracted_rows_decode_to_the_exact_python_values(exact_table):
    """What every tensor formatter hands the decoders (numpy's extractor) decodes as the python extractor's rows:
    integers beyond 64 bits and floats exactly, row by row, by batch and by column."""
    features = td.ExactFeatures(UNIFIED_FEATURES)
    python, numpy = PythonArrowExtractor(), NumpyArrowExtractor()
    expected = features.decode_batch(python.extract_batch(exact_table))
    assert expected["meta"][0]["big"] == 2**70 and expected["meta"][1] is None
    assert json_bytes(to_python(features.decode_batch(numpy.extract_batch(exact_table)))) == json_bytes(expected)
    for i in range(exact_table.num_rows):
        one = exact_table.slice(i, 1)
        want = features.decode_example(python.extract_row(one))
        assert json_bytes(to_python(features.decode_example(numpy.extract_row(one)))) == json_bytes(want)
    for name in ("tools", "messages", "meta"):
        column = exact_table.select([name])
        got = features.decode_column(numpy.extract_column(column), name)
        assert json_bytes(to_python(got)) == json_bytes(expected[name])


def test_numpy_format_keeps_exact_values_where_plain_json_fails(exact_table):
    datasets_decode = td.exact_features._DATASETS_WRITER["decode_example"]
    with pytest.raises(ValueError, match="too big"):  # datasets' own decoder (ujson) refuses 2**70,
        datasets_decode(Json(), '{"big": 1180591620717411303424}')
    plain = Dataset(exact_table).with_format("numpy")[0]  # which importing the package replaced
    assert to_python(plain["meta"]["big"]) == 2**70
    exact = td.exact(Dataset(exact_table))
    python_rows = list(exact)
    for row, want in zip(exact.with_format("numpy"), python_rows):
        assert json_bytes(to_python(json_columns(row))) == json_bytes(json_columns(want))
    assert to_python(exact.with_format("numpy")[0]["meta"]["big"]) == 2**70


NESTED = Features({"calls": List({"args": Json(), "scores": List(Value("float64")), "tags": List(Value("string"))}),
                   "grid": List(List(Json())), "meta": Json()})


@pytest.mark.parametrize("fmt", FORMATS)
def test_lists_beside_json_leaves_take_the_plain_json_shape(fmt):
    """A list under a decoded column comes out as datasets' own decoding leaves it, whatever it holds (numpy
    makes an array of float64 scores float32, a Python list of them float64)."""
    rows = [{"calls": [{"args": {"x": 0.5, "y": [1, 2]}, "scores": [0.25, 0.5], "tags": ["a", "b"]}],
             "grid": [[{"k": 1}, [2, 3]], [None, "s"]], "meta": {"n": 1}},
            {"calls": [], "grid": [], "meta": None}]
    table = rows_to_table(rows, NESTED)
    plain = Dataset(table, info=DatasetInfo(features=NESTED))
    exact = td.exact(Dataset(table, info=DatasetInfo(features=NESTED)))
    python_rows = list(exact)
    assert json_bytes(python_rows) == json_bytes(rows)
    got = exact.with_format(fmt)
    for i, want in enumerate(python_rows):
        if fmt == "numpy":
            expected = want
        else:
            from datasets.formatting import TorchFormatter  # exported only where torch is installed

            expected = TorchFormatter().recursive_tensorize(want)
        assert json_bytes(to_python(got[i])) == json_bytes(to_python(expected))
    # datasets' own decoder cannot decode "grid" under these formats (it compares an array with a list), so the
    # shape is compared on the other columns.
    theirs = plain.with_format(fmt, columns=["calls", "meta"])
    for i in range(len(rows)):
        assert structure({k: got[i][k] for k in ("calls", "meta")}) == structure(theirs[i])
    assert structure(got[:]["calls"]) == structure(theirs[:]["calls"])


def test_a_json_leaf_that_is_not_text_is_a_typed_error_naming_the_column():
    features = td.ExactFeatures(NESTED)
    with pytest.raises(td.InvalidJsonError) as info:
        features.decode_example({"meta": {"already": "decoded"}})
    assert info.value.field == "meta" and "dict" in str(info.value)


@pytest.mark.parametrize("batched", [False, True], ids=["rows", "batches"])
@pytest.mark.parametrize("fmt", ["numpy", "pandas"])
@pytest.mark.parametrize("source", SOURCES)
def test_a_map_of_a_formatted_dataset_writes_back_the_python_rows(loaded, source, fmt, batched):
    """datasets' map writer failed on the nested columns a numpy or pandas formatted function returns (ArrowInvalid),
    an identity map included: they are written back as the python format's values."""
    for ds, _, _ in loaded[source]:
        same = ds.with_format(fmt).map(lambda r: r, batched=batched)
        assert json_bytes(list(same.with_format(None))) == json_bytes(list(ds))
    if fmt == "numpy":  # a column computed from the messages, beside the others
        count = (lambda b: {"n": [len(m) for m in b["messages"]]}) if batched else (lambda r: {"n": len(r["messages"])})
        counted = ds.with_format(fmt).map(count, batched=batched).with_format(None)
        assert json_bytes(list(counted)) == json_bytes(list(ds.map(count, batched=batched)))


def test_a_numpy_map_writes_json_values_back_exactly(exact_table):
    exact = td.exact(Dataset(exact_table))
    same = exact.with_format("numpy").map(lambda r: r).with_format(None)
    assert json_bytes(list(same)) == json_bytes(list(exact)) and same[0]["meta"]["big"] == 2**70


def test_a_torch_map_returning_json_tensors_is_refused_by_column():
    """torch makes JSON floats float32 tensors: written back they would change, so the column is named instead."""
    pytest.importorskip("torch")
    rows = [{"id": f"t/x/{i}", "source": "t", "subset": "x", "tools": [{"n": 0.3}],
             "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}],
             "call_graph": [], "images": [], "audios": [], "videos": [], "meta": {"f": 1e-7}} for i in range(3)]
    exact = td.exact(Dataset(rows_to_table([td.complete_row(r) for r in rows], UNIFIED_FEATURES))).with_format("torch")
    with pytest.raises(td.InvalidValueError, match="map before with_format") as info:
        exact.map(lambda r: r)
    assert info.value.field == "tools"
    counted = exact.map(lambda r: {"n": len(r["messages"])}).with_format(None)
    assert [r["n"] for r in counted] == [2, 2, 2]
    assert json_bytes([r["tools"] for r in counted]) == json_bytes([r["tools"] for r in rows])
