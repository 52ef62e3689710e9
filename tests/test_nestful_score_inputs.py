"""NESTFUL scoring inputs a user gets wrong: gold rows without a prediction, repeated sample_ids, gold answers
given as values or not at all, result files with a BOM or in another encoding, empty files. Each must be
either scored honestly (and said so in the notes) or refused with a typed error naming file, row and field."""
from __future__ import annotations

from tooluse_datasets.builders.nestful.execution import SequenceJob, run_sequences
from tooluse_datasets.builders.nestful.specs import output_fields

from test_nestful_score import functions_dir, math_row  # noqa: F401 (fixtures)


def test_the_sandbox_reports_a_gold_answer_that_is_not_json_text_instead_of_crashing(math_row, functions_dir):
    job = SequenceJob(math_row["output"], output_fields(math_row["tools"]), 40.0)  # a value, not its text
    [result] = run_sequences([job], functions_dir)
    assert result.status == "ok" and result.answer["value"] == 40.0
    assert result.win_upstream is None and result.win_corrected is None
    assert any("not JSON text" in n and "TypeError" in n for n in result.notes)
