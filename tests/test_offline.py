"""Offline loads after an online one (``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``), as huggingface_hub serves
its cache offline: a prepared cache serves; a config or split not prepared yet is prepared from the files an online
map-style load downloaded; a stream reads those downloads too. Nothing downloaded (a stream downloads nothing) is
one ``DataNotFoundError`` saying what to do.

The Hub is olah serving a ToolMind-shaped repo on 127.0.0.1 (as in tests/test_hub_failures.py); offline loads run
with ``HF_ENDPOINT`` at a port nothing listens on, so a request would fail. NESTFUL's GitHub upstream (an https
file) is a local HTTP server, stopped before the offline loads.
"""
from __future__ import annotations

import dataclasses
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets import offline

LOADER = textwrap.dedent("""
    import dataclasses, json, sys
    import tooluse_datasets as td
    from tooluse_datasets.builders.toolmind.source import ToolMindSource

    repo, kwargs = sys.argv[1], json.loads(sys.argv[2])
    if "cli" in kwargs:  # a command, its output kept
        import contextlib, io
        from tooluse_datasets.cli import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([arg.format(repo=repo) for arg in kwargs["cli"]])
        sys.stdout.write(td.dumps({"status": status, "out": out.getvalue(), "err": err.getvalue()}))
        sys.exit(0)
    if kwargs.pop("upstream", False):  # ToolMind's own upstream (its unpinned main), at this repo
        ToolMindSource.upstream = dataclasses.replace(ToolMindSource.upstream, repo=repo)
    else:
        kwargs["data_files"] = kwargs.get("data_files", f"hf://datasets/{repo}/data.parquet").format(repo=repo)
    try:
        ds = td.load("toolmind", **kwargs)
        splits = {"": ds} if kwargs.get("split") else ds
        out = {"rows": {name: list(split) for name, split in splits.items()}}
        if not kwargs.get("streaming"):
            out["cache"] = sorted({f["filename"].rsplit("/", 1)[0] for split in splits.values()
                                   for f in split.cache_files})
    except Exception as exc:
        out = {"error": type(exc).__name__, "message": str(exc)}
    sys.stdout.write(td.dumps(out))
""")


@pytest.fixture
def hub(tmp_path):
    """``load(**kwargs)`` in a subprocess against olah serving a ToolMind-shaped repo; ``load(offline=True, ...)``
    with HF_HUB_OFFLINE=1 and the Hub endpoint at a port nothing listens on."""
    pytest.importorskip("olah", reason="olah is not installed (pip install 'tooluse-datasets[test]' or olah==0.5.4)")
    from test_hub_olah import LOADER_TIMEOUT, _free_port, _git_repo_from, _olah_config, _stop, _wait_until_serving

    assert shutil.which("git"), "git is needed to serve a repository with olah"
    repo_id = f"tooluse-test/toolmind-offline-{os.urandom(5).hex()}"
    sample = Path(td.sample_files("toolmind")["train"][0]).read_bytes()
    _git_repo_from({"data.parquet": sample}, tmp_path / "mirrors" / "datasets" / repo_id)
    port = _free_port()
    log = tmp_path / "olah.log"

    def load(offline: bool = False, env=None, hf_home="hf-home", **kwargs):
        endpoint = f"http://127.0.0.1:{_free_port() if offline else port}"
        run_env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / hf_home),
                   "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
                   "HF_UPDATE_DOWNLOAD_COUNTS": "0", "HF_HUB_DISABLE_XET": "1",
                   # (online, a busy machine's local server may take seconds to answer: a timeout there resolved no
                   # commit and prepared into another cache folder; offline, nothing listens and refusal is at once)
                   "HF_HUB_ETAG_TIMEOUT": "60", "HF_HUB_DOWNLOAD_TIMEOUT": "60"}
        for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            run_env.pop(key, None)
        run_env.update({"HF_HUB_OFFLINE": "1"} if offline else {})
        run_env.update(env or {})
        kwargs.setdefault("cache_dir", str(tmp_path / "cache"))
        done = subprocess.run([sys.executable, "-c", LOADER, repo_id, json.dumps(kwargs)], env=run_env,
                              capture_output=True, timeout=LOADER_TIMEOUT, cwd=tmp_path)
        assert done.returncode == 0, done.stderr.decode()[-4000:]
        return td.loads(done.stdout)

    with open(log, "wb") as log_file:
        server = subprocess.Popen([sys.executable, "-m", "olah.server", "-c", str(_olah_config(tmp_path, port))],
                                  cwd=tmp_path, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            _wait_until_serving(f"http://127.0.0.1:{port}/api/datasets/{repo_id}/revision/main", server, log)
            yield load
        finally:
            _stop(server)


def _all_rows(got: dict) -> list:
    assert "rows" in got, got
    return [row for rows in got["rows"].values() for row in rows]


def test_upstream_offline_after_an_online_load_prepared_or_not_and_streamed(hub, tmp_path):
    """ToolMind's upstream read at its branch: online, one split was loaded map-style. Offline, that split comes
    from its cache; the other splits, another format and another cache folder are prepared from the file that load
    downloaded (into the cache an online load at that commit prepares); a stream reads the same file."""
    online = hub(upstream=True, split="tau_train")
    assert len(_all_rows(online)) == 2
    every = hub(upstream=True, cache_dir=str(tmp_path / "reference"))  # the rows of every split, online
    assert sum(map(len, every["rows"].values())) == 21

    assert hub(offline=True, upstream=True, split="tau_train") == online
    prepared = hub(offline=True, upstream=True)
    assert prepared["rows"] == every["rows"]
    # the folder an online load of the same commit prepared into (an online load later reuses it)
    assert [Path(p).name for p in prepared["cache"]] == [Path(p).name for p in every["cache"]]
    assert hub(offline=True, upstream=True, streaming=True)["rows"] == every["rows"]
    raw = hub(offline=True, upstream=True, config="raw", env={"HF_HUB_OFFLINE": "", "HF_DATASETS_OFFLINE": "1"})
    assert len(_all_rows(raw)) == 21 and set(raw["rows"]) == set(every["rows"])
    assert hub(offline=True, upstream=True, cache_dir=str(tmp_path / "other"))["rows"] == every["rows"]


def test_upstream_offline_with_nothing_downloaded_is_one_error_that_says_what_to_do(hub):
    """Nothing downloaded (no online load, or only streams, which download nothing): offline, neither mode has a
    copy to read. One typed error, not retries."""
    for streaming in (False, True):
        got = hub(offline=True, upstream=True, streaming=streaming, hf_home="nothing-downloaded")
        assert got.get("error") == "DataNotFoundError", got
        assert "offline mode is on" in got["message"] and "no copy of hf://datasets/" in got["message"]
        assert "map-style" in got["message"] and "hf download" in got["message"]


def test_hf_data_files_offline_after_an_online_load_prepared_or_not_and_streamed(hub, tmp_path):
    """hf:// data files at a branch, loaded once online map-style: offline, the cache prepared then serves (the same
    folder: datasets' key asked the Hub about each file, which offline failed), another format is prepared from the
    downloaded file, and a stream reads it."""
    online = hub()
    assert sum(map(len, online["rows"].values())) == 21
    prepared = hub(offline=True)
    assert prepared == online
    assert hub(offline=True, split="tau_train")["rows"][""] == online["rows"]["tau_train"]
    assert hub(offline=True, streaming=True)["rows"] == online["rows"]
    raw = hub(offline=True, config="raw")
    assert len(_all_rows(raw)) == 21 and set(raw["rows"]) == set(online["rows"])


def test_commands_offline_read_what_an_online_load_downloaded(hub, tmp_path):
    """The commands stream: offline, they read the files an online map-style load downloaded, or say what to do."""
    assert "rows" in hub(split="synthetic")
    files = ["--data-files", "hf://datasets/{repo}/data.parquet"]
    export = hub(offline=True, cli=["export", "toolmind", *files, "--format", "swift", "--out", str(tmp_path / "out")])
    assert export["status"] == 0 and "21 rows read, none skipped" in export["out"], export
    assert len((tmp_path / "out" / "toolmind-swift-synthetic.jsonl").read_text().splitlines()) == 9
    nothing = hub(offline=True, hf_home="nothing-downloaded", cli=["show", "toolmind", *files])
    assert nothing["status"] != 0 and "Traceback" not in nothing["err"], nothing
    assert "offline, no copy of hf://datasets/" in nothing["err"]


def test_hf_data_files_offline_that_cannot_be_served_are_one_error_saying_why(hub):
    for streaming in (False, True):
        nothing = hub(offline=True, streaming=streaming, hf_home="nothing-downloaded")
        assert nothing.get("error") == "DataNotFoundError", nothing
        assert "offline, no copy of hf://datasets/" in nothing["message"] and "map-style" in nothing["message"]
    assert "rows" in hub()  # downloaded now; but a glob is listed by the Hub only
    globbed = hub(offline=True, data_files="hf://datasets/{repo}/*.parquet")
    assert globbed.get("error") == "DataNotFoundError", globbed
    assert "glob" in globbed["message"] and "cannot be listed" in globbed["message"]


def test_https_data_files_offline_are_refused_before_any_request(monkeypatch):
    """They are read where they are, never kept: offline there is nothing to read (datasets' own check of the URL
    would have gone to the network, offline mode or not)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for streaming in (False, True):
        with pytest.raises(td.DataNotFoundError, match="http.s. data files are read where they are"):
            td.load("ms_swift", data_files="https://127.0.0.1:9/agent.jsonl", split="train", streaming=streaming)


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def github(tmp_path, monkeypatch):
    """NESTFUL's upstream (an https file at a commit) served from a local HTTP server: ``(upstream, stop)``."""
    from tooluse_datasets.builders.nestful.source import NestfulSource
    from tooluse_datasets.source import Upstream, UpstreamFile

    folder = tmp_path / "github"
    folder.mkdir()
    shutil.copy(td.sample_files("nestful")["train"][0], folder / "nestful_data.jsonl")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    @dataclasses.dataclass(frozen=True)
    class LocalGitHub(Upstream):
        def urls(self, revision=None):
            return {"train": [f"http://127.0.0.1:{server.server_port}/{revision or self.revision}/nestful_data.jsonl"]}

    (folder / NestfulSource.upstream.revision).mkdir()
    shutil.copy(folder / "nestful_data.jsonl", folder / NestfulSource.upstream.revision)
    up = LocalGitHub(host="github", repo="someone/nestful", revision=NestfulSource.upstream.revision,
                     files=(UpstreamFile(split="train", path="nestful_data.jsonl"),))
    monkeypatch.setattr(NestfulSource, "upstream", up)
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)

    def stop():
        server.shutdown()
        server.server_close()

    yield up, stop
    stop()


def test_https_upstream_offline_reads_the_file_an_online_load_downloaded(github, cache_dir, monkeypatch):
    up, stop = github
    online = td.load("nestful", split="train", cache_dir=cache_dir)
    sample = td.sample_files("nestful")["train"][0]
    assert list(online) == list(td.load("nestful", data_files=sample, split="train"))
    stop()  # offline: the GitHub file cannot be had any more
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert list(td.load("nestful", split="train", cache_dir=cache_dir)) == list(online)  # prepared
    assert list(td.load("nestful", split="train", cache_dir=cache_dir, streaming=True)) == list(online)
    raw = td.load("nestful", "raw", split="train", cache_dir=cache_dir)  # not prepared: from the download
    assert [row["sample_id"] for row in raw] == [row["id"].rsplit("/", 1)[1] for row in online]
    # another revision was never downloaded: the typed error, naming the file
    with pytest.raises(td.DataNotFoundError, match="no copy of http://127.0.0.1:.*/" + "c" * 40):
        td.load("nestful", split="train", cache_dir=cache_dir, revision="c" * 40)
    # a download asked for again cannot be made: refused, not the kept copy prepared again as if downloaded
    with pytest.raises(ValueError, match="force_redownload.*offline mode"):
        td.load("nestful", split="train", cache_dir=cache_dir, download_mode="force_redownload")
    again = td.load("nestful", split="train", cache_dir=cache_dir, download_mode="reuse_cache_if_exists")
    assert list(again) == list(online)


def test_upstream_unreachable_after_an_online_load_names_the_offline_switch(github, cache_dir, monkeypatch):
    """The network down (offline mode not on), a stream said only "cannot reach" and "give local files", though an
    earlier map-style load had kept a copy that offline mode reads: it says so, naming the variable to set (a
    map-style load reads that copy by itself). With nothing kept, no such advice."""
    up, stop = github
    online = list(td.load("nestful", split="train", cache_dir=cache_dir))  # downloads the upstream file
    stop()
    with pytest.raises(td.DataNotFoundError) as err:
        td.load("nestful", split="train", cache_dir=cache_dir, streaming=True)
    assert "cannot reach the upstream data" in str(err.value)
    assert "an earlier load kept copies of these files: set HF_HUB_OFFLINE=1 to read them offline" in str(err.value)
    with pytest.raises(td.DataNotFoundError) as nothing_kept:
        td.load("nestful", split="train", cache_dir=f"{cache_dir}/other", streaming=True)
    assert "cannot reach the upstream data" in str(nothing_kept.value) and "OFFLINE" not in str(nothing_kept.value)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")  # read first: HF_HUB_OFFLINE would not turn offline mode on
    with pytest.raises(td.DataNotFoundError, match="set HF_DATASETS_OFFLINE=1 to read them offline"):
        td.load("nestful", split="train", cache_dir=cache_dir, streaming=True)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # as advised: the copy is read
    assert list(td.load("nestful", split="train", cache_dir=cache_dir, streaming=True)) == online


def test_hf_data_files_unreachable_name_the_offline_switch_only_when_every_file_was_kept(tmp_path, monkeypatch):
    from huggingface_hub import constants

    commit = "d" * 40
    repo = tmp_path / "hub" / "datasets--someone--tools"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    shutil.copy(td.sample_files("ms_swift")["train"][0], repo / "snapshots" / commit / "a.jsonl")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the Hub unreachable: connection refused
    kept = "hf://datasets/someone/tools/a.jsonl"
    with pytest.raises(td.DataNotFoundError, match="cannot reach the data files.*set HF_HUB_OFFLINE=1 to read them"):
        td.load("ms_swift", data_files=kept, split="train", streaming=True)
    assert offline.kept_copies_hint([kept]).endswith("set HF_HUB_OFFLINE=1 to read them offline")
    assert offline.kept_copies_hint([kept, "hf://datasets/someone/tools/b.jsonl"]) == ""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # on already: the error is another one
    assert offline.kept_copies_hint([kept]) == ""


@pytest.mark.parametrize("streaming", [False, True])
def test_https_upstream_offline_with_nothing_downloaded_advises_fetching_that_url_not_the_hub(cache_dir, monkeypatch,
                                                                                            streaming):
    """NESTFUL's upstream is a GitHub file: the advice was `hf download <repo> --repo-type dataset`, a Hub command
    that cannot fetch it."""
    from tooluse_datasets.builders.nestful.source import NestfulSource

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    [url] = NestfulSource.upstream.urls()["train"]
    assert url.startswith("https://raw.githubusercontent.com/")
    with pytest.raises(td.DataNotFoundError) as err:
        td.load("nestful", split="train", cache_dir=cache_dir, streaming=streaming)
    message = str(err.value)
    assert f"no copy of {url} was downloaded" in message and "map-style" in message
    assert "hf download" not in message and f"download it (`curl -fLO {url}`) and pass its local path" in message


def test_hub_upstream_offline_advice_names_the_repo_and_revision_to_download():
    hint = offline.offline_hint("hf://datasets/someone/tools@main/data/train.parquet")
    assert "`hf download someone/tools --repo-type dataset --revision main`" in hint and "<repo>" not in hint


@pytest.mark.parametrize("url, command", [
    ("hf://datasets/someone/tools@v1/data/*.parquet", "`hf download someone/tools --repo-type dataset --revision v1`"),
    ("hf://datasets/someone/tools@refs%2Fpr%2F3/data/train.parquet",
     "`hf download someone/tools --repo-type dataset --revision refs/pr/3`"),
    ("hf://datasets/someone/tools@refs%2Fpr%2F3/data/*.parquet",
     "`hf download someone/tools --repo-type dataset --revision refs/pr/3`"),
])
@pytest.mark.parametrize("streaming", [False, True])
def test_hf_data_files_offline_advice_downloads_the_revision_the_url_names(monkeypatch, url, command, streaming):
    """A glob's advice left the revision out (the command fetched main, not the v1 asked for), and an escaped
    revision was given as escaped, which ``hf download`` does not know."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(td.DataNotFoundError) as info:
        td.load("ms_swift", data_files=url, split="train", streaming=streaming)
    assert command in str(info.value)


@pytest.mark.parametrize("env, on", [({"HF_HUB_OFFLINE": "1"}, True), ({"HF_HUB_OFFLINE": "true"}, True),
                                     ({"HF_DATASETS_OFFLINE": "ON"}, True), ({"TRANSFORMERS_OFFLINE": "1"}, True),
                                     ({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "0"}, False),
                                     ({"HF_HUB_OFFLINE": "0"}, False), ({}, False)])
def test_offline_mode_is_read_as_datasets_reads_it(monkeypatch, env, on):
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert offline.offline_mode() is on


def test_mirror_of_the_hub_upstream_offline_reads_the_commit_and_file_the_cache_holds(tmp_path, monkeypatch):
    """The commands read offline what an earlier online load downloaded: the mirror asked the Hub what `main`
    points at, then for the file's sha256, and stopped at the first (a load reads the commit the cache records)."""
    import hashlib

    from huggingface_hub import constants

    from tooluse_datasets.builders.toolmind.source import ToolMindSource
    from tooluse_datasets.cli import main

    commit, up = "e" * 40, ToolMindSource.upstream
    repo = tmp_path / "hub" / f"datasets--{up.repo.replace('/', '--')}"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    sample = td.sample_files("toolmind")["train"][0]
    shutil.copy(sample, repo / "snapshots" / commit / up.files[0].path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # a request would fail
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["mirror", "toolmind", "--out", str(tmp_path / "out"), "--configs", "unified"]) == 0
    provenance = json.loads((tmp_path / "out" / "toolmind" / ".tooluse-datasets.json").read_text())["provenance"]
    assert provenance["upstream"]["revision"] == commit
    [read] = provenance["inputs"]
    assert read["name"] == f"hf://datasets/{up.repo}@{commit}/{up.files[0].path}"
    assert read["sha256"] == hashlib.sha256(Path(sample).read_bytes()).hexdigest()


def test_offline_stream_after_a_prepared_load_reads_the_files_and_says_nothing_of_that_cache(tmp_path, monkeypatch,
                                                                                             cache_dir, caplog):
    """A stream reads the files, never an Arrow cache: offline it still logged "using the cache prepared from it
    before" when a map-style load had prepared one. A map-style load read from that cache says so."""
    import logging

    from huggingface_hub import constants

    from tooluse_datasets.builders.toolmind.source import ToolMindSource

    commit, up = "f" * 40, ToolMindSource.upstream
    repo = tmp_path / "hub" / f"datasets--{up.repo.replace('/', '--')}"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    shutil.copy(td.sample_files("toolmind")["train"][0], repo / "snapshots" / commit / up.files[0].path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # a request would fail
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    prepared = list(td.load("toolmind", split="tau_train", cache_dir=cache_dir))
    assert len(prepared) == 2
    caplog.set_level(logging.WARNING, logger="tooluse_datasets")
    assert list(td.load("toolmind", split="tau_train", cache_dir=cache_dir, streaming=True)) == prepared
    assert "using the cache prepared" not in caplog.text
    assert list(td.load("toolmind", split="tau_train", cache_dir=cache_dir)) == prepared
    assert "using the cache prepared from it before" in caplog.text


@pytest.mark.parametrize("streaming", [False, True])
def test_https_upstream_unreachable_names_why_not_a_missing_file(github, cache_dir, streaming):
    """fsspec words a host it cannot reach as FileNotFoundError of the URL: the error showed only that, as if the
    file were missing at that revision. The cause behind it is named."""
    up, stop = github
    stop()
    with pytest.raises(td.DataNotFoundError) as err:
        td.load("nestful", split="train", cache_dir=cache_dir, streaming=streaming)
    message = str(err.value)
    assert "cannot reach the upstream data" in message and "does not exist at that revision" not in message
    # fsspec's FileNotFoundError is followed by the connection failure behind it; in a long run fsspec's kept HTTP
    # session may hand on the aiohttp error itself, which names the failure on its own
    why = message.split("): ", 1)[1].splitlines()[0]
    assert not why.startswith("FileNotFoundError") or "[its server cannot be reached: Client" in why, why


def test_offline_force_redownload_of_local_files_prepares_them_again(tmp_path, monkeypatch):
    """The offline refusal of force_redownload took every load without data_files for a download: a LLaMA-Factory
    entry's local files were refused, and a source without upstream files was told it would download them."""
    from tooluse_datasets.cli import main

    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(tmp_path / "lf")]) == 0
    entry = dict(dataset_info=str(tmp_path / "lf"), dataset="nestful-llamafactory-train", split="train",
                 cache_dir=str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    first = td.load("llamafactory", **entry)
    again = td.load("llamafactory", download_mode="force_redownload", **entry)
    assert list(again) == list(first) and len(first) == 5
    with pytest.raises(td.DataNotFoundError, match="ms_swift has no default upstream files"):
        td.load("ms_swift", split="train", cache_dir=str(tmp_path / "cache"), download_mode="force_redownload")
