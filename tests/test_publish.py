"""Publishing through an injectable HfApi (an in-memory stand-in that records calls): one atomic commit,
dry runs, no-op re-publishing, stale-file deletion that spares user files, card merging, branches and PRs."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard
from huggingface_hub.errors import HfHubHTTPError

import tooluse_datasets as td
from tooluse_datasets import cli
from tooluse_datasets.dataset_card import BEGIN_MARKER, END_MARKER, render_card
from tooluse_datasets.mirror import MirrorRequest, ParquetLayout, build_mirror, mirror_files, read_manifest
from tooluse_datasets.publish import PublishError, publish_mirror

from conftest import PROJECT_ROOT
from fake_hub import FakeHubApi, http_response
from mirror_support import build_sample_mirror, holding_the_build_lock, stop_a_first_build
from mirror_support import quiet as _quiet

REPO = "acme/nestful-tooluse"


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


def _commits(api: FakeHubApi) -> list[dict]:
    return [kwargs for name, kwargs in api.calls if name == "create_commit"]


def test_dry_run_lists_exactly_the_files_of_the_mirror_and_changes_nothing(mirror):
    api, lines = FakeHubApi(), []
    result = publish_mirror(mirror, REPO, api=api, dry_run=True, echo=lines.append)
    assert sorted(f.path for f in result.plan.additions) == mirror_files(mirror)
    assert result.plan.deletions == [] and not result.committed
    # the repo's visibility is said, so that a dry run shows a repo would be public before it is
    assert lines[0] == f"create dataset repo {REPO} (public unless acme makes new repos private; --private makes it " \
                       "private)"
    assert sorted(line.split()[1] for line in lines if line.startswith("add ")) == mirror_files(mirror)
    assert lines[-1] == f"{REPO}: {len(mirror_files(mirror))} to add, 0 to delete, 0 unchanged"
    assert api.call_names() == ["repo_info"] and api.repos == {}
    private_lines: list[str] = []
    publish_mirror(mirror, REPO, api=api, dry_run=True, private=True, echo=private_lines.append)
    assert private_lines[0] == f"create dataset repo {REPO} (private)"


def test_first_publish_is_one_commit_holding_every_file(mirror):
    api = FakeHubApi()
    result = publish_mirror(mirror, REPO, api=api, private=True, echo=_quiet)
    assert result.committed and result.commit_url.startswith(f"https://huggingface.co/datasets/{REPO}/commit/")
    assert api.call_names() == ["repo_info", "create_repo", "create_commit"]
    assert api.calls[1][1]["private"] is True
    (commit,) = _commits(api)
    assert all(isinstance(op, CommitOperationAdd) for op in commit["operations"])
    remote = api.files(REPO)
    assert set(remote) == set(mirror_files(mirror)) | {".gitattributes"}
    for rel in mirror_files(mirror):
        if rel != "README.md":
            assert remote[rel] == (mirror / rel).read_bytes(), rel
    assert remote["README.md"].decode() == render_card(read_manifest(mirror), REPO)
    assert f'load_dataset("{REPO}", "unified"' in remote["README.md"].decode()


def test_republishing_an_unchanged_mirror_makes_no_commit(mirror, tmp_path):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    head = api.commits(REPO)[-1].sha
    again = publish_mirror(mirror, REPO, api=api, echo=_quiet)
    assert again.plan.is_noop and not again.committed
    assert sorted(again.plan.unchanged) == mirror_files(mirror)
    # a mirror rebuilt from the same input is byte-identical, so CI re-publishing is a no-op as well
    rebuilt = build_sample_mirror("nestful", tmp_path, configs=["unified", "raw"])
    assert not publish_mirror(rebuilt, REPO, api=api, echo=_quiet).committed
    assert len(_commits(api)) == 1 and api.commits(REPO)[-1].sha == head
    assert "create_repo" not in api.call_names()[3:]


def test_a_changed_mirror_adds_changed_files_and_deletes_only_our_stale_ones(mirror, tmp_path):
    api = FakeHubApi()
    small = build_sample_mirror("nestful", tmp_path / "a", configs=["unified", "raw"],
                                layout=ParquetLayout(row_group_rows=2, shard_bytes=1))
    publish_mirror(small, REPO, api=api, echo=_quiet)
    old_files = set(api.files(REPO))
    assert "unified/train-00004-of-00005.parquet" in old_files
    api.edit(REPO, {"notes/extra.txt": b"ours, not the tool's", "data/custom.csv": b"a,b\n1,2\n"})
    head = api.commits(REPO)[-1].sha

    changed = build_sample_mirror("nestful", tmp_path / "b", configs=["unified"])
    result = publish_mirror(changed, REPO, api=api, delete_missing=True, echo=_quiet)
    assert result.committed
    commit = _commits(api)[-1]
    assert commit["parent_commit"] == head
    deleted = {op.path_in_repo for op in commit["operations"] if isinstance(op, CommitOperationDelete)}
    added = {op.path_in_repo for op in commit["operations"] if isinstance(op, CommitOperationAdd)}
    assert deleted == {p for p in old_files if p.startswith(("raw/", "unified/"))}
    # the sample has two files, so one part per file (a mirror starts a new file at every shard of the input)
    assert added == {"unified/train-00000-of-00002.parquet", "unified/train-00001-of-00002.parquet",
                     ".tooluse-datasets.json", "README.md"}
    remote = api.files(REPO)
    assert set(remote) == set(mirror_files(changed)) | {".gitattributes", "notes/extra.txt", "data/custom.csv"}
    assert len(api.commits(REPO)) == 4  # initial, first publish, user edit, this publish: one commit each


def test_user_card_sections_and_metadata_survive_republishing(mirror, tmp_path):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    card = api.files(REPO)["README.md"].decode()
    edited = card.replace("---\n\n" + BEGIN_MARKER, "my_team: tool-use squad\n---\n\n## Why we mirror this\n\n"
                          "Hand-written.\n\n" + BEGIN_MARKER, 1) + "\n## Contact\n\nwrite to us\n"
    assert edited != card and "my_team" in edited
    api.edit(REPO, {"README.md": edited.encode()})
    commits_before = len(_commits(api))
    # unchanged data: the merged card equals the edited one, so there is nothing to commit
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    assert len(_commits(api)) == commits_before

    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])
    assert publish_mirror(changed, REPO, api=api, delete_missing=True, echo=_quiet).committed
    merged = api.files(REPO)["README.md"].decode()
    merged_card = DatasetCard(merged)
    assert merged_card.data["my_team"] == "tool-use squad"
    assert "## Why we mirror this\n\nHand-written." in merged and "## Contact\n\nwrite to us" in merged
    assert [c["config_name"] for c in merged_card.data["configs"]] == ["raw"]
    generated = render_card(read_manifest(changed), REPO)
    assert generated[generated.index(BEGIN_MARKER):generated.index(END_MARKER)] in merged


def test_list_metadata_an_earlier_publish_wrote_goes_when_the_mirror_no_longer_claims_it(mirror, tmp_path):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)  # the bundled sample: NESTFUL's language and upstream
    card = DatasetCard(api.files(REPO)["README.md"].decode())
    assert card.data["source_datasets"] == ["ibm-research/nestful"] and card.data["language"] == ["en"]
    card.data["tags"] = card.data["tags"] + ["our-pick"]
    api.edit(REPO, {"README.md": str(card).encode()})
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed  # the user's tag: still a no-op
    # the same rows from a copy of the file: data files given to the mirror claim no upstream or language
    copy = tmp_path / "rows"
    copy.mkdir()
    files = [shutil.copy(path, copy) for path in td.sample_files("nestful")["train"]]
    own = build_mirror(MirrorRequest("nestful", configs=["unified", "raw"], data_files=files), tmp_path / "out")
    assert publish_mirror(own, REPO, api=api, echo=_quiet).committed
    merged = DatasetCard(api.files(REPO)["README.md"].decode()).data.to_dict()
    assert "source_datasets" not in merged and "language" not in merged
    assert merged["tags"][-1] == "our-pick" and "nestful" in merged["tags"]


def test_an_earlier_manifest_whose_features_this_datasets_cannot_read_is_still_published_over(mirror):
    """Its card metadata is read for the list items it wrote only: its features (here of a type only another
    datasets version knows) made the publish fail with datasets' own ValueError."""
    import json

    from tooluse_datasets.mirror.manifest import MANIFEST_NAME

    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    earlier = json.loads(api.files(REPO)[MANIFEST_NAME])
    earlier["configs"]["unified"]["features"]["id"] = {"_type": "FutureValue", "dtype": "string"}
    api.edit(REPO, {MANIFEST_NAME: json.dumps(earlier).encode()})
    assert publish_mirror(mirror, REPO, api=api, echo=_quiet).committed  # our manifest written back
    assert read_manifest(mirror).to_json() == api.files(REPO)[MANIFEST_NAME].decode()


def test_a_concurrent_change_fails_the_commit_instead_of_overwriting_it(mirror, tmp_path):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    original_commit = api.create_commit

    def racing_commit(*args, **kwargs):
        api.edit(REPO, {"notes/someone-else.txt": b"pushed meanwhile"})
        return original_commit(*args, **kwargs)

    api.create_commit = racing_commit
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])
    with pytest.raises(PublishError, match="changed since this publish read it .*412"):
        publish_mirror(changed, REPO, api=api, delete_missing=True, echo=_quiet)
    assert "notes/someone-else.txt" in api.files(REPO) and "unified/train-00000-of-00002.parquet" in api.files(REPO)


def test_a_failed_first_publish_leaves_no_repo_behind(mirror):
    """The repo is created just before the commit; if the commit fails it is deleted again, unless the commit
    landed and only its answer was lost (then the repo holds the files and is kept)."""
    api = FakeHubApi()
    original_commit = api.create_commit

    def failing_commit(*args, **kwargs):
        raise HfHubHTTPError("500 Server Error", response=http_response(500, REPO))

    api.create_commit = failing_commit
    lines: list[str] = []
    with pytest.raises(PublishError, match="500"):
        publish_mirror(mirror, REPO, api=api, echo=lines.append)
    assert REPO not in api.repos and api.call_names()[-1] == "delete_repo"
    assert lines[-1] == f"the commit failed: deleted the repo {REPO} this publish had created"

    def lost_answer(*args, **kwargs):
        original_commit(*args, **kwargs)
        raise HfHubHTTPError("504 Gateway Timeout", response=http_response(504, REPO))

    api.create_commit = lost_answer
    with pytest.raises(PublishError, match="504.*the commit may have landed or not"):
        publish_mirror(mirror, REPO, api=api, echo=lines.append)
    assert set(api.files(REPO)) == set(mirror_files(mirror)) | {".gitattributes"}
    assert "delete_repo" not in api.call_names()[-3:] and lines[-1].endswith("holds files now: kept")
    # The same on a branch: the files landed on the branch committed to, not on main.
    other = "acme/on-a-branch"
    with pytest.raises(PublishError, match="504"):
        publish_mirror(mirror, other, api=api, revision="dev", echo=lines.append)
    assert set(api.files(other, "dev")) == set(mirror_files(mirror)) | {".gitattributes"}
    assert lines[-1].endswith("holds files now: kept")
    # A pull request's commit is on no branch that could be checked: the new repo is kept, and said so.
    api.create_commit = failing_commit
    with pytest.raises(PublishError, match="500"):
        publish_mirror(mirror, "acme/by-pull-request", api=api, create_pr=True, echo=lines.append)
    assert "acme/by-pull-request" in api.repos and "delete_repo" not in api.call_names()[-2:]
    assert lines[-1].startswith("the pull request failed; the repo acme/by-pull-request this publish created was kept")


def test_a_first_publish_stopped_during_its_upload_leaves_no_repo_and_says_it_was_stopped(mirror, tmp_path):
    """Ctrl-C, or SIGTERM (raised as Ctrl-C by the command line), while the commit uploads: the repo created for it
    is deleted again, and the line says the publish was stopped, not that the Hub failed its commit. So is a new
    branch."""
    api, lines = FakeHubApi(), []

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    api.create_commit = stopped
    with pytest.raises(KeyboardInterrupt):
        publish_mirror(mirror, REPO, api=api, echo=lines.append)
    assert REPO not in api.repos and api.call_names()[-1] == "delete_repo"
    assert lines[-1] == f"the publish was stopped before its commit was done: deleted the repo {REPO} this publish " \
                        "had created"
    del api.create_commit
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    api.create_commit = stopped
    api.delete_branch = lambda repo_id, *, branch, **kwargs: api.repos[repo_id].branches.pop(branch)
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])
    with pytest.raises(KeyboardInterrupt):
        publish_mirror(changed, REPO, api=api, revision="dev", delete_missing=True, echo=lines.append)
    assert "dev" not in api.repos[REPO].branches
    assert lines[-1] == "the publish was stopped before its commit was done: deleted the branch dev this publish had " \
                        "created"


def test_a_publish_stopped_while_creating_its_repo_or_branch_leaves_neither_and_says_so(mirror, tmp_path):
    """Ctrl-C while create_repo (or create_branch) waits for the Hub's answer: the Hub may have made the repo
    already. It was left behind, empty, and nothing was said."""
    api, lines = FakeHubApi(), []
    create_repo, create_branch = api.create_repo, api.create_branch

    def made_then_stopped(*args, **kwargs):  # the Hub made it; the answer never came
        create_repo(*args, **kwargs)
        raise KeyboardInterrupt

    api.create_repo = made_then_stopped
    for create_pr in (False, True):
        with pytest.raises(KeyboardInterrupt):
            publish_mirror(mirror, REPO, api=api, create_pr=create_pr, echo=lines.append)
        assert REPO not in api.repos and api.call_names()[-1] == "delete_repo"
        assert "create_commit" not in api.call_names()
        assert lines[-1] == ("the publish was stopped while creating the repo or branch it commits to: deleted the "
                             f"repo {REPO} this publish had created")

    def stopped_before(*args, **kwargs):  # stopped before the Hub made it
        raise KeyboardInterrupt

    api.create_repo = stopped_before
    with pytest.raises(KeyboardInterrupt):
        publish_mirror(mirror, REPO, api=api, echo=lines.append)
    assert REPO not in api.repos and api.call_names()[-1] != "delete_repo"
    assert lines[-1] == ("the publish was stopped while creating the repo or branch it commits to: the repo "
                         f"{REPO} was not created")
    # A new branch in a repo that exists, the same.
    api.create_repo = create_repo
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    api.delete_branch = lambda repo_id, *, branch, **kwargs: api.repos[repo_id].branches.pop(branch)

    def branch_made_then_stopped(*args, **kwargs):
        create_branch(*args, **kwargs)
        raise KeyboardInterrupt

    api.create_branch = branch_made_then_stopped
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])
    with pytest.raises(KeyboardInterrupt):
        publish_mirror(changed, REPO, api=api, revision="dev", delete_missing=True, create_pr=True,
                       echo=lines.append)
    assert set(api.repos[REPO].branches) == {"main"}
    assert lines[-1] == ("the publish was stopped while creating the repo or branch it commits to: deleted the "
                         "branch dev this publish had created")


def test_a_connection_lost_while_creating_the_repo_is_one_error_and_leaves_no_repo(mirror, capsys):
    """A connection lost in create_repo was no PublishError (huggingface_hub's transport errors are no OSError):
    the command line called it a bug, and the repo the Hub made before the connection dropped was left."""
    from fake_hub import httpx  # huggingface_hub's HTTP client, whichever it is

    api = FakeHubApi()
    create_repo = api.create_repo

    def made_then_lost(*args, **kwargs):
        create_repo(*args, **kwargs)
        raise httpx.ReadTimeout("timed out")

    api.create_repo = made_then_lost
    assert _cli([str(mirror), "--repo-id", REPO], api) == 2
    captured = capsys.readouterr()
    assert captured.err == (f"error: the connection to the Hub failed while creating the repo or branch to publish "
                            f"to {REPO} (ReadTimeout: timed out); nothing was committed: publish again\n")
    assert REPO not in api.repos and "create_commit" not in api.call_names()
    assert captured.out.splitlines()[-1] == (f"creating the repo or branch it commits to failed: deleted the repo "
                                             f"{REPO} this publish had created")


def test_a_repo_a_killed_publish_left_empty_is_published_to(mirror, tmp_path):
    """SIGKILL (or a lost machine) between creating the repo and its commit cannot be handled: the repo is left
    as the Hub creates it (only .gitattributes), private if asked. The next publish fills it, on a branch or by a
    pull request too."""
    for private in (True, False):
        for revision, create_pr in ((None, False), ("dev", False), (None, True)):
            api = FakeHubApi()
            api.create_repo(REPO, private=private, repo_type="dataset")
            if revision:
                api.create_branch(REPO, branch=revision, repo_type="dataset")
            lines: list[str] = []
            assert publish_mirror(mirror, REPO, api=api, dry_run=True, private=private or None, revision=revision,
                                  create_pr=create_pr, echo=lines.append).plan.additions
            assert not any(line.startswith(("delete", "replace", "would")) for line in lines), lines
            assert lines[-1].endswith(" to add, 0 to delete, 0 unchanged")
            result = publish_mirror(mirror, REPO, api=api, private=private or None, revision=revision,
                                    create_pr=create_pr, echo=_quiet)
            assert result.committed and "create_repo" not in api.call_names()[1:]
            held = api.repos[REPO].pull_requests[-1].files if create_pr else api.files(REPO, revision or "main")
            assert set(held) == set(mirror_files(mirror)) | {".gitattributes"}


def test_no_file_is_read_to_be_hashed_once_the_repo_is_created(mirror, monkeypatch):
    """A publish stopped for good between creating the repo and committing (SIGKILL) leaves it empty: that time
    holds the upload alone. huggingface_hub hashed every data file again in it (in create_commit; older releases:
    when the operation was made), although the publish had checked each against its sha256 in the manifest."""
    import huggingface_hub.lfs as hub_lfs

    api, created, hashed_after = FakeHubApi(), [], []
    create_repo = api.create_repo
    api.create_repo = lambda *args, **kwargs: created.append(True) or create_repo(*args, **kwargs)
    sha_fileobj = hub_lfs.sha_fileobj
    monkeypatch.setattr(hub_lfs, "sha_fileobj",
                        lambda f, *args: (hashed_after.append(f.name) if created else None) or sha_fileobj(f, *args))
    assert publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    assert created and hashed_after == []
    remote = api.files(REPO)
    assert all(remote[rel] == (mirror / rel).read_bytes() for rel in mirror_files(mirror) if rel != "README.md")


def test_a_repo_created_by_someone_else_meanwhile_is_not_committed_to(mirror):
    api = FakeHubApi()
    original_create = api.create_repo

    def racing_create(repo_id, **kwargs):
        original_create(repo_id, exist_ok=True)  # someone else's repo appears between the read and ours
        return original_create(repo_id, **kwargs)

    api.create_repo = racing_create
    with pytest.raises(PublishError, match="someone created it meanwhile"):
        publish_mirror(mirror, REPO, api=api, echo=_quiet)
    assert "create_commit" not in api.call_names() and REPO in api.repos


def test_publishing_to_a_new_branch_and_as_a_pull_request(mirror, tmp_path):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    main_head = api.commits(REPO)[-1].sha
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])

    result = publish_mirror(changed, REPO, api=api, delete_missing=True, revision="dev", echo=_quiet)
    assert result.committed and ("create_branch", {"repo_id": REPO, "branch": "dev"}) in api.calls
    assert "unified/train-00000-of-00002.parquet" not in api.files(REPO, "dev")
    assert api.commits(REPO)[-1].sha == main_head

    pr = publish_mirror(changed, REPO, api=api, delete_missing=True, create_pr=True, echo=_quiet)
    assert pr.committed and pr.commit_url.endswith("/discussions/1")
    assert api.commits(REPO)[-1].sha == main_head and len(api.repos[REPO].pull_requests) == 1


def test_a_damaged_mirror_is_refused_before_any_hub_call(mirror, tmp_path):
    damaged = tmp_path / "nestful"
    shutil.copytree(mirror, damaged)
    shard = damaged / read_manifest(damaged).files[0].path
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    api = FakeHubApi()
    with pytest.raises(PublishError, match="does not match its sha256"):
        publish_mirror(damaged, REPO, api=api, echo=_quiet)
    assert api.calls == []


@pytest.mark.parametrize("repo_id", ["no-namespace", "a/b/c", "acme/", "acme/has space"])
def test_bad_repo_ids_are_refused(mirror, repo_id):
    with pytest.raises(PublishError, match="not of the form"):
        publish_mirror(mirror, repo_id, api=FakeHubApi(), echo=_quiet)


@pytest.mark.parametrize("repo_id, message", [
    ("datasets/acme/nestful", "is an address: give the dataset repo's id alone, 'acme/nestful'"),
    ("https://huggingface.co/datasets/acme/nestful/tree/main", "is an address: give the dataset repo's id alone, "
                                                               "'acme/nestful'"),
    ("hf://datasets/acme/nestful", "is an address: give the dataset repo's id alone, 'acme/nestful'"),
    # (the name alone was given as the id to give, which is refused next for want of its org)
    ("datasets/nestful", "is an address naming no '<org or user>/<name>': give the dataset repo's id"),
    ("https://huggingface.co/datasets/nestful", "is an address naming no '<org or user>/<name>'"),
    ("models/acme/nestful", "names a model repo: publish writes dataset repos"),
    ("spaces/acme/nestful", "names a space repo: publish writes dataset repos"),
    ("acme/nestful!", "is not a name the Hub takes: Repo id must use alphanumeric chars"),
    ("acme/-nestful", "is not a name the Hub takes"),
])
def test_a_repo_address_or_a_name_the_hub_refuses_is_named_before_anything_is_read(mirror, repo_id, message,
                                                                                     capsys):
    """An address, a model or Space repo, or a name the Hub refuses was 'not of the form <org>/<name>' without
    saying the id to give, or huggingface_hub's bare HFValidationError once the mirror had been hashed."""
    api = FakeHubApi()
    with pytest.raises(PublishError, match=f"^repo id {re.escape(repr(repo_id))} {re.escape(message)}"):
        publish_mirror(mirror, repo_id, api=api, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", repo_id, "--dry-run"], api) == 2
    assert capsys.readouterr().err.startswith(f"error: repo id {repo_id!r} {message}")
    assert api.calls == []


def test_a_folder_that_is_not_a_mirror_is_refused(tmp_path):
    with pytest.raises(PublishError, match="not a mirror"):
        publish_mirror(tmp_path, REPO, api=FakeHubApi(), echo=_quiet)


def test_a_folder_of_mirrors_given_to_publish_mirror_is_named_so(tmp_path):
    """publish_mirror of what `mirror --out DIR` wrote said the folder was no mirror and to build one."""
    build_sample_mirror("nestful", tmp_path, configs=["raw"])
    api = FakeHubApi()
    with pytest.raises(PublishError, match=f"^{re.escape(str(tmp_path))} is a folder of mirrors \\(nestful\\), not a "
                                           f"mirror: publish each of them \\({re.escape(str(tmp_path / 'nestful'))}, "
                                           "...\\), or the folder with `tooluse-datasets publish "):
        publish_mirror(tmp_path, REPO, api=api, echo=_quiet)
    assert api.calls == []


def test_a_folder_inside_a_mirror_names_the_mirror(mirror, capsys):
    """A mirror's config folder given to publish was said to be no mirror, and to build one."""
    with pytest.raises(PublishError, match=f"^{re.escape(str(mirror / 'unified'))} is not a mirror but a folder inside "
                                           f"the mirror {re.escape(str(mirror))}: give that folder$"):
        publish_mirror(mirror / "unified", REPO, api=FakeHubApi(), echo=_quiet)
    assert _cli([str(mirror / "unified"), "--repo-id", REPO, "--dry-run"], FakeHubApi()) == 2
    assert f"but a folder inside the mirror {mirror}: give that folder" in capsys.readouterr().err


def test_a_folder_that_does_not_exist_is_named_so(tmp_path, capsys):
    """A mistyped folder was "not a mirror: .tooluse-datasets.json is missing (build one ...)" in Python and "neither
    a mirror nor a folder of mirrors" on the command line, as if the folder were there."""
    missing = tmp_path / "mirorr"
    with pytest.raises(PublishError, match=f"^{re.escape(str(missing))} does not exist: give a mirror's folder"):
        publish_mirror(missing, REPO, api=FakeHubApi(), echo=_quiet)
    assert _cli([str(missing), "--repo-id", REPO, "--dry-run"], FakeHubApi()) == 2
    assert f"{missing} does not exist: give a mirror's folder" in capsys.readouterr().err


def _cli(argv: list[str], api: FakeHubApi) -> int:
    """The real command line, with ``api`` standing in for huggingface_hub's HfApi."""
    import huggingface_hub

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(huggingface_hub, "HfApi", lambda *args, **kwargs: api)
        return cli.main(["publish", *argv])


def test_cli_publishes_every_mirror_of_a_folder_with_a_repo_id_template(tmp_path, capsys, monkeypatch):
    secret = "hf_NotARealTokenButItMustNeverBePrinted"
    monkeypatch.setenv("HF_TOKEN", secret)
    out = tmp_path / "mirrors"
    build_sample_mirror("nestful", out, configs=["unified"])
    api = FakeHubApi()
    assert _cli([str(out), "--repo-id", "acme/plain-name", "--dry-run"], api) == 0  # one mirror: any repo id
    assert "create dataset repo acme/plain-name" in capsys.readouterr().out
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse", "--dry-run"], api) == 0
    printed = capsys.readouterr()
    assert "create dataset repo acme/nestful-tooluse" in printed.out and api.repos == {}
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse", "--message", "first"], api) == 0
    assert _commits(api)[-1]["commit_message"] == "first"
    assert _cli([str(out / "nestful"), "--repo-id", "acme/nestful-tooluse"], api) == 0
    printed2 = capsys.readouterr()
    assert "nothing to commit" in printed2.out and len(_commits(api)) == 1
    assert secret not in printed.out + printed.err + printed2.out + printed2.err


def test_cli_names_a_source_of_the_folder_whose_first_build_stopped_as_not_published(tmp_path, capsys):
    """`mirror nestful toolmind --out DIR` stopped while building toolmind leaves DIR/nestful and only
    DIR/.toolmind.partial: publishing DIR published nestful and ended with exit 0, toolmind not mentioned."""
    out = tmp_path / "mirrors"
    build_sample_mirror("nestful", out, configs=["unified"])
    stop_a_first_build("toolmind", out)
    assert sorted(p.name for p in out.iterdir()) == [".toolmind.partial", "nestful"]
    api = FakeHubApi()
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse"], api) == 2
    err = capsys.readouterr().err
    assert "error: toolmind: a build of it stopped before it was done (.toolmind.partial holds it)" in err
    assert "1 of 2 mirrors were not published: toolmind" in err
    assert set(api.repos) == {"acme/nestful-tooluse"}  # the finished mirror is still published
    assert _cli([str(out), "--repo-id", "acme/plain-name", "--dry-run"], FakeHubApi()) == 2  # any repo id for one
    assert "1 of 2 mirrors were not published: toolmind" in capsys.readouterr().err


def test_cli_says_a_first_build_still_running_is_running_not_stopped(tmp_path, capsys):
    """A build writing its first mirror holds the lock of .<source>.partial: publishing the folder said it had
    stopped and to run it again, which a running build refuses ("another build is writing")."""
    out = tmp_path / "mirrors"
    build_sample_mirror("nestful", out, configs=["unified"])
    with holding_the_build_lock(out / ".toolmind.partial"):
        assert _cli([str(out), "--repo-id", "acme/{source}-tooluse", "--dry-run"], FakeHubApi()) == 2
        err = capsys.readouterr().err
        assert "error: toolmind: a build of it is running now: publish it when it is done" in err
        assert "stopped" not in err and "1 of 2 mirrors were not published: toolmind" in err
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse", "--dry-run"], FakeHubApi()) == 2  # it stopped
    assert "toolmind: a build of it stopped before it was done" in capsys.readouterr().err


def test_a_folder_whose_only_first_build_is_running_says_it_runs_not_that_it_stopped(tmp_path, capsys):
    """With no mirror finished yet, publishing the folder said every first build had stopped and to run it again,
    which a running build refuses ("another build is writing")."""
    out = tmp_path / "mirrors"
    stop_a_first_build("toolmind", out)
    stop_a_first_build("nestful", out)
    with holding_the_build_lock(out / ".toolmind.partial"):
        assert _cli([str(out), "--repo-id", "acme/{source}-tooluse", "--dry-run"], FakeHubApi()) == 2
        err = capsys.readouterr().err
        assert "builds stopped before they were done left .nestful.partial: run them again to finish them" in err
        assert "builds writing .toolmind.partial are running now: publish them when they are done" in err


def test_cli_needs_a_template_when_a_folder_holds_several_mirrors(tmp_path, capsys):
    out = tmp_path / "mirrors"
    build_sample_mirror("nestful", out, configs=["unified"])
    second = out / "copy"
    shutil.copytree(out / "nestful", second)
    manifest = (second / ".tooluse-datasets.json").read_text().replace('"source": "nestful"', '"source": "copy"', 1)
    (second / ".tooluse-datasets.json").write_text(manifest)
    assert _cli([str(out), "--repo-id", "acme/one-repo", "--dry-run"], FakeHubApi()) == 2
    assert "give a --repo-id with '{source}'" in capsys.readouterr().err


def test_the_publish_workflow_rebuilds_from_upstream_and_publishes_with_the_secret():
    import json
    import re
    import shlex

    import yaml

    from tooluse_datasets.registry import builder_class, source_names

    workflow = yaml.safe_load((PROJECT_ROOT / ".github" / "workflows" / "publish.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "workflow_dispatch" in triggers and triggers["release"]["types"] == ["published"]
    job = workflow["jobs"]["publish"]
    default_sources = json.loads(re.search(r"'(\[.*?\])'", job["strategy"]["matrix"]["source"]).group(1))
    assert default_sources and set(default_sources) <= set(source_names())
    for source in default_sources:  # only sources with pinned upstream files can be rebuilt unattended
        assert builder_class(source).SOURCE_CLASS.upstream is not None, source
    steps = job["steps"]
    mirror_step = next(s for s in steps if "tooluse-datasets mirror" in s.get("run", ""))
    publish_step = next(s for s in steps if "tooluse-datasets publish" in s.get("run", ""))
    assert "--sample" not in mirror_step["run"] and "--data-files" not in mirror_step["run"]
    assert publish_step["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    assert sum("secrets." in json.dumps(s) for s in steps) == 1  # no other step sees the token
    for step in (mirror_step, publish_step):  # the commands are valid for the real CLI
        text = re.sub(r"\$\{\{[^}]*dry_run[^}]*\}\}", "--dry-run", step["run"])
        text = re.sub(r"\$\{\{[^}]*\}\}", "nestful", text).replace("$NAMESPACE", "acme")
        cli.build_parser().parse_args(shlex.split(text)[1:])


def test_an_unreachable_hub_is_one_line_naming_the_repo_not_a_bug(mirror, tmp_path, capsys):
    """httpx's connection errors are no OSError: without the package naming them, a publish without network
    (a dry run too) printed "unexpected ConnectError ... (a bug ...)"."""
    httpx2 = pytest.importorskip("httpx2", reason="huggingface_hub 2's HTTP client, whose errors are tested here")

    def unreachable(*args, **kwargs):
        raise httpx2.ConnectError("[Errno -2] Name or service not known")

    api = FakeHubApi()
    api.repo_info = unreachable
    with pytest.raises(PublishError, match=f"cannot reach the Hub to read {REPO} .*ConnectError"):
        publish_mirror(mirror, REPO, api=api, dry_run=True, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach the Hub to read {REPO}") and "a bug" not in err
    # Lost while committing: the repo this publish created is cleaned up as after any failed commit.
    api = FakeHubApi()
    api.create_commit = unreachable
    lines: list[str] = []
    with pytest.raises(PublishError, match="connection to the Hub failed while publishing .*may have landed"):
        publish_mirror(mirror, REPO, api=api, echo=lines.append)
    assert REPO not in api.repos and lines[-1].startswith("the commit failed: deleted the repo")


def test_a_connection_lost_while_creating_the_branch_of_an_unchanged_mirror_is_one_error(mirror, capsys):
    """An unchanged mirror published to a new --revision only creates the branch: a connection lost there was
    reported as a bug (huggingface_hub's transport errors are no OSError)."""
    from fake_hub import httpx  # huggingface_hub's HTTP client, whichever it is

    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)

    def lost(*args, **kwargs):
        raise httpx.ConnectError("connection reset")

    api.create_branch = lost
    assert _cli([str(mirror), "--repo-id", REPO, "--revision", "dev"], api) == 2
    assert capsys.readouterr().err == (f"error: the connection to the Hub failed while creating branch dev in {REPO} "
                                       "(ConnectError: connection reset), the branch that would hold this mirror "
                                       "as the default branch does: publish again\n")


def test_a_local_card_edited_by_hand_is_said_not_to_be_published(mirror, tmp_path):
    """The card is rendered again from the manifest on every publish: edits to the local README.md were dropped
    without a word."""
    def notes(folder: Path) -> list[str]:
        lines: list[str] = []
        publish_mirror(folder, REPO, api=FakeHubApi(), dry_run=True, echo=lines.append)
        return [line for line in lines if "README.md is not the card" in line]

    assert notes(mirror) == []
    assert notes(build_sample_mirror("nestful", tmp_path / "for-repo", configs=["raw"], repo_id=REPO)) == []
    # built for another repo id (its card's snippets load that one): not an edit
    assert notes(build_sample_mirror("nestful", tmp_path / "for-other", configs=["raw"], repo_id="org/other")) == []
    edited = tmp_path / "edited" / "nestful"
    shutil.copytree(mirror, edited)
    card = edited / "README.md"
    card.write_text(card.read_text(encoding="utf-8") + "\n## My notes\n", encoding="utf-8")
    assert notes(edited) == [f"note: {card} is not the card this mirror's manifest renders (edited by hand, or built "
                             "by another version): it is not published, the card rendered from the manifest is; "
                             "write your own sections and metadata in the card on the Hub, which every publish "
                             "keeps"]
    api = FakeHubApi()
    publish_mirror(edited, REPO, api=api, echo=_quiet)
    assert api.files(REPO)["README.md"].decode() == render_card(read_manifest(edited), REPO)
