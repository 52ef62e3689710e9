"""The builder classes used directly, as the README shows them, against td.load()."""
from __future__ import annotations

from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.builders.ms_swift import MsSwiftBuilder
from tooluse_datasets.builders.nestful import NestfulBuilder
from tooluse_datasets.builders.toolmind import ToolMindBuilder

from conftest import SHARED_DATA


def _real_ms_swift_files():
    folder = SHARED_DATA / "ms_swift"
    return sorted(str(p) for p in folder.glob("*.jsonl")) if folder.exists() else td.sample_files("ms_swift")["train"]


@pytest.mark.parametrize("builder_cls, source, files", [
    (NestfulBuilder, "nestful", td.sample_files("nestful")["train"]),
    (MsSwiftBuilder, "ms_swift", _real_ms_swift_files()),
])
@pytest.mark.parametrize("config", ["unified", "raw"])
def test_a_split_prepared_by_the_builder_is_the_cache_load_reads(cache_dir, builder_cls, source, files, config):
    # README: b = NestfulBuilder(config_name="raw", data_files=...); b.download_and_prepare(); then td.load of the
    # same data must read that cache, not convert every row again into a folder of its own.
    builder = builder_cls(config_name=config, data_files=files, cache_dir=cache_dir)
    builder.download_and_prepare()
    prepared = td.exact(builder.as_dataset(split="train"))
    loaded = td.load(source, config, split="train", data_files=files, cache_dir=cache_dir)
    assert loaded.cache_files == prepared.cache_files
    assert list(loaded) == list(prepared)


def test_options_at_their_defaults_share_the_cache_and_other_values_do_not(cache_dir):
    files = td.sample_files("toolmind")
    plain = ToolMindBuilder(data_files=files, cache_dir=cache_dir)
    assert ToolMindBuilder(data_files=files, cache_dir=cache_dir, on_error="raise", revision=None, validate=None,
                           split_column="split").cache_dir == plain.cache_dir
    assert ToolMindBuilder(config_name="unified", data_files=files, cache_dir=cache_dir).cache_dir == plain.cache_dir
    for other in ({"on_error": "skip"}, {"split_column": None}, {"batch_size": 10}, {"config_name": "raw"}):
        assert ToolMindBuilder(data_files=files, cache_dir=cache_dir, **other).cache_dir != plain.cache_dir


def test_an_upgrade_of_a_library_that_decides_rows_prepares_again(cache_dir, monkeypatch):
    """A cache prepared under one jsonschema (what `validate=` keeps) or orjson (every value read) is not served
    under another: their versions are in the cache key, as the package's own code is."""
    import importlib.metadata

    from tooluse_datasets import builder as builder_module

    files = td.sample_files("toolmind")
    monkeypatch.setattr(builder_module, "_CODE_HASH", None)
    before = ToolMindBuilder(data_files=files, cache_dir=cache_dir).cache_dir
    real_version = importlib.metadata.version
    for library in ("jsonschema", "orjson"):
        monkeypatch.setattr(builder_module, "_CODE_HASH", None)
        monkeypatch.setattr(importlib.metadata, "version",
                            lambda name, library=library: "0.0.1" if name == library else real_version(name))
        assert ToolMindBuilder(data_files=files, cache_dir=cache_dir).cache_dir != before
    monkeypatch.setattr(builder_module, "_CODE_HASH", None)
    monkeypatch.setattr(importlib.metadata, "version", real_version)
    assert ToolMindBuilder(data_files=files, cache_dir=cache_dir).cache_dir == before


@pytest.mark.parametrize("option", ["data_files", "data_dir"])
def test_builder_refuses_a_revision_beside_given_files_as_load_does(option, cache_dir):
    # The revision was unused (the files read as given) yet keyed: the same files prepared again into another cache.
    sample = td.sample_files("toolmind")["train"][0]
    given = {option: sample if option == "data_files" else str(Path(sample).parent)}
    with pytest.raises(ValueError, match="revision='v2' picks the revision of toolmind's upstream files"):
        ToolMindBuilder(revision="v2", cache_dir=cache_dir, **given)
    with pytest.raises(ValueError, match="revision='v2' picks the revision"):
        td.load("toolmind", revision="v2", cache_dir=cache_dir, **given)
    assert ToolMindBuilder(cache_dir=cache_dir, **given).config.revision is None
