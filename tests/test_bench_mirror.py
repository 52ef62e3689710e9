"""``benchmarks/bench_mirror.py``: a size or count of 0 or less is a usage error naming the option, before any
data is generated or any build runs (``--repeat 0`` ended in ``min() arg is an empty sequence``)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT


@pytest.mark.parametrize("option, value", [("--repeat", "0"), ("--toolmind-rows", "0"), ("--swift-rows", "-1"),
                                           ("--shard-size", "0")])
def test_bad_sizes_are_usage_errors(tmp_path, option, value):
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "bench_mirror.py"), option, value,
                           "--no-ray", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"argument {option}: must be at least 1" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_an_unknown_config_is_a_usage_error(tmp_path):
    """It failed in the first build's own interpreter, printing that interpreter's MirrorError traceback."""
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "bench_mirror.py"), "--configs",
                           "unified", "bogus", "--no-ray", "--only", "ms_swift", "--swift-rows", "10",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "argument --configs: invalid choice: 'bogus'" in done.stderr and "'llamafactory'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
