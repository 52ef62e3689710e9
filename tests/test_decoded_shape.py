"""Decoded unified rows have the shape chat templates and TRL expect, whatever datasets path reads them:
a message key that is null or empty is absent, ``role``/``content`` are always there, and a row without
media has no media keys (TRL takes a row with an ``images`` key for vision data)."""
from __future__ import annotations

import datetime

import datasets
import pandas
import pytest

import tooluse_datasets as td
from tooluse_datasets.codec import json_bytes
from tooluse_datasets.schema import complete_row

OPTIONAL_KEYS = ("reasoning_content", "tool_calls", "tool_call_id", "name")


def assert_chat_shape(row: dict) -> None:
    for m in row["messages"]:
        assert isinstance(m["role"], str) and isinstance(m["content"], str)
        for key in OPTIONAL_KEYS:
            assert m.get(key, "absent") not in (None, []), f"{key} present but empty in {m}"
    for column in td.MEDIA_COLUMNS:
        assert row.get(column, "absent") != [], f"empty {column} present"


def call_arguments(rows) -> list:
    return [c["function"]["arguments"] for r in rows for m in r["messages"] for c in m.get("tool_calls", [])]


@pytest.fixture(scope="module")
def nestful(tmp_path_factory):
    return td.load("nestful", data_files=td.sample_files("nestful"), split="train",
                   cache_dir=str(tmp_path_factory.mktemp("cache")))


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_every_access_path_gives_chat_shaped_rows(source, cache_dir):
    files = td.sample_files(source)
    mapped = td.load(source, data_files=files, cache_dir=cache_dir)
    streamed = td.load(source, data_files=files, streaming=True)
    for split, ds in mapped.items():
        rows = list(ds)
        stream_rows = list(streamed[split])
        batch_rows = [dict(zip(b, values)) for b in ds.iter(batch_size=2) for values in zip(*b.values())]
        assert rows and [complete_row(r) for r in stream_rows] == [complete_row(r) for r in batch_rows] == [
            complete_row(r) for r in rows]
        for row in rows + [ds[0]] + stream_rows:
            assert_chat_shape(row)
            td.validate_unified(row)
        for row in batch_rows:  # a batch keeps a media column that any of its rows uses
            assert_chat_shape({**row, **{c: None for c in td.MEDIA_COLUMNS if row.get(c) == []}})
        assert ds[: len(ds)]["messages"] == [r["messages"] for r in rows]
        if not any(c in r for r in rows for c in td.MEDIA_COLUMNS):
            assert stream_rows == rows


def test_only_rows_with_media_carry_media_keys(cache_dir):
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)
    with_images = [r for r in ds if "images" in r]
    assert len(with_images) == 1 and with_images[0]["images"] == ["receipts/lunch_2024-05-17.jpg"]
    assert all(not ({"audios", "videos"} & set(r)) for r in ds)
    # A batch is columnar: a media column stays when any row of the batch has media.
    batch = ds[: len(ds)]
    assert sum(1 for v in batch["images"] if v) == 1 and "audios" not in batch


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_dataloader_over_a_map_style_dataset_gives_the_rows_it_holds(num_workers, cache_dir):
    """A torch DataLoader takes a map-style dataset's rows through ``__getitems__``, which datasets cuts from a
    batch: a text row batched with the row holding images came with ``images: []``, where ``ds[i]`` and the
    stream give it no media key (TRL reads a first row with an "images" key as vision data). It gets the rows
    ``ds[i]`` gives, also after a map; columns asked for keep their media, as ``ds[i]`` does."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for a DataLoader")
    from torch.utils.data import DataLoader

    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)
    for dataset in (ds, ds.map(lambda row: {"turns": len(row["messages"])}), ds.select_columns(["id", "images"])):
        loaded = [row for batch in DataLoader(dataset, batch_size=2, num_workers=num_workers,
                                              collate_fn=lambda batch: batch) for row in batch]
        assert loaded == [dataset[i] for i in range(len(dataset))]
    assert sum("images" in row for row in loaded) == len(ds)  # (asked for: every row has it)
    assert sum("images" in ds[i] for i in range(len(ds))) == 1 == sum("images" in row for row in ds)


@pytest.mark.parametrize("format_kwargs", [{"columns": ["id", "messages", "images"]}, {"type": "numpy"},
                                           {"type": "torch"}, {"columns": ["images"], "output_all_columns": True}])
def test_a_dataloader_over_a_formatted_dataset_gives_the_rows_it_holds(format_kwargs, cache_dir):
    """With format columns holding the conversation, or a numpy or torch format, ``ds[i]`` still gives a text row
    no media key; the rows a DataLoader took (``__getitems__``) kept ``images`` where a batch-mate had images. Format
    columns without it keep ``images: []``, also with the conversation output_all_columns adds: so must those rows."""
    pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for a DataLoader")
    from torch.utils.data import DataLoader

    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train",
                 cache_dir=cache_dir).with_format(**format_kwargs)
    loaded = [row for batch in DataLoader(ds, batch_size=2, collate_fn=lambda batch: batch) for row in batch]
    assert [sorted(row) for row in loaded] == [sorted(ds[i]) for i in range(len(ds))]
    # (images asked for without the conversation: every row keeps it, as ds[i] does, the conversation beside it)
    assert sum("images" in row for row in loaded) == (len(ds) if "output_all_columns" in format_kwargs else 1)


def test_assistant_answers_and_call_turns_keep_only_their_keys(nestful, cache_dir):
    call_turn = nestful[0]["messages"][1]
    assert call_turn["role"] == "assistant" and call_turn["content"] == ""
    assert set(call_turn) == {"role", "content", "tool_calls"}
    ms = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)
    answer = ms[0]["messages"][-1]
    assert set(answer) == {"role", "content"} and answer["content"]
    result = next(m for m in ms[0]["messages"] if m["role"] == "tool")
    assert set(result) == {"role", "content", "tool_call_id", "name"}


def test_map_keeps_values_exact_and_exact_restores_the_shape(nestful):
    expected = call_arguments(nestful)
    added = nestful.map(lambda r: {"messages": r["messages"] + [{"role": "assistant", "content": "done"}]})
    # datasets builds fresh Features for map outputs: values stay exact, td.exact gives the chat shape back.
    assert call_arguments(td.exact(added)) == expected
    for row in td.exact(added):
        assert_chat_shape(row)
        assert row["messages"][-1] == {"role": "assistant", "content": "done"}


def test_to_list_decodes_exactly_in_the_complete_form_and_list_in_the_chat_shape(nestful):
    exact_args = call_arguments(list(nestful))
    assert 0.3 in [v for a in exact_args for v in a.values()]
    # datasets' to_list reads JSON leaves through the package's exact reader (its own ujson: 0.3 came back as
    # 0.30000000000000004), and gives every message key, as Arrow stores it
    as_list = nestful.to_list()
    assert call_arguments(as_list) == exact_args
    assert [td.complete_row(row) for row in nestful] == as_list


def test_stored_messages_decode_to_one_shape_whatever_their_key_order():
    # Structs read from Arrow (every key, role and content first) are shaped in place; any other dict is rebuilt.
    features = td.ExactFeatures(td.UNIFIED_FEATURES)
    call = {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    stored = {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [call],
              "tool_call_id": None, "name": None}
    reordered = {"tool_calls": [dict(call, function=dict(call["function"]))], "name": None, "content": None,
                 "reasoning_content": "r", "role": "assistant"}
    expected = {"role": "assistant", "content": "", "reasoning_content": "r",
                "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}
    for message, order in ((stored, list(expected)), (reordered, ["role", "content", "tool_calls", "reasoning_content"])):
        (decoded,) = features.decode_example({"messages": [message]})["messages"]
        assert decoded == expected and list(decoded) == order  # role and content first, then as given


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_iterating_a_prepared_split_gives_datasets_own_rows_in_the_same_key_order(source, cache_dir):
    import datasets
    import orjson

    from tooluse_datasets.loading import ExactDataset

    for ds in td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir).values():
        assert isinstance(ds, ExactDataset)
        own = list(datasets.Dataset.__iter__(ds))  # datasets' row-by-row path
        rows = list(ds)
        assert rows == own and orjson.dumps(rows) == orjson.dumps(own)  # values, and keys in the same order
        # rows gathered through an indices mapping (shuffle, a select of scattered rows)
        for mapped in (ds.select(list(reversed(range(len(ds))))), ds.shuffle(seed=0)):
            assert orjson.dumps(list(mapped)) == orjson.dumps(list(datasets.Dataset.__iter__(mapped)))
        assert len(ds) < 2 or isinstance(ds.select(list(reversed(range(len(ds))))), ExactDataset)
        # a format or chosen columns take datasets' own path
        assert [r["id"] for r in ds.with_format(columns=["id"])] == [r["id"] for r in own]


# Column operations that keep every column's type: datasets rebuilds the features of their result as a plain
# ``Features``, whose rows came back with every key (an answer with ``tool_calls: []`` renders as an empty call
# turn under Hermes-3's template, ``images: []`` makes TRL take a text dataset for vision data).
COLUMN_OPERATIONS = {
    "select_columns": (lambda d: d.select_columns(["id", "messages", "tools", "images"]), "id"),
    "rename_column": (lambda d: d.rename_column("id", "row_id"), "row_id"),
    "rename_columns": (lambda d: d.rename_columns({"id": "row_id"}), "row_id"),
    "flatten_indices": (lambda d: d.shuffle(seed=0).flatten_indices(), "id"),
    # a cast of one column (images to datasets.Image for vision training, say) or of the whole features
    "cast_column": (lambda d: d.cast_column("id", datasets.Value("large_string")), "id"),
    "cast": (lambda d: d.cast(d.features.copy()), "id"),
    # unified columns hold no struct at the top, so flatten changes no column: it only rebuilt the features
    "flatten": (lambda d: d.flatten(), "id"),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("operation", sorted(COLUMN_OPERATIONS))
@pytest.mark.parametrize("source", ["ms_swift", "toolmind"])
def test_column_operations_keep_the_chat_shape_and_the_rows(source, operation, streaming, cache_dir):
    ds = td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir)
    ds = next(iter(ds.values()))
    if streaming:
        if operation in ("flatten_indices", "flatten"):
            pytest.skip(f"streams have no {operation}")
        ds = ds.to_iterable_dataset()
    apply, id_column = COLUMN_OPERATIONS[operation]
    before = {r["id"]: r for r in ds}
    after = list(apply(ds))
    assert len(after) == len(before)
    for row in after:
        assert_chat_shape(row)
        original = before[row[id_column]]
        assert row["messages"] == original["messages"] and row["tools"] == original["tools"]
        assert row.get("images") == original.get("images")


@pytest.mark.parametrize("source", ["ms_swift", "toolmind"])
def test_a_stream_without_some_columns_goes_through_arrow_steps(source):
    """A stream's remove_columns was datasets' Python map, handing on decoded values (a ``meta`` dict): an Arrow
    step after it (``with_format("arrow")``, ``filter_dataset``) failed with ArrowInvalid."""
    from tooluse_datasets.validation import filter_dataset

    stream = next(iter(td.load(source, data_files=td.sample_files(source), streaming=True).values()))
    expected = [{k: v for k, v in row.items() if k not in ("images", "meta")} for row in stream]
    removed = stream.remove_columns(["images", "meta"])
    assert "meta" not in removed.features and list(removed) == expected
    tables = list(removed.with_format("arrow").iter(batch_size=4))
    assert sum(t.num_rows for t in tables) == len(expected) and "meta" not in tables[0].column_names
    kept = filter_dataset(stream.remove_columns("images"), "arguments.schema")
    kept_ids = [r["id"] for r in kept]
    assert kept_ids and kept_ids == [r["id"] for r in expected if r["id"] in set(kept_ids)]


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_a_stream_renamed_twice_gives_the_rows_map_style_gives(source, cache_dir):
    """A stream's rename is datasets' Python map over decoded rows, and the rows it hands on are encoded again by
    the features, where datasets encodes a list only when encoding its first element changes it. Messages under
    another name keep every key, so a first message without calls looked encoded already and the calls after it
    kept their decoded arguments: a second rename (``conversation`` then ``functions``, say) failed on every row
    with "a stored JSON value is dict, not JSON text"."""
    from tooluse_datasets.schema import complete_message

    def renamed(ds):
        return ds.rename_column("messages", "conversation").rename_column("tools", "functions")

    def same_form(row):  # an empty list may come back as null on a stream (absent means [] for lists)
        return {**row, "conversation": [complete_message(m) for m in row["conversation"]],
                **{column: row.get(column) or [] for column in td.MEDIA_COLUMNS}}

    files = td.sample_files(source)
    expected = [row for ds in td.load(source, data_files=files, cache_dir=cache_dir).values() for row in renamed(ds)]
    streamed = [row for ds in td.load(source, data_files=files, streaming=True).values() for row in renamed(ds)]
    assert [same_form(row) for row in streamed] == [same_form(row) for row in expected]
    assert any(c["function"]["arguments"] for row in streamed for m in row["conversation"]
               for c in m.get("tool_calls") or [])  # calls after a first message without any, decoded once
    batches = [b for ds in td.load(source, data_files=files, streaming=True).values()
               for b in renamed(ds).iter(batch_size=4)]
    assert [same_form({"conversation": c}) for b in batches for c in b["conversation"]] == \
        [same_form({"conversation": row["conversation"]}) for row in expected]


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_renamed_messages_decode_as_messages_did(source, streaming, cache_dir):
    """The chat shape was keyed on the column's name: under another name (``conversation``) messages came back
    with every key (``tool_calls: []``, ``reasoning_content: None``) and rows with ``images: []`` (map-style) or
    ``images: None`` (streaming), where the same rows under ``messages`` had neither."""
    import orjson

    files = td.sample_files(source)
    loaded = td.load(source, data_files=files, streaming=streaming, **({} if streaming else {"cache_dir": cache_dir}))
    for ds in loaded.values():
        expected = [{("conversation" if k == "messages" else k): v for k, v in row.items()} for row in ds]
        renamed = ds.rename_column("messages", "conversation")
        rows = list(renamed)
        assert rows and orjson.dumps(rows) == orjson.dumps(expected)  # values and key order, row by row
        for row in rows:
            assert_chat_shape({**row, "messages": row["conversation"]})
        assert call_arguments({"messages": r["conversation"]} for r in rows) == call_arguments(
            {"messages": r["conversation"]} for r in expected)


@pytest.mark.parametrize("mapping", [{"images": "pictures"}, {"images": "pictures", "videos": "clips"}])
def test_a_renamed_media_column_streams_as_it_reads_map_style(mapping, cache_dir):
    """Decoded rows leave an empty media list out, and datasets' stream rename needs the key in every row: renaming
    ``images`` failed on the first row without images (ValueError: columns {'images'} are not in the dataset)."""
    import orjson

    files = td.sample_files("ms_swift")
    stream = td.load("ms_swift", data_files=files, split="train", streaming=True)
    stored = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    renamed = [ds.rename_columns(mapping) if len(mapping) > 1 else ds.rename_column(*next(iter(mapping.items())))
               for ds in (stream, stored)]
    streamed, mapped = (list(ds) for ds in renamed)
    assert streamed and orjson.dumps(streamed) == orjson.dumps(mapped)  # values and key order
    # the row with an image keeps it under its new name; the others hold the empty list it stood for
    original = list(stream)
    assert [r["pictures"] for r in streamed] == [r.get("images", []) for r in original]
    assert any(r["pictures"] for r in streamed) and isinstance(renamed[0].features, td.ExactFeatures)


def test_renaming_a_stream_column_onto_another_is_refused_as_map_style_refuses_it(cache_dir):
    """Decoded rows leave empty media out, so datasets' stream rename did not see that ``videos`` was taken: the
    renamed ``images`` replaced the ``videos`` column without a word."""
    files = td.sample_files("ms_swift")
    stream = td.load("ms_swift", data_files=files, split="train", streaming=True)
    stored = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    for ds in (stored, stream):
        with pytest.raises(ValueError):
            list(ds.rename_column("images", "videos"))
    assert len(list(stream.rename_column("images", "pictures"))) == 6  # a free name is taken as before


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_add_item_takes_a_decoded_row_of_every_source(source, cache_dir):
    """datasets' add_item infers the item's Arrow types from its values: a JSON value (a dict) became a struct, which
    it tried to align with the Json() column (AttributeError: 'ExactJson' object has no attribute 'items')."""
    import orjson

    for ds in td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir).values():
        rows = list(ds)
        for added in (rows[-1], complete_row(rows[0])):  # the decoded shape, and the one with every key
            grown = ds.add_item(added)
            assert len(grown) == len(ds) + 1 and isinstance(grown.features, td.ExactFeatures)
            # the same values bit for bit (floats, big integers, key order) in the decoded shape, stored as
            # prepare stores them (every key, [] for an empty list)
            assert orjson.dumps(list(grown)) == orjson.dumps(rows + [grown[len(ds)]])
            assert orjson.dumps(grown[len(ds)]) == orjson.dumps(rows[-1] if added is rows[-1] else rows[0])
            stored = grown.data.slice(len(ds)).to_pylist()[0]
            original = ds.data.slice(len(ds) - 1 if added is rows[-1] else 0, 1).to_pylist()[0]
            assert stored == original
        assert call_arguments(grown.select(range(len(ds), len(ds) + 1))) == call_arguments(rows[:1])


def test_add_item_refuses_what_the_columns_cannot_hold_naming_the_field(nestful):
    row = complete_row(nestful[0])
    with pytest.raises(td.JsonValueError) as info:
        nestful.add_item({**row, "meta": {"x": float("nan")}})
    assert info.value.field == "meta"
    with pytest.raises(ValueError, match="not_a_column"):
        nestful.add_item({**row, "not_a_column": 1})



def test_add_item_refuses_a_value_of_another_kind_than_its_column_naming_where(nestful):
    """Text for a list column was taken character by character (tools ``"abc"`` stored as ``["a", "b", "c"]``, where
    datasets' own add_item refuses it), and an object for the messages list, or text for a message, was a bare
    AttributeError: each is a typed error naming the place, as is a value JSON cannot hold deep in a message."""
    row = complete_row(nestful[0])
    turn = next(i for i, m in enumerate(row["messages"]) if m["tool_calls"])
    cases = [({**row, "tools": "abc"}, td.InvalidValueError, "tools", "expected a list, got string"),
             ({**row, "messages": row["messages"][0]}, td.InvalidValueError, "messages", "expected a list, got object"),
             ({**row, "messages": [*row["messages"][:1], "hi"]}, td.InvalidValueError, "messages[1]",
              "expected an object, got string"),
             ({**row, "call_graph": ["x"]}, td.InvalidValueError, "call_graph[0]", "expected an object, got string"),
             ({**row, "images": "cat.png"}, td.InvalidValueError, "images", "expected a list, got string"),
             # a list or object for text was stored as its str(): "['a']"
             ({**row, "id": ["a"]}, td.InvalidValueError, "id", "expected string, got array"),
             ({**row, "messages": [{**row["messages"][0], "content": ["x"]}, *row["messages"][1:]]},
              td.InvalidValueError, "messages[0].content", "expected string, got array")]
    calls = [{**c, "function": {**c["function"], "arguments": {"x": float("nan")}}}
             for c in row["messages"][turn]["tool_calls"]]
    messages = [{**m, "tool_calls": calls} if i == turn else m for i, m in enumerate(row["messages"])]
    cases.append(({**row, "messages": messages}, td.JsonValueError,
                  f"messages[{turn}].tool_calls[0].function.arguments", "NaN"))
    for item, error, field, said in cases:
        with pytest.raises(error, match=said) as info:
            nestful.add_item(item)
        assert info.value.field == field
    assert len(nestful.add_item(row)) == len(nestful) + 1

def test_add_item_keeps_integers_beyond_64_bits_and_floats_exact(nestful):
    meta = {**nestful[0]["meta"], "big": [2**70, -(10**30)], "f": 0.1 + 0.2, "z": -0.0, "s": " 123456789012345678901234"}
    added = nestful.add_item({**nestful[0], "meta": meta})[len(nestful)]["meta"]
    assert td.dumps(added) == td.dumps(meta) and [type(v) for v in added["big"]] == [int, int]


def test_a_stream_with_a_renamed_media_column_pickles_as_the_stream_does():
    """Renaming a media column on a stream mapped it with a function local to the rename: the stream could no longer
    be pickled (AttributeError: Can't pickle local object), as a torch DataLoader worker started by spawn (macOS's
    and Windows' default) pickles it, where the stream before the rename went."""
    import pickle

    import orjson

    stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    renamed = stream.rename_column("images", "pictures")
    again = pickle.loads(pickle.dumps(renamed))
    assert isinstance(again.features, td.ExactFeatures) and list(again.features) == list(renamed.features)
    rows = list(again)
    assert any(r["pictures"] for r in rows) and orjson.dumps(rows) == orjson.dumps(list(renamed))


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_a_column_read_by_name_gives_the_values_its_rows_hold(source, cache_dir):
    """``ds["messages"]`` (datasets' ``Column``) reads one column through a dataset rebuilt with plain
    ``Features``: its messages came back with every key (``tool_calls: []``, ``reasoning_content: None``)."""
    for ds in td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir).values():
        rows = list(ds)
        for column in ("messages", "tools", "meta", "images"):
            expected = [r.get(column, []) for r in rows]
            assert json_bytes(list(ds[column])) == json_bytes(expected)
            assert json_bytes(ds[column][0]) == json_bytes(expected[0])
            assert json_bytes(ds[column][: len(ds)]) == json_bytes(expected)
        for row in ({"messages": m} for m in ds["messages"]):
            assert_chat_shape(row)


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_a_stream_selecting_every_column_gives_its_rows(source):
    """Selecting every column of a stream (in any order, or ``remove_columns([])``) leaves datasets no cast to
    apply, so it took each key of our rows, which leave an empty media column out: KeyError 'images'."""
    for stream in td.load(source, data_files=td.sample_files(source), streaming=True).values():
        rows = list(stream)
        columns = list(stream.features)
        assert json_bytes(list(stream.select_columns(columns))) == json_bytes(rows)
        assert json_bytes(list(stream.remove_columns([]))) == json_bytes(rows)
        reordered = list(stream.select_columns(columns[::-1]))
        assert [list(r) for r in reordered] == [[c for c in columns[::-1] if c in r] for r in rows]
        assert json_bytes([{c: r[c] for c in columns if c in r} for r in reordered]) == json_bytes(rows)
        shuffled = stream.select_columns(columns).shuffle(seed=0, buffer_size=100)  # its shards reordered
        assert sorted(json_bytes(r) for r in shuffled) == sorted(json_bytes(r) for r in rows)
        tables = list(stream.remove_columns([]).with_format("arrow").iter(batch_size=4))
        assert sum(t.num_rows for t in tables) == len(rows)


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_a_stream_column_read_by_name_gives_what_map_style_gives(source, cache_dir):
    """A stream's ``ds["images"]`` (datasets' ``IterableColumn``) took the key from each row, which leaves an empty
    media column out: KeyError 'images' on the first row without media."""
    files = td.sample_files(source)
    mapped = td.load(source, data_files=files, cache_dir=cache_dir)
    for split, stream in td.load(source, data_files=files, streaming=True).items():
        rows = list(stream)
        for column in ("messages", "tools", "meta", *td.MEDIA_COLUMNS):
            expected = [r.get(column, []) for r in rows]
            assert json_bytes(list(stream[column])) == json_bytes(expected)
            assert json_bytes(list(stream[column])) == json_bytes(list(mapped[split][column]))


def test_a_media_column_asked_for_by_name_is_handed_to_map_even_where_empty(cache_dir):
    """``map(..., input_columns=["images"])`` decodes the rows with only that column and takes it from each: a
    row without images left it out, so the map failed (KeyError: 'images'); a batch without any, the same."""
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir)
    counts = [len(r.get("images", [])) for r in ds]
    assert 0 in counts and any(counts)  # rows with and without images
    one = ds.map(lambda images: {"n": len(images)}, input_columns=["images"])
    assert one["n"] == counts
    batched = ds.map(lambda images: {"n": [len(i) for i in images]}, input_columns=["images"], batched=True,
                     batch_size=1)
    assert batched["n"] == counts
    assert [len(i) for i in ds.with_format(columns=["images"])["images"]] == counts
    assert [len(r["images"]) for r in ds.with_format(columns=["images"])] == counts
    for row in ds:  # whole rows keep leaving empty media out
        assert_chat_shape(row)


def test_a_stream_hands_a_media_column_asked_for_to_map_and_filter_as_map_style_does(cache_dir):
    """A stream's ``map``/``filter`` with ``input_columns=["images"]`` took the column from each row, which leaves
    empty media out: KeyError 'images' on the first row without images."""
    files = td.sample_files("ms_swift")
    ds = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    stream = td.load("ms_swift", data_files=files, split="train", streaming=True)
    counts = [len(r.get("images", [])) for r in ds]
    assert 0 in counts and any(counts)
    mapped = list(stream.map(lambda images: {"n": len(images)}, input_columns="images"))
    assert [r["n"] for r in mapped] == ds.map(lambda images: {"n": len(images)}, input_columns="images")["n"] == counts
    for row in mapped:  # the rows themselves keep their shape
        assert_chat_shape(row)
    batched = stream.map(lambda images, i, k: {"n": [len(x or []) * k for x in images], "i": i},
                         with_indices=True, input_columns=["images"], batched=True, batch_size=1, fn_kwargs={"k": 2})
    assert [(r["n"], r["i"]) for r in batched] == [(2 * c, i) for i, c in enumerate(counts)]
    kept = stream.filter(lambda images, id: not images and id, input_columns=["images", "id"])
    assert [r["id"] for r in kept] == [r["id"] for r in ds if "images" not in r]
    with pytest.raises(KeyError):  # a column no row has is datasets' error, as it was
        list(stream.map(lambda x: {"n": 0}, input_columns=["nope"]))


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_decoded_rows_make_a_dataset_again_with_from_list(source, cache_dir):
    """``Dataset.from_list`` takes its columns from the first row's keys, and a decoded row without media has no
    media keys: ``Dataset.from_list(list(ds), features=ds.features)`` failed ("Keys mismatch")."""
    for ds in td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir).values():
        rows = list(ds)
        assert not any(c in rows[0] for c in td.MEDIA_COLUMNS)  # the case datasets could not take
        for features in (ds.features, td.UNIFIED_FEATURES):
            again = datasets.Dataset.from_list(rows, features=features)
            assert again.column_names == list(td.UNIFIED_FEATURES)
            assert json_bytes(list(td.exact(again))) == json_bytes(rows)


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_a_map_gives_its_rows_in_the_chat_shape_without_exact_again(source, cache_dir):
    """datasets' writer gives a map-style ``map`` output fresh plain ``Features``: its rows came back with every key
    (``tool_calls: []`` on each answer, an empty call turn under Hermes-3's template; ``images: []``, which TRL
    takes for vision data) unless passed through ``td.exact`` again. A column added or the messages rewritten,
    the rows are the ones the function returned, in the decoded shape."""
    ids_rewritten = 0
    for ds in td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir).values():
        rows = list(ds)
        counted = ds.map(lambda r: {"turns": len(r["messages"])})
        assert list(counted) == [{**r, "turns": len(r["messages"])} for r in rows]
        rewritten = ds.map(td.short_call_ids)
        assert list(rewritten) == [td.short_call_ids(r) for r in rows]
        ids_rewritten += sum(a != b for a, b in zip(rewritten, rows))
        for row in list(counted) + list(rewritten) + [rewritten[0]]:
            assert_chat_shape(row)
        # exact: 0.3 and 12.5 among NESTFUL's (whose references now name the calls' new ids)
        assert call_arguments(rewritten) == call_arguments(td.short_call_ids(r) for r in rows)
    assert ids_rewritten > 0


def _yield_rows(rows):
    yield from rows


@pytest.mark.parametrize("source", sorted(td.SOURCES))
def test_a_dataset_made_from_decoded_rows_with_their_features_gives_them_back(source, cache_dir, tmp_path):
    """``from_list``, ``from_dict`` and ``from_generator`` with ``features=ds.features`` built plain ``Features``: the
    rows came back with every key (``images: []``, which TRL refuses as vision data, ``tool_calls: None`` on each
    answer), also once concatenated with ``ds``; and ``from_dict`` of a batch without media failed
    ("Keys mismatch")."""
    for ds in td.load(source, data_files=td.sample_files(source), cache_dir=cache_dir).values():
        rows = list(ds)
        made = {"from_list": datasets.Dataset.from_list(rows, features=ds.features),
                "from_dict": datasets.Dataset.from_dict(ds[:], features=ds.features),
                "from_generator": datasets.Dataset.from_generator(_yield_rows, features=ds.features,
                                                                  gen_kwargs={"rows": rows},
                                                                  cache_dir=str(tmp_path / "generated"))}
        for how, again in made.items():
            assert json_bytes(list(again)) == json_bytes(rows), how
            assert json_bytes(list(datasets.concatenate_datasets([ds, again]))) == json_bytes(rows + rows), how
            for row in again:
                assert_chat_shape(row)


def _yield_streamed(paths):
    for path in paths:
        yield from td.load("toolmind", data_files=path, split="synthetic", streaming=True)


@pytest.mark.parametrize("num_proc", [None, 2])
def test_a_bad_row_of_a_stream_given_to_from_generator_raises_its_own_error(tmp_path, num_proc):
    """A stream's rows given to ``Dataset.from_generator``: a bad row stopped it with datasets' "An error occurred
    while generating the dataset", and with ``num_proc`` the file, row and field were in a traceback text only."""
    import pyarrow.parquet as pq

    sample = td.sample_files("toolmind")["train"][0]
    rows = pq.read_table(sample).to_pylist()
    rows[1]["messages"] = rows[1]["messages"].replace('"role": "reasoning"', '"role": "thought"', 1)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pq.read_table(sample).from_pylist(rows), bad)
    features = td.load("toolmind", data_files=sample, split="synthetic", streaming=True).features
    with pytest.raises(td.InvalidValueError) as err:
        datasets.Dataset.from_generator(_yield_streamed, features=features, gen_kwargs={"paths": [sample, str(bad)]},
                                        cache_dir=str(tmp_path / "generated"), num_proc=num_proc)
    assert (err.value.row, err.value.field) == (1, "messages[2].role") and "bad.parquet" in str(err.value)


def test_a_value_from_generator_cannot_store_is_named_by_row_and_field(nestful, tmp_path):
    """datasets encodes each generated row through the features given: NaN in a row's ``meta`` was refused naming
    the field only (add_item's message), not the row among thousands, as from_list names it."""
    rows = [complete_row(row) for row in nestful]
    bad = len(rows) - 2
    rows[bad]["meta"] = {**rows[bad]["meta"], "x": float("nan")}
    with pytest.raises(td.JsonValueError, match="NaN") as info:
        datasets.Dataset.from_generator(lambda: iter(rows), features=nestful.features, cache_dir=str(tmp_path))
    assert (info.value.row, info.value.field) == (bad, "meta")


def test_a_map_returning_arrow_tables_with_text_from_another_writer_keeps_integers_beyond_64_bits(nestful):
    """A map's output keeps exact features; a function may return Arrow tables whose JSON text another writer wrote,
    without this package's mark on integers beyond 64 bits, so that text is read as ``td.exact`` reads it (read as
    ours, ``{"x": 2**70 + 1}`` came back as the float 1.1805916207174113e+21)."""
    import pyarrow as pa

    def foreign_meta(table):
        text = pa.array(['{"x":%d}' % (2**70 + 1)] * table.num_rows, type=table.schema.field("meta").type)
        return table.set_column(table.schema.get_field_index("meta"), "meta", text)

    mapped = nestful.with_format("arrow").map(foreign_meta, batched=True).with_format(None)
    assert [row["meta"] for row in mapped] == [{"x": 2**70 + 1}] * len(nestful)
    assert [row["messages"] for row in mapped] == [row["messages"] for row in nestful]


def test_a_value_from_list_and_from_dict_cannot_store_is_named_by_row_and_field(nestful):
    """With ``features=ds.features`` a value JSON cannot hold (NaN in ``meta``) was refused as "nan at $.x", naming
    neither the row nor the column among thousands: datasets encodes column by column."""
    rows = [complete_row(row) for row in nestful]
    bad = len(rows) - 2
    rows[bad]["meta"] = {**rows[bad]["meta"], "x": float("nan")}
    made = {"from_list": lambda: datasets.Dataset.from_list(rows, features=nestful.features),
            "from_dict": lambda: datasets.Dataset.from_dict({c: [r[c] for r in rows] for c in nestful.features},
                                                            features=nestful.features)}
    for how, make in made.items():
        with pytest.raises(td.JsonValueError, match="NaN") as info:
            make()
        assert (info.value.row, info.value.field) == (bad, "meta"), how
        assert f"row {bad}, field 'meta'" in str(info.value), how


@pytest.mark.parametrize("value, said", [(float("nan"), "NaN"), (float("-inf"), "Infinity"),
                                         ({1: "a"}, "JSON keys are strings"), ({1}, "set"),
                                         (datetime.date(2020, 1, 2), "date"), (10**5000, "too long")],
                         ids=["nan", "-inf", "int-key", "set", "date", "long-int"])
def test_a_value_json_cannot_hold_in_a_later_message_is_refused_by_every_constructor(nestful, value, said):
    """datasets encodes a list's items only where encoding its first item changes it: the exact features never saw
    the arguments of a call after a message without one, and its writer stored NaN there as null (a non-string key
    as text, a set as a list, a date as a number; an integer too long to write was Python's bare ValueError).
    Refused as add_item refuses it, by from_list and from_dict (naming row and field) and by a map with these
    features; integers beyond 64 bits stay exact on the same paths."""
    rows = [complete_row(row) for row in nestful]
    bad = len(rows) - 2
    at = next(i for i, m in enumerate(rows[bad]["messages"]) if m["tool_calls"])
    assert at > 0 and not rows[bad]["messages"][0]["tool_calls"]
    call = rows[bad]["messages"][at]["tool_calls"][0]["function"]
    field = f"messages[{at}].tool_calls[0].function.arguments"

    def made(arguments):
        call["arguments"] = arguments
        yield "from_list", lambda: datasets.Dataset.from_list(rows, features=nestful.features)
        yield "from_dict", lambda: datasets.Dataset.from_dict({c: [r[c] for r in rows] for c in nestful.features},
                                                              features=nestful.features)
        for features in (nestful.features, None):
            yield f"map {features is None}", lambda: nestful.map(lambda r, i: rows[i], with_indices=True,
                                                                 features=features)

    for how, make in made({"x": value}):
        with pytest.raises(td.JsonValueError, match=said) as info:
            make()
        if how.startswith("from"):
            assert (info.value.row, info.value.field) == (bad, field), how
    for how, make in made({"x": 2**70 + 1, "y": 0.1}):
        stored = make()[bad]["messages"][at]["tool_calls"][0]["function"]["arguments"]
        assert json_bytes(stored) == json_bytes({"x": 2**70 + 1, "y": 0.1}), how


@pytest.mark.parametrize("field, value, message", [
    ("messages", "Hello", "expected a list, got string"),
    ("messages[0]", ["user", "Hello"], "expected an object, got array"),
    ("tools", '[{"type": "function", "function": {"name": "f"}}]', "expected a list, got string"),
    ("images", "cat.png", "expected a list, got string"),
    ("call_graph", 5, "expected a list, got number"),
    ("call_graph", {"consumer": "c0"}, "expected a list, got object"),
])
def test_a_value_of_another_kind_given_to_from_list_and_from_dict_is_named_by_row_and_field(nestful, field, value,
                                                                                              message):
    """Text where the messages go, or a list where a message goes, failed in datasets' encoder with a bare
    AttributeError ('str' object has no attribute 'get'), naming neither the value nor its row, as did a number or
    an object for the call graph (a column holding no JSON, TypeError or AttributeError); text for the tools
    or the images (JSON text, one path) was stored one character an entry, as add_item refuses to."""
    rows = [complete_row(row) for row in nestful]
    bad = len(rows) - 2
    if field == "messages[0]":
        rows[bad]["messages"][0] = value
    else:
        rows[bad][field] = value
    made = {"from_list": lambda: datasets.Dataset.from_list(rows, features=nestful.features),
            "from_dict": lambda: datasets.Dataset.from_dict({c: [r[c] for r in rows] for c in nestful.features},
                                                            features=nestful.features),
            "from_pandas": lambda: datasets.Dataset.from_pandas(pandas.DataFrame(rows), features=nestful.features)}
    for how, make in made.items():
        with pytest.raises(td.InvalidValueError, match=message) as info:
            make()
        assert (info.value.row, info.value.field) == (bad, field), how


@pytest.mark.parametrize("field, value, message", [
    ("messages[0].content", ["a", "b"], "expected string, got array"),
    ("id", {"x": 1}, "expected string, got object"),
    ("subset", [1], "expected string, got array"),
])
def test_a_list_or_object_given_to_from_list_and_from_dict_for_text_is_named_by_row_and_field(nestful, field, value,
                                                                                                message):
    """A list or an object where the unified schema holds text was stored as its str() ("['a', 'b']" as a message's
    content) by from_list and from_dict, which encode with datasets' plain features; add_item refused it."""
    rows = [complete_row(row) for row in nestful]
    bad = len(rows) - 2
    if field == "messages[0].content":
        rows[bad]["messages"][0]["content"] = value
    else:
        rows[bad][field] = value
    made = {"from_list": lambda: datasets.Dataset.from_list(rows, features=nestful.features),
            "from_dict": lambda: datasets.Dataset.from_dict({c: [r[c] for r in rows] for c in nestful.features},
                                                            features=nestful.features)}
    for how, make in made.items():
        with pytest.raises(td.InvalidValueError, match=message) as info:
            make()
        assert (info.value.row, info.value.field) == (bad, field), how


@pytest.mark.parametrize("features", ["given", None])
def test_a_map_returning_text_for_a_list_of_json_values_is_refused(nestful, features):
    """A map returning the tools as JSON text, or a call's list of calls as text, stored them one character an
    entry (["[", "{", ...]) where from_list and add_item refuse the same row."""
    rows = [complete_row(row) for row in nestful]
    messages = rows[-1]["messages"]
    at = next(i for i, m in enumerate(messages) if m["tool_calls"])
    for edit in ({"tools": td.dumps(rows[-1]["tools"])},
                 {"messages": [{**m, "tool_calls": "[]"} if i == at else m for i, m in enumerate(messages)]}):
        edited = [*rows[:-1], {**rows[-1], **edit}]
        with pytest.raises(td.InvalidValueError, match="expected a list, got string"):
            nestful.map(lambda r, i: edited[i], with_indices=True,
                        features=nestful.features if features else None)


@pytest.mark.parametrize("batch_size", [3, 6, 1000])
def test_a_batched_stream_map_or_filter_gives_rows_without_media_no_media_keys(batch_size, cache_dir):
    """A stream's batched ``map`` and ``filter`` cut their rows from decoded batches, which keep a media column where
    any row of the batch has media: the text rows of such a batch came out with ``images: []`` and the others
    without the key (after ``ds.map(td.short_call_ids, batched=True)``, a first row with an ``images`` key makes
    TRL take the text dataset for vision data). Every row comes out as the row function and map-style give it."""
    files = td.sample_files("ms_swift")
    ds = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    stream = td.load("ms_swift", data_files=files, split="train", streaming=True)
    rows = list(ds)
    assert any("images" in r for r in rows) and not all("images" in r for r in rows)  # text rows beside images
    def exactly(rows):  # byte for byte, columns in their order
        return [td.dumps(r) for r in rows]

    for rewrite in (td.short_call_ids, td.one_call_per_turn, td.reasoning_in_content):
        want = exactly(rewrite(r) for r in rows)
        assert exactly(ds.map(rewrite, batched=True, batch_size=batch_size)) == want
        assert exactly(stream.map(rewrite, batched=True, batch_size=batch_size)) == want
    assert list(stream.map(lambda b: b, batched=True, batch_size=batch_size)) == rows
    kept = stream.filter(lambda b: [True] * len(b["id"]), batched=True, batch_size=batch_size)
    assert list(kept) == rows
    # a function given the batch sees a row's media as the README says: its list where it has some, else nothing
    seen = []
    list(stream.map(lambda b: seen.extend(x or [] for x in b.get("images", [None] * len(b["id"]))) or b,
                    batched=True, batch_size=batch_size))
    assert seen == [r.get("images", []) for r in rows]


@pytest.mark.parametrize("batch_size", [1, 3, 1000])
def test_a_batched_stream_function_gets_every_media_column_as_map_style_gives_it(batch_size, cache_dir):
    """A stream's batched ``map``/``filter`` handed its function a media column only where a row of the batch had
    media, ``None`` for the others: ``batch["images"]`` failed (KeyError) on a batch without images. The function
    gets every media column, ``[]`` for a row without media, as map-style gives it."""
    files = td.sample_files("ms_swift")
    ds = td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)
    stream = td.load("ms_swift", data_files=files, split="train", streaming=True)
    counts = [len(r.get("images", [])) for r in ds]
    assert 0 in counts and any(counts)

    def media(batch):
        return {"media": [[len(batch[c][i]) for c in td.MEDIA_COLUMNS] for i in range(len(batch["id"]))]}

    want = [[len(r.get(c, [])) for c in td.MEDIA_COLUMNS] for r in ds]
    assert ds.map(media, batched=True, batch_size=batch_size)["media"] == want
    mapped = list(stream.map(media, batched=True, batch_size=batch_size))
    assert [r["media"] for r in mapped] == want
    for row in mapped:  # the rows keep their shape
        assert_chat_shape(row)
    kept = stream.filter(lambda b: [not b["images"][i] for i in range(len(b["id"]))], batched=True,
                         batch_size=batch_size)
    assert [r["id"] for r in kept] == [r["id"] for r in ds if "images" not in r]


@pytest.mark.parametrize("format_type", ["pandas", "arrow", "numpy"])
def test_a_batched_stream_filter_in_a_table_or_tensor_format_gets_the_formats_batches(format_type):
    """Batches of a stream formatted as pandas, arrow or numpy are the format's own (a DataFrame, a Table, arrays)
    and go to the function as datasets gives them; only Python batches get every media column."""
    stream = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    ids = [r["id"] for r in stream]
    kept = stream.with_format(format_type).filter(lambda b: [True] * len(b["id"]), batched=True, batch_size=4)
    assert [str(i) for r in kept for i in (r["id"] if format_type != "numpy" else [r["id"]])] == ids


def test_a_map_whose_messages_make_no_call_saves_to_disk_and_stores_empty_calls_as_the_loader_does(tmp_path):
    """The README's prompt-completion map of ToolMind's rows that end on an answer: every ``completion`` message
    leaves ``tool_calls`` out. The map stored it as null where the loader stores ``[]``, so ``to_list()`` was not
    the complete row form, and a column of only such messages made ``save_to_disk`` (and ``push_to_hub``) fail in
    pyarrow ("MakeBuilder: cannot construct builder for type extension<arrow.json>")."""
    ds = td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic",
                 cache_dir=str(tmp_path / "cache"))
    features = datasets.Features({**ds.features, "prompt": ds.features["messages"],
                                  "completion": ds.features["messages"]})
    del features["messages"]
    answers = ds.filter(lambda r: r["messages"][-1]["role"] == "assistant" and not r["messages"][-1].get("tool_calls"))
    pairs = answers.map(lambda r: {"prompt": r["messages"][:-1], "completion": r["messages"][-1:]},
                        remove_columns=["messages"], features=features)
    assert len(pairs) >= 5
    assert [row["completion"] for row in pairs.to_list()] == [complete_row(row)["messages"][-1:] for row in answers]
    pairs.save_to_disk(str(tmp_path / "pairs"))
    assert list(td.exact(datasets.load_from_disk(str(tmp_path / "pairs")))) == list(pairs)
    # the same for a rewrite of messages that hold no call (a chat-only file)
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n',
                    encoding="utf-8")
    mapped = td.load("ms_swift", data_files=str(chat), split="train",
                     cache_dir=str(tmp_path / "cache")).map(td.reasoning_in_content)
    mapped.save_to_disk(str(tmp_path / "chat"))
    assert list(td.exact(datasets.load_from_disk(str(tmp_path / "chat")))) == list(mapped)
