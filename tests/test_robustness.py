"""Bad input in skip mode: every row converted or reported with its file, row and reason, map-style and streaming
alike; whole files that cannot be read are reported, not raised. One test per case the fuzzing found
(tests/test_fuzz.py generates them at random; these pin each one down)."""
from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

import pytest

import tooluse_datasets as td

NESTFUL_SAMPLE = Path(td.sample_files("nestful")["train"][0])


def load_both(source: str, data_files, cache_dir: str, **options) -> dict[str, tuple[dict, td.SkipReport]]:
    """``{"map": ({split: rows}, report), "stream": (...)}`` with ``on_error="skip"``."""
    out = {}
    for mode in ("map", "stream"):
        report = td.SkipReport()
        splits = td.load(source, data_files=data_files, on_error="skip", report=report, cache_dir=cache_dir,
                         streaming=mode == "stream", **options)
        out[mode] = ({name: list(ds) for name, ds in splits.items()}, report)
    return out


def nestful_rows() -> list[dict]:
    return [json.loads(line) for line in NESTFUL_SAMPLE.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("content", ["", "{}\n[]\n"], ids=["empty_file", "every_row_bad"])
def test_a_split_left_empty_by_skips_is_an_empty_split(tmp_path, cache_dir, content):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    results = load_both("nestful", str(path), cache_dir)
    for mode, (splits, report) in results.items():
        assert splits == {"train": []}, mode
        assert report.rows_read == report.skipped == content.count("\n")


def test_a_toolmind_split_whose_rows_are_all_bad_is_empty_and_the_others_load(tmp_path, cache_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    for row in rows:
        if row["split"] == "tau-train":
            row["messages"] = row["messages"][:50]  # truncated JSON
    path = tmp_path / "toolmind.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    bad = sum(r["split"] == "tau-train" for r in rows)
    results = load_both("toolmind", str(path), cache_dir)
    assert results["map"][0] == results["stream"][0]
    splits, report = results["map"]
    assert splits["tau_train"] == [] and sum(map(len, splits.values())) == len(rows) - bad
    assert report.rows_read == len(rows) and report.skipped == bad


def test_a_skip_report_quoting_a_lone_surrogate_saves_and_loads_back(tmp_path):
    report = td.SkipReport(keep_all=True, rows_path=tmp_path / "rows.jsonl")
    report.count_read(1)
    report.add(td.InvalidValueError("unknown role '\ud800x'", file="d\udcff.jsonl", row=0, field="messages[0].role"))
    report.close()
    report.save(tmp_path / "report.json")
    back = td.SkipReport.load(tmp_path / "report.json")
    assert back.to_dict() == report.to_dict()
    assert back.examples[0].message == "unknown role '\ud800x'" and back.rows[0]["file"] == "d\udcff.jsonl"
    lines = (tmp_path / "rows.jsonl").read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == report.rows


def _bad_nestful_file(path: Path, bad: int) -> list[int]:
    """The sample's rows and ``bad`` rows without ``input`` in between; the bad rows' numbers."""
    good = nestful_rows()
    lines, bad_rows = [], []
    for i in range(bad):
        row = dict(good[i % len(good)], sample_id=f"bad-{i}")
        del row["input"]
        bad_rows.append(len(lines))
        lines.append(json.dumps(row))
        lines.append(json.dumps(dict(good[i % len(good)], sample_id=f"good-{i}")))
    path.write_text("\n".join(lines) + "\n")
    return bad_rows


def test_every_skipped_row_is_listed_with_file_row_and_reason_map_style_and_streaming(tmp_path, cache_dir):
    path = tmp_path / "data.jsonl"
    bad_rows = _bad_nestful_file(path, 30)  # more than the report's 20 examples
    expected = [{"source": "nestful", "file": str(path), "row": n, "field": "input", "error": "MissingFieldError",
                 "reason": "MissingFieldError:input", "message": "NESTFUL rows need 'input'"} for n in bad_rows]
    for streaming in (True, False):
        report = td.SkipReport(keep_all=True)
        ds = td.load("nestful", data_files=str(path), split="train", on_error="skip", report=report,
                     cache_dir=cache_dir, streaming=streaming)
        assert len(list(ds)) == 30
        assert report.skipped == 30 and len(report.examples) == td.SkipReport.MAX_EXAMPLES
        assert report.rows == expected, streaming
    # map-style: the list lives beside the cached report, so a load from the cache lists the same rows
    files = list(Path(ds.cache_files[0]["filename"]).parent.glob("skips-*.rows.jsonl"))
    assert len(files) == 1 and [json.loads(line) for line in files[0].read_text().splitlines()] == expected
    listed = tmp_path / "skipped.jsonl"
    td.load("nestful", data_files=str(path), split="train", on_error="skip", cache_dir=cache_dir,
            report=td.SkipReport(rows_path=listed))
    assert [json.loads(line) for line in listed.read_text().splitlines()] == expected


def _document_items(path: Path) -> list:
    from tooluse_datasets.shards.reading import read_shard
    from tooluse_datasets.shards.shard import DOCUMENT, Shard

    return [item for batch in read_shard(Shard(str(path), DOCUMENT), 2) for item in batch.items]


@pytest.fixture(params=["whole", "streamed", "streamed-by-tokens", "streamed-in-runs"])
def array_mode(request, monkeypatch):
    """JSON arrays are parsed whole up to ARRAY_WHOLE_BYTES, else read element by element: every array test runs
    both ways, the streamed way in 5-byte reads (elements span many), and also without the element regex (token
    by token only, as on Python 3.10); and in runs of elements parsed together, a few short elements a run."""
    from tooluse_datasets.shards import documents

    if request.param != "whole":
        monkeypatch.setattr(documents, "ARRAY_WHOLE_BYTES", 0)
        monkeypatch.setattr(documents, "_ARRAY_READ_BYTES", 5)
    if request.param == "streamed-by-tokens":
        monkeypatch.setattr(documents, "_ELEMENT", None)
    if request.param == "streamed-in-runs":
        monkeypatch.setattr(documents, "_ARRAY_READ_BYTES", 50)
        monkeypatch.setattr(documents, "RUN_BYTES", 120)
    else:
        monkeypatch.setattr(documents, "RUN_BYTES", 0)
    return request.param


@pytest.mark.parametrize("bad", ["1e400", "NaN", "-Infinity", '"\\ud800"', "[" * 1100 + "]" * 1100, "tru"])
def test_a_json_array_with_one_bad_element_keeps_the_others(tmp_path, cache_dir, bad, array_mode):
    rows = nestful_rows()
    elements = [json.dumps(r) for r in rows]
    elements[1] = elements[1].replace('"arg_0": ', f'"arg_0": {bad}, "x": ', 1)
    path = tmp_path / "data.json"
    path.write_text("[\n" + ",\n".join(elements) + "\n]\n")
    results = load_both("nestful", str(path), cache_dir)
    assert results["map"][0] == results["stream"][0]
    splits, report = results["map"]
    assert [r["meta"]["sample_id"] for r in splits["train"]] == [rows[0]["sample_id"], rows[2]["sample_id"]]
    assert report.rows_read == 3 and report.skipped == 1
    assert [(e.row, e.field) for e in report.examples] == [(1, "<element>")]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_a_trailing_comma_in_a_json_array_is_one_file_error_naming_its_byte_not_an_element(tmp_path, cache_dir,
                                                                                          array_mode, bom):
    """``[{...}, {...},]`` is not JSON: the comma is reported where it is (its byte in the file, a BOM counted),
    the elements before it are rows, and no phantom empty element is parsed (whose error said only that an
    empty document is not JSON)."""
    from conftest import shared_data

    rows = [json.loads(line) for line in shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()]
    text = bom + ("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + ",\n]\n").encode()
    path = tmp_path / "agent.json"
    path.write_bytes(text)
    comma = text.rindex(b",")
    results = load_both("ms_swift", str(path), cache_dir)
    assert results["map"][0] == results["stream"][0]
    assert results["map"][1].examples == results["stream"][1].examples
    splits, report = results["map"]
    assert len(splits["train"]) == len(rows)
    assert report.rows_read == len(rows) + 1 and report.skipped == 1
    [error] = report.examples
    assert (error.error, error.file, error.row, error.field) == ("InvalidJsonError", str(path), len(rows), "<file>")
    assert f"trailing comma after the last element (byte {comma})" in error.message
    with pytest.raises(td.InvalidJsonError, match=f"row {len(rows)}, field '<file>': trailing comma .*byte {comma}"):
        list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))


@pytest.mark.parametrize("end", [",\n", ",", ""], ids=["comma-newline", "comma", "no-element"])
def test_a_json_array_cut_short_after_a_comma_is_a_file_error_not_read_as_whole(tmp_path, cache_dir, array_mode, end):
    """``[{...}, {...},`` (a file cut short at an element's end) is not JSON: the elements before the cut are rows,
    then one file error; it was read as a whole array, saying nothing. ``[`` alone likewise."""
    from conftest import shared_data

    rows = [json.loads(line) for line in shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()] if end else []
    path = tmp_path / "agent.json"
    path.write_text("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + end, encoding="utf-8")
    results = load_both("ms_swift", str(path), cache_dir)
    assert results["map"][1].examples == results["stream"][1].examples
    splits, report = results["map"]
    assert len(splits["train"]) == len(rows) and report.skipped == 1
    [error] = report.examples
    assert (error.error, error.row, error.field) == ("InvalidJsonError", len(rows), "<file>")
    assert "no closing bracket" in error.message


def _sample_rows(source: str) -> list[dict]:
    rows = []
    for file in td.sample_files(source)["train"]:
        if file.endswith(".parquet"):
            import pyarrow.parquet as pq

            rows += pq.read_table(file).to_pylist()
        else:
            rows += [json.loads(line) for line in Path(file).read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


@pytest.mark.parametrize("source", ["nestful", "ms_swift", "llamafactory", "toolmind"])
@pytest.mark.parametrize("end", ["", "\n  "], ids=["at-the-brace", "white-space"])
def test_a_json_array_cut_short_after_a_whole_element_keeps_that_element(tmp_path, cache_dir, array_mode, source,
                                                                         end):
    """``[{...}, {...}`` (cut just before its closing bracket): the last element is whole, so it is a row, then
    the cut is one file error after it; that element was reported as the cut ("cannot be read") and lost."""
    rows = _sample_rows(source)
    path = tmp_path / "rows.json"
    path.write_text("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + end, encoding="utf-8")
    whole = tmp_path / "whole" / "rows.json"
    whole.parent.mkdir()
    whole.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    expected = load_both(source, str(whole), cache_dir)["stream"]
    results = load_both(source, str(path), cache_dir)
    assert results["map"][1].examples == results["stream"][1].examples
    for splits, report in results.values():
        assert splits == expected[0]
        assert report.skipped == expected[1].skipped + 1
        error = report.examples[-1]
        assert (error.error, error.row, error.field) == ("InvalidJsonError", len(rows), "<file>")
        assert f"no closing bracket: the file ends after element {len(rows) - 1} (cut short?)" in error.message


def test_a_state_resumed_on_a_json_array_edited_or_cut_since_is_refused(tmp_path, array_mode):
    """As for JSON Lines: a saved stream resumes an array read a block at a time at the byte after the last
    element's comma, and an array parsed whole at the next element's index. An element edited above that byte
    moved the rest: the stream read on from inside an element (its tail a bad row, the real rows lost); an array
    cut short below the saved element resumed silently with nothing; an array parsed whole, edited, resumed by
    index in rows it was not saved from. The state names the array's version: an edited array is the file's
    error (with on_error="skip" reported, nothing of it read). A state without a version (saved by an earlier
    release) is still checked against the array itself: a ValueError at the first row where its position no longer
    fits (an element edited in place of an array parsed whole still resumes by index there)."""
    from conftest import shared_data

    rows = [json.loads(line) for line in shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 4
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(rows))

    def stream(**kw):
        return td.load("ms_swift", data_files=str(path), split="train", streaming=True, **{"on_error": "skip", **kw})

    whole = [row["id"] for row in stream()]
    ds = stream()
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(2)]
    state = ds.state_dict()
    iterator.close()
    unversioned = _without_file_version(state)

    edited = [dict(rows[0], messages=rows[0]["messages"][:2])] + rows[1:]  # the first element made shorter
    path.write_text(json.dumps(edited))
    report = td.SkipReport()
    resumed = stream(report=report)
    resumed.load_state_dict(state)
    assert list(resumed) == [] and report.by_reason == {"InvalidValueError:<file>": 1}
    resumed = stream(on_error="raise")
    resumed.load_state_dict(state)
    with pytest.raises(td.InvalidValueError, match="changed since"):
        next(iter(resumed))
    resumed = stream()
    resumed.load_state_dict(unversioned)
    if array_mode == "whole":
        assert head + [row["id"] for row in resumed] == whole
    else:
        with pytest.raises(ValueError, match="the file changed since the state_dict was saved"):
            next(iter(resumed))

    path.write_text(json.dumps(rows[:1]))  # cut short before the saved element
    resumed = stream()
    resumed.load_state_dict(unversioned)
    with pytest.raises(ValueError, match="past the end of the file|past the end of the array"):
        next(iter(resumed))

    path.write_text(json.dumps(rows))
    resumed = stream()
    resumed.load_state_dict(state)
    assert head + [row["id"] for row in resumed] == whole


def _without_file_version(state):
    """A stream's state as an earlier release saved it: without the version of the file it was taken from."""
    if isinstance(state, dict):
        return {k: None if k == "file_version" else _without_file_version(v) for k, v in state.items()}
    return state


def test_an_array_element_that_is_not_utf8_is_named_by_its_byte_in_the_file(tmp_path, cache_dir, array_mode):
    """As for a JSON Lines line: the element's error names the bad byte and where it is in the file, where it
    said 'str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)'."""
    from conftest import shared_data

    rows = [json.loads(line) for line in shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
            .read_text(encoding="utf-8").splitlines() if line.strip()]
    elements = [json.dumps(r, ensure_ascii=False).encode() for r in rows]
    elements[3] = elements[3].replace(b'"role": "user"', b'"role": "user", "note": "caf\xe9"', 1)  # Latin-1 text
    assert b"\xe9" in elements[3]
    text = b"\xef\xbb\xbf[\n" + b",\n".join(elements) + b"\n]\n"
    path = tmp_path / "agent.json"
    path.write_bytes(text)
    results = load_both("ms_swift", str(path), cache_dir)
    assert results["map"][0] == results["stream"][0]
    assert results["map"][1].examples == results["stream"][1].examples
    splits, report = results["map"]
    assert len(splits["train"]) == len(rows) - 1 and report.rows_read == len(rows) and report.skipped == 1
    [error] = report.examples
    assert (error.row, error.field) == (3, "<element>")
    bad_byte = text.index(b"\xe9")
    assert error.message == f"element is not UTF-8 text (byte 0xe9 at byte {bad_byte} of the file; JSON files are UTF-8)"


def _wrapped_rows_file(tmp_path: Path, source: str) -> tuple[Path, str, list]:
    """A JSON file of one object holding a source's real rows in a list under a key: ToolMind's graph_syn rows
    as ADP commits them (``{"_provenance": ..., "rows": [...]}``, read by ms-swift and by ToolMind with
    ``messages_column="conversations"``), or a source's sample rows as ``{"version": 1, "data": [...]}``."""
    from conftest import shared_data

    if source in ("ms_swift", "toolmind"):
        path = shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json")
        return path, "rows", json.loads(path.read_text(encoding="utf-8"))["rows"]
    rows = [json.loads(line) for line in Path(td.sample_files(source)["train"][0]).read_text().splitlines()
            if line.strip()]
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"version": 1, "data": rows}, indent=2))
    return path, "data", rows


@pytest.mark.parametrize("source", ["ms_swift", "toolmind", "llamafactory", "nestful"])
def test_a_json_object_wrapping_the_rows_is_refused_naming_the_key_that_holds_them(tmp_path, cache_dir, source):
    """A file ``{"data": [row, ...]}`` was one row refused for a missing messages field (its rows not counted, the
    message no help): the error names the key holding the rows and what to do, the same in both modes; the
    rows saved as the advice says load whole."""
    options = {"messages_column": "conversations"} if source == "toolmind" else {}
    path, key, rows = _wrapped_rows_file(tmp_path, source)
    results = load_both(source, str(path), cache_dir, **options)
    assert results["map"][1].examples == results["stream"][1].examples
    for mode, (splits, report) in results.items():
        assert sum(map(len, splits.values())) == 0 and report.rows_read == report.skipped == 1, mode
    [error] = results["map"][1].examples
    assert (error.error, error.file, error.row, error.field) == ("InvalidValueError", str(path), 0, key)
    assert f"its {key!r} holds a list of {len(rows)} rows" in error.message and "top-level array" in error.message
    with pytest.raises(td.InvalidValueError, match=f"{re.escape(str(path))}, row 0, field '{key}'"):
        td.load(source, data_files=str(path), split="train", streaming=True, **options).take(1).__iter__().__next__()
    if source != "toolmind":  # (ToolMind's own roles are not graph_syn's OpenAI ones)
        fixed = tmp_path / "rows.json"
        fixed.write_text(json.dumps(rows))
        loaded = load_both(source, str(fixed), f"{cache_dir}/fixed", **options)
        assert loaded["map"][0] == loaded["stream"][0]
        assert len(loaded["map"][0]["train"]) == len(rows) and loaded["map"][1].skipped == 0


def test_a_json_object_wrapping_toolmind_rows_beside_split_files_is_refused_naming_the_key(tmp_path, cache_dir):
    """Beside a file with `split` values, the wrapper (no `split` of its own) was reported as a file with no
    split column, hiding the rows in its list: it is refused naming the key that holds them, as when alone."""
    import pyarrow.parquet as pq

    sample = td.sample_files("toolmind")["train"][0]
    rows = pq.read_table(sample).to_pylist()
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"version": 1, "data": rows}))
    results = load_both("toolmind", [sample, str(wrapped)], cache_dir)
    for mode, (splits, report) in results.items():
        assert sum(map(len, splits.values())) == len(rows) and report.skipped == 1, mode
        [error] = report.examples
        assert (error.error, error.file, error.row, error.field) == ("InvalidValueError", str(wrapped), 0, "data")
        assert f"its 'data' holds a list of {len(rows)} rows" in error.message, mode


def test_rows_that_are_not_objects_or_not_utf8_are_named_in_json_terms_and_by_byte(tmp_path):
    """Messages said 'a JSON NoneType/list' and, for a Latin-1 line, 'str is not valid UTF-8: surrogates not
    allowed: line 1 column 1 (char 0)' (no byte, a wrong place)."""
    lines = tmp_path / "rows.jsonl"
    lines.write_bytes(b'{"messages": "caf\xe9"}\n[1]\nnull\n"s"\ntrue\n2.5\n')
    array = tmp_path / "rows.json"
    array.write_text('[7, null, {"x": []}, "s"]')
    report = td.SkipReport(keep_all=True)
    for path in (lines, array):
        assert list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                            report=report)) == []
    assert [(r["row"], r["field"], r["message"]) for r in report.rows] == [
        (0, "<line>", "line is not UTF-8 text (byte 0xe9 at byte 17 of the line; JSON files are UTF-8)"),
        (1, "<line>", "line holds a JSON array, not an object"),
        (2, "<line>", "line holds a JSON null, not an object"),
        (3, "<line>", "line holds a JSON string, not an object"),
        (4, "<line>", "line holds a JSON boolean, not an object"),
        (5, "<line>", "line holds a JSON number, not an object"),
        (0, "<element>", "element is a JSON number, not an object"),
        (1, "<element>", "element is a JSON null, not an object"),
        (2, "messages", "an ms-swift agent row needs a messages column (messages, conversations or conversation)"),
        (3, "<element>", "element is a JSON string, not an object"),
    ]


@pytest.mark.parametrize("text, expected", [
    ('[{"a": "]}\\"["}, {"b": [1, {"c": 2}]}]', [{"a": ']}"['}, {"b": [1, {"c": 2}]}]),  # brackets in strings
    ("[ ]", []),
    ("[ ] tail", ["error <file>"]),
    ('[{"a": 1}, {"b": 2}', [{"a": 1}, {"b": 2}, "error <file>"]),  # cut before "]": the last element is whole
    ('[{"a": 1}, {"b": 2', [{"a": 1}, "error <element>"]),  # truncated: the last element is cut
    ('[{"a": 1}, {"b": "open}, {"c": 3}]', [{"a": 1}, "error <element>"]),  # unterminated string: the rest
    ('[{"a": 1}, {"b": NaN}] tail', [{"a": 1}, "error <element>", "error <file>"]),
    ('[{"a": 1} {"b": 2}, {"c": 3}]', ["error <element>", {"c": 3}]),  # a missing comma joins two elements
    ('[{"a": 1}, 7, [1]]', [{"a": 1}, "error <element>", "error <element>"]),  # not objects
])
def test_array_elements_are_delimited_outside_strings(tmp_path, text, expected, array_mode):
    path = tmp_path / "data.json"
    path.write_text(text)
    items = _document_items(path)
    assert [n for n, _ in items] == list(range(len(expected)))
    assert [f"error {v.field}" if isinstance(v, td.ToolUseDataError) else v for _, v in items] == expected


def _nested(depth: int) -> dict:
    value: dict = {"x": 1}
    for _ in range(depth):
        value = {"a": [value]}
    return value


MIXED_ARRAY = ("\ufeff[\n  " + ",\n  ".join([json.dumps({"a": "]}\\\"[", "b": [1.5, None]}), json.dumps(_nested(12)), "7",
                                                json.dumps({"c": "\u00e9\n"}, ensure_ascii=False), '{"d": NaN}',
                                                json.dumps({"e": [[[]]]}), "", '"s"']) + "\n] \n")


def test_a_large_json_array_is_read_element_by_element_with_the_same_rows(tmp_path, monkeypatch):
    """An array over ARRAY_WHOLE_BYTES is read a block at a time: its first rows come before the file is read
    through, memory holds one element and a block, and rows, errors and numbers are those of the whole parse
    (an element nested deeper than the regex follows, a blank element is an error, a BOM is skipped)."""
    from tooluse_datasets.shards import documents
    from tooluse_datasets.shards.shard import DOCUMENT, Shard

    path = tmp_path / "data.json"
    path.write_text(MIXED_ARRAY + " " * 100_000, encoding="utf-8")  # white space after the array is no error
    whole = [(n, v if isinstance(v, dict) else str(v)) for n, v in _document_items(path)]
    assert [n for n, _ in whole] == list(range(8)) and isinstance(whole[1][1], dict)
    read_at_first_row = []

    def counting_open(file):
        opened = real_open(file)
        read = opened.read

        def counted(size=-1):
            data = read(size)
            counted.total += len(data)
            return data

        counted.total = 0
        opened.read = counted
        read_at_first_row.append(counted)
        return opened

    real_open = documents.open_text_file
    monkeypatch.setattr(documents, "open_text_file", counting_open)
    monkeypatch.setattr(documents, "ARRAY_WHOLE_BYTES", 64)
    monkeypatch.setattr(documents, "_ARRAY_READ_BYTES", 32)
    monkeypatch.setattr(documents, "RUN_BYTES", 256)  # a run is read before it is parsed: twice this ahead
    batches = documents.read_document(Shard(str(path), DOCUMENT), 2)
    first = next(batches)
    assert read_at_first_row[0].total < 2_000  # the 1 KB sniff and a few blocks, of 100 KB
    streamed = [(n, v if isinstance(v, dict) else str(v)) for batch in [first, *batches] for n, v in batch.items]
    assert streamed == whole


def test_a_large_json_array_resumes_after_any_row(tmp_path, monkeypatch, array_mode):
    """A streamed array's positions hold the byte offset after each element and its comma, so a resume seeks
    there (the last element's is 0: the array is read again, its elements skipped)."""
    from tooluse_datasets.shards import documents
    from tooluse_datasets.shards.shard import DOCUMENT, Shard

    path = tmp_path / "data.json"
    path.write_text(MIXED_ARRAY, encoding="utf-8")
    shard = Shard(str(path), DOCUMENT)
    batches = list(documents.read_document(shard, 3))
    items = [item for batch in batches for item in batch.items]
    positions = [p for batch in batches for p in batch.positions]
    if array_mode != "whole":  # (negative: inside a run of elements parsed together)
        assert all(offset != 0 for _, offset in positions[:-1]) and positions[-1] == (8, 0)
    for position in positions:
        rest = [item for batch in documents.read_document(shard, 3, resume=position) for item in batch.items]
        assert [(n, str(v)) for n, v in rest] == [(n, str(v)) for n, v in items if n >= position[0]]


def _rows_alike(layout: str) -> str:
    """An array of rows with the same first key, as real files hold, and what must not be read in a run: a
    nested list of objects starting with that key too (a false boundary), an integer beyond 64 bits, NaN, an
    element nested past orjson's depth, a comma and the key inside a string, an element that is not JSON."""
    rows = [json.dumps({"id": i, "text": f"row {i}, {{\"id\": {i}}}", "calls": [{"id": i, "x": [1.5, None]}] * (i % 3)},
                       indent=2 if layout == "pretty" else None, separators=None if layout == "pretty" else (",", ":"))
            for i in range(40)]
    rows[7] = rows[7].replace('"text"', '"big": 123456789012345678901234567890, "text"', 1)
    rows[15] = rows[15].replace('"text"', '"bad": NaN, "text"', 1)
    rows[23] = '{"id": 23, "deep": ' + "[" * 1100 + "]" * 1100 + "}"
    rows[31] = '{"id": 31, "x": tru}'
    separator = ",\n  " if layout == "pretty" else ","
    return "[\n  " + separator.join(rows) + "\n]\n" if layout == "pretty" else "[" + separator.join(rows) + "]"


@pytest.mark.parametrize("layout", ["pretty", "compact"])
def test_runs_of_elements_parsed_together_give_the_rows_errors_and_resumes_of_one_by_one(tmp_path, monkeypatch,
                                                                                         layout):
    """A large array is read in runs of elements parsed by one orjson call where the guessed boundary holds;
    a wrong guess, or a run holding what the exact reader treats apart, falls back to one element at a time.
    Rows, errors, numbering and every resume point are those of reading each element alone."""
    from tooluse_datasets.shards import documents
    from tooluse_datasets.shards.shard import DOCUMENT, Shard

    path = tmp_path / "data.json"
    path.write_text(_rows_alike(layout), encoding="utf-8")
    shard = Shard(str(path), DOCUMENT)
    monkeypatch.setattr(documents, "ARRAY_WHOLE_BYTES", 0)

    def read(resume=None) -> tuple[list, list]:
        batches = list(documents.read_document(shard, 4, resume=resume))
        items = [(n, v if isinstance(v, dict) else f"error {v.field}") for b in batches for n, v in b.items]
        return items, [p for b in batches for p in b.positions]

    monkeypatch.setattr(documents, "RUN_BYTES", 0)
    alone, _ = read()
    assert [v for _, v in alone].count("error <element>") == 3 and len(alone) == 40
    assert alone[7][1]["big"] == 123456789012345678901234567890  # exact
    calls = []
    real_run = documents._element_run
    monkeypatch.setattr(documents, "_element_run", lambda *a: calls.append(real_run(*a)) or calls[-1])
    monkeypatch.setattr(documents, "_ARRAY_READ_BYTES", 97)
    for run_bytes in (300, 700, 1 << 20):
        monkeypatch.setattr(documents, "RUN_BYTES", run_bytes)
        calls.clear()
        items, positions = read()
        assert items == alone, run_bytes
        if run_bytes < 1000:  # (one run of the whole array holds the bad rows: read one by one)
            assert any(values is not None for _, values in calls)  # runs were read...
            assert any(offset < 0 for _, offset in positions)  # ...and positions point inside them
        for position in positions:
            assert read(position)[0] == [(n, v) for n, v in alone if n >= position[0]], (run_bytes, position)
    monkeypatch.setattr(documents, "_INTO_BITS", 2)  # runs of 4 elements or more cannot be resumed into: not taken
    monkeypatch.setattr(documents, "RUN_BYTES", 700)
    calls.clear()
    items, positions = read()
    assert items == alone and all(len(values) < 4 for _, values in calls if values is not None)
    assert [read(p)[0] for p in positions] == [[(n, v) for n, v in alone if n >= p[0]] for p in positions]


@pytest.mark.parametrize("source", ["nestful", "toolmind"])
@pytest.mark.parametrize("name, content", [
    ("fake.parquet", b'{"a": 1}\n'),                      # JSON named .parquet
    ("fake.jsonl", b"PAR1\x00\x00binary"),                 # Parquet named .jsonl
    ("fake.json", b"\x1f\x8b\x08\x00gzip"),                # gzip named .json
    ("fake2.jsonl", b"\xff\xfe{\x00}\x00\n\x00"),           # UTF-16
])
def test_a_file_that_is_not_what_its_extension_says_is_one_reported_file_error(tmp_path, cache_dir, source,
                                                                               name, content):
    good = td.sample_files(source)["train"]
    bad = tmp_path / name
    bad.write_bytes(content)
    clean = load_both(source, good, cache_dir + "-clean")["map"]
    results = load_both(source, good + [str(bad)], cache_dir)
    assert results["map"][0] == results["stream"][0]
    splits, report = results["map"]
    assert sum(map(len, splits.values())) == sum(map(len, clean[0].values()))
    assert report.rows_read == clean[1].rows_read + 1 and report.skipped == clean[1].skipped + 1
    assert [(e.file, e.row, e.field) for e in report.examples] == [(str(bad), None, "<file>")]
    with pytest.raises(td.InvalidValueError, match="<file>"):  # on_error="raise": the typed error
        list(td.load(source, data_files=good + [str(bad)], streaming=True, split=next(iter(splits))))


def test_nestful_ids_are_unique_and_readable(tmp_path, cache_dir):
    first, second, third = nestful_rows()
    rows = [first, second, dict(first), dict(third, sample_id=7), dict(third, sample_id=["a", 1]),
            dict(third, sample_id=True), dict(third, sample_id=""), dict(first)]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = load_both("nestful", str(path), cache_dir)
    assert results["map"][0] == results["stream"][0]
    splits, report = results["map"]
    ids = [r["id"] for r in splits["train"]]
    domain = ids[0].split("/")[1]
    assert ids == [f"nestful/{domain}/{first['sample_id']}", ids[1], f"nestful/{domain}/{first['sample_id']}#2",
                   f"nestful/{ids[3].split('/')[1]}/7", f"nestful/{domain}/{first['sample_id']}#7"]
    assert [r["meta"]["sample_id"] for r in splits["train"]][2] == first["sample_id"]  # the upstream id, kept
    assert [(e.row, e.field) for e in report.examples] == [(4, "sample_id"), (5, "sample_id"), (6, "sample_id")]
    assert '["a", 1]' in report.examples[0].message  # quoted as JSON writes it


# --------------------------------------------------------------------------------------------------
# Commands on bad input: one line naming file, row and field; exact output; no partial files
# --------------------------------------------------------------------------------------------------


def _big_int_file(path: Path) -> dict:
    row = nestful_rows()[0]
    row["output"][0]["arguments"]["arg_0"] = 2**70
    row["gold_answer"] = -(2**80)
    path.write_text(json.dumps(row) + "\n")
    return row


def test_export_writes_integers_beyond_64_bits_exactly(tmp_path):
    from tooluse_datasets import cli

    _big_int_file(tmp_path / "big.jsonl")
    for fmt in ("unified", "raw"):
        assert cli.main(["export", "nestful", "--data-files", str(tmp_path / "big.jsonl"), "--format", fmt,
                         "--out", str(tmp_path / "out")]) == 0
        (line,) = (tmp_path / "out" / f"nestful-{fmt}-train.jsonl").read_text().splitlines()
        row = json.loads(line)  # the stdlib reads big integers exactly
        output = row["output"] if fmt == "raw" else None
        arguments = output[0]["arguments"] if output else row["messages"][1]["tool_calls"][0]["function"]["arguments"]
        assert arguments["arg_0"] == 2**70 and type(arguments["arg_0"]) is int
        assert (row["gold_answer"] if fmt == "raw" else row["meta"]["gold_answer"]) == -(2**80)


def test_a_failed_export_leaves_no_partial_file(tmp_path, capsys):
    from tooluse_datasets import cli

    rows = nestful_rows()
    bad = dict(rows[1])
    del bad["input"]
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
    assert cli.main(["export", "nestful", "--data-files", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: nestful, {path}, row 1, field 'input': NESTFUL rows need 'input'"
    assert not (tmp_path / "out").exists()  # no partial file, nor the empty folder the run made


def test_skipped_rows_option_lists_every_skipped_row(tmp_path, capsys):
    from tooluse_datasets import cli

    path = tmp_path / "data.jsonl"
    bad_rows = _bad_nestful_file(path, 25)
    for command in ("export", "validate"):
        listed = tmp_path / f"{command}-skipped.jsonl"
        args = [command, "nestful", "--data-files", str(path), "--on-error", "skip", "--skipped-rows", str(listed)]
        code = cli.main(args + (["--out", str(tmp_path / "out")] if command == "export" else []))
        assert code == (0 if command == "export" else 1)  # validate fails on unreadable rows by default
        records = [json.loads(line) for line in listed.read_text().splitlines()]
        assert [(r["file"], r["row"], r["field"], r["reason"]) for r in records] == \
            [(str(path), n, "input", "MissingFieldError:input") for n in bad_rows]
    capsys.readouterr()


@pytest.mark.parametrize("args, expected", [
    (["export", "nestful", "--data-files", "{tmp}/missing.jsonl", "--out", "{tmp}/out"],
     "error: nestful: Unable to find '{tmp}/missing.jsonl' (data_files=['{tmp}/missing.jsonl'])"),
    (["show", "nestful", "--sample", "--split", "nope"], "error: ValueError: nestful has no split 'nope'; its splits here: train"),
    (["stats", "nosuch", "--sample"], "error: ValueError: unknown source 'nosuch'; choose one of"),
])
def test_commands_on_bad_input_print_one_line(tmp_path, capsys, args, expected):
    from tooluse_datasets import cli

    assert cli.main([a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected.format(tmp=tmp_path)) and err.count("\n") == 1


def test_a_bug_is_one_line_without_v_and_a_traceback_with_v(monkeypatch, capsys):
    from tooluse_datasets import cli
    from tooluse_datasets.commands import stats

    def broken(args):
        raise TypeError("'NoneType' object is not subscriptable")

    monkeypatch.setattr(stats, "run", broken)
    assert cli.main(["stats", "nestful", "--sample"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected TypeError" in err and "-v" in err
    with pytest.raises(TypeError):
        cli.main(["-v", "stats", "nestful", "--sample"])


def test_a_typed_error_wrapped_by_datasets_is_printed_as_itself():
    from datasets.exceptions import DatasetGenerationError

    from tooluse_datasets.cli import error_line

    typed = td.InvalidValueError("bad role", file="f.jsonl", row=3, field="messages[0].role")
    try:
        try:
            raise typed
        except td.ToolUseDataError as exc:
            raise DatasetGenerationError("An error occurred while generating the dataset") from exc
    except DatasetGenerationError as wrapped:
        assert error_line(wrapped) == "f.jsonl, row 3, field 'messages[0].role': bad role"


@pytest.mark.parametrize("source", ["nestful", "ms_swift", "toolmind", "llamafactory"])
def test_streamed_rows_equal_stored_rows_as_json_key_order_included(source, cache_dir):
    from tooluse_datasets.codec import json_bytes

    results = load_both(source, td.sample_files(source), cache_dir)
    mapped, streamed = results["map"][0], results["stream"][0]
    assert list(mapped) == list(streamed)
    for split in mapped:  # == on dicts ignores key order; exported JSON and hashes do not
        assert [json_bytes(r) for r in mapped[split]] == [json_bytes(r) for r in streamed[split]], split


def test_toolmind_files_without_split_values_beside_files_with_them_are_reported_row_by_row(tmp_path, cache_dir):
    import pyarrow.parquet as pq

    sample = td.sample_files("toolmind")["train"][0]
    rows = pq.read_table(sample).to_pylist()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    no_column = tmp_path / "no_column.jsonl"
    no_column.write_text("".join(json.dumps({"messages": r["messages"]}) + "\n" for r in rows[:2]) + "not json\n")
    files = [sample, str(empty), str(no_column)]
    results = load_both("toolmind", files, cache_dir)
    assert results["map"][0] == results["stream"][0]
    splits, report = results["map"]
    assert sum(map(len, splits.values())) == len(rows)
    assert report.rows_read == len(rows) + 3 and report.skipped == 3
    assert [(e.file, e.row, e.field) for e in report.examples] == [(str(no_column), 0, "split"),
                                                                   (str(no_column), 1, "split"),
                                                                   (str(no_column), 2, "<line>")]
    with pytest.raises(td.MissingFieldError, match="no_column.jsonl, row 0, field 'split'"):
        td.load("toolmind", data_files=files, cache_dir=cache_dir + "-raise")


@pytest.mark.parametrize("row_group_size", [1, 4, 1000])
def test_toolmind_split_cells_that_are_not_utf8_are_reported_rows(tmp_path, cache_dir, row_group_size):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    splits = [r["split"].encode() for r in rows]
    bad = [3, len(rows) - 1]
    for i in bad:
        splits[i] = b"\xed\xa0\x80" + splits[i]  # a lone surrogate's bytes: not UTF-8
    table = pa.table({"messages": [r["messages"] for r in rows],
                      "split": pa.array(splits, pa.binary()).view(pa.string())})
    path = tmp_path / "toolmind.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    results = load_both("toolmind", str(path), cache_dir)
    assert results["map"][0] == results["stream"][0]
    loaded, report = results["map"]
    assert sum(map(len, loaded.values())) == len(rows) - len(bad)
    assert report.rows_read == len(rows) and report.skipped == len(bad)
    assert sorted((e.row, e.field) for e in report.examples) == [(i, "split") for i in bad]


@pytest.mark.parametrize("bad_cell", [False, True], ids=["utf8", "one_cell_not_utf8"])
def test_a_toolmind_split_column_of_string_views_splits_as_strings_do(tmp_path, cache_dir, bad_cell):
    """A `split` column stored as string_view (Arrow's other string layout, which writers such as Polars use) is
    text: it was refused as "not strings", and every row loaded into one `train` split with no error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    rows = rows[::2] + rows[1::2]  # splits interleaved: a batch selects several runs of its rows
    splits = [r["split"].encode() for r in rows]
    if bad_cell:
        splits[3] = b"\xed\xa0\x80" + splits[3]  # a lone surrogate's bytes: not UTF-8
    messages = [r["messages"] for r in rows]
    results = {}
    for layout in (pa.binary(), pa.binary_view()):
        text = pa.string() if layout == pa.binary() else pa.string_view()
        path = tmp_path / f"{text}.parquet"
        pq.write_table(pa.table({"messages": messages, "split": pa.array(splits, layout).view(text)}), path,
                       row_group_size=4)
        assert pq.read_schema(path).field("split").type == text
        results[text] = load_both("toolmind", str(path), f"{cache_dir}/{text}")
    for mode in ("map", "stream"):
        (plain, plain_report), (views, views_report) = results[pa.string()][mode], results[pa.string_view()][mode]
        assert list(views) == list(plain) != ["train"], mode
        assert {name: [r["messages"] for r in rows] for name, rows in views.items()} == \
            {name: [r["messages"] for r in rows] for name, rows in plain.items()}, mode
        assert views_report.rows_read == len(rows) and views_report.skipped == plain_report.skipped == int(bad_cell)
        assert [(e.row, e.field) for e in views_report.examples] == [(3, "split")] * bad_cell, mode


def test_a_toolmind_split_column_of_nulls_only_is_read_as_null_cells(tmp_path, cache_dir):
    """pandas and pyarrow type a column whose cells are all None as `null`, not string: such a file's rows were
    each reported as having no split column (beside other files) or loaded into `train` (alone), where the same
    rows in JSON Lines, or a string column of nulls, load into the `unlabeled` split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sample = td.sample_files("toolmind")["train"][0]
    unlabeled = [{**row, "split": None} for row in pq.read_table(sample).to_pylist()[:4]]
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.Table.from_pylist(unlabeled), nulls, row_group_size=3)
    assert pa.types.is_null(pq.read_schema(nulls).field("split").type)
    lines = tmp_path / "nulls.jsonl"
    lines.write_text("".join(json.dumps(row) + "\n" for row in unlabeled))
    for files in ([str(nulls)], [sample, str(nulls)]):
        results = load_both("toolmind", files, f"{cache_dir}/{len(files)}")
        as_lines = load_both("toolmind", [str(lines) if f == str(nulls) else f for f in files],
                             f"{cache_dir}/lines{len(files)}")
        for mode, (splits, report) in results.items():
            assert [r["messages"] for r in splits["unlabeled"]] == \
                [r["messages"] for r in as_lines[mode][0]["unlabeled"]], mode
            assert list(splits) == list(as_lines[mode][0]) and "train" not in splits, mode
            assert len(splits["unlabeled"]) == 4 and report.skipped == 0, mode


def test_a_toolmind_parquet_with_two_split_columns_splits_by_the_value_its_rows_hold(tmp_path, cache_dir):
    """Two columns named `split` (a careless concat) stopped every load with a bare KeyError ("Column split does
    not exist in schema"). A row holds the last column's value, as a JSON object holds a repeated key's last
    value: the rows are split by it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tooluse_datasets.builders.toolmind.upstream import hf_split_name

    sample = td.sample_files("toolmind")["train"][0]
    table = pq.read_table(sample)
    stale = pa.array(["synthetic"] * table.num_rows)
    twice = tmp_path / "twice.parquet"
    columns = [table["messages"], stale, table["split"]]
    pq.write_table(pa.Table.from_arrays(columns, names=["messages", "split", "split"]), twice, row_group_size=4)
    for files in ([str(twice)], [sample, str(twice)]):
        results = load_both("toolmind", files, f"{cache_dir}/{len(files)}", config="raw")
        assert results["map"][0] == results["stream"][0]
        splits, report = results["map"]
        assert report.skipped == 0 and sum(map(len, splits.values())) == table.num_rows * len(files)
        assert len(splits) == 7
        assert all(hf_split_name(r["split"]) == name for name, rows in splits.items() for r in rows)


@pytest.mark.parametrize("values", [[True, False, True], [1, 2, 3]], ids=["bool", "int64"])
def test_a_toolmind_parquet_whose_split_column_is_not_text_is_one_file_error(tmp_path, cache_dir, values):
    """Each row of such a file was reported on its own (no row of it has a split value): the file is one error
    naming the column and its type, whichever shards it is read in, and the other files still load."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sample = td.sample_files("toolmind")["train"][0]
    rows = pq.read_table(sample).to_pylist()
    odd = tmp_path / "odd.parquet"
    table = pa.table({"messages": [r["messages"] for r in rows[:3]], "split": values})
    pq.write_table(table, odd, row_group_size=1)
    for files, converted in (([sample, str(odd)], len(rows)), ([str(odd)], 0)):
        results = load_both("toolmind", files, cache_dir + str(len(files)), shard_bytes=1)
        assert results["map"][0] == results["stream"][0]
        for splits, report in results.values():
            assert sum(map(len, splits.values())) == converted
            assert [(e.error, e.file, e.row, e.field) for e in report.examples] == \
                [("InvalidValueError", str(odd), None, "split")]
            assert f"the 'split' column holds {table['split'].type}, not strings" in report.examples[0].message
        with pytest.raises(td.InvalidValueError, match="odd.parquet, field 'split': the 'split' column holds"):
            for ds in td.load("toolmind", data_files=files, streaming=True).values():
                list(ds)


@pytest.mark.parametrize("values", [[1, 2, 3], [[1], [2], [3]]], ids=["int64", "list_of_int64"])
@pytest.mark.parametrize("split_column", ["split", None])
def test_a_toolmind_parquet_whose_messages_column_holds_no_conversations_is_one_file_error(tmp_path, cache_dir,
                                                                                          values, split_column):
    """Each row of such a file was reported on its own ("messages must be a JSON string or an array, got
    number"): the file is one error naming the column and its type, whichever shards it is read in, and the other
    files still load."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sample = td.sample_files("toolmind")["train"][0]
    rows = pq.read_table(sample).num_rows
    odd = tmp_path / "odd.parquet"
    table = pa.table({"messages": values, "split": ["synthetic", "tau_train", "synthetic"]})
    pq.write_table(table, odd, row_group_size=1)
    for files, converted in (([str(odd), sample], rows), ([str(odd)], 0)):
        results = load_both("toolmind", files, f"{cache_dir}/{len(files)}", shard_bytes=1, split_column=split_column)
        assert results["map"][0] == results["stream"][0]
        for splits, report in results.values():
            assert sum(map(len, splits.values())) == converted
            assert [(e.error, e.file, e.row, e.field) for e in report.examples] == \
                [("InvalidValueError", str(odd), None, "messages")]
            stored = pq.read_schema(odd).field("messages").type
            assert f"the 'messages' column holds {stored}, not conversations" in report.examples[0].message


@pytest.mark.parametrize("kind", ["large_string", "dictionary", "binary", "json", "list_of_structs"])
def test_a_toolmind_parquet_of_any_type_holding_conversations_loads_as_text_does(tmp_path, cache_dir, kind):
    """A messages column of text (Arrow's other string types, binary, datasets' Json(): an arrow.json extension)
    or of message structs loads the rows its text gives; the Json() column was refused as holding no conversations."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(td.sample_files("toolmind")["train"][0])
    texts = table.column("messages").combine_chunks()
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    column = {"large_string": lambda: texts.cast(pa.large_string()), "dictionary": texts.dictionary_encode,
              "binary": lambda: texts.cast(pa.binary()),
              "json": lambda: pa.ExtensionArray.from_storage(pa.json_(), texts),
              "list_of_structs": lambda: pa.array(list(map(json.loads, texts.to_pylist())), pa.list_(message))}[kind]()
    paths = {}
    for name, messages in (("text", texts), (kind, column)):
        paths[name] = tmp_path / f"{name}.parquet"
        pq.write_table(table.set_column(0, "messages", messages), paths[name], row_group_size=4)
    expected = load_both("toolmind", str(paths["text"]), f"{cache_dir}/text", shard_bytes=1, num_proc=2)
    results = load_both("toolmind", str(paths[kind]), f"{cache_dir}/{kind}", shard_bytes=1, num_proc=2)
    for mode, (splits, report) in results.items():
        assert report.skipped == 0 and report.rows_read == table.num_rows
        assert {name: [r["messages"] for r in rows] for name, rows in splits.items()} == \
            {name: [r["messages"] for r in rows] for name, rows in expected[mode][0].items()}


def test_a_toolmind_parquet_shard_opens_its_file_once(tmp_path, monkeypatch):
    """The split column's type is checked on the file the shard reads its rows from: opening it once more per shard
    to check it cost a footer read per shard (a request per shard on the Hub)."""
    import pyarrow.parquet as pq
    from tooluse_datasets.builders.toolmind import splits

    table = pq.read_table(td.sample_files("toolmind")["train"][0]).drop_columns(["split"])  # (no split planned)
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path, row_group_size=1)
    opened = []
    monkeypatch.setattr(splits, "open_parquet", lambda file, _open=splits.open_parquet: opened.append(file) or
                        _open(file))
    (ds,) = td.load("toolmind", data_files=str(path), streaming=True, shard_bytes=1).values()
    opened.clear()  # (planning the splits reads the file's split values)
    assert len(list(ds)) == table.num_rows and ds.num_shards > 1
    assert len(opened) == ds.num_shards


ARGS_0 = "messages[1].tool_calls[0].function.arguments"  # the call holding the value, not the whole column


@pytest.mark.parametrize("depth, error, field", [(300, "JsonValueError", ARGS_0), (600, "JsonValueError", ARGS_0),
                                                 (1100, "InvalidJsonError", "<line>")])
def test_values_nested_too_deep_to_store_are_reported_rows(tmp_path, cache_dir, depth, error, field):
    rows = nestful_rows()
    deep = json.dumps(rows[0]).replace('"arg_0": ', '"arg_0": ' + "[" * depth + "1" + "]" * depth + ', "x": ', 1)
    path = tmp_path / "data.jsonl"
    path.write_text(deep + "\n" + json.dumps(rows[1]) + "\n")
    results = load_both("nestful", str(path), cache_dir)
    for mode, (splits, report) in results.items():
        assert [r["meta"]["sample_id"] for r in splits["train"]] == [rows[1]["sample_id"]], mode
        assert [(e.row, e.error, e.field) for e in report.examples] == [(0, error, field)], mode
    if error == "JsonValueError":
        assert "more than 254 levels" in results["map"][1].examples[0].message


def _nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("big_int", [False, True], ids=["orjson", "stdlib"])
def test_dumps_refuses_the_same_depth_whichever_writer_it_uses(big_int):
    from tooluse_datasets.codec import MAX_DEPTH, dumps, loads

    extra = [2**70] if big_int else []  # an integer beyond 64 bits sends dumps to the stdlib writer
    fits = [_nested(MAX_DEPTH - 1), *extra]  # the list adds one level
    assert loads(dumps(fits)) == fits
    with pytest.raises(td.JsonValueError, match=f"more than {MAX_DEPTH} levels"):
        dumps([_nested(MAX_DEPTH), *extra])


@pytest.mark.parametrize("depth", [250, 253, 254, 255, 600])
def test_streaming_and_storage_refuse_the_same_deep_rows(depth):
    """Streaming checks all JSON leaves of a row in one list (one level deeper than any column), with a big
    integer in another column sending it to the other writer: the verdict must still be storage's."""
    from tooluse_datasets.arrow_rows import RowEncoder
    from tooluse_datasets.codec import MAX_DEPTH
    from tooluse_datasets.schema import UNIFIED_FEATURES, message, unified_row

    row = unified_row(id="x", source="s", subset="t", tools=[{"big": 2**70}], messages=[message("user", "hi")],
                      meta=_nested(depth - 1, leaf=[]))  # meta: ``depth`` containers
    encoder = RowEncoder(UNIFIED_FEATURES)
    stored = True
    try:
        encoder.encode_row(row)
    except td.JsonValueError:
        stored = False
    assert stored == (depth <= MAX_DEPTH)
    if stored:
        encoder.check_row(row)
    else:
        with pytest.raises(td.JsonValueError):
            encoder.check_row(row)


def test_toolmind_json_files_are_read_only_by_the_splits_they_hold(tmp_path):
    """JSON files carry no statistics: each split used to read every file, splits x files parses (minutes for
    the fuzz run's 100+ split values). A split now reads the files holding its value; the first split also
    reads the lines that belong to no split, where there are any, to report them."""
    import pyarrow.parquet as pq

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    files = []
    for value in ("synthetic", "When2Call", "tau-train"):
        path = tmp_path / f"{value}.jsonl"
        path.write_text("".join(json.dumps({**r, "split": value}) + "\n" for r in rows[:2]))
        files.append(str(path))

    def read_by() -> dict:
        builder = td.registry.builder_class("toolmind")(config_name="unified", data_files=files)
        return {plan.name: sorted(Path(s.file).stem for s in plan.shards) for plan in builder.split_plans()}

    assert read_by() == {"synthetic": ["synthetic"], "When2Call": ["When2Call"], "tau_train": ["tau-train"]}
    loaded = td.load("toolmind", data_files=files, streaming=True)
    assert {name: len(list(ds)) for name, ds in loaded.items()} == {"synthetic": 2, "When2Call": 2, "tau_train": 2}
    with open(files[2], "a") as f:
        f.write("{broken\n")
    assert read_by() == {"synthetic": ["synthetic", "tau-train"], "When2Call": ["When2Call"],
                         "tau_train": ["tau-train"]}
    report = td.SkipReport()
    loaded = td.load("toolmind", data_files=files, streaming=True, on_error="skip", report=report)
    assert {name: len(list(ds)) for name, ds in loaded.items()} == {"synthetic": 2, "When2Call": 2, "tau_train": 2}
    assert report.skipped == 1


def test_skipped_rows_are_listed_when_worker_processes_stream(tmp_path):
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    bad = [_bad_nestful_file(path, 3) for path in paths]
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("nestful", data_files=[str(p) for p in paths], split="train", streaming=True, num_proc=2,
                        on_error="skip", report=report))
    assert len(rows) == 6 and report.skipped == 6
    assert sorted((r["file"], r["row"]) for r in report.rows) == \
        sorted((str(p), n) for p, rows_of in zip(paths, bad) for n in rows_of)


def test_dataloader_workers_append_their_skipped_rows_to_the_report_s_file(tmp_path):
    torch = pytest.importorskip("torch", reason="torch (the [trl] extra) is needed for DataLoader workers")
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    bad = [_bad_nestful_file(path, 3) for path in paths]
    report = td.SkipReport(rows_path=tmp_path / "skipped.jsonl")
    stream = td.load("nestful", data_files=[str(p) for p in paths], split="train", streaming=True,
                     on_error="skip", report=report)
    rows = list(torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2))
    listed = [json.loads(line) for line in (tmp_path / "skipped.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and report.skipped == 0  # counted in the workers' copies
    assert sorted((r["file"], r["row"]) for r in listed) == \
        sorted((str(p), n) for p, rows_of in zip(paths, bad) for n in rows_of)


def test_skipped_rows_are_listed_when_worker_processes_prepare(tmp_path, cache_dir):
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    bad = [_bad_nestful_file(path, 3) for path in paths]
    report = td.SkipReport(keep_all=True)
    ds = td.load("nestful", data_files=[str(p) for p in paths], split="train", num_proc=2, on_error="skip",
                 report=report, cache_dir=cache_dir)
    assert len(ds) == 6 and report.skipped == 6
    assert sorted((r["file"], r["row"]) for r in report.rows) == \
        sorted((str(p), n) for p, rows_of in zip(paths, bad) for n in rows_of)


def test_a_report_of_worker_processes_lists_the_skipped_rows_in_file_order(tmp_path, cache_dir):
    """Each prepare job leaves a report, named after a digest of its shards: merged in that name's order, the
    rows (and the first examples) of a num_proc=4 load came in any order of the jobs, unlike one process's."""
    paths = [tmp_path / f"{name}.jsonl" for name in "abcd"]
    bad = [_bad_nestful_file(path, 2) for path in paths]
    in_order = [(str(p), n) for p, rows_of in zip(paths, bad) for n in rows_of]
    for num_proc in (None, 4):
        report = td.SkipReport(keep_all=True)
        td.load("nestful", data_files=[str(p) for p in paths], split="train", num_proc=num_proc, on_error="skip",
                report=report, cache_dir=f"{cache_dir}/{num_proc}")
        assert [(r["file"], r["row"]) for r in report.rows] == in_order
        assert [(e.file, e.row) for e in report.examples] == in_order



def test_prepare_workers_take_sigterms_default_action_whatever_handler_the_caller_has(tmp_path, cache_dir,
                                                                                      monkeypatch):
    """A pool ends its workers with SIGTERM. A Ray driver has SIGTERM handlers of its own (Ray's Python one calls
    sys.exit, its native one logs a stack trace from inside the handler), which workers forked for a prepare with
    num_proc inherited: in a full run, after the Ray tests, a worker outlived the pool's SIGTERM and the prepare
    waited on it for ever. The workers now take the default action; the caller keeps its handler."""
    import os
    import signal

    from tooluse_datasets.pipeline import ShardConverter

    from datasets.download.download_manager import DownloadManager

    seen, fetched = tmp_path / "handlers.txt", tmp_path / "download-handlers.txt"
    convert, download = ShardConverter.batches, DownloadManager._download_single

    def note_handler(path: Path) -> None:  # (runs in the workers: they are forked with the patches below)
        with open(path, "a") as out:
            out.write(f"{os.getpid()} {signal.getsignal(signal.SIGTERM)!r}\n")

    def batches(self, *args, **kwargs):
        note_handler(seen)
        yield from convert(self, *args, **kwargs)

    def download_single(self, *args, **kwargs):
        note_handler(fetched)
        return download(self, *args, **kwargs)

    def callers(signum, frame):
        raise AssertionError("not sent")

    monkeypatch.setattr(ShardConverter, "batches", batches)
    monkeypatch.setattr(DownloadManager, "_download_single", download_single)
    sample = Path(td.sample_files("nestful")["train"][0])
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path in paths:
        path.write_bytes(sample.read_bytes())
    previous = signal.signal(signal.SIGTERM, callers)
    try:
        ds = td.load("nestful", data_files=[str(p) for p in paths], split="train", num_proc=2, cache_dir=cache_dir)
        assert signal.getsignal(signal.SIGTERM) is callers
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(ds) == 2 * len(sample.read_text().splitlines())
    workers = [line.split(" ", 1) for line in seen.read_text().splitlines()]
    # (how many of the pool's two processes took a shard is the pool's choice: one may take both on a busy machine)
    assert workers and str(os.getpid()) not in {pid for pid, _ in workers}
    assert {handler for _, handler in workers} == {repr(signal.SIG_DFL)}
    # datasets' pool downloading (here: resolving) the files with num_proc forks workers too
    fetchers = [line.split(" ", 1) for line in fetched.read_text().splitlines()]
    assert str(os.getpid()) not in {pid for pid, _ in fetchers}
    assert {handler for _, handler in fetchers} == {repr(signal.SIG_DFL)}

@pytest.mark.parametrize("kind", ["jsonl", "json"])
def test_a_byte_order_mark_and_crlf_line_ends_cost_no_row(tmp_path, cache_dir, kind):
    rows = nestful_rows()
    text = ("\r\n".join(json.dumps(r) for r in rows) if kind == "jsonl" else json.dumps(rows)) + "\r\n"
    path = tmp_path / f"data.{kind}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    results = load_both("nestful", str(path), cache_dir)
    for mode, (splits, report) in results.items():
        assert [r["meta"]["sample_id"] for r in splits["train"]] == [r["sample_id"] for r in rows], mode
        assert report.rows_read == len(rows) and report.skipped == 0


@pytest.mark.parametrize("kind", ["jsonl", "json"])
def test_toolmind_rows_whose_split_is_not_a_string_are_reported(tmp_path, cache_dir, kind):
    import pyarrow.parquet as pq

    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()[:3]
    for row, value in zip(rows, (5, ["a"], True)):
        row["split"] = value
    path = tmp_path / f"data.{kind}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) if kind == "jsonl" else json.dumps(rows))
    results = load_both("toolmind", str(path), cache_dir)
    for mode, (splits, report) in results.items():
        assert sum(map(len, splits.values())) == 0, mode
        assert report.rows_read == report.skipped == 3
        assert {(e.row, e.field) for e in report.examples} == {(0, "split"), (1, "split"), (2, "split")}


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_damaged_parquet_row_group_costs_its_rows_only(tmp_path, cache_dir, streaming):
    """Zeroed bytes in one row group's messages pages: that group's rows are reported one by one, the rows
    before and after it load, and rows returned + skipped == rows in the file."""
    import pyarrow.parquet as pq

    from conftest import benchmark_module

    gen = benchmark_module("generate_toolmind")
    path = tmp_path / "damaged.parquet"
    gen.write_parquet(str(path), 300, gen.GeneratorOptions(seed=5, max_chars=8_000), row_group_size=50)
    meta = pq.ParquetFile(path).metadata
    messages = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == "messages")
    chunk = meta.row_group(2).column(messages)
    data = bytearray(path.read_bytes())
    start = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size // 2
    data[start:start + 512] = bytes(512)
    path.write_bytes(bytes(data))

    report = td.SkipReport(keep_all=True)
    splits = td.load("toolmind", data_files=str(path), streaming=streaming, on_error="skip", report=report,
                     cache_dir=cache_dir)
    rows = [r for ds in splits.values() for r in ds]
    damaged = set(range(100, 150))
    assert report.rows_read == 300 and len(rows) + report.skipped == 300
    assert {r["row"] for r in report.rows} == damaged and {r["field"] for r in report.rows} == {"<row group>"}
    assert {int(r["id"].rsplit("/", 1)[1]) for r in rows} == set(range(300)) - damaged


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_row_group_whose_split_column_is_damaged_is_reported_by_the_split_its_statistics_name(
        tmp_path, cache_dir, streaming):
    """Planning trusts statistics that give a row group one split value and never reads its split column; when
    that column's pages turn out damaged, the split the statistics name reports the group's rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(td.sample_files("toolmind")["train"][0])
    table = table.take(pc.sort_indices(table, [("split", "ascending")]))
    path = tmp_path / "sorted.parquet"
    pq.write_table(table, path, row_group_size=3, use_dictionary=False, compression="none")
    meta = pq.ParquetFile(path).metadata
    split_leaf = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == "split")
    last = meta.num_row_groups - 1
    stats = meta.row_group(last).column(split_leaf).statistics
    assert stats.min == stats.max != min(table["split"].to_pylist())   # one value, not the first split's
    chunk = meta.row_group(last).column(split_leaf)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset:chunk.data_page_offset + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    path.write_bytes(bytes(data))

    report = td.SkipReport(keep_all=True)
    splits = td.load("toolmind", data_files=str(path), streaming=streaming, on_error="skip", report=report,
                     cache_dir=cache_dir)
    rows = [r for ds in splits.values() for r in ds]
    damaged = set(range(3 * last, table.num_rows))
    assert report.rows_read == table.num_rows and len(rows) + report.skipped == table.num_rows
    assert {r["row"] for r in report.rows} == damaged


def _file_with_repeated_ids(tmp_path: Path) -> tuple[Path, list[str]]:
    """Ten NESTFUL rows; rows 0, 5 and 8 share the sample_id 'dup'. All are the sample's first row (but the id): the
    tests cut the file in shards by bytes, and rows of one size keep which shard holds a row independent of
    the bundled rows' lengths."""
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    lines = []
    for i in range(10):
        row = json.loads(good[0])
        row["sample_id"] = "dup" if i in (0, 5, 8) else f"row-{i}"
        lines.append(json.dumps(row))
    path = tmp_path / "dups.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, lines


def test_repeated_nestful_ids_do_not_depend_on_shards_workers_or_resuming(tmp_path, cache_dir):
    """The first row holding a sample_id keeps it, a repeat gets #<row>: the same ids read whole, cut into
    shards, prepared by two processes, and resumed past the first occurrence."""
    path, lines = _file_with_repeated_ids(tmp_path)
    small = path.stat().st_size // 4
    whole = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", streaming=True)]
    assert [i.split("/")[-1] for i in whole if i.split("/")[-1].startswith("dup")] == ["dup", "dup#5", "dup#8"]
    cut = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", streaming=True, shard_bytes=small)]
    prepared = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", shard_bytes=small,
                                         num_proc=2, cache_dir=cache_dir)]
    workers = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", streaming=True,
                                        shard_bytes=small, num_proc=2)]
    ds = td.load("nestful", data_files=str(path), split="train", streaming=True)
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(3)]
    resumed = td.load("nestful", data_files=str(path), split="train", streaming=True)
    resumed.load_state_dict(ds.state_dict())
    assert cut == prepared == workers == head + [r["id"] for r in resumed] == whole

    # The first holder of an id is refused: the repeat still gets #<row>, read whole or cut.
    first = json.loads(lines[0])
    del first["tools"]
    path.write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    for shard_bytes in (None, small):
        options = {"shard_bytes": shard_bytes} if shard_bytes else {}
        ids = [r["id"].split("/")[-1] for r in td.load("nestful", data_files=str(path), split="train",
                                                         streaming=True, on_error="skip", **options)]
        assert [i for i in ids if i.startswith("dup")] == ["dup#5", "dup#8"], shard_bytes


@pytest.mark.parametrize("sample_ids", [["s#2", "s", "s"], ["s", "s", "s#1"], ["s#1", "s#1", "s"]])
def test_an_upstream_id_that_looks_like_a_repeat_never_shares_an_id_with_one(tmp_path, cache_dir, sample_ids):
    """'s#2' at row 0 and the repeat of 's' at row 2 both used to be 's#2': one of the two rows was lost to any
    user keying on ids (a mirror's dedup, score's gold lookup). Ids are unique, read whole, cut or prepared."""
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    lines = []
    for i, sample_id in enumerate(sample_ids):
        row = json.loads(good[i])
        row["sample_id"] = sample_id
        lines.append(json.dumps(row))
    path = tmp_path / "ids.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", streaming=True)]
    cut = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", streaming=True,
                                    shard_bytes=path.stat().st_size // 3)]
    prepared = [r["id"] for r in td.load("nestful", data_files=str(path), split="train", cache_dir=cache_dir)]
    assert len(set(whole)) == len(whole) == 3 and whole == cut == prepared
    # An id without the look of a suffix is kept as it is by its first holder.
    assert all(row_id.endswith("#%d" % row) for row, row_id in enumerate(whole)
               if sample_ids[row].rpartition("#")[2].isdigit() or sample_ids[row] in sample_ids[:row])
    assert [r["meta"]["sample_id"] for r in td.load("nestful", data_files=str(path), split="train",
                                                   streaming=True)] == sample_ids  # upstream's value kept


def test_a_source_copied_while_it_primes_ids_primes_them_again_in_the_copy(tmp_path):
    """Workers get the source pickled (by a pool's feeder thread) while this process may be priming the file's
    ids: a copy caught with some of the file's ids but the file not yet marked primed primes its own, so a
    repeat read by a worker still gets #<row>."""
    import pickle

    from tooluse_datasets import registry
    from tooluse_datasets.pipeline import ShardConverter

    path, _ = _file_with_repeated_ids(tmp_path)
    builder = registry.builder_class("nestful")(config_name="unified", data_files=str(path),
                                                shard_bytes=path.stat().st_size // 4)
    plan = builder.split_plans()[0]
    builder.source.unique_ids._primed_rows[(str(path), "row-1")] = 1  # mid-priming: one id in, not marked
    copy = pickle.loads(pickle.dumps(builder.source))
    assert not copy.unique_ids._primed_rows
    converter = ShardConverter(copy, ["unified"])
    later = [r["id"].split("/")[-1] for shard in plan.shards[1:]
             for batch in converter.batches(plan, shard, arrow=False) for r in batch.rows["unified"]]
    assert [i for i in later if i.startswith("dup")] == ["dup#5", "dup#8"]


def test_a_source_copied_after_priming_gives_workers_the_ids_without_reading_them_again(tmp_path, monkeypatch):
    import pickle

    from tooluse_datasets import registry
    from tooluse_datasets.builders.nestful import source as nestful_source
    from tooluse_datasets.pipeline import ShardConverter

    path, _ = _file_with_repeated_ids(tmp_path)
    builder = registry.builder_class("nestful")(config_name="unified", data_files=str(path),
                                                shard_bytes=path.stat().st_size // 4)
    plan = builder.split_plans()[0]
    here = ShardConverter(builder.source, ["unified"])
    # A reader of a later shard primes the file (the first shard's reader learns its ids as it reads instead)
    last = [r["id"] for batch in here.batches(plan, plan.shards[-1], arrow=False) for r in batch.rows["unified"]]
    first = [r["id"] for batch in here.batches(plan, plan.shards[0], arrow=False) for r in batch.rows["unified"]]
    copy = pickle.loads(pickle.dumps(builder.source))  # the file is primed here now

    def no_second_read(path, column):  # a generator, as ids_in_file: fails when read
        raise AssertionError("the worker read the file's ids again")
        yield

    monkeypatch.setattr(nestful_source, "ids_in_file", no_second_read)
    converter = ShardConverter(copy, ["unified"])
    later = [r["id"] for shard in plan.shards[1:] for batch in converter.batches(plan, shard, arrow=False)
             for r in batch.rows["unified"]]
    assert later[-len(last):] == last
    assert [i.split("/")[-1] for i in first + later if "dup" in i] == ["dup", "dup#5", "dup#8"]


def test_source_options_reach_loading_from_the_command_line(tmp_path, capsys):
    """--option NAME=VALUE passes a source option (JSON values: null, false, numbers), as load() takes it."""
    from tooluse_datasets import cli

    out = tmp_path / "out"
    assert cli.main(["export", "toolmind", "--sample", "--out", str(out), "--option", "split_column=null"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["toolmind-unified-train.jsonl"]  # no split column: one split
    assert cli.main(["export", "toolmind", "--sample", "--out", str(out), "--option", "no_such_option=1"]) == 2
    assert cli.main(["stats", "toolmind", "--sample", "--option", "oops"]) == 2
    err = capsys.readouterr().err
    assert "no_such_option" in err and "--option takes NAME=VALUE" in err and "Traceback" not in err
    # Values of the wrong type are refused naming the option, not taken as truthy text or failing deep inside.
    assert cli.main(["export", "toolmind", "--sample", "--out", str(out), "--option", "strict=False"]) == 2
    assert cli.main(["export", "toolmind", "--sample", "--out", str(out), "--option", "shard_bytes=32MB"]) == 2
    err = capsys.readouterr().err
    assert "option strict must be true or false, got 'False'" in err
    assert "option shard_bytes must be an integer, got '32MB'" in err and "Traceback" not in err


@pytest.mark.parametrize("source, options, message", [
    ("toolmind", {"strict": "no"}, "option strict must be true or false"),
    ("toolmind", {"split_column": 5}, "option split_column must be a string or null"),
    ("nestful", {"execution_timeout": "10"}, "option execution_timeout must be a number"),
    ("ms_swift", {"batch_size": 0}, "option batch_size must be positive"),
])
def test_source_options_of_the_wrong_type_are_refused_naming_the_option(source, options, message):
    with pytest.raises(ValueError, match=message):
        td.load(source, data_files=td.sample_files(source), streaming=True, **options)


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("num_proc", [0, -1, 1.5, "2", True])
def test_a_num_proc_that_is_not_a_positive_integer_is_refused_naming_it(num_proc, streaming, cache_dir):
    # datasets failed with a ZeroDivisionError (0), "Invalid batch size -2" (-1) or a TypeError from inside
    with pytest.raises(ValueError, match=f"num_proc must be a positive integer or None, got {num_proc!r}"):
        td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=streaming,
                num_proc=num_proc, cache_dir=cache_dir)


@pytest.mark.parametrize("streaming", [False, True])
def test_a_split_the_data_lacks_is_refused_naming_the_splits_it_has_in_both_modes(streaming, cache_dir):
    with pytest.raises(ValueError, match=r"^ms_swift has no split 'validation'; its splits here: train$"):
        td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="validation", streaming=streaming,
                cache_dir=cache_dir)
    if not streaming:
        assert len(td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train[:2]",
                           cache_dir=cache_dir)) == 2
        return
    # datasets streams no slices ("Bad split: train[:2]"): say what to do instead
    with pytest.raises(ValueError, match=r"split='train\[:2\]' has a slice .* stream 'train' and take rows with "
                                         r"\.skip\(n\) / \.take\(n\)"):
        td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train[:2]", streaming=True)


@pytest.mark.parametrize("streaming", [False, True])
def test_a_misspelt_split_with_a_slice_is_refused_naming_the_split_meant_in_both_modes(streaming, cache_dir):
    """Streamed, `split="tau_trian[:10]"` was refused for its slice alone, advising to stream 'tau_trian': the
    misspelt name, refused in turn once the slice was dropped."""
    with pytest.raises(ValueError, match=r"^toolmind has no split 'tau_trian' \(did you mean 'tau_train'\?\)"):
        td.load("toolmind", data_files=td.sample_files("toolmind"), split="tau_trian[:10]", streaming=streaming,
                cache_dir=cache_dir)


def test_a_stream_of_one_split_named_twice_is_refused_not_read_twice(tmp_path, capsys):
    """``split="train+train"`` streamed every row twice under the same ids (``export --split train+train`` wrote
    12 rows for 6)."""
    from tooluse_datasets.cli import main

    files = td.sample_files("ms_swift")
    with pytest.raises(ValueError, match=r"names 'train' more than once"):
        td.load("ms_swift", data_files=files, split="train+train", streaming=True)
    with pytest.raises(SystemExit) as usage:  # (the command line refuses it as a usage error naming --split)
        main(["export", "ms_swift", "--sample", "--split", "train + train", "--out", str(tmp_path)])
    assert usage.value.code == 2
    assert "more than once" in capsys.readouterr().err and not list(tmp_path.iterdir())
    assert len(list(td.load("ms_swift", data_files=files, split="train", streaming=True))) == 6


@pytest.mark.parametrize("streaming", [False, True])
def test_a_data_file_that_does_not_exist_is_a_data_not_found_error_naming_source_and_path(streaming, tmp_path):
    missing = tmp_path / "missing.jsonl"
    for data_files in (str(missing), {"train": [missing]}, [td.sample_files("ms_swift")["train"][0], str(missing)]):
        with pytest.raises(td.DataNotFoundError, match=r"^ms_swift: Unable to find '.*missing\.jsonl' \(data_files="):
            td.load("ms_swift", data_files=data_files, split="train", streaming=streaming)


def test_arguments_of_the_wrong_type_are_a_type_error_saying_what_is_expected():
    # These failed with "'str' object has no attribute 'wants_rows'", "'int' object is not iterable" and
    # "'list' object has no attribute 'features'".
    files = td.sample_files("ms_swift")
    with pytest.raises(TypeError, match="report must be a tooluse_datasets.SkipReport .* got str"):
        td.load("ms_swift", data_files=files, split="train", streaming=True, report="skips.json")
    # each selection's error names the argument it was given as (it said "a rule selection is ...")
    with pytest.raises(TypeError, match="^validate must be a string .* got 123"):
        td.load("ms_swift", data_files=files, split="train", streaming=True, validate=123)
    with pytest.raises(TypeError, match="^rules must be a string .* got \\[1\\]"):
        td.validate("ms_swift", data_files=files, rules=[1])
    with pytest.raises(TypeError, match="^fail_on must be a string .* got 3"):
        td.validate("ms_swift", data_files=files, fail_on=3)
    with pytest.raises(TypeError, match="^rules must be a string .* got 3"):
        td.validation.filter_dataset(td.load("ms_swift", data_files=files, split="train", streaming=True), 3)
    with pytest.raises(TypeError, match="exact\\(\\) takes a datasets Dataset, IterableDataset or a dict of them, got list"):
        td.exact([{"id": "x"}])
    # what the selections accept is unchanged: a string, a list or any iterable of strings, True, None
    assert len(list(td.load("ms_swift", data_files=files, split="train", streaming=True,
                            validate=(r for r in ["call.*"])))) == 6


@pytest.mark.parametrize("config, hint", [("sharegpt", " (did you mean 'llamafactory'?)"),
                                          ("swfit", " (did you mean 'swift'?)"), ("xyz", "")])
def test_a_format_that_does_not_exist_is_refused_listing_the_formats(config, hint):
    # datasets said "BuilderConfig 'sharegpt' not found. Available: [...]"
    message = f"toolmind has no format {config!r}{hint}; formats: unified, raw, swift, toolmind, llamafactory"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        td.load("toolmind", config, data_files=td.sample_files("toolmind"), streaming=True)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        td.features("toolmind", config)
    # validate() said "format 'sharegpt' has no writer; writers: [...]", as if raw were not a format either
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        td.validate("toolmind", config, data_files=td.sample_files("toolmind"))


@pytest.mark.parametrize("name, meant", [("ToolMind", "toolmind"), ("ms-swift", "ms_swift"),
                                         ("LLaMA-Factory", "llamafactory"), ("xyz", None), (["toolmind"], None),
                                         # a typo: the spelling rule alone gave no hint
                                         ("nestfull", "nestful"), ("toolmnd", "toolmind"),
                                         ("llamafactroy", "llamafactory"), ("tools", None)])
def test_an_unknown_source_is_refused_with_the_registered_name_it_stands_for(name, meant):
    hint = f" (did you mean {meant!r}?)" if meant else ""
    message = f"unknown source {name!r}{hint}; choose one of {list(td.SOURCES)}, or 'all' for all of them"
    for call in (lambda: td.load(name), lambda: td.sample_files(name)):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()


def test_parquet_dates_times_uuids_and_maps_stream_as_they_are_stored(tmp_path, cache_dir):
    """pyarrow gives datetime, date, time and UUID objects and a map's entries as tuples; orjson writes them
    as JSON text, so prepare stored text while a stream handed out the objects. Both now give the text's values."""
    import datetime
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    when = datetime.datetime(2020, 1, 2, 3, 4, 5, 123456)
    ident = uuid.UUID("a3d84429-5a98-49e9-a162-9ea707a7b3d3")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    table = pa.table({
        "messages": pa.array([messages]),
        "created": pa.array([when], pa.timestamp("us")),
        "zoned": pa.array([when.replace(tzinfo=datetime.timezone.utc)], pa.timestamp("s", tz="Europe/Oslo")),
        "day": pa.array([when.date()]),
        "at": pa.array([when.time()]),
        "counts": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        "ident": pa.array([ident.bytes], pa.uuid()),
        "nested": pa.array([{"when": when}]),
    })
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path)
    prepared = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)
    streamed = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))
    assert [dict(r) for r in prepared] == streamed
    assert streamed[0]["meta"] == {
        "created": "2020-01-02T03:04:05.123456", "zoned": "2020-01-02T04:04:05+01:00", "day": "2020-01-02",
        "at": "03:04:05.123456", "counts": [["k", 1]], "ident": "a3d84429-5a98-49e9-a162-9ea707a7b3d3",
        "nested": {"when": "2020-01-02T03:04:05.123456"}}


def test_parquet_nanosecond_timestamps_are_read_as_iso_text_with_every_digit(tmp_path, cache_dir):
    """pandas writes its datetime64[ns] columns as nanosecond timestamps, which pyarrow gives as pandas' Timestamp:
    orjson refused those, so every row of such a file was skipped; they are its ISO text, all nine digits kept."""
    import pandas as pd

    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    frame = pd.DataFrame({"messages": [messages, messages],
                          "created": pd.to_datetime(["2023-11-14 22:13:20.123456789", "2023-11-14 22:13:20.5"]),
                          "zoned": pd.to_datetime(["2023-11-14 22:13:20.000000001"] * 2).tz_localize("UTC")})
    path = tmp_path / "rows.parquet"
    frame.to_parquet(path)
    report = td.SkipReport()
    prepared = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir, on_error="skip",
                       report=report)
    streamed = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))
    assert report.skipped == 0 and [dict(r) for r in prepared] == streamed
    assert [r["meta"] for r in streamed] == [
        {"created": "2023-11-14T22:13:20.123456789", "zoned": "2023-11-14T22:13:20.000000001+00:00"},
        {"created": "2023-11-14T22:13:20.500000", "zoned": "2023-11-14T22:13:20.000000001+00:00"}]


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_data_files_matching_no_file_are_an_error_naming_the_split_and_the_pattern(tmp_path, cache_dir, streaming):
    """datasets resolves a glob that matches nothing to no files: without this check a typo loads as an empty
    split (a literal missing path is already a FileNotFoundError)."""
    real = td.sample_files("ms_swift")["train"][0]
    cases = [(str(tmp_path / "nomatch*.jsonl"), "'train'"), ({"train": real, "test": str(tmp_path / "typo*.jsonl")},
                                                               "'test'")]
    for data_files, split in cases:
        with pytest.raises(td.DataNotFoundError, match=f"match no file for split {split}") as info:
            td.load("ms_swift", data_files=data_files, streaming=streaming, cache_dir=cache_dir)
        assert "*.jsonl" in str(info.value)
    with pytest.raises(td.DataNotFoundError, match="match no file for 'ms_swift'"):
        td.load("all", data_files={"ms_swift": str(tmp_path / "nomatch*.jsonl"), "nestful": td.sample_files("nestful")},
                split="train", streaming=streaming, cache_dir=cache_dir)


def test_data_files_may_be_path_objects(cache_dir):
    path = Path(td.sample_files("ms_swift")["train"][0])
    expected = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))
    assert expected
    for data_files in (path, [path], (path,), {"train": path}, {"train": [path]}):
        assert list(td.load("ms_swift", data_files=data_files, split="train", streaming=True)) == expected
    assert list(td.load("ms_swift", data_files=path, split="train", cache_dir=cache_dir)) == expected


@pytest.mark.parametrize("data_files, message", [
    ({"train": None}, r"data_files\['train'\] holds None"),
    ([td.sample_files("ms_swift")["train"][0], None], "data_files holds None"),
    (5, r"data_files holds 5 \(int\)"),
    (str(Path(td.sample_files("ms_swift")["train"][0]).parent), "data_files names the folder .*; pass data_dir="),
])
def test_data_files_that_are_no_paths_are_refused_naming_them(data_files, message):
    """These raised TypeError: can't concat str to bytes from inside datasets, or 'Unable to find <dir>/'."""
    with pytest.raises(ValueError, match=message):
        td.load("ms_swift", data_files=data_files, streaming=True)


def test_all_takes_data_files_as_a_dict_of_sources_only():
    with pytest.raises(ValueError, match="data_files for source 'all' maps source names to files.*got list"):
        td.load("all", data_files=td.sample_files("ms_swift")["train"], streaming=True)


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_a_misspelled_option_or_error_policy_is_refused_up_front_naming_the_choices(cache_dir, streaming):
    files = td.sample_files("toolmind")
    with pytest.raises(ValueError, match=r"on_error must be one of \('raise', 'skip'\), got 'ignore'"):
        td.load("toolmind", data_files=files, on_error="ignore", streaming=streaming, cache_dir=cache_dir)
    with pytest.raises(ValueError, match="toolmind has no option 'messages_colum'; its options: .*messages_column"):
        td.load("toolmind", data_files=files, messages_colum="messages", streaming=streaming, cache_dir=cache_dir)


def test_a_split_s_report_counts_that_split_only_map_style_as_streaming(tmp_path, cache_dir):
    lines = [line for line in Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines() if line.strip()]
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:3] + ["{bad"]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[:2] + ["{bad", "{bad"]) + "\n")
    files = {"train": str(tmp_path / "a.jsonl"), "test": str(tmp_path / "b.jsonl")}
    counts = {}
    for split in ("test", "train", "train+test"):
        for streaming in (False, True):
            if streaming and "+" in split:
                continue  # streaming reads one split at a time
            report = td.SkipReport()
            rows = list(td.load("ms_swift", data_files=files, split=split, streaming=streaming, on_error="skip",
                                report=report, cache_dir=cache_dir))
            counts[split, streaming] = (len(rows), report.skipped, report.rows_read)
    assert counts["test", False] == counts["test", True] == (2, 2, 4)
    assert counts["train", False] == counts["train", True] == (3, 1, 4)
    assert counts["train+test", False] == (5, 3, 8)


def test_a_bad_row_in_a_worker_process_raises_its_typed_error_naming_file_row_and_field(tmp_path, cache_dir):
    """datasets wraps a worker's error in DatasetGenerationError, whose cause does not survive the trip back
    from a num_proc worker: the typed error itself must."""
    good = [line for line in Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines() if line.strip()]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(good[:3] + ["{bad"] + good[:3]) + "\n")
    with pytest.raises(td.InvalidJsonError) as info:
        td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir, num_proc=2, shard_bytes=500)
    assert (info.value.file, info.value.row, info.value.field) == (str(path), 3, "<line>")


def test_a_prepare_killed_before_its_end_leaves_nothing_counted_in_the_next(tmp_path, cache_dir):
    """datasets prepares into "<folder>.incomplete" and reuses one that a killed prepare (kill -9, out of memory)
    left. Its skip reports were counted with the next prepare's whenever that one named its jobs otherwise
    (another num_proc): 10 bad rows were reported as 20, in every later load from the cache too."""
    import glob
    import os
    import shutil

    sample = td.sample_files("ms_swift")["train"][0]
    lines = Path(sample).read_text().splitlines()
    bad = '{"messages": [{"role": "user"}]}'
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines + [bad, bad]) + "\n")
    # what a prepare leaves behind: its reports and Arrow files, in the folder datasets had not renamed yet
    killed = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", cache_dir=str(tmp_path / "k"))
    folder = os.path.dirname(killed.cache_files[0]["filename"])
    left = os.path.join(folder.replace(str(tmp_path / "k"), cache_dir) + ".incomplete")
    os.makedirs(os.path.dirname(left))
    shutil.copytree(folder, left)
    os.remove(os.path.join(left, "dataset_info.json"))
    for name in glob.glob(os.path.join(left, "skips-*")):
        os.rename(name, name.replace("skips-train-", "skips-train-0"))  # another job's name

    report = td.SkipReport()
    ds = td.load("ms_swift", data_files=str(path), split="train", on_error="skip", report=report, cache_dir=cache_dir)
    assert os.path.dirname(ds.cache_files[0]["filename"]) == left[:-len(".incomplete")]
    assert (report.rows_read, report.skipped, len(ds)) == (len(lines) + 2, 2, len(lines))
    again = td.SkipReport()
    td.load("ms_swift", data_files=str(path), split="train", on_error="skip", report=again, cache_dir=cache_dir)
    assert (again.rows_read, again.skipped) == (len(lines) + 2, 2)


def test_prepare_workers_end_when_the_process_that_started_them_is_killed(tmp_path):
    """A prepare with num_proc killed outright (kill -9, out of memory) left datasets' workers converting their
    shards into the unfinished cache folder, where a prepare started at once counted their skip reports with its
    own (20207 rows read became 33070, served from the cache after), then waiting for ever: they now end within
    seconds of it. Each worker here notes its id and waits inside its shard."""
    import os
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "prepare.py"
    script.write_text(
        "import os, sys, time\n"
        "import tooluse_datasets as td\n"
        "from tooluse_datasets.builder import ToolUseBuilder\n"
        "def waiting(self, *args, **kwargs):\n"
        "    open(os.path.join(sys.argv[1], str(os.getpid())), 'w').close()\n"
        "    time.sleep(600)\n"
        "    yield from ()\n"
        "ToolUseBuilder._generate_tables = waiting\n"
        "td.load('ms_swift', data_files=td.sample_files('ms_swift'), split='train', num_proc=2,\n"
        "        cache_dir=sys.argv[2])\n")
    # (no pipes: workers left running would hold them open)
    with open(tmp_path / "log", "w") as err:
        prepare = subprocess.Popen([sys.executable, str(script), str(pids), str(tmp_path / "cache")],
                                   stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(pids)) < 2 and prepare.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = [int(name) for name in os.listdir(pids)]
    finally:
        prepare.kill()
        prepare.wait()
    assert len(workers) == 2, (tmp_path / "log").read_text()[-2000:]

    def running() -> list[int]:  # the workers and datasets' manager process, forked from the script
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if str(script).encode() in (proc / "cmdline").read_bytes() and \
                        "zombie" not in (proc / "status").read_text().lower():
                    found.append(int(proc.name))
            except (OSError, ValueError):
                pass
        return found

    deadline = time.monotonic() + 30
    while running() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = running()
    for pid in left:
        os.kill(pid, 9)
    assert not left


@pytest.mark.parametrize("where", ["in a string", "after the brace"])
@pytest.mark.parametrize("name", ["data.jsonl", "data.jsonl.gz", "data.json"])
def test_a_nul_byte_in_the_first_row_costs_that_row_not_the_file(tmp_path, cache_dir, name, where):
    """A raw NUL byte inside the first row's text is that row's error, as it is in any later row: the sniff
    that refuses binary files (UTF-16, an image named .jsonl) must not take the file's other rows with it, also
    where the NUL follows the row's opening brace (UTF-16 has one after every character, not after the first
    alone)."""
    import gzip

    from conftest import shared_data

    lines = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes().splitlines()
    at = lines[0].index(b'": "') + 4 if where == "in a string" else 1
    damaged = [lines[0][:at] + b"\x00" + lines[0][at:]] + lines[1:]
    clean = [b""] + lines[1:]  # the bad row left out, the others keeping their row numbers
    write = (lambda path, data: path.write_bytes(gzip.compress(data))) if name.endswith(".gz") else \
        (lambda path, data: path.write_bytes(data))
    (tmp_path / "bad").mkdir()
    (tmp_path / "clean").mkdir()
    write(tmp_path / "bad" / name, b"\n".join(damaged) + b"\n")
    write(tmp_path / "clean" / name, b"\n".join(clean) + b"\n")
    expected = load_both("ms_swift", str(tmp_path / "clean" / name), cache_dir + "-clean")
    results = load_both("ms_swift", str(tmp_path / "bad" / name), cache_dir)
    for mode in ("map", "stream"):
        splits, report = results[mode]
        assert splits == expected[mode][0] and sum(map(len, splits.values())) == len(lines) - 1
        assert (report.rows_read, report.skipped) == (len(lines), 1)
        assert [(e.file, e.row, e.field) for e in report.examples] == [(str(tmp_path / "bad" / name), 0, "<line>")]
    with pytest.raises(td.InvalidJsonError, match=r"row 0, field '<line>'"):
        list(td.load("ms_swift", data_files=str(tmp_path / "bad" / name), split="train", streaming=True))


def test_a_nul_byte_near_the_head_costs_no_later_shard_its_rows(tmp_path, cache_dir):
    """A file's later byte ranges decide whether it is binary from the same bytes as its first one (the first
    line): with a first row that is not an object and a NUL byte in the second, the first range read its rows
    while every later one returned nothing, its rows lost without a report."""
    from conftest import shared_data

    lines = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes().splitlines()
    quote = lines[0].index(b'": "') + 4
    damaged = lines[0][:quote] + b"\x00" + lines[0][quote:]
    rows = [b"[10, 72]", damaged] + lines * 20
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    results = load_both("ms_swift", str(path), cache_dir, shard_bytes=4096)
    for mode in ("map", "stream"):
        splits, report = results[mode]
        assert (report.rows_read, report.skipped, len(splits["train"])) == (len(rows), 2, len(lines) * 20)
        assert [(e.row, e.field) for e in report.examples] == [(0, "<line>"), (1, "<line>")]
    assert results["map"][0] == results["stream"][0]


@pytest.mark.parametrize("shard_bytes", [None, 2048])
def test_a_json_array_in_utf16_without_bom_is_one_file_error(tmp_path, cache_dir, shard_bytes):
    """A ``.json`` array written as UTF-16 without a byte-order mark ("[\\x00{\\x00...") is binary data, one file
    error as it is in a ``.jsonl`` file; it was read as an array of bad elements, one error each that did not
    say why (or its pieces, cut for shard_bytes), while a NUL byte inside a UTF-8 array's first element stays
    that element's error."""
    from conftest import shared_data

    lines = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()] * 10
    options = {"shard_bytes": shard_bytes} if shard_bytes else {}
    utf16 = tmp_path / "utf16" / "data.json"
    utf16.parent.mkdir()
    utf16.write_bytes(json.dumps(rows).encode("utf-16-le"))
    for mode, (splits, report) in load_both("ms_swift", str(utf16), cache_dir + "-16", **options).items():
        assert splits == {"train": []}, mode
        assert [(e.row, e.field) for e in report.examples] == [(None, "<file>")], mode
        assert "not JSON text" in report.examples[0].message
    text = json.dumps(rows).encode()
    quote = text.index(b'": "') + 4
    nul = tmp_path / "nul" / "data.json"
    nul.parent.mkdir()
    nul.write_bytes(text[:quote] + b"\x00" + text[quote:])
    results = load_both("ms_swift", str(nul), cache_dir, **options)
    for mode, (splits, report) in results.items():
        assert len(splits["train"]) == len(rows) - 1, mode
        assert [(e.row, e.field) for e in report.examples] == [(0, "<element>")], mode
    assert results["map"][0] == results["stream"][0]

@pytest.mark.parametrize("content", [b'{\x00"\x00a\x00"\x00:\x001\x00}\x00\n\x00', b'\x00{\x00"\x00a\x00"\x00:\x001\x00}\n',
                                     b"\x00" * 4096], ids=["utf16le", "utf16be", "zeroed"])
def test_binary_files_named_jsonl_stay_one_file_error(tmp_path, content):
    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    report = td.SkipReport()
    assert list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report)) == []
    assert [(e.row, e.field) for e in report.examples] == [(None, "<file>")]
    assert "not JSON text" in report.examples[0].message


def _png(size: int = 64) -> bytes:
    """A valid grayscale PNG image (signature, IHDR, IDAT, IEND), as an ms-swift dataset's images folder holds."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = b"".join(b"\x00" + bytes((x * y) % 251 for x in range(size)) for y in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("shard_bytes", [None, 1024])
def test_an_image_named_jsonl_is_one_file_error_not_an_error_per_line(tmp_path, cache_dir, shard_bytes):
    """A PNG's first "line" (its signature up to the first newline byte) holds no NUL byte: sniffed as text, the
    file was read as lines, one skipped row per newline byte in the image data (and a raised load named a
    row, not the file). Bytes that open no JSON value and are not UTF-8 make it one file error."""
    image = _png()
    assert image.count(b"\n") > 2
    path = tmp_path / "data.jsonl"
    path.write_bytes(image)
    options = {"shard_bytes": shard_bytes} if shard_bytes else {}
    for mode, (splits, report) in load_both("ms_swift", str(path), cache_dir, **options).items():
        assert splits == {"train": []}, mode
        assert (report.rows_read, report.skipped) == (1, 1), mode
        assert [(e.row, e.field) for e in report.examples] == [(None, "<file>")], mode
        assert "not UTF-8 text" in report.examples[0].message
    with pytest.raises(td.InvalidValueError, match="not JSON text") as raised:
        td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir + "-raise")
    assert (raised.value.row, raised.value.field) == (None, "<file>")


@pytest.mark.parametrize("damage", ["latin1_in_object", "surrogate_bytes_in_string"])
def test_a_row_of_text_in_another_encoding_stays_that_rows_error(tmp_path, cache_dir, damage):
    """JSON Lines whose first row is not UTF-8 but opens a JSON value (an object with a Latin-1 byte, a string
    holding a surrogate's bytes) are rows: that row is skipped, the file's other rows are read."""
    from conftest import shared_data

    lines = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes().splitlines()
    quote = lines[0].index(b'": "') + 4
    first = {"latin1_in_object": lines[0][:quote] + b"caf\xe9 " + lines[0][quote:],
             "surrogate_bytes_in_string": b'"\xed\xb2\x80x"'}[damage]
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join([first] + lines[1:]) + b"\n")
    for mode, (splits, report) in load_both("ms_swift", str(path), cache_dir).items():
        assert len(splits["train"]) == len([line for line in lines[1:] if line.strip()]), mode
        assert [(e.row, e.field) for e in report.examples] == [(0, "<line>")], mode
        assert "not UTF-8 text" in report.examples[0].message


def test_a_sigterm_sent_while_a_worker_is_forked_reaches_the_default_action():
    """A pool that ends right after starting its workers can send SIGTERM before the child has put the default
    action in place: the caller's inherited handler ran, or Python dropped the signal ("ignored due to race
    condition"), the worker lived on and the pool waited for ever (seen once in a full run on 3.12). SIGTERM is
    now held back from just before the fork until the child has the default action. Played in a subprocess: the
    signal sent between the fork hooks must end it by SIGTERM, the caller's handler never running."""
    import signal
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import os, signal, sys, threading
        from tooluse_datasets import workers

        def callers(signum, frame):
            print("caller's handler ran", flush=True)

        signal.signal(signal.SIGTERM, callers)
        with workers.forking_workers():
            workers._before_fork()                 # as os.fork() calls it
            # the pool's SIGTERM, sent before the child's hook ran; to this thread, as a forked child has no other
            # (sent to the process, another thread of this one, which does not hold it back, would take it)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            workers._after_fork_in_child()         # the child's hook: default action, then the signal
        print("survived", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
