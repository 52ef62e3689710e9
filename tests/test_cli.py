"""Command-line exit statuses: arguments that name nothing in the data are bad input (exit 2, one line)."""
from __future__ import annotations

import importlib.util
import json
import os

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main


def _rows(source: str, split: str) -> int:
    return sum(1 for _ in td.load(source, data_files=td.sample_files(source), split=split, streaming=True))


@pytest.mark.parametrize("source, split, which, named", [
    ("ms_swift", "train", ["--row", "99"], "row 99"),                   # past the end of the sample
    ("ms_swift", "train", ["--id", "nope"], "id 'nope'"),
    ("toolmind", "When2Call", ["--split", "When2Call", "--row", "1"], "row 1"),  # a split of one row
])
def test_show_exits_2_with_one_line_when_the_row_asked_for_does_not_exist(source, split, which, named, capsys):
    rows = _rows(source, split)
    assert main(["show", source, "--sample", *which]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: {source}: no {named} in split(s) {split} ({rows} row{'' if rows == 1 else 's'})\n"


def test_show_exits_0_on_the_last_row_and_2_just_past_it(capsys):
    rows = _rows("ms_swift", "train")
    assert main(["show", "ms_swift", "--sample", "--row", str(rows - 1)]) == 0
    assert "ms_swift/alias_and_provider_rows/" in capsys.readouterr().out
    assert main(["show", "ms_swift", "--sample", "--row", str(rows)]) == 2


@pytest.mark.parametrize("command", [
    ["export", "all", "--sample", "--format", "raw"],                   # the mix has no raw format
    ["stats", "toolmind", "--sample", "--option", "split_column=sourc"],  # no such column
])
def test_a_refused_command_leaves_its_skipped_rows_file_and_output_folder_alone(command, tmp_path, capsys):
    listing = tmp_path / "skipped.jsonl"
    listing.write_text('{"kept": "from the last run"}\n')
    out = tmp_path / "out"
    extra = ["--out", str(out)] if command[0] == "export" else []
    assert main([*command, *extra, "--skipped-rows", str(listing)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert listing.read_text() == '{"kept": "from the last run"}\n' and not out.exists()


def test_show_stops_at_the_row_asked_for_so_a_bad_row_after_it_does_not_raise(capsys):
    """Row 2 of the ms-swift sample has a call without a result, which the toolmind format refuses: rows 0 and 1
    show (they were converted with row 2, which raised first), row 2 is the typed error naming it."""
    for row in (0, 1):
        assert main(["show", "ms_swift", "--sample", "--config", "toolmind", "--row", str(row)]) == 0
        assert '"split": "ms_swift/agent_rows"' in capsys.readouterr().out
    assert main(["show", "ms_swift", "--sample", "--config", "toolmind", "--row", "2"]) == 2
    assert "row 2, field 'messages[1].tool_calls[0]'" in capsys.readouterr().err


def test_show_names_the_rows_skipped_when_the_row_asked_for_is_not_there(capsys):
    """Every NESTFUL sample row is refused by the toolmind format: with --on-error skip the line said "(0 rows)",
    as if the files held none."""
    assert main(["show", "nestful", "--sample", "--config", "toolmind", "--on-error", "skip"]) == 2
    assert capsys.readouterr().err.endswith("error: nestful: no row 0 in split(s) train (0 rows; 5 rows skipped)\n")


def test_show_by_id_finds_a_row_converted_beside_a_bad_one(capsys):
    """As by --row: `--id ms_swift/agent_rows/0` was the error of row 2, converted in the same batch."""
    for row in (0, 1):
        assert main(["show", "ms_swift", "--sample", "--config", "toolmind", "--id", f"ms_swift/agent_rows/{row}"]) == 0
        assert f'"id": "ms_swift/agent_rows/{row}"' in capsys.readouterr().out
    for named in ("ms_swift/agent_rows/2", "nope"):  # the bad row, or one searched past it: the typed error
        assert main(["show", "ms_swift", "--sample", "--config", "toolmind", "--id", named]) == 2
        assert "row 2, field 'messages[1].tool_calls[0]'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["validate", "ms_swift"], ["stats", "ms_swift"], ["show", "ms_swift"], ["export", "ms_swift", "--out", "{out}"],
    ["verify", "nestful"],
])
def test_sample_and_data_files_together_are_refused_not_the_files_ignored(command, tmp_path, capsys):
    """With both, the sample was read and the files named were not: `validate` passed files it never read."""
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "cut\n')
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    assert main([*argv, "--sample", "--data-files", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: ValueError: --sample and --data-files exclude each other: give one of them\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [
    ["validate", "ms_swift"], ["stats", "ms_swift"], ["show", "ms_swift"], ["export", "ms_swift", "--out", "{out}"],
])
def test_sample_and_a_data_dir_option_together_are_refused_not_the_folder_ignored(command, tmp_path, capsys):
    """The sample was read and the folder --option data_dir= named was not, without a word."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "rows.jsonl").write_text('{"messages": [{"role": "user", "content": "cut\n')
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    assert main([*argv, "--sample", "--option", f"data_dir={tmp_path / 'mine'}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: ValueError: --sample and --option data_dir= exclude each other: give one of them\n"
    assert not (tmp_path / "out").exists()


def test_score_refuses_sample_and_gold_data_files_together(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    results.write_text('{"sample_id": "x", "generated_text": "[]"}\n')
    assert main(["score", "nestful", str(results), "--no-win-rate", "--sample", "--gold-data-files", "x.jsonl"]) == 2
    assert "--sample and --gold-data-files exclude each other" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["validate", "ms_swift", "--sample", "--split", "nope"],             # a split the data does not have
    ["validate", "ms_swift", "--sample", "--config", "nope"],            # a format without a writer
    ["validate", "ms_swift", "--sample", "--option", "nope=1"],          # an option the source does not have
    ["stats", "ms_swift", "--sample", "--split", "nope"],
])
def test_validate_and_stats_refusing_their_arguments_leave_the_skipped_rows_file_alone(command, tmp_path, capsys):
    listing = tmp_path / "skipped.jsonl"
    listing.write_text('{"kept": "from the last run"}\n')
    assert main([*command, "--skipped-rows", str(listing)]) == 2
    assert capsys.readouterr().err.startswith("error: ValueError: ")
    assert listing.read_text() == '{"kept": "from the last run"}\n'


def test_export_whose_skipped_rows_file_cannot_be_written_leaves_no_output_folder(tmp_path, capsys):
    """The output folder was made before the skipped-rows file was opened: a path that cannot be written (its
    folder is a file) stopped the run and left an empty folder behind."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = tmp_path / "out"
    assert main(["export", "ms_swift", "--sample", "--out", str(out), "--on-error", "skip",
                 "--skipped-rows", str(blocker / "skipped.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not out.exists()
    out.mkdir()  # a folder that was there stays
    assert main(["export", "ms_swift", "--sample", "--out", str(out), "--on-error", "skip",
                 "--skipped-rows", str(blocker / "skipped.jsonl")]) == 2
    assert out.is_dir()


def _without_write_override(argv: list[str], cwd) -> "subprocess.CompletedProcess":
    """The command run in a process that cannot write a folder its mode forbids: as root, with the capability
    that overrides file modes dropped (capsh), else as this user."""
    import shlex
    import shutil
    import subprocess
    import sys

    command = [sys.executable, "-m", "tooluse_datasets.cli", *argv]
    if os.geteuid() == 0:
        if shutil.which("capsh") is None:
            pytest.skip("running as root without capsh: a chmod-555 folder stays writable here")
        command = ["capsh", "--drop=cap_dac_override", "--", "-c", shlex.join(command)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("command, option", [
    (["stats", "ms_swift", "--sample", "--plots", "{locked}/plots"], "--plots"),
    (["mirror", "ms_swift", "--sample", "--configs", "unified", "--out", "m", "--skipped-rows",
      "{locked}/skipped.jsonl"], "--skipped-rows"),
    (["export", "ms_swift", "--sample", "--out", "{locked}"], "--out"),
])
def test_an_output_in_a_folder_that_cannot_be_written_is_refused_before_any_row_is_read(command, option, tmp_path):
    """stats printed every split's statistics, then failed on an unwritable --plots folder (exit 2 after the
    output); mirror built every shard, then failed writing its --skipped-rows listing."""
    if option == "--plots":
        pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    done = _without_write_override([a.replace("{locked}", str(locked)) for a in command], tmp_path)
    locked.chmod(0o755)
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    assert done.stderr.startswith(f"error: ValueError: {option} ") and "cannot be written" in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["locked"] and not list(locked.iterdir())


def test_a_mirror_out_in_a_folder_that_cannot_be_written_is_refused_naming_it(tmp_path):
    """export and stats named the option; mirror said "PermissionError: [Errno 13] Permission denied: ..."."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    done = _without_write_override(["mirror", "ms_swift", "--sample", "--configs", "unified", "--out",
                                    str(locked / "m")], tmp_path)
    locked.chmod(0o755)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: the output folder (--out) {locked / 'm'} cannot be written: {locked} is read-only "
                           f"here (a read-only file system, or no permission): give a folder you can write\n")


def test_an_existing_skipped_rows_file_that_can_be_written_is_taken_in_a_folder_that_cannot(tmp_path):
    """A writable --skipped-rows file in a read-only folder (/dev/null in /dev, for any user but root) was refused
    for its folder, though validate, stats and export write it in place; mirror, which renames its listing onto
    the file, still needs the folder."""
    data = tmp_path / "rows.jsonl"
    with open(td.sample_files("ms_swift")["train"][0], "rb") as sample:
        data.write_bytes(sample.read() + b"{not json\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    listing = locked / "skipped.jsonl"
    listing.write_text("")
    listing.chmod(0o666)
    locked.chmod(0o555)
    validated = _without_write_override(["validate", "ms_swift", "--data-files", str(data), "--fail-on", "error",
                                         "--skipped-rows", str(listing)], tmp_path)
    mirrored = _without_write_override(["mirror", "ms_swift", "--sample", "--configs", "unified", "--out", "m",
                                        "--skipped-rows", str(listing)], tmp_path)
    locked.chmod(0o755)
    listing.chmod(0o444)  # (in a folder that can be written, it was emptied only once the run was set up)
    refused = _without_write_override(["validate", "ms_swift", "--data-files", str(data), "--skipped-rows",
                                       str(listing)], tmp_path)
    assert refused.returncode == 2 and "give a file you can write" in refused.stderr, refused.stderr[-2000:]
    listing.chmod(0o644)
    assert validated.returncode == 0, validated.stderr[-2000:]
    assert [json.loads(line)["row"] for line in listing.read_text().splitlines()] == [
        len(data.read_bytes().splitlines()) - 1]
    assert mirrored.returncode == 2 and "--skipped-rows" in mirrored.stderr and "cannot be written" in mirrored.stderr


def test_export_writes_its_skipped_rows_file_into_the_output_folder_it_makes(tmp_path, capsys):
    """`--skipped-rows out/skipped.jsonl` (what the refusal of `--skipped-rows out` suggests) with `out` not there
    yet was refused, the report being made before the folder: `rows_path ... cannot be made`."""
    out = tmp_path / "out"
    assert main(["export", "ms_swift", "--data-files", str(_input_folder(tmp_path) / "agent.jsonl"), "--out", str(out),
                 "--on-error", "skip", "--skipped-rows", str(out / "skipped.jsonl")]) == 0
    assert [json.loads(line)["reason"] for line in (out / "skipped.jsonl").read_text().splitlines()] == \
        ["InvalidValueError:messages[0].role"]


def test_export_writes_where_a_leading_tilde_says_as_the_checks_before_it_look(tmp_path, monkeypatch, capsys):
    """`--out=~/out` (the shell leaves `~` after `=` as it is) wrote into a folder named "~" of the current one, and
    `--skipped-rows=~/skipped.jsonl` too, while the checks before any row looked at the home folder's."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert main(["export", "ms_swift", "--sample", "--format", "llamafactory", "--on-error", "skip",
                 "--out=~/out", "--skipped-rows=~/skipped.jsonl"]) == 0
    assert sorted(p.name for p in (home / "out").iterdir()) == ["dataset_info.json",
                                                                 "ms_swift-llamafactory-train.jsonl"]
    assert (home / "skipped.jsonl").read_text().count("\n") == 2
    assert list(work.iterdir()) == []


def test_a_data_file_of_the_mix_with_a_leading_tilde_is_checked_in_the_home_folder(tmp_path, monkeypatch, capsys):
    """`--data-files ms_swift=~/rows` (the shell leaves `~` after `=`): the checks before any row looked for a
    folder named "~" of the current one, so the folder ~/rows was refused by load() in its terms (data_files=)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "rows").mkdir()
    assert main(["stats", "all", "--data-files", "ms_swift=~/rows"]) == 2
    assert f"--data-files names the folder {str(tmp_path / 'rows')!r}" in capsys.readouterr().err


def test_stats_writes_its_skipped_rows_file_into_the_plots_folder_it_makes(tmp_path, capsys):
    """The same for stats: `--skipped-rows plots/skipped.jsonl`, which the refusal of `--skipped-rows plots`
    suggests, was refused as "cannot be made", the report being made before the --plots folder."""
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    plots = tmp_path / "plots"
    assert main(["stats", "ms_swift", "--data-files", str(_input_folder(tmp_path) / "agent.jsonl"),
                 "--on-error", "skip", "--plots", str(plots), "--skipped-rows", str(plots / "skipped.jsonl")]) == 0
    assert [json.loads(line)["reason"] for line in (plots / "skipped.jsonl").read_text().splitlines()] == \
        ["InvalidValueError:messages[0].role"]
    assert any(path.suffix == ".png" for path in plots.iterdir())
    # refused for its arguments (a split the data lacks): the folder it made is removed again
    assert main(["stats", "ms_swift", "--sample", "--split", "nope", "--plots", str(tmp_path / "new"),
                 "--skipped-rows", str(tmp_path / "new" / "skipped.jsonl")]) == 2
    assert "has no split 'nope'" in capsys.readouterr().err and not (tmp_path / "new").exists()


def test_stats_refuses_up_front_a_folder_where_it_draws_a_picture(tmp_path, capsys):
    """A folder named as one of the PNG files in --plots, or as the .partial file it is drawn under first: the
    statistics were printed, then the command failed with "IsADirectoryError" (exit 2), naming no argument."""
    pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    from tooluse_datasets.distributions import MEASURES

    for file_name in [name for drawn, _, _ in MEASURES.values() for name in (drawn, f"{drawn}.partial")]:
        (tmp_path / file_name).mkdir()
        assert main(["stats", "ms_swift", "--sample", "--plots", str(tmp_path)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == (f"error: ValueError: --plots {str(tmp_path)!r} holds a folder {file_name!r} where "
                                f"stats draws that picture: move it away or give another --plots\n")
        (tmp_path / file_name).rmdir()


@pytest.mark.parametrize("command", [
    ["export", "ms_swift", "--out", "{dir}/out"], ["stats", "ms_swift"], ["validate", "ms_swift"],
    ["mirror", "ms_swift", "--out", "{dir}/mirror", "--configs", "unified"],
])
def test_every_command_makes_the_folder_of_its_skipped_rows_file(command, tmp_path, capsys):
    """`--skipped-rows logs/skipped.jsonl` with `logs` not there yet: mirror made it, export and stats refused it
    ("cannot be made") and validate said a bare FileNotFoundError. Refused for its arguments, none is left."""
    data = str(_input_folder(tmp_path) / "agent.jsonl")
    argv = [a.replace("{dir}", str(tmp_path)) for a in command]
    listing = tmp_path / "logs" / "run" / "skipped.jsonl"
    assert main([*argv, "--split", "nope", "--data-files", data, "--skipped-rows", str(listing)]) == 2
    assert capsys.readouterr().err.startswith("error: ") and not (tmp_path / "logs").exists()
    assert main([*argv, "--data-files", data, "--on-error", "skip", "--skipped-rows", str(listing)]) in (0, 1)
    assert [json.loads(line)["reason"] for line in listing.read_text().splitlines()] == \
        ["InvalidValueError:messages[0].role"]


def test_validate_names_the_splits_there_are_when_asked_for_another(capsys):
    assert main(["validate", "ms_swift", "--sample", "--split", "nope"]) == 2
    assert capsys.readouterr().err == "error: ValueError: ms_swift has no split 'nope'; its splits here: train\n"


@pytest.mark.parametrize("command", ["show", "stats", "validate"])
@pytest.mark.parametrize("source, split, meant", [
    ("toolmind", "when2call", "When2Call"),  # ToolMind's split names are in mixed case
    ("toolmind", "xlam", "xlam_function_calling_60k"), ("ms_swift", "tran", "train"),
])
def test_a_split_name_mistyped_is_refused_naming_the_split_meant(command, source, split, meant, capsys):
    assert main([command, source, "--sample", "--split", split]) == 2
    err = capsys.readouterr().err
    assert f"{source} has no split {split!r} (did you mean {meant!r}?); its splits here: " in err


@pytest.mark.parametrize("command", ["show", "stats", "validate", "export"])
@pytest.mark.parametrize("split", ["ALL", "All"])
def test_all_in_other_case_is_refused_naming_all_as_mirror_reads_it(command, split, tmp_path, capsys):
    """mirror reads --split ALL as datasets' 'all' (refused there: leave --split out); the other commands said
    only that there is no split 'ALL', never that 'all' reads every split as one."""
    out = ["--out", str(tmp_path / "out")] if command == "export" else []
    assert main([command, "toolmind", "--sample", "--split", split, *out]) == 2
    assert f"toolmind has no split {split!r} (did you mean 'all'?); its splits here: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["mirror", "toolmind", "--sample", "--split", split, "--out", str(tmp_path / "m")]) == 2
    assert "'all' names every split, which a mirror holds when no split is given" in capsys.readouterr().err


@pytest.mark.parametrize("split", ["synthetic+ALL", "ALL+tau_train"])
def test_all_in_an_expression_with_other_splits_is_not_suggested(split, tmp_path, capsys):
    """'all' reads every split only alone: beside another split datasets refuses it ("Bad split", "Unknown split
    'all'"), yet the error for 'ALL' there suggested 'all'."""
    assert main(["show", "toolmind", "--sample", "--split", split]) == 2
    err = capsys.readouterr().err
    assert "toolmind has no split 'ALL'; its splits here: synthetic, " in err and "did you mean" not in err
    for streaming in (False, True):
        with pytest.raises(ValueError, match=r"^toolmind has no split 'ALL'; its splits here: synthetic, "):
            td.load("toolmind", split=split, data_files=td.sample_files("toolmind"), streaming=streaming,
                    cache_dir=str(tmp_path / "cache"))
        with pytest.raises(ValueError, match="did you mean 'all'"):
            td.load("toolmind", split="ALL", data_files=td.sample_files("toolmind"), streaming=streaming,
                    cache_dir=str(tmp_path / "cache"))


def test_validate_empties_the_skipped_rows_file_once_it_runs(tmp_path, capsys):
    listing = tmp_path / "skipped.jsonl"
    listing.write_text('{"kept": "from the last run"}\n')
    assert main(["validate", "ms_swift", "--sample", "--skipped-rows", str(listing)]) == 0
    assert listing.read_text() == ""


def test_all_takes_each_sources_own_files_as_source_path_items(tmp_path, capsys):
    """`all` needs a file list per source; a CLI user gives them as SOURCE=PATH (not a Python dict)."""
    nestful, ms_swift = td.sample_files("nestful")["train"], td.sample_files("ms_swift")["train"]
    out = tmp_path / "out"
    argv = ["export", "all", "--format", "unified", "--out", str(out), "--data-files",
            *[f"nestful={p}" for p in nestful], *[f"ms_swift={p}" for p in ms_swift]]
    assert main(argv) == 0
    exported = [line for f in sorted(out.rglob("*.jsonl")) for line in f.read_text().splitlines()]
    expected = td.load("all", data_files={"nestful": nestful, "ms_swift": ms_swift}, split="train", streaming=True)
    assert len(exported) == sum(1 for _ in expected) == sum(_rows(s, "train") for s in ("nestful", "ms_swift"))

    assert main(["stats", "all", "--data-files", nestful[0]]) == 2  # a bare path names no source
    err = capsys.readouterr().err
    assert "give --data-files as SOURCE=PATH items" in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["rows [v2].jsonl", "rows*.jsonl", "rows?.jsonl"])
def test_a_data_file_whose_name_holds_glob_characters_is_read_as_named(name, tmp_path, monkeypatch, capsys):
    """datasets reads every path as a glob: "rows [v2].jsonl" matched no file (the command said so, exit 2), and
    "rows*.jsonl" read the other rows*.jsonl files of its folder too."""
    from conftest import shared_data

    upstream = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes()
    (tmp_path / name).write_bytes(upstream)
    (tmp_path / "rows2.jsonl").write_bytes(upstream)  # what the name read as a glob also matches (but [v2])
    monkeypatch.chdir(tmp_path)
    n = len(upstream.splitlines())
    for path in (name, str(tmp_path / name)):
        assert main(["stats", "ms_swift", "--data-files", path]) == 0
        assert json.loads(capsys.readouterr().out)["train"]["rows"] == n
        assert main(["stats", "all", "--data-files", f"ms_swift={path}"]) == 0
        assert json.loads(capsys.readouterr().out)["train"]["rows"] == n
    rows = list(td.load("ms_swift", data_files=name, split="train", streaming=True))
    assert len(rows) == n


@pytest.mark.parametrize("folder", ["run[1]", "run*", "run?"])
def test_a_glob_under_a_folder_whose_name_holds_glob_characters_reads_that_folder(folder, tmp_path, monkeypatch,
                                                                                  capsys):
    """`--data-files '/tmp/run[1]/*.jsonl'`: the folder's name was read as a pattern too (`[1]` is the character
    `1`), so the glob matched no file (exit 2), or (`run*`) the files of other folders too. The folders that
    exist as named are read as named, the rest is the pattern; a --skipped-rows file the glob reads is refused."""
    from conftest import shared_data

    upstream = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes()
    n = len(upstream.splitlines())
    for name in (folder, "run1", "run2"):  # what the folder's name read as a pattern matches (but run[1])
        (tmp_path / name / "deep").mkdir(parents=True)
        (tmp_path / name / "rows.jsonl").write_bytes(upstream)
        (tmp_path / name / "deep" / "more.jsonl").write_bytes(upstream)
    monkeypatch.chdir(tmp_path)
    for pattern, files in ((f"{folder}/*.jsonl", 1), (f"{tmp_path / folder}/*.jsonl", 1),
                           (f"{tmp_path / folder}/**/*.jsonl", 2), (f"{tmp_path / folder}/deep/m*.jsonl", 1)):
        assert main(["stats", "ms_swift", "--data-files", pattern]) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["train"]["rows"] == n * files
        assert len(list(td.load("ms_swift", data_files=pattern, split="train", streaming=True))) == n * files
    skipped = tmp_path / folder / "skipped.jsonl"
    skipped.write_text("")
    assert main(["validate", "ms_swift", "--data-files", f"{tmp_path / folder}/*.jsonl", "--skipped-rows",
                 str(skipped)]) == 2
    assert "which this run reads as input" in capsys.readouterr().err
    # a pattern over folders that do not exist as named is read as the pattern it is
    assert main(["stats", "ms_swift", "--data-files", f"{tmp_path}/run[12]/rows.jsonl"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["rows"] == 2 * n


@pytest.mark.parametrize("command", [["validate"], ["stats"], ["mirror", "--configs", "unified", "--out", "{tmp}/m"]])
def test_a_skipped_rows_file_that_is_a_hard_link_to_an_input_is_refused_not_emptied(command, tmp_path, capsys):
    """A symbolic link was refused, its real path an input's; a hard link has its own, so the input was emptied
    and its rows' skips written over it."""
    data = _input_folder(tmp_path) / "agent.jsonl"
    before = data.read_bytes()
    os.link(data, tmp_path / "skipped.jsonl")
    argv = [command[0], "ms_swift", *[arg.format(tmp=tmp_path) for arg in command[1:]], "--data-files", str(data),
            "--on-error", "skip", "--skipped-rows", str(tmp_path / "skipped.jsonl")]
    assert main(argv) == 2
    assert "which this run reads as input" in capsys.readouterr().err and data.read_bytes() == before


def test_a_question_mark_in_a_local_file_name_is_part_of_the_name_not_a_url_query(tmp_path, capsys):
    """The name was cut at "?" as a URL's query is: 'rows?v2.jsonl.gz' had no suffix, so its gzip bytes were read
    as JSON text ("not JSON text"), a Parquet file was read as JSON ("name it .parquet"), and ids said 'rows'."""
    import gzip

    from conftest import shared_data

    upstream = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes()
    path = tmp_path / "rows?v2.jsonl.gz"
    path.write_bytes(gzip.compress(upstream))
    n = len(upstream.splitlines())
    assert main(["export", "ms_swift", "--data-files", str(path), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    exported = (tmp_path / "out" / "ms_swift-unified-train.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in exported] == [f"ms_swift/rows?v2/{i}" for i in range(n)]
    parquet = tmp_path / "rows?v3.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = json.loads(upstream.splitlines()[0])
    pq.write_table(pa.table({"messages": [first["messages"]]}), parquet)
    assert main(["stats", "ms_swift", "--data-files", str(parquet)]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["read"] == {"rows_read": 1, "skipped": 0, "by_reason": {},
                                                                   "examples": []}
    rows = list(td.load("ms_swift", data_files=str(parquet), split="train", streaming=True))
    assert [r["id"] for r in rows] == ["ms_swift/rows?v3/0"]


def test_a_data_file_whose_name_is_not_utf8_is_read(tmp_path, capsys):
    """A name in another encoding (Latin-1 "caf\xe9.jsonl", from an old archive): Python reads its byte as a lone
    surrogate, which the cache key's digest and the rows' ids (named after the file) could not encode: every
    command failed with "UnicodeEncodeError: ... surrogates not allowed". The byte is kept as an escape."""
    import os

    from conftest import shared_data

    upstream = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes()
    path = os.path.join(os.fsdecode(tmp_path), os.fsdecode(b"caf\xe9.jsonl"))
    try:
        with open(path, "wb") as f:
            f.write(upstream)
    except (OSError, UnicodeError):
        pytest.skip("this file system keeps no file name that is not UTF-8")
    n = len(upstream.splitlines())
    assert main(["stats", "ms_swift", "--data-files", path]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["rows"] == n
    assert main(["export", "ms_swift", "--data-files", path, "--out", str(tmp_path / "out")]) == 0
    exported = (tmp_path / "out" / "ms_swift-unified-train.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in exported] == [f"ms_swift/caf\\xe9/{i}" for i in range(n)]
    prepared = td.load("ms_swift", data_files=path, split="train", cache_dir=str(tmp_path / "cache"))
    assert prepared["id"] == [f"ms_swift/caf\\xe9/{i}" for i in range(n)]


def test_counts_of_one_are_said_in_the_singular(tmp_path, capsys):
    """The commands printed "1 rows read", "1 unified rows checked by 1 rules" and "out/x.jsonl: 1 rows"."""
    from conftest import shared_data

    one = tmp_path / "one.jsonl"
    one.write_bytes(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_bytes().splitlines()[0])
    assert main(["validate", "ms_swift", "--data-files", str(one), "--rules", "arguments.schema"]) == 0
    assert capsys.readouterr().out.startswith(
        "ms_swift (unified): 1 row read, 0 skipped; 1 unified row checked by 1 rule: 0 with errors, 0 with warnings")
    assert main(["export", "ms_swift", "--data-files", str(one), "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [f"{tmp_path / 'out' / 'ms_swift-unified-train.jsonl'}: 1 row",
                                                         "1 row read, none skipped"]


def test_demo_says_each_sources_summary_on_one_line(capsys):
    """ToolMind's summary (seven split names) was cut into three lines at the console's width: a log searched for
    "== toolmind:" found neither its tool calls nor its skips."""
    assert main(["demo", "--source", "toolmind"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("== toolmind:"))
    assert "'xlam_function_calling_60k'], " in line and line.endswith("21 rows read, none skipped"), line


def test_a_mistyped_source_name_is_refused_naming_the_source_meant(tmp_path, capsys):
    assert main(["show", "nestfull", "--sample"]) == 2
    assert "unknown source 'nestfull' (did you mean 'nestful'?)" in capsys.readouterr().err
    # an `all` item too, the path kept as given
    assert main(["stats", "all", "--data-files", "nestfull=my rows.jsonl"]) == 2
    assert "got 'nestfull=my rows.jsonl' (did you mean 'nestful=my rows.jsonl'?)" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["validate", "ms_swift"], ["stats", "ms_swift"], ["show", "ms_swift"], ["export", "ms_swift", "--out", "{out}"],
    ["verify", "nestful"], ["mirror", "ms_swift", "--out", "{out}"],
])
def test_a_folder_as_data_files_is_refused_in_the_commands_terms(command, tmp_path, capsys):
    """load() advises data_dir= for a folder; no command takes --data-dir, so the command says what it takes."""
    folder = tmp_path / "rows"
    folder.mkdir()
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    assert main([*argv, "--data-files", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--data-files names the folder" in err and "data_dir" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["validate", "ms_swift"], ["stats", "all"], ["show", "ms_swift"], ["verify", "nestful"]])
def test_standard_input_or_a_pipe_as_data_files_is_refused_saying_so_not_reported_missing(command, tmp_path, capsys):
    """`--data-files /dev/stdin`, `-` or `<(...)` said "Unable to find '/dev/stdin'", as if the path were wrong."""
    import os

    read_end, write_end = os.pipe()
    try:
        for path in (f"/dev/fd/{read_end}", "-"):
            item = f"ms_swift={path}" if command[1] == "all" else path
            assert main([*command, "--data-files", item]) == 2
            err = capsys.readouterr().err
            assert "Unable to find" not in err and "save the rows to a file and give its path" in err, err
        with pytest.raises(ValueError, match=rf"^data_files names '/dev/fd/{read_end}', which is not a regular file"):
            td.load("ms_swift", data_files=f"/dev/fd/{read_end}", split="train", streaming=True)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_folder_as_an_all_item_is_refused_in_the_commands_terms(tmp_path, capsys):
    folder = tmp_path / "rows"
    folder.mkdir()
    assert main(["stats", "all", "--data-files", f"ms_swift={folder}"]) == 2
    err = capsys.readouterr().err
    assert "--data-files names the folder" in err and "data_dir" not in err


def test_a_folder_as_gold_data_files_is_refused_in_the_commands_terms(tmp_path, capsys):
    folder = tmp_path / "gold"
    folder.mkdir()
    results = tmp_path / "results.jsonl"
    results.write_text('{"sample_id": "x", "generated_text": "[]"}\n')
    assert main(["score", "nestful", str(results), "--no-win-rate", "--gold-data-files", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--gold-data-files names the folder" in err and "data_dir" not in err


def test_stats_counts_rows_of_no_split_once_as_validate_and_export_do(tmp_path, capsys):
    """A ToolMind file without a split column beside one with it: its rows belong to no split and are reported
    by the first split. `stats` loaded each split on its own, so every split reported them again (7 splits:
    21 skipped rows counted and listed for 3)."""
    import json

    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(td.sample_files("toolmind")["train"][0])
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.drop_columns(["split"]).slice(0, 3), tmp_path / "b.parquet")
    files = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    listing = tmp_path / "skipped.jsonl"
    assert main(["stats", "toolmind", "--data-files", *files, "--on-error", "skip", "--skipped-rows", str(listing)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert sum(s["read"]["skipped"] for s in stats.values()) == 3
    assert sum(s["read"]["rows_read"] for s in stats.values()) == table.num_rows + 3
    assert all(s["read"]["rows_read"] == s["rows"] + s["read"]["skipped"] for s in stats.values())
    assert len(listing.read_text().splitlines()) == 3
    assert main(["validate", "toolmind", "--data-files", *files, "--json"]) == 1
    validated = json.loads(capsys.readouterr().out)
    assert {name: s["read"]["skipped"] for name, s in stats.items()} == {
        name: s["read"]["skipped"] for name, s in validated["splits"].items()}


@pytest.mark.parametrize("command, option, flag", [
    (["stats", "ms_swift", "--sample"], "on_error=skip", "--on-error"),
    (["export", "ms_swift", "--sample", "--out", "{out}"], "report=null", "--skipped-rows"),
    (["show", "ms_swift", "--sample"], "split=train", "--split"),
    (["show", "ms_swift", "--sample"], "streaming=false", "the command chooses"),
    (["export", "ms_swift", "--sample", "--out", "{out}"], "config=swift", "--format"),
    (["stats", "ms_swift", "--sample"], "data_files=x.jsonl", "--data-files"),
    (["validate", "ms_swift", "--sample"], "rules=error", "--rules"),
    (["validate", "ms_swift", "--sample"], "max_examples=3", "--examples"),
])
def test_an_option_the_command_sets_itself_is_refused_in_one_line_not_reported_as_a_bug(command, option, flag,
                                                                                       tmp_path, capsys):
    """`--option on_error=skip` gave load() on_error twice: "unexpected TypeError ... (a bug ...)"."""
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    assert main([*argv, "--option", option]) == 2
    err = capsys.readouterr().err
    name = option.partition("=")[0]
    assert err.startswith(f"error: ValueError: --option {name}: not a source option") and flag in err
    assert "bug" not in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["stats", "nestful"], ["validate", "nestful"]])
@pytest.mark.parametrize("revision", ["1.0", "1234567"])  # a tag, a short commit of digits
def test_a_revision_option_is_read_as_text_not_as_a_json_number(command, revision, monkeypatch, capsys):
    """`--option revision=1.0` read 1.0 as JSON: "unexpected TypeError ... (a bug ...)" from resolving it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert main([*command, "--option", f"revision={revision}"]) == 2  # offline: the upstream at that revision
    err = capsys.readouterr().err
    assert err.startswith("error: nestful: cannot reach the upstream data") and f"@ {revision}" in err
    assert "bug" not in err and "TypeError" not in err


def test_a_cache_dir_option_is_read_as_a_path_not_as_a_json_number(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["stats", "ms_swift", "--sample", "--option", "cache_dir=2024"]) == 0
    assert '"rows": 6' in capsys.readouterr().out


@pytest.mark.parametrize("second", ["strict=true", "strict=false"])
def test_an_option_given_twice_is_refused_not_the_last_one_kept(second, tmp_path, capsys):
    # `--option strict=false --option strict=true` exported with strict=true without a word
    out = tmp_path / "out"
    assert main(["export", "toolmind", "--sample", "--out", str(out), "--option", "strict=false",
                 "--option", second]) == 2
    err = capsys.readouterr().err
    assert err == "error: ValueError: --option strict is given more than once: give it once\n"
    assert not out.exists()


@pytest.mark.parametrize("unbuffered", [False, True])  # a shell's default, and PYTHONUNBUFFERED=1
@pytest.mark.parametrize("command", [
    ["stats", "ms_swift", "--sample"],                                     # print
    ["show", "ms_swift", "--sample"],                                      # rich
    ["demo", "--source", "ms_swift", "--streaming"],
])
def test_a_closed_output_pipe_stops_the_command_quietly(command, unbuffered):
    """`tooluse-datasets stats ... | head`: the reader goes before the output is written. print-based commands
    said 'error: BrokenPipeError: [Errno 32] Broken pipe' (exit 2, bad input), rich-based ones exited 1 (a
    failed validation's status); now every command stops quietly with the status of a process killed by
    SIGPIPE, as cat or grep in the same pipe. Without PYTHONUNBUFFERED, output print() left buffered failed at
    exit instead: "Exception ignored ... BrokenPipeError" and status 120."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the command writes anything
    try:
        done = subprocess.run([sys.executable, "-m", "tooluse_datasets.cli", *command], stdout=write,
                              stderr=subprocess.PIPE, timeout=300, env=env)
    finally:
        os.close(write)
    err = done.stderr.decode().replace("\r", "\n")
    lines = [line for line in err.splitlines() if line.strip() and "examples/s" not in line]
    assert done.returncode == 141, err
    assert lines == []


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_SETPIPE_SZ"), reason="needs Linux's F_SETPIPE_SZ")
@pytest.mark.parametrize("unbuffered", [False, True])  # a shell's default, and PYTHONUNBUFFERED=1
@pytest.mark.parametrize("command", [
    ["stats", "toolmind", "--sample"],                                     # print
    ["validate", "toolmind", "--sample", "--json"],
    ["show", "toolmind", "--sample", "--row", "0", "--max-chars", "0"],    # rich
])
def test_a_reader_that_goes_while_the_output_is_written_stops_the_command_quietly(command, unbuffered):
    """`tooluse-datasets show ... | head -1`: head reads the first block and goes while the command is still
    writing. The write in progress wrote part of its text, a short count Python's layers ignore: the rest was
    dropped without an error and the command exited 0, not with the 141 cat would give."""
    import fcntl
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # smaller than each output: the command is still writing it
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tooluse_datasets.cli", *command], stdout=write,
                                stderr=subprocess.PIPE, env=env)
        os.close(write)
        write = None
        first = os.read(read, 100)  # the command has started writing its output ...
        os.close(read)  # ... and the reader goes, as head does
        read = None
        err = proc.communicate(timeout=300)[1].decode().replace("\r", "\n")
    finally:
        for fd in (read, write):
            if fd is not None:
                os.close(fd)
    assert first
    lines = [line for line in err.splitlines() if line.strip() and "examples/s" not in line]
    assert proc.returncode == 141, err
    assert lines == []


def test_a_failure_whose_error_pipe_is_closed_too_keeps_its_exit_status():
    """`tooluse-datasets ... 2>&1 | head`: once the reader has gone, the error line cannot be written either; the
    BrokenPipeError of writing it escaped and the process ended with status 1 (a failed validation's status)
    instead of 2 (bad input)."""
    import os
    import subprocess
    import sys

    missing = "/nonexistent/nestful_data.jsonl"
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "tooluse_datasets.cli", "stats", "nestful", "--data-files",
                               missing], stdout=write, stderr=write, timeout=300)
    finally:
        os.close(write)
    assert done.returncode == 2
    # the same run with a reader: the one line the closed pipe lost
    shown = subprocess.run([sys.executable, "-m", "tooluse_datasets.cli", "stats", "nestful", "--data-files",
                            missing], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 2 and shown.stderr.startswith("error: ") and missing in shown.stderr


@pytest.mark.parametrize("command", [["stats"], ["export", "--format", "unified", "--out", "{out}"], ["mirror", "--out", "{out}"]])
def test_split_given_twice_is_a_usage_error_not_the_last_one_read(command, tmp_path, capsys):
    argv = [a.format(out=tmp_path / "out") for a in command]
    with pytest.raises(SystemExit) as info:
        main([argv[0], "toolmind", "--sample", "--split", "When2Call", "--split", "tau_train", *argv[1:]])
    assert info.value.code == 2
    assert "--split is given once (got 'When2Call' and 'tau_train')" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()



@pytest.mark.parametrize("argv, meant", [
    (["export", "nestful", "--sample", "--out", "{out}", "--formt", "llamafactory"], "--formt: did you mean --format?"),
    (["export", "nestful", "--sample", "--out", "{out}", "--on_error", "skip"], "--on_error: did you mean --on-error?"),
    (["stats", "nestful", "--sample", "--spilt", "train"], "--spilt: did you mean --split?"),
    (["stats", "nestful", "--sample", "--bogus=1"], None),
    # after --, an option of the command is an argument: no "--split: did you mean --split?"
    (["stats", "nestful", "--sample", "--", "--split", "train"], None),
])
def test_a_misspelt_option_is_refused_by_its_command_with_the_option_meant(argv, meant, tmp_path, capsys):
    # argparse refused it with the top-level usage ("tooluse-datasets [-h] [-v]"), which lists none of the
    # command's options, and named no option meant
    with pytest.raises(SystemExit) as info:
        main([a.format(out=tmp_path / "out") for a in argv])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"usage: tooluse-datasets {argv[0]} " in err and "unrecognized arguments: " in err
    assert (meant in err) if meant else "did you mean" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt, taken", [("unified", "nestful-unified-train.jsonl"),
                                        ("llamafactory", "nestful-llamafactory-train.jsonl"),
                                        ("llamafactory", "dataset_info.json"),
                                        ("unified", "nestful-unified-train.jsonl.partial"),
                                        ("llamafactory", "dataset_info.json.partial")])
def test_export_refuses_up_front_a_folder_where_it_writes_a_file(fmt, taken, tmp_path, capsys):
    # the system's "Is a directory" came once every row was written (or, for dataset_info.json, as a bare
    # IsADirectoryError naming no argument); at the name a file is written under first (.partial) too, for
    # dataset_info.json once the split's file was in place, unregistered
    (tmp_path / "out" / taken).mkdir(parents=True)
    assert main(["export", "nestful", "--sample", "--format", fmt, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert f"holds a folder {taken!r} where the export writes that file" in captured.err
    assert "rows" not in captured.out  # refused before any row was read
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [taken]


def test_data_files_given_twice_reads_both_not_the_last_one(capsys):
    # argparse kept the last --data-files list silently: `--data-files a --data-files b` validated b alone
    from conftest import shared_data

    icl = str(shared_data("nestful", "src", "icl_examples.json"))  # 3 rows
    current = str(shared_data("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl"))
    assert main(["validate", "nestful", "--data-files", icl, "--data-files", current]) == 0
    assert "5 rows read" in capsys.readouterr().out


def _input_folder(tmp_path):
    """A folder holding a real ms-swift file and one bad row (so that skipping writes --skipped-rows)."""
    import shutil

    from conftest import shared_data

    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"), folder / "agent.jsonl")
    with open(folder / "agent.jsonl", "a") as f:
        f.write('{"messages": [{"role": "bogus", "content": "x"}]}\n')
    return folder


@pytest.mark.parametrize("reads", ["--data-files", "data_dir", "data_dir=~"])
def test_export_run_again_into_its_input_folder_refuses_to_read_its_last_output_as_data(reads, tmp_path, capsys,
                                                                                        monkeypatch):
    """--out inside the folder the run reads (a --data-files glob, or --option data_dir=): the second run read the
    first run's output as input rows (3, 6, then 9 rows from a 3-row file) and replaced it while read. (data_dir=~/d
    is the home folder's d to load(), but the checks of outputs looked for a folder named "~".)"""
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = _input_folder(tmp_path)
    named = f"~/{folder.name}" if reads == "data_dir=~" else folder
    given = ["--data-files", str(folder / "*.jsonl")] if reads == "--data-files" else ["--option", f"data_dir={named}"]
    reads = reads.rstrip("=~")
    argv = ["export", "ms_swift", *given, "--format", "swift", "--out", str(folder), "--on-error", "skip"]
    assert main(argv) == 0
    written = folder / "ms_swift-swift-train.jsonl"
    first = written.read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ValueError: --out ")
    assert str(written) in captured.err and reads in captured.err
    assert written.read_bytes() == first


@pytest.mark.parametrize("reads", ["--data-files", "data_dir"])
def test_export_in_another_format_into_its_input_folder_refuses_to_read_the_earlier_export_as_data(reads, tmp_path,
                                                                                                  capsys):
    """--format swift, then --format llamafactory into the folder the runs read: the second run read the swift
    file as ms-swift rows, so its export held every row twice (the copies under ids of the swift file)."""
    folder = _input_folder(tmp_path)
    given = ["--data-files", str(folder / "*.jsonl")] if reads == "--data-files" else ["--option", f"data_dir={folder}"]
    argv = ["export", "ms_swift", *given, "--out", str(folder), "--on-error", "skip", "--format"]
    assert main([*argv, "swift"]) == 0
    earlier = folder / "ms_swift-swift-train.jsonl"
    capsys.readouterr()
    assert main([*argv, "llamafactory"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ValueError: --out ")
    assert str(earlier) in captured.err and reads in captured.err
    assert sorted(p.name for p in folder.iterdir()) == ["agent.jsonl", "ms_swift-swift-train.jsonl"]


def test_export_reads_an_export_given_as_its_input_from_another_folder(tmp_path, capsys):
    """Reading an export back is no mistake when it is written elsewhere: only a folder the run both reads and
    writes into is refused."""
    folder = _input_folder(tmp_path)
    assert main(["export", "ms_swift", "--data-files", str(folder / "agent.jsonl"), "--format", "swift",
                 "--out", str(folder), "--on-error", "skip"]) == 0
    rows = (folder / "ms_swift-swift-train.jsonl").read_text().count("\n")
    capsys.readouterr()
    out = tmp_path / "again"
    assert main(["export", "ms_swift", "--data-files", str(folder / "ms_swift-swift-train.jsonl"), "--format", "swift",
                 "--out", str(out)]) == 0
    assert (out / "ms_swift-swift-train.jsonl").read_text().count("\n") == rows > 0


def test_export_converts_an_earlier_export_named_alone_as_its_input_in_its_own_folder(tmp_path, capsys):
    """An earlier export read alone holds each row once: converting it into its own folder (--format swift, then
    that file to --format unified) reads no row twice, and was refused as if it did."""
    folder = _input_folder(tmp_path)
    assert main(["export", "ms_swift", "--data-files", str(folder / "agent.jsonl"), "--format", "swift",
                 "--out", str(folder), "--on-error", "skip"]) == 0
    rows = (folder / "ms_swift-swift-train.jsonl").read_text().count("\n")
    capsys.readouterr()
    assert main(["export", "ms_swift", "--data-files", str(folder / "ms_swift-swift-train.jsonl"),
                 "--format", "unified", "--out", str(folder)]) == 0
    assert (folder / "ms_swift-unified-train.jsonl").read_text().count("\n") == rows > 0


def test_export_all_converts_earlier_exports_of_its_sources_each_read_alone_in_their_folder(tmp_path, capsys):
    """Each source's earlier export read by that source alone holds each row once; all refused them as read beside
    other files, those of another source, which are other rows (one beside its own data: the test below)."""
    folder = tmp_path / "exports"
    for source, fmt in (("ms_swift", "swift"), ("llamafactory", "llamafactory")):
        assert main(["export", source, "--sample", "--format", fmt, "--out", str(folder)]) == 0
    earlier = {"ms_swift": folder / "ms_swift-swift-train.jsonl",
               "llamafactory": folder / "llamafactory-llamafactory-train.jsonl"}
    rows = sum(path.read_text().count("\n") for path in earlier.values())
    capsys.readouterr()
    assert main(["export", "all", "--data-files", *(f"{source}={path}" for source, path in earlier.items()),
                 "--format", "unified", "--out", str(folder)]) == 0
    assert (folder / "all-unified-train.jsonl").read_text().count("\n") == rows > 0


@pytest.mark.parametrize("first, then", [("ms_swift", "all"), ("all", "ms_swift")])
def test_export_refuses_to_read_an_earlier_export_of_all_or_of_its_source_beside_its_data(first, then, tmp_path,
                                                                                         capsys):
    """export all reading ms_swift=DIR/*.jsonl into DIR, where an earlier `export ms_swift` wrote (or export
    ms_swift reading DIR/*.jsonl, where `export all` wrote): the earlier export was read beside the file it was made
    from, so every row came twice (under the export's ids too)."""
    folder = _input_folder(tmp_path)

    def files(source: str, name: str) -> str:
        return f"ms_swift={folder / name}" if source == "all" else str(folder / name)

    assert main(["export", first, "--data-files", files(first, "agent.jsonl"), "--format", "swift",
                 "--out", str(folder), "--on-error", "skip"]) == 0
    earlier = folder / f"{first}-swift-train.jsonl"
    capsys.readouterr()
    assert main(["export", then, "--data-files", files(then, "*.jsonl"), "--format", "unified",
                 "--out", str(folder), "--on-error", "skip"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1
    assert f"--out holds {str(earlier)!r}, an earlier export of {first}" in captured.err
    assert sorted(p.name for p in folder.iterdir()) == ["agent.jsonl", earlier.name]


@pytest.mark.parametrize("names, refused", [
    (["ms_swift-swift-train.jsonl", "ms_swift-swift-validation.jsonl"], False),  # one run's splits: each row once
    (["ms_swift-swift-train.jsonl", "ms_swift-raw-train.jsonl"], True),  # the same rows in two formats
    (["ms_swift-swift-train.jsonl", "https://example.com/rows.jsonl"], True),  # beside remote rows
])
def test_earlier_exports_read_together_are_refused_only_when_they_repeat_rows(names, refused, tmp_path):
    from tooluse_datasets.commands.export import _refuse_reading_earlier_exports

    local = [name for name in names if "://" not in name]
    for name in local:
        (tmp_path / name).write_text("{}\n")
    read = [str(tmp_path / name) if name in local else name for name in names]
    if refused:
        with pytest.raises(ValueError, match="an earlier export of ms_swift"):
            _refuse_reading_earlier_exports(read, tmp_path, "ms_swift")
    else:
        _refuse_reading_earlier_exports(read, tmp_path, "ms_swift")


@pytest.mark.parametrize("command", [["stats"], ["validate"], ["export", "--out", "{out}"]])
def test_a_skipped_rows_file_in_the_data_dir_is_refused_not_read_back_as_rows(command, tmp_path, capsys):
    folder = _input_folder(tmp_path)
    listing = folder / "skipped.jsonl"
    argv = [command[0], "ms_swift", "--option", f"data_dir={folder}", "--on-error", "skip",
            "--skipped-rows", str(listing), *[a.replace("{out}", str(tmp_path / "out")) for a in command[1:]]]
    listing.write_text('{"kept": "from the last run"}\n')
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--skipped-rows" in err and str(listing) in err and "data_dir" in err
    assert listing.read_text() == '{"kept": "from the last run"}\n' and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [
    ["stats"], ["validate"], ["export", "--out", "{out}"], ["mirror", "--out", "{out}"],
])
def test_a_skipped_rows_file_that_the_data_files_read_is_refused_not_read_back_as_rows(command, tmp_path, capsys):
    folder = _input_folder(tmp_path)
    listing = folder / "skipped.jsonl"
    argv = [command[0], "ms_swift", "--data-files", str(folder / "*.jsonl"), "--on-error", "skip",
            "--skipped-rows", str(listing), *[a.replace("{out}", str(tmp_path / "out")) for a in command[1:]]]
    listing.write_text('{"kept": "from the last run"}\n')
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--skipped-rows" in err and str(listing) in err
    assert listing.read_text() == '{"kept": "from the last run"}\n' and not (tmp_path / "out").exists()


@pytest.mark.parametrize("config", ["raw", "swift", "llamafactory"])
def test_show_id_in_a_format_whose_rows_carry_no_id_is_refused_not_reported_missing(config, capsys):
    """The row is there, but the format's rows have no id column to match: 'no id ... (6 rows)' after reading
    every row was wrong; the refusal says how to show it."""
    unified_id = next(iter(td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train",
                                   streaming=True)))["id"]
    assert main(["show", "ms_swift", "--sample", "--config", config, "--id", unified_id]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: ")
    assert f"--config {config}" in captured.err and "--config unified" in captured.err and "--row" in captured.err


def test_show_id_finds_the_row_in_a_format_that_carries_the_unified_id(capsys):
    assert main(["show", "toolmind", "--sample", "--config", "toolmind", "--id", "toolmind/When2Call/17"]) == 0
    assert '"id": "toolmind/When2Call/17"' in capsys.readouterr().out


@pytest.mark.parametrize("argv, verbose", [
    (["stats", "ms_swift", "--sample"], False),
    (["-v", "stats", "ms_swift", "--sample"], True),
    (["stats", "ms_swift", "--sample", "-v"], True),       # where a user adds it to rerun, as a bug's error asks
    (["show", "ms_swift", "--verbose", "--sample"], True),
])
def test_verbose_is_taken_before_or_after_the_subcommand(argv, verbose, capsys):
    from tooluse_datasets.cli import build_parser

    assert build_parser().parse_args(argv).verbose is verbose
    assert main(argv) == 0
    assert "ms_swift" in capsys.readouterr().out


@pytest.mark.parametrize("argv, option", [
    (["export", "ms_swift", "--sample", "--out", ""], "--out"),
    (["export", "ms_swift", "--sample", "--out", "o", "--skipped-rows", ""], "--skipped-rows"),
    (["stats", "ms_swift", "--sample", "--plots", ""], "--plots"),
    (["stats", "ms_swift", "--sample", "--skipped-rows", ""], "--skipped-rows"),
    (["validate", "ms_swift", "--sample", "--skipped-rows", ""], "--skipped-rows"),
    (["mirror", "ms_swift", "--sample", "--out", ""], "--out"),
    (["mirror", "ms_swift", "--sample", "--out", "o", "--skipped-rows", ""], "--skipped-rows"),
    (["verify", "nestful", "--sample", "--expect-failures", ""], "--expect-failures"),
    (["verify", "nestful", "--sample", "--executable-functions", ""], "--executable-functions"),
    (["score", "nestful", "r.jsonl", "--sample", "--executable-functions", ""], "--executable-functions"),
    (["publish", "", "--repo-id", "org/x", "--dry-run"], "DIR"),
    # datasets' "Unable to find '<folder>/'" for the current folder, or a bare FileNotFoundError for ''
    (["export", "ms_swift", "--data-files", "", "--out", "o"], "--data-files"),
    (["validate", "all", "--data-files", ""], "--data-files"),
    (["verify", "nestful", "--data-files", ""], "--data-files"),
    (["score", "nestful", "", "--sample"], "RESULT.jsonl"),
    (["score", "nestful", "r.jsonl", "--gold-data-files", ""], "--gold-data-files"),
    # datasets' "Bad split: ." once the files were resolved
    (["export", "ms_swift", "--sample", "--split", "", "--out", "o"], "--split"),
    (["stats", "ms_swift", "--sample", "--split", ""], "--split"),
])
def test_an_empty_path_is_a_usage_error_not_no_file_or_the_current_folder(argv, option, tmp_path, monkeypatch,
                                                                          capsys):
    """`--out "$OUT"` with OUT unset: the export went to the current folder, the skipped rows, plots and expected
    failures were silently not written or read, publish published the mirrors of the current folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and "empty" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["export", "ms_swift", "--sample", "--out", "o"], ["stats", "ms_swift", "--sample"],
    ["validate", "ms_swift", "--sample"], ["show", "ms_swift", "--sample"],
    ["mirror", "ms_swift", "--sample", "--out", "o"],
])
def test_a_split_slice_is_a_usage_error_saying_the_commands_read_whole_splits(argv, tmp_path, monkeypatch, capsys):
    """`--split 'train[:2]'`: export, stats and show advised .skip(n) / .take(n), which no command has; validate and
    mirror said there is no split 'train[:2]', as if the name were misspelt."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--split", "train[:2]"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --split: takes split names" in err and "not a slice: got 'train[:2]'" in err
    assert ".take(n)" not in err and "no split" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["export", "nestful", "--sample", "--out", "o"], ["stats", "nestful", "--sample"],
    ["validate", "nestful", "--sample"], ["show", "nestful", "--sample"],
    ["mirror", "nestful", "--sample", "--out", "o"],
])
def test_a_split_named_twice_is_a_usage_error_naming_the_option(argv, tmp_path, monkeypatch, capsys):
    """`--split train+train` was refused in load()'s terms (`split='train+train' names a split more than once`),
    naming no option of the command, after the files were resolved."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--split", "train + train"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --split: names 'train' more than once in 'train + train'" in err and "split=" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["export", "toolmind", "--sample", "--out", "o"], ["stats", "toolmind", "--sample"],
    ["validate", "toolmind", "--sample"], ["show", "toolmind", "--sample"],
    ["mirror", "toolmind", "--sample", "--out", "o"],
])
@pytest.mark.parametrize("split", ["synthetic+", "+synthetic", "synthetic++When2Call"])
def test_a_split_with_an_empty_name_between_its_plus_signs_is_a_usage_error(argv, split, tmp_path, monkeypatch,
                                                                            capsys):
    """`--split "synthetic+$MORE"` with MORE unset: export, stats and show said datasets' "Bad split", validate and
    mirror "no split ''"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--split", split])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --split: takes split names joined by + (train, or a+b to read both): {split!r} has an empty " \
           f"one" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, wanted", [
    (["mirror", "ms_swift", "--sample", "--out", "o", "--revision", ""], "a branch, tag or commit"),
    (["publish", "o", "--repo-id", "org/x", "--dry-run", "--revision", ""], "a branch, got"),
])
def test_an_empty_revision_is_a_usage_error_not_another_revision(argv, wanted, tmp_path, monkeypatch, capsys):
    """`--revision "$REV"` with REV unset: mirror resolved NESTFUL's `main` instead of its pinned commit. publish
    takes a branch only (a tag or commit is refused), but its usage error asked for a branch, tag or commit."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --revision: expected {wanted}" in err and "empty" in err
    assert list(tmp_path.iterdir()) == []


def _with_closed(fd: int, argv: list[str], cwd):
    """The command run with standard output (1) or error (2) closed, as `>&-` or `2>&-` leave them."""
    import subprocess
    import sys

    return subprocess.run(["sh", "-c", f'exec "$@" {fd}>&-', "sh", sys.executable, "-m", "tooluse_datasets.cli",
                           *argv], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_a_closed_standard_error_does_not_make_the_command_fail(tmp_path):
    """Standard error closed (2>&-, a daemon): the progress check on it was 'unexpected AttributeError ... (a
    bug)', and that line went to standard output. The command runs; a failure is told by the exit status."""
    import json

    done = _with_closed(2, ["stats", "ms_swift", "--sample"], tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["train"]["rows"] == _rows("ms_swift", "train")
    failed = _with_closed(2, ["stats", "ms_swift", "--data-files", "missing.jsonl"], tmp_path)
    assert failed.returncode == 2 and failed.stdout == ""


def test_a_closed_standard_output_is_refused_before_the_command_runs(tmp_path):
    """Standard output closed (>&-): the command ran, its output went nowhere, then 'unexpected AttributeError'."""
    done = _with_closed(1, ["export", "ms_swift", "--sample", "--out", "out"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert "standard output is closed" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["demo", "--source", "ms_swift", "ms_swift"],
                                  ["demo", "--source", "ms_swift", "--source", "nestful", "--source", "ms_swift"],
                                  ["mirror", "ms_swift", "ms_swift", "--sample", "--configs", "unified"]])
def test_a_source_named_twice_is_a_usage_error_not_read_twice(argv, tmp_path, capsys):
    """``mirror ms_swift ms_swift`` built the same mirror twice and ``demo --source ms_swift ms_swift`` showed it
    twice."""
    out = ["--out", str(tmp_path / "m")] if argv[0] == "mirror" else []
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, *out])
    assert exit_info.value.code == 2 and "names ms_swift more than once" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("sources", [["all", "nestful"], ["nestful", "all"]])
def test_demo_of_all_beside_a_source_says_to_give_all_alone(sources, capsys):
    """``demo --source all nestful`` showed every source, then nestful's rows a second time (as mirror refuses it)."""
    assert main(["demo", "--source", *sources]) == 2
    out, err = capsys.readouterr()
    assert "'all' names every source: give it alone" in err and out == ""


@pytest.mark.parametrize("content", ["", "\n\n", "[]"])
def test_validate_of_data_without_rows_fails_as_verify_does(content, tmp_path, capsys):
    """An empty file validated 0 rows and exited 0: a CI gate on an accidentally emptied file passed. Nothing
    checked is no pass (verify already said so)."""
    path = tmp_path / ("empty.json" if content == "[]" else "empty.jsonl")
    path.write_text(content)
    assert main(["validate", "ms_swift", "--data-files", str(path)]) == 1
    assert "holds no rows: nothing was validated" in capsys.readouterr().err
    assert main(["validate", "ms_swift", "--sample"]) == 0  # rows, none failing: a pass as before


@pytest.mark.parametrize("content, why", [("", "the data holds no rows"),
                                          ('{"messages": [\n[1]\n', "the reader skipped every row (2 read)")])
def test_validate_of_nothing_checked_says_failed_in_its_table_and_json_too(content, why, tmp_path, capsys):
    """With no row checked the exit status was 1 while the table ended "PASSED" and the JSON said
    "failed": false, "failures": {} (a CI step reading the JSON passed). Rows all unreadable with --fail-on
    error (read errors not chosen) passed outright: no rule checked a row either."""
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    assert main(["validate", "ms_swift", "--data-files", str(path), "--fail-on", "error"]) == 1
    captured = capsys.readouterr()
    assert captured.out.rstrip().splitlines()[-1] == f"FAILED (fail on error): {why}: nothing was validated"
    assert f"error: {why}: nothing was validated" in captured.err
    assert main(["validate", "ms_swift", "--data-files", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["failed"] is True and report["nothing_checked"] == f"{why}: nothing was validated"
    result = td.validate("ms_swift", data_files=str(path))
    assert result.failed and result.nothing_checked == report["nothing_checked"]
    assert main(["validate", "ms_swift", "--sample", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["failed"] is False and report["nothing_checked"] is None


def _help_defaults_missing() -> list[str]:
    """Every option of every subcommand whose default (a value the user gets without giving the option) its
    --help text does not state, as ``command --option: default``."""
    import argparse

    from tooluse_datasets.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = []
    for name, sub in sorted(commands.items()):
        for action in sub._actions:
            default = action.default
            # (None, False: nothing given; an empty list: a repeatable option given no times; SUPPRESS: not set)
            if action.help in (None, argparse.SUPPRESS) or default in (None, False, argparse.SUPPRESS, []):
                continue
            text = sub._get_formatter()._expand_help(action)
            values = default if isinstance(default, (list, tuple)) else [default]
            stated = "default" in text and all(
                str(value) in text.partition("default")[2]
                or (isinstance(value, float) and f"{value:g}" in text.partition("default")[2]) for value in values)
            if not stated:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}: {default!r}")
    return missing


def test_every_option_with_a_default_states_it_in_its_help():
    assert _help_defaults_missing() == []


def test_help_states_the_default_as_the_user_reads_it(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert "(default: unified)" in " ".join(capsys.readouterr().out.split())  # (as wrapped to the width)


def test_help_states_the_exit_statuses_a_script_tests_for(capsys):
    from tooluse_datasets.cli import EXIT_BROKEN_PIPE, EXIT_TERMINATED

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    statuses = help_text.partition("exit status:")[2]
    for status in (0, 1, 2, 130, EXIT_TERMINATED, EXIT_BROKEN_PIPE):
        assert f" {status} " in f" {statuses}", status


@pytest.mark.parametrize("command", ["export", "stats", "validate", "show", "mirror"])
def test_split_help_does_not_name_all_as_its_default(command, capsys):
    """--split said "(default: all)", but --split all reads the union of the splits as one (export writes one
    <source>-<format>-all.jsonl, mirror refuses it), where leaving it out reads every split on its own."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    options = " ".join(capsys.readouterr().out.split()).partition("options:")[2]
    described = options.partition("--split SPLIT ")[2].partition(" --")[0]
    assert "default: all" not in described and "a+b" in described and "every split" in described, described


@pytest.mark.parametrize("command, option, names", [
    ("show", "--config", ["unified", "raw", "swift", "toolmind", "llamafactory"]),
    ("demo", "--source", list(td.SOURCES)),
])
def test_an_option_that_takes_a_name_lists_the_names_in_its_help(command, option, names, capsys):
    """show --config said "format to show" and demo --source gave two examples: the names were in the README only."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    options = " ".join(capsys.readouterr().out.split()).partition("options:")[2]
    described = options.partition(f"{option} ")[2].partition(" --")[0]
    assert all(name in described for name in names), described


def test_verify_help_does_not_promise_an_offline_sample(tmp_path, capsys):
    """verify --sample fetches the executable functions the sample's rows call, as a run without it does: its
    help said "(offline)", and the run went to the network (error: cannot fetch the executable functions)."""
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    sample = help_text.partition("--sample ")[2].partition(" --")[0]
    assert "offline" not in sample and "--executable-functions" in help_text.partition("--sample ")[2]


def _demo_stderr(tmp_path, terminal: bool = False, **env_vars) -> str:
    """``demo --source nestful`` in a fresh process with a fresh datasets cache (so that a split is prepared, the
    step datasets draws a bar for); its standard error read from a pipe, or from a terminal (a pty)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.endswith("_DISABLE_PROGRESS_BARS")}
    env.update(HF_DATASETS_CACHE=str(tmp_path / "cache"), **env_vars)
    command = [sys.executable, "-m", "tooluse_datasets.cli", "demo", "--source", "nestful"]
    if not terminal:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stderr.decode()
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # (0 columns: bars cut to nothing)
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower, env=env) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end closed: the process ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=300) == 0
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_library_progress_bars_are_drawn_on_a_terminal_only(tmp_path):
    """datasets' tqdm bars ("Generating train split: ...") went to standard error whatever it was: a CI log or a
    `2> file` got every update."""
    assert "examples/s" not in _demo_stderr(tmp_path / "pipe")
    assert "Generating train split" in _demo_stderr(tmp_path / "terminal", terminal=True)
    # the usual switches still decide: forced on in a pipe, off on a terminal
    assert "Generating train split" in _demo_stderr(tmp_path / "forced", HF_DATASETS_DISABLE_PROGRESS_BARS="0")
    assert "examples/s" not in _demo_stderr(tmp_path / "off", terminal=True, HF_DATASETS_DISABLE_PROGRESS_BARS="1")


def test_a_command_run_in_process_leaves_the_progress_bar_setting_as_it_was(capsys):
    import datasets

    assert datasets.is_progress_bar_enabled()
    assert main(["stats", "nestful", "--sample"]) == 0
    assert datasets.is_progress_bar_enabled()


@pytest.mark.parametrize("command", [["export", "--out", "OUT"], ["validate"]])
def test_a_file_that_cannot_be_read_at_all_is_listed_without_a_row_number(command, tmp_path, capsys):
    """A whole-file failure has no row: the skipped-row lines of export and validate said "row None"."""
    from conftest import shared_data

    mislabelled = tmp_path / "rows.parquet"  # JSON Lines under a Parquet name: the file is refused as a whole
    mislabelled.write_bytes(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_bytes())
    argv = [str(tmp_path / "out") if arg == "OUT" else arg for arg in command]
    assert main([argv[0], "ms_swift", "--data-files", str(mislabelled), "--on-error", "skip", *argv[1:]]) == 1
    out = capsys.readouterr().out
    assert "row None" not in out
    assert f"{mislabelled} field '<file>': file cannot be read as Parquet" in out


@pytest.mark.parametrize("argv, option, kind", [
    (["export", "ms_swift", "--sample", "--out", "{file}"], "--out", "is a file: give a folder"),
    (["export", "ms_swift", "--sample", "--out", "{file}/out"], "--out", "cannot be made"),
    pytest.param(["stats", "ms_swift", "--sample", "--plots", "{file}"], "--plots", "is a file: give a folder",
                 marks=pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                          reason="--plots needs the plots extra (matplotlib): without it --plots is "
                                                 "refused for that first")),
    (["export", "ms_swift", "--sample", "--out", "{dir}/out", "--skipped-rows", "{dir}"], "--skipped-rows",
     "is a folder: give a file"),
    (["export", "ms_swift", "--sample", "--out", "{dir}/out", "--skipped-rows", "{file}/skipped.jsonl"],
     "--skipped-rows", "cannot be made"),
    (["stats", "ms_swift", "--sample", "--skipped-rows", "{dir}"], "--skipped-rows", "is a folder: give a file"),
    (["validate", "ms_swift", "--sample", "--skipped-rows", "{dir}"], "--skipped-rows", "is a folder: give a file"),
    (["mirror", "ms_swift", "--sample", "--out", "{dir}/mirrors", "--skipped-rows", "{dir}"], "--skipped-rows",
     "is a folder: give a file"),
    # a --skipped-rows file at the folder an output makes, or above it, neither there yet
    (["export", "ms_swift", "--sample", "--out", "{dir}/new", "--skipped-rows", "{dir}/new"], "--skipped-rows",
     "is a folder --out"),
    (["mirror", "ms_swift", "--sample", "--out", "{dir}/new/mirrors", "--skipped-rows", "{dir}/new"],
     "--skipped-rows", "is a folder --out"),
    pytest.param(["stats", "ms_swift", "--sample", "--plots", "{dir}/new", "--skipped-rows", "{dir}/new"],
                 "--skipped-rows", "is a folder --plots",
                 marks=pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                          reason="--plots needs the plots extra (matplotlib)")),
])
def test_an_output_of_the_wrong_kind_is_refused_naming_its_argument_before_any_row_is_read(argv, option, kind,
                                                                                          tmp_path, capsys):
    """An --out or --plots that is a file, a --skipped-rows that is a folder: the system's "File exists" or "Is a
    directory" named no argument, and mirror found the folder only after converting every row, leaving its
    staging folder behind."""
    (tmp_path / "a-file").write_text("")
    argv = [arg.format(file=tmp_path / "a-file", dir=tmp_path) for arg in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: ValueError: {option} ") and kind in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing made, nothing left behind


@pytest.mark.parametrize("name", ["ms_swift-llamafactory-train.jsonl", "ms_swift-llamafactory-train.jsonl.partial",
                                  "dataset_info.json"])
def test_export_refuses_a_skipped_rows_file_that_is_one_of_its_outputs(name, tmp_path, capsys):
    """--skipped-rows naming a file --out writes: the skipped rows went to a file the export then replaced with its
    rows (lost, while the summary pointed at that file), and an existing dataset_info.json was emptied."""
    out = tmp_path / "lf"
    out.mkdir()
    (out / "dataset_info.json").write_text('{"kept": {"file_name": "kept.jsonl"}}\n')
    argv = ["export", "ms_swift", "--sample", "--format", "llamafactory", "--on-error", "skip", "--out", str(out),
            "--skipped-rows", str(out / name)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ValueError: --skipped-rows ") and "a file --out writes" in captured.err
    # the output is named apart only where the file is another name of it (it said "'x' is 'x'")
    assert (f"(as '{out / 'ms_swift-llamafactory-train.jsonl'}')" in captured.err) == name.endswith(".partial"), \
        captured.err
    assert sorted(p.name for p in out.iterdir()) == ["dataset_info.json"]
    assert (out / "dataset_info.json").read_text() == '{"kept": {"file_name": "kept.jsonl"}}\n'


def test_export_refuses_a_skipped_rows_file_hard_linked_to_its_dataset_info(tmp_path, capsys):
    """A hard link has a real path of its own: --skipped-rows as a second name of dataset_info.json was emptied
    for the skipped rows, then read back as the registry."""
    out = tmp_path / "lf"
    out.mkdir()
    (out / "dataset_info.json").write_text('{"kept": {"file_name": "kept.jsonl"}}\n')
    os.link(out / "dataset_info.json", tmp_path / "skipped.jsonl")
    argv = ["export", "ms_swift", "--sample", "--format", "llamafactory", "--on-error", "skip", "--out", str(out),
            "--skipped-rows", str(tmp_path / "skipped.jsonl")]
    assert main(argv) == 2
    assert "a file --out writes" in capsys.readouterr().err
    assert (out / "dataset_info.json").read_text() == '{"kept": {"file_name": "kept.jsonl"}}\n'


def test_an_earlier_export_read_through_a_hard_link_beside_other_files_is_refused(tmp_path):
    from tooluse_datasets.commands.export import _refuse_reading_earlier_exports

    out = tmp_path / "out"
    out.mkdir()
    (out / "ms_swift-swift-train.jsonl").write_text("{}\n")
    os.link(out / "ms_swift-swift-train.jsonl", tmp_path / "linked.jsonl")
    (tmp_path / "rows.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="an earlier export of ms_swift"):
        _refuse_reading_earlier_exports([str(tmp_path / "linked.jsonl"), str(tmp_path / "rows.jsonl")], out,
                                        "ms_swift")


def _rows_then_a_cut_row(tmp_path):
    """Real ms-swift rows, then one of them cut in half (a file truncated mid-write): a bad row under
    --on-error raise."""
    from conftest import shared_data

    real = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text(encoding="utf-8")
    last = real.strip().splitlines()[-1]
    path = tmp_path / "agent.jsonl"
    path.write_text(real.rstrip("\n") + "\n" + last[: len(last) // 2] + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("argv, made", [
    (["export", "ms_swift", "--out", "{tmp}/out/nested"], "out"),
    (["stats", "ms_swift", "--plots", "{tmp}/plots/nested"], "plots"),
    (["mirror", "ms_swift", "--on-error", "raise", "--configs", "unified", "--out", "{tmp}/mirror/nested"], "mirror"),
])
def test_a_run_that_fails_on_a_bad_row_leaves_no_empty_output_folder_it_made(argv, made, tmp_path, capsys):
    """The output folder (and its missing parents) was made before the first row was read: a run stopped by a
    bad row left it behind, empty, as if an export had written nothing there."""
    if made == "plots":
        pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    data = _rows_then_a_cut_row(tmp_path)
    argv = [arg.format(tmp=tmp_path) for arg in argv]
    assert main([*argv, "--data-files", str(data)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: ms_swift, {data}, row ") and "field '<line>'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.jsonl"]
    kept = tmp_path / made
    kept.mkdir()  # a folder that was there stays, empty or not
    assert main([*argv, "--data-files", str(data)]) == 2
    assert kept.is_dir() and not (kept / "nested").exists()


def test_an_export_interrupted_before_its_first_file_leaves_no_output_folder(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the first split was written left the output folder it had made, empty."""
    from tooluse_datasets.commands import export

    def interrupted(rows, what):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "progress", interrupted)
    assert main(["export", "ms_swift", "--sample", "--out", str(tmp_path / "out")]) == 130
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_a_class_is_created_is_an_interrupt_not_a_bug(tmp_path, monkeypatch, capsys):
    """Ctrl-C while a command imported its modules said "unexpected RuntimeError: Error calling __set_name__ ...
    (a bug: ...)" and exit status 2: Python < 3.12 wraps an interrupt raised as a class is made (dataclass
    fields) in a RuntimeError. It is the interrupt it was: status 130, nothing printed."""
    from tooluse_datasets.commands import export

    class Interrupting:
        def __set_name__(self, owner, name):
            raise KeyboardInterrupt  # where the signal landed

    def interrupted(rows, what):
        type("Importing", (), {"field": Interrupting()})

    monkeypatch.setattr(export, "progress", interrupted)
    assert main(["export", "ms_swift", "--sample", "--out", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("row", ["0", "1"])
def test_show_refuses_row_and_id_together_row_0_too(row, capsys):
    """argparse takes a value equal to the default as not given: `--row 0 --id X` passed the group that excludes
    them and showed the row with id X, --row dropped without a word (`--row 1 --id X` was refused)."""
    with pytest.raises(SystemExit) as info:
        main(["show", "ms_swift", "--sample", "--row", row, "--id", "ms_swift/agent_rows/1"])
    assert info.value.code == 2
    assert "argument --id: not allowed with argument --row" in capsys.readouterr().err


def test_show_without_row_or_id_shows_the_first_row(capsys):
    assert main(["show", "ms_swift", "--sample"]) == 0
    assert capsys.readouterr().out.startswith("ms_swift/agent_rows/0 ")


def test_an_export_stopped_by_sigterm_cleans_up_as_an_interrupted_one(tmp_path):
    """SIGTERM (`timeout`, `kill`, a job runner) ended the process on the spot: the split being written stayed
    in --out as a .partial file. It now stops the command as Ctrl-C does: nothing left, exit status 143."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import shared_data

    rows = [line for line in shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    data = tmp_path / "agent.jsonl"
    data.write_text("\n".join(rows * 3000) + "\n", encoding="utf-8")  # long enough to be stopped midway
    out = tmp_path / "out"
    partial = out / "ms_swift-unified-train.jsonl.partial"
    with subprocess.Popen([sys.executable, "-m", "tooluse_datasets.cli", "export", "ms_swift", "--data-files",
                           str(data), "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as run:
        deadline = time.monotonic() + 120
        while not (partial.exists() and partial.stat().st_size) and run.poll() is None:
            assert time.monotonic() < deadline, "the export wrote nothing in 120 s"
            time.sleep(0.05)
        assert run.poll() is None, "the export ended before it could be stopped"
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=120) == 143, run.stderr.read()
    assert not out.exists()  # no .partial file, nor the folder the run made


def test_a_folder_as_the_expected_failures_list_is_refused_naming_the_argument(tmp_path, capsys):
    """open() said "IsADirectoryError: Is a directory", naming no argument."""
    assert main(["verify", "nestful", "--sample", "--expect-failures", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"error: ValueError: --expect-failures {str(tmp_path)!r} is a folder: give the list "
                            f"file (one id a line)\n")


@pytest.mark.parametrize("command, argument", [(["score", "nestful", "--sample", "{}"], "RESULT.jsonl"),
                                               (["verify", "nestful", "--sample", "--expect-failures", "{}"],
                                                "--expect-failures")])
def test_a_missing_or_folder_input_file_is_refused_naming_the_argument(command, argument, tmp_path, capsys):
    """A missing file was a bare "FileNotFoundError: [Errno 2] ...", and score's folder "file cannot be read
    (IsADirectoryError ...)": neither named the argument."""
    for path, said in ((tmp_path / "missing.txt", "does not exist"), (tmp_path, "is a folder")):
        assert main([part.format(path) for part in command]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: ValueError: {argument} {str(path)!r} {said}: give the ") and err.count("\n") == 1


@pytest.mark.parametrize("command", [["mirror", "nestful", "--sample", "--out"],
                                     ["export", "ms_swift", "--sample", "--format", "llamafactory", "--on-error",
                                      "skip", "--out"]])
def test_skipped_rows_help_names_every_field_of_the_records_written(command, tmp_path, capsys):
    """The help lists the fields of a skipped-rows record; `mirror --help` left out `source` and `error`, which
    its records have (bundled rows that the format cannot hold are skipped: NESTFUL's calls without results in
    toolmind, ms-swift's text beside calls in llamafactory)."""
    import json
    import re

    listing = tmp_path / "skipped.jsonl"
    assert main([*command, str(tmp_path / "out"), "--skipped-rows", str(listing)]) == 0
    fields = set().union(*(json.loads(line) for line in listing.read_text().splitlines()))
    assert fields
    with pytest.raises(SystemExit):
        main([command[0], "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    listed = re.search(r"one JSON object per line \(([^)]*)\)", help_text).group(1)
    assert {f.strip() for f in listed.split(",")} == fields


def test_export_drop_trailing_results_writes_rows_ending_on_results_as_the_python_helper_does(tmp_path, capsys):
    """ms-swift's documentation rows 0, 2 and 3 end on tool results, which the llamafactory writer refuses (the
    refusal names the option); with --drop-trailing-results the export writes each row as
    ``td.drop_trailing_results`` then the writer make it: row 0 ends on its call turn, the rows not ending on
    results are as a plain export writes them, and rows still refused (text beside calls in rows 1 and 2; row 3's
    last result held one of its two <image> tags) are skipped, named by their file, row and input field as every
    other export error is (raised alike, without --on-error skip)."""
    from conftest import shared_data
    from tooluse_datasets.builders.llamafactory.writer import unified_to_llamafactory

    path = str(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))
    export = ["export", "ms_swift", "--data-files", path, "--format", "llamafactory"]
    assert main([*export, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert "row 0, field 'messages[2]'" in err and "ends on tool results" in err and "--drop-trailing-results" in err

    unified = list(td.load("ms_swift", data_files=path, split="train", streaming=True))
    assert [row["messages"][-1]["role"] == "tool" for row in unified] == [True, False, True, True, False, False, False]
    expected = []
    for row in unified:
        try:
            expected.append(unified_to_llamafactory(td.drop_trailing_results(row)))
        except td.ConversionError:
            continue
    listing = tmp_path / "skipped.jsonl"
    out = tmp_path / "trimmed"
    assert main([*export, "--drop-trailing-results", "--on-error", "skip", "--out", str(out),
                 "--skipped-rows", str(listing)]) == 0
    written = [json.loads(line) for line in (out / "ms_swift-llamafactory-train.jsonl").read_text().splitlines()]
    assert written == json.loads(json.dumps(expected)) and len(written) == 4
    assert written[0]["conversations"][-1]["from"] == "function_call"  # row 0, its calls kept
    skipped = [json.loads(line) for line in listing.read_text().splitlines()]
    # (the fields as read: row 2's text beside its call is in its first message, an Anthropic-style content list)
    assert [(r["file"], r["row"], r["field"], r["source"]) for r in skipped] == \
        [(path, 1, "messages[1].content", "ms_swift"), (path, 2, "messages[0].content", "ms_swift"),
         (path, 3, "images", "ms_swift")]
    assert f"{path} row 3 field 'images'" in capsys.readouterr().out
    alone = tmp_path / "row3.jsonl"
    alone.write_text(open(path).read().splitlines()[3] + "\n")
    assert main(["export", "ms_swift", "--data-files", str(alone), "--format", "llamafactory",
                 "--drop-trailing-results", "--out", str(tmp_path / "raised")]) == 2
    assert f"{alone}, row 0, field 'images': 2 images but 1 <image> tag in" in capsys.readouterr().err

    plain = tmp_path / "plain"
    assert main([*export, "--on-error", "skip", "--out", str(plain)]) == 0
    assert (plain / "ms_swift-llamafactory-train.jsonl").read_text().splitlines() == \
        (out / "ms_swift-llamafactory-train.jsonl").read_text().splitlines()[1:]  # the rows not ending on results
    assert json.loads((plain / "dataset_info.json").read_text()) == json.loads((out / "dataset_info.json").read_text())


def test_export_drop_trailing_results_is_refused_for_formats_other_than_llamafactory(tmp_path, capsys):
    """Only the llamafactory writer refuses rows that end on results: the option elsewhere is a usage error."""
    assert main(["export", "ms_swift", "--sample", "--format", "swift", "--drop-trailing-results",
                 "--out", str(tmp_path / "out")]) == 2
    assert "--drop-trailing-results applies to --format llamafactory only" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    # (the source option it sets is the command's own argument)
    assert main(["export", "ms_swift", "--sample", "--format", "llamafactory", "--option", "trailing_results=drop",
                 "--out", str(tmp_path / "out")]) == 2
    assert "give --drop-trailing-results" in capsys.readouterr().err


def test_stats_works_out_its_data_files_once_whatever_the_number_of_splits(monkeypatch, capsys):
    """stats worked out (and checked) its input's data files again for the load and for each split's validation
    counter: nine times for ToolMind's seven splits."""
    from tooluse_datasets.commands import stats as stats_command

    calls = []
    monkeypatch.setattr(stats_command, "data_files_for",
                        lambda *args, _found=stats_command.data_files_for: calls.append(args) or _found(*args))
    assert main(["stats", "toolmind", "--sample"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 7
    assert len(calls) == 1


def test_an_existing_data_file_named_with_brackets_is_no_glob_to_the_checks_of_outputs(tmp_path, capsys):
    """load() reads an existing 'rows[1].jsonl' as named, but the checks before any row read it as a glob matching
    rows1.jsonl: a --skipped-rows file of that name was refused as one of the run's inputs."""
    sample = td.sample_files("nestful")["train"][0]
    (tmp_path / "rows[1].jsonl").write_bytes(open(sample, "rb").read())
    (tmp_path / "rows1.jsonl").write_text("an earlier run's skipped rows\n")
    out, skipped = tmp_path / "out", tmp_path / "rows1.jsonl"
    assert main(["export", "nestful", "--data-files", str(tmp_path / "rows[1].jsonl"), "--out", str(out),
                 "--skipped-rows", str(skipped)]) == 0
    assert "reads as input" not in capsys.readouterr().err
    rows = sum(1 for _ in td.load("nestful", data_files=sample, split="train", streaming=True))
    assert len((out / "nestful-unified-train.jsonl").read_text().splitlines()) == rows
    assert skipped.read_text() == ""  # (emptied: no row skipped)


@pytest.mark.skipif(importlib.util.find_spec("fcntl") is None, reason="no advisory file locks on this system")
def test_an_export_of_a_split_another_export_into_the_folder_is_writing_is_refused_not_mixed(tmp_path, capsys):
    """Two exports of one split into one --out wrote the same .partial file at once: each emptied and overwrote
    the other's lines, and the first to end renamed the mix to the final name and removed the file under the other."""
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    partial = out / "nestful-unified-train.jsonl.partial"
    with open(partial, "wb") as other:  # another export, midway through the split
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        other.write(b'{"other": "run"}\n')
        other.flush()
        assert main(["export", "nestful", "--sample", "--out", str(out)]) == 2
        captured = capsys.readouterr()
        assert "is being written by another export of this split" in captured.err and "rows" not in captured.out
        assert partial.read_bytes() == b'{"other": "run"}\n' and not (out / "nestful-unified-train.jsonl").exists()
    # a .partial file no run holds (a killed run's) is taken over
    assert main(["export", "nestful", "--sample", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["nestful-unified-train.jsonl"]
    assert len((out / "nestful-unified-train.jsonl").read_text().splitlines()) == _rows("nestful", "train")


@pytest.mark.parametrize("reads", ["--data-files", "data_dir"])
def test_an_earlier_export_in_the_input_folder_is_refused_with_out_elsewhere(reads, tmp_path, capsys):
    """Earlier exports were looked for in --out only: `--format raw --out DATA`, then `--data-files 'DATA/*.jsonl'
    --out elsewhere/` read the raw export beside the file it was made from, writing every row twice."""
    folder = _input_folder(tmp_path)
    assert main(["export", "ms_swift", "--data-files", str(folder / "agent.jsonl"), "--format", "raw",
                 "--out", str(folder), "--on-error", "skip"]) == 0
    earlier = folder / "ms_swift-raw-train.jsonl"
    capsys.readouterr()
    given = ["--data-files", str(folder / "*.jsonl")] if reads == "--data-files" else ["--option", f"data_dir={folder}"]
    out = tmp_path / "elsewhere"
    assert main(["export", "ms_swift", *given, "--format", "swift", "--out", str(out), "--on-error", "skip"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{os.path.realpath(earlier)!r} is an earlier export of ms_swift" in captured.err
    assert not out.exists()
    # read alone, or beside files of another folder (other rows), it is converted
    other = tmp_path / "other.jsonl"
    other.write_bytes((folder / "agent.jsonl").read_bytes())
    assert main(["export", "ms_swift", "--data-files", str(earlier), str(other), "--format", "swift",
                 "--out", str(out), "--on-error", "skip"]) == 0
    assert (out / "ms_swift-swift-train.jsonl").read_text().count("\n") == 2 * earlier.read_text().count("\n") > 0


@pytest.mark.skipif(importlib.util.find_spec("fcntl") is None, reason="no advisory file locks on this system")
def test_an_export_that_opened_the_partial_file_as_another_export_ended_leaves_that_export_whole(tmp_path,
                                                                                                 monkeypatch, capsys):
    """An export that opened the .partial file just before the export holding it ended got its lock once that one
    had renamed the file to the final name: it emptied that complete export and wrote its own rows into it."""
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    partial, final = out / "nestful-unified-train.jsonl.partial", out / "nestful-unified-train.jsonl"
    other = open(partial, "wb")  # another export, at its last row
    fcntl.flock(other.fileno(), fcntl.LOCK_EX)
    other.write(b'{"other": "run"}\n')
    other.flush()
    lock = fcntl.flock

    def other_ends_first(fd, operation):  # (the other export ends between this one's open and its lock)
        number = fd if isinstance(fd, int) else fd.fileno()
        if not other.closed and os.fstat(number).st_ino == os.fstat(other.fileno()).st_ino:
            os.replace(partial, final)
            other.close()
        return lock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", other_ends_first)
    assert main(["export", "nestful", "--sample", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "was being written by another export of this split" in captured.err and "rows" not in captured.out
    assert final.read_bytes() == b'{"other": "run"}\n' and not partial.exists()


def test_one_source_reads_source_path_items_as_all_and_mirror_do(tmp_path, capsys):
    """`export nestful --data-files nestful=a.jsonl` (as `mirror nestful` takes it) looked for a file named
    'nestful=a.jsonl' and failed with "Unable to find"; an item of another source is refused, not read as rows."""
    nestful = td.sample_files("nestful")["train"]
    out = tmp_path / "out"
    assert main(["export", "nestful", "--data-files", *[f"nestful={p}" for p in nestful], "--out", str(out)]) == 0
    exported = (out / "nestful-unified-train.jsonl").read_text().splitlines()
    assert len(exported) == _rows("nestful", "train") == 5
    capsys.readouterr()
    ms_swift = td.sample_files("ms_swift")["train"][0]
    assert main(["stats", "nestful", "--data-files", f"nestful={nestful[0]}", f"ms_swift={ms_swift}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("error: ValueError: --data-files gives files of ms_swift (SOURCE=PATH items), but the "
                            "command reads nestful: give nestful's files\n")


def test_one_source_names_an_item_of_it_without_a_path(capsys):
    """`stats nestful --data-files nestful=` said "all reads each source's own files: give SOURCE=PATH items", of a
    command that reads one source and was given its item: the item's empty path is named."""
    assert main(["stats", "nestful", "--data-files", "nestful="]) == 2
    err = capsys.readouterr().err
    assert "--data-files 'nestful=' names no file of nestful" in err and "all reads" not in err


def test_one_source_reads_source_path_items_beside_plain_paths_in_their_order(tmp_path):
    """`export nestful --data-files nestful=a.jsonl b.jsonl` still read the item as a file named 'nestful=a.jsonl'
    ("Unable to find"): only a list of items alone was taken as that source's files."""
    from pathlib import Path

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    lines = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines(keepends=True)
    first.write_text("".join(lines[:2]))
    second.write_text("".join(lines[2:]))
    out = tmp_path / "out"
    assert main(["export", "nestful", "--data-files", f"nestful={first}", str(second), "--out", str(out)]) == 0
    mixed = (out / "nestful-unified-train.jsonl").read_text()
    assert main(["export", "nestful", "--data-files", str(first), str(second), "--out", str(tmp_path / "plain")]) == 0
    assert mixed == (tmp_path / "plain" / "nestful-unified-train.jsonl").read_text()
    assert len(mixed.splitlines()) == len(lines) == 3  # both files read, the item first


@pytest.mark.parametrize("command", ["export", "stats", "mirror"])
def test_an_output_folder_that_cannot_be_made_is_named_with_its_option_and_leaves_nothing(command, tmp_path, capsys):
    """A folder the system will not make (a name past its length limit, /proc/x) was the system's bare "File name
    too long" or "No such file or directory", naming no option, and the folders made above it were left behind."""
    if command == "stats":  # (without matplotlib, --plots is refused first for that)
        pytest.importorskip("matplotlib", reason="plots need the plots extra: pip install -e '.[plots]'")
    folder = tmp_path / "made" / ("a" * 300)
    option = "--plots" if command == "stats" else "--out"
    extra = ["--format", "swift"] if command == "export" else ["--configs", "unified"] if command == "mirror" else []
    assert main([command, "ms_swift", "--sample", *extra, option, str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: ValueError: {option} '{folder}' cannot be made: ") and len(err.splitlines()) == 1
    assert not (tmp_path / "made").exists()
    listing = tmp_path / "made" / ("a" * 300) / "skipped.jsonl"
    assert main(["export", "ms_swift", "--sample", "--out", str(tmp_path / "out"), "--skipped-rows", str(listing)]) == 2
    assert "the folder of --skipped-rows" in capsys.readouterr().err
    assert not (tmp_path / "made").exists() and not (tmp_path / "out").exists()


def test_a_mirror_listing_folder_that_cannot_be_made_is_refused_before_the_build_and_leaves_nothing(tmp_path, capsys):
    """mirror made the --skipped-rows folder only once every row was converted: one the system will not make was a
    bare "OSError: File name too long" after the whole pass, naming no option, its staging and --out left behind."""
    listing = tmp_path / "made" / ("a" * 300) / "skipped.jsonl"
    out = tmp_path / "out"
    assert main(["mirror", "ms_swift", "--sample", "--configs", "unified", "--out", str(out),
                 "--skipped-rows", str(listing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: ValueError: the folder of --skipped-rows '{listing.parent}' cannot be made: ")
    assert not (tmp_path / "made").exists() and not out.exists()
