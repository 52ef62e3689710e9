"""A map-style ``map`` of a loaded dataset whose function returns a value the exact features cannot store names the
row and field of that value, as ``Dataset.from_list`` and ``add_item`` do."""
from __future__ import annotations

import copy

import pytest

import tooluse_datasets as td
from tooluse_datasets.errors import InvalidValueError, JsonValueError, ToolUseDataError


def _nested(levels: int):
    value = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture(scope="module")
def ds():
    return td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train")


def _with_arguments_at(row: int, bad):
    def put(example, idx):
        if idx != row:
            return {}
        messages = copy.deepcopy(example["messages"])
        # (made here: a num_proc map pickles the function, which a deep value held by it would stop)
        value = {"nan": float("nan"), "deep": _nested(300), "key": {1: "a"}}[bad]
        messages[2]["tool_calls"][0]["function"]["arguments"] = {"x": value}
        return {"messages": messages}
    return put


@pytest.mark.parametrize("bad", ["nan", "deep", "key"])
@pytest.mark.parametrize("how", [{}, {"writer_batch_size": 2}, {"num_proc": 2}], ids=["plain", "batches", "procs"])
def test_a_map_names_the_row_and_field_of_a_value_json_cannot_hold(ds, bad, how):
    assert ds[3]["messages"][2]["tool_calls"]  # (the sample's row 3 has a call there)
    with pytest.raises(JsonValueError) as error:
        ds.map(_with_arguments_at(3, bad), with_indices=True, load_from_cache_file=False, **how)
    assert (error.value.row, error.value.field) == (3, "messages[2].tool_calls[0].function.arguments")
    assert "row 3, field 'messages[2].tool_calls[0].function.arguments'" in str(error.value)


def _content_as_parts_at(row: int):
    def put(example, idx):
        if idx != row:
            return {}
        messages = copy.deepcopy(example["messages"])
        messages[1]["content"] = [{"type": "text", "text": messages[1]["content"]}]
        return {"messages": messages}
    return put


@pytest.mark.parametrize("features", [True, False], ids=["features", "inferred"])
@pytest.mark.parametrize("how", [{}, {"writer_batch_size": 2}, {"num_proc": 2}], ids=["plain", "batches", "procs"])
def test_a_map_returning_content_as_a_list_of_parts_names_its_row_and_field(ds, features, how):
    """A message's content given as a list of parts where the features hold text failed in Arrow ("cannot mix list
    and non-list")."""
    kwargs = {"features": ds.features} if features else {}
    with pytest.raises(InvalidValueError) as error:
        ds.map(_content_as_parts_at(4), with_indices=True, load_from_cache_file=False, **kwargs, **how)
    assert (error.value.row, error.value.field) == (4, "messages[1].content")
    assert "expected string, got array" in str(error.value)


def _stream_put(example, idx, row, what):
    if idx != row:
        return example
    messages = copy.deepcopy(example["messages"])
    if what == "parts":
        messages[0]["content"] = [{"type": "text", "text": messages[0]["content"]}]
    else:
        messages[1 if row == 5 else 2]["tool_calls"][0]["function"]["arguments"] = {"x": float("nan")}
    return {**example, "messages": messages}


@pytest.mark.parametrize("export", ["to_list", "to_parquet"])
@pytest.mark.parametrize("row, what, field, message", [
    (3, "nan", "messages[2].tool_calls[0].function.arguments", "NaN at $.x cannot be stored"),  # among the first rows
    (5, "nan", "messages[1].tool_calls[0].function.arguments", "NaN at $.x cannot be stored"),  # after them
    (2, "parts", "messages[0].content", "expected string, got array")])
def test_a_mapped_streams_exports_name_the_row_and_field_of_a_value_the_features_cannot_hold(tmp_path, export, row,
                                                                                              what, field, message):
    """As a map-style map refuses them: a NaN among the rows typing the export was stored as a struct of every row's
    arguments keys (``{'x': nan, 'base': None, ...}``), one after them named no row, content given as parts in some rows
    was Arrow's bare "cannot mix list and non-list"."""
    stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    mapped = stream.map(_stream_put, with_indices=True, fn_kwargs={"row": row, "what": what})
    with pytest.raises(ToolUseDataError) as error:
        getattr(mapped, export)(*([str(tmp_path / "out.parquet")] if export == "to_parquet" else []))
    assert (error.value.row, error.value.field) == (row, field)
    assert message in str(error.value)


def test_a_stream_mapped_with_its_features_exports_its_rows_and_names_a_refused_one(tmp_path):
    """``stream.map(f, features=stream.features)`` gave plain Features: its to_list failed in Arrow ("cannot mix
    struct and non-struct"), an identity map included."""
    stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    same = stream.map(lambda r: r, features=stream.features)
    assert same.to_list() == stream.map(lambda r: r).to_list()
    assert [row["id"] for row in same.to_list()] == [row["id"] for row in stream]
    bad = stream.map(_stream_put, with_indices=True, fn_kwargs={"row": 3, "what": "nan"}, features=stream.features)
    with pytest.raises(JsonValueError) as error:
        bad.to_parquet(str(tmp_path / "out.parquet"))
    assert (error.value.row, error.value.field) == (3, "messages[2].tool_calls[0].function.arguments")


def _stream_put_batch(batch, indices, row, what):
    rows = [dict(zip(batch, values)) for values in zip(*batch.values())]
    out = [_stream_put(example, idx, row, what) for example, idx in zip(rows, indices)]
    return {key: [example[key] for example in out] for key in batch}


@pytest.mark.parametrize("how", ["plain", "features", "batched"])
@pytest.mark.parametrize("row, field", [(3, "messages[2].tool_calls[0].function.arguments"),
                                        (5, "messages[1].tool_calls[0].function.arguments")])
def test_a_mapped_stream_read_in_a_loop_names_the_row_and_field_of_a_nan(how, row, field):
    """Read row by row (a training loop, a DataLoader), a stream's map handed the NaN its function put in a call's
    arguments on as a row, where a map-style map, and the stream's own exports, refuse it by row and field."""
    stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    kwargs = {"with_indices": True, "fn_kwargs": {"row": row, "what": "nan"}}
    if how == "batched":
        mapped = stream.map(_stream_put_batch, batched=True, batch_size=2, **kwargs)
    else:
        mapped = stream.map(_stream_put, **kwargs, **({"features": stream.features} if how == "features" else {}))
    handed = []
    with pytest.raises(JsonValueError) as error:
        for example in mapped:
            handed.append(example["id"])
    assert (error.value.row, error.value.field) == (row, field)
    assert "NaN at $.x cannot be stored" in str(error.value)
    assert handed == [example["id"] for example in stream][:row - row % 2 if how == "batched" else row]
    # the rows the function leaves alone, and good rows, come as they are
    assert list(stream.map(_stream_put, **{**kwargs, "fn_kwargs": {"row": -1, "what": "nan"}})) == list(stream)


def test_a_map_with_num_proc_forks_workers_that_end_at_the_pools_sigterm(tmp_path):
    """The pool of a failed map ends its workers with SIGTERM: workers that inherited the caller's handler (a Ray
    driver's, a training script's) outlived it when blocked on the pool's queue, and the map waited for ever. Its
    workers now take SIGTERM's default action, as a prepare's do. Run in a process of its own (its handler)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import signal
        import tooluse_datasets as td
        from tooluse_datasets.errors import JsonValueError

        signal.signal(signal.SIGTERM, lambda *args: None)  # the caller's own handler
        ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=%r)

        def disposition(example):
            return {"id": str(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)}

        print(sorted(set(ds.map(disposition, num_proc=2, load_from_cache_file=False)["id"])))

        def put_nan(example, idx):
            if idx != 3:
                return {}
            messages = example["messages"]
            messages[2]["tool_calls"][0]["function"]["arguments"] = {"x": float("nan")}
            return {"messages": messages}

        try:
            ds.map(put_nan, with_indices=True, num_proc=2, load_from_cache_file=False)
        except JsonValueError as exc:
            print("refused:", exc.row)
    """ % str(tmp_path / "cache"))
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the map of num_proc=2 was still waiting on its workers after 180 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-2:] == ["['True']", "refused: 3"]


def test_a_batched_map_of_a_mapped_stream_formatted_as_arrow_takes_tables_of_its_features():
    """``stream.map(f, features=...).with_format("arrow").map(g, batched=True)`` (TRL's packing reads a stream so)
    had Arrow infer each batch's types from the decoded rows: "cannot mix struct and non-struct"."""
    stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    mapped = stream.map(td.short_call_ids, features=stream.features)
    seen = []

    def keep(table):
        seen.append(table)
        return table

    packed = mapped.with_format("arrow").map(keep, batched=True, batch_size=4)
    assert [row["id"] for row in packed.with_format(None)] == [row["id"] for row in stream]
    assert [t.num_rows for t in seen] == [4, 2]
    assert seen[0].schema == next(iter(stream.with_format("arrow").iter(batch_size=4))).schema
    assert td.decode_row(seen[0].slice(1, 1).to_pylist()[0], stream.features) == list(mapped)[1]
    # the tables of an identity map are the stream's own
    same = stream.map(lambda row: row, features=stream.features).with_format("arrow")
    assert list(same.map(lambda t: t, batched=True, batch_size=4).with_format(None)) == \
        list(stream.with_format("arrow").map(lambda t: t, batched=True, batch_size=4).with_format(None))
    # resumed from a saved state, the rows after it, once
    head, rest = packed.with_format(None), []
    for i, row in enumerate(head):
        if i == 2:
            state = head.state_dict()
            break
    head.load_state_dict(state)
    rest = [row["id"] for row in head]
    assert rest == [row["id"] for row in mapped][3:]
