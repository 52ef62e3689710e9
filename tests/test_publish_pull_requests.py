"""``--create-pr`` run again: the open pull request whose head already holds what the publish would commit is
found and named instead of opening its duplicate; a changed mirror, another target branch or a closed pull request
still gets a new one."""
from __future__ import annotations

from pathlib import Path

import pytest

from tooluse_datasets import cli
from tooluse_datasets.publish import publish_mirror

from fake_hub import FakeHubApi
from mirror_support import build_sample_mirror, quiet

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
