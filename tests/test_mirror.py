"""Parquet mirrors: every config loads with ``datasets.load_dataset(folder, config)`` in both modes with rows
equal to ``tooluse_datasets.load``; layout, sharding, determinism, atomicity and typed errors."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datasets import get_dataset_config_names

import tooluse_datasets as td
from tooluse_datasets.mirror import build as build_module
from tooluse_datasets.mirror import engines as engines_module
from tooluse_datasets.cli import main
from tooluse_datasets.errors import InvalidJsonError
from tooluse_datasets.mirror import (MANIFEST_NAME, MirrorError, MirrorRequest, ParquetLayout, build_mirror,
                                     mirror_files, read_manifest)
from tooluse_datasets.formats import FORMATS
from tooluse_datasets.registry import source_names
from tooluse_datasets.source import Upstream, UpstreamFile

from conftest import count_calls
from mirror_support import build_sample_mirror, holding_the_build_lock, mirror_rows, reference_rows, stop_a_first_build

SHARD_NAME = re.compile(r"^(?P<config>\w+)/(?P<split>\w+(\.\w+)*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.parquet$")


@pytest.fixture(scope="module")
def nestful_mirror(tmp_path_factory) -> Path:
    return build_sample_mirror("nestful", tmp_path_factory.mktemp("mirror"), configs=["unified", "raw"])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _assert_config_matches_load(folder: Path, source: str, config: str, splits, cache_dir: str) -> None:
    declared = td.features(source, config).to_dict()
    for split in splits:
        expected = reference_rows(source, config, split, cache_dir)
        assert expected, f"{source}/{config}/{split}: the reference has no rows, the comparison would be empty"
        for streaming in (False, True):
            got = mirror_rows(folder, config, split, streaming=streaming, cache_dir=cache_dir)
            assert got == expected, f"{source}/{config}/{split} streaming={streaming}"
    from datasets import load_dataset

    ds = load_dataset(str(folder), config, split=splits[0], cache_dir=cache_dir)
    assert ds.features.to_dict() == declared  # Json() leaves restored, not strings


def test_nestful_mirror_loads_every_config_in_both_modes_equal_to_load(nestful_mirror, cache_dir):
    manifest = read_manifest(nestful_mirror)
    assert list(manifest.configs) == ["unified", "raw"]
    assert sorted(get_dataset_config_names(str(nestful_mirror))) == ["raw", "unified"]
    for config, entry in manifest.configs.items():
        _assert_config_matches_load(nestful_mirror, "nestful", config, list(entry.splits), cache_dir)


@pytest.mark.parametrize("source", source_names())
def test_every_source_mirrors_every_format_from_its_sample(source, tmp_path, cache_dir):
    """All registered sources, all formats. A source or writer that cannot be imported fails here (MirrorError),
    it is not skipped. A format no row converts to is left out, and that must be true of the data."""
    folder = build_sample_mirror(source, tmp_path / "out", configs=list(FORMATS))
    manifest = read_manifest(folder)
    assert set(manifest.configs) | set(manifest.omitted_configs) == set(FORMATS)
    assert "unified" in manifest.configs and "raw" in manifest.configs
    for config, entry in manifest.configs.items():
        _assert_config_matches_load(folder, source, config, list(entry.splits), cache_dir)
    for config in manifest.omitted_configs:
        streamed = td.load(source, config, streaming=True, data_files=td.sample_files(source), on_error="skip")
        assert sum(1 for ds in streamed.values() for _ in ds) == 0, f"{config} was omitted but has rows"


def test_layout_files_names_and_parquet_metadata(nestful_mirror):
    manifest = read_manifest(nestful_mirror)
    data_files = [p for p in mirror_files(nestful_mirror) if p.endswith(".parquet")]
    assert sorted(data_files) == sorted(f.path for f in manifest.files)
    figures = [f.path for f in manifest.figures]
    try:
        import matplotlib  # noqa: F401  (the plots extra: without it a mirror has no figures)

        expected = [f"plots/{name}.png" for name in ("turns", "calls_per_row", "tools_per_row", "content_chars")]
    except ImportError:
        expected = []
    assert figures == expected
    assert set(mirror_files(nestful_mirror)) == set(data_files) | set(figures) | {"README.md", MANIFEST_NAME}
    card = (nestful_mirror / "README.md").read_text()
    for f in manifest.figures:  # embedded in the card, and what the manifest says they are
        assert f"]({f.path})" in card
        assert _sha(nestful_mirror / f.path) == f.sha256 and (nestful_mirror / f.path).read_bytes()[:4] == b"\x89PNG"
    for f in manifest.files:
        m = SHARD_NAME.match(f.path)
        assert m and int(m["i"]) < int(m["n"]), f.path
        path = nestful_mirror / f.path
        assert _sha(path) == f.sha256 and path.stat().st_size == f.num_bytes
        pf = pq.ParquetFile(path)
        hf_meta = json.loads(pf.schema_arrow.metadata[b"huggingface"])
        assert hf_meta["info"]["features"] == manifest.configs[m["config"]].features
        assert all(pf.metadata.row_group(i).column(0).compression == "ZSTD" for i in range(pf.num_row_groups))
    unified = pq.ParquetFile(nestful_mirror / manifest.configs["unified"].splits["train"].files[0])
    json_columns = {c.path for c in unified.schema if str(c.logical_type) == "JSON"}
    assert {"tools.list.element", "meta", "messages.list.element.tool_calls.list.element.function.arguments"} \
        <= json_columns


def test_small_row_groups_and_shards_keep_every_row_in_order(tmp_path, cache_dir):
    layout = ParquetLayout(row_group_rows=2, row_group_bytes=10**9, shard_bytes=1)  # one row per group and file
    folder = build_sample_mirror("nestful", tmp_path / "out", configs=["unified"], layout=layout)
    split = read_manifest(folder).configs["unified"].splits["train"]
    expected = reference_rows("nestful", "unified", "train", cache_dir)
    n = len(split.files)
    assert n == len(expected) and n > 1
    assert split.files == [f"unified/train-{i:05d}-of-{n:05d}.parquet" for i in range(n)]
    for path in split.files:
        pf = pq.ParquetFile(folder / path)
        assert pf.num_row_groups == 1 and pf.metadata.row_group(0).num_rows <= 2
    assert sum(pq.ParquetFile(folder / p).metadata.num_rows for p in split.files) == split.num_examples
    for streaming in (False, True):
        assert mirror_rows(folder, "unified", "train", streaming=streaming, cache_dir=cache_dir) == expected


def test_files_are_bounded_by_max_shard_size_below_the_row_group_size(tmp_path):
    layout = ParquetLayout(row_group_rows=1000, shard_bytes=2000)  # row groups of up to 64 MB: bounded by the file's
    folder = build_sample_mirror("ms_swift", tmp_path / "out", configs=["unified"], layout=layout)
    split = read_manifest(folder).configs["unified"].splits["train"]
    tables = [pq.read_table(folder / path) for path in split.files]
    assert sum(t.num_rows for t in tables) == split.num_examples
    assert len(tables) > 2 and all(t.nbytes <= layout.shard_bytes for t in tables)


def test_row_groups_are_bounded_by_bytes(tmp_path):
    folder = build_sample_mirror("nestful", tmp_path / "out", configs=["raw"],
                                 layout=ParquetLayout(row_group_rows=1000, row_group_bytes=1))
    split = read_manifest(folder).configs["raw"].splits["train"]
    groups = sum(pq.ParquetFile(folder / path).num_row_groups for path in split.files)
    assert groups == split.num_examples  # a byte bound below one row = one row per group


def test_rebuilding_gives_byte_identical_files(nestful_mirror, tmp_path):
    again = build_sample_mirror("nestful", tmp_path / "again", configs=["unified", "raw"])
    assert mirror_files(again) == mirror_files(nestful_mirror)
    for rel in mirror_files(again):
        assert _sha(again / rel) == _sha(nestful_mirror / rel), rel


def test_a_rebuilt_mirror_loads_its_new_rows_not_the_cached_ones(tmp_path, monkeypatch):
    """datasets caches a local folder under a key made from its name (always the source's) and the card's YAML,
    not from the Parquet files: the same files in another order give the same sizes and statistics, and a plain
    load_dataset must still read the new rows, of a rebuilt folder and of another --out alike."""
    from datasets import load_dataset

    lines = Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(lines[:2]))
    (tmp_path / "b.jsonl").write_text("".join(lines[2:]))
    monkeypatch.chdir(tmp_path)

    def build_and_load(out: str, *files: str) -> list[str]:
        assert main(["mirror", "ms_swift", "--data-files", *files, "--configs", "unified", "--out", out]) == 0
        return [row["id"] for row in load_dataset(f"{out}/ms_swift", "unified", split="train")]

    first = build_and_load("out1", "b.jsonl", "a.jsonl")
    assert first[0].endswith("/b/0")
    assert build_and_load("out1", "a.jsonl", "b.jsonl") == first[1:] + first[:1]
    assert build_and_load("out2", "b.jsonl", "a.jsonl") == first


def _stop_at_the_second_shard(monkeypatch) -> list:
    """Shard conversions of the next build: the second one raises KeyboardInterrupt (once), as Ctrl-C while it
    converts. Returns the list of the shard keys converted, which the test may clear between builds."""
    original = engines_module.convert_shard
    calls = []
    stop = [True]

    def interrupted(task):
        calls.append(task.key)
        if len(calls) == 2 and stop and stop.pop():
            raise KeyboardInterrupt
        return original(task)

    monkeypatch.setattr(engines_module, "convert_shard", interrupted)
    return calls


def test_an_interrupted_build_leaves_the_previous_mirror_and_the_next_run_finishes_it(tmp_path, monkeypatch):
    out = tmp_path / "out"
    folder = build_sample_mirror("nestful", out, configs=["unified"])
    before = {rel: _sha(folder / rel) for rel in mirror_files(folder)}
    calls = _stop_at_the_second_shard(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        build_sample_mirror("nestful", out, configs=["unified", "raw"])
    assert calls == ["train-00000", "train-00001"]  # the second shard was being converted when the run stopped
    assert {rel: _sha(folder / rel) for rel in mirror_files(folder)} == before
    assert sorted(p.name for p in out.iterdir()) == [".nestful.partial", "nestful"]  # kept to resume

    calls.clear()
    resumed = build_sample_mirror("nestful", out, configs=["unified", "raw"])
    assert calls == ["train-00001"]  # the first shard's parts were reused
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]
    monkeypatch.undo()
    clean = build_sample_mirror("nestful", tmp_path / "clean", configs=["unified", "raw"])
    assert {rel: _sha(resumed / rel) for rel in mirror_files(resumed)} == \
        {rel: _sha(clean / rel) for rel in mirror_files(clean)}


def test_an_interrupted_build_resumes_after_its_inputs_were_touched_not_changed(tmp_path, monkeypatch):
    """Inputs copied again or checked out anew between an interrupted run and its rerun have new modification
    times, the same contents (the same sha256): the shards staged from them are reused. The shards' file versions
    (checked when a shard is read) held the modification time, which made every staged shard another's."""
    import os
    import shutil

    files = {split: [shutil.copy(f, tmp_path / Path(f).name) for f in paths]
             for split, paths in td.sample_files("nestful").items()}

    def build(out: Path) -> Path:
        return build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=files), out)

    calls = _stop_at_the_second_shard(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path / "out")
    assert calls == ["train-00000", "train-00001"]
    for paths in files.values():
        for path in paths:
            os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    calls.clear()
    build(tmp_path / "out")
    assert calls == ["train-00001"]  # the first shard's parts were reused


def test_an_interrupted_build_reuses_no_shard_after_a_local_file_an_option_names_was_edited(tmp_path, monkeypatch):
    """A LLaMA-Factory entry (or NESTFUL's functions folder) edited under the same path between an interrupted run
    and its rerun: the shards staged under the old entry are not reused, and the mirror equals a clean build."""
    import shutil

    data = Path(__file__).parent / "data" / "llamafactory"
    shutil.copy(data / "glaive_toolcall_openai_style.jsonl", tmp_path)
    info = tmp_path / "dataset_info.json"
    shutil.copy(data / "dataset_info.json", info)

    def build(out: Path) -> Path:
        options = {"dataset_info": str(info), "dataset": "glaive_toolcall_openai_style", "shard_bytes": 20_000}
        return build_mirror(MirrorRequest("llamafactory", configs=["unified"], source_options=options), out)

    calls = _stop_at_the_second_shard(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path / "out")
    assert (tmp_path / "out" / ".llamafactory.partial").is_dir()
    entries = json.loads(info.read_text())
    del entries["glaive_toolcall_openai_style"]["columns"]["tools"]  # the tools column no longer read as tools
    info.write_text(json.dumps(entries))
    calls.clear()
    resumed = build(tmp_path / "out")
    assert len(calls) >= 3 and calls[0] == "train-00000"  # every shard converted again
    monkeypatch.undo()
    clean = build(tmp_path / "clean")
    assert {rel: _sha(resumed / rel) for rel in mirror_files(resumed)} == \
        {rel: _sha(clean / rel) for rel in mirror_files(clean)}


def test_a_new_build_replaces_the_old_mirror_completely(tmp_path):
    out = tmp_path / "out"
    build_sample_mirror("nestful", out, configs=["unified", "raw"])
    folder = build_sample_mirror("nestful", out, configs=["raw"])
    assert not (folder / "unified").exists()
    assert list(read_manifest(folder).configs) == ["raw"]
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]


def test_a_mirror_folder_that_links_elsewhere_is_replaced_without_leaving_the_link_behind(tmp_path):
    """out/nestful a link to a mirror elsewhere: the new mirror takes its place, the linked mirror is kept, and the
    link moved aside is deleted (it stayed as a hidden .nestful.old-<pid> beside the new mirror)."""
    linked = build_sample_mirror("nestful", tmp_path / "elsewhere", configs=["raw"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "nestful").symlink_to(linked, target_is_directory=True)
    folder = build_sample_mirror("nestful", out, configs=["unified", "raw"])
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]
    assert not folder.is_symlink() and list(read_manifest(folder).configs) == ["unified", "raw"]
    assert list(read_manifest(linked).configs) == ["raw"]


def test_refuses_to_replace_a_folder_that_is_not_a_mirror(tmp_path):
    user_file = tmp_path / "out" / "nestful" / "notes.txt"
    user_file.parent.mkdir(parents=True)
    user_file.write_text("mine")
    with pytest.raises(MirrorError, match="not a mirror"):
        build_sample_mirror("nestful", tmp_path / "out", configs=["unified"])
    assert user_file.read_text() == "mine"


def test_a_file_where_the_mirror_or_its_output_folder_goes_is_a_mirror_error(tmp_path, capsys):
    # A file at OUT/<source> (or at OUT, or above it) ended the command with a bare NotADirectoryError.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "nestful").write_text("mine")
    (tmp_path / "file").write_text("mine too")
    for out, says in ((tmp_path / "out", "is a file, not a mirror"), (tmp_path / "file", "cannot be made"),
                      (tmp_path / "file" / "below", "cannot be made")):
        code = main(["mirror", "nestful", "--sample", "--configs", "unified", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and "NotADirectoryError" not in err, err
        assert says in err, err
    assert (tmp_path / "out" / "nestful").read_text() == "mine" and (tmp_path / "file").read_text() == "mine too"


def test_an_output_folder_that_is_a_mirror_is_refused_instead_of_nesting_a_mirror_in_it(tmp_path, capsys,
                                                                                        monkeypatch):
    # `mirror nestful --out DIR/nestful` (DIR/nestful is the mirror, DIR the folder of mirrors) used to build
    # DIR/nestful/nestful: the refresh was in neither what publish DIR/nestful pushes nor what load_dataset reads.
    folder = build_sample_mirror("nestful", tmp_path, configs=["unified"])
    before = {rel: _sha(folder / rel) for rel in mirror_files(folder)}
    for out in (folder, folder / "unified"):
        code = main(["mirror", "nestful", "--sample", "--configs", "unified", "raw", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        assert f"{folder}" in err and "is a mirror" in err and f"give {tmp_path}" in err, err
    assert {rel: _sha(folder / rel) for rel in mirror_files(folder)} == before  # nothing nested, nothing staged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nestful"]
    with pytest.raises(MirrorError, match="is a mirror"):
        build_sample_mirror("ms_swift", folder, configs=["unified"])
    # a path through the mirror that leads back out of it is fine
    monkeypatch.chdir(folder / "unified")
    assert build_sample_mirror("nestful", Path("../.."), configs=["unified"]) == Path("../../nestful")


@pytest.mark.parametrize("kwargs, message", [
    ({"configs": ["unified", "nope"]}, "unknown configs"),
    ({"configs": []}, "unknown configs"),
    ({"configs": ["raw", "raw"]}, "repeated"),
    ({"on_error": "ignore"}, "on_error"),
])
def test_bad_requests_raise_typed_errors(kwargs, message):
    with pytest.raises(MirrorError, match=message):
        MirrorRequest("nestful", **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"configs": "unified"}, "configs must be a list of formats, e.g. ['unified'], got the str 'unified'"),
    ({"split": 3}, "split must be a str or None, got 3 (int)"),
    ({"revision": 3}, "revision must be a str or None, got 3 (int)"),
    ({"repo_id": 3}, "repo_id must be a str or None, got 3 (int)"),
    ({"license": 3}, "license must be a str or None, got 3 (int)"),
    ({"skipped_rows": 3}, "skipped_rows must be a path (str or pathlib.Path) or None, got 3 (int)"),
    ({"configs": None}, "configs must be a list of formats (all of them by default), got None (NoneType)"),
    ({"layout": None}, "layout must be a ParquetLayout, got None (NoneType)"),
    ({"source_options": None}, "source_options must be a dict of the source's options ({} for none), got None "
                               "(NoneType)"),
])
def test_request_arguments_of_the_wrong_type_are_named(kwargs, message):
    """split=3 and license=3 were an AttributeError from deep inside, configs="unified" "unknown configs ['u',
    'n', 'i', ...]", repo_id=3 and skipped_rows=3 a TypeError naming no argument."""
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        MirrorRequest("nestful", data_files=td.sample_files("nestful"), **kwargs)


@pytest.mark.parametrize("request_, out_dir, message", [
    ("nestful", "out", "request must be a MirrorRequest, e.g. MirrorRequest('nestful'), got 'nestful' (str)"),
    (None, "out", "request must be a MirrorRequest, e.g. MirrorRequest('nestful'), got None (NoneType)"),
    (MirrorRequest("nestful"), None, "out_dir must be a path (str or pathlib.Path), got None (NoneType)"),
])
def test_build_mirror_arguments_of_the_wrong_type_are_named(request_, out_dir, message, tmp_path, monkeypatch):
    # they were "'str' object has no attribute 'source'" and a TypeError naming no argument
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        build_mirror(request_, out_dir)
    assert list(tmp_path.iterdir()) == []


def test_unknown_source_is_a_typed_error():
    with pytest.raises(MirrorError, match="unknown source"):
        MirrorRequest("not_a_source")


def _sample_with_a_broken_line(tmp_path: Path) -> Path:
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()[0]
    path = tmp_path / "broken.jsonl"
    path.write_text(good + "\n" + '{"sample_id": "x", "input": "truncated\n')
    return path


def test_bad_rows_raise_a_typed_error_with_on_error_raise_and_nothing_is_left(tmp_path):
    data = _sample_with_a_broken_line(tmp_path)
    request = MirrorRequest("nestful", configs=["unified"], data_files=[str(data)], on_error="raise")
    with pytest.raises(InvalidJsonError) as info:
        build_mirror(request, tmp_path / "out")
    assert info.value.row == 1 and "broken.jsonl" in str(info.value)
    assert not (tmp_path / "out" / "nestful").exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_skipped_rows_are_counted_in_the_manifest_and_the_card(tmp_path):
    data = _sample_with_a_broken_line(tmp_path)
    folder = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=[str(data)]), tmp_path / "out")
    split = read_manifest(folder).configs["unified"].splits["train"]
    assert split.num_examples == 1
    assert split.skipped["rows_read"] == 2 and split.skipped["skipped"] == 1
    assert split.skipped["by_reason"] == {"InvalidJsonError:<line>": 1}
    assert split.skipped["examples"][0]["file"] == "broken.jsonl"  # no machine-specific path
    assert "| `unified` | train | 1 | 1 | InvalidJsonError:<line> ×1 |" in (folder / "README.md").read_text()


def test_cli_mirror_builds_one_folder_per_source(tmp_path, capsys):
    rc = main(["mirror", "nestful", "--sample", "--out", str(tmp_path), "--configs", "unified", "raw",
               "--row-group-rows", "2", "--repo-id", "acme/{source}-tooluse"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "unified/train: 5 rows in 2 shard(s)" in out  # one per input file (the sample has two)
    folder = tmp_path / "nestful"
    first = pq.ParquetFile(folder / "unified/train-00000-of-00002.parquet").metadata
    assert [first.row_group(i).num_rows for i in range(first.num_row_groups)] == [2, 1]
    assert 'load_dataset("acme/nestful-tooluse", "unified"' in (folder / "README.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--sample", "--data-files", "x.jsonl"], "exclude each other"),
    (["--sample", "--configs", "unified", "--max-shard-size", "lots"], "argument --max-shard-size: 'lots' is not a size"),
    # datasets reads a lower-case b as bits: '64mb' made row groups of 8 MB, said only in the card
    (["--sample", "--configs", "unified", "--row-group-size", "64mb"],
     "argument --row-group-size: '64mb' ends in a lower-case b, which datasets reads as bits (8.0 MB): write 64MB"),
    # a bound that is not positive names its option, not the layout object it would have made
    (["--sample", "--configs", "unified", "--row-group-rows", "0"], "argument --row-group-rows: must be at least 1"),
    (["--sample", "--configs", "unified", "--row-group-size", "0"], "argument --row-group-size: a size must be at least"),
    (["--sample", "--configs", "unified", "--num-proc", "0"], "argument --num-proc: must be at least 1, got 0"),
    # two sizes for the same thing: --option shard_bytes was dropped without a word
    (["--sample", "--configs", "unified", "--shard-size", "1MB", "--option", "shard_bytes=60000"],
     "--shard-size and --option shard_bytes both set the input shard size: give one"),
])
def test_cli_mirror_bad_arguments_exit_with_an_error(tmp_path, capsys, argv, message):
    try:
        rc = main(["mirror", "nestful", "--out", str(tmp_path), *argv])
    except SystemExit as exc:  # a usage error argparse reports itself
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "nestful").exists()


@pytest.mark.parametrize("sources", [["all", "ms_swift"], ["nestful", "all"]])
def test_cli_mirror_all_beside_a_source_says_to_give_all_alone(tmp_path, capsys, sources):
    """'all' with other sources was refused as an unknown source, listing the sources without 'all'."""
    assert main(["mirror", *sources, "--sample", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'all' names every source: give it alone" in err and "unknown source" not in err
    assert list(tmp_path.iterdir()) == []


def test_cli_mirror_all_reads_each_sources_own_files_given_as_source_path_items(tmp_path, capsys):
    """As every command reads ``all`` (and as --help says): --data-files SOURCE=PATH items, one mirror per
    source named, each from its own files."""
    import tooluse_datasets as td

    nestful, ms_swift = td.sample_files("nestful")["train"], td.sample_files("ms_swift")["train"]
    items = [f"nestful={p}" for p in nestful] + [f"ms_swift={ms_swift[0]}"]
    rc = main(["mirror", "all", "--out", str(tmp_path / "a"), "--configs", "unified", "--data-files", *items])
    assert rc == 0, capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["ms_swift", "nestful"]
    assert read_manifest(tmp_path / "a" / "nestful").configs["unified"].num_examples == 5
    assert [i.name for i in read_manifest(tmp_path / "a" / "ms_swift").provenance.inputs] == \
        ["tooluse_datasets.builders/ms_swift/dummy_data/agent_rows.jsonl"]
    # sources named on the command line: each needs its files, and items name no other source
    for argv, message in [(["nestful", "ms_swift", "--data-files", *items[:2]], "no files for ms_swift"),
                          (["nestful", "--data-files", "x.jsonl"], None),
                          (["nestful", "toolmind", "--data-files", *items], "not mirrored (ms_swift)"),
                          (["nestful", "ms_swift", "--data-files", "x.jsonl"], "SOURCE=PATH")]:
        rc = main(["mirror", *argv, "--out", str(tmp_path / "b"), "--configs", "unified"])
        err = capsys.readouterr().err
        assert rc != 0 and (message is None or message in err), (argv, err)
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
    # one source may take its files as SOURCE=PATH items too (it was "Unable to find '.../nestful=...'")
    rc = main(["mirror", "nestful", "--out", str(tmp_path / "c"), "--configs", "unified", "--data-files",
               *items[:len(nestful)]])
    assert rc == 0, capsys.readouterr().err
    assert read_manifest(tmp_path / "c" / "nestful").configs["unified"].num_examples == 5
    rc = main(["mirror", "nestful", "--out", str(tmp_path / "d"), "--configs", "unified", "--data-files", items[-1]])
    assert rc == 2 and "not mirrored (ms_swift)" in capsys.readouterr().err


UNPINNED_HUB_UPSTREAM = Upstream(host="hf", repo="someone/data", revision=None,
                                 files=(UpstreamFile(split="train", path="data.parquet"),))


def test_an_unpinned_hub_upstream_is_pinned_to_its_current_commit_before_reading(monkeypatch):
    monkeypatch.setattr(build_module, "_upstream", lambda source: UNPINNED_HUB_UPSTREAM)
    request = MirrorRequest("nestful", configs=["unified"])
    assert build_module.pin_upstream_revision(request, resolve=lambda repo, rev: f"{repo}@c0ffee").revision \
        == "someone/data@c0ffee"
    # A branch or tag name is resolved to the commit it points at now; a full commit id is read as it is.
    explicit = MirrorRequest("nestful", configs=["unified"], revision="v1")
    assert build_module.pin_upstream_revision(explicit, resolve=lambda repo, rev: f"{repo}@{rev}-commit").revision \
        == "someone/data@v1-commit"
    commit = MirrorRequest("nestful", configs=["unified"], revision="b" * 40)
    assert build_module.pin_upstream_revision(commit, resolve=lambda *args: 1 / 0).revision == "b" * 40
    local = MirrorRequest("nestful", configs=["unified"], data_files=["x.jsonl"])
    assert build_module.pin_upstream_revision(local, resolve=lambda *args: 1 / 0).revision is None

    def offline(repo, rev):
        raise ConnectionError("no network")

    with pytest.raises(MirrorError, match=r"pass revision \(--revision\) or local data_files \(--data-files\)"):
        build_module.pin_upstream_revision(request, resolve=offline)


def test_hub_data_files_at_a_branch_are_pinned_to_one_commit_before_any_builder_reads_them(monkeypatch, tmp_path,
                                                                                          caplog):
    """Each builder (each config, each Ray worker) resolved ``main`` by itself: a push between two of them mixed
    two commits in one mirror. The plan reads every file at the commit its branch points at when planning."""
    from tooluse_datasets import source as source_module

    heads = iter(["a" * 40, "c" * 40])  # the branch moves on after the first lookup
    asked = []

    def head_commit(repo, revision="main"):
        asked.append((repo, revision))
        return next(heads)

    monkeypatch.setattr(source_module, "hub_head_commit", head_commit)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    planned = []

    class Planned(Exception):
        pass

    def builder(request):
        planned.append(request)
        raise Planned

    monkeypatch.setattr(build_module, "_builder", builder)
    at_commit = "hf://datasets/o/n@" + "b" * 40 + "/c.jsonl"
    request = MirrorRequest("ms_swift", configs=["unified"], data_files={
        "train": ["hf://datasets/o/n/a.jsonl", "hf://datasets/o/n@main/b.jsonl", at_commit]})
    with pytest.raises(Planned):
        build_module.plan_mirror(request, tmp_path / "out")
    assert planned[0].data_files == {"train": ["hf://datasets/o/n@" + "a" * 40 + "/a.jsonl",
                                               "hf://datasets/o/n@" + "a" * 40 + "/b.jsonl", at_commit]}
    assert asked == [("o/n", "main")]

    def unreachable(repo, revision="main"):
        raise OSError("no network")

    monkeypatch.setattr(source_module, "hub_head_commit", unreachable)
    with pytest.raises(Planned):
        build_module.plan_mirror(request, tmp_path / "out")
    assert planned[1].data_files == request.data_files
    assert "cannot be resolved to a commit" in caplog.text and "hf://datasets/o/n/a.jsonl" in caplog.text


def test_a_pinned_upstream_is_read_at_its_pin():
    request = MirrorRequest("nestful", configs=["unified"])
    assert build_module.pin_upstream_revision(request, resolve=lambda *args: 1 / 0) is request


def test_a_split_whose_rows_were_all_skipped_keeps_its_counts_in_manifest_and_card(tmp_path):
    from tooluse_datasets.mirror import read_manifest

    good = tmp_path / "good.jsonl"
    good.write_text(Path(td.sample_files("nestful")["train"][0]).read_text())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sample_id": "x", "input": "q", "output": "[truncated", "tools": "[]"}) + "\n")
    folder = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files={"train": [str(good)],
                                                                                   "broken": [str(bad)]}),
                          tmp_path / "out")
    entry = read_manifest(folder).configs["unified"]
    assert list(entry.splits) == ["train"]
    assert entry.omitted_splits["broken"]["skipped"] == 1
    assert entry.omitted_splits["broken"]["by_reason"] == {"InvalidJsonError:output": 1}
    card = (folder / "README.md").read_text()
    assert "broken (not published: every row skipped)" in card and "InvalidJsonError:output" in card


def test_every_skipped_row_can_be_listed_beside_a_mirror_build(tmp_path):
    """The manifest keeps counts and five examples per split; --skipped-rows lists every skipped row."""
    from tooluse_datasets.cli import main

    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join([good[0], '{"sample_id": "x", "input": "trunc', good[1], "[1, 2]", good[2]]) + "\n")
    listing = tmp_path / "skipped.jsonl"
    assert main(["mirror", "nestful", "--data-files", str(data), "--out", str(tmp_path / "out"),
                 "--configs", "unified", "toolmind", "--skipped-rows", str(listing)]) == 0
    rows = [json.loads(line) for line in listing.read_text().splitlines()]
    unified = [(r["row"], r["error"]) for r in rows if r["config"] == "unified"]
    assert unified == [(1, "InvalidJsonError"), (3, "InvalidJsonError")]
    toolmind = [r for r in rows if r["config"] == "toolmind"]  # NESTFUL rows have no results: every row skipped
    assert sorted(r["row"] for r in toolmind) == [0, 1, 2, 3, 4] and {r["split"] for r in rows} == {"train"}
    manifest = read_manifest(tmp_path / "out" / "nestful")
    assert manifest.configs["unified"].splits["train"].skipped["skipped"] == len(unified)



def test_a_skipped_rows_listing_cut_off_midway_leaves_the_previous_complete_one(tmp_path, monkeypatch):
    """--skipped-rows was written straight to its name: a build stopped while listing (Ctrl-C, a full disk) left a
    truncated list there, which read as the complete list of a build. It is now written aside and renamed."""
    from conftest import shared_data

    good = [line for f in sorted(shared_data("ms_swift").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    data = tmp_path / "agent.jsonl"
    data.write_text("\n".join(line for row in good for line in (row, '{"messages": [')) + "\n")
    listing = tmp_path / "skipped.jsonl"
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=[str(data)], skipped_rows=str(listing))
    build_mirror(request, tmp_path / "out")
    complete = listing.read_bytes()
    assert len(complete.splitlines()) == len(good)

    written = []
    original = build_module.json_text_bytes

    def interrupted(record):
        written.append(record)
        if len(written) == 3:
            raise KeyboardInterrupt
        return original(record)

    monkeypatch.setattr(build_module, "json_text_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_mirror(request, tmp_path / "out")
    assert listing.read_bytes() == complete
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.jsonl", "out", "skipped.jsonl"]

def test_a_row_that_cannot_be_read_is_logged_once_however_many_configs_skip_it(tmp_path, caplog):
    good = Path(td.sample_files("nestful")["train"][0]).read_text().splitlines()
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join([good[0], '{"sample_id": "x", "input": "trunc', good[1]]) + "\n")
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        build_mirror(MirrorRequest("nestful", configs=["unified", "raw", "swift"], data_files=[str(data)]),
                     tmp_path / "out")
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped row")]
    assert len(logged) == 1 and "row 1" in logged[0]


def test_raw_config_keeps_rows_whose_unified_conversion_fails_as_loading_raw_does(tmp_path, cache_dir):
    """NESTFUL v1 (real upstream files): 16 rows read fine as raw rows but fail their unified conversion (a
    call to a tool missing from the specs, a reused label, an undefined reference). Loading the raw config
    keeps them, and so must the mirror's raw config: a mirror converts to unified anyway, for its statistics."""
    from datasets import load_dataset

    from conftest import shared_data

    files = {group: [str(shared_data("nestful", "data_v1", *p.split("/"))) for p in paths] for group, paths in {
        "glaive": ("non-executable/non-executable-glaive-data.json", "non-executable/non-executable-glaive-spec.json"),
        "sgd": ("non-executable/non-executable-sgd-data.json", "non-executable/non-executable-sgd-spec.json"),
    }.items()}
    request = MirrorRequest("nestful", configs=["unified", "raw"], data_files=files,
                            source_options={"data_version": "v1"})
    folder = build_mirror(request, tmp_path / "out")
    manifest = read_manifest(folder)
    for split in ("glaive", "sgd"):
        raw = list(td.load("nestful", "raw", split=split, data_files=files, data_version="v1", cache_dir=cache_dir))
        unified = list(td.load("nestful", split=split, data_files=files, data_version="v1", on_error="skip",
                               cache_dir=cache_dir))
        assert len(raw) > len(unified)  # the upstream defects are rows of raw, not of unified
        mirrored = list(td.exact(load_dataset(str(folder), "raw", split=split, cache_dir=cache_dir)))
        assert mirrored == raw, split
        assert manifest.configs["raw"].splits[split].skipped["skipped"] == 0
        assert manifest.configs["unified"].splits[split].num_examples == len(unified)
        assert manifest.configs["unified"].splits[split].skipped["skipped"] == len(raw) - len(unified)


def test_a_raw_only_mirror_with_on_error_raise_builds_what_loading_raw_with_raise_gives(tmp_path, cache_dir):
    """Its unified rows are converted only for the card's statistics: a row failing there alone (real NESTFUL
    v1 defects) is counted in them, not raised, while a mirror that writes unified still stops at it."""
    from datasets import load_dataset

    from conftest import shared_data

    files = {"glaive": [str(shared_data("nestful", "data_v1", "non-executable", f"non-executable-glaive-{part}.json"))
                        for part in ("data", "spec")]}
    raw = list(td.load("nestful", "raw", split="glaive", data_files=files, data_version="v1", on_error="raise",
                       cache_dir=cache_dir))
    folder = build_mirror(MirrorRequest("nestful", configs=["raw"], data_files=files, on_error="raise",
                                        source_options={"data_version": "v1"}), tmp_path / "raw_only")
    assert list(td.exact(load_dataset(str(folder), "raw", split="glaive", cache_dir=cache_dir))) == raw
    with pytest.raises(td.ToolUseDataError):
        build_mirror(MirrorRequest("nestful", configs=["raw", "unified"], data_files=files, on_error="raise",
                                   source_options={"data_version": "v1"}), tmp_path / "both")


def test_mirror_of_a_split_the_data_lacks_names_the_splits_it_has(tmp_path, capsys):
    from tooluse_datasets.cli import main

    assert main(["mirror", "nestful", "--sample", "--split", "nope", "--out", str(tmp_path / "m")]) == 2
    assert "nestful: no split 'nope' in the data; its splits here: train" in capsys.readouterr().err


@pytest.mark.parametrize("sources", [["ms_swift"], ["all"]], ids=["one", "all"])
def test_mirror_of_a_misspelled_split_suggests_the_split_meant(tmp_path, capsys, sources):
    """show and stats say which split a typo meant; mirror only listed the splits there are."""
    out = tmp_path / "m"
    assert main(["mirror", *sources, "--sample", "--split", "when2call" if sources == ["all"] else "trian",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    if sources == ["all"]:
        assert "toolmind (did you mean 'When2Call'? its splits: " in err and "nestful (its splits: train)" in err
    else:
        assert "ms_swift: no split 'trian' in the data (did you mean 'train'?); its splits here: train" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("split", ["all", "ALL", "train+all"])
@pytest.mark.parametrize("sources", [["ms_swift"], ["all"]], ids=["one", "all"])
def test_mirror_split_all_says_to_leave_split_out(tmp_path, capsys, split, sources):
    """`--split all` (datasets' keyword for every split) was "no split 'all' in the data", as for a typo: it says
    what to do instead. Nothing is built."""
    out = tmp_path / "m"
    assert main(["mirror", *sources, "--sample", "--split", split, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"split (--split) {split!r}: 'all' names every split" in err and "leave it out" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
    with pytest.raises(MirrorError, match=r"^split \(--split\) .*leave it out"):
        build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=td.sample_files("ms_swift"),
                                   split=split), tmp_path / "p")
    assert not (tmp_path / "p" / "ms_swift").exists()


@pytest.mark.parametrize("split", ["", "train+", "+train"])
def test_mirror_request_with_an_empty_split_name_is_refused_as_load_refuses_it(split):
    """The command line refuses `--split train+`; MirrorRequest(split="train+") was "no split '' in the data"."""
    with pytest.raises(MirrorError, match=f"^split={re.escape(repr(split))} has an empty split name"):
        MirrorRequest("ms_swift", configs=["unified"], data_files=td.sample_files("ms_swift"), split=split)


def test_mirror_of_several_splits_named_with_a_plus_keeps_each_as_its_own_split(tmp_path, capsys, cache_dir):
    """`--split a+b` reads both splits in every command; mirror said "no split 'a+b' in the data" while listing
    both among the splits it has. Each is a split of the mirror, loading as `td.load` gives it."""
    out = tmp_path / "m"
    assert main(["mirror", "toolmind", "--sample", "--split", "tau_train+When2Call", "--configs", "unified",
                 "--out", str(out)]) == 0
    folder = out / "toolmind"
    manifest = read_manifest(folder)
    assert list(manifest.configs["unified"].splits) == ["When2Call", "tau_train"]  # the source's order
    assert list(manifest.statistics) == ["When2Call", "tau_train"]
    for split in ("When2Call", "tau_train"):
        assert mirror_rows(folder, "unified", split, streaming=False, cache_dir=cache_dir) == \
            reference_rows("toolmind", "unified", split, cache_dir)
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "mirror toolmind --sample --split tau_train+When2Call --configs unified" in card
    assert "the splits `When2Call`, `tau_train` only" in card
    # a part the data lacks is named alone, with the splits there are
    assert main(["mirror", "toolmind", "--sample", "--split", "When2Call+nope", "--out", str(tmp_path / "n")]) == 2
    assert "toolmind: no split 'nope' in the data; its splits here: synthetic," in capsys.readouterr().err
    # several sources lacking different parts of it: each named with the part it lacks, nothing built
    assert main(["mirror", "all", "--sample", "--split", "When2Call+train", "--configs", "unified",
                 "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "nestful (no 'When2Call'; its splits: train)" in err and "toolmind (no 'train'; its splits:" in err
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())


@pytest.mark.parametrize("repo_id, message", [
    ("https://huggingface.co/datasets/acme/ms_swift", "is an address: give the dataset repo's id alone, 'acme/ms_swift'"),
    ("models/acme/ms_swift", "names a model repo"),
    ("acme tools/ms_swift", "is not of the form '<org or user>/<name>'"),
    ("acme/ms_swift!", "is not a name the Hub takes"),
    ("", "repo id '' is not of the form '<org or user>/<name>'"),  # (an unset shell variable: was taken as none)
])
def test_a_repo_id_the_hub_does_not_take_is_refused_before_building(repo_id, message, tmp_path, capsys):
    """The card's loading snippets name --repo-id: one the Hub does not take wrote a card whose every snippet
    fails (load_dataset("https://...")), with no word. Refused as publish refuses it, before anything is built."""
    out = tmp_path / "m"
    assert main(["mirror", "ms_swift", "--sample", "--configs", "unified", "--repo-id", repo_id,
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "--repo-id" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())
    with pytest.raises(MirrorError, match=r"^repo_id \(--repo-id\): "):  # its name in Python too (was --repo-id)
        MirrorRequest("ms_swift", repo_id=repo_id)
    # {source} is replaced before the id is checked
    assert main(["mirror", "ms_swift", "nestful", "--sample", "--configs", "unified", "--repo-id",
                 "acme/{source}-tooluse", "--out", str(out)]) == 0
    assert 'load_dataset("acme/nestful-tooluse", "unified"' in (out / "nestful" / "README.md").read_text()


def test_source_in_a_python_requests_repo_id_and_listing_is_filled_as_the_command_line_fills_it(tmp_path):
    """MirrorRequest(repo_id="acme/{source}-tooluse") was refused as a name the Hub does not take, and
    skipped_rows="{source}.jsonl" listed the skipped rows in a file of that very name."""
    data = _sample_with_a_broken_line(tmp_path)
    listing = tmp_path / "{source}-skipped.jsonl"
    folder = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=[str(data)],
                                        repo_id="acme/{source}-tooluse", skipped_rows=listing), tmp_path / "out")
    assert 'load_dataset("acme/nestful-tooluse", "unified"' in (folder / "README.md").read_text()
    assert not listing.exists()
    assert [json.loads(line)["file"] for line in (tmp_path / "nestful-skipped.jsonl").read_text().splitlines()] \
        == [str(data)]


def test_a_repo_id_without_source_for_several_sources_is_refused_before_building(tmp_path, capsys):
    """`mirror ms_swift nestful --repo-id acme/tools` wrote both cards with loading snippets of the one repo
    acme/tools (which publish refuses for a folder of mirrors), as --skipped-rows is refused without {source}."""
    out = tmp_path / "m"
    assert main(["mirror", "ms_swift", "nestful", "--sample", "--configs", "unified", "--repo-id", "acme/tools",
                 "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("error: --repo-id names one repo per source: put '{source}' in it, e.g. "
                                       "acme/tools-{source}\n")
    assert not out.exists()


@pytest.mark.parametrize("input_args", [["--sample"], ["--data-files", "SAMPLE"]])
@pytest.mark.parametrize("revision", ["main", "0123456789abcdef0123456789abcdef01234567"])
def test_a_revision_with_data_files_is_refused_instead_of_named_in_the_card(input_args, revision, tmp_path, capsys):
    """--revision picks the upstream revision to read; the sample or data files are read as they are. The mirror
    was built from them all the same, and its card said "Upstream: IBM/NESTFUL at revision `main`" (or the commit
    given), data the mirror does not hold, with `main` not even resolved to a commit."""
    if input_args[-1] == "SAMPLE":
        input_args = [input_args[0], *(str(p) for p in td.sample_files("nestful")["train"])]
    out = tmp_path / "m"
    assert main(["mirror", "nestful", *input_args, "--revision", revision, "--configs", "unified",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--revision" in err and "read as they are" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())
    with pytest.raises(MirrorError, match=r"^nestful: revision \(--revision\) .*data_files / --data-files"):
        build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=td.sample_files("nestful"),
                                   revision=revision), tmp_path / "p")


def _sample_splits(source: str, cache_dir: str) -> list[str]:
    return list(td.load(source, "unified", data_files=td.sample_files(source), cache_dir=cache_dir))


@pytest.mark.parametrize("split", ["train", "synthetic"])
def test_mirror_all_with_a_split_some_sources_lack_builds_nothing_and_names_every_one(tmp_path, capsys, cache_dir,
                                                                                       split):
    """Every source is checked before any is built: ``mirror all --split S`` used to build the sources that have
    S, then stop at the first that has not, naming only that one."""
    lacking = {s: _sample_splits(s, cache_dir) for s in source_names()}
    lacking = {s: splits for s, splits in lacking.items() if split not in splits}
    assert lacking and len(lacking) < len(source_names())  # some sources have the split, some have not
    out = tmp_path / "out"
    rc = main(["mirror", "all", "--sample", "--split", split, "--configs", "unified", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert not out.exists() or not any(out.iterdir()), "a source was built before the command refused"
    for source, splits in lacking.items():
        assert f"{source} (its splits: {', '.join(splits)})" in err
    for source in set(source_names()) - set(lacking):
        assert f"{source} (its splits" not in err
    assert "nothing was built" in err


def test_mirror_of_several_sources_data_files_with_a_split_one_lacks_builds_nothing(tmp_path, capsys, cache_dir):
    items = [f"nestful={p}" for p in td.sample_files("nestful")["train"]] + \
        [f"toolmind={p}" for p in td.sample_files("toolmind")["train"]]
    out = tmp_path / "out"
    rc = main(["mirror", "nestful", "toolmind", "--data-files", *items, "--split", "train", "--configs", "unified",
               "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert not out.exists() or not any(out.iterdir())
    assert f"toolmind (its splits: {', '.join(_sample_splits('toolmind', cache_dir))})" in err
    assert "nestful (its splits" not in err
    # the sources that have it still mirror, as the message advises
    assert main(["mirror", "nestful", "--data-files", *td.sample_files("nestful")["train"], "--split", "train",
                 "--configs", "unified", "--out", str(out)]) == 0


# A build killed (os._exit: no finally, no except) between moving the old mirror aside and moving the new one in.
KILLED_BETWEEN_RENAMES = """
import os, sys
import tooluse_datasets as td
from tooluse_datasets.mirror import MirrorRequest, build_mirror, staging

rename = os.rename
def rename_then_die(src, dst):
    if str(src).endswith(".nestful.partial"):
        os._exit(9)
    rename(src, dst)
staging.os.rename = rename_then_die
build_mirror(MirrorRequest("nestful", configs=sys.argv[2].split(","), data_files=td.sample_files("nestful")),
             sys.argv[1])
"""


def _kill_between_renames(out: Path, configs: list[str]) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out), ",".join(configs)],
                          capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    names = sorted(p.name for p in out.iterdir())
    assert "nestful" not in names and ".nestful.partial" in names and any(".nestful.old-" in n for n in names)


def _shas(folder: Path) -> dict[str, str]:
    return {rel: _sha(folder / rel) for rel in mirror_files(folder)}


def test_a_build_killed_between_its_renames_is_completed_by_the_next_build(tmp_path, monkeypatch):
    out = tmp_path / "out"
    build_sample_mirror("nestful", out, configs=["unified"])
    _kill_between_renames(out, ["unified", "raw"])
    clean = build_sample_mirror("nestful", tmp_path / "clean", configs=["unified", "raw"])
    # the staged mirror was complete: the next build moves it in (its data are what a clean build writes)
    calls = count_calls(monkeypatch, build_module.Staging, "commit")
    folder = build_sample_mirror("nestful", out, configs=["unified", "raw"])
    assert calls["commit"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]
    assert _shas(folder) == _shas(clean)


def test_a_build_killed_between_its_renames_is_put_back_by_publish(tmp_path):
    from fake_hub import FakeHubApi
    from tooluse_datasets.publish import find_mirrors, publish_mirror

    out = tmp_path / "out"
    old = _shas(build_sample_mirror("nestful", out, configs=["unified"]))
    new = _shas(build_sample_mirror("nestful", tmp_path / "new", configs=["unified", "raw"]))
    _kill_between_renames(out, ["unified", "raw"])
    assert find_mirrors(out) == {"nestful": out / "nestful"}  # a folder of mirrors: the staged one moved in
    assert sorted(p.name for p in out.iterdir()) == ["nestful"] and _shas(out / "nestful") == new

    # a staged mirror that is not complete is never moved in: the old mirror is put back
    out2 = tmp_path / "out2"
    build_sample_mirror("nestful", out2, configs=["unified"])
    _kill_between_renames(out2, ["unified", "raw"])
    (out2 / ".nestful.partial" / "raw" / "train-00000-of-00002.parquet").unlink()
    result = publish_mirror(out2 / "nestful", "org/nestful", api=FakeHubApi(), dry_run=True, echo=lambda _: None)
    assert _shas(out2 / "nestful") == old
    assert sorted(f.path for f in result.plan.additions) == sorted(old)
    assert not any(".nestful.old-" in p.name for p in out2.iterdir())


# A build paused between its renames (old mirror moved aside, if any; staged mirror not yet moved in) until the
# test lets it go: a live swap, which a recovery in another process must wait for, not take for a stopped one.
PAUSED_BETWEEN_RENAMES = """
import os, sys, time
import tooluse_datasets as td
from tooluse_datasets.mirror import MirrorRequest, build_mirror, staging

out, paused, go = sys.argv[1], sys.argv[2], sys.argv[3]
rename = os.rename
def rename_after_go(src, dst):
    if str(src).endswith(".nestful.partial"):
        open(paused, "w").close()
        while not os.path.exists(go):
            time.sleep(0.05)
    rename(src, dst)
staging.os.rename = rename_after_go
build_mirror(MirrorRequest("nestful", configs=["unified", "raw"], data_files=td.sample_files("nestful")), out)
"""


@pytest.mark.parametrize("replacing", [True, False], ids=["replacing-a-mirror", "first-build"])
def test_a_recovery_waits_for_a_live_swap_instead_of_taking_it_over(tmp_path, replacing):
    import subprocess
    import sys
    import threading
    import time

    from tooluse_datasets.mirror.staging import recover_swap

    out = tmp_path / "out"
    if replacing:
        build_sample_mirror("nestful", out, configs=["unified"])
    new = _shas(build_sample_mirror("nestful", tmp_path / "new", configs=["unified", "raw"]))
    paused, go = tmp_path / "paused", tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_BETWEEN_RENAMES, str(out), str(paused), str(go)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not paused.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        # mid-swap: no mirror at out/nestful, the staged one complete beside it (what a stopped build leaves)
        during = sorted(p.name for p in out.iterdir() if not p.name.endswith(".lock"))
        assert "nestful" not in during and ".nestful.partial" in during
        recovery = threading.Thread(target=recover_swap, args=(out / "nestful",))
        recovery.start()
        recovery.join(1.5)
        assert recovery.is_alive()  # waiting for the build's swap
        assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".lock")) == during
        go.touch()
        recovery.join(60)
        assert not recovery.is_alive()
        _, stderr = proc.communicate(timeout=120)
    finally:
        go.touch()
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 0, stderr  # the build finished its own swap (no OSError from a rename taken over)
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]
    assert _shas(out / "nestful") == new


def test_reading_a_mirror_a_build_was_stopped_replacing_says_what_is_left_and_what_to_run(tmp_path):
    from tooluse_datasets import mirror

    out = tmp_path / "out"
    build_sample_mirror("nestful", out, configs=["unified"])
    _kill_between_renames(out, ["unified", "raw"])
    left = sorted(p.name for p in out.iterdir() if not p.name.endswith(".lock"))
    with pytest.raises(mirror.StoppedSwapError) as caught:
        mirror.read_manifest(out / "nestful")
    message = str(caught.value)
    old = next(name for name in left if ".nestful.old-" in name)
    assert ".nestful.partial (the new mirror, staged)" in message and f"{old} (the old one, moved aside)" in message
    assert "tooluse-datasets mirror" in message and "recover_swap" in message
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".lock")) == left  # a reader moves nothing
    # what the message says to run puts the complete (new) mirror in place
    mirror.recover_swap(out / "nestful")
    assert sorted(mirror.read_manifest(out / "nestful").configs) == ["raw", "unified"]
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]
    # a folder that is simply not there, nothing beside it: the usual message
    with pytest.raises(mirror.MirrorError, match="toolmind does not exist") as caught:
        mirror.read_manifest(out / "toolmind")
    assert not isinstance(caught.value, mirror.StoppedSwapError)


@pytest.mark.parametrize("folder", ["it's a \"mirror\" of $HOME", "back\\slash `x` $(false)"])
def test_the_recovery_line_a_stopped_swap_suggests_runs_in_the_shell_for_any_path(tmp_path, folder):
    """The message's ``python -c ...`` line for a mirror in a folder whose name holds quotes, ``$`` or spaces: the
    path was put in double quotes as Python's repr, which the shell ended early or expanded (`$HOME`)."""
    import os
    import subprocess
    import sys

    from tooluse_datasets import mirror

    out = tmp_path / folder / "out"
    build_sample_mirror("nestful", out, configs=["unified"])
    _kill_between_renames(out, ["unified", "raw"])
    with pytest.raises(mirror.StoppedSwapError) as caught:
        mirror.read_manifest(out / "nestful")
    line = str(caught.value).partition("to do only that: ")[2]
    assert line.startswith("python -c ")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # this python
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # it did what the message says: the complete (new) mirror in place, nothing left beside it
    assert sorted(mirror.read_manifest(out / "nestful").configs) == ["raw", "unified"]
    assert sorted(p.name for p in out.iterdir()) == ["nestful"]


@pytest.mark.parametrize("vanishes", ["after its first stat", "before any stat"])
def test_an_old_mirror_deleted_by_another_build_while_listed_is_skipped(tmp_path, monkeypatch, vanishes):
    """moved_aside_paths lists old mirrors without the swap lock (a reader naming what a stopped swap left): one
    that another build's recovery deletes between the listing and the stat is skipped, never a raw
    FileNotFoundError."""
    import os
    import shutil

    from tooluse_datasets.mirror import hidden_paths

    target = tmp_path / "nestful"
    kept, gone = tmp_path / ".nestful.old-111", tmp_path / ".nestful.old-222"
    kept.mkdir()
    gone.mkdir()
    stat = Path.stat

    def stat_while_deleted(self, *args, **kwargs):
        if self != gone or not os.path.exists(self):
            return stat(self, *args, **kwargs)
        if vanishes == "before any stat":
            shutil.rmtree(gone)
            return stat(self, *args, **kwargs)
        info = stat(self, *args, **kwargs)
        shutil.rmtree(gone)  # the other build's recovery, just after this process looked at it
        return info

    monkeypatch.setattr(Path, "stat", stat_while_deleted)
    listed = hidden_paths.moved_aside_paths(target)
    assert kept in listed and not gone.exists()
    assert kept in hidden_paths.stopped_swap_leftovers(target)


def test_reading_a_mirror_whose_first_build_was_interrupted_is_not_taken_for_a_stopped_swap(tmp_path):
    """A first build interrupted before its swap (Ctrl-C while writing the card) keeps its unfinished staging folder
    to resume from. Reading the mirror said a build was stopped while replacing it and that ``recover_swap`` puts
    the staged mirror in place, which it rightly does not (the staged build is unfinished): the same advice again
    after following it."""
    from tooluse_datasets import mirror

    out = tmp_path / "out"
    stop_a_first_build("nestful", out)
    assert sorted(p.name for p in out.iterdir()) == [".nestful.partial"]  # kept to resume from
    mirror.recover_swap(out / "nestful")  # an unfinished build is never moved in
    with pytest.raises(mirror.MirrorError, match="nestful does not exist: a build of it stopped before it was done "
                                                 r"\(.nestful.partial holds it\): run the build again") as caught:
        mirror.read_manifest(out / "nestful")
    assert not isinstance(caught.value, mirror.StoppedSwapError)
    # running the build again finishes it
    assert list(mirror.read_manifest(build_sample_mirror("nestful", out, configs=["unified"])).configs) == ["unified"]



def test_reading_a_mirror_whose_first_build_is_running_says_it_runs_not_that_it_stopped(tmp_path):
    """Its staging folder locked by the build writing it: reading the mirror said the build had stopped and to run
    it again, which a running build refuses ("another build is writing")."""
    from tooluse_datasets import mirror

    out = tmp_path / "out"
    stop_a_first_build("nestful", out)
    with holding_the_build_lock(out / ".nestful.partial"):
        with pytest.raises(mirror.MirrorError) as caught:
            mirror.read_manifest(out / "nestful")
        assert str(caught.value).endswith("nestful does not exist: a build of it is running now: use it when it is "
                                          "done")
    with pytest.raises(mirror.MirrorError, match="a build of it stopped before it was done"):  # it stopped
        mirror.read_manifest(out / "nestful")


def test_publishing_the_folder_of_a_first_build_interrupted_names_the_stopped_build(tmp_path):
    """The same folder given to publish as a folder of mirrors was only "neither a mirror nor a folder of mirrors (no
    .tooluse-datasets.json found)", where publish of the mirror itself says a build of it stopped before it was done."""
    from tooluse_datasets.publish import PublishError, find_mirrors

    out = tmp_path / "out"
    stop_a_first_build("nestful", out)
    with pytest.raises(PublishError, match=r"no \.tooluse-datasets\.json found\); builds stopped before they were "
                                           r"done left \.nestful\.partial: run them again to finish them"):
        find_mirrors(out)

def test_input_files_reached_through_links_are_named_as_given_like_the_rows_ids(tmp_path):
    """Files downloaded with huggingface_hub are links in a snapshot folder to blobs named by their hash: the card
    and manifest named each input by the blob's hash (the link resolved), while the rows' ids and subsets name the
    file as given; and a rebuild from the listed inputs could not find them."""
    from conftest import shared_data

    blobs, snapshot = tmp_path / "cache" / "blobs", tmp_path / "cache" / "snapshots" / "0123abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    given = {"agent_en.jsonl": "agent_support_doc_examples_en.jsonl",
             "custom_rows.jsonl": "custom_dataset_doc_agent_rows_en.jsonl"}
    for name, real in given.items():
        data = (shared_data("ms_swift") / real).read_bytes()
        blob = blobs / hashlib.sha1(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob.name))
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=sorted(str(snapshot / n) for n in given))
    folder = build_mirror(request, tmp_path / "out")
    inputs = read_manifest(folder).provenance.inputs
    assert [i.name for i in inputs] == sorted(given)
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert all(f"| `{name}` |" in card for name in given)
    subsets = {row["subset"] for row in td.load("ms_swift", split="train", data_files=request.data_files)}
    assert {f"{s}.jsonl" for s in subsets} == set(given)  # the names the rows give the files


def test_input_with_no_row_to_mirror_is_one_error_line(tmp_path, capsys):
    """An empty file (or one whose every row is bad) printed a warning per config that it was left out of the
    mirror, then an error repeating each config's counts as a Python dict: six lines saying one thing."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["mirror", "ms_swift", "--data-files", str(empty), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: ms_swift: no config has any row: 0 rows read, none skipped"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main(["mirror", "ms_swift", "--data-files", str(bad), "--configs", "unified", "raw",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: ms_swift: no config has any row: 1 row read, 1 skipped (InvalidJsonError:<line> x1)"
    assert not any("left out of the mirror" in line for line in err)  # (the row's own warning may come first)
    # configs left empty for different reasons are each named
    assert main(["mirror", "nestful", "--sample", "--configs", "toolmind", "--out", str(tmp_path / "out")]) == 2
    assert "no config has any row: 5 rows read, 5 skipped (ConversionError:" in capsys.readouterr().err


def test_every_skipped_row_is_listed_when_no_row_is_left_to_mirror(tmp_path, capsys):
    """A build whose rows were all skipped (NESTFUL rows have no tool results, which ToolMind needs) stopped with
    counts only, before writing --skipped-rows: the listing of every row and why was lost exactly when it was
    needed (on Ray the per-row warnings stay on the workers)."""
    from tooluse_datasets.cli import main

    listing = tmp_path / "skipped.jsonl"
    assert main(["mirror", "nestful", "--sample", "--out", str(tmp_path / "out"), "--configs", "toolmind",
                 "--skipped-rows", str(listing)]) == 2
    assert "no config has any row" in capsys.readouterr().err
    rows = [json.loads(line) for line in listing.read_text().splitlines()]
    read = [list(td.load("nestful", "raw", split="train", data_files={"train": [f]})) for f in
            td.sample_files("nestful")["train"]]
    assert len(rows) == sum(map(len, read)) and {r["config"] for r in rows} == {"toolmind"}
    assert all(r["file"] and r["row"] is not None and r["field"] for r in rows)
    assert not (tmp_path / "out" / "nestful").exists()


def test_a_skipped_rows_listing_inside_the_mirror_folder_is_refused_before_building(tmp_path, capsys):
    """--skipped-rows out/<source>/skipped.jsonl was written into the folder the build then replaces whole: the
    listing was deleted with the old mirror and the command said nothing (exit 0)."""
    from tooluse_datasets.cli import main

    out = tmp_path / "out"
    for listing in (out / "nestful" / "skipped.jsonl", out / "nestful" / "unified" / "skipped.jsonl"):
        rc = main(["mirror", "nestful", "--sample", "--out", str(out), "--configs", "unified", "toolmind",
                   "--skipped-rows", str(listing)])
        err = capsys.readouterr().err
        assert rc == 2 and "skipped_rows (--skipped-rows)" in err and str(listing) in err, err
        assert not out.exists() or not any(out.iterdir())  # nothing built
    beside = out / "nestful-skipped.jsonl"  # beside the mirror is fine
    assert main(["mirror", "nestful", "--sample", "--out", str(out), "--configs", "unified", "toolmind",
                 "--skipped-rows", str(beside)]) == 0
    assert len(beside.read_text().splitlines()) == 5  # NESTFUL rows have no results: every row skipped in toolmind


@pytest.mark.parametrize("given", ["the file", "a link to it"])
def test_a_skipped_rows_listing_that_is_an_input_file_is_refused_before_building(tmp_path, given):
    """MirrorRequest(skipped_rows=<a data file it reads>): the listing was written over that file once its rows were
    read, and the user's input was lost (the command line refuses it; the Python API built the mirror)."""
    data = tmp_path / "agent.jsonl"
    data.write_bytes(Path(td.sample_files("ms_swift")["train"][0]).read_bytes() + b"not json\n")
    listing = data if given == "the file" else tmp_path / "link.jsonl"
    if given == "a link to it":
        listing.symlink_to(data)
    before = data.read_bytes()
    with pytest.raises(MirrorError, match=rf"skipped_rows {re.escape(repr(str(listing)))} is one of the data "
                                        rf"files read") as refused:
        build_mirror(MirrorRequest("ms_swift", configs=["raw"], data_files=str(data), skipped_rows=str(listing)),
                     tmp_path / "out")
    assert repr(str(data)) in str(refused.value)  # the data file it is, by a link too
    assert data.read_bytes() == before
    assert not (tmp_path / "out" / "ms_swift").exists()


def test_a_skipped_rows_listing_that_is_a_folder_is_refused_before_building(tmp_path):
    """MirrorRequest(skipped_rows=<a folder>) converted every row, then failed with IsADirectoryError renaming the
    listing there (the command line refuses it before reading)."""
    folder = tmp_path / "listings"
    folder.mkdir()
    with pytest.raises(MirrorError, match=r"skipped_rows \(--skipped-rows\) '.*listings' is a folder: give a file"):
        build_mirror(MirrorRequest("ms_swift", configs=["raw"], data_files=td.sample_files("ms_swift"),
                                   skipped_rows=str(folder)), tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_folder_where_the_skipped_rows_listing_is_written_first_is_refused_before_building(tmp_path, capsys):
    """A folder at the listing's .partial name: every row was converted, then the command failed with
    "IsADirectoryError" naming no argument."""
    (tmp_path / "skipped.jsonl.partial").mkdir()
    assert main(["mirror", "ms_swift", "--sample", "--configs", "raw", "--out", str(tmp_path / "out"),
                 "--skipped-rows", str(tmp_path / "skipped.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "skipped.jsonl.partial', where the listing is written first, is a folder" in err
    assert "IsADirectoryError" not in err and not (tmp_path / "out").exists()


def test_data_files_inside_the_mirror_folder_are_refused_instead_of_read_as_rows(tmp_path, capsys):
    """`--data-files 'data/**/*.parquet' --out data`: the second build read the first mirror's Parquet files as
    input (its `toolmind` config is ToolMind's own format), and the mirror silently held every row twice."""
    data = tmp_path / "data"
    data.mkdir()
    sample, = td.sample_files("toolmind")["train"]
    (data / "toolmind.parquet").write_bytes(Path(sample).read_bytes())
    args = ["mirror", "toolmind", "--data-files", str(data / "**" / "*.parquet"), "--out", str(data),
            "--configs", "unified", "toolmind"]
    assert main(args) == 0
    manifest = data / "toolmind" / MANIFEST_NAME
    before = manifest.read_bytes()
    rows = sum(e["num_examples"] for e in json.loads(before)["configs"]["unified"]["splits"].values())
    assert rows == pq.read_metadata(data / "toolmind.parquet").num_rows
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the mirror folder" in err and "--data-files" in err, err
    assert str(data / "toolmind" / "toolmind") in err  # names a file of the previous mirror it would read
    assert manifest.read_bytes() == before  # the mirror is left as it was
    with pytest.raises(MirrorError, match="inside the mirror folder"):
        build_mirror(MirrorRequest("toolmind", data_files=str(data / "**" / "*.parquet")), data)
    # the input files alone, into the same folder, rebuild it as before
    assert main([*args[:2], "--data-files", str(data / "*.parquet"), *args[4:]]) == 0
    assert manifest.read_bytes() == before


def test_data_files_inside_another_mirror_of_the_output_folder_are_refused(tmp_path, capsys):
    """With an ms-swift mirror already in `data`, `mirror toolmind --data-files 'data/**/*.parquet' --out data`
    read that mirror's `toolmind` config as ToolMind input: the ToolMind mirror gained ms-swift's rows as splits
    of its own (and counted the other configs' files as skipped rows)."""
    data = tmp_path / "data"
    data.mkdir()
    sample, = td.sample_files("toolmind")["train"]
    (data / "toolmind.parquet").write_bytes(Path(sample).read_bytes())
    assert main(["mirror", "ms_swift", "--sample", "--out", str(data)]) == 0
    capsys.readouterr()
    assert main(["mirror", "toolmind", "--data-files", str(data / "**" / "*.parquet"), "--out", str(data)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"inside the mirror {data / 'ms_swift'} in the output folder" in err, err
    assert not (data / "toolmind").exists()
    assert main(["mirror", "toolmind", "--data-files", str(data / "*.parquet"), "--out", str(data)]) == 0
    assert set(read_manifest(data / "toolmind").configs["unified"].splits) == set(
        _sample_splits("toolmind", str(tmp_path / "cache")))


@pytest.mark.parametrize("name", ["all", "ALL"])
def test_a_split_named_all_is_refused_before_anything_is_built(name, tmp_path, cache_dir):
    """datasets reserves `all` for the union of the splits: a mirror with such a split would be written, and then
    load_dataset would refuse every split of it (a raw ValueError from datasets' builder)."""
    files = td.sample_files("ms_swift")["train"]
    request = MirrorRequest("ms_swift", configs=["unified"], data_files={name: files[:1], "train": files[1:]})
    # (data_files' keys are refused where the builder is made, as load() refuses them; no source names a split
    # `all` itself: ToolMind's split column gives such a value a hashed name)
    with pytest.raises((MirrorError, ValueError), match=f"split '{name}', which datasets reserves"):
        build_mirror(request, tmp_path)
    assert not (tmp_path / "ms_swift").exists()
    # the other splits still mirror, and load
    folder = build_mirror(MirrorRequest("ms_swift", configs=["unified"],
                                        data_files={"every": files[:1], "train": files[1:]}), tmp_path)
    assert len(mirror_rows(folder, "unified", "every", streaming=False, cache_dir=cache_dir)) > 0


def test_a_file_name_that_is_not_utf8_is_mirrored_and_named_with_escapes(tmp_path):
    """A file name of Latin-1 bytes (``caf\\xe9.jsonl``, which Python reads as lone surrogates) crashed the mirror
    with a bare UnicodeEncodeError: its name went into the build's files, the manifest and the skipped rows'
    listing, all UTF-8. Loading names such a file with ``\\xe9`` escapes; so does the mirror, everywhere."""
    import os

    from conftest import shared_data

    rows = shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_bytes()
    files = []
    for folder in (b"a", b"b"):  # two folders: the inputs are named by their path below the one they share
        os.makedirs(os.path.join(os.fsencode(tmp_path), folder))
        name = os.path.join(os.fsencode(tmp_path), folder, b"caf\xe9.jsonl")
        try:
            with open(name, "wb") as f:
                f.write(rows + b"not json\n")
        except OSError:
            pytest.skip("this file system takes no file name that is not UTF-8")
        files.append(os.fsdecode(name))
    listing = tmp_path / "skipped.jsonl"
    folder = build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=files, on_error="skip",
                                        skipped_rows=str(listing)), tmp_path / "out")
    manifest = read_manifest(folder)
    assert sorted(i.name for i in manifest.provenance.inputs) == ["a/caf\\xe9.jsonl", "b/caf\\xe9.jsonl"]
    skipped = [json.loads(line) for line in listing.read_text(encoding="utf-8").splitlines()]
    assert sorted(s["file"] for s in skipped) == [os.path.join(str(tmp_path), d, "caf\\xe9.jsonl") for d in "ab"]
    written = pq.read_table(next((folder / "unified").rglob("*.parquet"))).to_pylist()
    assert written and {row["subset"] for row in written} <= {"a/caf\\xe9", "b/caf\\xe9"}


@pytest.mark.parametrize("source", ["ms_swift", "nestful"])
def test_a_raw_mirror_given_back_as_data_files_loads_the_rows_it_was_built_from(source, tmp_path, cache_dir):
    """A mirror's raw Parquet files read back as the source's input: their Json() cells are the values they hold, as
    the source's JSON files give them. Read as their text, every ms-swift call was refused ('got string') and every
    NESTFUL row ('a call must be a JSON object')."""
    folder = build_sample_mirror(source, tmp_path / "out", configs=["raw"])
    files = sorted(str(path) for path in folder.glob("raw/*.parquet"))
    expected = [(row["messages"], row["tools"]) for row in reference_rows(source, "unified", "train", cache_dir)]
    for streaming in (False, True):
        report = td.SkipReport()
        ds = td.load(source, data_files=files, split="train", streaming=streaming, on_error="skip", report=report,
                     cache_dir=f"{cache_dir}/again")
        assert [(row["messages"], row["tools"]) for row in ds] == expected
        assert (report.rows_read, report.skipped) == (len(expected), 0)


def test_a_null_inside_a_json_cell_of_ms_swift_parquet_is_kept_not_taken_for_struct_padding(tmp_path, cache_dir):
    """ms-swift Parquet leaves out null struct fields (Arrow's padding); a JSON cell's value is no struct: a tool
    parameter's "default": null, stored in a raw mirror's Json() tools, comes back as the JSON file gave it."""
    rows = [json.loads(line) for line in Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()]
    tools = json.loads(rows[0]["tools"])
    tools[0]["function"]["parameters"]["properties"]["base"]["default"] = None
    rows[0]["tools"] = json.dumps(tools)
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    request = MirrorRequest("ms_swift", configs=["raw"], data_files=[str(source)], layout=ParquetLayout())
    files = sorted(str(path) for path in build_mirror(request, tmp_path / "out").glob("raw/*.parquet"))
    (row, *_) = td.load("ms_swift", "raw", data_files=files, split="train", streaming=True)
    assert row["tools"] == tools
