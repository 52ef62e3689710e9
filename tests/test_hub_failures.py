"""Hub failures on the real read path, offline: olah (as in tests/test_hub_olah.py) serves a ToolMind-shaped repo
on 127.0.0.1 behind a small proxy that can cut every file transfer in half or answer 403 "gated", and loads run
in a subprocess with ``HF_ENDPOINT`` pointed at the proxy. Each failure is a ``DataNotFoundError`` saying what
happened (not a raw httpx traceback), and a download cut short leaves nothing a later load takes for complete.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("olah", reason="olah is not installed (pip install 'tooluse-datasets[test]' or olah==0.5.4)")

import tooluse_datasets as td  # noqa: E402

from test_hub_olah import (LOADER_TIMEOUT, _free_port, _git_repo_from, _olah_config, _stop,  # noqa: E402
                           _wait_until_serving)

LOADER = textwrap.dedent("""
    import dataclasses, json, sys
    import tooluse_datasets as td
    from tooluse_datasets.builders.toolmind.source import ToolMindSource

    repo, kwargs = sys.argv[1], json.loads(sys.argv[2])
    if kwargs.pop("upstream", False):  # ToolMind's own upstream, at this repo
        ToolMindSource.upstream = dataclasses.replace(ToolMindSource.upstream, repo=repo)
    else:
        kwargs["data_files"] = f"hf://datasets/{repo}/data.parquet"
    try:
        ds = td.load("toolmind", **kwargs)
        out = {"rows": sum(len(list(split)) for split in ds.values())}
    except Exception as exc:
        out = {"error": type(exc).__name__, "module": type(exc).__module__, "message": str(exc)}
    sys.stdout.write(json.dumps(out))
""")


class _Proxy(BaseHTTPRequestHandler):
    """Forwards to olah; ``mode`` "cut" sends half of each file body and drops the connection, "gated" answers
    every request as the Hub answers for a gated repo the caller has no access to, "missing" answers requests for
    the data file as the Hub answers for a file the revision does not have."""

    protocol_version = "HTTP/1.1"
    upstream_port = 0
    mode = "pass"

    def _hub_error(self, status: int, code: str, message: str) -> None:
        """An error answer as the Hub gives it (huggingface_hub reads the X-Error-* headers)."""
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self):
        if self.mode == "missing" and "data.parquet" in self.path:
            return self._hub_error(404, "EntryNotFound", "Entry not found")
        if self.mode == "gated":
            return self._hub_error(403, "GatedRepo", "Access to dataset is restricted.")
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        conn.request(self.command, self.path, body=sent,
                     headers={k: v for k, v in self.headers.items() if k.lower() not in ("host", "range")})
        answer = conn.getresponse()
        body = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value.replace(f"127.0.0.1:{self.upstream_port}",
                                                    f"127.0.0.1:{self.server.server_port}"))
        self.send_header("Content-Length", answer.getheader("content-length") or str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if self.mode == "cut" and "/resolve/" in self.path and len(body) > 1000:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = _forward

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(tmp_path):
    """(endpoint of the proxy, repo id, proxy handler class whose ``mode`` the test sets)."""
    assert shutil.which("git"), "git is needed to serve a repository with olah"
    repo_id = f"tooluse-test/toolmind-{uuid.uuid4().hex[:10]}"
    sample = Path(td.sample_files("toolmind")["train"][0]).read_bytes()
    _git_repo_from({"data.parquet": sample}, tmp_path / "mirrors" / "datasets" / repo_id)
    port = _free_port()
    config = _olah_config(tmp_path, port)
    log = tmp_path / "olah.log"
    handler = type("Proxy", (_Proxy,), {"upstream_port": port, "mode": "pass"})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    with open(log, "wb") as log_file:
        server = subprocess.Popen([sys.executable, "-m", "olah.server", "-c", str(config)], cwd=tmp_path,
                                  stdout=log_file, stderr=subprocess.STDOUT)
        try:
            _wait_until_serving(f"http://127.0.0.1:{port}/api/datasets/{repo_id}/revision/main", server, log)
            thread.start()
            yield f"http://127.0.0.1:{proxy.server_port}", repo_id, handler
        finally:
            proxy.shutdown()
            proxy.server_close()
            _stop(server)


def _load(endpoint: str, repo_id: str, tmp_path: Path, **kwargs) -> dict:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home"),
           "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_UPDATE_DOWNLOAD_COUNTS": "0", "HF_HUB_DISABLE_XET": "1", "HF_HUB_ETAG_TIMEOUT": "5",
           "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_TOKEN"):
        env.pop(key, None)
    env.update(kwargs.pop("env", {}))
    kwargs.setdefault("cache_dir", str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", LOADER, repo_id, json.dumps(kwargs)], env=env,
                          capture_output=True, timeout=LOADER_TIMEOUT, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("upstream", [False, True], ids=["hf-data-files", "upstream"])
def test_a_download_cut_short_is_a_typed_error_and_leaves_nothing_complete(hub, tmp_path, upstream):
    endpoint, repo_id, proxy = hub
    proxy.mode = "cut"
    cut = _load(endpoint, repo_id, tmp_path, upstream=upstream)
    assert cut.get("error") == "DataNotFoundError", cut
    assert "RemoteProtocolError" in cut["message"] and "peer closed connection" in cut["message"]
    proxy.mode = "pass"
    assert _load(endpoint, repo_id, tmp_path, upstream=upstream) == {"rows": 21}


@pytest.mark.parametrize("upstream", [False, True], ids=["hf-data-files", "upstream"])
def test_a_gated_repo_is_a_typed_error_that_says_it_is_gated(hub, tmp_path, upstream):
    endpoint, repo_id, proxy = hub
    proxy.mode = "gated"
    for streaming in (False, True):
        got = _load(endpoint, repo_id, tmp_path, upstream=upstream, streaming=streaming)
        assert got.get("error") == "DataNotFoundError", got
        assert "gated" in got["message"] and "HF_TOKEN" in got["message"]
        assert "does not exist" not in got["message"]


def test_hf_data_files_offline_or_the_hub_unreachable_are_typed_errors(hub, tmp_path):
    endpoint, repo_id, _ = hub
    assert _load(endpoint, repo_id, tmp_path) == {"rows": 21}
    for streaming in (False, True):
        # offline, what a load downloaded serves (tests/test_offline.py); nothing downloaded here
        offline = _load(endpoint, repo_id, tmp_path, streaming=streaming,
                        env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "nothing-downloaded")})
        assert offline.get("error") == "DataNotFoundError", offline
        assert "offline, no copy of hf://datasets/" in offline["message"]
        down = _load(f"http://127.0.0.1:{_free_port()}", repo_id, tmp_path, streaming=streaming)
        assert down.get("error") == "DataNotFoundError", down
        assert "Connection refused" in down["message"]


def test_an_upstream_file_missing_at_the_revision_says_so_not_that_the_hub_is_unreachable(hub, tmp_path):
    # map-style said "cannot reach the upstream data ... 404", suggesting a network problem
    endpoint, repo_id, proxy = hub
    proxy.mode = "missing"
    got = _load(endpoint, repo_id, tmp_path, upstream=True)
    assert got.get("error") == "DataNotFoundError", got
    assert "does not exist at that revision" in got["message"] and "cannot reach" not in got["message"]
