"""The real Hub loading path, offline: what ``publish`` commits is served from a local git repository by
``olah`` (a self-hosted Hub mirror, PyPI ``olah==0.5.4``) on 127.0.0.1, and ``load_dataset("org/repo", config)``
reads it through ``HF_ENDPOINT`` in both modes, with rows equal to ``tooluse_datasets.load``.

``HF_ENDPOINT`` is read when huggingface_hub/datasets are imported, so loading runs in a subprocess. olah
caches repo metadata (``metadata-cache-ttl``), so every run uses a fresh repo name. The server is started and
stopped here, with bounded waits, and killed in ``finally``.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

pytest.importorskip("olah", reason="olah is not installed (pip install 'tooluse-datasets[test]' or "
                                   "olah==0.5.4): the offline Hub protocol test needs it")

import tooluse_datasets as td  # noqa: E402
from tooluse_datasets.publish import publish_mirror  # noqa: E402

from fake_hub import FakeHubApi  # noqa: E402
from mirror_support import build_sample_mirror, reference_rows  # noqa: E402

ORG = "tooluse-test"
CONFIGS = ["unified", "raw"]
SERVER_START_TIMEOUT = 60
LOADER_TIMEOUT = 180

LOADER = textwrap.dedent("""
    import sys
    from datasets import get_dataset_config_names, load_dataset
    import tooluse_datasets as td

    repo, configs = sys.argv[1], sys.argv[2].split(",")
    out = {"configs": sorted(get_dataset_config_names(repo))}
    for config in configs:
        ds = load_dataset(repo, config, split="train", verification_mode="all_checks")
        stream = load_dataset(repo, config, split="train", streaming=True)
        out[config] = {"map": list(td.exact(ds)), "stream": list(td.exact(stream)),
                       "features": ds.features.to_dict()}
    sys.stdout.write(td.dumps(out))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=tooluse test", "-c", "user.email=test@localhost",
                    "-c", "init.defaultBranch=main", *args], cwd=repo, check=True, capture_output=True, timeout=60)


def _git_repo_from(files: dict[str, bytes], repo: Path) -> None:
    """A local git repository holding exactly ``files`` on ``main``: what olah serves as a Hub repo."""
    repo.mkdir(parents=True)
    for rel, data in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "published by tooluse-datasets")


def _olah_config(folder: Path, port: int) -> Path:
    """An olah config serving, offline, the git repositories under ``folder/mirrors`` on ``port``."""
    config = folder / "olah.toml"
    config.write_text(textwrap.dedent(f"""
        [basic]
        host = "127.0.0.1"
        port = {port}
        repos-path = "{folder / 'olah-repos'}"
        mirrors-path = ["{folder / 'mirrors'}"]
        metadata-cache-ttl = 0

        [accessibility]
        offline = true
    """))
    return config


def _wait_until_serving(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"olah exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    pytest.fail(f"olah did not serve {url} within {SERVER_START_TIMEOUT}s:\n{log.read_text()[-3000:]}")


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def test_a_published_mirror_loads_from_a_hub_endpoint_in_both_modes(tmp_path, cache_dir):
    assert shutil.which("git"), "git is needed to serve a repository with olah"
    repo_id = f"{ORG}/nestful-{uuid.uuid4().hex[:10]}"  # olah caches metadata per name: never reuse one
    mirror = build_sample_mirror("nestful", tmp_path / "mirror", configs=CONFIGS)
    api = FakeHubApi()
    publish_mirror(mirror, repo_id, api=api, echo=lambda line: None)
    _git_repo_from(api.files(repo_id), tmp_path / "mirrors" / "datasets" / repo_id)

    port = _free_port()
    config = _olah_config(tmp_path, port)
    log = tmp_path / "olah.log"
    endpoint = f"http://127.0.0.1:{port}"
    with open(log, "wb") as log_file:
        server = subprocess.Popen([sys.executable, "-m", "olah.server", "-c", str(config)], cwd=tmp_path,
                                  stdout=log_file, stderr=subprocess.STDOUT)
        try:
            _wait_until_serving(f"{endpoint}/api/datasets/{repo_id}/revision/main", server, log)
            env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home"),
                   "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
                   "HF_UPDATE_DOWNLOAD_COUNTS": "0", "HF_HUB_DISABLE_XET": "1"}
            for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN"):
                env.pop(key, None)
            done = subprocess.run([sys.executable, "-c", LOADER, repo_id, ",".join(CONFIGS)], env=env,
                                  capture_output=True, timeout=LOADER_TIMEOUT, cwd=tmp_path)
        finally:
            _stop(server)
    assert done.returncode == 0, done.stderr.decode()[-4000:] + "\nolah log:\n" + log.read_text()[-2000:]
    loaded = td.loads(done.stdout)
    assert loaded["configs"] == sorted(CONFIGS)
    for config in CONFIGS:
        expected = reference_rows("nestful", config, "train", cache_dir)
        assert len(expected) == 5
        assert loaded[config]["map"] == expected
        assert loaded[config]["stream"] == expected
        assert loaded[config]["features"] == td.features("nestful", config).to_dict()
