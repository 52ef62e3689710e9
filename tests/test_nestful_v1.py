"""NESTFUL v1 (data_v1/, 300 samples in three groups): spec dialects to JSON Schema tools, v1 references as
call_graph edges, upstream defects as typed errors, and loading through the builder (data_version="v1")."""
from __future__ import annotations

import json
import os

import pytest

import tooluse_datasets as td
from tooluse_datasets.builders.nestful.source import NestfulOptions, NestfulSource
from tooluse_datasets.builders.nestful.v1 import (GROUP_COUNTS, RESULT_CALL, read_specs, v1_groups, v1_tool, v1_to_raw,
                                                  v1_to_unified)
from tooluse_datasets.errors import InvalidJsonError, InvalidValueError, SkipReport, UndefinedReferenceError
from tooluse_datasets.source import RowContext
from tooluse_datasets.validation import check_row, get_rule

from conftest import shared_data
from hermes_template import render

GROUP_PATHS = {
    "executable": ("executable/executable-data.json", "executable/executable-spec.json"),
    "glaive": ("non-executable/non-executable-glaive-data.json", "non-executable/non-executable-glaive-spec.json"),
    "sgd": ("non-executable/non-executable-sgd-data.json", "non-executable/non-executable-sgd-spec.json"),
}


def v1_file(relative: str) -> str:
    return str(shared_data("nestful", "data_v1", *relative.split("/")))


@pytest.fixture(scope="module")
def loaded():
    """Every v1 file in one ``train`` split (the builder regroups them by file name), streamed: rows by group."""
    report = SkipReport()
    splits = td.load("nestful", data_files={"train": [v1_file(p) for paths in GROUP_PATHS.values() for p in paths]},
                     data_version="v1", on_error="skip", report=report, streaming=True)
    return {group: list(split) for group, split in splits.items()}, report


def by_upstream_row(rows: list[dict]) -> dict[int, dict]:
    return {int(r["id"].rsplit("/", 1)[1]): r for r in rows}


def test_counts_per_group_and_every_defect_is_a_typed_skip(loaded):
    rows, report = loaded
    for group, (data, spec) in GROUP_PATHS.items():
        assert (len(json.loads(open(v1_file(data)).read())), len(read_specs(v1_file(spec)))) == GROUP_COUNTS[group]
    assert {g: len(r) for g, r in rows.items()} == {"executable": 85, "glaive": 155, "sgd": 44}
    assert (report.rows_read, report.skipped) == (300, 16)
    kinds = {}
    for example in report.examples:
        kinds[example.error] = kinds.get(example.error, 0) + 1
    # glaive calls 7 tools its spec file lacks (10 rows), 4 rows reuse a label, 2 read a label never defined.
    assert kinds == {"UnknownToolError": 10, "InvalidValueError": 4, "UndefinedReferenceError": 2}
    assert all("twice" in e.message for e in report.examples if e.error == "InvalidValueError")


def test_rows_are_valid_unified_rows_and_round_trip_to_raw(loaded):
    rows, _ = loaded
    source = NestfulSource()
    for group, group_rows in rows.items():
        data = json.loads(open(v1_file(GROUP_PATHS[group][0])).read())
        for n, row in by_upstream_row(group_rows).items():
            td.validate_unified(row)
            assert row["subset"] == f"v1-{group}" and row["id"] == f"nestful/v1-{group}/{n}"
            back = source.from_unified(row)
            assert back["output"] == data[n]["output"] and back["input"] == data[n]["input"]
            # The var_result pseudo-call is no tool call; its arguments are the row's result mapping.
            assert data[n]["output"][-1]["name"] == RESULT_CALL
            assert row["meta"]["result"] == data[n]["output"][-1]["arguments"]
            assert [c["id"] for c in row["messages"][1]["tool_calls"]] == [c["label"] for c in data[n]["output"][:-1]]


def test_references_whole_embedded_and_in_lists_become_edges(loaded):
    rows, _ = loaded
    executable, glaive = by_upstream_row(rows["executable"]), by_upstream_row(rows["glaive"])
    assert executable[0]["call_graph"][0] == {"consumer": "var3", "argument": "originSkyId", "producer": "var1",
                                              "output_field": "skyId"}
    # Embedded in a longer string, a field name with a space, two references in one string.
    assert {"consumer": "var2", "argument": "numbers", "producer": "var1", "output_field": "Exchange Rate"} in \
        executable[14]["call_graph"]
    assert [(e["producer"], e["output_field"]) for e in executable[34]["call_graph"]] == [
        ("var1", "localtime"), ("var2", "localtime")]
    assert {"consumer": "var2", "argument": "message", "producer": "var1", "output_field": "event_id"} in \
        glaive[66]["call_graph"]
    assert {"consumer": "var2", "argument": "attendees[0]", "producer": "var1", "output_field": "contact_id"} in \
        glaive[63]["call_graph"]
    # Not references: a malformed one missing its leading "$", and a price range written with "$".
    assert not [e for e in executable[21]["call_graph"] if e["consumer"] == "var2"]  # "var1.product_id$"
    assert all(e["argument"] != "price_range" for e in glaive[147]["call_graph"])
    assert glaive[147]["messages"][1]["tool_calls"][0]["function"]["arguments"]["price_range"] == "$100-$200"


def test_a_whole_output_reference_has_no_field():
    ctx = RowContext("nestful", "x.json", 0, "glaive")
    native = {"input": "q", "tools": [{"name": "f", "description": "d", "parameters": {}, "output_parameters": {}}],
              "output": [{"name": "f", "arguments": {}, "label": "var1"},
                         {"name": "f", "arguments": {"x": "$var1$"}, "label": "var2"},
                         {"name": RESULT_CALL, "arguments": {"r": "$var2$"}}], "group": "glaive"}
    row = v1_to_unified(v1_to_raw(native, ctx), ctx)
    assert row["call_graph"] == [{"consumer": "var2", "argument": "x", "producer": "var1", "output_field": None}]
    native["output"][2]["arguments"] = {"r": "$var3$"}
    with pytest.raises(UndefinedReferenceError) as info:
        v1_to_unified(v1_to_raw(native, ctx), ctx)
    assert info.value.field == "output[2].arguments.r"


@pytest.mark.parametrize("output, got", [({"name": "f"}, "got object"), ([{"name": "f"}, 3], "got an array holding a "
                                                                                          "JSON number")])
def test_an_output_that_is_no_list_of_calls_is_named_by_its_json_type(output, got):
    ctx = RowContext("nestful", "x.json", 0, "glaive")
    with pytest.raises(InvalidValueError) as info:
        v1_to_raw({"input": "q", "output": output, "group": "glaive"}, ctx)
    assert (info.value.field, info.value.message) == ("output", f"output must be a list of call objects, {got}")


def test_a_producer_is_named_by_its_call_id_whatever_the_label_spelling():
    ctx = RowContext("nestful", "x.json", 0, "glaive")
    native = {"input": "q", "tools": [{"name": "f", "description": "d", "parameters": {"x": {"type": "str"}},
                                       "output_parameters": {"id": {"type": "str"}}}],
              "output": [{"name": "f", "arguments": {}, "label": "$var1"},
                         {"name": "f", "arguments": {"x": "id: $var1.id$"}, "label": "var2"}], "group": "glaive"}
    row = v1_to_unified(v1_to_raw(native, ctx), ctx)
    assert row["call_graph"] == [{"consumer": "var2", "argument": "x", "producer": "$var1", "output_field": "id"}]
    assert check_row(row) == []  # call_graph.edge: the producer is a call of the row


def test_rapidapi_specs_become_json_schema_tools():
    specs = {s["name"]: s for s in read_specs(v1_file(GROUP_PATHS["executable"][1]))}
    tool = v1_tool(specs["SkyScrapperFlightSearch"])["function"]
    params = tool["parameters"]
    assert params["type"] == "object" and "required" not in params["properties"]["returnDate"]
    assert params["required"][:5] == ["originSkyId", "destinationSkyId", "originEntityId", "destinationEntityId", "date"]
    assert "returnDate" not in params["required"]
    assert params["properties"]["cabinClass"]["enum"] == ["economy", "premium_economy", "business", "first"]
    assert params["properties"]["adults"]["type"] == "number"
    assert tool["http"]["host"] == "sky-scrapper.p.rapidapi.com" and tool["http"]["parameters_in"] == "query"
    assert "output_parameters" in tool
    path_tool = v1_tool(next(s for s in specs.values() if "path_parameters" in s))["function"]
    assert path_tool["http"]["parameters_in"] == "path" and path_tool["parameters"]["properties"]
    capitalised = [p for s in specs.values() for p in v1_tool(s)["function"]["parameters"]["properties"].values()]
    assert {p.get("type") for p in capitalised} <= {"string", "number", "boolean", "array", None}
    enum_typed = [p for p in capitalised if "enum" in p and "type" not in p]
    assert enum_typed and all(p["enum"] for p in enum_typed)  # type "Enum": the allowed values say it


def test_sgd_arguments_with_allowed_and_default_values():
    specs = {s["name"]: s for s in read_specs(v1_file(GROUP_PATHS["sgd"][1]))}
    params = v1_tool(specs["Buses.FindBus"])["function"]["parameters"]
    assert params["required"] == ["origin", "destination", "departure_date"]
    assert params["properties"]["fare_type"] == {"description": "Type of fare for the booking",
                                                 "enum": ["Economy", "Economy extra", "Flexible"], "default": "Economy"}
    assert "enum" not in params["properties"]["origin"]  # an empty allowed_values list allows anything


def test_glaive_nested_object_parameters():
    specs = read_specs(v1_file(GROUP_PATHS["glaive"][1]))
    spec = next(s for s in specs if s["name"] == "analyze_stock_market")
    prop = v1_tool(spec)["function"]["parameters"]["properties"]["date_range"]
    assert prop["type"] == "object" and set(prop["properties"]) == {"start_date", "end_date"}


def test_a_json_schema_required_list_of_a_nested_object_is_kept_not_taken_for_a_flag():
    """glaive's calculate_discounted_price: the discounts' items are objects with `required: ["type", "value"]`."""
    specs = read_specs(v1_file(GROUP_PATHS["glaive"][1]))
    spec = next(s for s in specs if s["name"] == "calculate_discounted_price")
    params = v1_tool(spec)["function"]["parameters"]
    assert params["properties"]["discounts"]["items"]["required"] == ["type", "value"]
    assert params["required"] == ["original_price", "discounts"]
    # a list is the object's own `required`, not a flag saying the property itself is required
    nested = {"query_parameters": {"opts": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}
    params = v1_tool({"name": "f", **nested})["function"]["parameters"]
    assert "required" not in params and params["properties"]["opts"]["required"] == ["a"]


def test_used_tools_only(loaded):
    rows = list(td.load("nestful", data_files={"sgd": [v1_file(p) for p in GROUP_PATHS["sgd"]]}, split="sgd",
                        data_version="v1", v1_tools="used", on_error="skip", streaming=True))
    assert len(rows) == 44
    for row in rows:
        names = {c["function"]["name"] for c in row["messages"][1]["tool_calls"]}
        assert {t["function"]["name"] for t in row["tools"]} == names
    full, _ = loaded
    assert all(len(r["tools"]) == 30 for r in full["sgd"])


def test_rows_render_through_a_tool_chat_template(loaded):
    rows, _ = loaded
    row = by_upstream_row(rows["glaive"])[66]
    text = render(row["messages"], row["tools"])
    assert '"message": "Meeting ID: $var1.event_id$"' in text


# --------------------------------------------------------------------------------------------------
# Through the builder
# --------------------------------------------------------------------------------------------------


def test_data_version_v1_loads_three_splits_map_style_and_streaming(cache_dir, loaded):
    folder = str(shared_data("nestful", "data_v1"))
    report = SkipReport()
    mapped = td.load("nestful", data_dir=folder, data_version="v1", on_error="skip", report=report, cache_dir=cache_dir)
    streamed = td.load("nestful", data_dir=folder, data_version="v1", on_error="skip", streaming=True)
    assert {k: len(v) for k, v in mapped.items()} == {"executable": 85, "glaive": 155, "sgd": 44}
    assert (report.rows_read, report.skipped) == (300, 16)
    rows, _ = loaded
    for split in ("executable", "glaive", "sgd"):
        assert list(mapped[split]) == list(streamed[split])
        assert [r["id"] for r in mapped[split]] == [r["id"] for r in rows[split]]
        assert [r["call_graph"] for r in mapped[split]] == [r["call_graph"] for r in rows[split]]


def test_data_files_by_split_and_the_raw_config(cache_dir, tmp_path):
    files = {"sgd": [v1_file(p) for p in GROUP_PATHS["sgd"]]}
    raw = td.load("nestful", "raw", data_files=files, split="sgd", data_version="v1", cache_dir=cache_dir)
    assert len(raw) == 46 and raw[0]["sample_id"] is None and raw[0]["gold_answer"] is None
    assert len(raw[0]["tools"]) == 30 and raw[0]["extra"] == {"group": "sgd"}
    # Written out, these rows (no sample_id, no spec file) read back with neither data_version: the v2 reader said
    # to load them with data_version='v1', which refused them as well
    path = tmp_path / "raw.jsonl"
    raw.select(range(2)).to_json(str(path))
    with pytest.raises(td.MissingFieldError, match="package's raw rows of NESTFUL v1 data") as v2:
        td.load("nestful", "raw", data_files=str(path), split="train", cache_dir=cache_dir)
    assert "data_version='v1'" not in str(v2.value)


def test_the_default_v1_files_are_the_pinned_upstream_ones():
    source = NestfulSource(NestfulOptions(data_version="v1"))
    urls = source.upstream.urls()
    assert sorted(urls) == ["executable", "glaive", "sgd"]
    assert urls["sgd"] == [
        "https://raw.githubusercontent.com/IBM/NESTFUL/fc2c4123e73500a56185a5fb354f05d1c8b4890c/data_v1/non-executable/"
        f"non-executable-sgd-{kind}.json" for kind in ("data", "spec")]
    groups = v1_groups({split: [u.rsplit("/", 1)[1] for u in paths] for split, paths in urls.items()})
    assert [(g.name, g.spec_file) for g in groups] == [("executable", "executable-spec.json"),
                                                       ("glaive", "non-executable-glaive-spec.json"),
                                                       ("sgd", "non-executable-sgd-spec.json")]


@pytest.mark.parametrize("options, match", [
    ({"data_version": "v3"}, "data_version"), ({"v1_tools": "some"}, "v1_tools"),
    ({"data_version": "v1", "execute": True}, "execute"), ({"calls_per_turn": "two"}, "calls_per_turn")])
def test_bad_options_are_refused(options, match):
    with pytest.raises(ValueError, match=match):
        NestfulSource(NestfulOptions(**options))


# --------------------------------------------------------------------------------------------------
# A bad spec file: its bad elements are reported and the other specs used; an unreadable one fails each row
# --------------------------------------------------------------------------------------------------


def executable_with_spec(tmp_path, spec_text: str, data_copies: int = 1) -> tuple[dict, str, list[str]]:
    """``data_files`` for the executable group with the real data file (copied ``data_copies`` times: one group
    of several data files) and a spec file holding ``spec_text``."""
    data = open(v1_file(GROUP_PATHS["executable"][0]), encoding="utf-8").read()
    data_paths = []
    for i in range(data_copies):
        path = tmp_path / f"copy{i}" / "executable-data.json"
        path.parent.mkdir()
        path.write_text(data, encoding="utf-8")
        data_paths.append(str(path))
    spec = tmp_path / "executable-spec.json"
    spec.write_text(spec_text, encoding="utf-8")
    return {"executable": [*data_paths, str(spec)]}, str(spec), data_paths


def load_skipping(files, tmp_path, streaming=False) -> tuple[list[dict], SkipReport]:
    report = SkipReport(keep_all=True)
    ds = td.load("nestful", data_files=files, data_version="v1", on_error="skip", report=report, split="executable",
                 streaming=streaming, cache_dir=str(tmp_path / "cache"))
    return list(ds), report


@pytest.mark.parametrize("streaming", [False, True])
def test_a_spec_element_that_is_no_spec_is_reported_once_and_the_other_specs_are_used(tmp_path, streaming):
    specs = json.loads(open(v1_file(GROUP_PATHS["executable"][1]), encoding="utf-8").read())
    files, spec_path, data_paths = executable_with_spec(tmp_path, json.dumps([1, *specs, {"description": "no name"}]),
                                                        data_copies=2)
    rows, report = load_skipping(files, tmp_path, streaming)
    # Both data files load in full with the 39 good specs; the two bad elements are skips naming the spec file.
    assert len(rows) == 170 and all(len(r["tools"]) == 39 for r in rows)
    # two data files of one stem in one group: ids carry the file's path below their common folder (were 85 ids
    # for 170 rows), whatever order the files are given in (they carried the file's place in the list)
    assert len({r["id"] for r in rows}) == 170
    assert {r["id"].rsplit("/", 1)[0] for r in rows} == {"nestful/v1-executable/copy0/executable-data",
                                                         "nestful/v1-executable/copy1/executable-data"}
    *data, spec = files["executable"]
    swapped, _ = load_skipping({"executable": [*data[::-1], spec]}, tmp_path / "swapped", streaming)
    assert sorted(r["id"] for r in swapped) == sorted(r["id"] for r in rows)
    assert (report.rows_read, report.skipped) == (172, 2)
    assert [(r["file"], r["row"], r["field"]) for r in report.rows] == [(spec_path, 0, "<row>"), (spec_path, 40, "name")]
    with pytest.raises(InvalidValueError, match="a spec must be a JSON object, not a JSON number") as info:
        td.load("nestful", data_files=files, data_version="v1", split="executable", cache_dir=str(tmp_path / "c2"))
    assert (info.value.file, info.value.row, info.value.field) == (spec_path, 0, "<row>")


def test_a_truncated_spec_file_keeps_its_readable_specs_and_each_row_that_needs_a_lost_one_is_a_skip(tmp_path):
    text = open(v1_file(GROUP_PATHS["executable"][1]), encoding="utf-8").read()
    files, spec_path, [data_path] = executable_with_spec(tmp_path, text[:len(text) // 2])
    kept = {s["name"] for s in read_specs(spec_path)}
    assert 0 < len(kept) < 39
    samples = json.loads(open(data_path, encoding="utf-8").read())
    loadable = [n for n, s in enumerate(samples) if {c["name"] for c in s["output"]} - {RESULT_CALL} <= kept]
    rows, report = load_skipping(files, tmp_path)
    assert [int(r["id"].rsplit("/", 1)[1]) for r in rows] == loadable and 0 < len(loadable) < 85
    # Every data row is accounted for, and the cut element once.
    assert (report.rows_read, report.skipped) == (86, 86 - len(loadable))
    spec_errors = [r for r in report.rows if r["file"] == spec_path]
    assert [(r["row"], r["field"], r["error"]) for r in spec_errors] == [(len(kept), "<element>", "InvalidJsonError")]
    assert {r["error"] for r in report.rows if r["file"] == data_path} == {"UnknownToolError"}


@pytest.mark.parametrize("text, error, says", [
    ('{"specs": []}', InvalidValueError, "must hold a JSON array of specs, not a JSON object"),
    ("not json at all", InvalidJsonError, "spec file is not valid JSON"),
    ("", InvalidJsonError, "spec file is not valid JSON"),
])
def test_an_unreadable_spec_file_fails_each_data_row_naming_it(tmp_path, text, error, says):
    files, spec_path, [data_path] = executable_with_spec(tmp_path, text)
    rows, report = load_skipping(files, tmp_path)
    assert rows == [] and (report.rows_read, report.skipped) == (85, 85)
    assert [(r["file"], r["row"], r["field"]) for r in report.rows] == [(data_path, n, "tools") for n in range(85)]
    assert all(spec_path in r["message"] and says in r["message"] for r in report.rows)
    with pytest.raises(error, match=says) as info:
        td.load("nestful", data_files=files, data_version="v1", split="executable", cache_dir=str(tmp_path / "c2"))
    assert (info.value.file, info.value.row, info.value.field) == (data_path, 0, "tools")


def _reference_findings(row: dict) -> list[str]:
    return [f.message for f in check_row(row) if f.rule == "nestful.undefined_reference"]


def test_a_reference_reading_inside_an_output_is_not_an_undefined_reference(loaded):
    """v1 references read paths inside an output ("$var1.location.name$", "$var1.author[0].id$",
    "$var1.movies[0]$"), as the specs' output_parser does: the output is the path's leading name. Real rows
    naming an output their tool does not list are still reported."""
    rows, _ = loaded
    executable, glaive = by_upstream_row(rows["executable"]), by_upstream_row(rows["glaive"])
    for row in (executable[32], executable[35], executable[79], glaive[129], glaive[163]):
        assert _reference_findings(row) == [], row["id"]
    assert 'has no output "id"' in _reference_findings(executable[60])[0]           # outputs: artist_id...
    broken = json.loads(json.dumps(executable[35]))
    broken["messages"][1]["tool_calls"][1]["function"]["arguments"]["q"] = "$var1.place.name$"
    assert 'has no output "place.name"' in _reference_findings(broken)[0]


def test_a_field_the_output_parser_reads_inside_the_response_element_is_no_undefined_reference(loaded):
    """Tripadvisor_Search_Restaurant_Location lists the response's status, message and timestamp beside `location`,
    the data[0] element its output_parser (result.data[0].{param}) reads each field from: `$var1.locationId$` is
    result.data[0].locationId, which `location` lists (executable rows 44-48). WeatherAPI.com_Time_Zone_API's parser
    reads the response itself (result.{param}), whose only output is `location`: `$var1.localtime$` (row 34)
    misses its path, which row 35 writes for the same API ($var1.location.name$); it stays reported, naming the
    path."""
    rows, _ = loaded
    executable = by_upstream_row(rows["executable"])
    for n in (44, 45, 46, 47, 48):
        assert _reference_findings(executable[n]) == [], n
    assert [m.rsplit("; ", 1)[1] for m in _reference_findings(executable[34])] == [
        "it lists location.localtime, read by $var1.location.localtime$",
        "it lists location.localtime, read by $var2.location.localtime$"]
    # A field no element lists stays an undefined reference (row 49 reads locationId from an airport search).
    assert 'has no output "locationId"' in _reference_findings(executable[49])[0]


def test_allowed_values_given_as_a_range_text_are_no_enum_of_its_characters(loaded):
    """Real executable specs say "allowed_values": "1-100" for page and limit: not an enum ['1', '-', '1', '0', '0']
    (which made every real call with page=1 break its schema), but a note in the description."""
    specs = {s["name"]: s for s in read_specs(v1_file(GROUP_PATHS["executable"][1]))}
    page = v1_tool(specs["Real-Time_Product_Search_Search"])["function"]["parameters"]["properties"]["page"]
    assert "enum" not in page and page["type"] == "number" and page["default"] == 1
    assert page["description"] == "Results page to return. (allowed values: 1-100)"
    rows, _ = loaded
    row = by_upstream_row(rows["executable"])[20]
    assert [f for f in check_row(row) if f.rule == "arguments.schema" and f.field.endswith(".page")] == []


@pytest.mark.parametrize("streaming", [False, True])
def test_one_group_loaded_alone_keeps_the_ids_and_subset_it_has_among_all_groups(loaded, streaming):
    # The group comes from the spec file's name, not from the split that holds it ("train" for a list).
    rows_by_group, _ = loaded
    for split_name, files in (("train", GROUP_PATHS["glaive"]), ("test", GROUP_PATHS["glaive"])):
        ds = td.load("nestful", data_files={split_name: [v1_file(p) for p in files]}, data_version="v1",
                     on_error="skip", streaming=streaming)[split_name]
        alone = list(ds)
        assert [r["id"] for r in alone] == [r["id"] for r in rows_by_group["glaive"]]
        assert {r["subset"] for r in alone} == {"v1-glaive"}
        assert alone[0]["id"] == "nestful/v1-glaive/0"


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_used_tools_of_a_row_whose_call_name_is_no_string_is_a_typed_skip_not_a_crash(tmp_path, streaming):
    spec = [{"name": "f", "description": "d", "parameters": {"a": {"type": "string", "required": True}},
             "output_parameters": {"x": {"type": "string"}}}]
    good = {"input": "q", "output": [{"name": "f", "arguments": {"a": "1"}, "label": "var1"},
                                     {"name": RESULT_CALL, "arguments": {"r": "$var1$"}}]}
    bad = {"input": "q", "output": [{"name": ["f"], "arguments": {"a": "1"}, "label": "var1"}]}
    data = tmp_path / "data"
    data.mkdir()
    (data / "x-glaive-spec.json").write_text(json.dumps(spec))
    (data / "x-glaive-data.json").write_text(json.dumps([good, bad, {"input": "q", "output": {"name": "f"}}, good]))
    report = SkipReport()
    rows = list(td.load("nestful", data_dir=str(data), data_version="v1", v1_tools="used", split="train",
                        streaming=streaming, on_error="skip", report=report, cache_dir=str(tmp_path / "cache")))
    assert [r["id"] for r in rows] == ["nestful/v1-glaive/0", "nestful/v1-glaive/3"]
    assert [t["function"]["name"] for t in rows[0]["tools"]] == ["f"]
    assert report.by_reason == {"InvalidValueError:output[0].name": 1, "InvalidValueError:output": 1}
    with pytest.raises(InvalidValueError) as info:
        list(td.load("nestful", data_dir=str(data), data_version="v1", v1_tools="used", split="train",
                     streaming=streaming, cache_dir=str(tmp_path / "cache2")))
    assert (info.value.row, info.value.field) == (1, "output[0].name")


def test_a_spec_parameter_with_a_null_description_fails_no_row_of_its_group(tmp_path):
    """A null description is no description: before, it made every row of the group an unforeseen TypeError
    naming neither the spec file nor the spec."""
    specs = json.loads(open(v1_file(GROUP_PATHS["sgd"][1])).read())
    name = next(iter(specs[-1]["arguments"]))
    specs[-1]["arguments"][name]["description"] = None
    spec_file = tmp_path / "non-executable-sgd-spec.json"
    spec_file.write_text(json.dumps(specs))
    report = SkipReport()
    rows = list(td.load("nestful", data_files=[str(spec_file), v1_file(GROUP_PATHS["sgd"][0])], data_version="v1",
                        split="train", streaming=True, on_error="skip", report=report))
    assert len(rows) == 44 and report.skipped == 2  # sgd's two upstream defects, as with the real spec file
    tool = next(t for t in rows[0]["tools"] if t["function"]["name"] == specs[-1]["name"])
    assert "description" not in tool["function"]["parameters"]["properties"][name]
    assert rows[0]["meta"]["source_tools"][-1]["arguments"][name]["description"] is None  # upstream's spec kept


@pytest.mark.parametrize("parameters", [None, [], "none"])
def test_a_spec_whose_parameters_are_no_object_is_reported_once_and_fails_only_the_rows_calling_it(tmp_path,
                                                                                                  parameters):
    """One spec that cannot become a tool (its parameters null, a list, text) made every row of its group a skip, each
    naming the row's own tools[i] (the group's 44 loadable sgd rows lost); it is now left out and reported once,
    naming the spec file and index, as a spec without a name is, and only the rows calling it are skips."""
    specs = json.loads(open(v1_file(GROUP_PATHS["sgd"][1])).read())
    samples = json.loads(open(v1_file(GROUP_PATHS["sgd"][0])).read())
    broken = next(i for i, s in enumerate(specs) if "arguments" in s)
    specs[broken]["arguments"] = parameters
    callers = {n for n, sample in enumerate(samples) if any(c["name"] == specs[broken]["name"] for c in sample["output"])}
    assert 0 < len(callers) < len(samples)
    spec_file = tmp_path / "non-executable-sgd-spec.json"
    spec_file.write_text(json.dumps(specs))

    def row_numbers(spec_path, tools="catalog", report=None):
        rows = td.load("nestful", data_files={"sgd": [v1_file(GROUP_PATHS["sgd"][0]), spec_path]}, data_version="v1",
                       v1_tools=tools, split="sgd", streaming=True, on_error="skip", report=report or SkipReport())
        return {int(r["id"].rsplit("/", 1)[1]): r for r in rows}

    loadable = set(row_numbers(v1_file(GROUP_PATHS["sgd"][1])))  # with the real spec file (44: 2 upstream defects)
    for tools in ("catalog", "used"):
        report = SkipReport(keep_all=True)
        rows = row_numbers(str(spec_file), tools, report)
        assert set(rows) == loadable - callers
        assert all(specs[broken]["name"] not in [t["function"]["name"] for t in r["tools"]] for r in rows.values())
        assert [(r["row"], r["field"]) for r in report.rows if r["file"] == str(spec_file)] == [(broken, "arguments")]
        assert {r["row"] for r in report.rows if r["error"] == "UnknownToolError"} == callers & loadable


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_compressed_v1_data_and_spec_files_give_the_rows_of_the_plain_files(tmp_path, cache_dir, streaming):
    """A spec file is told by its name once its compression suffix is off: ``executable-spec.json.gz`` is the
    executable group's spec, not a data file of no group."""
    import gzip

    zstandard = pytest.importorskip("zstandard")
    plain = [v1_file(p) for p in GROUP_PATHS["executable"]]
    packed = []
    for path, (suffix, compress) in zip(plain, [(".gz", gzip.compress),
                                                 (".zst", zstandard.ZstdCompressor().compress)]):
        target = tmp_path / (os.path.basename(path) + suffix)
        target.write_bytes(compress(open(path, "rb").read()))
        packed.append(str(target))
    rows = {}
    for name, files in (("plain", plain), ("packed", packed), ("spec packed", [plain[0], packed[1]])):
        report = SkipReport()
        split = td.load("nestful", data_files={"train": files}, data_version="v1", split="train", on_error="skip",
                        report=report, streaming=streaming, cache_dir=f"{cache_dir}-{name}")
        rows[name] = (list(split), report.rows_read, report.skipped)
    assert len(rows["plain"][0]) == 85
    assert rows["packed"] == rows["plain"] == rows["spec packed"]


def load_edited_sgd(samples: list, tmp_path, cache_dir, streaming) -> tuple[list[dict], SkipReport]:
    """The sgd group with its data file's samples replaced by ``samples`` (edited upstream ones), loaded with
    skips counted."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "non-executable-sgd-data.json").write_text(json.dumps(samples))
    (data / "non-executable-sgd-spec.json").write_text(open(v1_file(GROUP_PATHS["sgd"][1])).read())
    report = SkipReport()
    rows = list(td.load("nestful", data_dir=str(data), data_version="v1", split="train", streaming=streaming,
                        on_error="skip", report=report, cache_dir=cache_dir))
    return rows, report


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_var_result_arguments_that_are_no_object_are_a_typed_skip(tmp_path, cache_dir, streaming):
    """var_result's arguments name the outputs that make the answer (an object in every upstream sample); a string
    or a list there was kept in meta.result unchecked, its references unread."""
    samples = json.loads(open(v1_file(GROUP_PATHS["sgd"][0])).read())
    last = {n: len(s["output"]) - 1 for n, s in enumerate(samples)}
    assert all(samples[n]["output"][i]["name"] == RESULT_CALL for n, i in last.items())
    samples[0]["output"][last[0]]["arguments"] = "$var1.result$"
    samples[1]["output"][last[1]]["arguments"] = ["$var1$"]
    rows, report = load_edited_sgd(samples, tmp_path, cache_dir, streaming)
    assert len(rows) == 44 - 2  # (2 of the 46 upstream rows are defects of their own)
    skipped = {(e.row, e.field) for e in report.examples if "var_result" in e.message}
    assert skipped == {(0, f"output[{last[0]}].arguments"), (1, f"output[{last[1]}].arguments")}


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_sample_holding_a_key_the_loader_sets_is_a_typed_skip(tmp_path, cache_dir, streaming):
    """The loader attaches the group's tools, its name and (several files) the file's stem to each sample: a
    sample's own tools or group were replaced without a word, and its own data_file ended up in the row id."""
    samples = json.loads(open(v1_file(GROUP_PATHS["sgd"][0])).read())
    samples[0]["tools"] = [{"name": "own_tool"}]
    samples[1]["group"] = "mine"
    samples[2]["data_file"] = "../x"
    rows, report = load_edited_sgd(samples, tmp_path, cache_dir, streaming)
    own = {(e.row, e.field) for e in report.examples if "its own" in e.message}
    assert own == {(0, "tools"), (1, "group"), (2, "data_file")}
    assert all(e.file and e.file.endswith("non-executable-sgd-data.json") for e in report.examples if "its own" in e.message)
    assert len(rows) == 44 - 3 and not any("../x" in r["id"] for r in rows)


@pytest.mark.parametrize("streaming, tools", [(True, "catalog"), (True, "used"), (False, "catalog")],
                         ids=["streaming-catalog", "streaming-used", "map-style-catalog"])
def test_each_spec_becomes_a_tool_once_per_catalog_read_not_again_for_every_row(monkeypatch, cache_dir, streaming,
                                                                                 tools):
    """A spec was made a tool when its catalog was read (to check it), then again for every row given it: the
    catalog (70 glaive specs) 155 times over. The rows now take the tools made when the catalog was read."""
    from tooluse_datasets.builders.nestful import v1

    specs = {group: read_specs(v1_file(paths[1])) for group, paths in GROUP_PATHS.items()}
    made = []
    convert = v1.v1_tool

    def counted(spec, field="tools[]"):
        made.append(spec["name"])
        return convert(spec, field)

    monkeypatch.setattr(v1, "v1_tool", counted)
    splits = td.load("nestful", data_files={"train": [v1_file(p) for paths in GROUP_PATHS.values() for p in paths]},
                     data_version="v1", v1_tools=tools, on_error="skip", report=SkipReport(), streaming=streaming,
                     cache_dir=cache_dir)
    rows = {group: list(split) for group, split in splits.items()}
    assert {g: len(r) for g, r in rows.items()} == {"executable": 85, "glaive": 155, "sgd": 44}
    assert sorted(made) == sorted(s["name"] for group in specs.values() for s in group)  # once each, on reading
    for group, group_rows in rows.items():
        by_name = {s["name"]: convert(s) for s in specs[group]}
        for row in group_rows:
            source_tools = json.loads(row["meta"])["source_tools"] if isinstance(row["meta"], str) else \
                row["meta"]["source_tools"]
            assert row["tools"] == [by_name[s["name"]] for s in source_tools]
        if streaming:  # each row its own tools and specs: editing one row in place leaves the next as it was
            first, second = group_rows[0], group_rows[1]
            assert not {id(t) for t in first["tools"]} & {id(t) for t in second["tools"]}
            assert first["meta"]["source_tools"] is not second["meta"]["source_tools"]
            assert not {id(s) for s in first["meta"]["source_tools"]} & {id(s) for s in second["meta"]["source_tools"]}


@pytest.mark.parametrize("config", ["unified", "raw"])
def test_a_streamed_row_edited_in_place_leaves_the_next_rows_specs_as_they_were(config):
    # Every row of a group was given its catalog's spec objects themselves: editing one streamed row's
    # meta.source_tools (unified) or tools (raw) changed every row after it.
    files = [v1_file(p) for paths in GROUP_PATHS.values() for p in paths]
    rows = iter(td.load("nestful", config, data_files={"train": files}, data_version="v1", on_error="skip",
                        report=SkipReport(), streaming=True)["glaive"])
    specs = (lambda row: row["meta"]["source_tools"]) if config == "unified" else (lambda row: row["tools"])
    first = next(rows)
    description = specs(first)[0]["description"]
    specs(first)[0]["description"] += "?"
    specs(first).append({"name": "mine"})
    second = next(rows)
    assert specs(second)[0]["description"] == description and specs(second)[-1]["name"] != "mine"


@pytest.mark.parametrize("config", ["unified", "raw"])
@pytest.mark.parametrize("tools", ["catalog", "used"])
def test_a_spec_listed_twice_alike_is_one_tool_of_the_row(config, tools):
    """glaive's spec file lists 6 specs twice, identical (search_product three times): every glaive row had 70
    tools, 6 of them a second tool of the same name (tool.duplicate_name, so validate="all" dropped all 155
    rows), the model shown the same schema twice. Each distinct spec is now one tool, in the file's order."""
    specs = json.loads(open(v1_file(GROUP_PATHS["glaive"][1])).read())
    distinct = []
    for spec in specs:
        if spec not in distinct:
            distinct.append(spec)
    assert len(specs) == 70 and len(distinct) == 64  # the upstream file: 6 repeats
    assert len({s["name"] for s in distinct}) == 64  # and each repeat is identical to its first copy
    rows = list(td.load("nestful", config, data_files={"glaive": [v1_file(p) for p in GROUP_PATHS["glaive"]]},
                        split="glaive", data_version="v1", v1_tools=tools, on_error="skip", streaming=True))
    assert len(rows) == (155 if config == "unified" else 169)
    for row in rows:
        source_tools = row["meta"]["source_tools"] if config == "unified" else row["tools"]
        output = row["meta"]["source_output"] if config == "unified" else row["output"]
        called = {c["name"] for c in output}
        assert source_tools == [s for s in distinct if tools == "catalog" or s["name"] in called]
        names = [s["name"] for s in source_tools]
        assert len(names) == len(set(names))
        if config == "unified":
            assert [t["function"]["name"] for t in row["tools"]] == names
            assert not check_row(row, [get_rule("tool.duplicate_name")])


def test_v1_files_read_as_v2_say_to_pass_data_version(tmp_path):
    """v1 samples have no sample_id (and data_v1/ holds the spec files too): read without data_version="v1", each row
    was only "NESTFUL rows need 'sample_id'", which did not say the data is v1's nor how to load it."""
    from tooluse_datasets.errors import MissingFieldError

    hint = r"data_version='v1' \(on the command line: --option data_version=v1\)"  # (both spellings)
    for path in (v1_file(GROUP_PATHS["sgd"][0]), v1_file(GROUP_PATHS["executable"][1])):
        with pytest.raises(MissingFieldError, match=hint) as caught:
            td.load("nestful", data_files=path, split="train", cache_dir=str(tmp_path / "cache"))
        assert caught.value.field == "sample_id"
    # A renamed copy is told by its samples, which end with v1's var_result pseudo-call
    renamed = tmp_path / "samples.json"
    renamed.write_text(open(v1_file(GROUP_PATHS["glaive"][0])).read())
    with pytest.raises(MissingFieldError, match=hint):
        td.load("nestful", data_files=str(renamed), split="train", cache_dir=str(tmp_path / "cache"))
    # A v2 row without its sample_id is not v1's: no such advice
    row = json.loads(open(shared_data("nestful", "third_party", "reconstructed_current_v2",
                                      "rows_github_native_format.jsonl")).readline())
    del row["sample_id"]
    v2 = tmp_path / "v2.jsonl"
    v2.write_text(json.dumps(row) + "\n")
    with pytest.raises(MissingFieldError) as caught:
        td.load("nestful", data_files=str(v2), split="train", cache_dir=str(tmp_path / "cache"))
    assert caught.value.field == "sample_id" and "data_version" not in str(caught.value)


def test_v1_files_given_to_verify_say_they_cannot_be_verified(tmp_path):
    """The hint for v1 data read as v2 told verify's and score's users to pass --option data_version=v1, which neither
    command has (an argparse error), and v1 rows could not be verified anyway: they have no gold answers."""
    from tooluse_datasets.builders.nestful.verify import verify
    from tooluse_datasets.errors import MissingFieldError

    with pytest.raises(MissingFieldError, match="v1 rows have no gold answers, so verify and score cannot use them"):
        verify(v1_file(GROUP_PATHS["executable"][0]), functions_dir=str(shared_data("nestful", "data_v2",
                                                                                  "executable_functions")),
               cache_dir=str(tmp_path / "cache"))


def test_a_reference_without_its_leading_dollar_is_reported_not_lost(loaded):
    """Real executable row 21 passes "var1.product_id$" (its leading $ missing) to the product-details call: kept as
    text by the spec's rule, so no call_graph edge; the dependency it meant went unreported by every rule."""
    rows, _ = loaded
    row = by_upstream_row(rows["executable"])[21]
    details = row["messages"][1]["tool_calls"][1]
    assert details["function"]["arguments"]["product_id"] == "var1.product_id$"
    assert [e for e in row["call_graph"] if e["consumer"] == details["id"]] == []
    found = [f for f in check_row(row) if f.rule == "nestful.undefined_reference"]
    assert [f.field for f in found] == ["messages[1].tool_calls[1].function.arguments.product_id"]
    assert 'without its leading "$"' in found[0].message
    # Text of that shape naming no earlier call, and a well-formed reference, are not reported
    fixed = json.loads(json.dumps(row))
    fixed["messages"][1]["tool_calls"][1]["function"]["arguments"]["product_id"] = "$var1.product_id$"
    assert _reference_findings(fixed) == []
    fixed["messages"][1]["tool_calls"][1]["function"]["arguments"]["product_id"] = "var9.product_id$"
    assert _reference_findings(fixed) == []

