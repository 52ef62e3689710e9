"""A NESTFUL gold answer that is JSON ``null`` is an answer, not the lack of one.

Upstream's pipeline writes every gold answer as ``json.dumps`` of the row's value (``src/eval.py``), so a null
answer reaches its scorer as the text ``null``; ``calculate_win_score`` parses it and counts the row, which a
prediction wins when its sequence gives ``None``. A row without ``gold_answer`` has no answer to check (upstream
crashes on it; here it is left out of the win rate, counted and noted). Every input form of the scorer, the loader
and the executed rows must tell the two apart.

The null answer here is a real one: upstream's ``draw_staircase`` (``py_code_file_1955.py``) prints and returns
None, run in the sandbox like every other function."""
from __future__ import annotations

import json

import pytest

import tooluse_datasets as td
from tooluse_datasets import cli
from tooluse_datasets.builders.nestful.executed import execution_job
from tooluse_datasets.builders.nestful.score import read_results, score_file
from tooluse_datasets.builders.nestful.verify import verify_rows
from tooluse_datasets.errors import ExecutionError

from test_nestful_score import functions_dir, math_row, upstream_line, write_lines  # noqa: F401 (fixtures)

STAIRCASE_ID = "00000000-0000-4000-8000-00000000null"


@pytest.fixture(scope="module")
def staircase_row(functions_dir):
    """A GitHub-form row whose one call is upstream's draw_staircase (its file is in func_file_map.json), in the
    current spec format; its gold answer is what that call returns: None."""
    with open(f"{functions_dir}/func_file_map.json", encoding="utf-8") as f:
        assert json.load(f)["draw_staircase"] == "py_code_file_1955.py"
    tool = {"name": "draw_staircase", "description": "Draws a staircase with n rows and n characters in each row.",
            "parameters": {"n": {"description": "The number of rows in the staircase.", "type": "integer"}},
            "output_parameters": {"output_0": {"description": "nothing: the staircase is printed", "type": "null"}}}
    return {"sample_id": STAIRCASE_ID, "input": "Draw a staircase of 3 rows.",
            "output": [{"name": "draw_staircase", "arguments": {"n": 3}, "label": "$var1"}],
            "tools": [tool], "gold_answer": None}


def hf_form(row: dict) -> dict:
    """The row as HF's parquet holds it: every structured column as JSON text."""
    return {"sample_id": row["sample_id"], "input": row["input"], "output": json.dumps(row["output"]),
            "tools": json.dumps(row["tools"]), "gold_answer": json.dumps(row["gold_answer"])}


def without_gold(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "gold_answer"}


def by_id(result) -> dict:
    return {s.sample_id: s for s in result.samples}


# --------------------------------------------------------------------------------------------------
# The loader keeps a null gold answer apart from a missing one
# --------------------------------------------------------------------------------------------------


def test_raw_rows_tell_a_null_gold_answer_from_a_missing_one_in_both_forms(tmp_path, staircase_row, math_row,
                                                                           cache_dir):
    other = dict(math_row, sample_id="no-gold")
    github = write_lines(tmp_path / "github.jsonl", [staircase_row, without_gold(other)])
    hf = write_lines(tmp_path / "hf.jsonl", [hf_form(staircase_row), without_gold(hf_form(other))])
    for path in (github, hf):
        null, none = td.load("nestful", "raw", data_files=path, split="train", cache_dir=cache_dir)
        assert null["gold_answer"] is None and none["gold_answer"] is None
        assert null["gold_answer_text"] == "null" and none["gold_answer_text"] is None, path
        unified = list(td.load("nestful", data_files=path, split="train", streaming=True))
        assert [(r["meta"]["gold_answer"], r["meta"]["gold_answer_text"]) for r in unified] == [(None, "null"),
                                                                                                (None, None)]
    # raw -> unified -> raw stays exact, and the GitHub row is the upstream row
    source = td.registry.builder_class("nestful").SOURCE_CLASS()
    ctx = td.source.RowContext("nestful", github, 0, "train")
    raw = source.to_raw(staircase_row, ctx)
    assert source.from_unified(source.to_unified(raw, ctx)) == raw
    assert {k: raw[k] for k in staircase_row} == staircase_row


# --------------------------------------------------------------------------------------------------
# The scorer: each input form counts a null gold answer, as upstream does
# --------------------------------------------------------------------------------------------------


def test_upstream_result_lines_with_the_text_null_are_counted(tmp_path, staircase_row, functions_dir):
    path = write_lines(tmp_path / "output.jsonl", [upstream_line(staircase_row, json.dumps(staircase_row["output"]))])
    result = score_file(path, executable_functions_dir=functions_dir)
    assert (result.win_rate, result.missing_gold_answers) == (1.0, 0)


def test_github_form_result_lines_with_a_null_gold_answer_are_counted(tmp_path, staircase_row, math_row,
                                                                      functions_dir):
    lines = [dict(staircase_row, generated_text=json.dumps(staircase_row["output"])),
             dict(staircase_row, sample_id="wrong", generated_text=json.dumps(math_row["output"])),
             dict(math_row, generated_text=json.dumps(math_row["output"]))]
    path = write_lines(tmp_path / "output.jsonl", lines)
    assert [i.gold_answer for i in read_results(path)] == ["null", "null", "40.0"]
    result = score_file(path, executable_functions_dir=functions_dir)
    samples = by_id(result)
    assert samples[STAIRCASE_ID].win is True and samples["wrong"].win is False
    assert (result.win_rate, result.missing_gold_answers) == (pytest.approx(2 / 3), 0)


@pytest.mark.parametrize("form", ["github", "hf"])
def test_keyed_predictions_against_loaded_gold_rows_count_a_null_answer(tmp_path, staircase_row, math_row,
                                                                        functions_dir, form, capsys):
    gold = [staircase_row, math_row, dict(math_row, sample_id="no-gold")]
    if form == "hf":
        gold = [hf_form(r) for r in gold]
    gold[2] = without_gold(gold[2])
    gold_file = write_lines(tmp_path / f"gold_{form}.jsonl", gold)
    keyed = write_lines(tmp_path / "predictions.jsonl",
                        [{"sample_id": STAIRCASE_ID, "calls": staircase_row["output"]},
                         {"sample_id": math_row["sample_id"], "calls": math_row["output"]},
                         {"sample_id": "no-gold", "calls": math_row["output"]}])
    rows = td.load("nestful", "raw", data_files=gold_file, split="train")
    result = score_file(keyed, gold_rows={r["sample_id"]: r for r in rows}, executable_functions_dir=functions_dir)
    samples = by_id(result)
    assert (samples[STAIRCASE_ID].win, samples[math_row["sample_id"]].win, samples["no-gold"].win) == (True, True, None)
    assert (result.win_rate, result.missing_gold_answers) == (1.0, 1)
    code = cli.main(["score", "nestful", keyed, "--gold-data-files", gold_file, "--executable-functions",
                     functions_dir, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and (out["win_rate"], out["missing_gold_answers"]) == (1.0, 1)


# --------------------------------------------------------------------------------------------------
# Executed rows and verify reproduce a null gold answer
# --------------------------------------------------------------------------------------------------


def test_a_null_gold_answer_is_reproduced_and_a_missing_one_is_not(tmp_path, staircase_row, math_row,
                                                                   functions_dir, cache_dir):
    missing = dict(without_gold(math_row), sample_id="no-gold")
    path = write_lines(tmp_path / "gold.jsonl", [staircase_row, missing])
    unified = list(td.load("nestful", data_files=path, split="train", streaming=True))
    assert execution_job(unified[0]).gold == "null"
    with pytest.raises(ExecutionError, match="no_gold"):
        execution_job(unified[1])
    report = verify_rows(unified, functions_dir=functions_dir)
    assert (report.rows, report.reproduced) == (2, 1)
    assert [f["sample_id"] for f in report.failures] == ["no-gold"]
    executed = td.load("nestful", data_files=path, split="train", execute=True, executable_functions=functions_dir,
                       on_error="skip", cache_dir=cache_dir)
    (row,) = executed
    assert row["meta"]["sample_id"] == STAIRCASE_ID and row["meta"]["execution"]["reproduces_gold"] is True
    assert row["messages"][-1] == {"role": "assistant", "content": "null"}


def test_a_row_without_calls_is_no_calls_said_once(tmp_path, cache_dir, math_row, functions_dir):
    """An empty output executes as no_calls; its message said the reason's meaning, then the same words again
    ('no_calls: the sequence has no calls: no calls')."""
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({**math_row, "output": []}) + "\n")
    for streaming in (False, True):
        report = td.SkipReport()
        ds = td.load("nestful", split="train", data_files=str(path), execute=True, on_error="skip", report=report,
                     executable_functions=functions_dir, streaming=streaming, cache_dir=cache_dir)
        assert list(ds) == [] and [(e["field"], e["message"]) for e in report.to_dict()["examples"]] == [
            ("output", "no_calls: the sequence has no calls")]
