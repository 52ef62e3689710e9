"""Resolving a GitHub branch or tag to a commit (NESTFUL's upstream), against a local stand-in for GitHub's API."""
from __future__ import annotations

import http.server
import threading
import urllib.error

import pytest

from tooluse_datasets import source

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def github(monkeypatch):
    """A local server answering ``/repos/<repo>/commits/<ref>``; records each request's path and headers."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, dict(self.headers)))
            if self.path == "/repos/IBM/NESTFUL/commits/main":
                body, status = COMMIT.encode(), 200
            elif self.path == "/repos/IBM/NESTFUL/commits/feature%2Fx":
                body, status = b"<html>not a commit</html>", 200
            else:
                body, status = b'{"message": "No commit found for SHA: nope"}', 422
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(source, "GITHUB_API", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    yield seen
    server.shutdown()


def test_a_branch_resolves_to_the_commit_github_names(github):
    assert source.github_head_commit("IBM/NESTFUL", "main") == COMMIT
    path, headers = github[-1]
    assert headers["Accept"] == "application/vnd.github.sha"
    assert "Authorization" not in headers


def test_the_token_is_sent_when_set(github, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    source.github_head_commit("IBM/NESTFUL", "main")
    assert github[-1][1]["Authorization"] == "Bearer t0ken"


def test_an_answer_that_is_no_commit_id_is_an_error(github):
    with pytest.raises(ValueError, match="not a commit id"):
        source.github_head_commit("IBM/NESTFUL", "feature/x")  # the slash is escaped in the path


def test_an_unknown_revision_is_githubs_error(github):
    with pytest.raises(urllib.error.HTTPError):
        source.github_head_commit("IBM/NESTFUL", "nope")


def test_head_commit_asks_the_upstreams_own_host(github, monkeypatch):
    def no_hub(repo, revision="main"):
        raise AssertionError("a GitHub upstream was looked up on the Hub")

    monkeypatch.setattr(source, "hub_head_commit", no_hub)
    assert source.head_commit("github", "IBM/NESTFUL", "main") == COMMIT
    assert github[-1][0] == "/repos/IBM/NESTFUL/commits/main"
    with pytest.raises(ValueError, match="unknown host 'gitlab'"):
        source.head_commit("gitlab", "IBM/NESTFUL", "main")
