"""NESTFUL scoring inputs a user gets wrong: gold rows without a prediction, repeated sample_ids, gold answers
given as values or not at all, result files with a BOM or in another encoding, empty files. Each must be
either scored honestly (and said so in the notes) or refused with a typed error naming file, row and field."""
from __future__ import annotations

import importlib
import json
import math
import re

import pytest

from tooluse_datasets import cli, codec
from tooluse_datasets.builders.nestful.execution import SequenceJob, run_sequences
from tooluse_datasets.builders.nestful.gold import decode_gold_answer
from tooluse_datasets.builders.nestful.score import (NO_PREDICTION, ScoreItem, gold_rows_by_id, read_results, score,
                                                     score_file)
from tooluse_datasets.builders.nestful.specs import output_fields
from tooluse_datasets.errors import InvalidJsonError, InvalidValueError, JsonValueError, MissingFieldError
from tooluse_datasets.loading import sample_files

from test_nestful_score import (CURRENT, MATH_ID, TOY, functions_dir, math_row, rows,  # noqa: F401 (fixtures)
                                upstream_line, write_lines)
from conftest import shared_data

NETWORK_SAMPLE = "fa57c28a"  # needs the network: its gold sequence cannot reproduce in the sandbox
METRICS = ("n_rows", "parse_errors", "f1_intent", "f1_slot", "partial_sequence_accuracy", "full_sequence_accuracy",
           "win_rate", "p_intent", "r_intent", "p_slot", "r_slot")


@pytest.fixture(scope="module")
def toy_gold():
    """Six real gold rows (native values, as the package's raw rows hold them) by sample_id."""
    picked = [r for r in rows(TOY) if not r["sample_id"].startswith(NETWORK_SAMPLE)][:6]
    return {r["sample_id"]: r for r in picked}


def metrics(result) -> dict:
    return {k: getattr(result, k) for k in METRICS}


def cli_json(capsys, argv) -> tuple[int, dict, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


# --------------------------------------------------------------------------------------------------
# Keyed predictions: every gold row counts, each once
# --------------------------------------------------------------------------------------------------


def test_gold_rows_without_a_prediction_are_wrong_answers_like_an_empty_prediction(tmp_path, toy_gold, functions_dir):
    first, *rest = toy_gold.values()
    one = write_lines(tmp_path / "one.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]}])
    result = score_file(one, gold_rows=toy_gold, executable_functions_dir=functions_dir)
    # All six gold rows are scored, not the one line: one right answer of six.
    assert (result.n_rows, result.missing_predictions, result.parse_errors) == (6, 5, 0)
    assert result.win_rate == pytest.approx(1 / 6) and result.full_sequence_accuracy == pytest.approx(1 / 6)
    assert [s.missing_prediction for s in result.samples] == [False] + [True] * 5
    assert [s.sample_id for s in result.samples] == list(toy_gold)
    assert any("gold rows without a prediction: 5 of 6" in n for n in result.notes)
    assert result.to_dict()["missing_predictions"] == 5
    # A missing prediction scores exactly as a model that answered with no calls at all.
    empty = write_lines(tmp_path / "empty_lists.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]}]
                        + [{"sample_id": r["sample_id"], "generated_text": "[]"} for r in rest])
    answered = score_file(empty, gold_rows=toy_gold, executable_functions_dir=functions_dir)
    assert metrics(result) == metrics(answered) and answered.missing_predictions == 0
    assert [s.win for s in result.samples] == [s.win for s in answered.samples] == [True] + [False] * 5


def test_score_command_counts_the_unpredicted_bundled_gold_rows(tmp_path, capsys):
    gold = [json.loads(line) for files in sample_files("nestful").values() for f in files
            for line in open(f, encoding="utf-8") if line.strip()]
    path = write_lines(tmp_path / "predictions.jsonl", [{"sample_id": gold[0]["sample_id"], "calls": gold[0]["output"]}])
    code, out, _ = cli_json(capsys, ["score", "nestful", path, "--sample", "--no-win-rate", "--json"])
    assert code == 0
    assert (out["n_rows"], out["missing_predictions"], out["full_sequence_accuracy"]) == (5, 4, pytest.approx(1 / 5))
    assert out["notes"] == ["gold rows without a prediction: 4 of 5; each is scored as a wrong answer (no calls: its "
                            "gold calls count as missed, sequence accuracy 0, not won)"]
    cli.main(["score", "nestful", path, "--sample", "--no-win-rate"])
    assert "Missing predictions" in capsys.readouterr().out


def test_a_sample_id_predicted_twice_is_an_error_naming_both_lines(tmp_path, toy_gold, math_row, capsys):
    a, b = list(toy_gold.values())[:2]
    lines = [{"sample_id": a["sample_id"], "calls": a["output"]}, {"sample_id": b["sample_id"], "generated_text": "[]"},
             {"sample_id": a["sample_id"], "generated_text": "[]"}]
    path = write_lines(tmp_path / "twice.jsonl", lines)
    with pytest.raises(InvalidValueError, match="predicted on rows 0 and 2") as info:
        read_results(path, gold_rows=toy_gold)
    assert (info.value.file, info.value.row, info.value.field) == (path, 2, "sample_id")
    # A keyed line repeating a row of upstream's shape is as ambiguous.
    gold = {MATH_ID: math_row}
    mixed = write_lines(tmp_path / "mixed.jsonl", [upstream_line(math_row, "[]"), {"sample_id": MATH_ID, "generated_text": "[]"}])
    with pytest.raises(MissingFieldError, match="row 0 is an upstream result row"):
        read_results(mixed, gold_rows=gold)
    code = cli.main(["score", "nestful", path, "--gold-data-files", str(shared_data(*TOY)), "--no-win-rate"])
    err = capsys.readouterr().err
    assert code == 2 and "twice.jsonl, row 2, field 'sample_id'" in err and "rows 0 and 2" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("field, value, kind", [("generated_text", 42, "number"), ("calls", {"name": "add"}, "object"),
                                               ("prediction", True, "boolean")])
def test_a_prediction_that_is_neither_text_nor_a_list_of_calls_is_a_typed_error(tmp_path, math_row, toy_gold, capsys,
                                                                                field, value, kind):
    """A prediction is the model's text or its calls already parsed (a list). Another value (a column written from
    the wrong field, a call not in its list) was scored as the text JSON would write it: a parse error, or an
    object's keys taken for calls, charged to the model without a word about the file."""
    first = next(iter(toy_gold.values()))
    keyed = write_lines(tmp_path / "keyed.jsonl", [{"sample_id": first["sample_id"], "generated_text": "[]"},
                                                   {"sample_id": MATH_ID, field: value}])
    upstream = write_lines(tmp_path / "output.jsonl", [upstream_line(math_row, "[]"),
                                                       dict(upstream_line(math_row, None), **{field: value})])
    for path, gold in ((keyed, dict(toy_gold, **{MATH_ID: math_row})), (upstream, None)):
        with pytest.raises(InvalidValueError, match=f"got {kind}") as info:
            read_results(path, gold_rows=gold)
        assert (info.value.file, info.value.row, info.value.field) == (path, 1, field)
    code, out, err = cli_json(capsys, ["score", "nestful", upstream, "--no-win-rate", "--json"])
    assert code == 2 and out == {} and f"output.jsonl, row 1, field '{field}'" in err and "Traceback" not in err
    # Built in Python, the same: refused naming the item, before anything runs.
    items = [ScoreItem(MATH_ID, math_row["output"], math_row["tools"], "1", p) for p in ("[]", value)]
    with pytest.raises(InvalidValueError, match=f"got {kind}") as info:
        score(items, executable_functions_dir="/nonexistent")
    assert (info.value.row, info.value.field) == (1, "prediction")


def test_upstream_shaped_lines_repeating_a_sample_are_each_scored_and_noted(tmp_path, math_row):
    path = write_lines(tmp_path / "output.jsonl", [upstream_line(math_row, json.dumps(math_row["output"])),
                                                    upstream_line(math_row, "[]")])
    result = score_file(path, win_rate=False)
    # Upstream's scorer reads every line: both count (its comparison runs rely on it).
    assert result.n_rows == 2 and result.full_sequence_accuracy == 0.5
    assert any("sample_ids given more than once: 1" in n for n in result.notes)


def test_keyed_sample_ids_that_are_not_text_are_typed_errors(tmp_path, toy_gold):
    for i, (sample_id, error) in enumerate([(["x"], InvalidValueError), ({"a": 1}, InvalidValueError),
                                            (None, MissingFieldError)]):
        path = write_lines(tmp_path / f"bad{i}.jsonl", [{"sample_id": sample_id, "generated_text": "[]"}])
        with pytest.raises(error) as info:
            read_results(path, gold_rows=toy_gold)
        assert (info.value.row, info.value.field) == (0, "sample_id")


def test_a_keyed_sample_id_refused_is_quoted_as_json(tmp_path, toy_gold):
    """The message quoted the sample_id in Python's spelling (got True, got {'a': 1}), not as the line holds it."""
    for i, (sample_id, quoted) in enumerate([(True, "true"), ({"a": 1}, '{"a": 1}'), (["x" * 100], None)]):
        path = write_lines(tmp_path / f"quoted{i}.jsonl", [{"sample_id": sample_id, "generated_text": "[]"}])
        with pytest.raises(InvalidValueError) as info:
            read_results(path, gold_rows=toy_gold)
        got = info.value.message.split(", got ", 1)[1]
        assert got == quoted if quoted else (got.startswith('["xxx') and got.endswith("...") and len(got) == 83)


def test_gold_rows_given_as_rows_rather_than_by_sample_id_are_refused_saying_how(tmp_path, toy_gold):
    # (each keyed line was "not among the gold rows", which it was)
    first = next(iter(toy_gold.values()))
    path = write_lines(tmp_path / "one.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]}])
    with pytest.raises(TypeError, match=r"gold_rows must map sample_id -> gold row, got list; .*gold_rows_by_id"):
        read_results(path, gold_rows=list(toy_gold.values()))
    assert score_file(path, gold_rows=gold_rows_by_id(list(toy_gold.values())), win_rate=False).n_rows == 6


def test_a_gold_row_whose_text_is_not_json_is_said_to_be_the_gold_rows_not_the_keyed_lines(tmp_path, toy_gold):
    # Named by the keyed line that asked for it, the error said 'tools of sample ...', which that line does not hold
    first = next(iter(toy_gold.values()))
    path = write_lines(tmp_path / "one.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]}])
    with pytest.raises(InvalidJsonError, match="tools of the gold row of sample") as info:
        read_results(path, gold_rows={first["sample_id"]: dict(first, tools="[cut")})
    assert (info.value.file, info.value.row, info.value.field) == (str(path), 0, "tools")


def test_gold_rows_sharing_a_sample_id_must_be_copies(toy_gold):
    row = next(iter(toy_gold.values()))
    assert gold_rows_by_id([row, dict(row)]) == {row["sample_id"]: row}
    with pytest.raises(InvalidValueError, match="two different gold rows"):
        gold_rows_by_id([row, dict(row, gold_answer="other")])


def test_a_gold_row_without_a_sample_id_is_an_error_naming_its_place(toy_gold):
    # (it was a bare KeyError; keyed under None, no prediction could be joined to it)
    first, second = list(toy_gold.values())[:2]
    unnamed = {k: v for k, v in second.items() if k != "sample_id"}
    with pytest.raises(InvalidValueError, match="a gold row needs its sample_id") as info:
        gold_rows_by_id([first, unnamed])
    assert (info.value.row, info.value.field) == (1, "sample_id")
    with pytest.raises(InvalidValueError) as info:
        gold_rows_by_id([first, dict(second, sample_id=None)], locations=[("gold.jsonl", 0), ("gold.jsonl", 7)])
    assert (info.value.file, info.value.row, info.value.field) == ("gold.jsonl", 7, "sample_id")


# --------------------------------------------------------------------------------------------------
# Gold answers: text, values, none
# --------------------------------------------------------------------------------------------------


def test_a_gold_answer_given_as_a_value_is_checked_like_its_json_text(math_row, functions_dir):
    exact = json.dumps(math_row["output"])
    items = [ScoreItem("text", math_row["output"], math_row["tools"], "40.0", exact),
             ScoreItem("value", math_row["output"], math_row["tools"], 40.0, exact),  # as load("nestful", "raw")
             ScoreItem("wrong value", math_row["output"], math_row["tools"], 41.0, exact)]
    result = score(items, executable_functions_dir=functions_dir)
    assert [s.win for s in result.samples] == [True, True, False]
    assert [s.execution.status for s in result.samples] == ["ok"] * 3 and result.notes == []


def test_rows_without_a_gold_answer_are_left_out_of_the_win_rate_and_noted(math_row, functions_dir):
    exact = json.dumps(math_row["output"])
    items = [ScoreItem("no gold", math_row["output"], math_row["tools"], None, exact),
             ScoreItem("gold", math_row["output"], math_row["tools"], 40.0, exact),
             ScoreItem("gold, wrong", math_row["output"], math_row["tools"], 40.0, "[]")]
    result = score(items, executable_functions_dir=functions_dir)
    assert [s.win for s in result.samples] == [None, True, False] and result.samples[0].execution is None
    assert result.win_rate == 0.5 and result.missing_gold_answers == 1
    assert result.n_rows == 3 and result.full_sequence_accuracy == pytest.approx(2 / 3)  # the match metrics keep it
    assert any(n.startswith("rows without a gold answer: 1 of 3 ('no gold')") for n in result.notes)
    alone = score(items[:1], executable_functions_dir=functions_dir)
    assert alone.win_rate is None and any("win_rate is null" in n for n in alone.notes)


def test_keyed_gold_rows_in_hfs_string_form_score_as_their_github_form(tmp_path, functions_dir):
    """Rows as HF's parquet holds them (every structured column as text; what datasets.load_dataset gives) are
    gold rows too: their gold_answer text is read as the loader reads it, not as a string answer ("40.0" was the
    string "40.0", so the right calls lost every win without a word)."""
    github = rows(("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl"))
    hf = rows(("nestful", "third_party", "reconstructed_current_v2", "rows_hf_string_format.jsonl"))
    assert [r["gold_answer"] for r in hf] == ["40.0", "3"]
    path = write_lines(tmp_path / "predictions.jsonl", [{"sample_id": r["sample_id"], "calls": r["output"]} for r in github])
    as_github = score_file(path, gold_rows={r["sample_id"]: r for r in github}, executable_functions_dir=functions_dir)
    as_hf = score_file(path, gold_rows={r["sample_id"]: r for r in hf}, executable_functions_dir=functions_dir)
    assert [s.win for s in as_hf.samples] == [s.win for s in as_github.samples] == [True, True]
    assert [i.gold_answer for i in read_results(path, gold_rows={r["sample_id"]: r for r in hf})] == ["40.0", "3"]


def test_unified_rows_are_gold_rows_read_back_as_their_raw_rows(tmp_path, cache_dir, functions_dir):
    """load("nestful") gives unified rows unless told "raw": as gold rows they crashed gold_rows_by_id with a bare
    KeyError('sample_id'), and keyed by hand, each prediction's own line was reported as lacking 'output'. They
    score as the raw rows they were made from; another source's unified row is a typed error naming it."""
    from tooluse_datasets import load

    gold_file = str(shared_data(*CURRENT))
    unified = list(load("nestful", data_files=gold_file, split="train", cache_dir=cache_dir))
    raw = list(load("nestful", "raw", data_files=gold_file, split="train", cache_dir=cache_dir))
    first, second = rows(CURRENT)
    path = write_lines(tmp_path / "predictions.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]},
                                                        {"sample_id": second["sample_id"], "generated_text": "[]"}])
    as_raw = score_file(path, gold_rows=gold_rows_by_id(raw), executable_functions_dir=functions_dir)
    as_unified = score_file(path, gold_rows=gold_rows_by_id(unified), executable_functions_dir=functions_dir)
    by_hand = score_file(path, gold_rows={r["meta"]["sample_id"]: r for r in unified},
                         executable_functions_dir=functions_dir)
    assert metrics(as_unified) == metrics(by_hand) == metrics(as_raw)
    assert (as_raw.win_rate, as_raw.full_sequence_accuracy) == (0.5, 0.5)
    other = {"id": "ms_swift/a/0", "source": "ms_swift", "messages": [], "meta": {}}
    with pytest.raises(InvalidValueError) as info:
        gold_rows_by_id(unified + [other])
    assert (info.value.row, info.value.field) == (2, "source")


def test_a_unified_export_given_as_gold_data_files_says_what_it_is(tmp_path, capsys):
    """The README takes unified rows as gold rows (in Python): a unified export given to --gold-data-files was only
    "NESTFUL rows need 'sample_id'", which did not say the file is the package's own unified rows nor what to do."""
    gold_file = str(shared_data(*CURRENT))
    assert cli.main(["export", "nestful", "--format", "unified", "--data-files", gold_file,
                     "--out", str(tmp_path / "out")]) == 0
    exported = str(next((tmp_path / "out").glob("*.jsonl")))
    first = rows(CURRENT)[0]
    path = write_lines(tmp_path / "predictions.jsonl", [{"sample_id": first["sample_id"], "calls": first["output"]}])
    capsys.readouterr()
    code, _, err = cli_json(capsys, ["score", "nestful", path, "--gold-data-files", exported, "--no-win-rate"])
    assert code == 2
    assert "NESTFUL rows need 'sample_id'; this looks like the package's unified rows (export --format unified" in err
    assert "gold_rows_by_id" in err
    # a mirror's unified config too, whose Parquet holds meta as JSON text (it was said of the export only)
    assert cli.main(["mirror", "nestful", "--configs", "unified", "--data-files", gold_file,
                     "--out", str(tmp_path / "mirror")]) == 0
    mirrored = str(next((tmp_path / "mirror").rglob("*.parquet")))
    capsys.readouterr()
    code, _, err = cli_json(capsys, ["score", "nestful", path, "--gold-data-files", mirrored, "--no-win-rate"])
    assert code == 2 and "this looks like the package's unified rows" in err and "gold_rows_by_id" in err


def test_a_gold_answer_that_cannot_be_checked_is_refused_before_anything_runs(math_row):
    for gold, error in [("a is greater", InvalidJsonError), (math.nan, JsonValueError), ({1, 2}, JsonValueError)]:
        items = [ScoreItem("fine", math_row["output"], math_row["tools"], "40.0", "[]"),
                 ScoreItem("bad", math_row["output"], math_row["tools"], gold, "[]")]
        # An executable-functions folder that does not exist: the error must come first.
        with pytest.raises(error) as info:
            score(items, executable_functions_dir="/nonexistent")
        assert (info.value.row, info.value.field) == (1, "gold_answer") and "'bad'" in info.value.message


def test_a_gold_answer_in_pythons_str_spelling_is_refused_saying_how_to_read_it(functions_dir):
    # HF's text column holds str() of the answer: the toy rows' boolean and object answers read as "True", "{'...'}"
    picked = [r for r in rows(TOY) if isinstance(r["gold_answer"], (bool, dict))]
    assert {type(r["gold_answer"]) for r in picked} == {bool, dict}
    for row in picked:
        item = ScoreItem(row["sample_id"], row["output"], row["tools"], str(row["gold_answer"]), row["output"])
        with pytest.raises(InvalidJsonError) as info:
            score([item], executable_functions=functions_dir)
        # codec.dumps(text), the advice for a string answer, would make it a string that the right calls never give
        assert "codec.dumps(answer)" not in info.value.message
        assert f"Python's str() of {json.dumps(row['gold_answer'])}" in info.value.message
        assert "codec.dumps(decode_gold_answer(text))" in info.value.message
        # the module it names is one a script can import (builders/ ships as tooluse_datasets.builders)
        module = re.search(r"\(from ([\w.]+)\)", info.value.message)[1]
        assert importlib.import_module(module).decode_gold_answer is decode_gold_answer
        # following it, the gold calls win
        fixed = ScoreItem(row["sample_id"], row["output"], row["tools"],
                          codec.dumps(decode_gold_answer(str(row["gold_answer"]))), row["output"])
        assert [s.win for s in score([fixed], executable_functions=functions_dir).samples] == [True]
    with pytest.raises(InvalidJsonError, match=r"a string answer goes in as its JSON text, codec\.dumps\(answer\)"):
        score([ScoreItem("s", picked[0]["output"], picked[0]["tools"], "a is greater", "[]")],
              executable_functions=functions_dir)


def test_the_sandbox_reports_a_gold_answer_that_is_not_json_text_instead_of_crashing(math_row, functions_dir):
    job = SequenceJob(math_row["output"], output_fields(math_row["tools"]), 40.0)  # a value, not its text
    [result] = run_sequences([job], functions_dir)
    assert result.status == "ok" and result.answer["value"] == 40.0
    assert result.win_upstream is None and result.win_corrected is None
    assert any("not JSON text" in n and "TypeError" in n for n in result.notes)


# --------------------------------------------------------------------------------------------------
# Result files: encodings, empty files
# --------------------------------------------------------------------------------------------------


def test_a_utf8_bom_is_ignored(tmp_path, math_row):
    lines = [upstream_line(math_row, json.dumps(math_row["output"])), upstream_line(math_row, "nope")]
    plain = write_lines(tmp_path / "plain.jsonl", lines)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "plain.jsonl").read_bytes())
    assert score_file(bom, win_rate=False).to_dict() == score_file(plain, win_rate=False).to_dict()


def test_text_that_is_not_utf8_is_a_typed_error_naming_the_line(tmp_path, math_row, capsys):
    good = json.dumps(upstream_line(math_row, "[]"))
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(good.encode() + b"\n" + json.dumps(upstream_line(math_row, "caf\u00e9")).replace(
        "\\u00e9", "\u00e9").encode("latin-1") + b"\n")
    with pytest.raises(InvalidJsonError, match="not UTF-8") as info:
        read_results(latin1)
    assert (info.value.file, info.value.row, info.value.field) == (str(latin1), 1, "<line>")
    utf16 = tmp_path / "utf16.jsonl"
    utf16.write_bytes((good + "\n").encode("utf-16"))
    with pytest.raises(InvalidValueError, match="UTF-16") as info:
        read_results(utf16)
    assert (info.value.file, info.value.field) == (str(utf16), "<file>")
    code = cli.main(["score", "nestful", str(latin1), "--no-win-rate"])
    err = capsys.readouterr().err
    assert code == 2 and "latin1.jsonl, row 1, field '<line>'" in err and "Traceback" not in err


@pytest.mark.parametrize("indent", [None, 1, "line"])
def test_predictions_written_as_one_json_array_are_refused_saying_result_files_are_json_lines(tmp_path, math_row,
                                                                                              indent):
    # Said only 'line is not a JSON object' (or, written over several lines, 'Expecting value: line 2 column 1')
    path = tmp_path / "predictions.json"
    rows = [upstream_line(math_row, "[]")] * 2
    # "line": an object a line inside the brackets, the first line holding "[" and an object
    path.write_text("[" + ",\n".join(map(json.dumps, rows)) + "]" if indent == "line"
                    else json.dumps(rows, indent=indent))
    with pytest.raises((InvalidJsonError, InvalidValueError), match="result files are JSON Lines") as info:
        read_results(path)
    assert (info.value.file, info.value.row, info.value.field) == (str(path), 0, "<line>")


@pytest.mark.parametrize("text", ["", "\n\n", " \r\n\t\n"])
def test_a_file_without_predictions_is_an_error(tmp_path, text, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_text(text)
    with pytest.raises(InvalidValueError, match="no predictions") as info:
        read_results(path)
    assert (info.value.file, info.value.field) == (str(path), "<file>")
    code = cli.main(["score", "nestful", str(path), "--sample", "--no-win-rate", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and "no predictions" in captured.err


def test_scoring_no_items_is_an_error_and_items_without_prediction_are_not(math_row):
    with pytest.raises(InvalidValueError, match="no predictions"):
        score([], win_rate=False)
    result = score([ScoreItem(MATH_ID, math_row["output"], math_row["tools"], 40.0, NO_PREDICTION)], win_rate=False)
    assert (result.n_rows, result.missing_predictions, result.partial_sequence_accuracy) == (1, 1, 0.0)


# --------------------------------------------------------------------------------------------------
# Gold fields of the wrong type in a result line
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_row():
    """Row 0 of the bundled sample (GitHub's native form): gold answer 51.2 from add then multiply."""
    path = sample_files("nestful")["train"][0]
    with open(path, encoding="utf-8") as f:
        return json.loads(f.readline())


@pytest.mark.parametrize("field, value, where", [
    ("tools", None, "tools"), ("tools", 5, "tools"), ("tools", {"a": 1}, "tools"), ("tools", ["x"], "tools[0]"),
    ("tools", "null", "tools"), ("tools", json.dumps([{"description": "no name"}]), "tools[0].name"),
    ("output", None, "output"), ("output", json.dumps({"name": "add"}), "output"), ("output", 7, "output"),
])
def test_gold_fields_of_the_wrong_type_are_typed_errors_naming_the_line(tmp_path, sample_row, functions_dir, capsys,
                                                                        field, value, where):
    right = upstream_line(sample_row, json.dumps(sample_row["output"]))
    path = write_lines(tmp_path / "output.jsonl", [right, dict(right, **{field: value})])
    with pytest.raises(InvalidValueError, match="must be|needs its name") as info:
        read_results(path)
    assert (info.value.file, info.value.row, info.value.field) == (path, 1, where)
    code, out, err = cli_json(capsys, ["score", "nestful", path, "--executable-functions", functions_dir, "--json"])
    assert code == 2 and out == {} and f"output.jsonl, row 1, field '{where}'" in err
    assert "unexpected" not in err and "Traceback" not in err
    # The same shapes built in Python are refused before anything runs (no functions folder is looked at).
    bad = read_results(write_lines(tmp_path / "right.jsonl", [right]))[0]
    setattr(bad, "tools" if field == "tools" else "gold_calls", json.loads(value) if isinstance(value, str) else value)
    with pytest.raises(InvalidValueError) as info:
        score([read_results(tmp_path / "right.jsonl")[0], bad], executable_functions_dir="/nonexistent")
    assert (info.value.row, info.value.field) == (0, where)


@pytest.mark.parametrize("key, value", [("output_parameters", "result"), ("output_parameters", ["result"]),
                                        ("output_parameter", 5)])
def test_a_tool_whose_output_parameters_are_no_object_is_a_typed_error_naming_it(tmp_path, sample_row, functions_dir,
                                                                              capsys, key, value):
    """The loader refuses such a gold row, naming tools[i].output_parameters; a result line holding it was scored,
    its gold sequence unable to run for want of outputs, and the loss charged to the model."""
    tools = [dict(tool) for tool in sample_row["tools"]]
    del tools[1]["output_parameters"]  # (multiply: the sequence's last call)
    tools[1][key] = value
    line = dict(upstream_line(sample_row, json.dumps(sample_row["output"])), tools=json.dumps(tools))
    path = write_lines(tmp_path / "output.jsonl", [line])
    with pytest.raises(InvalidValueError, match="output_parameters") as info:
        read_results(path)
    assert (info.value.file, info.value.row, info.value.field) == (path, 0, "tools[1].output_parameters")
    code, out, err = cli_json(capsys, ["score", "nestful", path, "--executable-functions", functions_dir, "--json"])
    assert code == 2 and out == {} and "row 0, field 'tools[1].output_parameters'" in err
    # A unified tool's (OpenAI function) the same, under its function.
    unified = {"type": "function", "function": {"name": "multiply", "parameters": {}, "output_parameters": value}}
    item = ScoreItem(sample_row["sample_id"], sample_row["output"], [tools[0], unified], "51.2", "[]")
    with pytest.raises(InvalidValueError) as info:
        score([item], executable_functions_dir="/nonexistent")
    assert (info.value.row, info.value.field) == (0, "tools[1].function.output_parameters")


def test_the_right_line_with_its_tools_wins(tmp_path, sample_row, functions_dir):
    """The lines above fail only for the field changed: unchanged, the sample row's own gold wins."""
    right = upstream_line(sample_row, json.dumps(sample_row["output"]))
    result = score_file(write_lines(tmp_path / "output.jsonl", [right]), executable_functions_dir=functions_dir)
    assert (result.win_rate, result.full_sequence_accuracy, result.notes) == (1.0, 1.0, [])


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "[1, NaN]", "1e999"])
def test_a_gold_answer_text_json_cannot_hold_is_refused_as_the_readme_says(tmp_path, sample_row, text, capsys):
    line = dict(upstream_line(sample_row, json.dumps(sample_row["output"])), gold_answer=text)
    path = write_lines(tmp_path / "output.jsonl", [line])
    with pytest.raises((InvalidJsonError, JsonValueError)) as info:
        read_results(path)
    assert (info.value.file, info.value.row, info.value.field) == (path, 0, "gold_answer")
    code, out, err = cli_json(capsys, ["score", "nestful", path, "--executable-functions", "/nonexistent", "--json"])
    assert code == 2 and out == {} and "row 0, field 'gold_answer'" in err
    # Built in Python, the text is refused the same way before anything runs.
    item = ScoreItem(sample_row["sample_id"], sample_row["output"], sample_row["tools"], text, "[]")
    with pytest.raises((InvalidJsonError, JsonValueError)):
        score([item], executable_functions_dir="/nonexistent")
