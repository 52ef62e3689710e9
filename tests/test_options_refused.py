"""Names that are no source options are refused, not applied or ignored silently.

``load()`` took datasets' own ``BuilderConfig`` fields as options: ``name="raw"`` replaced the config argument (an
export ``--format swift --option name=raw`` wrote raw rows into ``nestful-swift-train.jsonl``), ``version=`` and
``description=`` were ignored. The mirror passed any ``--option`` to its builder: ``revision`` was given twice
(reported as a bug), others were ignored.
"""
from __future__ import annotations

import json

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.mirror import MirrorRequest, build_mirror


@pytest.mark.parametrize("name, value", [("name", "raw"), ("version", "9.9.9"), ("description", "mine")])
@pytest.mark.parametrize("streaming", [False, True])
def test_load_refuses_datasets_config_fields_as_options(name, value, streaming, cache_dir):
    with pytest.raises(ValueError, match=f"nestful has no option '{name}'; its options: batch_size"):
        td.load("nestful", data_files=td.sample_files("nestful"), split="train", streaming=streaming,
                cache_dir=cache_dir, **{name: value})


def test_an_export_with_option_name_writes_no_rows_of_another_format(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "nestful", "--sample", "--format", "swift", "--out", str(out),
                 "--option", "name=raw"]) == 2
    err = capsys.readouterr().err
    assert "nestful has no option 'name'" in err and "bug" not in err
    assert not (out / "nestful-swift-train.jsonl").exists()
    # the options the source has still work
    assert main(["export", "nestful", "--sample", "--format", "swift", "--out", str(out),
                 "--option", "batch_size=2"]) == 0
    first = json.loads((out / "nestful-swift-train.jsonl").read_text().splitlines()[0])
    assert set(first) == {"messages", "tools", "images", "audios", "videos"}


@pytest.mark.parametrize("option, message", [
    ("revision=abc", "--option revision: not a source option but an argument the command sets; give --revision"),
    # (load()'s num_proc, which other commands take as --option: mirror's processes are --num-proc)
    ("num_proc=2", "--option num_proc: not a source option but an argument the command sets; give --num-proc"),
    ("validate=error", "nestful has no option 'validate'; its options: batch_size"),
    ("name=raw", "nestful has no option 'name'; its options: batch_size"),
])
def test_mirror_refuses_what_is_no_source_option_in_one_line(option, message, tmp_path, capsys):
    assert main(["mirror", "nestful", "--sample", "--out", str(tmp_path / "m"), "--option", option]) == 2
    err = capsys.readouterr().err
    assert message in err and "bug" not in err and err.count("\n") == 1
    assert not (tmp_path / "m" / "nestful").exists()


def test_build_mirror_refuses_a_request_with_an_unknown_option(tmp_path):
    request = MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful"),
                            source_options={"revision": "abc"})
    with pytest.raises(ValueError, match="nestful has no option 'revision'"):
        build_mirror(request, tmp_path / "m")


@pytest.mark.parametrize("command, note", [
    (["export", "ms_swift", "--sample", "--out", "{out}"],
     "(--option also takes num_proc, validate, revision, cache_dir; trailing_results is --drop-trailing-results)"),
    (["stats", "ms_swift", "--sample"], "(--option also takes num_proc, validate, revision, cache_dir)"),
    (["validate", "ms_swift", "--sample"], "(--option also takes revision, cache_dir)"),
    (["mirror", "ms_swift", "--sample", "--out", "{out}"], "(--option takes the source's options only)"),
])
def test_an_unknown_option_on_the_command_line_lists_what_option_takes_there(command, note, tmp_path, capsys):
    """load()'s own note listed its Python keywords (report, download_mode, on_error...), which every command
    refuses as options: a command lists the source's options and the keywords --option passes on for it (and
    export, which refuses --option trailing_results, the argument that sets it)."""
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in command]
    assert main([*argv, "--option", "nope=1"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: ValueError: ms_swift has no option 'nope'; its options: batch_size, shard_bytes, trailing_results {note}\n"
    # load() itself still names its own keywords
    with pytest.raises(ValueError, match=r"load\(\) itself also takes .*download_mode"):
        td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=True, nope=1)


def test_validate_refuses_loads_validate_filter_instead_of_ignoring_it(tmp_path, capsys):
    """``validate --option validate=...`` (and ``td.validate(..., validate=...)``) went to the builder, which took
    it as load()'s filter of failing rows and never applied it: the run went on as if it was not given, while
    the command's own note says --option takes only revision and cache_dir there."""
    from conftest import shared_data

    data = str(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl"))
    assert main(["validate", "ms_swift", "--data-files", data, "--option", "validate=error"]) == 2
    err = capsys.readouterr().err
    assert "--option validate: not a source option but an argument the command sets; give --rules" in err
    assert err.count("\n") == 1
    with pytest.raises(ValueError, match="rules="):
        td.validate("ms_swift", data_files=data, validate="error")
    rows = sum(1 for line in open(data, encoding="utf-8") if line.strip())
    assert td.validate("ms_swift", data_files=data, rules="error").to_dict()["total"]["validation"]["checked"] == rows


@pytest.mark.parametrize("streaming", [False, True], ids=["prepare", "streaming"])
@pytest.mark.parametrize("split", ["all", "ALL"])
def test_a_data_files_split_named_all_is_refused_naming_it(split, streaming, cache_dir):
    """datasets reserves `all` for the union of the splits and refused it from deep inside its builder."""
    sample = td.sample_files("ms_swift")["train"][0]
    with pytest.raises(ValueError, match=f"data_files names a split '{split}', which datasets reserves"):
        td.load("ms_swift", data_files={split: sample}, streaming=streaming, cache_dir=cache_dir)


@pytest.mark.parametrize("value", ["", " ", ","])
def test_an_empty_option_validate_is_refused_not_a_filter_of_nothing(value, tmp_path, capsys):
    """``--option validate="$RULES"`` with RULES unset selected no rule: stats counted every row, those breaking
    arguments.schema included, as if the filter had been applied and kept them."""
    row = json.loads(open(td.sample_files("ms_swift")["train"][0], encoding="utf-8").readline())
    row["messages"][2]["content"] = json.dumps({"name": "get_exchange_rate", "arguments": {"base": 5, "quote": "EUR"}})
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    command = ["stats", "ms_swift", "--data-files", str(data), "--on-error", "skip"]
    assert main([*command, "--option", f"validate={value}"]) == 2
    captured = capsys.readouterr()
    assert "--option validate= names no rule" in captured.err and captured.out == ""
    # a selection still filters: the one row breaks arguments.schema and is dropped
    assert main([*command, "--option", "validate=error"]) == 0
    stats = json.loads(capsys.readouterr().out)["train"]
    assert stats["rows"] == 0 and stats["read"]["by_reason"] == {"RuleViolationError:arguments.schema": 1}


@pytest.mark.parametrize("name, advice", [("token", "HF_TOKEN"), ("features", r"tooluse_datasets\.features"),
                                          ("verification_mode", "on_error="), ("trust_remote_code", "no loading script")])
def test_load_datasets_own_arguments_are_refused_saying_what_does_their_job(name, advice, cache_dir):
    """Someone porting a load_dataset call read only "ms_swift has no option 'token'"."""
    with pytest.raises(ValueError, match=f"^ms_swift has no option '{name}'; its options: .*; {name} is "
                                         rf"datasets\.load_dataset's: .*{advice}") as info:
        td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", cache_dir=cache_dir,
                **{name: "x"})
    assert info.value.listing.endswith("batch_size, shard_bytes, trailing_results")  # the command line's own note replaces the rest


@pytest.mark.parametrize("value", [("test",), "train"])
@pytest.mark.parametrize("streaming", [False, True])
def test_load_refuses_prepare_splits_which_split_sets(value, streaming, cache_dir):
    """The builder's internal field was taken as an option: ("test",) loaded test alone under split=None, bypassing
    the choice of cache made from split=, and "train" was refused as the splits 't', 'r', 'a', 'i', 'n'."""
    files = td.sample_files("ms_swift")["train"]
    with pytest.raises(ValueError, match="^ms_swift has no option 'prepare_splits'; its options: batch_size"):
        td.load("ms_swift", data_files={"train": files[0], "test": files[1]}, streaming=streaming,
                cache_dir=cache_dir, prepare_splits=value)


@pytest.mark.parametrize("fmt", ["raw", "swift", "toolmind", "llamafactory"])
def test_an_export_option_validate_of_another_format_is_refused_naming_format(fmt, tmp_path, capsys):
    """load() refused it naming config='unified', an argument export does not have (it takes --format)."""
    out = tmp_path / "out"
    assert main(["export", "nestful", "--sample", "--format", fmt, "--out", str(out), "--option", "validate=all"]) == 2
    err = capsys.readouterr().err
    assert f"applies to --format unified only, not {fmt!r}" in err and "config" not in err
    assert not out.exists()
    assert main(["export", "nestful", "--sample", "--out", str(out), "--option", "validate=all"]) == 0
    assert len((out / "nestful-unified-train.jsonl").read_text().splitlines()) == 5


@pytest.mark.parametrize("command, option, argument", [
    (["show", "ms_swift"], "report=x", "give nothing: show names each skipped row on standard error"),
    (["stats", "ms_swift"], "config=raw", "give nothing: stats reads the unified rows"),
    (["export", "ms_swift", "--out", "{out}"], "config=raw", "give --format"),
    (["mirror", "ms_swift", "--out", "{out}"], "config=raw", "give --configs"),
    (["show", "ms_swift"], "config=raw", "give --config"),
    (["validate", "ms_swift"], "report=x", "give --skipped-rows"),
    (["validate", "ms_swift"], "num_proc=2", "give nothing: validate reads each row once, streaming, in this process"),
])
def test_a_load_argument_as_option_names_what_this_command_takes(command, option, argument, tmp_path, capsys):
    # show has no --skipped-rows, stats no --config and mirror's is --configs: naming them sent users to an error
    command = [part.format(out=tmp_path / "out") for part in command]
    assert main([*command, "--sample", "--option", option]) == 2
    err = capsys.readouterr().err
    assert f"not a source option but an argument the command sets; {argument}" in err
    assert err.rstrip().endswith(argument) and not (tmp_path / "out").exists()
