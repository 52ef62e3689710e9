"""``benchmarks/bench_decode.py --rows 0`` (or less) is a usage error, not a ZeroDivisionError after the runs."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT


@pytest.mark.parametrize("rows", ["0", "-3"])
def test_no_rows_is_a_usage_error(rows):
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "bench_decode.py"), "--rows", rows],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"argument --rows: must be at least 1, got {rows}" in done.stderr and "Traceback" not in done.stderr
