"""NESTFUL scoring inputs that are ambiguous or unused: gold rows named for a result file that carries its own
gold, a line with two predictions, two different gold rows for one sample_id, and how score's errors name
their source. Real rows from ../shared/data."""
from __future__ import annotations

import json

import pytest

from tooluse_datasets import cli
from tooluse_datasets.builders.nestful.score import read_results, score_file

from test_nestful_score import CURRENT, rows, write_lines
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
