"""``tooluse-datasets mirror``: build Parquet mirrors (data + dataset card) that ``load_dataset(folder, config)``
reads and ``publish`` pushes. One folder per source: ``OUT/<source>/`` (layout in :mod:`tooluse_datasets.mirror`)."""
from __future__ import annotations

import argparse
import contextlib
import re

from ..errors import one_line, plain_printable
from . import (a_path, a_revision, add_source_arguments, data_files_for, names_a_source, output_folder,
               refuse_files_where_folders_go, refuse_writing_inputs, refuse_wrong_kind_outputs, skipped_rows_folder,
               source_options)


def add_parser(sub) -> argparse.ArgumentParser:
    from ..formats import FORMATS

    p = sub.add_parser(
        "mirror", help="build Parquet mirrors with dataset cards, one folder per source (OUT/<source>)",
        description="Build OUT/<source>/ for each source: <config>/<split>-XXXXX-of-NNNNN.parquet, README.md (card) "
                    "and .tooluse-datasets.json (manifest). Rows that cannot be read or written in a format are "
                    "skipped and counted in the card unless --on-error raise; a format with no row left is omitted.")
    add_source_arguments(p, many=True, on_error="skip")
    p.add_argument("--out", required=True, metavar="DIR", type=a_path,
                   help="output folder; each source goes to DIR/<source>")
    p.add_argument("--configs", nargs="+", choices=list(FORMATS), default=list(FORMATS), metavar="CONFIG",
                   help=f"formats to write (default: all of {', '.join(FORMATS)})")
    p.add_argument("--revision", type=a_revision, help="upstream revision to read instead of the pinned one")
    p.add_argument("--repo-id", help="repo id used in the card's loading snippets ({source} is replaced by the "
                                     "source name); publish renders the card for its own --repo-id anyway")
    p.add_argument("--license", help="license for the card when the data is not the source's upstream "
                                     "(e.g. your own ms-swift files); default: the upstream license")
    p.add_argument("--max-shard-size", type=_size, default="500MB",
                   help="uncompressed Arrow bytes per Parquet file (default 500MB)")
    p.add_argument("--row-group-rows", type=_positive_int, default=1000, help="rows per Parquet row group (default 1000)")
    p.add_argument("--row-group-size", type=_size, default="64MB", help="uncompressed bytes per row group (default 64MB)")
    p.add_argument("--shard-size", type=_size, default=None,
                   help="uncompressed bytes of input per shard task (Parquet row groups are grouped up to it, JSON "
                        "Lines cut at line ends; default 16MiB); each shard writes its own Parquet file(s)")
    p.add_argument("--skipped-rows", metavar="FILE", type=a_path,
                   help="write every skipped row to FILE, one JSON object per line (config, split, source, file, row, "
                        "field, error, reason, message); '{source}' is replaced by the source name (needed with "
                        "several sources)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="where shard tasks run: local (this process, or --num-proc processes) or ray (a running "
                        "cluster at --address, else a local Ray); the mirror is the same either way (default: %(default)s)")
    p.add_argument("--num-proc", type=_positive_int, default=None, metavar="N",
                   help="shard tasks run at once (local: processes; ray: default all CPUs of the cluster)")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (e.g. auto, or ray://head:10001) for --engine ray")
    return p


# Builder settings the command takes as arguments of its own: as --option they would be given twice
MIRROR_ARGUMENTS = {"revision": "--revision", "num_proc": "--num-proc"}


def run(args: argparse.Namespace) -> int:
    from ..mirror import (MirrorError, MirrorRequest, MissingSplitError, ParquetLayout, build_planned_mirror,
                          plan_mirror, read_manifest)
    from ..mirror.engines import check_engine, shared_ray
    from ..registry import source_names

    if "all" in args.sources and len(args.sources) > 1:  # (else refused as an unknown source, listing them all)
        raise MirrorError("'all' names every source: give it alone (mirror all ...), or name only the sources to "
                          "mirror")
    sources = source_names() if args.sources == ["all"] else args.sources
    if args.sample and args.data_files:
        raise MirrorError("--sample and --data-files exclude each other")
    files_by_source = None
    if args.data_files and (len(sources) > 1 or all(names_a_source(item) for item in args.data_files)):
        # Several sources (or all): each source's own files as SOURCE=PATH items, as every command reads all
        # (one source may be given so too).
        files_by_source = _files_of_sources(args.data_files, sources, named_only=args.sources == ["all"])
        sources = list(files_by_source)
    layout = ParquetLayout(row_group_rows=args.row_group_rows, row_group_bytes=args.row_group_size,
                           shard_bytes=args.max_shard_size)
    options = source_options(args, MIRROR_ARGUMENTS)
    if args.shard_size:
        if "shard_bytes" in options:  # both given, one would be dropped without a word
            raise MirrorError("--shard-size and --option shard_bytes both set the input shard size: give one")
        options["shard_bytes"] = args.shard_size
    if args.skipped_rows and len(sources) > 1 and "{source}" not in args.skipped_rows:
        raise MirrorError("--skipped-rows names one file per source: put '{source}' in it")
    if args.repo_id is not None and len(sources) > 1 and "{source}" not in args.repo_id:
        # (every card's loading snippets named the one repo; publish refuses it for a folder of mirrors too)
        raise MirrorError(f"--repo-id names one repo per source: put '{{source}}' in it, e.g. "
                          f"{args.repo_id.rstrip('/')}-{{source}}")
    requests = [MirrorRequest(source, configs=args.configs,
                              data_files=files_by_source[source] if files_by_source else data_files_for(args, source),
                              split=args.split, on_error=args.on_error, revision=args.revision,
                              repo_id=args.repo_id,  # ('{source}' in it and in skipped_rows: the request fills it)
                              license=args.license, layout=layout, source_options=options,
                              skipped_rows=args.skipped_rows or None)
                for source in sources]
    for request in requests:  # (a skipped-rows file the data files read would be read back as bad rows)
        refuse_writing_inputs(request.data_files, {"--skipped-rows": [request.skipped_rows]})
        refuse_wrong_kind_outputs(files={"--skipped-rows": request.skipped_rows}, renamed=True)
        refuse_files_where_folders_go({"--skipped-rows": request.skipped_rows}, {"--out": args.out})
    check_engine(args.engine, args.num_proc, args.address)
    # Every source is checked and planned before any is built: a split (or config) one of them lacks stops
    # the command at once, naming every such source, instead of after building the others.
    plans, missing = [], []
    for request in requests:
        _check_inputs(request)
        try:
            with _data_errors_explained():
                plans.append(plan_mirror(request, args.out))
        except MissingSplitError as exc:
            missing.append(exc)
    if missing:
        raise MirrorError(_missing_split_message(missing, len(requests), args.split))
    # Several sources on Ray: one Ray for all of them, not one started and stopped per source. A build that fails
    # (a bad row under --on-error raise) leaves no empty --out folder it made, as export does.
    with output_folder(args.out), contextlib.ExitStack() as listing_folders, \
            shared_ray(args.engine, args.num_proc, args.address) if len(plans) > 1 else contextlib.nullcontext():
        # made before any row is read, as export makes them: one the system will not make failed after the whole
        # pass, a bare OSError naming no option, its staging and --out left behind
        for request in requests:
            listing_folders.enter_context(skipped_rows_folder(request.skipped_rows))
        for plan in plans:
            with _data_errors_explained():
                folder = build_planned_mirror(plan, engine=args.engine, num_proc=args.num_proc,
                                              address=args.address)
            _print_summary(folder, read_manifest(folder))
    return 0


def _missing_split_message(missing: list, count: int, split: str) -> str:
    if count == 1:
        return str(missing[0])
    # with `a+b`, sources may lack different parts of it: each is named with the part it lacks
    one_split = len({e.split for e in missing}) == 1
    lacking = ", ".join(f"{e.source} ({'' if one_split else f'no {e.split!r}; '}"
                        f"{f'did you mean {e.meant!r}? ' if e.meant else ''}its splits: "
                        f"{', '.join(e.available) or 'none'})" for e in missing)
    what = f"no split {missing[0].split!r} in" if one_split else f"--split {split!r} names splits missing from"
    return f"{what} {lacking}; nothing was built: mirror the sources that have it, or leave --split out"


@contextlib.contextmanager
def _data_errors_explained():
    """Data that cannot be found, said in the command's options (the builder's message names Python
    arguments: data_files=, data_dir=)."""
    from ..errors import DataNotFoundError, raised_within
    from ..mirror import MirrorError

    try:
        yield
    except Exception as exc:
        unreachable = raised_within(exc, DataNotFoundError)
        if unreachable is None:
            raise
        if "data_files=" not in str(unreachable):  # another input than the data (NESTFUL's functions folder)
            raise MirrorError(str(unreachable)) from exc
        raise MirrorError(f"{str(unreachable).splitlines()[0]} Point at local files with --data-files "
                          f"PATH... (globs, hf:// or https:// URLs too), or mirror the bundled sample with "
                          f"--sample") from exc


def _files_of_sources(items: list[str], sources: list[str], *, named_only: bool) -> dict[str, list[str]]:
    """``--data-files SOURCE=PATH...`` for several sources: ``{source: files}``, in the order of ``sources``.
    With ``all`` (``named_only``), the sources named in the items are mirrored; with sources named on the
    command line, each of them needs files and no item may name another."""
    from . import files_by_source, refuse_folders
    from ..mirror import MirrorError

    try:
        given = files_by_source(items)
    except ValueError as exc:
        raise MirrorError(f"{exc}; with several sources, --data-files gives each source's own files as "
                          f"SOURCE=PATH items (or mirror one source at a time)") from None
    refuse_folders([path for paths in given.values() for path in paths])
    if not named_only:
        others = sorted(set(given) - set(sources))
        missing = [s for s in sources if s not in given]
        if others or missing:
            raise MirrorError(f"--data-files names sources that are not mirrored ({', '.join(others)})" if others
                              else f"--data-files gives no files for {', '.join(missing)}: add SOURCE=PATH items")
    return {source: given[source] for source in sources if source in given}


def _check_inputs(request) -> None:
    """What the builder would refuse with advice in Python terms (data_files=), said in options."""
    from ..mirror import MirrorError
    from ..registry import builder_class

    builder_cls = builder_class(request.source)
    if request.data_files is None and builder_cls.SOURCE_CLASS.upstream is None \
            and builder_cls.data_files_from_options(request.source_options) is None:
        raise MirrorError(f"{request.source} has no default upstream files: pass --data-files PATH... (local "
                          f"files, globs, hf:// or https:// URLs), or --sample")


# argparse types: a value they refuse is a usage error naming its option (exit 2), before anything is read
def _size(text: str) -> int:
    from datasets.utils.py_utils import convert_file_size_to_int

    try:
        size = int(text) if text.isdigit() else convert_file_size_to_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 500MB, 1GB, 1000000)") from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"a size must be at least 1 byte, got {text!r}")
    bits = re.fullmatch(r"(.*)([KMGTPkmgtp])b", text)
    if bits:
        # datasets divides by 8 for a lower-case b (bits): '64mb' silently gave row groups of 8 MB
        from ..dataset_card import human_bytes

        raise argparse.ArgumentTypeError(f"{text!r} ends in a lower-case b, which datasets reads as bits "
                                         f"({human_bytes(size)}): write {bits[1]}{bits[2].upper()}B for bytes")
    return size


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _print_summary(folder, manifest) -> None:
    print(f"{folder}: {len(manifest.files)} Parquet files, default config {manifest.default_config!r}")
    for name, entry in manifest.configs.items():
        for split, s in entry.splits.items():
            skipped = s.skipped["skipped"]
            print(f"  {name}/{split}: {s.num_examples} rows in {len(s.files)} shard(s)"
                  + (f", {skipped} skipped" if skipped else ""))
    # (the reasons name fields, which may hold keys of the data: line breaks and controls printed as escapes)
    for name, why in manifest.omitted_configs.items():
        print(plain_printable(one_line(f"  {name}: omitted ({why})")))
    for split, v in manifest.validation.items():
        if v["failed"]:
            print(plain_printable(one_line(f"  unified/{split}: {v['failed']} of {v['checked']} rows fail "
                                           f"validation: {v['by_reason']}")))
