"""Publishing edge cases: a card on the Hub whose generated-section markers were damaged, and a mirror built
from part of the data (--split, --configs) published over a repo that holds the rest."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.dataset_card import BEGIN_MARKER, END_MARKER, merge_cards, render_card
from tooluse_datasets.mirror import MirrorError, MirrorRequest, build_mirror, read_manifest
from tooluse_datasets.mirror.manifest import MANIFEST_NAME
from tooluse_datasets.publish import PublishError, branch_problem, publish_mirror

from fake_hub import FakeHubApi
from mirror_support import build_sample_mirror
from mirror_support import quiet as _quiet
from test_publish import _cli

REPO = "acme/nestful-tooluse"


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


# -- a card whose generated-section markers do not enclose one section -------------------------------------------


def _published_card_edited(mirror: Path, edit) -> tuple[FakeHubApi, str]:
    api = FakeHubApi()
    publish_mirror(build_sample_mirror("nestful", mirror.parent / "only-unified", configs=["unified"]), REPO,
                   api=api, echo=_quiet)
    card = edit(api.files(REPO)["README.md"].decode())
    api.edit(REPO, {"README.md": card.encode()})
    return api, card


def test_a_card_that_lost_its_end_marker_is_refused_instead_of_keeping_a_stale_generated_section(mirror, capsys):
    # Editing the card on the Hub, the user added a section and deleted the END marker line. The merge used to
    # keep the whole old text below the new section: the stale generated section (saying the repo has only
    # `unified`) stayed in the card, and stayed on every later publish.
    api, edited = _published_card_edited(
        mirror, lambda card: card.replace(END_MARKER + "\n", "") + "\n## Our notes\n\nmine\n")
    head = api.commits(REPO)[-1].sha
    with pytest.raises(PublishError, match=r"start marker of the generated section \(line \d+\) but not its end"):
        publish_mirror(mirror, REPO, api=api, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{REPO}: the README.md in the repo" in err and END_MARKER in err
    assert api.commits(REPO)[-1].sha == head
    # put back, the card publishes with one generated section and the user's text
    api.edit(REPO, {"README.md": edited.replace("\n## Our notes", f"{END_MARKER}\n\n## Our notes").encode()})
    assert publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    card = api.files(REPO)["README.md"].decode()
    assert card.count(BEGIN_MARKER) == card.count(END_MARKER) == card.count("## Configurations") == 1
    assert "| `raw` |" in card and card.index(END_MARKER) < card.index("## Our notes\n\nmine")


@pytest.mark.parametrize("damage, message", [
    (lambda c: c.replace(BEGIN_MARKER + "\n", ""), "end marker of the generated section .* not its start"),
    (lambda c: c.replace(BEGIN_MARKER, "@@").replace(END_MARKER, BEGIN_MARKER).replace("@@", END_MARKER),
     "end marker of the generated section .* before its start marker"),
    # what the old merge left after a publish over a card without END marker: a stale second section
    (lambda c: c + "\n" + c[c.index(BEGIN_MARKER):c.index(END_MARKER)], "2 start markers .* and 1 end markers"),
])
def test_damaged_generated_section_markers_are_refused_naming_the_fix(mirror, damage, message):
    generated = render_card(read_manifest(mirror), REPO)
    with pytest.raises(MirrorError, match=message):
        merge_cards(generated, damage(generated))
    assert merge_cards(generated, "# no markers at all\n").count(BEGIN_MARKER) == 1


# -- a mirror of part of the data over a repo that holds the rest ---------------------------------------------------


def _parquet(api: FakeHubApi, repo: str) -> set[str]:
    return {p for p in api.files(repo) if p.endswith(".parquet")}


def test_a_mirror_of_one_split_does_not_delete_the_other_splits_of_the_repo(tmp_path, capsys):
    # mirror toolmind (7 splits), publish; refresh one split with `mirror --split When2Call` and publish: the
    # folder-is-the-repo model used to delete the other six splits' files and card entries, silently.
    repo, out = "acme/toolmind-tooluse", tmp_path / "mirrors"
    api = FakeHubApi()
    assert main(["mirror", "toolmind", "--sample", "--configs", "unified", "raw", "--out", str(out)]) == 0
    assert _cli([str(out / "toolmind"), "--repo-id", repo], api) == 0
    everything = _parquet(api, repo)
    assert len(everything) == 14
    assert main(["mirror", "toolmind", "--sample", "--split", "When2Call", "--configs", "unified", "raw",
                 "--out", str(out)]) == 0
    part = read_manifest(out / "toolmind")
    assert part.selection == {"split": "When2Call", "configs": ["unified", "raw"]}
    card = (out / "toolmind" / "README.md").read_text()
    assert "Built from part of the data (`tooluse-datasets mirror toolmind --sample --split When2Call --configs unified " \
           "raw`): the split `When2Call` only; the source's other splits are not in this repository" in card
    capsys.readouterr()

    head = api.commits(repo)[-1].sha
    for dry_run in (["--dry-run"], []):
        assert _cli([str(out / "toolmind"), "--repo-id", repo, *dry_run], api) == 2
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and "--delete-missing" in captured.err
        assert "split unified/synthetic" in captured.err and "(--split When2Call --configs unified raw)" in captured.err
        assert "would delete (refused without --delete-missing): split unified/synthetic" in captured.out
    assert api.commits(repo)[-1].sha == head and _parquet(api, repo) == everything

    # asked for, the part replaces the whole earlier publish
    assert _cli([str(out / "toolmind"), "--repo-id", repo, "--delete-missing"], api) == 0
    assert _parquet(api, repo) == {"unified/When2Call-00000-of-00001.parquet", "raw/When2Call-00000-of-00001.parquet"}


def test_a_mirror_of_some_configs_does_not_delete_the_other_configs(mirror, tmp_path):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)  # unified and raw
    only_raw = build_sample_mirror("nestful", tmp_path / "raw", configs=["raw"])
    with pytest.raises(PublishError, match=r"\(config unified \(train\)\) .*--configs raw.*with --configs naming"):
        publish_mirror(only_raw, REPO, api=api, echo=_quiet)
    assert any(p.startswith("unified/") for p in _parquet(api, REPO))
    # a mirror of the same configs, or of more, has nothing to delete
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    assert publish_mirror(build_sample_mirror("nestful", tmp_path / "whole"), REPO, api=api, echo=_quiet).committed
    assert publish_mirror(only_raw, REPO, api=api, delete_missing=True, echo=_quiet).committed
    assert {p.split("/")[0] for p in _parquet(api, REPO)} == {"raw"}


def test_a_mirror_of_the_whole_data_deletes_the_splits_the_data_no_longer_has(tmp_path):
    files = td.sample_files("nestful")["train"]
    api = FakeHubApi()
    two = build_mirror(MirrorRequest("nestful", data_files={"train": [files[0]], "test": [files[1]]}), tmp_path / "a")
    publish_mirror(two, REPO, api=api, echo=_quiet)
    assert any("/test-" in p for p in _parquet(api, REPO))
    one = build_mirror(MirrorRequest("nestful", data_files={"train": [files[0]]}), tmp_path / "b")
    assert read_manifest(one).selection == {}
    assert publish_mirror(one, REPO, api=api, echo=_quiet).committed  # the data changed: not refused
    assert not any("/test-" in p for p in _parquet(api, REPO))


# -- a folder of mirrors, one of which cannot be published --------------------------------------------------------


def test_a_folder_of_mirrors_publishes_the_others_when_one_is_refused_and_says_which(tmp_path, capsys):
    # It used to stop at the refused mirror: the ones before were published, the ones after silently not
    # tried, and the only error said "nothing was published".
    out = tmp_path / "mirrors"
    assert main(["mirror", "nestful", "ms_swift", "toolmind", "--sample", "--configs", "unified",
                 "--out", str(out)]) == 0
    api = FakeHubApi()
    api.create_repo("acme/nestful-tooluse", repo_type="dataset")
    api.edit("acme/nestful-tooluse", {"unified/train-00000-of-00001.parquet": b"PAR1 someone's push_to_hub"})
    capsys.readouterr()
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse", "--dry-run"], api) == 2
    err = capsys.readouterr().err
    assert "1 of 3 mirrors were not published: nestful (acme/nestful-tooluse)" in err
    assert "checked (dry run): ms_swift (acme/ms_swift-tooluse), toolmind (acme/toolmind-tooluse)" in err
    assert sorted(api.repos) == ["acme/nestful-tooluse"]
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse"], api) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 2 and "--replace-foreign" in err and "Traceback" not in err
    assert "published or already up to date: ms_swift (acme/ms_swift-tooluse), toolmind (acme/toolmind-tooluse)" \
        in err
    assert sorted(api.repos) == ["acme/ms_swift-tooluse", "acme/nestful-tooluse", "acme/toolmind-tooluse"]
    assert api.files("acme/nestful-tooluse")["unified/train-00000-of-00001.parquet"] == b"PAR1 someone's push_to_hub"


def test_a_folder_of_mirrors_publishes_the_others_when_the_hub_refuses_one_and_says_which(tmp_path, capsys):
    # A Hub error for one repo (no write access to it, say) stopped the loop: the mirrors after it were not
    # tried, and the error named neither the mirror nor the repo.
    from huggingface_hub.errors import HfHubHTTPError

    from fake_hub import http_response

    out = tmp_path / "mirrors"
    assert main(["mirror", "nestful", "ms_swift", "toolmind", "--sample", "--configs", "unified",
                 "--out", str(out)]) == 0
    api = FakeHubApi()
    create_commit = api.create_commit

    def refusing_ms_swift(repo_id, *args, **kwargs):
        if repo_id == "acme/ms_swift-tooluse":
            raise HfHubHTTPError("403 Forbidden: you do not have write access to acme/ms_swift-tooluse",
                                 response=http_response(403, repo_id))
        return create_commit(repo_id, *args, **kwargs)

    api.create_commit = refusing_ms_swift
    capsys.readouterr()
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse"], api) == 2
    err = capsys.readouterr().err
    assert "error: the Hub refused this token while committing to acme/ms_swift-tooluse (403 Forbidden: you do not " \
        "have write access to acme/ms_swift-tooluse): publish with a token that has write access to acme" in err
    assert "1 of 3 mirrors were not published: ms_swift (acme/ms_swift-tooluse)" in err
    assert "published or already up to date: nestful (acme/nestful-tooluse), toolmind (acme/toolmind-tooluse)" \
        in err
    assert sorted(api.repos) == ["acme/nestful-tooluse", "acme/toolmind-tooluse"]  # the one created was deleted
    assert "Traceback" not in err and "a bug" not in err


def test_a_hub_error_quoting_control_characters_is_printed_with_their_escapes(tmp_path, capsys):
    """The error lines of a folder of mirrors printed the Hub's answer as it came: a message holding an ESC
    sequence (set the window title) acted on the terminal, where every other error line writes it as \\u001b."""
    from huggingface_hub.errors import HfHubHTTPError

    from fake_hub import http_response

    out = tmp_path / "mirrors"
    assert main(["mirror", "nestful", "ms_swift", "--sample", "--configs", "unified", "--out", str(out)]) == 0
    api = FakeHubApi()
    create_commit = api.create_commit

    def refusing_ms_swift(repo_id, *args, **kwargs):
        if repo_id == "acme/ms_swift-tooluse":
            raise HfHubHTTPError("403 Forbidden: \x1b]0;pwned\x07 no write access", response=http_response(403, repo_id))
        return create_commit(repo_id, *args, **kwargs)

    api.create_commit = refusing_ms_swift
    capsys.readouterr()
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse"], api) == 2
    err = capsys.readouterr().err
    assert "(403 Forbidden: \\u001b]0;pwned\\u0007 no write access)" in err
    assert not [c for c in err if ord(c) < 0x20 and c not in "\n\t"]


# -- --private ----------------------------------------------------------------------------------------------------


def test_private_into_an_existing_public_repo_is_refused_instead_of_publishing_publicly(mirror, capsys):
    """--private only applies to a repo the publish creates: into a public repo that exists it published the data
    publicly, saying so only in a log line -v shows."""
    api = FakeHubApi()
    api.create_repo(REPO, repo_type="dataset")  # public
    for dry_run in (True, False):
        with pytest.raises(PublishError, match=f"{REPO} exists and is public, and --private .* make it private in "
                                               "its settings on the Hub"):
            publish_mirror(mirror, REPO, api=api, private=True, dry_run=dry_run, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--private"], api) == 2
    assert capsys.readouterr().err.startswith(f"error: {REPO} exists and is public")
    assert "create_commit" not in api.call_names() and set(api.files(REPO)) == {".gitattributes"}
    # A private repo takes it; without --private a public one does.
    api.repos[REPO].private = True
    assert publish_mirror(mirror, REPO, api=api, private=True, echo=_quiet).committed
    other = FakeHubApi()
    other.create_repo(REPO, repo_type="dataset")
    assert publish_mirror(mirror, REPO, api=other, echo=_quiet).committed


# -- --revision ---------------------------------------------------------------------------------------------------


def test_a_revision_that_is_a_tag_or_a_commit_is_refused_before_anything_is_uploaded(mirror, tmp_path, capsys):
    """The Hub commits to branches only: a tag or a commit id given as --revision was planned against and its files
    uploaded, for the commit to be refused at the end."""
    api = FakeHubApi()
    publish_mirror(build_sample_mirror("nestful", tmp_path, configs=["raw"]), REPO, api=api, echo=_quiet)
    api.tag(REPO, "v1.0")
    head = api.commits(REPO)[-1].sha
    for revision, kind in (("v1.0", "a tag"), ("refs/tags/v1.0", "a tag"), (head, "a commit")):
        for dry_run in (True, False):
            with pytest.raises(PublishError, match=f"--revision '{revision}' is {kind} of {REPO}, not a branch: the "
                                                   "Hub commits to branches only; give a branch"):
                publish_mirror(mirror, REPO, api=api, revision=revision, dry_run=dry_run, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--revision", "v1.0"], api) == 2
    assert capsys.readouterr().err.startswith(f"error: --revision 'v1.0' is a tag of {REPO}, not a branch")
    assert api.call_names().count("create_commit") == 1 and api.commits(REPO)[-1].sha == head
    # A branch, existing or new, and a branch named in full, are published to.
    assert publish_mirror(mirror, REPO, api=api, revision="refs/heads/main", delete_missing=True,
                          echo=_quiet).committed
    publish_mirror(mirror, REPO, api=api, revision="dev", echo=_quiet)
    assert api.files(REPO, "dev") == api.files(REPO, "main") and "refs/heads/main" not in api.repos[REPO].branches


def test_a_new_branch_named_in_full_is_created_by_its_name(mirror, tmp_path):
    """--revision refs/heads/dev (no such branch yet) was given to create_branch as it is: the Hub made a branch
    literally named refs/heads/dev, the commit to refs/heads/dev (branch dev) found no branch, and the cleanup said
    the branch was not created. A new repo's dry run said "create branch refs/heads/main" for its default branch."""
    api = FakeHubApi()
    publish_mirror(build_sample_mirror("nestful", tmp_path, configs=["raw"]), REPO, api=api, echo=_quiet)
    lines: list[str] = []
    assert publish_mirror(mirror, REPO, api=api, revision="refs/heads/dev", echo=lines.append).committed
    assert sorted(api.repos[REPO].branches) == ["dev", "main"] and "create branch dev" in lines
    assert set(api.files(REPO, "dev")) > set(api.files(REPO, "main"))  # the unified config, on dev alone
    lines.clear()
    publish_mirror(mirror, "acme/new-repo", api=FakeHubApi(), revision="refs/heads/main", dry_run=True,
                   echo=lines.append)
    assert lines[0].startswith("create dataset repo acme/new-repo") and not lines[1].startswith("create branch")


def test_publish_arguments_of_the_wrong_type_or_an_empty_revision_are_named_before_anything_is_read(mirror, capsys):
    """From Python: revision=3 was an AttributeError ('int' object has no attribute 'startswith'), revision="" was
    called "a commit of" the repo, and revision=" " created a branch named " "."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    calls = len(api.calls)
    for kwargs, name in (({"revision": 3}, "revision"), ({"repo_id": None}, "repo_id"),
                         ({"repo_id": Path(REPO)}, "repo_id"), ({"folder": None}, "folder")):
        arguments = {"folder": mirror, "repo_id": REPO, **kwargs}
        with pytest.raises(TypeError, match=f"^{name} must be "):
            publish_mirror(arguments.pop("folder"), arguments.pop("repo_id"), api=api, echo=_quiet, **arguments)
    for revision in ("", " ", "refs/heads/"):
        with pytest.raises(PublishError, match="^revision is empty"):
            publish_mirror(mirror, REPO, api=api, revision=revision, echo=_quiet)
        with pytest.raises(SystemExit) as stop:  # the command line says so too
            main(["publish", str(mirror), "--repo-id", REPO, f"--revision={revision}"])
        assert stop.value.code == 2 and "expected a branch, got an empty one" in capsys.readouterr().err
    assert len(api.calls) == calls and list(api.repos[REPO].branches) == ["main"]


BRANCH_NAMES = ["main", "dev/x", "feature/v1.2", "@x", "refs/pr/3", "a..b", "a b", "a\tb", "-x", "x/", "x.", "@",
                "a@{b", ".x", "x/.y", "x.lock", "a//b", "a\\b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "HEAD", "x/HEAD"]


@pytest.mark.skipif(shutil.which("git") is None, reason="compares with git's own check-ref-format: git is not here")
def test_a_branch_name_git_refuses_is_refused_before_anything_is_read(mirror, capsys):
    """revision="a..b" (or "my branch") was taken; the Hub refused it only when creating the branch, after the
    mirror had been hashed. Our verdict is git's own, and the command line refuses it as a usage error."""
    api = FakeHubApi()
    for name in BRANCH_NAMES:
        refused = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True).returncode != 0
        assert (branch_problem(name) is not None) == refused, name
        # (named in full, refs/heads/<name> is the branch <name>: git's verdict on that name)
        assert (branch_problem(f"refs/heads/{name}") is not None) == refused, name
        if refused:
            with pytest.raises(PublishError, match=f"^revision {re.escape(repr(name))} .*nothing was published"):
                publish_mirror(mirror, REPO, api=api, revision=name, echo=_quiet)
            with pytest.raises(SystemExit) as stop:
                main(["publish", str(mirror), "--repo-id", REPO, f"--revision={name}"])
            assert stop.value.code == 2 and f"--revision: {name!r} " in capsys.readouterr().err
    assert not api.calls


def test_a_folder_of_mirrors_asks_who_the_token_is_once_per_command(tmp_path, capsys):
    """whoami is strictly rate-limited by the Hub, and the answer is the same for every repo: it was asked once
    per mirror, and a read-only token was one error per mirror."""
    out = tmp_path / "mirrors"
    assert main(["mirror", "nestful", "ms_swift", "toolmind", "--sample", "--configs", "unified",
                 "--out", str(out)]) == 0
    api = FakeHubApi()
    asked = []
    whoami = api.whoami
    api.whoami = lambda **kwargs: asked.append(kwargs) or whoami(**kwargs)
    capsys.readouterr()
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse"], api) == 0
    assert len(asked) == 1
    assert sorted(api.repos) == ["acme/ms_swift-tooluse", "acme/nestful-tooluse", "acme/toolmind-tooluse"]
    asked.clear()
    api.token_role = "read"
    assert _cli([str(out), "--repo-id", "acme/{source}-other"], api) == 2
    err = capsys.readouterr().err
    assert len(asked) == 1 and err.count("error: ") == 1, err
    assert err.startswith("error: the token 'ci' is read-only: publishing to acme/ms_swift-other, acme/nestful-other, "
                          "acme/toolmind-other needs a token with write access")
    assert not any(repo.endswith("-other") for repo in api.repos)


def test_a_pull_request_revision_that_does_not_exist_is_refused_not_created_as_a_branch(mirror, capsys):
    """--revision refs/pr/7 where the repo has no pull request 7 was planned as a new branch named refs/pr/7, which
    the Hub does not create: the publish failed only after every file was uploaded."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, create_pr=True, echo=_quiet)
    assert publish_mirror(mirror, REPO, api=api, revision="refs/pr/1", echo=_quiet).plan.is_noop
    for dry_run in (True, False):
        with pytest.raises(PublishError, match=f"--revision 'refs/pr/7': {REPO} has no pull request 7: give the "
                                               "refs/pr/N of an open pull request, or use --create-pr to open one"):
            publish_mirror(mirror, REPO, api=api, revision="refs/pr/7", dry_run=dry_run, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--revision", "refs/pr/7"], api) == 2
    assert capsys.readouterr().err.startswith(f"error: --revision 'refs/pr/7': {REPO} has no pull request 7")
    assert "create_branch" not in api.call_names() and api.call_names().count("create_commit") == 1


def test_a_tag_ref_the_repo_lacks_is_refused_not_created_as_a_branch(mirror, capsys):
    """--revision refs/tags/v2, a tag neither the repo nor a new repo has, was planned as a new branch: a branch
    literally named refs/tags/v2 was created and committed to."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    for repo_id, why in ((REPO, ""), ("acme/new-repo", " \\(the repo does not exist\\)")):
        for dry_run in (True, False):
            with pytest.raises(PublishError, match=f"--revision 'refs/tags/v2': {repo_id} has no such ref{why}, and "
                                                   "it is not a branch name: give a branch"):
                publish_mirror(mirror, repo_id, api=api, revision="refs/tags/v2", dry_run=dry_run, echo=_quiet)
    assert _cli([str(mirror), "--repo-id", REPO, "--revision", "refs/tags/v2"], api) == 2
    assert capsys.readouterr().err.startswith(f"error: --revision 'refs/tags/v2': {REPO} has no such ref")
    assert list(api.repos) == [REPO] and list(api.repos[REPO].branches) == ["main"]
    assert "create_branch" not in api.call_names() and api.call_names().count("create_commit") == 1


def test_a_pull_request_revision_of_a_repo_that_does_not_exist_is_refused_before_creating_it(mirror):
    """A repo that does not exist has no pull request either. --revision refs/pr/1 into one created the repo, then
    failed at the commit, and the cleanup read the new repo at refs/pr/1, which that refusal answered: the empty
    repo was left behind under "nothing was published"."""
    api = FakeHubApi()
    for dry_run in (True, False):
        with pytest.raises(PublishError, match=f"--revision 'refs/pr/1': {REPO} has no pull request 1 \\(the repo "
                                               "does not exist\\): give the refs/pr/N of an open pull request"):
            publish_mirror(mirror, REPO, api=api, revision="refs/pr/1", dry_run=dry_run, echo=_quiet)
    assert api.repos == {} and api.call_names() == ["repo_info", "repo_info"]


def test_a_folder_of_mirrors_publishes_the_others_when_one_manifest_cannot_be_read(tmp_path, capsys):
    # A damaged manifest in one mirror stopped the whole folder before any mirror was tried.
    out = tmp_path / "mirrors"
    assert main(["mirror", "nestful", "ms_swift", "--sample", "--configs", "unified", "--out", str(out)]) == 0
    (out / "nestful" / MANIFEST_NAME).write_text('{"source": "nestful", "files": [', encoding="utf-8")
    api = FakeHubApi()
    capsys.readouterr()
    assert _cli([str(out), "--repo-id", "acme/{source}-tooluse"], api) == 2
    err = capsys.readouterr().err
    assert f"error: {out / 'nestful' / MANIFEST_NAME} cannot be read as a mirror manifest" in err
    assert "1 of 2 mirrors were not published: nestful (acme/nestful-tooluse)" in err
    assert "published or already up to date: ms_swift (acme/ms_swift-tooluse)" in err and "Traceback" not in err
    assert sorted(api.repos) == ["acme/ms_swift-tooluse"]
