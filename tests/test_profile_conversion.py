"""``benchmarks/profile_conversion.py`` as a new user runs it: bad arguments end with a usage error naming the
option, before any data is generated (0 or negative rows profiled an empty file, an unknown ``--code`` ref was a
``CalledProcessError`` traceback)."""
from __future__ import annotations

import pytest

from conftest import benchmark_module


@pytest.mark.parametrize("argv, message", [
    (["--rows", "0"], "argument --rows: must be at least 1, got 0"),
    (["--rows", "-5"], "argument --rows: must be at least 1, got -5"),
    (["--top", "0"], "argument --top: must be at least 1"),
    (["--row-group-size", "0"], "argument --row-group-size: must be at least 1"),
    (["--code", "no-such-ref", "--rows", "10"], "--code no-such-ref: git archive failed"),
])
def test_bad_arguments_are_usage_errors_before_any_data_is_made(tmp_path, capsys, argv, message):
    profile = benchmark_module("profile_conversion")
    with pytest.raises(SystemExit) as exc:
        profile.main(["toolmind", *argv, "--data-dir", str(tmp_path / "data")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_pyinstrument_not_installed_is_a_usage_error_before_any_data_is_made(tmp_path, capsys):
    """It was a ModuleNotFoundError traceback once the data was generated and streamed."""
    import importlib.util

    if importlib.util.find_spec("pyinstrument") is not None:
        pytest.skip("pyinstrument is installed: --pyinstrument runs")
    with pytest.raises(SystemExit) as exc:
        benchmark_module("profile_conversion").main(["ms_swift", "--rows", "20", "--pyinstrument",
                                                     "--data-dir", str(tmp_path / "data")])
    assert exc.value.code == 2
    assert "--pyinstrument: pyinstrument is not installed" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()
