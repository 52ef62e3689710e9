"""Publishing and card defects found by an audit, each pinned by a test: files a previous publish never wrote
are not deleted, a README with unreadable YAML is merged, the card says which rows its statistics describe,
a failed publish to a new branch leaves no branch behind, and an upstream branch name is resolved to a
commit."""
from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import CommitOperationDelete, DatasetCard
from huggingface_hub.errors import HfHubHTTPError
from datasets.utils.metadata import MetadataConfigs

from tooluse_datasets.dataset_card import BEGIN_MARKER, END_MARKER
from tooluse_datasets.mirror import mirror_files
from tooluse_datasets.publish import PublishError, publish_mirror

from fake_hub import FakeHubApi, http_response
from mirror_support import build_sample_mirror
from mirror_support import quiet as _quiet
from test_publish import _cli

REPO = "acme/x"
PUSH_TO_HUB_CARD = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
dataset_info:
  features:
  - name: text
    dtype: string
  splits:
  - name: train
    num_bytes: 10
    num_examples: 1
---

# Someone's dataset

Pushed with push_to_hub.
"""


@pytest.fixture(scope="module")
def mirror(nestful_mirror) -> Path:
    return nestful_mirror


def _deleted(api: FakeHubApi) -> set[str]:
    commits = [kwargs for name, kwargs in api.calls if name == "create_commit"]
    return {op.path_in_repo for c in commits for op in c["operations"] if isinstance(op, CommitOperationDelete)}


def _push_to_hub_repo(api: FakeHubApi, files: dict[str, bytes]) -> None:
    api.create_repo(REPO, repo_type="dataset")
    api.edit(REPO, files)
    api.calls.clear()


# -- 1. files a previous publish never wrote are kept ------------------------------------------------------------


def test_republishing_keeps_a_user_config_whose_files_are_named_like_shards(mirror):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    card = DatasetCard(api.files(REPO)["README.md"].decode())
    card.data.configs.append({"config_name": "extra", "data_files": [{"split": "train", "path": "extra/train-*"}]})
    api.edit(REPO, {"extra/train-00000-of-00001.parquet": b"PAR1 user data", "README.md": str(card).encode()})
    lines: list[str] = []
    publish_mirror(mirror, REPO, api=api, echo=lines.append)
    assert not any(line.startswith("delete") for line in lines), lines
    assert not any("default config stays" in line for line in lines), lines  # ours is still the default
    assert _deleted(api) == set()
    remote = api.files(REPO)
    assert remote["extra/train-00000-of-00001.parquet"] == b"PAR1 user data"
    assert "`unified` is the default." in remote["README.md"].decode()
    configs = DatasetCard(remote["README.md"].decode()).data.configs
    assert [c["config_name"] for c in configs] == ["raw", "unified", "extra"]
    assert MetadataConfigs.from_dataset_card_data(DatasetCard(remote["README.md"].decode()).data) \
        .get_default_config_name() == "unified"
    # and once merged, publishing again changes nothing
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed


def test_a_first_publish_into_a_push_to_hub_repo_keeps_its_files_and_config(mirror):
    api = FakeHubApi()
    theirs = {"data/train-00000-of-00001.parquet": b"PAR1 a", "default/train-00000-of-00001.parquet": b"PAR1 b",
              "README.md": PUSH_TO_HUB_CARD.encode()}
    _push_to_hub_repo(api, theirs)
    lines: list[str] = []
    assert publish_mirror(mirror, REPO, api=api, echo=lines.append).committed
    assert _deleted(api) == set() and not any(line.startswith("delete") for line in lines)
    # and the plan says they are kept (it named only what it adds and deletes)
    assert "keep    2 files no publish of this mirror wrote: data/train-00000-of-00001.parquet; " \
        "default/train-00000-of-00001.parquet" in lines
    remote = api.files(REPO)
    assert all(remote[path] == data for path, data in theirs.items() if path != "README.md")
    card = remote["README.md"].decode()
    data = DatasetCard(card).data
    assert [c["config_name"] for c in data.configs] == ["raw", "unified", "default"]
    # a config named "default" is the repo's default: ours gives up its flag (two defaults break loading)
    assert MetadataConfigs.from_dataset_card_data(data).get_default_config_name() == "default"
    assert {i["config_name"] for i in data["dataset_info"]} == {"raw", "unified", "default"}
    assert "Pushed with push_to_hub." in card
    # and the card's text says so, instead of calling ours the default
    assert "`unified` is the default." not in card and "The repository's default config is `default`" in card
    # nor flags ours as the default in the table of configurations
    configurations = card[card.index("## Configurations"):card.index("## Loading")]
    assert "(default)" not in configurations and "| `unified` | one schema for every source" in configurations
    assert any("kept the configs that are not this mirror's: 'default'" in line for line in lines)
    assert any("the repo's default config stays 'default' (the user's)" in line for line in lines)
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed


def test_files_in_the_mirrors_place_that_no_publish_of_it_wrote_are_refused_unless_replace(mirror, capsys):
    """A push_to_hub(config_name="unified") repo: its shards sit where the mirror's unified config loads from.
    Publishing would mix them in or delete them: refused by default (dry run too), replaced on request."""
    api = FakeHubApi()
    card = PUSH_TO_HUB_CARD.replace("config_name: default", "config_name: unified") \
        .replace("path: data/train-*", "path: unified/train-*")
    _push_to_hub_repo(api, {"unified/train-00000-of-00003.parquet": b"PAR1 theirs",
                            "unified/test-00000-of-00001.parquet": b"PAR1 theirs too",
                            "README.md": card.encode()})
    head = api.commits(REPO)[-1].sha
    lines: list[str] = []
    for dry_run in (True, False):
        with pytest.raises(PublishError, match="no earlier publish of it wrote .*--replace-foreign"):
            publish_mirror(mirror, REPO, api=api, dry_run=dry_run, echo=lines.append)
    assert "create_commit" not in api.call_names() and api.commits(REPO)[-1].sha == head
    would = [line for line in lines if line.startswith("would replace")]
    assert any("unified/train-00000-of-00003.parquet" in line for line in would)
    assert any("config 'unified' in README.md" in line for line in would)
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 2
    assert "--replace-foreign" in capsys.readouterr().err

    result = publish_mirror(mirror, REPO, api=api, replace_foreign=True, echo=lines.append)
    assert result.committed
    assert _deleted(api) == {"unified/train-00000-of-00003.parquet", "unified/test-00000-of-00001.parquet"}
    assert set(api.files(REPO)) == set(mirror_files(mirror)) | {".gitattributes"}
    # from now on these files are ours: nothing is refused
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed


def test_a_file_placed_by_hand_in_the_mirrors_config_folder_is_not_deleted_silently(mirror):
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    # the previous manifest lists the mirror's files, not this one (which unified's glob would load)
    api.edit(REPO, {"unified/train-00005-of-00009.parquet": b"PAR1 placed by hand"})
    with pytest.raises(PublishError, match="unified/train-00005-of-00009.parquet"):
        publish_mirror(mirror, REPO, api=api, echo=_quiet)


# -- 2. a README whose YAML cannot be read ----------------------------------------------------------------------


@pytest.mark.parametrize("yaml_block", ["license: [mit\ntags: x", "- a list\n- not a mapping", "just a scalar"])
def test_a_readme_with_unreadable_yaml_is_kept_as_text_and_said_so(mirror, yaml_block):
    api = FakeHubApi()
    _push_to_hub_repo(api, {"README.md": f"---\n{yaml_block}\n---\n# My notes\n\nbody text\n".encode()})
    lines: list[str] = []
    assert publish_mirror(mirror, REPO, api=api, echo=lines.append).committed
    card = api.files(REPO)["README.md"].decode()
    data = DatasetCard(card).data
    assert MetadataConfigs.from_dataset_card_data(data).get_default_config_name() == "unified"
    assert card.index(END_MARKER) < card.index(yaml_block) < card.index("# My notes") < card.index("body text")
    assert card.count(BEGIN_MARKER) == 1
    assert any(line.startswith("note: README.md: its YAML metadata cannot be read") for line in lines)
    assert not publish_mirror(mirror, REPO, api=api, echo=_quiet).committed


def test_the_cli_names_the_unreadable_readme_instead_of_reporting_a_bug(mirror, capsys):
    api = FakeHubApi()
    _push_to_hub_repo(api, {"README.md": b"---\nlicense: [mit\ntags: x\n---\nbody"})
    assert _cli([str(mirror), "--repo-id", REPO, "--dry-run"], api) == 0
    out = capsys.readouterr()
    assert "a bug" not in out.err and "README.md: its YAML metadata cannot be read" in out.out


# -- 4. a failed publish to a new branch ------------------------------------------------------------------------


class BranchingHub(FakeHubApi):
    """The stand-in with HfApi.delete_branch."""

    def delete_branch(self, repo_id, *, branch, repo_type=None, **kwargs):
        self.calls.append(("delete_branch", {"repo_id": repo_id, "branch": branch}))
        del self._repo(repo_id).branches[branch]


def test_a_failed_publish_to_a_new_branch_deletes_the_branch_it_created(mirror, tmp_path):
    api = BranchingHub()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])
    original_commit = api.create_commit

    def unreachable(*args, **kwargs):
        raise ConnectionError("connection reset")

    api.create_commit = unreachable
    lines: list[str] = []
    with pytest.raises(PublishError, match="connection to the Hub failed"):
        publish_mirror(changed, REPO, api=api, delete_missing=True, revision="dev", echo=lines.append)
    assert list(api.repos[REPO].branches) == ["main"]
    assert lines[-1] == "the commit failed: deleted the branch dev this publish had created"

    # the answer lost after the commit landed: the branch holds it and is kept
    def lost_answer(*args, **kwargs):
        original_commit(*args, **kwargs)
        raise HfHubHTTPError("504 Gateway Timeout", response=http_response(504, REPO))

    api.create_commit = lost_answer
    with pytest.raises(PublishError, match="504"):
        publish_mirror(changed, REPO, api=api, delete_missing=True, revision="dev", echo=lines.append)
    assert "dev" in api.repos[REPO].branches and lines[-1].endswith("has moved since: kept")
    # a branch that existed before is never deleted
    api.create_commit = unreachable
    with pytest.raises(PublishError):
        publish_mirror(mirror, REPO, api=api, revision="dev", echo=lines.append)
    assert "dev" in api.repos[REPO].branches and "delete_branch" not in api.call_names()[-3:]


def test_the_dry_run_for_a_new_repo_on_a_branch_says_the_branch_is_created(mirror):
    lines: list[str] = []
    publish_mirror(mirror, REPO, api=FakeHubApi(), revision="dev", dry_run=True, echo=lines.append)
    assert lines[0].startswith(f"create dataset repo {REPO} (public") and lines[1] == "create branch dev"
    lines.clear()
    publish_mirror(mirror, REPO, api=FakeHubApi(), revision="main", dry_run=True, echo=lines.append)
    assert lines[0].startswith(f"create dataset repo {REPO} (") and not lines[1].startswith("create branch")


# -- 5. an upstream branch or tag name is resolved to a commit -------------------------------------------------


def test_a_branch_or_tag_given_as_revision_is_resolved_to_its_commit(monkeypatch):
    from tooluse_datasets.mirror import MirrorError, MirrorRequest
    from tooluse_datasets import source
    from tooluse_datasets.mirror import build as build_module
    from tooluse_datasets.source import Upstream, UpstreamFile

    pinned = Upstream(host="hf", repo="someone/data", revision="a" * 40,
                      files=(UpstreamFile(split="train", path="data.parquet"),))
    monkeypatch.setattr(build_module, "_upstream", lambda source: pinned)
    heads = {"main": "1" * 40, "v1.0": "2" * 40}
    asked: list[tuple] = []

    def resolve(repo, revision="main"):
        asked.append((repo, revision))
        return heads[revision]

    for name in ("main", "v1.0"):
        request = MirrorRequest("nestful", configs=["unified"], revision=name)
        assert build_module.pin_upstream_revision(request, resolve=resolve).revision == heads[name]
    assert asked == [("someone/data", "main"), ("someone/data", "v1.0")]
    commit = MirrorRequest("nestful", configs=["unified"], revision="3" * 40)
    assert build_module.pin_upstream_revision(commit, resolve=resolve) is commit and len(asked) == 2
    # the source's own pin and local files need no resolving
    assert build_module.pin_upstream_revision(MirrorRequest("nestful", configs=["unified"]),
                                              resolve=resolve).revision is None
    local = MirrorRequest("nestful", configs=["unified"], data_files=["x.jsonl"], revision="main")
    assert build_module.pin_upstream_revision(local, resolve=resolve) is local and len(asked) == 2

    def offline(repo, revision="main"):
        raise ConnectionError("no network")

    with pytest.raises(MirrorError, match="cannot resolve 'main' of .* to a commit .*full commit id"):
        build_module.pin_upstream_revision(MirrorRequest("nestful", configs=["unified"], revision="main"),
                                           resolve=offline)

    # the default resolver asks huggingface_hub for the revision's commit
    import huggingface_hub

    class Api:
        def dataset_info(self, repo, revision=None):
            return type("Info", (), {"sha": f"{repo}:{revision}"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    assert source.hub_head_commit("someone/data", "v1.0") == "someone/data:v1.0"
    assert source.hub_head_commit("someone/data") == "someone/data:main"
    request = MirrorRequest("nestful", configs=["unified"], revision="v1.0")
    assert build_module.pin_upstream_revision(request).revision == "someone/data:v1.0"


def test_nestfuls_github_branch_given_as_revision_is_resolved_through_github(monkeypatch):
    from tooluse_datasets.mirror import MirrorRequest
    from tooluse_datasets import source
    from tooluse_datasets.mirror import build as build_module

    asked: list[tuple] = []

    def github_head(repo, revision="main"):
        asked.append((repo, revision))
        return "4" * 40

    def no_hub(repo, revision="main"):
        raise AssertionError("a GitHub upstream was looked up on the Hub")

    monkeypatch.setattr(source, "github_head_commit", github_head)
    monkeypatch.setattr(source, "hub_head_commit", no_hub)
    request = MirrorRequest("nestful", configs=["unified"], revision="main")
    assert build_module.pin_upstream_revision(request).revision == "4" * 40
    assert asked == [("IBM/NESTFUL", "main")]


# -- 3. which rows the card's statistics describe -------------------------------------------------------------


def _section(card: str, title: str) -> str:
    start = card.index(f"## {title}\n")
    end = card.find("\n## ", start + 1)
    return card[start:end if end >= 0 else len(card)]


def test_the_card_says_which_rows_its_statistics_describe_and_each_configs_rows(tmp_path):
    """ms-swift's sample: 6 rows convert to unified, 4 to llamafactory (assistant text beside calls has no
    place in its function_call). Only llamafactory is written."""
    from tooluse_datasets.mirror import read_manifest

    folder = build_sample_mirror("ms_swift", tmp_path, configs=["llamafactory"])
    manifest = read_manifest(folder)
    assert manifest.statistics["train"]["rows"] == 6 and manifest.configs["llamafactory"].num_examples == 4
    card = (folder / "README.md").read_text()
    assert "renders the same rows" not in card and "is the same data in another format" not in card
    stats = _section(card, "Statistics")
    assert "describe the rows as converted to the unified\nschema (a conversion this repository does not " \
           "publish as a configuration)" in stats
    assert "| split | statistics | `llamafactory` |\n|---|---|---|\n| train | 6 | 4 |\n" in stats
    assert "6 of 6 unified rows pass validation" in stats

    both = build_sample_mirror("ms_swift", tmp_path / "both", configs=["unified", "toolmind"])
    stats = _section((both / "README.md").read_text(), "Statistics")
    assert "schema (the `unified` config)" in stats
    assert "| split | statistics | `unified` | `toolmind` |\n|---|---|---|---|\n| train | 6 | 6 | 5 |\n" in stats


# -- nits: a card built from local files ------------------------------------------------------------------------


def test_a_card_built_from_local_files_claims_no_upstream_provenance_or_license(tmp_path):
    import shutil

    import tooluse_datasets as td
    from tooluse_datasets.mirror import MirrorRequest, build_mirror

    sample = td.sample_files("nestful")["train"][0]
    files = []
    for folder in ("team_a", "team_b"):
        (tmp_path / "in" / folder).mkdir(parents=True)
        files.append(str(shutil.copy(sample, tmp_path / "in" / folder / "data.jsonl")))
    out = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=files), tmp_path / "out")
    card = (out / "README.md").read_text()
    data = DatasetCard(card).data
    assert data.license == "unknown" and not data.get("source_datasets")
    provenance = _section(card, "Provenance")
    assert "Upstream:" not in provenance and "at revision" not in provenance
    assert "not from the upstream data" in provenance
    assert "| `team_a/data.jsonl` |" in provenance and "| `team_b/data.jsonl` |" in provenance
    license_ = _section(card, "License")
    assert "license of the upstream" not in license_ and "`--license` states it" in license_

    given = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=files[:1], license="mit"),
                         tmp_path / "out2")
    card = (given / "README.md").read_text()
    assert DatasetCard(card).data.license == "mit" and "as given for the data files" in _section(card, "License")
    assert "| `data.jsonl` |" in _section(card, "Provenance")


# -- nits: the mirror command's errors name its options -----------------------------------------------------------


def test_mirror_command_errors_name_command_line_options(tmp_path, capsys, monkeypatch):
    from tooluse_datasets import cli

    assert cli.main(["mirror", "ms_swift", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--data-files" in err and "--sample" in err and "data_files=" not in err and "data_dir" not in err
    (tmp_path / "folder").mkdir()
    assert cli.main(["mirror", "ms_swift", "--data-files", str(tmp_path / "folder"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--data-files names the folder" in err and "data_dir" not in err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["mirror", "nestful", "--configs", "unified", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the upstream data" in err and "--data-files" in err and "data_files=" not in err
    assert not (tmp_path / "o" / "nestful").exists()


# -- 6. a new --revision branch starts where the plan was read ---------------------------------------------------


def test_a_new_branch_starts_at_the_commit_the_plan_was_read_from(mirror, tmp_path):
    """The default branch moving between reading the repo and creating the branch must not end up in the
    branch: the plan says what to add and delete relative to the commit it read."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    ours = sorted(p for p in api.files(REPO) if p.endswith(".parquet"))
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])  # unified deleted, raw unchanged
    kept = [p for p in ours if p in set(mirror_files(changed))]
    assert kept, "the changed mirror shares files with the published one"
    create_branch = api.create_branch

    def main_moves_first(*args, **kwargs):
        api.edit(REPO, {"notes.txt": b"concurrent"}, deletions=tuple(kept))
        return create_branch(*args, **kwargs)

    api.create_branch = main_moves_first
    assert publish_mirror(changed, REPO, api=api, delete_missing=True, revision="dev", echo=_quiet).committed
    dev = api.files(REPO, "dev")
    assert set(dev) == set(mirror_files(changed)) | {".gitattributes"}
    assert all(dev[p] == (changed / p).read_bytes() for p in mirror_files(changed) if p != "README.md")


def test_a_branch_someone_creates_meanwhile_fails_the_commit_instead_of_taking_a_stale_plan(mirror, tmp_path):
    api = BranchingHub()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    changed = build_sample_mirror("nestful", tmp_path, configs=["raw"])
    create_branch = api.create_branch

    def someone_else_first(repo_id, *, branch, **kwargs):
        create_branch(repo_id, branch=branch)
        api.edit(REPO, {"unified/train-00000-of-00002.parquet": b"theirs"}, revision=branch)
        return create_branch(repo_id, branch=branch, **kwargs)

    api.create_branch = someone_else_first
    with pytest.raises(PublishError, match="412"):
        publish_mirror(changed, REPO, api=api, delete_missing=True, revision="dev", echo=_quiet)
    assert api.files(REPO, "dev")["unified/train-00000-of-00002.parquet"] == b"theirs"


def test_publishing_an_unchanged_mirror_to_a_new_branch_creates_the_branch(mirror):
    """The plan says "create branch dev"; with nothing to commit the branch is the default branch's commit,
    which holds the mirror already, so loading revision="dev" works."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    head = api.commits(REPO)[-1].sha
    api.calls.clear()
    lines: list[str] = []
    result = publish_mirror(mirror, REPO, api=api, revision="dev", echo=lines.append)
    assert not result.committed and result.plan.is_noop
    assert api.commits(REPO, "dev")[-1].sha == head and "create_commit" not in api.call_names()
    assert lines[0] == "create branch dev" and lines[-1] == f"created branch dev at {head}: it holds this mirror already"
    # a dry run creates nothing
    api2 = FakeHubApi()
    publish_mirror(mirror, REPO, api=api2, echo=_quiet)
    publish_mirror(mirror, REPO, api=api2, revision="dev", dry_run=True, echo=_quiet)
    assert list(api2.repos[REPO].branches) == ["main"]


# -- 7. a damaged manifest is a typed error naming the file ------------------------------------------------------


@pytest.mark.parametrize("text", ["{", '{"format_version": 1, "source": "nestful"}', "[1]"])
def test_a_damaged_manifest_is_named_not_reported_as_a_bug(mirror, tmp_path, capsys, text):
    import shutil

    from tooluse_datasets.mirror import MANIFEST_NAME

    copy = tmp_path / "nestful"
    shutil.copytree(mirror, copy)
    (copy / MANIFEST_NAME).write_text(text)
    api = FakeHubApi()
    with pytest.raises(PublishError, match=f"{MANIFEST_NAME} cannot be read as a mirror manifest"):
        publish_mirror(copy, REPO, api=api, dry_run=True, echo=_quiet)
    assert api.calls == []
    for folder in (copy, tmp_path):  # the mirror, and the folder of mirrors holding it
        assert _cli([str(folder), "--repo-id", REPO, "--dry-run"], api) == 2
        err = capsys.readouterr().err
        assert str(copy / MANIFEST_NAME) in err and "a bug" not in err


def test_a_damaged_manifest_in_the_repo_only_costs_the_list_of_previous_files(mirror):
    from tooluse_datasets.mirror import MANIFEST_NAME

    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    api.edit(REPO, {MANIFEST_NAME: b"[1]"})
    result = publish_mirror(mirror, REPO, api=api, replace_foreign=True, echo=_quiet)
    assert result.committed and api.files(REPO)[MANIFEST_NAME] == (mirror / MANIFEST_NAME).read_bytes()


# -- 8. two mirrors of one source in a folder of mirrors ---------------------------------------------------------


def test_a_folder_with_two_mirrors_of_one_source_is_refused_instead_of_publishing_one(mirror, tmp_path, capsys):
    """e.g. out/nestful and out/nestful_v1 (built with data_version=v1): '{source}' would send both to one
    repo, and one of them used to be left out without a word."""
    import shutil

    out = tmp_path / "mirrors"
    shutil.copytree(mirror, out / "nestful")
    shutil.copytree(mirror, out / "nestful_v1")
    api = FakeHubApi()
    for repo_id in ("acme/{source}-tooluse", "acme/one-repo"):
        assert _cli([str(out), "--repo-id", repo_id, "--dry-run"], api) == 2
        assert "two mirrors of nestful (nestful, nestful_v1)" in capsys.readouterr().err
    assert api.calls == []
    assert _cli([str(out / "nestful_v1"), "--repo-id", "acme/nestful-v1", "--dry-run"], api) == 0


def test_a_build_finishing_while_a_publish_runs_waits_for_its_commit(tmp_path):
    """A build of the mirror that swapped its folder in while publish was reading the repo made the commit pair
    the new data files with the card rendered from the old manifest: the card said 2 rows, the data held 7, and
    `load_dataset` of the repo failed its split-size check."""
    import io
    import json
    import threading

    import pyarrow.parquet as pq
    import yaml

    from tooluse_datasets.mirror import MirrorRequest, build_mirror

    from conftest import shared_data

    small, large = (str(shared_data("ms_swift", name)) for name in
                    ("agent_support_doc_examples_en.jsonl", "custom_dataset_doc_agent_rows_en.jsonl"))
    out = tmp_path / "out"
    mirror = build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=[small]), out)

    class RebuiltMeanwhile(FakeHubApi):
        rebuild = None

        def list_repo_tree(self, *args, **kwargs):
            if self.rebuild is None:  # the same mirror rebuilt from other data while the repo is read
                self.rebuild = threading.Thread(target=build_mirror, args=(
                    MirrorRequest("ms_swift", configs=["unified"], data_files=[large]), out))
                self.rebuild.start()
                self.rebuild.join(timeout=10)  # it waits for the publish to commit (it used to finish here)
            return super().list_repo_tree(*args, **kwargs)

    api = RebuiltMeanwhile()
    api.create_repo(REPO, repo_type="dataset")
    assert publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    api.rebuild.join(timeout=120)
    assert not api.rebuild.is_alive()

    def rows_in_repo() -> tuple[int, int, int]:
        repo = api.files(REPO)
        card = yaml.safe_load(repo["README.md"].decode().split("---\n")[1])
        manifest = json.loads(repo[".tooluse-datasets.json"])
        return (card["dataset_info"]["splits"][0]["num_examples"],
                sum(pq.read_metadata(io.BytesIO(data)).num_rows for path, data in repo.items()
                    if path.endswith(".parquet")),
                manifest["configs"]["unified"]["splits"]["train"]["num_examples"])

    assert rows_in_repo() == (2, 2, 2)  # card, data and manifest: what was verified is what was committed
    # the build then put its mirror in place, and publishing it commits it whole
    assert publish_mirror(mirror, REPO, api=api, echo=_quiet).committed
    assert rows_in_repo() == (7, 7, 7)


def test_a_mirror_of_another_source_in_the_repo_is_not_replaced_without_replace_foreign(mirror, tmp_path, capsys):
    """`publish DIR/ms_swift --repo-id org/nestful-tooluse` (a --repo-id naming the wrong repo) took the NESTFUL
    mirror's files for its own earlier publish and replaced the NESTFUL data and card with ms-swift's."""
    api = FakeHubApi()
    publish_mirror(mirror, REPO, api=api, echo=_quiet)
    nestful_files = api.files(REPO)
    head = api.commits(REPO)[-1].sha
    other = build_sample_mirror("ms_swift", tmp_path / "out")
    with pytest.raises(PublishError, match="it holds a mirror of nestful: check --repo-id"):
        publish_mirror(other, REPO, api=api, echo=_quiet)
    assert _cli([str(other), "--repo-id", REPO], api) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a mirror of nestful" in err, err
    assert api.commits(REPO)[-1].sha == head and api.files(REPO) == nestful_files
    # asked for, it replaces what it collides with, and is from then on the repo's mirror
    assert publish_mirror(other, REPO, api=api, echo=_quiet, replace_foreign=True).committed
    assert not publish_mirror(other, REPO, api=api, echo=_quiet).committed
    assert "ms_swift" in api.files(REPO)[".tooluse-datasets.json"].decode()


@pytest.mark.parametrize("edit", [
    lambda m: m["configs"]["unified"]["splits"]["train"]["files"].append("unified/extra.parquet"),
    lambda m: m.update(default_config="chat"),
], ids=["a split naming a file the manifest does not list", "a default config it does not have"])
def test_a_hand_edited_manifest_that_names_what_it_lacks_is_named_not_reported_as_a_bug(mirror, tmp_path, capsys,
                                                                                        edit):
    """A manifest that still parses but names a file or config it does not list made publish end with
    "unexpected KeyError (a bug: ...)" while rendering the card."""
    import json
    import shutil

    from tooluse_datasets.mirror import MANIFEST_NAME

    copy = tmp_path / "nestful"
    shutil.copytree(mirror, copy)
    manifest = json.loads((copy / MANIFEST_NAME).read_text())
    edit(manifest)
    (copy / MANIFEST_NAME).write_text(json.dumps(manifest))
    api = FakeHubApi()
    with pytest.raises(PublishError, match=f"{MANIFEST_NAME} cannot be read as a mirror manifest"):
        publish_mirror(copy, REPO, api=api, dry_run=True, echo=_quiet)
    assert api.calls == []
    assert _cli([str(copy), "--repo-id", REPO, "--dry-run"], api) == 2
    err = capsys.readouterr().err
    assert str(copy / MANIFEST_NAME) in err and "a bug" not in err and "rebuild the mirror" in err, err
