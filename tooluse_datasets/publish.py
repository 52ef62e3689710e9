"""Publishing a mirror folder to a Hub dataset repo in one atomic commit.

``publish_mirror(folder, repo_id)``:

1. reads the mirror's manifest and checks every data file against its sha256 (a damaged mirror is never
   pushed);
2. reads the repo's state at one commit: its file list (``list_repo_tree``: LFS sha256 or git blob id per
   file), its card and its previous manifest;
3. renders the card for ``repo_id`` and merges it into the card already there (user sections and metadata
   keys survive, :func:`tooluse_datasets.dataset_card.merge_cards`);
4. plans additions (files whose content differs from the repo's) and deletions (stale files of ours: files
   the repo's previous manifest lists that this mirror does not have). Every other file is someone else's and
   is kept; if this mirror would replace one (a file at a path it writes or inside its config folders, or a
   card config of the same name, e.g. from ``push_to_hub``), the publish is refused unless
   ``replace_foreign=True`` (``--replace-foreign``);
5. makes one ``create_commit`` with all of them and ``parent_commit`` set to the commit read in 2, so a
   concurrent change makes the commit fail instead of being overwritten. Nothing to change = no commit.
   A repo that did not exist is created just before it (and refused if someone creates it meanwhile), once
   every operation is made, its sha256 given (huggingface_hub hashes nothing more then); if the commit
   then fails, or the publish is stopped (Ctrl-C) or cut off while creating the repo or uploading, the repo
   the Hub made for it is deleted again (while it holds nothing else), so a failed first publish leaves
   nothing behind; so is a branch it created for ``revision`` (while it still points where it was created).
   A repo a publish killed outright left empty is published to like any other.

What the Hub refuses (no or a bad token, no write access, a concurrent commit, a server error) is a
:class:`PublishError` saying what to do, raised from huggingface_hub's error. ``private`` only applies to a repo this
creates: a public repo that exists is refused. ``revision`` must be a branch (or an existing pull request's
``refs/pr/N``).
With ``create_pr``, an open pull request into the same branch whose head already holds what the commit would hold
is named instead of opening its duplicate.

``dry_run=True`` stops after 4 and only reports the plan. The token is whatever ``huggingface_hub`` finds
(``HF_TOKEN``, ``hf auth login``); it is never printed here. Who it is (``whoami``) is asked before anything else
(:func:`check_token`; once for several mirrors, ``token_checked``): no token, one the Hub refuses or a read-only
one is said before the mirror is hashed (a dry run needs none).
``api`` is injectable for tests.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.errors import (EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError,
                                    RevisionNotFoundError)
from huggingface_hub.utils import sha as hub_sha

from .dataset_card import (CardMarkersError, card_config_names, generated_metadata, merge_cards, render_card,
                           repo_id_problem)
from .mirror.manifest import MANIFEST_NAME, README_NAME, Manifest, MirrorError, enclosing_mirror, read_manifest
from .mirror.provenance import hash_file, sha256_file
from .mirror.hidden_paths import build_running, staged_builds
from .mirror.staging import recover_swap, recover_swaps_in, swap_lock

logger = logging.getLogger("tooluse_datasets")

REPO_TYPE = "dataset"
DEFAULT_BRANCH = "main"


class PublishError(Exception):
    """A mirror cannot be published (not a mirror, damaged files, bad repo id or revision)."""


class HubApi(Protocol):
    """The part of ``huggingface_hub.HfApi`` publishing uses (tests pass a stand-in)."""

    def repo_info(self, repo_id: str, *, revision: Optional[str] = None, repo_type: Optional[str] = None) -> Any: ...

    def list_repo_tree(self, repo_id: str, *, recursive: bool = False, revision: Optional[str] = None,
                       repo_type: Optional[str] = None) -> Any: ...

    def hf_hub_download(self, repo_id: str, filename: str, *, repo_type: Optional[str] = None,
                        revision: Optional[str] = None, local_dir: Optional[str] = None) -> str: ...

    def list_repo_refs(self, repo_id: str, *, repo_type: Optional[str] = None) -> Any: ...

    def whoami(self) -> dict: ...

    def get_repo_discussions(self, repo_id: str, *, discussion_type: Optional[str] = None,
                             repo_type: Optional[str] = None) -> Any: ...

    def get_discussion_details(self, repo_id: str, discussion_num: int, *, repo_type: Optional[str] = None) -> Any: ...

    def create_repo(self, repo_id: str, *, private: Optional[bool] = None, repo_type: Optional[str] = None,
                    exist_ok: bool = False) -> Any: ...

    def delete_repo(self, repo_id: str, *, repo_type: Optional[str] = None) -> Any: ...

    def create_branch(self, repo_id: str, *, branch: str, revision: Optional[str] = None,
                      repo_type: Optional[str] = None, exist_ok: bool = False) -> Any: ...

    def delete_branch(self, repo_id: str, *, branch: str, repo_type: Optional[str] = None) -> Any: ...

    def create_commit(self, repo_id: str, operations: Any, *, commit_message: str, repo_type: Optional[str] = None,
                      revision: Optional[str] = None, create_pr: Optional[bool] = None,
                      parent_commit: Optional[str] = None) -> Any: ...


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: Optional[str]  # LFS/Xet files
    blob_id: str  # git object id (sha1 of "blob <size>\0<bytes>")

    def matches(self, local: "LocalFile") -> bool:
        if self.sha256 is not None:
            return self.sha256 == local.sha256 and self.size == local.size
        return self.size == local.size and self.blob_id == local.blob_id()


@dataclasses.dataclass
class LocalFile:
    path: str  # path in the repo
    size: int
    sha256: str
    source: Any  # local Path, or bytes (the merged card)
    _blob_id: Optional[str] = dataclasses.field(default=None, repr=False)

    def blob_id(self) -> str:
        """git's object id, computed only when a remote file is compared by it (files not in LFS): data
        shards are in LFS and are compared by sha256 without being read again."""
        if self._blob_id is None:
            if isinstance(self.source, bytes):
                self._blob_id = hub_sha.git_hash(self.source)
            else:
                self._blob_id = _git_blob_id_of_file(self.source, self.size)
        return self._blob_id


@dataclasses.dataclass
class RemoteState:
    exists: bool  # the repo exists
    branch_exists: bool
    head: Optional[str]  # commit the plan was made against
    files: dict[str, RemoteFile]
    card: Optional[str]
    manifest: Optional[Manifest]
    private: Optional[bool] = None  # as the Hub says (None: not said)


@dataclasses.dataclass
class PublishPlan:
    repo_id: str
    revision: Optional[str]
    additions: list[LocalFile]
    deletions: list[str]
    unchanged: list[str]
    remote: RemoteState
    # Files (and card configs) this publish would replace although no earlier publish of this mirror wrote
    # them: refused unless ``replace_foreign``; with it, they are among the additions/deletions.
    foreign: list[str] = dataclasses.field(default_factory=list)
    replace_foreign: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)
    # Configs and splits (``config`` or ``config/split``) an earlier publish wrote that this mirror, built from
    # part of the data (``--split``/``--configs``), does not have: their files are among the deletions, and
    # the publish is refused unless ``delete_missing``.
    missing: list[str] = dataclasses.field(default_factory=list)
    delete_missing: bool = False
    selection: str = ""  # the mirror's --split/--configs, for the messages
    # The source of the mirror the repo holds, when it is not this mirror's (its files are then foreign)
    other_source: Optional[str] = None
    # Files of the repo no publish of this mirror wrote that stay as they are (but .gitattributes, the Hub's)
    kept: list[str] = dataclasses.field(default_factory=list)
    private: Optional[bool] = None  # as asked (``--private``): the visibility of a repo this publish creates

    @property
    def is_noop(self) -> bool:
        return not self.additions and not self.deletions

    @property
    def refused(self) -> bool:
        return (bool(self.foreign) and not self.replace_foreign) or (bool(self.missing) and not self.delete_missing)

    def describe(self) -> list[str]:
        where = f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id
        lines = []
        if not self.remote.exists:  # its visibility said: a dry run is where a public one is caught in time
            namespace = self.repo_id.split("/")[0]
            lines.append(f"create dataset repo {self.repo_id} " + ("(private)" if self.private else
                         f"(public unless {namespace} makes new repos private; --private makes it private)"))
        if not self.remote.branch_exists and self.revision is not None \
                and not (not self.remote.exists and self.revision == DEFAULT_BRANCH):
            lines.append(f"create branch {self.revision}")
        lines += [f"add     {f.path} ({f.size} bytes, sha256 {f.sha256})" for f in self.additions]
        lines += [f"delete  {path}" for path in self.deletions]
        if self.kept:  # said, so that a publish into a repo holding other files shows they survive it
            lines.append(f"keep    {len(self.kept)} file{'s' if len(self.kept) > 1 else ''} no publish of this mirror "
                         f"wrote: {_shown(self.kept)}")
        verb = "replace" if self.replace_foreign else "would replace (refused without --replace-foreign)"
        lines += [f"{verb}: {item}, not written by an earlier publish of this mirror" for item in self.foreign]
        if self.missing:
            verb = "delete" if self.delete_missing else "would delete (refused without --delete-missing)"
            lines.append(f"{verb}: {', '.join(self.missing)}: written by an earlier publish, not in this mirror of "
                         f"part of the data ({self.selection})")
        lines += [f"note: {note}" for note in self.notes]
        lines.append(f"{where}: {len(self.additions)} to add, {len(self.deletions)} to delete, "
                     f"{len(self.unchanged)} unchanged" + (" (nothing to commit)" if self.is_noop else ""))
        return lines


@dataclasses.dataclass
class PublishResult:
    plan: PublishPlan
    committed: bool
    commit_url: Optional[str] = None


def publish_mirror(folder: str | Path, repo_id: str, *, api: Optional[HubApi] = None, dry_run: bool = False,
                   private: Optional[bool] = None, revision: Optional[str] = None, create_pr: bool = False,
                   commit_message: Optional[str] = None, echo: Callable[[str], None] = print,
                   replace_foreign: bool = False, delete_missing: bool = False,
                   token_checked: bool = False) -> PublishResult:
    """Publish the mirror in ``folder`` to the dataset repo ``repo_id`` (see the module docstring).

    ``replace_foreign``: also replace files (and card configs) in this mirror's place that no earlier publish
    of it wrote, e.g. a ``push_to_hub`` to the same config name; without it such a publish is refused.

    ``delete_missing``: a mirror built from part of the data (``--split``, ``--configs``) replaces the whole
    earlier publish, deleting its other splits and configs; without it such a publish is refused.

    ``token_checked``: the caller asked :func:`check_token` already (once for several mirrors: whoami is
    strictly rate-limited, and its answer is the same for each)."""
    _check_arguments(folder, repo_id, revision)
    _check_repo_id(repo_id)
    if revision is not None:
        # A branch named in full by its name: create_branch takes the name as it is (the Hub then made a branch
        # literally named refs/heads/dev, which the commit to refs/heads/dev, i.e. to dev, did not find).
        revision = revision.removeprefix("refs/heads/")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    if not token_checked:
        # Before the mirror is hashed (minutes for a large one): a missing or refused token is said at once.
        check_token(api, repo_id, dry_run)
    folder = Path(folder)
    recover_swap(folder)  # a build stopped while replacing the mirror: the complete one is put in place
    # Held until the commit is made: a build of this mirror finishing meanwhile would swap other files in under
    # the ones verified, and the commit would pair their data with the card rendered from the old manifest.
    # That build waits for the publish instead.
    with swap_lock(Path(os.path.abspath(folder)), reader=True):
        return _publish_verified(folder, repo_id, api, dry_run=dry_run, private=private, revision=revision,
                                 create_pr=create_pr, commit_message=commit_message, echo=echo,
                                 replace_foreign=replace_foreign, delete_missing=delete_missing)


def _publish_verified(folder: Path, repo_id: str, api: HubApi, *, dry_run: bool, private: Optional[bool],
                      revision: Optional[str], create_pr: bool, commit_message: Optional[str],
                      echo: Callable[[str], None], replace_foreign: bool, delete_missing: bool) -> PublishResult:
    """:func:`publish_mirror` of a mirror no build can replace meanwhile."""
    manifest = _verified_manifest(folder)
    try:
        remote = read_remote_state(api, repo_id, revision)
    except _NETWORK_ERRORS as exc:
        raise PublishError(f"cannot reach the Hub to read {repo_id} ({type(exc).__name__}: {exc}); nothing was "
                           "published (a dry run needs the Hub too: it compares with what the repo holds)") from exc
    except HfHubHTTPError as exc:
        raise _hub_refusal(exc, repo_id, "reading") from exc
    if private and remote.exists and remote.private is False:
        # --private only applies to a repo it creates: publishing into a public one would make the data public.
        raise PublishError(f"{repo_id} exists and is public, and --private (private=True) cannot make it private: "
                           "make it private in its settings on the Hub, then publish again (or publish without "
                           "--private to publish it publicly); nothing was published")
    plan = plan_publish(Path(folder), manifest, repo_id, revision, remote, replace_foreign, delete_missing)
    plan.private = private
    for line in plan.describe():
        echo(line)
    if plan.refused:
        reasons = []
        if plan.foreign and not plan.replace_foreign:
            whose = f" (it holds a mirror of {plan.other_source}: check --repo-id)" if plan.other_source else ""
            reasons.append(f"{repo_id} holds what this mirror would replace, but no earlier publish of it wrote "
                           f"({_shown(plan.foreign)}){whose}: replace them with --replace-foreign "
                           f"(replace_foreign=True), or publish to another repo")
        if plan.missing and not plan.delete_missing:
            reasons.append(f"{repo_id} holds splits or configs an earlier publish of this source wrote "
                           f"({_shown(plan.missing)}) that this mirror does not have: it was built from part of the "
                           f"data ({plan.selection}), and publishing it would delete them. Rebuild the mirror "
                           f"{_rebuild_advice(plan.missing)}, or publish with --delete-missing "
                           f"(delete_missing=True) to publish this part alone, deleting the others")
        raise PublishError("; ".join(reasons) + "; nothing was published")
    if create_pr and not plan.is_noop and remote.exists and remote.branch_exists:
        try:
            open_pr = _open_pull_request_holding(api, plan)
        except _NETWORK_ERRORS as exc:
            raise PublishError(f"cannot reach the Hub to read the pull requests of {repo_id} "
                               f"({type(exc).__name__}: {exc}); nothing was published") from exc
        except HfHubHTTPError as exc:
            raise _hub_refusal(exc, repo_id, "reading the pull requests of") from exc
        if open_pr is not None:
            echo(f"a pull request holding these files is open already: {open_pr}")
            return PublishResult(plan, committed=False, commit_url=open_pr)
    if dry_run:
        return PublishResult(plan, committed=False)
    if plan.is_noop:
        if revision is not None and remote.exists and not remote.branch_exists:
            # The default branch already holds this mirror: the new branch is that commit, and the mirror is
            # on the revision asked for (an empty pull request would add nothing).
            try:
                _create_branch(api, repo_id, revision, remote.head)
            except _NETWORK_ERRORS as exc:
                raise PublishError(f"the connection to the Hub failed while creating branch {revision} in {repo_id} "
                                   f"({type(exc).__name__}: {exc}), the branch that would hold this mirror as the "
                                   "default branch does: publish again") from exc
            except HfHubHTTPError as exc:
                raise _hub_refusal(exc, repo_id, f"creating branch {revision} in") from exc
            echo(f"created branch {revision} at {remote.head}: it holds this mirror already")
        return PublishResult(plan, committed=False)
    # Everything the commit needs is prepared before a repo or branch is created, so that the time in which a
    # publish stopped for good (SIGKILL, a lost machine) leaves an empty repo is the commit's upload alone.
    operations = _commit_operations(plan)
    new_branch = revision is not None and not remote.branch_exists and remote.exists  # (a new repo: the repo's)
    committing = False  # the commit was asked for: a pull request may be open although its answer never came
    try:
        if not remote.exists:
            _create_repo(api, repo_id, private)
        if revision is not None and not remote.branch_exists:
            # From the commit the plan was made against (not wherever the default branch is by now), so that
            # the commit below can be checked against it like a commit to an existing branch.
            _create_branch(api, repo_id, revision, remote.head)
        committing = True
        info = api.create_commit(
            repo_id, operations, repo_type=REPO_TYPE, revision=revision, create_pr=create_pr,
            commit_message=commit_message or _commit_message(manifest),
            # Fails (412) if the branch moved since it was read: the plan would be stale. A branch created
            # above starts at remote.head too, so a commit landing on it meanwhile is caught the same way.
            parent_commit=remote.head,
        )
    except BaseException as exc:
        if isinstance(exc, PublishError):  # the Hub refused to create the repo: this publish created nothing
            raise
        # The repo or branch this publish created (or was creating when it was stopped: the Hub may have made it
        # although its answer never came) holds nothing of ours: leave none behind. Not after asking for a pull
        # request, whose commit (if the Hub took it) is on no branch this could check.
        # Ctrl-C, or SIGTERM (which the command line raises as Ctrl-C), is a stop, not a failure of the Hub's.
        why = ("the publish was stopped before its commit was done" if committing
               else "the publish was stopped while creating the repo or branch it commits to") \
            if isinstance(exc, KeyboardInterrupt) else "the commit failed" if committing \
            else "creating the repo or branch it commits to failed"
        if not remote.exists and create_pr and committing:
            echo(f"the pull request failed; the repo {repo_id} this publish created was kept (the pull request "
                 f"may be open on it): delete it ({_delete_repo_command(repo_id)}), or publish again")
        elif not remote.exists:
            _delete_created_repo(api, repo_id, revision, echo, why)
        elif new_branch and create_pr and committing:
            echo(f"the pull request failed; the branch {revision} this publish created was kept (the pull request "
                 "may be open against it): delete it, or publish again")
        elif new_branch:
            _delete_created_branch(api, repo_id, revision, remote.head, echo, why)
        if isinstance(exc, _NETWORK_ERRORS) and not committing:
            raise PublishError(f"the connection to the Hub failed while creating the repo or branch to publish to "
                               f"{repo_id} ({type(exc).__name__}: {exc}); nothing was committed: publish again") \
                from exc
        if isinstance(exc, _NETWORK_ERRORS):
            raise PublishError(f"the connection to the Hub failed while publishing to {repo_id} "
                               f"({type(exc).__name__}: {exc}); the commit may have landed or not: publish again, "
                               "it compares with what the repo holds") from exc
        if isinstance(exc, HfHubHTTPError):
            raise _hub_refusal(exc, repo_id, "committing to" if committing else f"creating branch {revision} in") \
                from exc
        raise
    url = getattr(info, "pr_url", None) or getattr(info, "commit_url", None)
    echo(f"committed: {url}" if url else "committed")
    return PublishResult(plan, committed=True, commit_url=url)


def _open_pull_request_holding(api: HubApi, plan: PublishPlan) -> Optional[str]:
    """The address of an open pull request into the branch committed to whose head already holds what this publish
    would commit (each file it writes, the same, and none it deletes), e.g. from the same ``--create-pr`` run
    before: another would be its duplicate. A pull request holding an earlier version of the mirror is not
    updated: the plan is made against the branch, not against that pull request's head (its deletions and merged
    card would be wrong there, and commits others added to it overwritten), so a changed mirror opens a new one."""
    target = plan.revision or DEFAULT_BRANCH  # (a branch named in full was made its name by publish_mirror)
    if target.startswith("refs/pr/"):  # a commit to a pull request's branch updates it: there is no other
        return None
    unchanged = {path: plan.remote.files[path] for path in plan.unchanged}
    for pr in api.get_repo_discussions(plan.repo_id, discussion_type="pull_request", repo_type=REPO_TYPE):
        if pr.status not in ("open", "draft"):  # the Hub opens a pull request made through the API as a draft
            continue
        files = {entry.path: entry for entry in api.list_repo_tree(plan.repo_id, recursive=True,
                                                                   revision=f"refs/pr/{pr.num}", repo_type=REPO_TYPE)
                 if hasattr(entry, "blob_id")}
        held = all(f.path in files and _remote_file(files[f.path]).matches(f) for f in plan.additions) \
            and all(path in files and _remote_file(files[path]) == kept for path, kept in unchanged.items()) \
            and not any(path in files for path in plan.deletions)
        if not held:
            continue
        details = api.get_discussion_details(plan.repo_id, pr.num, repo_type=REPO_TYPE)
        if (details.target_branch or "").removeprefix("refs/heads/") == target:
            return pr.url
    return None


def _remote_file(entry: Any) -> RemoteFile:
    """A ``RepoFile`` of ``list_repo_tree`` as compared with the mirror's files."""
    lfs = getattr(entry, "lfs", None)
    return RemoteFile(entry.path, entry.size, lfs.sha256 if lfs else None, entry.blob_id)


def _commit_operations(plan: PublishPlan) -> list[Any]:
    """The commit's operations, each added file with its sha256 given: huggingface_hub otherwise reads every data
    file again to hash it inside ``create_commit`` (older releases: when the operation is made), after the repo was
    created. The sha256s are the manifest's, which every file was checked against under the mirror's lock."""
    operations: list[Any] = []
    for f in plan.additions:
        operation = CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.source)
        operation.upload_info.sha256 = bytes.fromhex(f.sha256)
        operations.append(operation)
    return operations + [CommitOperationDelete(path_in_repo=path) for path in plan.deletions]


def check_token(api: HubApi, repo_id: str, dry_run: bool) -> None:
    """Who the token is (``whoami``), asked before anything else: no token, one the Hub refuses (401) or a
    read-only one fails here, not after the mirror was hashed or once the commit is refused. A dry run only reads,
    which a public repo allows without a token. Any other answer (whoami is strictly rate-limited: 429; an
    endpoint without it) leaves the check to the publish's own requests. ``repo_id`` names the repo (or the repos,
    for several mirrors) in the messages."""
    from huggingface_hub.errors import LocalTokenNotFoundError

    try:
        me = api.whoami()
    except LocalTokenNotFoundError:
        if dry_run:
            return
        raise PublishError(f"no Hugging Face token found to publish to {repo_id}: set HF_TOKEN to a token with "
                           "write access, or log in with `hf auth login`; nothing was published") from None
    except _NETWORK_ERRORS as exc:
        raise PublishError(f"cannot reach the Hub to publish to {repo_id} ({type(exc).__name__}: {exc}); nothing "
                           "was published") from exc
    except HfHubHTTPError as exc:
        if _status(exc) == 401:
            raise _hub_refusal(exc, repo_id, "checking the token for") from exc
        logger.info("the token was not checked before publishing to %s (%s): the publish's own requests will be",
                    repo_id, _hub_said(exc, _status(exc)))
        return
    access = ((me or {}).get("auth") or {}).get("accessToken") or {}
    if access.get("role") == "read" and not dry_run:
        name = access.get("displayName") or me.get("name") or "this token"
        raise PublishError(f"the token {name!r} is read-only: publishing to {repo_id} needs a token with write "
                           "access (set HF_TOKEN to one, or log in with `hf auth login`); nothing was published")


def _shown(items: list[str], limit: int = 5) -> str:
    return "; ".join(items[:limit]) + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def _rebuild_advice(missing: list[str]) -> str:
    advice = []
    if any(item.startswith("split ") for item in missing):
        advice.append("without --split")
    if any(item.startswith("config ") for item in missing):
        advice.append("with --configs naming those configs too (or without --configs)")
    return " and ".join(advice)


def _network_errors() -> tuple[type, ...]:
    """What huggingface_hub's HTTP client raises when the Hub cannot be reached (no network, DNS, timeouts):
    its transport errors (``httpx2``'s in huggingface_hub 2, ``httpx``'s in 1) are no OSError, so without this
    they read as a bug. Older clients on requests raise ConnectionError, an OSError."""
    import importlib

    errors: list[type] = [ConnectionError]
    for client in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(client).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


_NETWORK_ERRORS = _network_errors()


def _hub_refusal(exc: HfHubHTTPError, repo_id: str, doing: str) -> PublishError:
    """What the Hub answered while ``doing`` (reading, creating, committing to) ``repo_id``, as one line saying what
    to do. huggingface_hub's own message may not say it in its first line: a 403 starts with the request id alone
    (the reason follows a blank line), a 401 names the URL, not the token."""
    status = _status(exc)
    said = _hub_said(exc, status)
    where = f"while {doing} {repo_id} ({said})"
    if status == 401:
        # No token at all gets the same answer as a wrong or expired one.
        return PublishError(f"the Hub did not authenticate this publish {where}: set HF_TOKEN to a valid token with "
                            "write access, or log in with `hf auth login`; nothing was published")
    if status == 403:
        return PublishError(f"the Hub refused this token {where}: publish with a token that has write access to "
                            f"{repo_id.split('/')[0]} (HF_TOKEN or `hf auth login`); nothing was published")
    if status == 412:
        return PublishError(f"{repo_id} changed since this publish read it ({said}): nothing was committed; publish "
                            "again, it plans against what the repo holds then")
    if status == 429:
        return PublishError(f"the Hub limits this token's requests {where}: wait, then publish again; nothing was "
                            "published")
    if status is not None and status >= 500 and doing == "committing to":
        return PublishError(f"the Hub failed {where}; the commit may have landed or not: publish again, it "
                            "compares with what the repo holds")
    if status is not None and status >= 500:
        return PublishError(f"the Hub failed {where}: nothing was published; publish again later")
    return PublishError(f"the Hub refused this publish {where}; nothing was published")


def _status(exc: HfHubHTTPError) -> Optional[int]:
    """The HTTP status the Hub answered with (None: no answer came with the error)."""
    return getattr(getattr(exc, "response", None), "status_code", None)


def _hub_said(exc: HfHubHTTPError, status: Optional[int]) -> str:
    """The status and the server's reason, on one line."""
    reason = (exc.server_message or "").strip().splitlines()
    if not reason:  # no reason from the server: the first line of the message that is not the request id
        reason = [line for line in str(exc).splitlines() if line.strip() and not line.startswith("(Request ID")]
    text = reason[0].strip() if reason else type(exc).__name__
    return text if status is None or text.startswith(str(status)) else f"{status}: {text}"


def _create_repo(api: HubApi, repo_id: str, private: Optional[bool]) -> None:
    try:
        api.create_repo(repo_id, private=private, repo_type=REPO_TYPE, exist_ok=False)
    except HfHubHTTPError as exc:
        if _status(exc) != 409:
            raise _hub_refusal(exc, repo_id, "creating") from exc
        # The repo was not found when it was read, yet it exists: created meanwhile, or private and not
        # visible to this token (the Hub answers 404 for both). The plan assumed an empty repo.
        raise PublishError(f"{repo_id} exists although it was not found when this publish was planned: either "
                           "someone created it meanwhile (run the publish again) or it is a private repo this "
                           "token cannot read (use a token with access to it); nothing was committed") from None


def _create_branch(api: HubApi, repo_id: str, branch: str, base: Optional[str]) -> None:
    """``branch`` at ``base``, the commit the plan was read from (None in a repo created just now: its head)."""
    api.create_branch(repo_id, branch=branch, revision=base, repo_type=REPO_TYPE, exist_ok=True)


def _delete_repo_command(repo_id: str) -> str:
    return f"`hf repos delete {repo_id} --repo-type {REPO_TYPE}`"


def _delete_created_repo(api: HubApi, repo_id: str, revision: Optional[str], echo: Callable[[str], None],
                         why: str) -> None:
    left = f"delete it ({_delete_repo_command(repo_id)}), or publish again to fill it"
    try:
        # Only while the branch committed to holds nothing but what creating the repo put there: a commit
        # whose answer was lost (a timeout after the Hub took it) may have landed, and is not deleted.
        remote = read_remote_state(api, repo_id, revision)
        if not remote.exists:  # stopped while creating it, before the Hub did
            echo(f"{why}: the repo {repo_id} was not created")
            return
        if set(remote.files) - {".gitattributes"}:
            echo(f"{why}, but the repo {repo_id} this publish created holds files now: kept")
            return
        api.delete_repo(repo_id, repo_type=REPO_TYPE)
    except KeyboardInterrupt:  # stopped again while deleting it: say what may be left, then stop
        echo(f"{why} and stopped again while deleting the repo {repo_id} it created: it may be left empty; {left}")
        raise
    except Exception as exc:  # the commit's own error is what the user must see; this one is only reported
        echo(f"{why} and the repo {repo_id} this publish created could not be deleted ({exc}); {left}")
    else:
        echo(f"{why}: deleted the repo {repo_id} this publish had created")


def _delete_created_branch(api: HubApi, repo_id: str, branch: str, base: Optional[str],
                           echo: Callable[[str], None], why: str) -> None:
    try:
        # Only while it still points at the commit it was created from: a commit whose answer was lost may
        # have landed on it, and is not deleted.
        try:
            head = api.repo_info(repo_id, revision=branch, repo_type=REPO_TYPE).sha
        except RevisionNotFoundError:  # stopped while creating it, before the Hub did
            echo(f"{why}: the branch {branch} was not created")
            return
        if head != base:
            echo(f"{why}, but the branch {branch} this publish created has moved since: kept")
            return
        api.delete_branch(repo_id, branch=branch, repo_type=REPO_TYPE)
    except KeyboardInterrupt:
        echo(f"{why} and stopped again while deleting the branch {branch} it created: delete it, or publish again "
             "to fill it")
        raise
    except Exception as exc:  # the commit's own error is what the user must see; this one is only reported
        echo(f"{why} and the branch {branch} this publish created could not be deleted ({exc}); "
             "delete it, or publish again to fill it")
    else:
        echo(f"{why}: deleted the branch {branch} this publish had created")


def plan_publish(folder: Path, manifest: Manifest, repo_id: str, revision: Optional[str],
                 remote: RemoteState, replace_foreign: bool = False, delete_missing: bool = False) -> PublishPlan:
    """What to add and delete. Ours are the files the repo's previous manifest lists: those this mirror no
    longer has are deleted. Anything else in the repo is someone else's and is kept, except what this mirror
    would collide with (``foreign``): a file at a path it writes, a file inside its config folders (which
    its configs would load, or which a ``push_to_hub`` to the same config name wrote), or a ``configs`` entry
    of the same name in the card. Those are replaced only with ``replace_foreign``.

    A mirror built from part of the data (``manifest.selection``: ``--split``, ``--configs``) that lacks
    configs or splits the previous manifest lists (``missing``) would delete them: only with
    ``delete_missing``. A mirror of the whole data deletes what it no longer has (the data changed)."""
    previous = remote.manifest
    notes: list[str] = []
    other_source = None
    if previous is not None and previous.source != manifest.source:
        # A mirror of another source (a --repo-id naming the wrong repo): its files were not written by a publish
        # of this mirror, so replacing them is refused like any other file this mirror did not write.
        other_source = previous.source
        notes.append(f"{repo_id} holds a mirror of {other_source} ({MANIFEST_NAME}), not of {manifest.source}: "
                     f"its files and configs are not this mirror's")
        previous = None
    previous_files = {f.path for f in previous.files + previous.figures} if previous is not None else set()
    previous_configs = list(previous.configs) if previous is not None else []
    rendered = render_card(manifest, repo_id)
    _note_local_card_edits(folder, manifest, rendered, notes)
    try:
        card = merge_cards(rendered, remote.card, previous_configs=previous_configs, notes=notes,
                           previous_meta=generated_metadata(previous) if previous is not None else None).encode("utf-8")
    except CardMarkersError as exc:
        raise PublishError(f"{repo_id}: {exc}") from None
    local = [_local_file(folder / f.path, f.path, f.sha256) for f in manifest.files + manifest.figures]
    local.append(_local_file(folder / MANIFEST_NAME, MANIFEST_NAME))
    local.append(_local_bytes(README_NAME, card))
    additions = [f for f in local if not (f.path in remote.files and remote.files[f.path].matches(f))]
    added = {f.path for f in additions}
    unchanged = [f.path for f in local if f.path not in added]
    local_paths = {f.path for f in local}
    own_folders = tuple(f"{config}/" for config in manifest.configs)
    foreign_files = [path for path in sorted(remote.files)
                     if path not in previous_files and path not in (README_NAME, MANIFEST_NAME)
                     and (path in added or (path not in local_paths and path.startswith(own_folders)))]
    foreign_configs = [f"config {name!r} in {README_NAME}" for name in card_config_names(remote.card)
                       if name in manifest.configs and name not in previous_configs]
    stale = [path for path in remote.files if path in previous_files and path not in local_paths]
    if replace_foreign:
        stale += [path for path in foreign_files if path not in local_paths]
    missing = _missing_parts(manifest, previous) if manifest.selection and previous is not None else []
    kept = [path for path in sorted(remote.files) if path not in local_paths and path not in stale
            and path not in foreign_files and path != ".gitattributes"]
    return PublishPlan(repo_id, revision, additions, sorted(stale), unchanged, remote,
                       foreign=foreign_files + foreign_configs, replace_foreign=replace_foreign, notes=notes,
                       missing=missing, delete_missing=delete_missing, selection=manifest.selection_text(),
                       other_source=other_source, kept=kept)


def _note_local_card_edits(folder: Path, manifest: Manifest, rendered: str, notes: list[str]) -> None:
    """The card is rendered again from the manifest: a local README.md edited by hand is not published, which is
    said rather than dropped unseen. The build wrote it for its own --repo-id (any, or none)."""
    try:
        local = (folder / README_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        local = None
    if local is not None and local != rendered and not _rendered_for_some_repo(local, manifest):
        notes.append(f"{folder / README_NAME} is not the card this mirror's manifest renders (edited by hand, or "
                     "built by another version): it is not published, the card rendered from the manifest is; write "
                     "your own sections and metadata in the card on the Hub, which every publish keeps")


# A repo id no card holds otherwise: where a card names its repo, the rendering for it shows.
_CARD_REPO_MARK = "tooluse-card-mark/tooluse-card-mark"


def _rendered_for_some_repo(card: str, manifest: Manifest) -> bool:
    """Whether ``card`` is the manifest's card rendered for some repo id (the mirror's build was given its own
    ``--repo-id``, or none): the rendering around that id, with the one id ``card`` has there throughout."""
    parts = render_card(manifest, _CARD_REPO_MARK).split(_CARD_REPO_MARK)
    if len(parts) == 1 or not card.startswith(parts[0]):
        return card == parts[0]
    end = card.find(parts[1], len(parts[0])) if parts[1] else -1
    return end > len(parts[0]) and card == card[len(parts[0]):end].join(parts)


def _missing_parts(manifest: Manifest, previous: Manifest) -> list[str]:
    """The configs (``config``) and splits (``config/split``) of the previous publish this mirror lacks."""
    missing = []
    for config, entry in previous.configs.items():
        if config not in manifest.configs:
            missing.append(f"config {config} ({', '.join(entry.splits)})")
        else:
            missing += [f"split {config}/{split}" for split in entry.splits
                        if split not in manifest.configs[config].splits]
    return missing


def read_remote_state(api: HubApi, repo_id: str, revision: Optional[str]) -> RemoteState:
    try:
        info = api.repo_info(repo_id, revision=revision, repo_type=REPO_TYPE)
    except RepositoryNotFoundError:
        if revision is not None and revision.startswith("refs/"):
            # Nor has a repo to create any pull request (or tag): refused before it is created (and then not deleted).
            raise _no_ref(repo_id, revision, " (the repo does not exist)") from None
        return RemoteState(False, False, None, {}, None, None)
    except RevisionNotFoundError:
        if revision.startswith("refs/"):
            # Not a branch name the Hub would create (refs/heads/ was taken off): the pull request must exist (the
            # Hub opens one with --create-pr); a tag the repo lacks was created as a branch named refs/tags/....
            raise _no_ref(repo_id, revision) from None
        # A new branch starts from the default branch: plan against what it holds.
        base = read_remote_state(api, repo_id, None)
        return dataclasses.replace(base, branch_exists=False)
    head = info.sha
    if revision is not None:
        _check_branch(api, repo_id, revision)
    files = {}
    for entry in api.list_repo_tree(repo_id, recursive=True, revision=head, repo_type=REPO_TYPE):
        if hasattr(entry, "blob_id"):  # RepoFile; RepoFolder entries have no content
            files[entry.path] = _remote_file(entry)
    card = _card_text(_download(api, repo_id, README_NAME, head), repo_id) if README_NAME in files else None
    manifest = _parse_previous_manifest(_download(api, repo_id, MANIFEST_NAME, head)) \
        if MANIFEST_NAME in files else None
    return RemoteState(True, True, head, files, card, manifest, getattr(info, "private", None))


def _no_ref(repo_id: str, revision: str, why: str = "") -> PublishError:
    if not revision.startswith("refs/pr/"):
        return PublishError(f"--revision {revision!r}: {repo_id} has no such ref{why}, and it is not a branch name: "
                            "give a branch (one the repo lacks is created from the default branch); nothing was "
                            "published")
    return PublishError(f"--revision {revision!r}: {repo_id} has no pull request {revision.removeprefix('refs/pr/')}"
                        f"{why}: give the refs/pr/N of an open pull request, or use --create-pr to open one; nothing "
                        "was published")


def _check_branch(api: HubApi, repo_id: str, revision: str) -> None:
    """``revision``, which the repo has, must be a branch: the Hub commits to branches only, and would refuse a tag
    or a commit id only at the commit, once every file had been uploaded."""
    if revision.startswith("refs/pr/"):  # a pull request's branch: a commit to it updates the pull request
        return
    refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
    if any(ref.name == revision for ref in refs.branches):
        return
    kind = "a tag" if any(ref.name == revision.removeprefix("refs/tags/") for ref in refs.tags) else "a commit"
    raise PublishError(f"--revision {revision!r} is {kind} of {repo_id}, not a branch: the Hub commits to branches "
                       "only; give a branch (one the repo lacks is created from the default branch); nothing was "
                       "published")


def _download(api: HubApi, repo_id: str, filename: str, revision: str) -> Optional[bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = api.hf_hub_download(repo_id, filename, repo_type=REPO_TYPE, revision=revision, local_dir=tmp)
        except EntryNotFoundError:
            return None
        return Path(path).read_bytes()


def _text(data: bytes) -> str:
    """A text file of the repo as a string with ``\n`` line ends (UnicodeDecodeError if it is not UTF-8).
    utf-8-sig: an editor's byte order mark would hide the card's YAML front matter from every parser."""
    return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")


def _card_text(data: Optional[bytes], repo_id: str) -> Optional[str]:
    if data is None:
        return None
    try:
        return _text(data)
    except UnicodeDecodeError as exc:
        # The merge keeps the user's text, so it must be read as written: refused rather than guessed at.
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        raise PublishError(f"the {README_NAME} in {repo_id} is not UTF-8 text (byte {start}: "
                           f"{data[start:start + 1]!r}): save it as UTF-8 on the Hub, then publish again; nothing "
                           f"was published") from None


def _parse_previous_manifest(data: Optional[bytes]) -> Optional[Manifest]:
    if data is None:
        return None
    try:
        return Manifest.from_json(_text(data))
    except (MirrorError, ValueError, TypeError, KeyError, AttributeError) as exc:
        # An older or hand-edited manifest only costs us the list of our previous files.
        logger.warning("ignoring the repo's %s (%s): no file in the repo is taken for one of this mirror's",
                       MANIFEST_NAME, exc)
        return None


def _verified_manifest(folder: Path) -> Manifest:
    try:
        manifest = read_manifest(folder)
    except MirrorError as exc:
        inside = [sub.name for sub in sorted(folder.iterdir()) if not sub.name.startswith(".")
                  and (sub / MANIFEST_NAME).is_file()] if folder.is_dir() else []
        if inside:  # what `mirror --out DIR` wrote: the command line publishes such a folder, one repo per mirror
            raise PublishError(f"{folder} is a folder of mirrors ({', '.join(inside)}), not a mirror: publish each "
                               f"of them ({folder / inside[0]}, ...), or the folder with `tooluse-datasets publish "
                               f"{folder} --repo-id 'org/{{source}}-tooluse'`") from None
        raise PublishError(str(exc)) from None
    for f in manifest.files + manifest.figures:
        path = folder / f.path
        if not path.is_file():
            raise PublishError(f"{path} is listed in the manifest but missing: rebuild the mirror")
        if path.stat().st_size != f.num_bytes or sha256_file(path) != f.sha256:
            raise PublishError(f"{path} does not match its sha256 in the manifest: rebuild the mirror")
    return manifest


def _local_file(path: Path, path_in_repo: str, sha256: Optional[str] = None) -> LocalFile:
    return LocalFile(path_in_repo, path.stat().st_size, sha256 or sha256_file(path), path)


def _local_bytes(path_in_repo: str, data: bytes) -> LocalFile:
    return LocalFile(path_in_repo, len(data), hashlib.sha256(data).hexdigest(), data)


def _git_blob_id_of_file(path: Path, size: int) -> str:
    """git's object id of the file (what the Hub reports for files not stored in LFS), read in chunks."""
    return hash_file(path, hashlib.sha1(f"blob {size}\0".encode()))[0]


def _commit_message(manifest: Manifest) -> str:
    prov = manifest.provenance
    up = prov.upstream or {}
    origin = {"upstream": f"{up.get('repo')}@{up.get('revision')}", "sample": "bundled sample",
              "files": "local files"}[prov.origin]
    return f"Publish {manifest.source} mirror ({', '.join(manifest.configs)}) from {origin} with tooluse-datasets " \
           f"{prov.versions['tooluse_datasets']}"


def _check_arguments(folder: Any, repo_id: Any, revision: Any) -> None:
    """Arguments of the wrong type are named before anything is read (``revision=3`` failed deep inside: ``'int'
    object has no attribute 'startswith'``), and so is an empty revision (an unset shell variable), which the
    Hub would not take for a branch."""
    for name, value, ok, wanted in (
            ("folder", folder, isinstance(folder, (str, os.PathLike)) and isinstance(os.fspath(folder), str),
             "a path (str or pathlib.Path)"),
            ("repo_id", repo_id, isinstance(repo_id, str), "'<org or user>/<name>' (str)"),
            ("revision", revision, revision is None or isinstance(revision, str),
             "a branch (str), or None for the default")):
        if not ok:
            raise TypeError(f"{name} must be {wanted}, got {value!r:.80} ({type(value).__name__})")
    if revision is not None and not revision.removeprefix("refs/heads/").strip():
        raise PublishError("revision is empty (an unset shell variable?): give a branch, or None for the default "
                           "branch; nothing was published")
    problem = None if revision is None else branch_problem(revision)
    if problem is not None:
        raise PublishError(f"revision {revision!r} {problem}; nothing was published")


def branch_problem(name: str) -> Optional[str]:
    """Why git (and so the Hub) would not take ``name`` as a branch, or None. Checked before the mirror is
    hashed: the Hub refused such a name only when the branch was created, after every file had been hashed."""
    name = name.removeprefix("refs/heads/")  # (the branch dev named in full: its name is dev)
    if name == "HEAD":
        return "is not a branch name git takes (HEAD names the current commit)"
    if any(ord(c) < 32 or ord(c) == 127 or c in " ~^:?*[\\" for c in name):
        return "holds a character git refuses in a branch name (space, control characters, ~ ^ : ? * [ \\)"
    if name.startswith("-") or name.endswith(("/", ".")) or ".." in name or "@{" in name:
        return "is not a branch name git takes (one starting with '-', ending in '/' or '.', or holding '..' or '@{')"
    if any(not part or part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "has a path component git refuses in a branch name (empty, starting with '.', or ending in '.lock')"
    return None


def _check_repo_id(repo_id: str) -> None:
    """Refused before anything is read (it was raised only once the mirror had been hashed, as a bare
    HFValidationError): see :func:`.dataset_card.repo_id_problem`."""
    problem = repo_id_problem(repo_id, "publish writes dataset repos")
    if problem is not None:
        raise PublishError(problem)


def unfinished_first_builds(folder: str | Path) -> dict[str, Path]:
    """``{source: staging folder}`` of a folder of mirrors: the builds stopped (or still running) before their
    first mirror was put in place, which left only ``.<source>.partial`` and nothing to publish yet."""
    root = Path(folder)
    if (root / MANIFEST_NAME).is_file() or not root.is_dir():
        return {}
    return {source: staged for source, staged in staged_builds(root).items() if not (root / source).exists()}


def find_mirrors(folder: str | Path) -> dict[str, Path]:
    """``{source: path}``: the folder itself if it is a mirror, else the mirrors directly inside it (what
    ``tooluse-datasets mirror SOURCE... --out DIR`` wrote)."""
    root = Path(folder)
    # A build stopped while replacing a mirror leaves it only under a hidden name: put it back in place first.
    recover_swap(root)
    recover_swaps_in(root)
    if (root / MANIFEST_NAME).is_file() or not root.exists():  # (read_manifest names what is missing)
        return {read_manifest(root).source: root}
    subs = [sub for sub in sorted(root.iterdir())
            if sub.is_dir() and not sub.name.startswith(".") and (sub / MANIFEST_NAME).is_file()] \
        if root.is_dir() else []
    found: dict[str, Path] = {}
    for sub in subs:
        try:
            source = read_manifest(sub).source
        except MirrorError:
            # One damaged manifest must not stop the other mirrors: its folder is named after its source (what
            # `mirror` writes), and publishing it fails with the manifest's error, reported with the others.
            source = sub.name
        if source in found:
            # Both would go to the same repo ('{source}' in --repo-id): one would silently not be published.
            raise PublishError(f"{folder} holds two mirrors of {source} ({found[source].name}, {sub.name}): "
                               f"publish each folder on its own, to its own --repo-id")
        found[source] = sub
    if not found:
        mirror = enclosing_mirror(root)
        # a first build stopped before it was done leaves only its staging folder, as read_manifest says of one mirror;
        # one still running would refuse to be run again beside it ("another build is writing")
        staged = list(staged_builds(root).values())
        running = [child.name for child in staged if build_running(child)]
        stopped = [child.name for child in staged if child.name not in running]
        raise PublishError(f"{folder} is neither a mirror nor a folder of mirrors " + (
            f"but a folder inside the mirror {mirror}: give that folder" if mirror is not None
            else f"(no {MANIFEST_NAME} found)" + (
                f"; builds stopped before they were done left {', '.join(stopped)}: run them again to finish them"
                if stopped else "") + (
                f"; builds writing {', '.join(running)} are running now: publish them when they are done"
                if running else "")))
    return found
