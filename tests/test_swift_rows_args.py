"""``benchmarks/swift_rows.py`` run with a Python without ms-swift (this package's venv) says which Python to use
instead of ending in a ``ModuleNotFoundError: No module named 'swift'`` traceback."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import tooluse_datasets as td
from conftest import PROJECT_ROOT


def test_without_ms_swift_it_says_which_python_to_use():
    if importlib.util.find_spec("swift") is not None:
        pytest.skip("ms-swift is installed in this Python: the script runs")
    sample = td.sample_files("ms_swift")["train"][0]
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "swift_rows.py"), sample],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"ms-swift is not installed for {sys.executable}: run this with benchmarks/.venv-swift/bin/python" in (
        done.stderr)
