"""``benchmarks/llamafactory_check.py`` given a folder that is not a llamafactory export (missing, or another
format's) is a usage error naming the folder, not a ``FileNotFoundError`` traceback; checked before LLaMA-Factory
is imported, so it runs with this package's Python too."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT
from tooluse_datasets.cli import main


def run_check(folder) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "llamafactory_check.py"), str(folder),
                           "--table"], capture_output=True, text=True, timeout=120)


def test_a_missing_folder_is_a_usage_error(tmp_path):
    done = run_check(tmp_path / "missing")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"{tmp_path / 'missing'}: no dataset_info.json: not a folder written by" in done.stderr


def test_a_swift_export_folder_is_a_usage_error(tmp_path):
    assert main(["export", "nestful", "--sample", "--format", "swift", "--out", str(tmp_path / "swift")]) == 0
    assert any((tmp_path / "swift").iterdir())
    done = run_check(tmp_path / "swift")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "no dataset_info.json" in done.stderr


def test_without_llamafactory_it_says_which_python_to_use(tmp_path):
    """Run with this package's Python (the README runs it with the LLaMA-Factory venv's), it ended in
    importlib.metadata's PackageNotFoundError traceback."""
    import importlib.util

    if importlib.util.find_spec("llamafactory") is not None:
        pytest.skip("llamafactory is installed in this Python: the check runs")
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(tmp_path / "lf")]) == 0
    done = run_check(tmp_path / "lf")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"LLaMA-Factory is not installed for {sys.executable}: run this with benchmarks/.venv-llamafactory" in (
        done.stderr)
