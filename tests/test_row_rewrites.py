"""The per-row rewrites for chat templates (``td.short_call_ids``, ``td.one_call_per_turn``,
``td.reasoning_in_content``) on every source's bundled sample, without transformers: what each promises of the
row's structure. (Rendering under the real templates: tests/test_call_ids.py, tests/test_tool_templates.py.)"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import tooluse_datasets as td


def sample_rows() -> list[dict]:
    return [row for source in td.SOURCES
            for ds in td.load(source, data_files=td.sample_files(source), streaming=True).values() for row in ds]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return sample_rows()


def _calls(row: dict) -> list[dict]:
    return [c for m in row["messages"] for c in m.get("tool_calls") or []]


def test_one_call_per_turn_leaves_one_call_a_turn_each_followed_by_its_results(rows):
    split = 0
    for row in rows:
        before = copy.deepcopy(row)
        out = td.one_call_per_turn(row)
        assert row == before  # not changed in place
        assert _calls(out) == _calls(row)  # every call, in order
        assert [m for m in out["messages"] if m["role"] in ("system", "user")] == \
            [m for m in row["messages"] if m["role"] in ("system", "user")]
        # no turn has more than one call, and each call is followed by its own results
        for i, m in enumerate(out["messages"]):
            calls = m.get("tool_calls") or []
            assert len(calls) <= 1
            if calls:
                results = []
                for r in out["messages"][i + 1:]:
                    if r["role"] != "tool":
                        break
                    results.append(r)
                original = next(t for t in row["messages"] if calls[0] in (t.get("tool_calls") or []))
                answered = [r for r in row["messages"] if r["role"] == "tool"
                            and r.get("tool_call_id") == calls[0]["id"]]
                assert [r for r in results if r.get("tool_call_id") == calls[0]["id"]] == answered
                if original is not m and len(original["tool_calls"]) > 1:
                    split += 1
        # the text and reasoning of a split turn stay on its first call
        texts = [m["content"] for m in row["messages"] if m["role"] == "assistant" and m["content"]]
        assert [m["content"] for m in out["messages"] if m["role"] == "assistant" and m["content"]] == texts
        assert sum(m["role"] == "tool" for m in out["messages"]) == sum(m["role"] == "tool" for m in row["messages"])
    assert split > 0  # the samples have turns of several calls (NESTFUL, ToolMind)


def test_reasoning_in_content_writes_each_reasoning_before_its_text(rows):
    moved = 0
    for row in rows:
        before = copy.deepcopy(row)
        out = td.reasoning_in_content(row)
        assert row == before
        for old, new in zip(row["messages"], out["messages"], strict=True):
            reasoning = old.get("reasoning_content")
            if reasoning:
                assert new["content"] == f"<think>\n{reasoning}\n</think>\n\n{old['content']}"
                assert "reasoning_content" not in new
                assert {k: v for k, v in new.items() if k != "content"} == \
                    {k: v for k, v in old.items() if k not in ("content", "reasoning_content")}
                moved += 1
            else:
                assert new == old
    assert moved > 0  # ToolMind and ms-swift samples carry reasoning


def test_short_call_ids_rewrites_every_id_and_its_results_consistently(rows):
    for row in rows:
        out = td.short_call_ids(row)
        old_ids = [c["id"] for c in _calls(row)]
        new_ids = [c["id"] for c in _calls(out)]
        assert all(len(i) == 9 and i.isalnum() for i in new_ids)
        assert len(set(new_ids)) == len(set(old_ids))  # distinct calls stay distinct
        mapping = dict(zip(old_ids, new_ids))
        for old, new in zip(row["messages"], out["messages"], strict=True):
            if old["role"] == "tool" and old.get("tool_call_id") in mapping:
                assert new["tool_call_id"] == mapping[old["tool_call_id"]]
        assert td.short_call_ids(row) == out  # the same in every run


REWRITES = (td.short_call_ids, td.one_call_per_turn, td.reasoning_in_content, td.drop_trailing_results)


def _parallel_row(rows: list[dict]) -> dict:
    """A real row whose first call turn makes several calls, each answered (NESTFUL, ToolMind)."""
    return next(row for row in rows if any(len(m.get("tool_calls") or []) > 1 for m in row["messages"])
                and any(m["role"] == "tool" for m in row["messages"]))


def _call_turn(row: dict) -> int:
    return next(i for i, m in enumerate(row["messages"]) if len(m.get("tool_calls") or []) > 1)


@pytest.mark.parametrize("rewrite", REWRITES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("spoil, error, field", [
    (lambda row, i: row.pop("messages"), td.MissingFieldError, "messages"),
    (lambda row, i: row.update(messages=None), td.InvalidValueError, "messages"),
    (lambda row, i: row["messages"].__setitem__(i, "call f"), td.InvalidValueError, "messages[{i}]"),
    (lambda row, i: row["messages"][i].update(tool_calls=row["messages"][i]["tool_calls"][0]), td.InvalidValueError,
     "messages[{i}].tool_calls"),
    (lambda row, i: row["messages"][i]["tool_calls"].__setitem__(1, "f"), td.InvalidValueError,
     "messages[{i}].tool_calls[1]"),
    (lambda row, i: row["messages"][i].update(content=["a", "b"]), td.InvalidValueError, "messages[{i}].content"),
], ids=["no messages", "null messages", "message not an object", "tool_calls an object", "call not an object",
        "content a list"])
def test_row_rewrites_refuse_a_malformed_row_naming_its_field(rows, rewrite, spoil, error, field):
    row = copy.deepcopy(_parallel_row(rows))
    i = _call_turn(row)
    spoil(row, i)
    with pytest.raises(error) as caught:
        rewrite(row)
    assert caught.value.field == field.format(i=i)
    assert row["id"] in str(caught.value)  # which row, in a map over thousands


@pytest.mark.parametrize("rewrite", [td.short_call_ids, td.one_call_per_turn], ids=lambda f: f.__name__)
def test_calls_without_ids_are_refused_not_given_one_id_or_every_result(rows, rewrite):
    """Results pair with calls by id: id-less calls of one turn all took the same new id (short_call_ids), or
    each took every id-less result (one_call_per_turn, which wrote each result once per call)."""
    row = copy.deepcopy(_parallel_row(rows))
    i = _call_turn(row)
    for call in row["messages"][i]["tool_calls"]:
        call["id"] = None
    for m in row["messages"]:
        if m["role"] == "tool":
            m.pop("tool_call_id", None)
    with pytest.raises(td.MissingFieldError) as caught:
        rewrite(row)
    assert caught.value.field == f"messages[{i}].tool_calls[0].id"


def test_one_call_per_turn_refuses_a_turn_whose_calls_share_an_id_rather_than_repeat_results(rows):
    """Two calls of one turn with one id: each result followed both, so the split row held every result twice."""
    row = copy.deepcopy(_parallel_row(rows))
    i = _call_turn(row)
    calls = row["messages"][i]["tool_calls"]
    old = calls[1]["id"]
    calls[1]["id"] = calls[0]["id"]
    for m in row["messages"]:
        if m.get("tool_call_id") == old:
            m["tool_call_id"] = calls[0]["id"]
    with pytest.raises(td.InvalidValueError, match="not unique in the turn") as caught:
        td.one_call_per_turn(row)
    assert caught.value.field == f"messages[{i}].tool_calls[1].id"


@pytest.mark.parametrize("complete", [False, True], ids=["decoded", "complete"])
def test_reasoning_in_content_refuses_reasoning_beside_null_text_rather_than_write_none(rows, complete):
    """A null content (a row built by hand, or read with plain datasets from a file holding null) came out as the
    reasoning followed by the word "None", trained as the turn's text."""
    row = copy.deepcopy(next(row for row in rows if any(m.get("reasoning_content") for m in row["messages"])))
    if complete:
        row = td.complete_row(row)
    i = next(i for i, m in enumerate(row["messages"]) if m.get("reasoning_content"))
    row["messages"][i]["content"] = None
    with pytest.raises(td.InvalidValueError, match="content is null") as caught:
        td.reasoning_in_content(row)
    assert caught.value.field == f"messages[{i}].content"
    del row["messages"][i]["content"]
    with pytest.raises(td.MissingFieldError) as caught:
        td.reasoning_in_content(row)
    assert caught.value.field == f"messages[{i}].content"


def test_short_call_ids_refuses_a_length_too_short_for_the_row_rather_than_hang(rows):
    """One character tells 62 ids apart: a row with more distinct ids drew new ones forever."""
    row = copy.deepcopy(_parallel_row(rows))
    i = _call_turn(row)
    call = row["messages"][i]["tool_calls"][0]
    row["messages"][i]["tool_calls"] += [{**call, "id": f"extra_{k}"} for k in range(62)]
    with pytest.raises(ValueError, match="larger length"):
        td.short_call_ids(row, length=1)
    ids = [c["id"] for c in td.short_call_ids(row, length=2)["messages"][i]["tool_calls"]]
    assert len(set(ids)) == len(ids)


def _in_key_order(row: dict) -> list:
    return list(row.items())  # columns in the order the row function gives them too


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_row_rewrites_take_batches_as_rows(cache_dir, streaming):
    """``ds.map(f, batched=True)`` gave the helpers a batch, on which they failed with a bare ValueError or
    AttributeError: each row of it is now rewritten as on its own, every column kept, a row without media without
    media keys."""
    checked = 0
    for source in td.SOURCES:
        for ds in td.load(source, data_files=td.sample_files(source), streaming=streaming,
                          cache_dir=cache_dir).values():
            rows = list(ds)
            for rewrite in REWRITES:
                assert [_in_key_order(row) for row in ds.map(rewrite, batched=True, batch_size=4)] == \
                    [_in_key_order(rewrite(row)) for row in rows]
            checked += len(rows)
    assert checked >= 30


@pytest.mark.parametrize("spoil, error, field", [
    (lambda row: row.update(messages="hi"), td.InvalidValueError, "messages"),
    (lambda row: row["messages"].__setitem__(1, "hi"), td.InvalidValueError, "messages[1]"),
    (lambda row: row["messages"][1].pop("role"), td.MissingFieldError, "messages[1].role"),
], ids=["messages a string", "message a string", "message without role"])
def test_complete_row_refuses_malformed_messages_naming_the_field(rows, spoil, error, field):
    """complete_row failed on these with a bare TypeError or KeyError."""
    row = copy.deepcopy(rows[0])
    assert td.complete_row(row)["messages"] == [td.complete_row({"messages": [m]})["messages"][0]
                                                for m in row["messages"]]
    spoil(row)
    with pytest.raises(error) as caught:
        td.complete_row(row)
    assert caught.value.field == field


def test_reasoning_in_content_moves_only_assistant_reasoning(rows):
    """A user or tool message carrying reasoning (a row built by hand) had it written into the prompt's text."""
    row = copy.deepcopy(next(row for row in rows if any(m.get("reasoning_content") for m in row["messages"])))
    user = next(i for i, m in enumerate(row["messages"]) if m["role"] == "user")
    row["messages"][user]["reasoning_content"] = "the user thinks aloud"
    out = td.reasoning_in_content(row)
    assert out["messages"][user] == row["messages"][user]
    assert all(m.get("reasoning_content") is None for m in out["messages"] if m["role"] == "assistant")


@pytest.mark.parametrize("rewrite", ["short_call_ids", "one_call_per_turn", "reasoning_in_content", "drop_trailing_results"])
@pytest.mark.parametrize("messages", [None, "hi"], ids=["null", "text"])
def test_a_batch_with_a_row_whose_messages_are_not_a_list_names_that_row(rows, rewrite, messages):
    """A batch whose second row's messages were null or text was taken for one row, its messages column for that
    row's messages: the error named ``messages[1]`` as "a message must be an object" and no row."""
    two = [copy.deepcopy(row) for row in rows[:2]]
    batch = {key: [row.get(key) for row in two] for key in two[0]}
    batch["messages"][1] = messages
    with pytest.raises(td.InvalidValueError,
                       match=f"^row id {two[1]['id']!r}, field 'messages': messages must be a list") as caught:
        getattr(td, rewrite)(batch)
    assert caught.value.field == "messages"
    # Named once, also by an error that comes back from a worker process (num_proc, DataLoader workers).
    assert str(caught.value).count(two[1]["id"]) == 1
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)


def test_strip_empty_refuses_a_row_or_a_dataset_saying_it_takes_messages(rows):
    """A row (a dict) was iterated as its keys, raising a bare ``AttributeError: 'str' object has no attribute
    'items'``; a dataset was iterated as its rows, each stripped as if it were a message."""
    row = next(row for row in rows if any("tool_calls" not in m for m in row["messages"]))
    stripped = td.strip_empty(td.complete_row(row)["messages"])
    assert stripped == [{k: v for k, v in m.items() if v not in (None, [], "") or k in ("role", "content")}
                        for m in td.complete_row(row)["messages"]]
    assert all("tool_calls" not in m for m, raw in zip(stripped, row["messages"]) if "tool_calls" not in raw)
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True)
    for given, named in [(row, "dict"), (ds, "IterableDataset"), (row["messages"][0], "dict"),
                         ([row["messages"][0]["content"]], "a list holding str")]:
        with pytest.raises(TypeError, match=rf"takes a list of messages \(row\['messages'\]\), got {named}$"):
            td.strip_empty(given)


@pytest.mark.parametrize("config", ["swift", "raw"])
@pytest.mark.parametrize("helper", ["complete_row", *(f.__name__ for f in REWRITES)])
def test_row_helpers_refuse_a_row_of_a_formats_own_config_naming_its_role(helper, config):
    """An ms-swift row (config ``swift`` or ``raw``: ``tool_call`` / ``tool_response`` turns) came back unchanged
    from every rewrite (its calls not split, its ids not shortened, its trailing results kept) and was completed
    as a unified row, with no word that these helpers take unified rows."""
    files = td.sample_files("ms_swift")
    row = next(iter(td.load("ms_swift", config, data_files=files, split="train", streaming=True)))
    assert row["messages"][2]["role"] == "tool_call"
    with pytest.raises(td.InvalidValueError, match=r"role \"tool_call\" is not a unified role \(system, user, "
                                                   r"assistant, tool\): this takes rows of the 'unified' config"):
        getattr(td, helper)(row)
    unified = next(iter(td.load("ms_swift", data_files=files, split="train", streaming=True)))
    assert getattr(td, helper)(unified)["messages"]


def test_strip_empty_takes_a_numpy_row_s_messages(rows):
    # ds.with_format("numpy") hands a row's messages as an object array of dicts
    messages = np.array(rows[0]["messages"], dtype=object)
    assert td.strip_empty(messages) == td.strip_empty(list(rows[0]["messages"]))
