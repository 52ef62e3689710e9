"""``benchmarks/fuzz_run.py``: 0 files or a negative row count is a usage error naming the option (both ended
in random.sample's ``ValueError: Sample larger than population or is negative`` traceback)."""
from __future__ import annotations

import pytest

from conftest import benchmark_module


@pytest.mark.parametrize("argv, message", [
    (["--files", "0"], "argument --files: must be at least 1, got 0"),
    (["--rows", "-3"], "argument --rows: must be at least 0, got -3"),
])
def test_bad_sizes_are_usage_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        benchmark_module("fuzz_run").main([*argv, "--sources", "nestful", "--no-timing", "--keep", str(tmp_path / "k")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "k").exists()
