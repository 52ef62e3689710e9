"""``benchmarks/bench_scale.py`` as a new user runs it: bad arguments end with a usage error naming the option,
before any data is generated."""
from __future__ import annotations

import pytest

from conftest import benchmark_module


@pytest.mark.parametrize("argv, option", [
    (["--rows", "0", "--only", "shards"], "--rows"),  # 0 once meant the default: 279,737 rows generated
    (["--rows", "-5", "--only", "shards"], "--rows"),
    (["--swift-rows", "0", "--only", "swift_stream"], "--swift-rows"),
    (["--rss-rows", "2000,0", "--only", "rss"], "--rss-rows"),
    (["--row-group-size", "0", "--only", "shards"], "--row-group-size"),
    (["--repeat", "0", "--only", "stream"], "--repeat"),
    (["--only", ","], "--only"),
])
def test_bad_sizes_are_refused_before_any_data_is_made(tmp_path, capsys, argv, option):
    bench_scale = benchmark_module("bench_scale")
    with pytest.raises(SystemExit) as exc:
        bench_scale.main([*argv, "--data-dir", str(tmp_path / "data"), "--timeout", "60"])
    assert exc.value.code == 2
    assert option in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_an_unknown_code_ref_is_a_usage_error(tmp_path, capsys):
    bench_scale = benchmark_module("bench_scale")
    with pytest.raises(SystemExit) as exc:
        bench_scale.main(["--code", "no-such-ref", "--only", "shards", "--data-dir", str(tmp_path / "data")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--code no-such-ref: git archive failed" in err and "no-such-ref" in err.split("failed:")[1]
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("content", [None, "not json", '{"rows": []}'])
def test_table_from_a_missing_or_foreign_file_is_a_usage_error(tmp_path, capsys, content):
    saved = tmp_path / "run.json"
    if content is not None:
        saved.write_text(content)
    with pytest.raises(SystemExit) as exc:
        benchmark_module("bench_scale").main(["--table-from", str(saved)])
    assert exc.value.code == 2
    assert f"--table-from {saved}: not a run saved with --json" in capsys.readouterr().err


def test_without_ms_swift_its_rows_have_no_target_and_are_not_counted_unmet(tmp_path, capsys):
    """No ms-swift venv: the ms-swift rows compare with the parse bound, which has no target; counting them as
    targets missed made a smoke run on a fresh machine report failures that are not there."""
    bench_scale = benchmark_module("bench_scale")
    if bench_scale.swift_python().exists():
        pytest.skip(f"ms-swift is installed at {bench_scale.swift_python()}: its rows have a target")
    argv = ["--only", "swift_prepare", "--swift-rows", "40", "--data-dir", str(tmp_path / "data"), "--timeout", "300"]
    assert bench_scale.main(argv) == 0
    out = capsys.readouterr().out
    swift = next(line for line in out.splitlines() if line.startswith("| the same, prepare"))
    assert "| none (ms-swift not run: ratio to the parse bound) | - |" in swift
    # the measure names the parse bound it divides by, not ms-swift's map-style load
    assert swift.startswith("| the same, prepare / parse bound (ms-swift not run) | ")
    assert "vs parse bound (ms-swift not run: no ms-swift venv" in swift
    assert "\n0 of 0 targets met" in out


@pytest.mark.parametrize("timeout", ["0", "-5", "nan"])
def test_a_timeout_of_no_time_is_refused_before_any_data_is_made(tmp_path, capsys, timeout):
    """--timeout 0 generated the data, then every measurement failed with 'no result after 0 s'."""
    with pytest.raises(SystemExit) as exc:
        benchmark_module("bench_scale").main(["--only", "shards", "--rows", "100", "--timeout", timeout,
                                              "--data-dir", str(tmp_path / "data")])
    assert exc.value.code == 2
    assert f"argument --timeout: must be more than 0 seconds, got {timeout}" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_an_ms_swift_venv_made_elsewhere_is_found_through_swift_python(tmp_path, capsys, monkeypatch):
    """swift_env.sh takes SWIFT_VENV=/elsewhere, but the benchmark only looked in benchmarks/.venv-swift: such a
    venv was never run. SWIFT_PYTHON (as tests/test_ms_swift_real.py reads it) names its Python."""
    elsewhere = tmp_path / "elsewhere" / "bin" / "python"
    monkeypatch.setenv("SWIFT_PYTHON", str(elsewhere))
    bench_scale = benchmark_module("bench_scale")
    assert bench_scale.swift_python() == elsewhere
    argv = ["--only", "swift_prepare", "--swift-rows", "40", "--data-dir", str(tmp_path / "data"), "--timeout", "300"]
    assert bench_scale.main(argv) == 0
    assert f"ms-swift not run: no ms-swift venv at {elsewhere}" in capsys.readouterr().out
