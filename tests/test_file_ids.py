"""Row ids are unique over every file of a load: ms-swift and LLaMA-Factory ids (``<source>/<file>/<row>``) and
ToolMind's with several files (``toolmind/<split value>/<file>/<row>``) name a file by its stem, and files that
share a stem (``a/data.jsonl`` and ``b/data.jsonl``, one name in two zip archives or two Hub repo folders) by
their path below the folder they share (``a/data``): they used to give the same ids, and deduplicating by id
silently lost rows. Every way of reading a load names its rows alike: prepare (also with ``num_proc``),
streaming (with ``num_proc``, resumed, divided by node), the ``all`` mix, one split alone, and mirrors (local
process pool and Ray)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from datasets.distributed import split_dataset_by_node

import tooluse_datasets as td

from conftest import PROJECT_ROOT, shared_data
from mirror_support import build_on_a_callers_ray

SAMPLES = {"ms_swift": PROJECT_ROOT / "builders" / "ms_swift" / "dummy_data" / "agent_rows.jsonl",
           "llamafactory": PROJECT_ROOT / "builders" / "llamafactory" / "dummy_data" / "llamafactory_sample.jsonl"}


def _copies(sample: Path, root: Path, names: list[str]) -> list[str]:
    out = []
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        out.append(str(shutil.copy(sample, root / name)))
    return out


def _ids(rows) -> list[str]:
    return [r["id"] for r in rows]


def _every_way(source: str, data_files, cache_dir: str, **options) -> dict[str, list[str]]:
    """The ids of the ``train`` split read every way a load can be read."""
    out = {}
    for mode, kwargs in {"map": {}, "map_num_proc_2": {"num_proc": 2}, "stream": {"streaming": True},
                         "stream_num_proc_2": {"streaming": True, "num_proc": 2}}.items():
        ds = td.load(source, data_files=data_files, split="train", cache_dir=f"{cache_dir}-{mode}", **kwargs,
                     **options)
        out[mode] = _ids(ds)
    stream = lambda: td.load(source, data_files=data_files, split="train", streaming=True, **options)  # noqa: E731
    out["nodes"] = [i for rank in (0, 1) for i in _ids(split_dataset_by_node(stream(), rank=rank, world_size=2))]
    ds = stream()
    iterator = iter(ds)
    head = [next(iterator)["id"] for _ in range(4)]
    resumed = stream()
    resumed.load_state_dict(ds.state_dict())
    out["resumed"] = head + _ids(resumed)
    return out


@pytest.mark.parametrize("source", ["ms_swift", "llamafactory"])
def test_files_sharing_a_stem_in_two_folders_give_unique_ids_every_way_they_are_read(tmp_path, cache_dir, source):
    sample = SAMPLES[source]
    n = sum(1 for line in sample.read_text().splitlines() if line.strip())
    files = _copies(sample, tmp_path, ["x/a/data.jsonl", "x/b/data.jsonl", "x/c/other.jsonl"])
    # small shards: every file is cut, so workers and nodes read parts of files
    ways = _every_way(source, files, cache_dir, shard_bytes=sample.stat().st_size // 3)
    expected = [f"{source}/{name}/{row}" for name in ("a/data", "b/data", "other") for row in range(n)]
    for way, ids in ways.items():
        assert sorted(ids) == sorted(expected), way
    rows = list(td.load(source, data_files=files, split="train", streaming=True))
    assert Counter(r["subset"] for r in rows) == {"a/data": n, "b/data": n, "other": n}
    # a file whose stem no other file has keeps the id it has when loaded alone
    alone = td.load(source, data_files=files[2], split="train", streaming=True)
    assert [i for i in _ids(rows) if "/other/" in i] == _ids(alone)


def test_paths_spelled_with_dot_folders_give_the_same_ids_and_skip_records_streamed_as_prepared(
        tmp_path, cache_dir, monkeypatch):
    """datasets' map-style download names a local file by its normalized path; the stream kept the pattern's
    spelling: ./a/data.jsonl gave ms_swift/./a/data/0 streamed but ms_swift/a/data/0 prepared, and the skip
    records of a/../b/data.jsonl named /tmp/.../a/../b/data.jsonl."""
    a, b = _copies(SAMPLES["ms_swift"], tmp_path, ["a/data.jsonl", "b/data.jsonl"])
    with open(b, "a") as f:
        f.write("{bad\n")
    monkeypatch.chdir(tmp_path)
    given = ["./a/data.jsonl", "a/../b/data.jsonl"]
    ways = {}
    for streaming in (False, True):
        report = td.SkipReport(keep_all=True)
        rows = list(td.load("ms_swift", data_files=given, split="train", streaming=streaming, cache_dir=cache_dir,
                            on_error="skip", report=report))
        ways[streaming] = ([(r["id"], r["subset"]) for r in rows], [s["file"] for s in report.rows])
    assert ways[True] == ways[False]
    ids, skipped_files = ways[True]
    assert {i.rsplit("/", 1)[0] for i, _ in ids} == {"ms_swift/a/data", "ms_swift/b/data"}
    assert {subset for _, subset in ids} == {"a/data", "b/data"}
    assert skipped_files == [b]


def test_ids_are_unique_across_splits_and_a_split_loaded_alone_keeps_them(tmp_path, cache_dir):
    a, b = _copies(SAMPLES["ms_swift"], tmp_path, ["train/data.jsonl", "test/data.jsonl"])
    data_files = {"train": a, "test": b}
    for streaming in (False, True):
        splits = td.load("ms_swift", data_files=data_files, streaming=streaming, cache_dir=cache_dir)
        by_split = {name: _ids(ds) for name, ds in splits.items()}
        assert not set(by_split["train"]) & set(by_split["test"])
        assert {i.rsplit("/", 1)[0] for i in by_split["test"]} == {"ms_swift/test/data"}
        alone = td.load("ms_swift", data_files=data_files, split="test", streaming=streaming,
                        cache_dir=f"{cache_dir}-alone")
        assert _ids(alone) == by_split["test"]
        concatenated = [i for ids in by_split.values() for i in ids]
        assert len(set(concatenated)) == len(concatenated)


def test_ids_of_real_files_whose_stems_differ_are_unchanged():
    files = sorted(shared_data("ms_swift").glob("*.jsonl"))
    rows = list(td.load("ms_swift", data_files=[str(f) for f in files], split="train", streaming=True))
    expected = [f"ms_swift/{f.stem}/{row}" for f in files
                for row, line in enumerate(f.read_text().splitlines()) if line.strip()]
    assert _ids(rows) == expected and [r["subset"] for r in rows] == [i.split("/")[1] for i in expected]


def test_real_files_copied_into_two_folders_keep_every_row_when_deduplicated_by_id(tmp_path, cache_dir):
    real = sorted(shared_data("ms_swift").glob("*.jsonl"))
    files = [str(shutil.copy(f, (tmp_path / folder).mkdir(exist_ok=True) or tmp_path / folder / f.name))
             for folder in ("v1", "v2") for f in real]
    for streaming in (False, True):
        rows = list(td.load("ms_swift", data_files=files, split="train", streaming=streaming, cache_dir=cache_dir))
        assert len({r["id"]: r for r in rows}) == len(rows)
        assert {r["subset"] for r in rows} == {f"{folder}/{f.stem}" for folder in ("v1", "v2") for f in real}


def test_one_file_name_in_two_zip_archives_gives_unique_ids(tmp_path, cache_dir):
    sample = SAMPLES["ms_swift"].read_bytes()
    archives = []
    for name in ("a", "b"):
        archives.append(str(tmp_path / f"{name}.zip"))
        with zipfile.ZipFile(archives[-1], "w") as z:
            z.writestr("data.jsonl", sample)
    for streaming in (False, True):
        rows = list(td.load("ms_swift", data_files=archives, split="train", streaming=streaming, cache_dir=cache_dir))
        assert _ids(rows) == [f"ms_swift/{name}/data/{row}" for name in "ab" for row in range(3)]


def test_toolmind_files_sharing_a_stem_give_unique_ids_alone_and_in_the_mix(tmp_path, cache_dir):
    sample = Path(td.sample_files("toolmind")["train"][0])
    files = _copies(sample, tmp_path, ["a/data.parquet", "b/data.parquet"])
    alone = {}
    for streaming in (False, True):
        splits = td.load("toolmind", data_files=files, streaming=streaming, cache_dir=cache_dir)
        alone[streaming] = sorted(i for ds in splits.values() for i in _ids(ds))
    assert alone[False] == alone[True]
    assert len(set(alone[True])) == len(alone[True]) == 2 * 21
    assert {i.split("/", 2)[2].rsplit("/", 1)[0] for i in alone[True]} == {"a/data", "b/data"}
    mixed = td.load("all", data_files={"toolmind": files, "ms_swift": [str(SAMPLES["ms_swift"])]}, split="train",
                    streaming=True)
    assert sorted(i for i in _ids(mixed) if i.startswith("toolmind/")) == alone[True]


def test_toolmind_files_of_two_splits_holding_one_split_value_give_unique_ids(tmp_path, cache_dir):
    """ToolMind ids are positions in a file: two files given as two splits, both holding rows of one ``split``
    value, gave each position's id twice (``toolmind/synthetic/0`` in both), though their stems differ."""
    sample = Path(td.sample_files("toolmind")["train"][0])
    x, y = _copies(sample, tmp_path, ["x.parquet", "y.parquet"])
    data_files = {"train": x, "test": y}
    for streaming in (False, True):
        splits = td.load("toolmind", data_files=data_files, streaming=streaming, cache_dir=cache_dir)
        ids = {name: _ids(ds) for name, ds in splits.items()}
        assert len(ids["train"]) == len(ids["test"]) == 21
        assert len(set(ids["train"]) | set(ids["test"])) == 42
        assert all(i.split("/")[2] == "x" for i in ids["train"]) and all(i.split("/")[2] == "y" for i in ids["test"])
        alone = td.load("toolmind", data_files=data_files, split="test", streaming=streaming, cache_dir=cache_dir)
        assert _ids(alone) == ids["test"]
    # One file given for both splits is one file: its rows keep the one-file ids in each.
    once = td.load("toolmind", data_files={"train": x, "test": x}, split="test", cache_dir=cache_dir)
    assert _ids(once) == [f"toolmind/{s}/{i}" for i, s in enumerate(once["subset"])]


def test_ms_swift_files_sharing_a_stem_keep_their_ids_in_the_mix(tmp_path):
    files = _copies(SAMPLES["ms_swift"], tmp_path, ["a/data.jsonl", "b/data.jsonl"])
    alone = _ids(td.load("ms_swift", data_files=files, split="train", streaming=True))
    mixed = _ids(td.load("all", data_files={"ms_swift": files}, split="train", streaming=True))
    assert mixed == alone and len(set(alone)) == 6


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_mirror_of_files_sharing_a_stem_holds_the_ids_a_load_gives(tmp_path, engine):
    from datasets import load_dataset

    from tooluse_datasets.mirror import MirrorRequest, build_mirror

    files = _copies(SAMPLES["ms_swift"], tmp_path / "in", ["a/data.jsonl", "b/data.jsonl"])
    request = MirrorRequest("ms_swift", configs=["unified"], data_files=files,
                            source_options={"shard_bytes": SAMPLES["ms_swift"].stat().st_size // 3})
    if engine == "ray":
        folder = build_on_a_callers_ray(request, tmp_path / "out")
    else:
        folder = build_mirror(request, tmp_path / "out", num_proc=2)
    mirrored = load_dataset(str(folder), "unified", split="train", cache_dir=str(tmp_path / "cache"))
    loaded = _ids(td.load("ms_swift", data_files=files, split="train", streaming=True))
    assert mirrored["id"] == loaded and len(set(loaded)) == 6


def test_file_labels_depend_on_the_paths_alone_and_are_unique():
    from tooluse_datasets.shards.paths import file_labels

    folders = ["/d/x/a/data.jsonl", "/d/x/b/data.jsonl.gz", "/d/y/other.jsonl"]
    assert file_labels(folders) == file_labels(reversed(folders)) == {
        "/d/x/a/data.jsonl": "a/data", "/d/x/b/data.jsonl.gz": "b/data", "/d/y/other.jsonl": "other"}
    # one file given for two splits is one file
    assert file_labels(["/d/a/data.jsonl", "/d/a/data.jsonl"]) == {"/d/a/data.jsonl": "data"}
    # names alike without their suffixes keep them
    same_folder = file_labels(["/d/data.json", "/d/data.jsonl", "/d/data.jsonl.gz"])
    assert sorted(same_folder.values()) == ["data.json", "data.jsonl", "data.jsonl.gz"]
    # URLs differing in their query alone
    queried = file_labels(["https://h/data.jsonl?v=1", "https://h/data.jsonl?v=2"])
    assert len(set(queried.values())) == 2
    # a member of a zip archive is named by the archive
    assert file_labels(["zip://data.jsonl::/d/a.jsonl.zip", "zip://data.jsonl::/d/b.zip"]) == {
        "zip://data.jsonl::/d/a.jsonl.zip": "a.jsonl/data", "zip://data.jsonl::/d/b.zip": "b/data"}
    # a Hub file streamed from its URL and downloaded into huggingface_hub's cache (prepare) has one name, whatever
    # the commit
    streamed = ["hf://datasets/o/r@" + "a" * 40 + "/train/data.jsonl", "hf://datasets/o/r@main/extra/data.jsonl",
                "hf://datasets/o/q/data.jsonl"]
    cached = ["/c/hub/datasets--o--r/snapshots/" + "b" * 40 + "/train/data.jsonl",
              "/c/hub/datasets--o--r/snapshots/" + "b" * 40 + "/extra/data.jsonl",
              "/c/hub/datasets--o--q/snapshots/" + "c" * 40 + "/data.jsonl"]
    assert list(file_labels(streamed).values()) == list(file_labels(cached).values()) == [
        "r/train/data", "r/extra/data", "q/data"]


# --------------------------------------------------------------------------------------------------
# Hub repo folders, served by olah (as in tests/test_hub_olah.py): prepare reads files downloaded into
# huggingface_hub's cache, a stream reads hf:// URLs; both name the rows alike.
# --------------------------------------------------------------------------------------------------

LOADER = textwrap.dedent("""
    import json, sys
    import tooluse_datasets as td

    files = json.loads(sys.argv[1])
    out = {}
    for streaming in (False, True):
        rows = td.load("ms_swift", data_files=files, split="train", streaming=streaming)
        out[str(streaming)] = [[r["id"], r["subset"]] for r in rows]
    sys.stdout.write(json.dumps(out))
""")


def test_hub_files_sharing_a_stem_in_repo_folders_give_unique_ids_prepared_and_streamed(tmp_path):
    pytest.importorskip("olah", reason="olah is not installed (pip install 'tooluse-datasets[test]')")
    from test_hub_olah import (LOADER_TIMEOUT, _free_port, _git_repo_from, _olah_config, _stop,
                               _wait_until_serving)

    assert shutil.which("git"), "git is needed to serve a repository with olah"
    sample = SAMPLES["ms_swift"].read_bytes()
    tag = uuid.uuid4().hex[:10]  # olah caches metadata per name: never reuse one
    repos = {f"tooluse-test/swift-{tag}": ["train/data.jsonl", "extra/data.jsonl"],
             f"tooluse-test/other-{tag}": ["train/data.jsonl"]}
    for repo, paths in repos.items():
        _git_repo_from({path: sample for path in paths}, tmp_path / "mirrors" / "datasets" / repo)
    files = [f"hf://datasets/{repo}/{path}" for repo, paths in repos.items() for path in paths]
    port = _free_port()
    config = _olah_config(tmp_path, port)
    log = tmp_path / "olah.log"
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home"),
           "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_UPDATE_DOWNLOAD_COUNTS": "0", "HF_HUB_DISABLE_XET": "1"}
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN"):
        env.pop(key, None)
    with open(log, "wb") as log_file:
        server = subprocess.Popen([sys.executable, "-m", "olah.server", "-c", str(config)], cwd=tmp_path,
                                  stdout=log_file, stderr=subprocess.STDOUT)
        try:
            for repo in repos:
                _wait_until_serving(f"{endpoint}/api/datasets/{repo}/revision/main", server, log)
            done = subprocess.run([sys.executable, "-c", LOADER, json.dumps(files)], env=env, capture_output=True,
                                  timeout=LOADER_TIMEOUT, cwd=tmp_path)
        finally:
            _stop(server)
    assert done.returncode == 0, done.stderr.decode()[-4000:] + "\nolah log:\n" + log.read_text()[-2000:]
    loaded = json.loads(done.stdout)
    swift, other = (repo.split("/")[1] for repo in repos)
    expected = [[f"ms_swift/{name}/{row}", name] for name in (f"{swift}/train/data", f"{swift}/extra/data",
                                                               f"{other}/train/data") for row in range(3)]
    assert loaded["False"] == loaded["True"] == expected
