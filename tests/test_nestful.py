"""NESTFUL end to end on the real upstream rows in ../shared/data/nestful and on bundled samples."""
from __future__ import annotations

import json

import pytest

import tooluse_datasets as td
from tooluse_datasets.builder import ToolUseBuilder
from tooluse_datasets.builders.nestful.specs import output_fields
from tooluse_datasets.codec import dumps
from tooluse_datasets.schema import message, unified_row
from tooluse_datasets.source import RowContext
from tooluse_datasets.validation import check_row, get_rule

from conftest import shared_data
from hermes_template import render

SOURCE = td.registry.builder_class("nestful").SOURCE_CLASS()

TOY = ("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl")
GITHUB_CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
HF_CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_hf_string_format.jsonl")
ICL = ("nestful", "src", "icl_examples.json")
ALL_REAL = {"toy": TOY, "github_current": GITHUB_CURRENT, "hf_current": HF_CURRENT, "icl": ICL}


def upstream_rows(parts) -> list[dict]:
    path = shared_data(*parts)
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ctx(row=0):
    return RowContext("nestful", "test", row, "train")


@pytest.mark.parametrize("name", list(ALL_REAL))
@pytest.mark.parametrize("config", ["unified", "raw"])
def test_every_real_row_loads_identically_map_style_and_streaming(name, config, cache_dir):
    path = str(shared_data(*ALL_REAL[name]))
    expected_ids = [r["sample_id"] for r in upstream_rows(ALL_REAL[name])]
    mapped = td.load("nestful", config, data_files=path, split="train", cache_dir=cache_dir)
    streamed = list(td.load("nestful", config, data_files=path, split="train", streaming=True))
    assert len(mapped) == len(expected_ids) == len(streamed)
    assert list(mapped) == streamed
    ids = [r["sample_id"] if config == "raw" else r["meta"]["sample_id"] for r in streamed]
    assert ids == expected_ids
    if config == "unified":
        for row in streamed:
            td.validate_unified(row)


@pytest.mark.parametrize("name", list(ALL_REAL))
def test_raw_to_unified_to_raw_reproduces_every_upstream_row_exactly(name):
    for i, native in enumerate(upstream_rows(ALL_REAL[name])):
        raw = SOURCE.to_raw(native, ctx(i))
        back = SOURCE.from_unified(SOURCE.to_unified(raw, ctx(i)))
        assert dumps(back) == dumps(raw)  # order-sensitive: key order of calls and specs kept
        # ...and the raw row is the upstream row: same fields, same values, same key order.
        native_view = {k: native[k] for k in ("sample_id", "input", "output", "tools", "gold_answer")}
        if raw["gold_answer_text"] is None:
            assert dumps({k: raw[k] for k in native_view}) == dumps(native_view)
        else:  # HF string form: the structured columns were JSON text, gold_answer a Python-ish string
            assert raw["gold_answer_text"] == native["gold_answer"]
            assert raw["output"] == json.loads(native["output"]) and raw["tools"] == json.loads(native["tools"])


def test_the_two_upstream_forms_of_the_current_rows_give_the_same_unified_rows():
    github = [SOURCE.to_unified(SOURCE.to_raw(r, ctx()), ctx()) for r in upstream_rows(GITHUB_CURRENT)]
    hf = [SOURCE.to_unified(SOURCE.to_raw(r, ctx()), ctx()) for r in upstream_rows(HF_CURRENT)]
    assert len(github) == len(hf) == 2
    for g, h in zip(github, hf):
        assert h["meta"].pop("gold_answer_text") in ("40.0", "3")
        g["meta"].pop("gold_answer_text")
        assert dumps(g) == dumps(h)


def test_unified_row_keeps_order_labels_references_and_exposes_the_graph():
    first = upstream_rows(GITHUB_CURRENT)[0]  # 3a4b7b77: divide -> multiply -> add
    row = SOURCE.to_unified(SOURCE.to_raw(first, ctx()), ctx())
    assert row["id"] == "nestful/math/3a4b7b77-f0a1-4537-8623-432023f545bb"
    assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
    assert row["messages"][0]["content"] == first["input"]
    calls = row["messages"][1]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("$var_1", "divide"), ("$var_2", "multiply"), ("$var_3", "add")]
    assert calls[1]["function"]["arguments"] == {"arg_0": "$var_1.result$", "arg_1": 80}
    assert row["call_graph"] == [
        {"consumer": "$var_2", "argument": "arg_0", "producer": "$var_1", "output_field": "result"},
        {"consumer": "$var_3", "argument": "arg_1", "producer": "$var_2", "output_field": "result"},
    ]
    assert row["meta"]["gold_answer"] == 40.0


def test_tools_become_openai_json_schema_and_keep_output_parameters():
    toy = upstream_rows(TOY)
    math_row = next(r for r in toy if r["output"][0]["label"].startswith("$var_"))
    code_row = next(r for r in toy if r["output"][0]["label"] == "$var1")
    math_tools = SOURCE.to_unified(SOURCE.to_raw(math_row, ctx()), ctx())["tools"]
    code_tools = SOURCE.to_unified(SOURCE.to_raw(code_row, ctx()), ctx())["tools"]
    for tool in math_tools + code_tools:
        fn = tool["function"]
        assert tool["type"] == "function" and fn["parameters"]["type"] == "object"
        assert "properties" not in fn["parameters"]["properties"]  # JSON-Schema wrappers were unwrapped
        assert fn["output_parameters"], fn["name"]
        for prop in list(fn["parameters"]["properties"].values()) + list(fn["output_parameters"].values()):
            types = prop.get("type")
            for t in types if isinstance(types, list) else [types] if types else []:
                assert t in {"string", "number", "integer", "boolean", "array", "object", "null"}, prop
    # "int or float" (Jan-2025 math spec, singular output_parameter) -> number, output kept as plural key
    original = next(t for t in math_row["tools"] if "output_parameter" in t)
    converted = next(t["function"] for t in math_tools if t["function"]["name"] == original["name"])
    assert "output_parameter" not in converted and "result" in converted["output_parameters"]
    # the code spec's JSON-Schema "required" list survives the unwrapping
    wrapped = next(t for t in code_row["tools"] if "required" in t["parameters"])
    fn = next(t["function"] for t in code_tools if t["function"]["name"] == wrapped["name"])
    assert fn["parameters"]["required"] == wrapped["parameters"]["required"]


def test_a_label_with_a_closing_dollar_is_named_as_the_executor_names_it():
    """Upstream's executor removes every `$` from a label (spec §9), so "$var_1$" is the call var_1 that
    "$var_1.result$" reads; the loader named it "var_1$" and refused the reference as undefined."""
    first = json.loads(json.dumps(upstream_rows(GITHUB_CURRENT)[0]))  # 3a4b7b77: divide -> multiply -> add
    plain = SOURCE.to_unified(SOURCE.to_raw(first, ctx()), ctx())["call_graph"]
    first["output"][0]["label"] = "$var_1$"
    graph = SOURCE.to_unified(SOURCE.to_raw(first, ctx()), ctx())["call_graph"]
    assert [edge["producer"] for edge in graph] == ["$var_1$" if e["producer"] == "$var_1" else e["producer"]
                                                    for e in plain]
    assert any(edge["producer"] == "$var_1$" for edge in graph)


def test_free_text_types_nested_in_items_properties_and_type_lists_become_json_schema():
    """Specs nest free-text types too ("list" of "float" items, an "int or float" in a list of types): mapped
    where they are, so the tool's schema is valid JSON Schema (tool.invalid_schema) and arguments are checked
    against the types meant (arguments.schema); a type list holding a compound or unknown name is described."""
    row = json.loads(json.dumps(next(r for r in upstream_rows(TOY) if r["output"][0]["label"].startswith("$var_"))))
    spec = row["tools"][0]
    props = spec["parameters"].get("properties", spec["parameters"])
    name = next(iter(props))
    props[name] = {"description": "values", "type": "list", "items": {"type": "float"}}
    props["weights"] = {"description": "by name", "type": "dict",
                        "properties": {"w": {"type": ["int or float", "str"]}, "v": {"type": ["list of int", "str"]}}}
    tool = next(t["function"] for t in SOURCE.to_unified(SOURCE.to_raw(row, ctx()), ctx())["tools"]
                if t["function"]["name"] == spec["name"])
    mapped = tool["parameters"]["properties"]
    assert mapped[name] == {"type": "array", "items": {"type": "number"}, "description": "values"}
    assert mapped["weights"]["properties"] == {"w": {"type": ["number", "string"]},
                                               "v": {"description": "(type: list of int or str)"}}
    unified = unified_row(id="x", source="nestful", subset="toy", tools=[{"type": "function", "function": tool}],
                          messages=[message("user", "q")])
    assert check_row(unified, [get_rule("tool.invalid_schema")]) == []


@pytest.mark.parametrize("name", list(ALL_REAL))
def test_output_fields_read_the_same_from_the_upstream_specs_and_the_unified_tools(name):
    """The scorer runs predictions with the specs of result files, the executor gold calls with unified tools:
    both must give each call the same output fields (Jan-2025 singular key and JSON-Schema wrappers included)."""
    seen = False
    for row in upstream_rows(ALL_REAL[name]):
        raw = SOURCE.to_raw(row, ctx())
        fields = output_fields(raw["tools"])
        assert fields == output_fields(SOURCE.to_unified(raw, ctx())["tools"]), row["sample_id"]
        assert set(fields) == {t["name"] for t in raw["tools"]}
        seen |= any(fields.values())
    assert seen


def test_domains_are_derived_for_the_toy_rows():
    subsets = [SOURCE.to_unified(SOURCE.to_raw(r, ctx()), ctx())["subset"] for r in upstream_rows(TOY)]
    assert subsets.count("math") == 40 and subsets.count("code") == 24


@pytest.mark.parametrize("text, value", [
    ("40.0", 40.0), ("3", 3), ("[5, 4]", [5, 4]), ("true", True), ("True", True), ("None", None),
    ("{'color': 'red'}", {"color": "red"}), ("(1, 2)", [1, 2]), ("a is greater than b", "a is greater than b"),
    ("nan", "nan"), ("__import__('os').system('echo pwned')", "__import__('os').system('echo pwned')"),
    # Text that reads as a value neither json.dumps nor str() writes so: a string answer, str()-ed
    ("    [2]", "    [2]"), ("11.00", "11.00"), ("0x10", "0x10"), ("[5,4]", "[5,4]"), ("'x'", "'x'"),
    ('"11.00"', "11.00"), ('["\\u00e9"]', ["\u00e9"]), ("['\u00e9']", ["\u00e9"]),
])
def test_gold_answer_strings_decode_json_then_literal_then_text_never_eval(text, value):
    from tooluse_datasets.builders.nestful.source import decode_gold_answer
    decoded = decode_gold_answer(text)
    assert decoded == value and type(decoded) is type(value)


@pytest.mark.parametrize("writer", [str, json.dumps], ids=["str", "json.dumps"])
def test_hf_text_gold_answers_of_the_toy_rows_load_as_their_github_values(tmp_path, cache_dir, writer):
    """HF's gold_answer column is text, str() of the answer (the card says to eval it) or json.dumps of it. The toy
    rows' string answers "11.00" and "    [2]", str()-ed, were read as 11.0 and [2], so their own gold calls no
    longer reproduced them; neither writer makes that text of those values. Only a string that is also a dict's
    JSON text cannot be told from the dict under str()."""
    github = upstream_rows(TOY)
    path = tmp_path / "hf.jsonl"
    path.write_text("".join(json.dumps(dict(r, output=json.dumps(r["output"]), tools=json.dumps(r["tools"]),
                                            gold_answer=writer(r["gold_answer"]))) + "\n" for r in github))
    raw = td.load("nestful", "raw", data_files=str(path), split="train", cache_dir=cache_dir)
    differ = {g["sample_id"]: (g["gold_answer"], r["gold_answer"]) for g, r in zip(github, raw)
              if dumps(g["gold_answer"]) != dumps(r["gold_answer"])}
    assert "11.00" in [g["gold_answer"] for g in github] and "    [2]" in [g["gold_answer"] for g in github]
    if writer is json.dumps:
        assert differ == {}
    else:
        (answer, read), = differ.values()
        assert answer.startswith('{"user"') and read == json.loads(answer)
    assert [r["gold_answer_text"] for r in raw] == [writer(g["gold_answer"]) for g in github]


def test_rows_render_through_a_hermes_chat_template_without_reshaping(cache_dir):
    ds = td.load("nestful", data_files=str(shared_data(*GITHUB_CURRENT)), split="train", cache_dir=cache_dir)
    row = ds[1]  # the code row
    text = render(row["messages"], tools=row["tools"])
    assert row["messages"][0]["content"] in text
    blocks = text.split("<tool_call>\n")[2:]  # [0] is the prompt, [1] the format example
    calls = row["messages"][1]["tool_calls"]
    assert len(blocks) == len(calls)
    for block, call in zip(blocks, calls):
        payload = json.loads(block.split("\n</tool_call>")[0])
        assert payload == {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
    for tool in row["tools"]:
        assert json.dumps(tool, ensure_ascii=False) in text


# --------------------------------------------------------------------------------------------------
# Bad input: typed errors naming file, row and field; or counted skips
# --------------------------------------------------------------------------------------------------

GOOD = {"sample_id": "g", "input": "q", "output": [{"name": "add", "label": "$var_1", "arguments": {"arg_0": 1}}],
        "tools": [{"name": "add", "description": "adds", "parameters": {"arg_0": {"type": "int"}}}], "gold_answer": 1}


def _bad_rows():
    undefined = json.loads(json.dumps(GOOD))
    undefined["output"].append({"name": "add", "label": "$var_2", "arguments": {"arg_0": "$var_7.result$"}})
    unknown = json.loads(json.dumps(GOOD))
    unknown["output"][0]["name"] = "subtract"
    missing = {k: v for k, v in GOOD.items() if k != "input"}
    truncated_hf = dict(GOOD, output='[{"name": "add", "label": "$var_1", "argum', tools=json.dumps(GOOD["tools"]))
    return {
        "truncated line": (json.dumps(GOOD)[:-20], td.InvalidJsonError, "<line>"),
        "truncated output string": (json.dumps(truncated_hf), td.InvalidJsonError, "output"),
        "missing field": (json.dumps(missing), td.MissingFieldError, "input"),
        "undefined reference": (json.dumps(undefined), td.UndefinedReferenceError, "output[1].arguments.arg_0"),
        "unknown tool": (json.dumps(unknown), td.UnknownToolError, "output[0].name"),
    }


@pytest.mark.parametrize("case", list(_bad_rows()))
@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_bad_rows_raise_typed_errors_naming_file_row_and_field(tmp_path, cache_dir, case, streaming):
    line, error, field = _bad_rows()[case]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with pytest.raises(error) as info:
        list(td.load("nestful", data_files=str(path), split="train", streaming=streaming, cache_dir=cache_dir))
    err = info.value
    assert (err.file, err.row, err.field) == (str(path), 1, field)
    assert str(path) in str(err) and "row 1" in str(err) and field in str(err)


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_skipped_rows_are_counted_and_reported_never_lost_silently(tmp_path, cache_dir, streaming, caplog):
    bad = _bad_rows()
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([json.dumps(GOOD)] + [line for line, _, _ in bad.values()] + [json.dumps(GOOD)]) + "\n")
    report = td.SkipReport()
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        rows = list(td.load("nestful", data_files=str(path), split="train", streaming=streaming, on_error="skip",
                            report=report, cache_dir=cache_dir))
    assert len(rows) == 2
    assert report.rows_read == 2 + len(bad) and report.skipped == len(bad)
    assert sorted(e.row for e in report.examples) == list(range(1, len(bad) + 1))
    assert report.by_reason["UnknownToolError:output[0].name"] == 1
    assert "skipped row" in caplog.text and "output[1].arguments.arg_0" in caplog.text
    if not streaming:  # the report is kept with the cached dataset: a second load reports the same
        again = td.SkipReport()
        td.load("nestful", data_files=str(path), split="train", on_error="skip", report=again, cache_dir=cache_dir)
        assert again.to_dict() == report.to_dict()


# --------------------------------------------------------------------------------------------------
# Data location, sharding, builder use
# --------------------------------------------------------------------------------------------------


def test_default_location_is_the_pinned_upstream_file():
    urls = SOURCE.upstream.urls()
    assert urls == {"train": ["https://raw.githubusercontent.com/IBM/NESTFUL/"
                              "fc2c4123e73500a56185a5fb354f05d1c8b4890c/data_v2/nestful_data.jsonl"]}


def test_offline_without_local_files_is_one_clear_error(monkeypatch, cache_dir):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(td.DataNotFoundError) as info:
        td.load("nestful", cache_dir=cache_dir)
    message = str(info.value)
    assert "IBM/NESTFUL" in message and "data_files=" in message and "offline" in message


@pytest.mark.parametrize("client_error", ["ConnectError", "ReadTimeout"])
def test_a_network_failure_reaching_upstream_is_the_same_clear_error(monkeypatch, cache_dir, client_error):
    """Online, but the network fails: huggingface_hub's HTTP client raises its own errors (no OSError)."""
    httpx2 = pytest.importorskip("httpx2", reason="huggingface_hub 2's HTTP client, whose errors are tested here")
    from datasets.download.streaming_download_manager import StreamingDownloadManager

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)

    def failing(self, *args, **kwargs):
        raise getattr(httpx2, client_error)("no route to the Hub")

    monkeypatch.setattr(StreamingDownloadManager, "download", failing)
    with pytest.raises(td.DataNotFoundError, match="cannot reach the upstream data .*no route to the Hub"):
        td.load("nestful", split="train", streaming=True, cache_dir=cache_dir)


@pytest.mark.parametrize("source, fs_path", [
    ("nestful", "fsspec.implementations.http.HTTPFileSystem"),
    ("toolmind", "huggingface_hub.HfFileSystem"),
])
def test_streaming_from_an_unreachable_upstream_is_the_clear_error_before_any_row(monkeypatch, source, fs_path):
    """Streaming downloads nothing up front: the host used to be found unreachable at the first row, as a bare
    FileNotFoundError (GitHub) or after datasets' read retries (the Hub, 20 x 5 s)."""
    import importlib

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    module, name = fs_path.rsplit(".", 1)
    looked_up = []

    def unreachable(self, path, **kwargs):
        looked_up.append(path)
        raise FileNotFoundError(f"{path}: Name or service not known")

    fs_class = getattr(importlib.import_module(module), name)
    monkeypatch.setattr(fs_class, "info", unreachable)
    # fsspec keeps file system instances, and an async one's sync methods are set on the instance: one an earlier
    # test made would bypass the patched class method
    fs_class.clear_instance_cache()
    with pytest.raises(td.DataNotFoundError, match="cannot reach the upstream data .*Name or service not known"):
        next(iter(td.load(source, split="train", streaming=True)))
    assert len(looked_up) == 1


def test_a_list_of_files_becomes_shards_for_num_proc_and_streaming_workers(cache_dir):
    files = [str(shared_data(*TOY)), str(shared_data(*GITHUB_CURRENT)), str(shared_data(*ICL))]
    streamed = td.load("nestful", data_files=files, split="train", streaming=True)
    assert streamed.num_shards == 3
    ds = td.load("nestful", data_files=files, split="train", num_proc=2, cache_dir=cache_dir)
    assert len(ds) == 64 + 2 + 3
    assert [r["id"] for r in ds] == [r["id"] for r in streamed]


def test_builder_class_is_usable_directly(cache_dir):
    from tooluse_datasets.builders.nestful import NestfulBuilder
    assert issubclass(NestfulBuilder, ToolUseBuilder)
    builder = NestfulBuilder(config_name="raw", data_files=td.sample_files("nestful"), cache_dir=cache_dir)
    assert builder.name == "nestful" and builder.config.name == "raw"
    builder.download_and_prepare()
    ds = td.exact(builder.as_dataset(split="train"))
    assert len(ds) == 5 and ds[0]["output"][0]["arguments"] == {"arg_0": 12.5, "arg_1": 0.3}


def test_hf_parquet_form_reads_like_the_jsonl(tmp_path, cache_dir):
    """The HF copy is a parquet of string columns; build one from the transcribed HF rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = upstream_rows(HF_CURRENT)
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert all(pa.types.is_string(t) for t in pq.read_schema(path).types)
    from_parquet = list(td.load("nestful", data_files=str(path), split="train", cache_dir=cache_dir))
    from_jsonl = list(td.load("nestful", data_files=str(shared_data(*HF_CURRENT)), split="train",
                              cache_dir=cache_dir + "2"))
    assert from_parquet == from_jsonl and len(from_parquet) == 2


@pytest.mark.parametrize("mutate, error, field", [
    (lambda r: r["output"][0].update(name=["add"]), td.InvalidValueError, "output[0].name"),
    (lambda r: r["tools"][0].update(parameters="arg_0: int"), td.InvalidValueError, "tools[0].parameters"),
    (lambda r: r["output"][0]["arguments"].update(arg_0={"x": "$var_9.result$"}), td.UndefinedReferenceError,
     "output[0].arguments.arg_0.x"),
    # "$var_1.result$" could not tell these two calls apart: one label, as in v1.
    (lambda r: (r["output"][0].update(label="var_1"),
                r["output"].append({"name": "add", "label": "$var_1", "arguments": {"arg_0": 2}})),
     td.InvalidValueError, "output[1].label"),
    # "$" alone: no reference can name it (a later one to the call after it was "no earlier call defines 'var_2'")
    (lambda r: r["output"][0].update(label="$"), td.InvalidValueError, "output[0].label"),
])
def test_more_malformed_rows_are_typed_errors(mutate, error, field):
    row = json.loads(json.dumps(GOOD))
    mutate(row)
    with pytest.raises(error) as info:
        SOURCE.to_unified(SOURCE.to_raw(row, ctx()), ctx())
    assert info.value.field == field


def test_extra_columns_are_kept_not_dropped():
    row = dict(json.loads(json.dumps(GOOD)), domain="math", difficulty=3)
    raw = SOURCE.to_raw(row, ctx())
    unified = SOURCE.to_unified(raw, ctx())
    assert unified["meta"]["extra"] == {"domain": "math", "difficulty": 3}
    assert dumps(SOURCE.from_unified(unified)) == dumps(raw)


@pytest.mark.parametrize("name", list(ALL_REAL))
def test_raw_rows_written_out_read_back_as_the_same_raw_rows(name, tmp_path):
    """What ``export --format raw`` writes (each row's dumps) is read by the raw config as the same rows, however
    often: HF text gold answers keep their text, columns beyond NESTFUL's stay in ``extra``."""
    rows = [dict(r, domain="math") for r in upstream_rows(ALL_REAL[name])]
    path = tmp_path / "native.jsonl"
    path.write_text("".join(dumps(r) + "\n" for r in rows))
    first = list(td.load("nestful", "raw", data_files=str(path), split="train", streaming=True))
    assert any(r["gold_answer_text"] is not None for r in first) == (name == "hf_current")
    assert all(r["extra"] == {"domain": "math"} for r in first)
    for n in range(2):
        out = tmp_path / f"raw{n}.jsonl"
        out.write_text("".join(dumps(r) + "\n" for r in first))
        again = list(td.load("nestful", "raw", data_files=str(out), split="train", streaming=True))
        assert [dumps(r) for r in again] == [dumps(r) for r in first]


@pytest.mark.parametrize("name, columns", [*((n, {"gold_answer_text": "my note"}) for n in ALL_REAL),
                                           ("hf_current", {"gold_answer_text": "my note", "extra": {"k": 1}})])
def test_an_upstream_column_named_as_a_raw_column_is_kept_in_extra(name, columns, tmp_path):
    """Only the package's raw rows (both its columns, calls and tools as JSON) are read as they are: an upstream row
    with a ``gold_answer_text`` column lost its decoded gold answer (HF's ``"40.0"`` stayed text) to the column's."""
    rows = upstream_rows(ALL_REAL[name])
    path, plus = tmp_path / "rows.jsonl", tmp_path / "plus.jsonl"
    path.write_text("".join(dumps(r) + "\n" for r in rows))
    plus.write_text("".join(dumps(dict(r, **columns)) + "\n" for r in rows))
    read, read_plus = (list(td.load("nestful", "raw", data_files=str(p), split="train", streaming=True))
                       for p in (path, plus))
    assert [dumps(dict(r, extra={**(r["extra"] or {}), **columns})) for r in read] == list(map(dumps, read_plus))


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_an_unforeseen_failure_still_names_the_row_and_follows_the_policy(tmp_path, cache_dir, monkeypatch,
                                                                           streaming):
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(dict(GOOD, sample_id="boom")) + "\n")
    real = type(SOURCE).to_unified

    def flaky(self, raw, context):
        if raw["sample_id"] == "boom":
            raise KeyError("a shape no check foresaw")
        return real(self, raw, context)

    monkeypatch.setattr(type(SOURCE), "to_unified", flaky)
    with pytest.raises(td.InvalidValueError) as info:
        list(td.load("nestful", data_files=str(path), split="train", streaming=streaming, cache_dir=cache_dir))
    assert info.value.row == 1 and "KeyError" in str(info.value) and str(path) in str(info.value)
    report = td.SkipReport()
    rows = list(td.load("nestful", data_files=str(path), split="train", streaming=streaming, on_error="skip",
                        report=report, cache_dir=cache_dir + "-skip"))
    assert [r["meta"]["sample_id"] for r in rows] == ["g"] and report.skipped == 1


def test_parameters_named_properties_or_type_are_parameters_not_a_json_schema_wrapper():
    """Current-format code tools name parameters as the Python function does: a map with parameters called
    `properties` and `type` is no JSON-Schema wrapper (its values are property objects, not names -> objects)."""
    row = json.loads(json.dumps(GOOD))
    row["tools"] = [{"name": "add", "description": "adds",
                     "parameters": {"properties": {"description": "The properties to set.", "type": "object"},
                                    "type": {"description": "The kind.", "type": "string"}},
                     "output_parameters": {"properties": {"description": "", "type": "object"}}}]
    row["output"][0]["arguments"] = {"properties": {"a": 1}, "type": "x"}
    unified = SOURCE.to_unified(SOURCE.to_raw(row, ctx()), ctx())
    function = unified["tools"][0]["function"]
    assert function["parameters"] == {"type": "object", "properties": {
        "properties": {"description": "The properties to set.", "type": "object"},
        "type": {"description": "The kind.", "type": "string"}}}
    assert list(function["output_parameters"]) == ["properties"]
    assert output_fields(row["tools"]) == {"add": ["properties"]}
    # the Jan-2025 wrappers still unwrap, on every real row
    for native in upstream_rows(TOY):
        tools = SOURCE.to_unified(SOURCE.to_raw(native, ctx()), ctx())["tools"]
        for spec, tool in zip(native["tools"], tools):
            wrapped = spec["parameters"].get("properties")
            if isinstance(wrapped, dict) and spec["parameters"].get("type") == "object":
                assert list(tool["function"]["parameters"]["properties"]) == list(wrapped)
            outputs = spec.get("output_parameters", spec.get("output_parameter"))
            assert list(tool["function"]["output_parameters"]) == list(outputs.get("properties", outputs))


def test_a_value_with_text_after_the_closing_dollar_is_no_reference():
    """The spec's rule matches the whole value: "$var_1.result$\\n" (a line end after the closing `$`) is no
    reference, and upstream's executor fails on it (field "result$\\n"). Python's `$` also matched before a final
    newline, so it was a call_graph edge to var_1's `result`, and the arguments.schema rule left it unchecked."""
    first = json.loads(json.dumps(upstream_rows(GITHUB_CURRENT)[0]))  # 3a4b7b77: divide -> multiply -> add
    first["output"][1]["arguments"]["arg_0"] = "$var_1.result$\n"
    row = SOURCE.to_unified(SOURCE.to_raw(first, ctx()), ctx())
    assert row["messages"][1]["tool_calls"][1]["function"]["arguments"]["arg_0"] == "$var_1.result$\n"
    assert row["call_graph"] == [
        {"consumer": "$var_3", "argument": "arg_1", "producer": "$var_2", "output_field": "result"}]
    findings = check_row(row, [get_rule("arguments.schema")])  # checked as the literal string it is
    assert [f.field for f in findings] == ["messages[1].tool_calls[1].function.arguments.arg_0"]


@pytest.mark.parametrize("streaming", [False, True])
def test_data_dir_of_an_upstream_data_v2_folder_reads_the_rows_not_the_functions_index(tmp_path, streaming):
    """Upstream's data_v2/ holds executable_functions/func_file_map.json (function name -> module file) beside
    nestful_data.jsonl: data_dir="NESTFUL/data_v2" read the index as a row and failed ("NESTFUL rows need
    'sample_id'"), or with on_error="skip" counted a row that is none."""
    folder = tmp_path / "data_v2"
    (folder / "executable_functions").mkdir(parents=True)
    (folder / "nestful_data.jsonl").write_bytes(shared_data(*TOY).read_bytes())
    index = shared_data("nestful", "data_v2", "executable_functions", "func_file_map.json")
    (folder / "executable_functions" / "func_file_map.json").write_bytes(index.read_bytes())
    (folder / "executable_functions" / "basic_functions.py").write_text("def add(a, b):\n    return a + b\n")
    report = td.SkipReport()
    rows = list(td.load("nestful", data_dir=str(folder), split="train", streaming=streaming, report=report,
                        cache_dir=str(tmp_path / "cache")))
    assert len(rows) == len(upstream_rows(TOY)) == 64
    assert (report.rows_read, report.skipped) == (64, 0)
