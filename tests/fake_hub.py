"""An in-memory stand-in for the parts of ``huggingface_hub.HfApi`` that publishing uses.

It keeps repos as branches of commits (each commit = a full snapshot ``{path: bytes}``), answers with the real
``huggingface_hub`` types (``RepoFile`` with LFS info for Parquet files and a git blob id for the others, as the
Hub does) and the real error classes, checks ``parent_commit`` like the Hub (412 when the branch moved; a pull
request is made from it), takes commits to a pull request's ``refs/pr/N``, and
records every call so tests can assert what was (not) done.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

try:  # huggingface_hub's own HTTP client (a dependency of it): the error responses it builds
    import httpx2 as httpx  # huggingface_hub 2
except ImportError:
    import httpx  # huggingface_hub 1, the oldest the package supports
from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.errors import (EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError,
                                    RevisionNotFoundError)
from huggingface_hub.hf_api import RepoFile, RepoFolder
from huggingface_hub.utils import sha as hub_sha

LFS_SUFFIXES = (".parquet",)


def http_response(status: int, url: str) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("GET", url))


@dataclass
class Commit:
    sha: str
    files: dict[str, bytes]
    message: str


@dataclass
class FakeRepo:
    private: bool
    branches: dict[str, list[Commit]] = field(default_factory=dict)
    pull_requests: list[Commit] = field(default_factory=list)  # pull request N is pull_requests[N - 1], at refs/pr/N
    pull_request_bases: list[str] = field(default_factory=list)  # the branch each one is to be merged into
    pull_request_status: list[str] = field(default_factory=list)  # "draft" (as the Hub opens one made by API), ...
    tags: dict[str, Commit] = field(default_factory=dict)


@dataclass
class CommitResult:
    commit_url: str
    pr_url: Optional[str] = None


class FakeHubApi:
    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.calls: list[tuple[str, dict]] = []
        self.token_role = "write"

    # -- inspection helpers for tests ---------------------------------------------------------------

    def call_names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        return dict(self._branch(repo_id, revision)[-1].files)

    def commits(self, repo_id: str, revision: str = "main") -> list[Commit]:
        return list(self._branch(repo_id, revision))

    def edit(self, repo_id: str, files: dict[str, bytes], deletions: tuple[str, ...] = (), revision: str = "main"):
        """A commit made by someone else (a user editing the card on the website, say)."""
        head = self._branch(repo_id, revision)[-1]
        snapshot = {**head.files, **files}
        for path in deletions:
            snapshot.pop(path, None)
        self._append(repo_id, revision, snapshot, "edit on the Hub")

    # -- HfApi surface ----------------------------------------------------------------------------------

    def whoami(self, **kwargs):
        """A write token (``token_role`` says otherwise); not recorded in ``calls``: it names no repo."""
        return {"type": "user", "name": "acme-bot",
                "auth": {"type": "access_token", "accessToken": {"displayName": "ci", "role": self.token_role}}}

    def repo_info(self, repo_id, *, revision=None, repo_type=None, **kwargs):
        self.calls.append(("repo_info", {"repo_id": repo_id, "revision": revision, "repo_type": repo_type}))
        assert repo_type == "dataset"
        branch = [self._commit(repo_id, revision)]
        return type("Info", (), {"sha": branch[-1].sha, "id": repo_id, "private": self._repo(repo_id).private})()

    def tag(self, repo_id: str, tag: str, revision: str = "main") -> None:
        """A tag at the head of ``revision`` (a release of the repo, say)."""
        self._repo(repo_id).tags[tag] = self._branch(repo_id, revision)[-1]

    def list_repo_refs(self, repo_id, *, repo_type=None, **kwargs):
        self.calls.append(("list_repo_refs", {"repo_id": repo_id}))
        repo = self._repo(repo_id)
        refs = lambda names: [type("Ref", (), {"name": name})() for name in names]  # noqa: E731
        return type("Refs", (), {"branches": refs(repo.branches), "tags": refs(repo.tags)})()

    def list_repo_tree(self, repo_id, path_in_repo=None, *, recursive=False, expand=False, revision=None,
                       repo_type=None, **kwargs):
        self.calls.append(("list_repo_tree", {"repo_id": repo_id, "revision": revision, "recursive": recursive}))
        files = self._commit(repo_id, revision).files
        folders = sorted({str(Path(p).parent) for p in files if "/" in p})
        entries = [RepoFolder(path=f, oid="0" * 40) for f in folders]
        for path, data in sorted(files.items()):
            lfs = None
            if path.endswith(LFS_SUFFIXES):
                lfs = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(RepoFile(path=path, size=len(data), oid=hub_sha.git_hash(data), lfs=lfs))
        return entries if recursive else [e for e in entries if "/" not in e.path]

    def hf_hub_download(self, repo_id, filename, *, repo_type=None, revision=None, local_dir=None, **kwargs):
        self.calls.append(("hf_hub_download", {"repo_id": repo_id, "filename": filename, "revision": revision}))
        files = self._commit(repo_id, revision).files
        if filename not in files:
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        path = Path(local_dir or os.getcwd()) / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[filename])
        return str(path)

    def create_repo(self, repo_id, *, private=None, repo_type=None, exist_ok=False, **kwargs):
        self.calls.append(("create_repo", {"repo_id": repo_id, "private": private, "repo_type": repo_type}))
        if repo_id in self.repos and not exist_ok:
            raise HfHubHTTPError(f"409 Conflict: {repo_id} already exists", response=http_response(409, repo_id))
        if repo_id not in self.repos:
            self.repos[repo_id] = FakeRepo(private=bool(private))
            self._append(repo_id, "main", {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"},
                         "initial commit")
        return f"https://huggingface.co/datasets/{repo_id}"

    def delete_repo(self, repo_id, *, repo_type=None, **kwargs):
        self.calls.append(("delete_repo", {"repo_id": repo_id}))
        self._repo(repo_id)
        del self.repos[repo_id]

    def create_branch(self, repo_id, *, branch, revision=None, repo_type=None, exist_ok=False, **kwargs):
        self.calls.append(("create_branch", {"repo_id": repo_id, "branch": branch}))
        repo = self._repo(repo_id)
        if branch not in repo.branches:  # from a branch's head or a commit id, as the Hub takes either
            repo.branches[branch] = [self._commit(repo_id, revision)]

    def create_commit(self, repo_id, operations, *, commit_message, repo_type=None, revision=None,
                      create_pr=None, parent_commit=None, **kwargs):
        operations = list(operations)
        self.calls.append(("create_commit", {"repo_id": repo_id, "operations": operations, "revision": revision,
                                             "create_pr": create_pr, "parent_commit": parent_commit,
                                             "commit_message": commit_message}))
        branch_name = revision or "main"
        repo = self._repo(repo_id)
        on_pull_request = branch_name.startswith("refs/pr/")  # a commit to a pull request's branch updates it
        head = self._commit(repo_id, branch_name) if on_pull_request else self._branch(repo_id, branch_name)[-1]
        if create_pr and parent_commit is not None:
            # As the Hub: "if create_pr is True, the pull request will be created from parent_commit" (no 412)
            head = self._commit(repo_id, parent_commit)
        elif parent_commit is not None and parent_commit != head.sha:
            raise HfHubHTTPError("412 Precondition Failed: parent commit is not the head",
                                 response=http_response(412, repo_id))
        snapshot = dict(head.files)
        for op in operations:
            if isinstance(op, CommitOperationAdd):
                with op.as_file() as f:
                    snapshot[op.path_in_repo] = f.read()
                # As huggingface_hub's upload: the file's sha256 (hashing the file if it was not given), and the
                # Hub refuses an upload whose content does not have it.
                if op.upload_info.sha256 != hashlib.sha256(snapshot[op.path_in_repo]).digest():
                    raise HfHubHTTPError(f"400 Bad Request: {op.path_in_repo} does not match its sha256",
                                         response=http_response(400, repo_id))
            elif isinstance(op, CommitOperationDelete):
                if op.path_in_repo not in snapshot:
                    raise EntryNotFoundError(f"cannot delete missing {op.path_in_repo}")
                del snapshot[op.path_in_repo]
            else:
                raise TypeError(op)
        if create_pr:
            commit = Commit(self._sha(snapshot, commit_message + str(len(self._repo(repo_id).pull_requests))),
                            snapshot, commit_message)
            self._repo(repo_id).pull_requests.append(commit)
            self._repo(repo_id).pull_request_bases.append(branch_name)
            self._repo(repo_id).pull_request_status.append("draft")
            n = len(self._repo(repo_id).pull_requests)
            return CommitResult(f"https://huggingface.co/datasets/{repo_id}/commit/{commit.sha}",
                                f"https://huggingface.co/datasets/{repo_id}/discussions/{n}")
        if on_pull_request:
            n = int(branch_name.removeprefix("refs/pr/"))
            commit = Commit(self._sha(snapshot, commit_message + str(n)), snapshot, commit_message)
            repo.pull_requests[n - 1] = commit
            return CommitResult(f"https://huggingface.co/datasets/{repo_id}/commit/{commit.sha}",
                                f"https://huggingface.co/datasets/{repo_id}/discussions/{n}")
        # refs/heads/main is the branch main, as the Hub resolves a revision
        commit = self._append(repo_id, branch_name.removeprefix("refs/heads/"), snapshot, commit_message)
        return CommitResult(f"https://huggingface.co/datasets/{repo_id}/commit/{commit.sha}")

    def get_repo_discussions(self, repo_id, *, discussion_type=None, discussion_status=None, repo_type=None,
                             **kwargs):
        from datetime import datetime, timezone

        from huggingface_hub.community import Discussion

        self.calls.append(("get_repo_discussions", {"repo_id": repo_id, "discussion_type": discussion_type}))
        repo = self._repo(repo_id)
        for num, status in reversed(list(enumerate(repo.pull_request_status, start=1))):  # newest first
            if discussion_status in (None, "all") or discussion_status == status:
                yield Discussion(title=repo.pull_requests[num - 1].message, status=status, num=num, repo_id=repo_id,
                                 repo_type=repo_type, author="acme-bot", is_pull_request=True,
                                 created_at=datetime.now(timezone.utc), endpoint="https://huggingface.co")

    def get_discussion_details(self, repo_id, discussion_num, *, repo_type=None, **kwargs):
        self.calls.append(("get_discussion_details", {"repo_id": repo_id, "discussion_num": discussion_num}))
        repo = self._repo(repo_id)
        return type("Details", (), {"num": discussion_num, "status": repo.pull_request_status[discussion_num - 1],
                                    "target_branch": f"refs/heads/{repo.pull_request_bases[discussion_num - 1]}"})()

    # -- internals ----------------------------------------------------------------------------------------

    def _repo(self, repo_id: str) -> FakeRepo:
        if repo_id not in self.repos:
            raise RepositoryNotFoundError(f"{repo_id} not found", response=http_response(404, repo_id))
        return self.repos[repo_id]

    def _branch(self, repo_id: str, revision: str) -> list[Commit]:
        repo = self._repo(repo_id)
        revision = revision.removeprefix("refs/heads/")
        if revision not in repo.branches:
            raise RevisionNotFoundError(f"{revision} not found", response=http_response(404, repo_id))
        return repo.branches[revision]

    def _commit(self, repo_id: str, revision: Optional[str]) -> Commit:
        """A branch's head, a tag's commit or a commit id, as the Hub resolves a revision."""
        repo = self._repo(repo_id)
        if revision is not None and revision.startswith("refs/pr/"):
            n = int(revision.removeprefix("refs/pr/"))
            if not 0 < n <= len(repo.pull_requests):
                raise RevisionNotFoundError(f"{revision} not found", response=http_response(404, repo_id))
            return repo.pull_requests[n - 1]
        if revision is not None and revision.removeprefix("refs/tags/") in repo.tags:
            return repo.tags[revision.removeprefix("refs/tags/")]
        for commits in [*repo.branches.values(), repo.pull_requests]:
            for commit in commits:
                if commit.sha == revision:
                    return commit
        return self._branch(repo_id, revision or "main")[-1]

    def _append(self, repo_id: str, branch: str, files: dict[str, bytes], message: str) -> Commit:
        commits = self._repo(repo_id).branches.setdefault(branch, [])
        commit = Commit(self._sha(files, message + str(len(commits))), files, message)
        commits.append(commit)
        return commit

    @staticmethod
    def _sha(files: dict[str, bytes], salt: str) -> str:
        digest = hashlib.sha1(salt.encode())
        for path, data in sorted(files.items()):
            digest.update(path.encode() + b"\0" + hashlib.sha1(data).digest())
        return digest.hexdigest()
