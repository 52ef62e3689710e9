"""``tooluse-datasets publish``: push a mirror folder to a Hub dataset repo in one atomic commit."""
from __future__ import annotations

import argparse
import sys

from ..errors import plain_printable
from . import a_branch, a_path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "publish", help="push a mirror (or every mirror in a folder) to the Hub in one commit per repo",
        description="Compare the mirror with the repo and make one commit with the changed files and the deletion "
                    "of files an earlier publish of the mirror wrote that it no longer has; files of others are kept, "
                    "and replacing one is refused unless --replace-foreign. An unchanged mirror makes no commit. The token comes from huggingface_hub "
                    "(HF_TOKEN or `hf auth login`).")
    p.add_argument("folder", metavar="DIR", type=a_path,
                   help="a mirror (DIR/<source> from `mirror`) or a folder of mirrors")
    p.add_argument("--repo-id", required=True,
                   help="target dataset repo, e.g. org/nestful-tooluse; '{source}' is replaced by the source name "
                        "(required when DIR holds several mirrors)")
    p.add_argument("--dry-run", action="store_true", help="print the planned operations and change nothing")
    p.add_argument("--private", action="store_true", default=None,
                   help="create the repo private; a public repo that exists is refused (make it private on the Hub "
                        "first)")
    p.add_argument("--revision", type=a_branch,
                   help="branch to commit to (created from the default branch if missing)")
    p.add_argument("--create-pr", action="store_true", help="open a pull request instead of committing to the branch")
    p.add_argument("--replace-foreign", action="store_true",
                   help="replace files and card configs in the mirror's place that no earlier publish of it wrote "
                        "(e.g. a push_to_hub to the same config name); without it such a publish is refused")
    p.add_argument("--delete-missing", action="store_true",
                   help="publish a mirror built from part of the data (mirror --split or --configs) although the "
                        "repo holds other splits or configs of an earlier publish, deleting them; without it such "
                        "a publish is refused")
    p.add_argument("--message", help="commit message (default: names the source, configs and upstream revision)")
    return p


def run(args: argparse.Namespace) -> int:
    from huggingface_hub import HfApi

    from ..mirror.hidden_paths import build_running
    from ..publish import PublishError, check_token, find_mirrors, unfinished_first_builds

    mirrors = find_mirrors(args.folder)
    if len(mirrors) > 1 and "{source}" not in args.repo_id:
        raise PublishError(f"{args.folder} holds {len(mirrors)} mirrors ({', '.join(mirrors)}): give a --repo-id "
                           f"with '{{source}}', e.g. org/{{source}}-tooluse")
    # A source of the folder whose first build stopped has no mirror yet: not published, which is said (with the
    # others published) rather than left out of an exit 0.
    unfinished = unfinished_first_builds(args.folder)
    api = HfApi()
    if len(mirrors) == 1 and not unfinished:
        (source, folder), = mirrors.items()
        _publish(args, api, source, folder, token_checked=False)
        return 0
    # Who the token is, asked once for all the repos (the Hub rate-limits whoami strictly): a missing or
    # read-only token is one error, before any mirror is hashed.
    check_token(api, ", ".join(args.repo_id.replace("{source}", source) for source in mirrors), args.dry_run)
    # Several mirrors, each to its own repo: one that cannot be published does not stop the others, and the
    # summary says which repos got what (a refusal's "nothing was published" is about its own repo only).
    done, failed = [], []
    for source, folder in mirrors.items():
        repo_id = args.repo_id.replace("{source}", source)
        try:
            _publish(args, api, source, folder, token_checked=True)
        except PublishError as exc:
            print(plain_printable(f"error: {exc}"), file=sys.stderr)
            failed.append(f"{source} ({repo_id})")
        except (OSError, ValueError) as exc:
            # What the Hub answers for this repo (HfHubHTTPError: no write access, a refused card...) or a file
            # of this mirror that cannot be read concern this mirror only. Anything else is a bug: it stops.
            first_line = (str(exc).splitlines() or [""])[0]
            print(plain_printable(f"error: {source} ({repo_id}): {type(exc).__name__}: {first_line}"),
                  file=sys.stderr)
            failed.append(f"{source} ({repo_id})")
        else:
            done.append(f"{source} ({repo_id})")
    for name, staged in unfinished.items():
        # a build still writing it would refuse to be run again beside it ("another build is writing")
        state = ("is running now: publish it when it is done" if build_running(staged) else
                 f"stopped before it was done ({staged.name} holds it): run the build again to finish it, then "
                 f"publish it")
        print(plain_printable(f"error: {name}: a build of it {state}"), file=sys.stderr)
        failed.append(name)
    if failed:
        ok, none = ("checked (dry run)", "checked") if args.dry_run else ("published or already up to date", "published")
        raise PublishError(f"{len(failed)} of {len(mirrors) + len(unfinished)} mirrors were not published: "
                           f"{', '.join(failed)} (the errors above say why); "
                           + (f"{ok}: {', '.join(done)}" if done else f"none was {none}"))
    return 0


def _publish(args: argparse.Namespace, api, source: str, folder, *, token_checked: bool) -> None:
    from ..publish import publish_mirror

    publish_mirror(folder, args.repo_id.replace("{source}", source), api=api, dry_run=args.dry_run,
                   private=args.private, revision=args.revision, create_pr=args.create_pr,
                   commit_message=args.message, replace_foreign=args.replace_foreign,
                   delete_missing=args.delete_missing, token_checked=token_checked)
