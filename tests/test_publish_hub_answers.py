"""What the Hub answers to a publish it refuses, through huggingface_hub's real HfApi: a small server on 127.0.0.1
answers each request as the Hub does (status, ``X-Error-Code``/``X-Error-Message`` headers, JSON body, request id),
and the command prints one line saying what happened and what to do, never huggingface_hub's message alone (whose
first line for a 403 is the request id and nothing else)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from tooluse_datasets import cli
from tooluse_datasets.publish import PublishError, publish_mirror

from fake_hub import FakeHubApi
from mirror_support import quiet

REPO = "acme/nestful-tooluse"
NOT_FOUND = (404, "RepoNotFound", "Repository not found")


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


class _HubAnswers(BaseHTTPRequestHandler):
    """Answers ``answers[(method, path prefix)] = (status, X-Error-Code or None, message)`` (a dict or list for
    message: that JSON body); any other request is a repo that does not exist. Every request is recorded in
    ``seen``."""

    protocol_version = "HTTP/1.1"
    answers: dict = {}
    seen: list = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.command, self.path))
        status, code, message = next((answer for (method, prefix), answer in self.answers.items()
                                      if self.command == method and self.path.startswith(prefix)), NOT_FOUND)
        if isinstance(message, (dict, list)):  # an answer the Hub gives, as its JSON body
            body = json.dumps(message).encode()
            self.send_response(status)
        else:
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
        self.send_header("X-Request-Id", "Root=1-6752f0aa-test")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def hub():
    """``serve(answers)`` starts the server and returns an HfApi (with a token) pointed at it."""
    servers = []

    def serve(answers: dict) -> HfApi:
        handler = type("Answers", (_HubAnswers,), {"answers": answers, "seen": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        api = HfApi(endpoint=f"http://127.0.0.1:{server.server_port}", token="hf_NotARealTokenButNeverPrinted")
        api.seen = handler.seen
        return api

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def _cli(argv: list[str], api) -> int:
    import huggingface_hub

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(huggingface_hub, "HfApi", lambda *args, **kwargs: api)
        return cli.main(["publish", *argv])


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "publish"])
def test_a_token_the_hub_does_not_accept_is_one_line_saying_to_log_in(mirror, hub, capsys, dry_run):
    api = hub({("GET", "/api/datasets/"): (401, None, "Invalid credentials in Authorization header")})
    assert _cli([str(mirror), "--repo-id", REPO] + (["--dry-run"] if dry_run else []), api) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "NotARealToken" not in err
    assert err.startswith(f"error: the Hub did not authenticate this publish while reading {REPO} (401: Invalid "
                          "credentials in Authorization header): set HF_TOKEN to a valid token with write access, or "
                          "log in with `hf auth login`; nothing was published")
    assert all(method == "GET" for method, _ in api.seen)


@pytest.fixture
def hashed(monkeypatch) -> list:
    """The mirror files publish hashes (checking them against the manifest), recorded."""
    from tooluse_datasets import publish as publish_module

    seen: list = []
    real = publish_module.sha256_file
    monkeypatch.setattr(publish_module, "sha256_file", lambda path, *args: seen.append(path) or real(path, *args))
    return seen


def test_a_publish_without_a_token_says_so_before_the_mirror_is_hashed(mirror, hub, capsys, monkeypatch, tmp_path,
                                                                        hashed):
    """No token: the repo read as missing (the Hub answers 401 RepoNotFound) and creating it was refused only once
    every file had been hashed. A dry run only reads, which needs no token."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-login"))
    api = hub({("GET", "/api/datasets/"): (401, "RepoNotFound", "Invalid username or password."),
               ("POST", "/api/repos/create"): (401, None, "Invalid username or password.")})
    api.token = None
    assert _cli([str(mirror), "--repo-id", REPO], api) == 2
    assert capsys.readouterr().err == (
        f"error: no Hugging Face token found to publish to {REPO}: set HF_TOKEN to a token with write access, or log "
        "in with `hf auth login`; nothing was published\n")
    assert hashed == [] and api.seen == []
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"create dataset repo {REPO} (public")


def test_a_token_the_hub_refuses_is_said_before_the_mirror_is_hashed(mirror, hub, capsys, hashed):
    api = hub({("GET", "/api/whoami-v2"): (401, None, "Invalid credentials in Authorization header"),
               ("GET", "/api/datasets/"): (401, None, "Invalid credentials in Authorization header")})
    assert _cli([str(mirror), "--repo-id", REPO], api) == 2
    assert capsys.readouterr().err == (
        f"error: the Hub did not authenticate this publish while checking the token for {REPO} (401: Invalid user "
        "token.): set HF_TOKEN to a valid token with write access, or log in with `hf "
        "auth login`; nothing was published\n")
    assert hashed == [] and api.seen == [("GET", "/api/whoami-v2")]


def test_a_read_only_token_is_refused_before_the_mirror_is_hashed(mirror, hub, capsys, hashed):
    me = {"type": "user", "name": "someone", "auth": {"type": "access_token",
                                                      "accessToken": {"displayName": "laptop", "role": "read"}}}
    api = hub({("GET", "/api/whoami-v2"): (200, None, me)})
    assert _cli([str(mirror), "--repo-id", REPO], api) == 2
    assert capsys.readouterr().err == (
        f"error: the token 'laptop' is read-only: publishing to {REPO} needs a token with write access (set HF_TOKEN "
        "to one, or log in with `hf auth login`); nothing was published\n")
    assert hashed == [] and api.seen == [("GET", "/api/whoami-v2")]


def test_a_token_without_write_access_names_the_hubs_reason_not_only_the_request_id(mirror, hub, capsys):
    """huggingface_hub's message for a 403 starts with a blank line: its first line was "(Request ID: ...)"."""
    reason = 'You don\'t have the rights to create a dataset under the namespace "acme"'
    api = hub({("POST", "/api/repos/create"): (403, None, reason)})
    with pytest.raises(PublishError, match="the Hub refused this token while creating"):
        publish_mirror(mirror, REPO, api=api, echo=quiet)
    assert _cli([str(mirror), "--repo-id", REPO], api) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (f"error: the Hub refused this token while creating {REPO} (403: {reason}): publish with a token "
                   "that has write access to acme (HF_TOKEN or `hf auth login`); nothing was published")
    assert ("POST", "/api/repos/create") in api.seen


def test_a_server_error_while_reading_is_one_line_saying_nothing_was_published(mirror, hub, capsys):
    api = hub({("GET", "/api/datasets/"): (503, None, "Service Unavailable")})
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 2
    assert capsys.readouterr().err == (f"error: the Hub failed while reading {REPO} (503: Service Unavailable): "
                                       "nothing was published; publish again later\n")


def test_a_repo_changed_by_a_concurrent_publish_says_to_publish_again(mirror, tmp_path, capsys):
    """Two publishes of one repo read the same head; the second commit is refused (412) and says what to do."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=quiet)
    api.edit(REPO, {"README.md": b"---\nlicense: mit\n---\nreplaced\n"})  # the repo differs: a commit is planned
    original = api.create_commit

    def racing_commit(*args, **kwargs):
        api.edit(REPO, {"notes.txt": b"a concurrent publish landed first"})
        return original(*args, **kwargs)

    api.create_commit = racing_commit
    with pytest.raises(PublishError, match=f"^{REPO} changed since this publish read it .*412.*: nothing was "
                                           "committed; publish again") as raised:
        publish_mirror(mirror, REPO, api=api, echo=quiet)
    assert isinstance(raised.value.__cause__, HfHubHTTPError)
    assert api.files(REPO)["README.md"] == b"---\nlicense: mit\n---\nreplaced\n"
