"""Cache keys of data that datasets' own key does not list.

Map-style loads of an upstream read at a branch (ToolMind's unpinned ``main``): the Arrow cache is keyed on
the commit the branch points at, so a branch that moved on is read anew instead of served from the cache of
its old commit (which a stream of the same load would not read), and offline the newest cache still serves.
The Hub is simulated: the upstream's files for a revision are local files, and the branch's head commit comes
from a stand-in for the Hub API (the real read path through a local Hub server: tests/test_hub_olah.py).

Loads of a ``data_dir``, whose files are found only when the splits are planned: keyed on those files.
"""
from __future__ import annotations

import dataclasses
import os
import shutil

import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td
from tooluse_datasets import cache_keys, source
from tooluse_datasets.builders.toolmind.source import ToolMindSource
from tooluse_datasets.source import Upstream, UpstreamFile

from conftest import shared_data

OLD, NEW = "a" * 40, "b" * 40


@dataclasses.dataclass(frozen=True)
class LocalHub(Upstream):
    """An upstream whose files at each commit are local files; ``main`` is ``head[0]``, no revision the pin if
    there is one."""

    files_at: dict = dataclasses.field(default_factory=dict)
    head: list = dataclasses.field(default_factory=list)

    def urls(self, revision=None):
        revision = revision or self.revision
        commit = revision if revision not in (None, "main") else self.head[0]
        return {"train": [self.files_at[commit]]}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """ToolMind's upstream at two commits: all 21 sample rows, then the first 10; ``main`` at the first."""
    sample = td.sample_files("toolmind")["train"][0]
    old = tmp_path / "old" / "data.parquet"
    new = tmp_path / "new" / "data.parquet"
    old.parent.mkdir()
    new.parent.mkdir()
    shutil.copy(sample, old)
    pq.write_table(pq.read_table(sample).slice(0, 10), new)
    up = LocalHub(host="hf", repo="someone/toolmind", revision=None,
                  files=(UpstreamFile(split="train", path="data.parquet"),),
                  files_at={OLD: str(old), NEW: str(new)}, head=[OLD])
    return up, _install_upstream(monkeypatch, ToolMindSource, up, "hub_head_commit")


def _install_upstream(monkeypatch, source_class, up: LocalHub, resolver: str) -> list:
    """``up`` as ``source_class``'s upstream, online, its branch heads answered by ``source.<resolver>`` (the
    Hub's or GitHub's lookup, which ``source.head_commit`` chooses by host);
    returns the list of ``(repo, revision)`` looked up."""
    monkeypatch.setattr(source_class, "upstream", up)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    resolved = []

    def head_commit(repo, revision="main"):
        resolved.append((repo, revision))
        return up.head[0]

    monkeypatch.setattr(source, resolver, head_commit)
    return resolved


def _sizes(ds):
    return {name: len(split) for name, split in ds.items()}


def test_a_moved_branch_is_read_anew_not_served_from_the_old_commits_cache(hub, cache_dir):
    up, resolved = hub
    before = td.load("toolmind", cache_dir=cache_dir)
    assert sum(_sizes(before).values()) == 21
    assert td.load("toolmind", split="tau_train", cache_dir=cache_dir)["id"] == ["toolmind/tau-train/19",
                                                                                "toolmind/tau-train/20"]
    up.head[0] = NEW  # main moves on upstream
    after = td.load("toolmind", cache_dir=cache_dir)
    streamed = td.load("toolmind", streaming=True)
    assert _sizes(after) == {"synthetic": 9, "xlam_function_calling_60k": 1}
    assert {name: list(split) for name, split in after.items()} == \
        {name: list(split) for name, split in streamed.items()}
    with pytest.raises(ValueError, match="no split 'tau_train'"):
        td.load("toolmind", split="tau_train", cache_dir=cache_dir)
    assert resolved and all(call == ("someone/toolmind", "main") for call in resolved)


def test_a_revision_given_as_a_branch_name_is_resolved_too(hub, cache_dir):
    up, resolved = hub
    assert sum(_sizes(td.load("toolmind", revision="main", cache_dir=cache_dir)).values()) == 21
    up.head[0] = NEW
    assert sum(_sizes(td.load("toolmind", revision="main", cache_dir=cache_dir)).values()) == 10
    # a full commit id is read as it is, without asking the Hub
    resolved.clear()
    assert sum(_sizes(td.load("toolmind", revision=OLD, cache_dir=cache_dir)).values()) == 21
    assert resolved == []


def test_offline_the_newest_cache_of_the_branch_serves(hub, cache_dir, monkeypatch):
    up, resolved = hub
    td.load("toolmind", cache_dir=cache_dir)
    up.head[0] = NEW
    td.load("toolmind", cache_dir=cache_dir)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    resolved.clear()
    assert _sizes(td.load("toolmind", cache_dir=cache_dir)) == {"synthetic": 9, "xlam_function_calling_60k": 1}
    assert len(td.load("toolmind", split="synthetic", cache_dir=cache_dir)) == 9
    assert resolved == []
    # nothing cached, nor downloaded (here the upstream's files are local ones): the clear offline error
    for path in up.files_at.values():
        os.remove(path)
    with pytest.raises(td.DataNotFoundError, match="offline mode is on"):
        td.load("toolmind", cache_dir=cache_dir + "-empty")


def test_the_hub_unreachable_the_newest_cache_serves(hub, cache_dir, monkeypatch):
    td.load("toolmind", cache_dir=cache_dir)

    def unreachable(repo, revision="main"):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(source, "hub_head_commit", unreachable)
    assert sum(_sizes(td.load("toolmind", cache_dir=cache_dir)).values()) == 21


def test_the_mix_keys_its_cache_on_the_members_commits(hub, cache_dir, monkeypatch):
    """``all`` without data_files reads every member's upstream: ToolMind's moved branch is read anew."""
    from tooluse_datasets.builders.nestful.source import NestfulSource
    from tooluse_datasets.mix import AllSourcesBuilder

    up, _ = hub
    monkeypatch.setattr(NestfulSource, "upstream", None)  # only ToolMind's (simulated) upstream is read
    first = AllSourcesBuilder(cache_dir=cache_dir)
    up.head[0] = NEW
    second = AllSourcesBuilder(cache_dir=cache_dir)
    assert first.cache_dir != second.cache_dir
    assert second.upstream_revision(second.source.member("toolmind")) == NEW


def test_a_data_dir_load_sees_files_edited_or_added_since_it_was_cached(tmp_path, cache_dir):
    """data_dir's files are found when the splits are planned: the cache key holds their names, sizes and
    modification times, so the cache of the folder as it was does not serve it as it is now."""
    folder = tmp_path / "data"
    folder.mkdir()
    sample = td.sample_files("ms_swift")["train"][0]
    lines = open(sample).read().splitlines()
    (folder / "a.jsonl").write_text(lines[0] + "\n")

    def both():
        prepared = td.load("ms_swift", data_dir=str(folder), split="train", cache_dir=cache_dir)
        streamed = td.load("ms_swift", data_dir=str(folder), split="train", streaming=True)
        assert list(prepared) == list(streamed)
        return len(prepared)

    assert both() == 1
    (folder / "a.jsonl").write_text("\n".join(lines[:3]) + "\n")
    assert both() == 3
    shutil.copy(sample, folder / "b.jsonl")
    assert both() == 6
    (folder / "b.jsonl").unlink()
    assert both() == 3
    # unchanged: the cache serves (nothing is converted again)
    first = td.load("ms_swift", data_dir=str(folder), split="train", cache_dir=cache_dir)
    again = td.load("ms_swift", data_dir=str(folder), split="train", cache_dir=cache_dir)
    assert first.cache_files == again.cache_files


def test_one_map_style_load_of_one_split_asks_the_hub_once(hub, cache_dir):
    """load() makes its builder twice (what is cached, then the splits read): both read one commit, one lookup."""
    up, resolved = hub
    resolved.clear()
    ds = td.load("toolmind", split="tau_train", cache_dir=cache_dir)
    assert len(ds) == 2
    assert resolved == [("someone/toolmind", "main")]


def test_hf_data_files_at_a_branch_are_read_at_its_commit(monkeypatch):
    """datasets keys its cache on the URL: at "main" it would serve the first commit's rows for ever."""
    asked = []

    def head_commit(repo, revision="main"):
        asked.append((repo, revision))
        return {"main": "a" * 40, "v1.0": "c" * 40}[revision]

    monkeypatch.setattr(source, "hub_head_commit", head_commit)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    pinned = "hf://datasets/o/n@" + "b" * 40 + "/x.jsonl"
    given = {"train": ["hf://datasets/o/n/data/a.jsonl", "hf://datasets/o/n@main/b.jsonl", pinned, "local.jsonl"],
             "test": "hf://datasets/o/n@v1.0/sub/*.parquet", "pr": "hf://datasets/o/n@refs%2Fpr%2F1/x.jsonl"}
    with cache_keys.one_head_commit_per_load():
        got = cache_keys.hf_files_at_commits(given)
    assert got == {"train": ["hf://datasets/o/n@" + "a" * 40 + "/data/a.jsonl",
                             "hf://datasets/o/n@" + "a" * 40 + "/b.jsonl", pinned, "local.jsonl"],
                   "test": "hf://datasets/o/n@" + "c" * 40 + "/sub/*.parquet",
                   "pr": "hf://datasets/o/n@refs%2Fpr%2F1/x.jsonl"}
    assert asked == [("o/n", "main"), ("o/n", "v1.0")]  # one lookup per revision within a load

    def unreachable(repo, revision="main"):
        raise OSError("no network")

    monkeypatch.setattr(source, "hub_head_commit", unreachable)
    assert cache_keys.hf_files_at_commits(given) == given  # offline: the URLs as given, datasets decides


def test_offline_a_split_is_served_from_the_cache_the_latest_load_read(hub, cache_dir, monkeypatch):
    """All splits prepared at the old commit, then the branch moved and one split was read (a cache of its
    own at the new commit): offline, the same load served the old commit's cache of all splits."""
    up, _ = hub
    td.load("toolmind", cache_dir=cache_dir)
    up.head[0] = NEW
    online = td.load("toolmind", split="xlam_function_calling_60k", cache_dir=cache_dir)
    assert len(online) == 1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = td.load("toolmind", split="xlam_function_calling_60k", cache_dir=cache_dir)
    assert list(offline) == list(online)
    # a load of all splits has the old commit's cache only
    assert sum(_sizes(td.load("toolmind", cache_dir=cache_dir)).values()) == 21


def test_offline_a_branch_moved_back_serves_the_commit_read_last(hub, cache_dir, monkeypatch):
    """The branch moved on and back: online, the cache of the first commit serves again; offline, the cache
    prepared last (the other commit's) served instead."""
    up, _ = hub
    td.load("toolmind", cache_dir=cache_dir)
    up.head[0] = NEW
    td.load("toolmind", cache_dir=cache_dir)
    up.head[0] = OLD
    online = td.load("toolmind", cache_dir=cache_dir)
    assert sum(_sizes(online).values()) == 21
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _sizes(td.load("toolmind", cache_dir=cache_dir)) == _sizes(online)


def test_offline_a_folder_datasets_did_not_finish_is_not_served(hub, cache_dir, monkeypatch):
    """datasets prepares into "<folder>.incomplete" and renames it at the end; a process killed before the
    rename leaves it (its dataset_info.json may be written already): offline it was taken for a cache."""

    ds = td.load("toolmind", cache_dir=cache_dir)
    folder = os.path.dirname(ds["synthetic"].cache_files[0]["filename"])
    left = folder.rsplit("-", 1)[0] + "-" + "c" * 16 + ".incomplete"
    shutil.copytree(folder, left)
    os.remove(os.path.join(left, "toolmind-synthetic.arrow"))
    os.utime(os.path.join(left, "dataset_info.json"))  # the newest
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = td.load("toolmind", cache_dir=cache_dir)
    assert os.path.dirname(offline["synthetic"].cache_files[0]["filename"]) == folder
    assert len(offline["synthetic"]) == 9


@pytest.mark.parametrize("how", ["data_files", "builder"])
def test_a_data_file_rewritten_with_other_rows_and_its_time_kept_is_read_anew(tmp_path, cache_dir, how):
    """datasets keys a local data file on its path and modification time only: a file replaced by one of
    another size with its time kept (cp -p, rsync -a, a restored backup) was served from the cache of the rows
    it held before. Its size is part of the key too, with td.load and with the builder used directly."""
    from tooluse_datasets.builders.ms_swift import MsSwiftBuilder

    real = shared_data("ms_swift")
    path = tmp_path / "data.jsonl"
    shutil.copy(real / "agent_support_doc_examples_en.jsonl", path)
    stat = path.stat()

    def loaded():
        if how == "data_files":
            return list(td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir))
        builder = MsSwiftBuilder(data_files=str(path), cache_dir=cache_dir)
        builder.download_and_prepare()
        return list(td.exact(builder.as_dataset(split="train")))

    def streamed():
        return list(td.load("ms_swift", data_files=str(path), split="train", streaming=True))

    assert loaded() == streamed()
    before = streamed()
    shutil.copy(real / "custom_dataset_doc_agent_rows_en.jsonl", path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size != stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert streamed() != before
    assert loaded() == streamed()


def _rewrite_in_place_keeping_size_and_time(path) -> str:
    """Give the first message of ``path``'s first row another first letter, as an editor would (the file written in
    place), then set its modification time back (``touch -r``, ``cp -p`` over it): path, size and modification time
    are those of the old rows. Returns the new first content."""
    import json

    stat = path.stat()
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    first = row["messages"][0]
    first["content"] = ("Z" if first["content"][0] != "Z" else "Y") + first["content"][1:]
    lines[0] = json.dumps(row, ensure_ascii=False)
    with open(path, "r+", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    return first["content"]


@pytest.mark.parametrize("how", ["data_files", "data_dir", "builder"])
def test_a_data_file_rewritten_with_its_size_and_time_kept_is_read_anew(tmp_path, cache_dir, how):
    """datasets keys a local file on its path and modification time, this package adds its size: an edit of the
    same length with the time set back (cp -p, rsync -a of a same-size file, touch -r) was served from the cache
    of the old rows. The status-change time, which every write sets and nothing sets back, is in the key too;
    the file unchanged, the cache serves again."""
    from tooluse_datasets.builders.ms_swift import MsSwiftBuilder

    real = shared_data("ms_swift")
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "data.jsonl"
    shutil.copy(real / "agent_support_doc_examples_en.jsonl", path)
    where = {"data_dir": str(folder)} if how == "data_dir" else {"data_files": str(path)}

    def loaded():
        if how == "builder":
            builder = MsSwiftBuilder(data_files=str(path), cache_dir=cache_dir)
            builder.download_and_prepare()
            ds = builder.as_dataset(split="train")
            return list(td.exact(ds)), ds.cache_files[0]["filename"]
        ds = td.load("ms_swift", split="train", cache_dir=cache_dir, **where)
        return list(ds), ds.cache_files[0]["filename"]

    before, first_cache = loaded()
    assert loaded()[1] == first_cache  # unchanged: served from the cache
    content = _rewrite_in_place_keeping_size_and_time(path)
    assert before[0]["messages"][0]["content"] != content
    after, second_cache = loaded()
    assert second_cache != first_cache
    assert after[0]["messages"][0]["content"] == content
    assert after == list(td.load("ms_swift", split="train", streaming=True, **where))
    assert loaded()[1] == second_cache


def test_a_link_pointed_at_another_file_of_the_same_size_and_times_is_read_anew(tmp_path, cache_dir):
    """File times are kept to a clock tick (about 4 ms on Linux): two files of one size written in the same tick,
    their modification time set alike (cp -p, rsync -a), have the same size and times. A link pointed from one
    to the other (data.jsonl -> the latest run's file) was served from the cache of the first one's rows; the
    inode is in the key too."""
    lines = (shared_data("ms_swift") / "agent_support_doc_examples_en.jsonl").read_text(encoding="utf-8")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for _ in range(50):  # until both are written in one tick
        first.write_text(lines.replace('"content": "', '"content": "Y', 1), encoding="utf-8")
        second.write_text(lines.replace('"content": "', '"content": "Z', 1), encoding="utf-8")
        times = (first.stat().st_atime_ns, first.stat().st_mtime_ns)
        os.utime(first, ns=times)
        os.utime(second, ns=times)
        if first.stat().st_ctime_ns == second.stat().st_ctime_ns:
            break
    else:
        pytest.skip("this file system gives every write a status-change time of its own")
    link = tmp_path / "data.jsonl"
    link.symlink_to(first.name)
    before = td.load("ms_swift", data_files=str(link), split="train", cache_dir=cache_dir)
    link.unlink()
    link.symlink_to(second.name)
    after = td.load("ms_swift", data_files=str(link), split="train", cache_dir=cache_dir)
    assert after.cache_files != before.cache_files
    assert list(after) == list(td.load("ms_swift", data_files=str(link), split="train", streaming=True)) != list(before)


@pytest.fixture
def key_blind_to_rewrites(monkeypatch):
    """Local files keyed as where the status-change time does not follow writes (on Windows ``st_ctime`` is the
    creation time): a rewrite with the size and modification time kept is invisible to the key."""
    def stamp(path):
        try:
            st = os.stat(path)
        except (OSError, TypeError, ValueError):
            return None
        return f"{path}\0{st.st_size}\0{st.st_mtime_ns}"

    monkeypatch.setattr(cache_keys, "_local_stamp", stamp)


def test_download_mode_reads_files_rewritten_with_their_size_and_time_kept(tmp_path, cache_dir, key_blind_to_rewrites):
    """A rewrite the key cannot see is served from the cache until download_mode asks for a new prepare, which
    then serves later loads and counts its reads once."""
    path = tmp_path / "data.jsonl"
    shutil.copy(td.sample_files("ms_swift")["train"][0], path)
    lines = path.read_text().splitlines()
    before = td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir)[0]["messages"][0]["content"]
    content = _rewrite_in_place_keeping_size_and_time(path)

    def first_content(**kwargs):
        return td.load("ms_swift", data_files=str(path), split="train", cache_dir=cache_dir,
                       **kwargs)[0]["messages"][0]["content"]

    assert first_content() == before  # served from the cache, as datasets would
    assert first_content(download_mode="reuse_cache_if_exists") == content
    assert first_content() == content
    report = td.SkipReport()
    td.load("ms_swift", data_files=str(path), cache_dir=cache_dir, download_mode="force_redownload", report=report)
    assert report.rows_read == len(lines) and report.skipped == 0
    with pytest.raises(ValueError, match="download_mode must be one of"):
        td.load("ms_swift", data_files=str(path), cache_dir=cache_dir, download_mode="again")
    with pytest.raises(ValueError, match="map-style"):
        td.load("ms_swift", data_files=str(path), streaming=True, download_mode="force_redownload")


@pytest.mark.parametrize("mode", ["force_redownload", "reuse_cache_if_exists"])
def test_download_mode_with_a_split_prepares_again_the_cache_later_loads_of_it_read(tmp_path, cache_dir, mode,
                                                                                    key_blind_to_rewrites):
    """A split loaded with download_mode while every split is cached: the cache of every split, which later
    loads of the split read, is prepared again, not a cache of the split alone (later loads got the old rows
    again from the cache of every split)."""

    real = shared_data("ms_swift")
    files = {"train": str(tmp_path / "train.jsonl"), "test": str(tmp_path / "test.jsonl")}
    shutil.copy(real / "custom_dataset_doc_agent_rows_en.jsonl", files["train"])
    shutil.copy(real / "agent_support_doc_examples_en.jsonl", files["test"])
    td.load("ms_swift", data_files=files, cache_dir=cache_dir)
    content = _rewrite_in_place_keeping_size_and_time(tmp_path / "train.jsonl")
    streamed = list(td.load("ms_swift", data_files=files, split="train", streaming=True))
    assert streamed[0]["messages"][0]["content"] == content

    assert list(td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir,
                        download_mode=mode)) == streamed
    assert list(td.load("ms_swift", data_files=files, split="train", cache_dir=cache_dir)) == streamed
    assert list(td.load("ms_swift", data_files=files, cache_dir=cache_dir)["train"]) == streamed


def test_nestful_read_at_a_github_branch_is_keyed_on_the_commit_it_points_at(tmp_path, monkeypatch, cache_dir):
    from tooluse_datasets.builders.nestful.source import NestfulSource

    lines = open(td.sample_files("nestful")["train"][0], encoding="utf-8").read().splitlines(keepends=True)
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text("".join(lines), encoding="utf-8")
    new.write_text("".join(lines[:2]), encoding="utf-8")
    up = LocalHub(host="github", repo="someone/nestful", revision=OLD,
                  files=(UpstreamFile(split="train", path="data.jsonl"),),
                  files_at={OLD: str(old), NEW: str(new)}, head=[OLD])
    resolved = _install_upstream(monkeypatch, NestfulSource, up, "github_head_commit")

    def no_hub(repo, revision="main"):
        raise AssertionError("a GitHub upstream was looked up on the Hub")

    monkeypatch.setattr(source, "hub_head_commit", no_hub)
    assert len(td.load("nestful", split="train", revision="main", cache_dir=cache_dir)) == len(lines)
    up.head[0] = NEW  # the branch moves on
    after = td.load("nestful", split="train", revision="main", cache_dir=cache_dir)
    assert len(after) == 2
    assert list(after) == list(td.load("nestful", split="train", revision="main", streaming=True))
    assert resolved and set(resolved) == {("someone/nestful", "main")}
    # the pinned revision is read as it is, without asking GitHub
    resolved.clear()
    assert len(td.load("nestful", split="train", cache_dir=cache_dir)) == len(lines)
    assert resolved == []
