"""A command without its data says what to pass in the command's own arguments, on one line.

export, stats, validate, show, verify and score printed load()'s advice: five lines of Python calls
(``tooluse_datasets.load('nestful', data_dir='path/to/folder')``), or ``pass data_files= ... or data_dir=``,
which no command takes; mirror alone said ``--data-files`` / ``--sample``.
"""
from __future__ import annotations

import re

import pytest

from tooluse_datasets.cli import main


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _one_line_in_command_terms(err: str, files_flag: str = "--data-files") -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert files_flag in err and "--sample" in err
    assert "tooluse_datasets.load" not in err and "data_dir" not in err and "data_files=" not in err


@pytest.mark.parametrize("argv", [
    ["stats", "nestful"],
    ["validate", "nestful"],
    ["show", "nestful"],
    ["verify", "nestful"],
    ["export", "nestful", "--format", "swift", "--out", "{out}"],
])
def test_unreachable_upstream_data_is_one_line_naming_the_commands_arguments(argv, offline, tmp_path, capsys,
                                                                           cache_dir):
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot reach the upstream data" in err
    _one_line_in_command_terms(err)


def test_score_names_its_gold_files_argument(offline, tmp_path, capsys, cache_dir):
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text('{"sample_id": "x", "calls": []}\n')
    assert main(["score", "nestful", str(predictions), "--no-win-rate"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the upstream data" in err
    _one_line_in_command_terms(err, "--gold-data-files")


@pytest.mark.parametrize("source", ["ms_swift", "llamafactory"])
def test_a_source_without_upstream_files_names_the_commands_arguments(source, capsys):
    assert main(["stats", source]) == 2
    err = capsys.readouterr().err
    assert "has no default upstream files" in err
    _one_line_in_command_terms(err)
    if source == "llamafactory":
        assert "--option dataset_info=" in err and "--option dataset=" in err


@pytest.mark.parametrize("source", ["ms_swift", "llamafactory"])
def test_a_source_without_upstream_files_offers_the_bundled_sample_in_python(source):
    """The README: loading without files says how to point at local files or the bundled sample; load() of a
    source without upstream files named data_files= and data_dir= only (the command names --sample)."""
    import tooluse_datasets as td

    with pytest.raises(td.DataNotFoundError, match=re.escape(f"tooluse_datasets.sample_files({source!r})")):
        td.load(source, split="train")


@pytest.mark.parametrize("argv", [["verify", "nestful", "--sample"],
                                  ["export", "nestful", "--sample", "--option", "execute=true", "--out", "{out}"]])
def test_unreachable_executable_functions_are_one_line_naming_the_commands_arguments(argv, offline, tmp_path, capsys,
                                                                                     cache_dir):
    """Offline, NESTFUL's executable functions cannot be fetched: the advice was load()'s, four lines of a
    Python keyword argument; a command names its own flag for the folder."""
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: nestful: cannot fetch the executable functions") and err.count("\n") == 1, err
    assert "--executable-functions DIR" in err and "--option executable_functions=DIR" in err
    assert "executable_functions='" not in err


@pytest.mark.parametrize("argv", [["stats", "all"], ["export", "all", "--out", "{out}"]])
def test_all_without_its_data_names_source_path_items_not_a_bare_path(argv, offline, tmp_path, capsys, cache_dir):
    """`all` without files reached NESTFUL's upstream first, and its advice was NESTFUL's own: --data-files PATH,
    which `all` refuses (it takes SOURCE=PATH items), and in Python load('nestful', ...)."""
    import tooluse_datasets as td
    from tooluse_datasets.errors import DataNotFoundError

    argv = [a.replace("{out}", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot reach the upstream data" in err
    _one_line_in_command_terms(err)
    assert "--data-files SOURCE=PATH" in err and "--data-files PATH" not in err
    with pytest.raises(DataNotFoundError) as raised:
        td.load("all", streaming=True)
    assert "tooluse_datasets.load('all', data_files={" in str(raised.value)
    assert "load('nestful'" not in str(raised.value)
