"""The data generators of ``benchmarks/`` refuse 0 or negative sizes with a usage error naming the option, before
writing anything (``generate_toolmind.py --rows -5`` wrote an empty file reporting negative split counts,
``--row-group-size 0`` ended in a ValueError traceback, ``generate_ms_swift.py --rows -5`` wrote an empty file)."""
from __future__ import annotations

import pytest

from conftest import benchmark_module


@pytest.mark.parametrize("script, argv, message", [
    ("generate_toolmind", ["--rows", "-5"], "argument --rows: must be at least 1, got -5"),
    ("generate_toolmind", ["--rows", "0"], "argument --rows: must be at least 1, got 0"),
    ("generate_toolmind", ["--rows", "20", "--row-group-size", "0"], "argument --row-group-size: must be at least 1"),
    ("generate_toolmind", ["--rows", "20", "--workers", "0"], "argument --workers: must be at least 1"),
    ("generate_ms_swift", ["--rows", "-5"], "argument --rows: must be at least 1, got -5"),
])
def test_bad_sizes_are_usage_errors_and_nothing_is_written(tmp_path, capsys, script, argv, message):
    out = tmp_path / "out.data"
    with pytest.raises(SystemExit) as exc:
        benchmark_module(script).main([str(out), *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_small_file_is_still_written(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert benchmark_module("generate_ms_swift").main([str(out), "--rows", "3"]) == 0
    assert len(out.read_text().splitlines()) == 3
