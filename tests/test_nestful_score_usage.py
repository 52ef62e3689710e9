"""NESTFUL scoring inputs that are ambiguous or unused: gold rows named for a result file that carries its own
gold, a line with two predictions, two different gold rows for one sample_id, and how score's errors name
their source. Real rows from ../shared/data."""
from __future__ import annotations

import json

import pytest

from tooluse_datasets import SkipReport, cli, load, sample_files
from tooluse_datasets.builders.nestful.execution.sandbox import SandboxLimits
from tooluse_datasets.builders.nestful.score import gold_rows_by_id, read_results, score_file
from tooluse_datasets.errors import InvalidValueError, MissingFieldError, ToolUseDataError

from test_nestful_score import CURRENT, functions_dir, rows, write_lines  # noqa: F401 (fixture)
from conftest import shared_data

HF_STRINGS = ("nestful", "third_party", "reconstructed_current_v2", "rows_hf_string_format.jsonl")


def upstream_result_file(tmp_path) -> str:
    """Upstream's output.jsonl for the two real rows (HF string form), each answered with its own gold calls."""
    lines = [dict(r, generated_text=r["output"]) for r in rows(HF_STRINGS)]
    return write_lines(tmp_path / "output.jsonl", lines)


# --------------------------------------------------------------------------------------------------
# Gold rows named for a file whose lines carry their own gold
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", [["--gold-data-files", "{missing}"], ["--gold-data-files", "{gold}"], ["--sample"]])
def test_score_refuses_gold_rows_an_upstream_result_file_would_never_read(option, tmp_path, capsys):
    path = upstream_result_file(tmp_path)
    argv = [a.format(missing=str(tmp_path / "typo_gold.jsonl"), gold=str(shared_data(*CURRENT))) for a in option]
    code = cli.main(["score", "nestful", path, "--no-win-rate", "--json", *argv])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith(f"error: ValueError: {option[0]} was given, but {path!r} holds upstream's result "
                                   "rows")
    # Without it, the file is scored against the gold its lines hold.
    assert cli.main(["score", "nestful", path, "--no-win-rate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["full_sequence_accuracy"] == 1.0


@pytest.mark.parametrize("option", [["--corrected"], ["--executable-functions", "{folder}"], ["--timeout", "5"],
                                    ["--memory-mb", "2048"]])
def test_score_refuses_execution_options_the_no_win_rate_run_would_never_use(option, tmp_path, capsys):
    # Nothing runs without the win rate: a folder, a limit or --corrected given with it was silently unused
    path = upstream_result_file(tmp_path)
    argv = [a.format(folder=str(tmp_path)) for a in option]
    code = cli.main(["score", "nestful", path, "--no-win-rate", "--json", *argv])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert f"{option[0]} applies to the win rate and the executions it makes, which --no-win-rate skips" in captured.err


@pytest.mark.parametrize("option", [{"corrected": True}, {"executable_functions": "functions"},
                                    {"executable_functions_dir": "functions"}, {"limits": SandboxLimits(timeout=30)}],
                         ids=lambda o: next(iter(o)))
def test_python_score_refuses_execution_options_without_the_win_rate_as_the_command_does(option, tmp_path):
    path = upstream_result_file(tmp_path)
    name = next(iter(option))
    with pytest.raises(ValueError, match=f"^{name} applies to the win rate .* which win_rate=False skips"):
        score_file(path, win_rate=False, **option)
    assert score_file(path, win_rate=False).full_sequence_accuracy == 1.0


def test_python_score_file_refuses_unused_gold_rows_as_the_command_does(tmp_path):
    path = upstream_result_file(tmp_path)
    gold = {r["sample_id"]: r for r in rows(CURRENT)}
    for call in (lambda: score_file(path, gold_rows=gold, win_rate=False), lambda: read_results(path, gold)):
        with pytest.raises(ValueError, match=r"^gold_rows was given, but .* no keyed prediction"):
            call()
    assert score_file(path, win_rate=False).full_sequence_accuracy == 1.0
    # Keyed predictions still read the gold rows given.
    keyed = write_lines(tmp_path / "keyed.jsonl", [{"sample_id": s, "calls": r["output"]} for s, r in gold.items()])
    assert score_file(keyed, gold_rows=gold, win_rate=False).full_sequence_accuracy == 1.0


@pytest.mark.parametrize("keyed_first", [True, False])
def test_a_file_mixing_keyed_predictions_and_upstream_result_rows_is_refused_at_the_first_other_line(keyed_first, tmp_path):
    # A line in upstream's shape carries its own gold (here a wrong answer, 99.0), while the gold file has another:
    # scored beside keyed lines, it would count against gold the user did not name.
    gold = {r["sample_id"]: r for r in rows(CURRENT)}
    (first_id, first), (second_id, second) = list(gold.items())[:2]
    keyed = {"sample_id": first_id, "calls": first["output"]}
    upstream = dict(second, gold_answer=99.0, generated_text=json.dumps(second["output"]))
    lines = [keyed, upstream] if keyed_first else [upstream, keyed]
    path = write_lines(tmp_path / "mixed.jsonl", lines)
    with pytest.raises(InvalidValueError if keyed_first else MissingFieldError) as info:
        read_results(path, gold)
    assert (info.value.file, info.value.row, info.value.field) == (path, 1, "output")
    assert "row 0 is" in info.value.message and "one of the two shapes" in info.value.message


# --------------------------------------------------------------------------------------------------
# One prediction a line
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyed", [True, False])
def test_a_line_with_two_predictions_is_an_error_naming_the_line_and_both_fields(keyed, tmp_path, capsys):
    gold = rows(CURRENT)
    first, second = gold
    right = {"sample_id": second["sample_id"], "calls": second["output"]}
    both = {"sample_id": first["sample_id"], "generated_text": "I cannot help with that.", "calls": first["output"]}
    if not keyed:  # upstream's shape: the line carries its gold
        right = dict(second, generated_text=json.dumps(second["output"]))
        both = dict(first, **both)
    path = write_lines(tmp_path / "predictions.jsonl", [right, both])
    gold_by_id = {r["sample_id"]: r for r in gold} if keyed else None
    with pytest.raises(InvalidValueError) as info:
        read_results(path, gold_by_id)
    assert (info.value.file, info.value.row, info.value.field) == (path, 1, "generated_text, calls")
    assert "2 predictions (generated_text, calls)" in info.value.message
    argv = ["--gold-data-files", str(shared_data(*CURRENT))] if keyed else []
    assert cli.main(["score", "nestful", path, "--no-win-rate", *argv]) == 2
    assert f"{path}, row 1, field 'generated_text, calls'" in capsys.readouterr().err


def test_a_null_prediction_beside_another_is_not_the_one_scored(tmp_path):
    # A table written with both columns holds null in the one a row does not use: the other is its prediction.
    gold = {r["sample_id"]: r for r in rows(CURRENT)}
    lines = [{"sample_id": s, "generated_text": None, "calls": r["output"]} for s, r in gold.items()]
    result = score_file(write_lines(tmp_path / "table.jsonl", lines), gold_rows=gold, win_rate=False)
    assert (result.parse_errors, result.full_sequence_accuracy) == (0, 1.0)


# --------------------------------------------------------------------------------------------------
# Two different gold rows for one sample_id
# --------------------------------------------------------------------------------------------------


def test_two_different_gold_rows_for_one_sample_id_are_named_by_file_and_row(tmp_path, capsys):
    first, second = rows(CURRENT)
    changed = dict(first, gold_answer=41.0)  # the same sample_id, another answer
    one = write_lines(tmp_path / "gold_a.jsonl", [first, second])
    other = tmp_path / "gold_b.jsonl"
    other.write_text("\n" + json.dumps(changed) + "\n")  # a blank line first: the row is the file's line 1
    predictions = write_lines(tmp_path / "predictions.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]}])
    assert cli.main(["score", "nestful", predictions, "--no-win-rate", "--gold-data-files", one, str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: nestful, {other}, row 1, field 'sample_id': two different gold rows have sample_id "
                          f"{first['sample_id']!r}: {one} row 0 and {other} row 1;")
    # In one file
    both = write_lines(tmp_path / "gold_both.jsonl", [first, second, changed])
    assert cli.main(["score", "nestful", predictions, "--no-win-rate", "--gold-data-files", both]) == 2
    assert f"row 0 and row 2 of {both};" in capsys.readouterr().err
    # Copies of one row (in two files) are one gold row.
    copy = write_lines(tmp_path / "gold_copy.jsonl", [first])
    assert cli.main(["score", "nestful", predictions, "--no-win-rate", "--json", "--gold-data-files", one, copy]) == 0
    assert json.loads(capsys.readouterr().out)["n_rows"] == 2
    # From Python: by the places in the rows given, or by the locations given.
    with pytest.raises(InvalidValueError) as info:
        gold_rows_by_id([first, second, changed])
    assert "rows[0] and rows[2] of the rows given" in info.value.message and info.value.row == 2
    with pytest.raises(InvalidValueError) as info:
        gold_rows_by_id([first, changed], [("a.jsonl", 4), ("b.jsonl", 7)])
    assert "a.jsonl row 4 and b.jsonl row 7" in info.value.message
    assert (info.value.file, info.value.row) == ("b.jsonl", 7)


# --------------------------------------------------------------------------------------------------
# Every typed error of score names its source, as the package's readers name theirs
# --------------------------------------------------------------------------------------------------


def test_limits_that_are_no_sandbox_limits_are_a_type_error_saying_what_they_must_be(tmp_path, functions_dir):
    # (a dict failed in dataclasses.asdict: "asdict() should be called on dataclass instances")
    with pytest.raises(TypeError, match=r"limits must be a SandboxLimits\(timeout=\.\.\., memory_mb=\.\.\.\), got dict"):
        score_file(upstream_result_file(tmp_path), limits={"timeout": 3}, executable_functions_dir=functions_dir)


def test_every_typed_score_error_names_the_nestful_source_first(tmp_path, capsys):
    first, second = rows(CURRENT)
    good = dict(rows(HF_STRINGS)[0], generated_text="[]")
    gold = str(shared_data(*CURRENT))
    cases = {  # file content -> the error's field
        "not json": (b"{\"sample_id\": 1\n", "<line>", []),
        "not an object": (b"[1, 2]\n", "<line>", []),
        "latin-1": (json.dumps(dict(good, generated_text="caf\u00e9"), ensure_ascii=False).encode("latin-1") + b"\n",
                    "<line>", []),
        "binary": (b"\x00\x01\x02binary\n", "<file>", []),
        "empty": (b"\n\n", "<file>", []),
        "no prediction": (json.dumps({k: v for k, v in good.items() if k != "generated_text"}).encode() + b"\n",
                          "generated_text", []),
        "no gold field": (json.dumps({k: v for k, v in good.items() if k != "tools"}).encode() + b"\n", "tools", []),
        "bad gold answer": (json.dumps(dict(good, gold_answer="NaN")).encode() + b"\n", "gold_answer", []),
        "keyed without sample_id": (b'{"calls": []}\n', "sample_id", ["--gold-data-files", gold]),
        "unknown sample_id": (b'{"sample_id": "nope", "calls": []}\n', "sample_id", ["--gold-data-files", gold]),
        "predicted twice": ((json.dumps({"sample_id": first["sample_id"], "calls": []}) + "\n") .encode() * 2,
                            "sample_id", ["--gold-data-files", gold]),
        "two predictions": (json.dumps(dict(good, calls=[])).encode() + b"\n", "generated_text, calls", []),
    }
    for name, (content, field, options) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        path.write_bytes(content)
        # (a gold answer is read by the win check alone, so it is refused only where the win rate is asked for)
        skip_win = [] if name == "bad gold answer" else ["--no-win-rate"]
        assert cli.main(["score", "nestful", str(path), *skip_win, *options]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"error: nestful, {path}"), (name, err)
        assert f"field '{field}'" in err, (name, err)
        with pytest.raises(ToolUseDataError) as info:
            read_results(path, {r["sample_id"]: r for r in (first, second)} if options else None)
        assert info.value.source == "nestful" and info.value.field == field, name


# --------------------------------------------------------------------------------------------------
# Compressed result and gold files
# --------------------------------------------------------------------------------------------------


def _compressed(path, suffix: str, lines: list[dict]) -> str:
    import bz2
    import gzip
    import lzma

    data = [(json.dumps(line) + "\n").encode() for line in lines]
    if suffix == ".zst":
        zstandard = pytest.importorskip("zstandard", reason="zstandard is in the test extra: pip install -e '.[test]'")
        # one frame a line, as a parallel compressor or `cat a.zst b.zst` writes them: every frame is read
        blob = b"".join(zstandard.ZstdCompressor().compress(line) for line in data)
    else:
        blob = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](b"".join(data))
    out = path.with_name(path.name + suffix)
    out.write_bytes(blob)
    return str(out)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_result_and_gold_files_score_as_the_plain_ones(suffix, tmp_path, capsys):
    upstream = [dict(r, generated_text=r["output"]) for r in rows(HF_STRINGS)]
    gold = rows(CURRENT)
    keyed = [{"sample_id": gold[0]["sample_id"], "calls": gold[0]["output"]},
             {"sample_id": gold[1]["sample_id"], "generated_text": "no idea"}]
    expected = []
    for lines, options in ((upstream, []), (keyed, ["--gold-data-files", str(shared_data(*CURRENT))])):
        assert cli.main(["score", "nestful", write_lines(tmp_path / "plain.jsonl", lines), "--no-win-rate", "--json",
                         *options]) == 0
        expected.append(json.loads(capsys.readouterr().out))
    assert (expected[0]["n_rows"], expected[1]["full_sequence_accuracy"]) == (2, 0.5)
    results = _compressed(tmp_path / "output.jsonl", suffix, upstream)
    assert cli.main(["score", "nestful", results, "--no-win-rate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected[0]
    predictions = _compressed(tmp_path / "predictions.jsonl", suffix, keyed)
    gold_file = _compressed(tmp_path / "gold.jsonl", suffix, gold)
    assert cli.main(["score", "nestful", predictions, "--no-win-rate", "--json", "--gold-data-files", gold_file]) == 0
    assert json.loads(capsys.readouterr().out) == expected[1]
    # A compressed file cut short is an error naming it, not a shorter score.
    cut = tmp_path / f"cut.jsonl{suffix}"
    whole = open(results, "rb").read()
    cut.write_bytes(whole[: len(whole) - 8])
    assert cli.main(["score", "nestful", str(cut), "--no-win-rate"]) == 2
    assert capsys.readouterr().err.startswith(f"error: nestful, {cut}")


# --------------------------------------------------------------------------------------------------
# Gold rows that cannot be read, under skipping
# --------------------------------------------------------------------------------------------------


def gold_with_a_cut_row(tmp_path) -> tuple[str, list[str]]:
    """The bundled GitHub-form rows with row 1 cut short (as a download stopped mid-line), and their sample_ids."""
    lines = open(sample_files("nestful")["train"][0], encoding="utf-8").read().splitlines()
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join([lines[0], lines[1][:200], *lines[2:]]) + "\n", encoding="utf-8")
    return str(path), [json.loads(line)["sample_id"] for line in lines]


def keyed_predictions(tmp_path, sample_ids: list[str]) -> str:
    return write_lines(tmp_path / "pred.jsonl", [{"sample_id": s, "calls": []} for s in sample_ids])


def test_python_score_counts_unreadable_gold_rows_and_the_predictions_keyed_to_them(tmp_path):
    gold, ids = gold_with_a_cut_row(tmp_path)
    skips = SkipReport()
    splits = load("nestful", "raw", data_files=gold, on_error="skip", report=skips, streaming=True)
    gold_rows = gold_rows_by_id([row for split in splits.values() for row in split])
    with pytest.raises(InvalidValueError, match="is not among the gold rows"):  # without the report: an error
        score_file(keyed_predictions(tmp_path, ids), gold_rows=gold_rows, win_rate=False)
    result = score_file(keyed_predictions(tmp_path, ids), gold_rows=gold_rows, gold_skips=skips,
                        win_rate=False)
    assert (result.n_rows, result.unreadable_gold_rows, result.unscored_predictions) == (len(ids) - 1, 1, 1)
    assert f"{gold} row 1 field '<line>'" in result.notes[-1] and "pred.jsonl row 1)" in result.notes[-1]
    only_read = score_file(keyed_predictions(tmp_path, [ids[0]]), gold_rows=gold_rows, gold_skips=skips,
                           win_rate=False)
    assert (only_read.unreadable_gold_rows, only_read.unscored_predictions, only_read.missing_predictions) == (1, 0, 1)


def test_score_on_error_skip_reports_unreadable_gold_rows(tmp_path, capsys):
    gold, ids = gold_with_a_cut_row(tmp_path)
    predictions = keyed_predictions(tmp_path, ids)
    argv = ["score", "nestful", predictions, "--no-win-rate", "--json", "--gold-data-files", gold]
    assert cli.main(argv) == 2 and f"{gold}, row 1, field '<line>'" in capsys.readouterr().err
    assert cli.main([*argv, "--on-error", "skip"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["n_rows"], out["unreadable_gold_rows"], out["unscored_predictions"]) == (len(ids) - 1, 1, 1)
