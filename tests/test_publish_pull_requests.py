"""``--create-pr`` run again: the open pull request whose head already holds what the publish would commit is
found and named instead of opening its duplicate; a changed mirror, another target branch or a closed pull request
still gets a new one."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tooluse_datasets import cli
from tooluse_datasets.mirror import mirror_files, read_manifest
from tooluse_datasets.publish import PublishError, publish_mirror

from fake_hub import FakeHubApi
from mirror_support import build_sample_mirror, quiet
from test_publish_hub_answers import hub  # noqa: F401  (the fixture: a server answering as the Hub does)

REPO = "acme/nestful-tooluse"


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


@pytest.fixture(scope="module")
def raw_only(tmp_path_factory) -> Path:
    return build_sample_mirror("nestful", tmp_path_factory.mktemp("raw-only"), configs=["raw"])


def _cli(argv: list[str], api) -> int:
    import huggingface_hub

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(huggingface_hub, "HfApi", lambda *args, **kwargs: api)
        return cli.main(["publish", *argv])


def _published(mirror: Path) -> FakeHubApi:
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=quiet)
    return api


def test_the_same_pull_request_published_again_is_found_not_opened_twice(mirror, raw_only, capsys):
    api = _published(mirror)
    argv = [str(raw_only), "--repo-id", REPO, "--create-pr", "--delete-missing"]
    assert _cli(argv, api) == 0
    url = f"https://huggingface.co/datasets/{REPO}/discussions/1"
    assert capsys.readouterr().out.splitlines()[-1] == f"committed: {url}"
    assert _cli(argv, api) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"a pull request holding these files is open already: {url}"
    assert len(api.repos[REPO].pull_requests) == 1
    assert _cli(argv + ["--dry-run"], api) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"a pull request holding these files is open already: {url}"
    again = publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet)
    assert not again.committed and again.commit_url == url and len(api.repos[REPO].pull_requests) == 1


def test_a_changed_mirror_opens_a_new_pull_request(mirror, raw_only, tmp_path):
    api = _published(mirror)
    publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet)
    unified_only = build_sample_mirror("nestful", tmp_path, configs=["unified"])
    changed = publish_mirror(unified_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet)
    assert changed.committed and changed.commit_url.endswith("/discussions/2")
    assert "raw/train-00000-of-00001.parquet" not in api.repos[REPO].pull_requests[1].files


def test_a_pull_request_into_another_branch_or_closed_is_not_taken_for_this_one(mirror, raw_only):
    api = _published(mirror)
    publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet)
    api.create_branch(REPO, branch="dev", revision="main")
    into_dev = publish_mirror(raw_only, REPO, api=api, revision="dev", create_pr=True, delete_missing=True,
                              echo=quiet)
    assert into_dev.committed and api.repos[REPO].pull_request_bases == ["main", "dev"]
    api.repos[REPO].pull_request_status[0] = "closed"
    reopened = publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet)
    assert reopened.committed and reopened.commit_url.endswith("/discussions/3")


def test_the_hubs_own_answers_about_pull_requests_are_read_as_the_hub_gives_them(hub):
    """Through huggingface_hub's real HfApi, a server on 127.0.0.1 answering as the Hub does: the pull requests'
    list (a closed one is not looked into), the tree of refs/pr/1 and its details (the branch it is into)."""
    from huggingface_hub.utils import sha as hub_sha

    from tooluse_datasets.publish import LocalFile, PublishPlan, RemoteFile, RemoteState, _open_pull_request_holding

    data, card = b"PAR1 rows PAR1", b"---\nlicense: mit\n---\n"
    sha = hashlib.sha256(data).hexdigest()
    card_file = RemoteFile("README.md", len(card), None, hub_sha.git_hash(card))
    plan = PublishPlan(REPO, None, [LocalFile("unified/train.parquet", len(data), sha, data)], ["stale.parquet"],
                       ["README.md"], RemoteState(True, True, "1" * 40, {"README.md": card_file}, None, None))

    def pr(num: int, status: str) -> dict:
        return {"num": num, "title": "Publish nestful mirror", "status": status, "isPullRequest": True,
                "author": {"name": "acme-bot"}, "createdAt": "2026-12-01T10:00:00.000Z",
                "repo": {"name": REPO, "type": "dataset"}}

    tree = [{"type": "directory", "path": "unified", "oid": "0" * 40, "size": 0},
            {"type": "file", "path": "unified/train.parquet", "size": len(data), "oid": "2" * 40,
             "lfs": {"oid": sha, "size": len(data), "pointerSize": 134}},
            {"type": "file", "path": "README.md", "size": len(card), "oid": card_file.blob_id}]
    details = {**pr(1, "draft"), "events": [], "filesWithConflicts": [], "diff": "",
               "changes": {"base": "refs/heads/main"}}
    base = f"/api/datasets/{REPO}"
    api = hub({("GET", f"{base}/discussions/1"): (200, None, details),
               ("GET", f"{base}/discussions?"): (200, None, {"count": 2, "start": 0,
                                                             "discussions": [pr(2, "closed"), pr(1, "draft")]}),
               ("GET", f"{base}/tree/refs%2Fpr%2F1"): (200, None, tree)})
    assert _open_pull_request_holding(api, plan) == f"{api.endpoint}/datasets/{REPO}/discussions/1"
    assert [path.split("?")[0] for _, path in api.seen] == [f"{base}/discussions", f"{base}/tree/refs%2Fpr%2F1",
                                                            f"{base}/discussions/1"]
    # the same pull request into another branch is not this publish's
    details["changes"]["base"] = "refs/heads/dev"
    assert _open_pull_request_holding(api, plan) is None


# -- two --create-pr runs at the same moment ------------------------------------------------------------------------


def _racing(api: FakeHubApi, other_publish) -> None:
    """The next create_commit runs ``other_publish`` (a whole publish) first: both read the repo before either
    committed."""
    create_commit = api.create_commit

    def commit_after_the_other(*args, **kwargs):
        api.create_commit = create_commit
        other_publish()
        return create_commit(*args, **kwargs)

    api.create_commit = commit_after_the_other


def test_two_pull_requests_published_at_once_are_two_whole_pull_requests(mirror, raw_only, tmp_path):
    """Neither saw the other's pull request when it looked for one: each opens its own, holding its own mirror
    whole; the default branch is untouched."""
    api = _published(mirror)
    main_files = api.files(REPO)
    unified_only = build_sample_mirror("nestful", tmp_path, configs=["unified"])
    others = []
    _racing(api, lambda: others.append(publish_mirror(unified_only, REPO, api=api, create_pr=True,
                                                      delete_missing=True, echo=quiet)))
    first = publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet)
    assert others[0].committed and others[0].commit_url.endswith("/discussions/1")
    assert first.committed and first.commit_url.endswith("/discussions/2")
    unified_pr, raw_pr = api.repos[REPO].pull_requests
    assert set(raw_pr.files) == {".gitattributes", *(f.path for f in read_manifest(raw_only).files),
                                 *(f.path for f in read_manifest(raw_only).figures), "README.md",
                                 ".tooluse-datasets.json"}
    assert all(raw_pr.files[path] == (raw_only / path).read_bytes() for path in raw_pr.files
               if path.endswith(".parquet"))
    assert not any(path.startswith("unified/") for path in raw_pr.files)
    assert not any(path.startswith("raw/") for path in unified_pr.files)
    assert api.files(REPO) == main_files
    # The same mirror twice at once, from two copies (from one folder, the second waits for the first's commit on
    # the mirror's lock, then finds its pull request): two pull requests holding the same files; a third run names
    # one of them.
    copy = tmp_path / "copy" / "nestful"
    shutil.copytree(raw_only, copy)
    api = _published(mirror)
    _racing(api, lambda: publish_mirror(copy, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet))
    assert publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet).committed
    one, two = api.repos[REPO].pull_requests
    assert one.files == two.files
    assert not publish_mirror(raw_only, REPO, api=api, create_pr=True, delete_missing=True, echo=quiet).committed


def test_two_pull_requests_at_once_into_a_new_repo_or_onto_one_pull_request_the_second_is_an_error(mirror, raw_only,
                                                                                                  tmp_path):
    """Into a repo neither found: the second to create it is refused (409), naming what to do. Onto one pull
    request's branch (--revision refs/pr/N): the second commit is refused (412), so the pull request holds one
    publish's files whole."""
    api = FakeHubApi()
    create_repo = api.create_repo

    def create_after_the_other(*args, **kwargs):
        api.create_repo = create_repo
        assert publish_mirror(raw_only, REPO, api=api, create_pr=True, echo=quiet).committed
        return create_repo(*args, **kwargs)

    api.create_repo = create_after_the_other
    with pytest.raises(PublishError, match=f"{REPO} exists although it was not found when this publish was planned: "
                                           "either someone created it meanwhile \\(run the publish again\\)"):
        publish_mirror(mirror, REPO, api=api, create_pr=True, echo=quiet)
    (pr,) = api.repos[REPO].pull_requests
    assert set(pr.files) == set(mirror_files(raw_only)) | {".gitattributes"}
    # Two publishes onto refs/pr/1 at once.
    _racing(api, lambda: publish_mirror(mirror, REPO, api=api, revision="refs/pr/1", echo=quiet))
    unified_only = build_sample_mirror("nestful", tmp_path, configs=["unified"])
    with pytest.raises(PublishError, match=f"{REPO} changed since this publish read it .*412.*nothing was committed"):
        publish_mirror(unified_only, REPO, api=api, revision="refs/pr/1", delete_missing=True, echo=quiet)
    (pr,) = api.repos[REPO].pull_requests
    assert set(pr.files) == set(mirror_files(mirror)) | {".gitattributes"}
    assert all(pr.files[path] == (mirror / path).read_bytes() for path in pr.files if path.endswith(".parquet"))
