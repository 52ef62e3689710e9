"""Arguments of the wrong type are a TypeError naming the argument, before anything is read or written."""
from __future__ import annotations

import os

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
])
def test_a_wrong_type_is_a_type_error_naming_the_argument_and_nothing_is_prepared(tmp_path, monkeypatch, arguments,
                                                                                     named):
    monkeypatch.chdir(tmp_path)  # a bytes path was made a folder named after its repr, here
    kwargs = {"data_files": td.sample_files("ms_swift"), "cache_dir": str(tmp_path / "cache"), **arguments}
    with pytest.raises(TypeError, match=f"^{named} must be"):
        td.load("ms_swift", **kwargs)
    assert os.listdir(tmp_path) == []  # no cache prepared (split=["train"] failed after preparing every split)


def test_validate_and_features_refuse_a_wrong_type_naming_it():
    with pytest.raises(TypeError, match="^config must be"):
        td.features("ms_swift", {"name": "raw"})
    with pytest.raises(TypeError, match="^config must be"):
        td.validate("ms_swift", {"name": "raw"}, data_files=td.sample_files("ms_swift"))
    with pytest.raises(TypeError, match="^split must be"):
        td.validate("ms_swift", split=["train"], data_files=td.sample_files("ms_swift"))


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
