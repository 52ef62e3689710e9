"""Arguments of the wrong type are a TypeError naming the argument, before anything is read or written."""
from __future__ import annotations

import os
import re

import datasets
import pytest

import tooluse_datasets as td


@pytest.mark.parametrize("arguments, named", [
    ({"config": {"name": "raw"}}, "config"),
    ({"split": ["train"]}, "split"),
    ({"split": {"train": "x"}}, "split"),
    ({"split": b"train"}, "split"),
    ({"streaming": "no"}, "streaming"),
    ({"cache_dir": b"cache"}, "cache_dir"),
    ({"data_dir": b"folder", "data_files": None}, "data_dir"),
    ({"data_dir": {"train": "folder"}, "data_files": None}, "data_dir"),
    ({"revision": 3}, "revision"),
    ({"revision": ["main"]}, "revision"),
])
def test_a_wrong_type_is_a_type_error_naming_the_argument_and_nothing_is_prepared(tmp_path, monkeypatch, arguments,
                                                                                     named):
    monkeypatch.chdir(tmp_path)  # a bytes path was made a folder named after its repr, here
    kwargs = {"data_files": td.sample_files("ms_swift"), "cache_dir": str(tmp_path / "cache"), **arguments}
    with pytest.raises(TypeError, match=f"^{named} must be"):
        td.load("ms_swift", **kwargs)
    assert os.listdir(tmp_path) == []  # no cache prepared (split=["train"] failed after preparing every split)


@pytest.mark.parametrize("arguments, named", [
    ({"config_name": {"name": "raw"}}, "config_name"),
    ({"cache_dir": b"cache"}, "cache_dir"),
    ({"data_dir": b"folder", "data_files": None}, "data_dir"),
    ({"revision": 3}, "revision"),
])
def test_a_builder_made_directly_names_an_argument_of_the_wrong_type_and_makes_no_folder(tmp_path, monkeypatch,
                                                                                         arguments, named):
    """The README's builders are usable directly: cache_dir=b"cache" made a folder ./b'cache', config_name={} was
    datasets' "unhashable type: 'dict'"."""
    from tooluse_datasets.builders.ms_swift import Builder

    monkeypatch.chdir(tmp_path)
    kwargs = {"config_name": "unified", "data_files": td.sample_files("ms_swift"), **arguments}
    with pytest.raises(TypeError, match=f"^{named} must be"):
        Builder(**kwargs)
    assert os.listdir(tmp_path) == []


def test_validate_and_features_refuse_a_wrong_type_naming_it():
    with pytest.raises(TypeError, match="^config must be"):
        td.features("ms_swift", {"name": "raw"})
    with pytest.raises(TypeError, match="^config must be"):
        td.validate("ms_swift", {"name": "raw"}, data_files=td.sample_files("ms_swift"))
    with pytest.raises(TypeError, match="^split must be"):
        td.validate("ms_swift", split=["train"], data_files=td.sample_files("ms_swift"))


@pytest.mark.parametrize("revision", [3, b"main"])
def test_a_revision_of_the_wrong_type_is_named_before_the_upstream_is_resolved(revision, monkeypatch):
    """Upstream files resolved their revision first: "expected string or bytes-like object, got 'int'"."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for source in ("nestful", "toolmind"):
        with pytest.raises(TypeError, match="^revision must be a branch, tag or commit"):
            td.load(source, split="train", streaming=True, revision=revision)
    with pytest.raises(TypeError, match="^revision must be"):
        td.validate("nestful", revision=revision)


def test_an_empty_revision_is_refused_not_read_as_the_pinned_one(monkeypatch):
    """``revision=""`` (an unset shell variable) silently read the pinned revision (ToolMind: ``main``)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ValueError, match="^revision is empty"):
        td.load("toolmind", split="train", streaming=True, revision="")


@pytest.mark.parametrize("split", [datasets.Split.TRAIN, datasets.ReadInstruction("train", to=2, unit="abs")])
def test_datasets_own_split_objects_are_taken(cache_dir, split):
    ds = td.load("ms_swift", data_files=td.sample_files("ms_swift"), split=split, cache_dir=cache_dir)
    assert len(ds) == (2 if isinstance(split, datasets.ReadInstruction) else 6)


@pytest.mark.parametrize("rows_path", [b"skipped.jsonl", {"path": "skipped.jsonl"}, 3])
def test_a_skip_report_refuses_a_rows_path_that_is_no_path(tmp_path, monkeypatch, rows_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="^rows_path must be a path"):
        td.SkipReport(rows_path=rows_path)
    assert td.SkipReport(rows_path=tmp_path / "skipped.jsonl").rows_path == str(tmp_path / "skipped.jsonl")


@pytest.mark.parametrize("rows_path", ["", ".", "missing/skipped.jsonl"])
def test_a_skip_report_refuses_a_rows_path_it_could_not_write(tmp_path, monkeypatch, cache_dir, rows_path):
    """A folder, an empty path or a file in a missing folder was found at the first skipped row: a map-style load
    prepared the split, then stopped with a bare IsADirectoryError or FileNotFoundError."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="^the skipped rows file .*: give a file in an existing folder$"):
        td.SkipReport(rows_path=rows_path)


def test_validate_refuses_a_skipped_rows_folder_naming_no_argument_it_was_not_given(tmp_path, cache_dir):
    # validate() takes skipped_rows=: the error named rows_path, SkipReport's argument
    with pytest.raises(ValueError, match=f"^the skipped rows file {re.escape(repr(str(tmp_path)))} is a folder"):
        td.validate("ms_swift", data_files=td.sample_files("ms_swift"), skipped_rows=tmp_path, cache_dir=cache_dir)


@pytest.mark.parametrize("source", ["nestful", "all"])
@pytest.mark.parametrize("arguments, named", [
    ({"data_files": {}}, "data_files"),
    ({"data_files": ""}, "data_files"),
    ({"data_dir": ""}, "data_dir"),
    ({"data_dir": " ", "data_files": None}, "data_dir"),
    ({"cache_dir": ""}, "cache_dir"),
])
@pytest.mark.parametrize("streaming", [False, True])
def test_an_empty_data_argument_is_refused_not_read_as_none_given(tmp_path, monkeypatch, source, arguments, named,
                                                                   streaming):
    """``data_files={}`` (a dict of splits built from nothing) or ``data_dir=""`` (an unset shell variable) read the
    source's upstream files instead; ``cache_dir=""`` prepared into datasets' own cache. datasets' load_dataset
    refuses an empty data_files as a ValueError too."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # where the upstream was read, a DataNotFoundError about it
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    kwargs = {"data_files": td.sample_files(source), **arguments}
    if source == "all" and arguments.get("data_files") == "":
        pytest.skip("all refuses data_files that are no dict of sources, empty ones too")
    with pytest.raises(ValueError, match=f"^{named} is empty"):
        td.load(source, split="train", streaming=streaming, **kwargs)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("streaming", [False, True])
def test_a_cache_dir_that_cannot_be_made_is_refused_naming_it_not_the_data_files(tmp_path, streaming):
    """datasets makes the cache folder while the builder is made: its FileNotFoundError was taken for one about
    the data files (a DataNotFoundError naming data_files), a folder under a file was a bare NotADirectoryError."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for cache in (a_file / "cache", a_file / "cache" / "deeper"):
        with pytest.raises(ValueError, match=f"^cache_dir={re.escape(repr(str(cache)))} cannot be made") as info:
            td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=streaming,
                    cache_dir=str(cache))
        assert "data_files" not in str(info.value)


def test_a_cache_dir_on_another_file_system_is_refused_map_style_before_anything_is_read(tmp_path):
    """datasets reads no prepared split back from another file system: a map-style load into memory:// failed
    after converting, as "An error occurred while generating the dataset". A stream, which prepares nothing,
    still takes it."""
    files = td.sample_files("ms_swift")
    with pytest.raises(ValueError, match="^cache_dir='memory://cache' is not a local folder"):
        td.load("ms_swift", data_files=files, split="train", cache_dir="memory://cache")
    streamed = td.load("ms_swift", data_files=files, split="train", cache_dir="memory://cache", streaming=True)
    assert len(list(streamed)) == len(td.load("ms_swift", data_files=files, split="train",
                                              cache_dir=f"file://{tmp_path}"))


@pytest.mark.parametrize("data_files", [[""], {"train": ""}, {"train": [" "]}])
def test_an_empty_path_in_data_files_is_refused_naming_it(tmp_path, monkeypatch, data_files):
    """An empty path among the files (an unset shell variable) was looked for as the current folder ("Unable to
    find '/work/'"), and once a stream had been built in the process said to be "not a regular file (a pipe or a
    device)"."""
    monkeypatch.chdir(tmp_path)
    files = td.sample_files("ms_swift")["train"]
    list(td.load("ms_swift", data_files=files, split="train", streaming=True))  # datasets patches os.path then
    for streaming in (False, True):
        with pytest.raises(ValueError, match=r"^data_files(\['train'\])? holds an empty path \('\s*'\): give a file"):
            td.load("ms_swift", data_files=data_files, split="train", streaming=streaming,
                    cache_dir=str(tmp_path / "cache"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("split", ["", " ", "train+", "+train", "train++train"])
def test_a_split_with_an_empty_name_is_refused_alike_by_load_and_validate(tmp_path, monkeypatch, split):
    """An empty split name (an unset variable, a stray +) was datasets' "Split name should match '^\\w+...'" in a
    map-style load, "Bad split" in a stream, and validate's "no split ''"; each now names the split argument."""
    from tooluse_datasets.validation.run import validate

    monkeypatch.chdir(tmp_path)
    files = td.sample_files("ms_swift")
    message = f"^split={re.escape(repr(split))} has an empty split name"
    for streaming in (False, True):
        with pytest.raises(ValueError, match=message):
            td.load("ms_swift", data_files=files, split=split, streaming=streaming, cache_dir=str(tmp_path / "c"))
    for where in ({"data_files": files}, {"data_dir": str(tmp_path)}):  # refused before the files are looked for
        with pytest.raises(ValueError, match=message):
            validate("ms_swift", split=split, **where)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("given", ["data_files", "data_dir"])
def test_a_revision_beside_data_files_or_data_dir_is_refused_not_ignored(tmp_path, monkeypatch, given, streaming):
    """The revision picks the upstream files' revision only: beside data files it was not used (an hf:// file was
    read at main under revision="v2"), yet keyed, so local files were prepared again into a cache of their own."""
    monkeypatch.chdir(tmp_path)
    files = td.sample_files("ms_swift")["train"]
    where = {"data_files": files} if given == "data_files" else {"data_dir": os.path.dirname(files[0])}
    with pytest.raises(ValueError, match=r"^revision='v2' picks the revision of ms_swift's upstream files.*hf://"):
        td.load("ms_swift", split="train", streaming=streaming, revision="v2", cache_dir=str(tmp_path / "cache"),
                **where)
    assert os.listdir(tmp_path) == []
    assert len(td.load("ms_swift", split="train", cache_dir=str(tmp_path / "cache"), **where)) == 6


@pytest.mark.parametrize("split", ["train", "train[:2]+train[-1:]", None])
def test_keep_in_memory_reads_the_prepared_split_into_memory_as_load_dataset_does(cache_dir, split):
    """datasets' load_dataset(keep_in_memory=True) was refused as an unknown source option."""
    files = td.sample_files("ms_swift")
    mapped = td.load("ms_swift", data_files=files, split=split, cache_dir=cache_dir)
    held = td.load("ms_swift", data_files=files, split=split, cache_dir=cache_dir, keep_in_memory=True)
    mapped, held = ({"": mapped}, {"": held}) if split else (mapped, held)
    assert list(held) == list(mapped)
    for name in mapped:
        assert mapped[name].cache_files and held[name].cache_files == []  # read into memory, not memory-mapped
        assert list(held[name]) == list(mapped[name]) and len(held[name]) == (3 if split and "+" in split else 6)


def test_keep_in_memory_is_refused_for_a_stream_and_checked_for_its_type(cache_dir):
    files = td.sample_files("ms_swift")
    with pytest.raises(ValueError, match="^keep_in_memory applies to map-style loads"):
        td.load("ms_swift", data_files=files, split="train", streaming=True, keep_in_memory=True)
    with pytest.raises(TypeError, match="^keep_in_memory must be True or False"):
        td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir, keep_in_memory="yes")
    # False (the stream's own way) is taken
    assert len(list(td.load("ms_swift", data_files=files, split="train", streaming=True, keep_in_memory=False))) == 6


@pytest.mark.parametrize("streaming", [False, True])
def test_on_error_none_is_refused_before_any_row_not_wrapped_at_the_first(tmp_path, streaming):
    """on_error=None passed the config's check (datasets leaves None options out of it) and was set after it:
    map-style, datasets' "An error occurred while generating the dataset" at the first row; a stream was made
    and failed when iterated."""
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match=r"^on_error must be one of \('raise', 'skip'\), got None"):
        td.load("ms_swift", data_files=td.sample_files("ms_swift"), split="train", streaming=streaming,
                on_error=None, cache_dir=str(cache))
    assert not cache.exists() or not any(cache.rglob("*.arrow"))


@pytest.mark.parametrize("split, text", [(datasets.Split.TEST, "test"),
                                         (datasets.ReadInstruction("test", to=2, unit="abs"), "test[:2]"),
                                         (datasets.ReadInstruction("train") + datasets.ReadInstruction("test"),
                                          "train+test")])
def test_datasets_split_objects_load_as_the_expression_they_stand_for(tmp_path, split, text):
    """``datasets.Split.TEST`` prepared and reported every split (the report counted train's rows too), where
    ``"test"`` prepares and reports test alone; a sliced ReadInstruction streamed was datasets' "Bad split"."""
    files = td.sample_files("ms_swift")["train"]
    data_files = {"train": files[0], "test": files[1]}
    got = {}
    for given in (split, text):
        report = td.SkipReport()
        ds = td.load("ms_swift", data_files=data_files, split=given, cache_dir=str(tmp_path / "cache"), report=report)
        got[given is text] = ([row["id"] for row in ds], report.summary())
    assert got[False] == got[True]
    assert got[True][1].startswith("6 rows read" if "+" in text else "3 rows read")  # the splits named, only
    if "[" in text:
        with pytest.raises(ValueError, match=r"^a stream reads whole splits; split='test\[:2\]' has a slice"):
            td.load("ms_swift", data_files=data_files, split=split, streaming=True)
