"""``tooluse-datasets export``: write a source in any format as JSON Lines (what ``swift sft --dataset`` reads;
``--format llamafactory`` also writes the ``dataset_info.json`` LLaMA-Factory registers its files with)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator, Optional

from . import (COMMAND_OWN_OPTIONS, a_path, add_skipped_rows_argument, add_source_arguments, data_file_patterns,
               data_files_for, is_local, local_inputs, output_folder, print_skips, refuse_writing_inputs,
               refuse_wrong_kind_outputs, skip_report_for, skipped_rows_folder, source_options, start_skipped_rows,
               with_data_dir_files)
from ..errors import InvalidJsonError, InvalidValueError, count_of
from ..progress import progress

DATASET_INFO = "dataset_info.json"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write a source in one format to JSONL files (one per split)")
    add_source_arguments(p)
    p.add_argument("--format", default="unified", help="unified, raw, swift, toolmind, llamafactory (default: %(default)s)")
    p.add_argument("--out", required=True, type=a_path,
                   help="output folder; files are <source>-<format>-<split>.jsonl (and dataset_info.json for "
                        "llamafactory)")
    p.add_argument("--drop-trailing-results", action="store_true",
                   help="llamafactory only: a conversation that ends on tool results is written without them, "
                        "ending on the calls that asked for them (the source option trailing_results=drop, as "
                        "td.drop_trailing_results makes it), instead of refused")
    add_skipped_rows_argument(p)
    return p


def run(args: argparse.Namespace) -> int:
    if args.drop_trailing_results and args.format != "llamafactory":
        # (the llamafactory writer is the one that refuses such rows; the others write them as they are)
        raise ValueError(f"--drop-trailing-results applies to --format llamafactory only, not {args.format!r}")
    refuse_wrong_kind_outputs(folders={"--out": args.out}, files={"--skipped-rows": args.skipped_rows})
    _refuse_writing_into_entry_folder(args)  # (before --out is made: a folder made there is one the entry reads)
    # The output folder is made first (and removed again, still empty, if the run is refused or fails): a
    # --skipped-rows file inside it needs its folder when the report is made.
    with output_folder(Path(args.out)), skipped_rows_folder(args.skipped_rows):
        return _export(args)


def _export(args: argparse.Namespace) -> int:
    from ..loading import load
    from ..registry import MIX

    report = skip_report_for(args)
    data_files = data_files_for(args, args.source)
    options = source_options(args, own=COMMAND_OWN_OPTIONS["export"])
    if args.source == MIX and args.format == "raw":  # (load() said to load each source's raw format on its own)
        raise ValueError(f"{MIX} has no --format raw (raw schemas differ per source): export each source with "
                         f"--format raw on its own (`tooluse-datasets export nestful --format raw ...`)")
    if "validate" in options and args.format != "unified":
        # (load() refused it naming config=, which export takes as --format)
        raise ValueError(f"--option validate= checks unified rows: it applies to --format unified only, not "
                         f"{args.format!r} (validate the rows with `tooluse-datasets validate`)")
    if args.drop_trailing_results:  # (the pipeline trims each row before the writer: td.drop_trailing_results)
        options["trailing_results"] = "drop"
    inputs = with_data_dir_files(args, args.source, data_files)
    # (before load(), which refuses its report's file among the inputs too, naming no option)
    refuse_writing_inputs(inputs, {"--skipped-rows": [report.rows_path]})
    splits = load(args.source, args.format, split=args.split, streaming=True, data_files=data_files,
                  on_error=args.on_error, report=report, **options)
    out = Path(args.out)
    # (a rerun with --out in the folder a --data-files glob or data_dir reads would read its last output as rows)
    outputs = [out / _file_name(args, split) for split in ([args.split] if args.split else splits)]
    if args.format == "llamafactory":
        outputs.append(out / DATASET_INFO)
    # (found only once the split's every row was written, as the system's "Is a directory" naming no argument; a
    # folder at the name a file is written under first, dataset_info.json's after its split's file was in place)
    for path in [p for output in outputs for p in (output, _partial(output))]:
        if path.is_dir():
            raise ValueError(f"--out {args.out!r} holds a folder {path.name!r} where the export writes that file: "
                             f"move it away or give another --out")
    refuse_writing_inputs(inputs, {"--out": outputs})
    _refuse_reading_earlier_exports(inputs, out, args.source)
    _refuse_skipped_rows_among_outputs(report.rows_path, outputs)
    if args.format == "llamafactory":
        _refuse_replacing_the_entry_read(options, out, outputs)
    # An existing dataset_info.json is read before any row, so that a broken one stops the run up front.
    info = _read_dataset_info(out / DATASET_INFO) if args.format == "llamafactory" else None
    # Planned, nothing read yet: only now is the skipped-rows file touched.
    start_skipped_rows(report.rows_path)
    return _write(args, splits, out, report, info)


def _write(args: argparse.Namespace, splits, out: Path, report, info: Optional[dict]) -> int:
    """Every split to its file in ``out`` (for LLaMA-Factory, each registered in dataset_info.json once written);
    the exit status."""
    from ..codec import dumps

    if args.split:
        splits = {args.split: splits}
    registered: dict[str, Optional[dict]] = {}
    written = 0
    for split, ds in splits.items():
        path = out / _file_name(args, split)
        tmp = _partial(path)
        n = 0
        used: set[str] = set()
        with _partial_file(tmp) as f:
            for row in progress(ds, f"{args.source}/{split}"):
                # The package's exact JSON: integers beyond 64 bits as they are (orjson refuses them)
                f.write(dumps(row).encode() + b"\n")
                n += 1
                if args.format == "llamafactory":
                    used |= _llamafactory_columns(row)
            os.replace(tmp, path)  # no half-written file under the final name
        print(f"{path}: {count_of(n, 'row')}")
        if info is not None:
            # LLaMA-Factory refuses an empty dataset: an empty file is not registered (nor kept registered).
            # Registered as soon as its file is in place: a later split that fails (a bad row, Ctrl-C) leaves
            # dataset_info.json describing the files as they are, not an earlier run's.
            registered[path.stem] = _llamafactory_entry(path.name, used) if n else None
            _register(out / DATASET_INFO, path.stem, registered[path.stem])
        written += n
    if info is not None:
        _print_registered(out / DATASET_INFO, registered)
    report.close()
    print_skips(report)
    if not written:
        print(f"error: no rows to export ({args.source}, format {args.format})", file=sys.stderr)
        return 1
    return 0


def _file_name(args: argparse.Namespace, split: str) -> str:
    return f"{args.source}-{args.format}-{split}.jsonl"


def _refuse_reading_earlier_exports(data_files, out: Path, source: str) -> None:
    """An input file in ``out`` (or beside other inputs) named as an export of ``source`` names its files, in any
    format, read beside other files: the output of an earlier run into the folder this one reads (``--format
    swift``, then ``--format llamafactory``) would be read as more rows of the source, every row a second time under
    another id. An export read alone (or with the other splits of its run) holds each row once: converting it is no
    mistake. This run's own files are refused beside its other outputs (:func:`refuse_writing_inputs`). For ``all``,
    an export of a source it reads (``ms_swift-swift-train.jsonl`` matched by ``ms_swift=DIR/*.jsonl``) holds its
    rows too, beside that source's other files, and for a source, an export of ``all``."""
    from ..formats import FORMATS
    from ..registry import MIX
    from ..shards.paths import file_identity

    if source == MIX:
        # Each source's own export, read by that source beside its other files (the mix's data files are source ->
        # files; another source's files are other rows: its export read alone holds each row once)
        for name, files in (data_files or {}).items():
            _refuse_reading_earlier_exports(files, out, name)
    # Files compared by device and inode: an earlier export read through a hard link is read all the same
    files = [path for path in local_inputs(data_files) if os.path.isfile(path)]
    inputs = {file_identity(path) for path in files} - {None}
    sources = [source] if source == MIX else [source, MIX]  # (an export of the mix holds its sources' rows)
    earlier = {}  # an earlier export this run reads -> the source and format it was made of
    # In --out, and in any folder the run reads other files of: an export written into the folder a later run's glob
    # reads was read beside its data all the same when that run's --out was elsewhere
    files_in = Counter(os.path.dirname(path) for path in files)
    elsewhere = [Path(path) for path in sorted(files) if path.endswith(".jsonl")
                 and files_in[os.path.dirname(path)] > 1]
    seen = set()
    for path in [*sorted(out.glob("*.jsonl")), *elsewhere]:
        if file_identity(path) in seen:  # (an input in --out, found there first)
            continue
        seen.add(file_identity(path))
        made = next(((name, fmt) for name in sources for fmt in FORMATS if path.name.startswith(f"{name}-{fmt}-")),
                    None)
        if made is not None and file_identity(path) in inputs:
            earlier[path] = made
    others = inputs - {file_identity(path) for path in earlier}
    remote = any(not is_local(pattern) for pattern in data_file_patterns(data_files))
    if earlier and (others or remote or len(set(earlier.values())) > 1):
        path, (made_of, _) = next(iter(earlier.items()))
        in_out = path.parent.resolve() == out.resolve()
        raise ValueError(f"{'--out holds ' if in_out else ''}{str(path)!r}{',' if in_out else ' is'} an earlier export "
                         f"of {made_of}, which this run reads as input beside other files (--data-files or --option "
                         f"data_dir=): its rows would be read again; "
                         + ("write the export outside the files read" if in_out else
                            "move it out of the files read, or read it alone"))


def _refuse_writing_into_entry_folder(args: argparse.Namespace) -> None:
    """An --out that is (or is in) the folder a LLaMA-Factory entry's file_name names: LLaMA-Factory reads every
    file there, so the export's rows joined the entry's (each row twice) and its dataset_info.json was read as rows
    (or, in a folder below, LLaMA-Factory refused the entry), from the first run on."""
    from ..registry import MIX, builder_class

    if args.data_files or args.sample or args.source == MIX:  # (data files given beside it are read instead)
        return
    options = source_options(args)
    folder = builder_class(args.source).data_folder_from_options(options)
    if folder is None:
        return
    here, there = Path(os.path.realpath(args.out)), Path(os.path.realpath(folder))
    if here == there or there in here.parents:
        raise ValueError(f"--out {args.out!r} is in the folder {folder!r} that dataset_info entry "
                         f"{options.get('dataset')!r} reads, every file in it: the export would join the entry's "
                         f"data; write it outside that folder")


def _refuse_replacing_the_entry_read(options: dict, out: Path, outputs: list[Path]) -> None:
    """The dataset_info.json entry the run reads (``--option dataset_info= dataset=``), named as one of its files
    in that same dataset_info.json: registering the file replaced the entry, whose own files and columns were lost
    from the registry."""
    from ..shards.paths import same_file

    name, info = options.get("dataset"), options.get("dataset_info")
    if not isinstance(name, str) or not isinstance(info, str):
        return
    info = os.path.expanduser(info)
    info = os.path.join(info, DATASET_INFO) if os.path.isdir(info) else info
    if same_file(info, out / DATASET_INFO) and name in {path.stem for path in outputs if path.name != DATASET_INFO}:
        raise ValueError(f"--out {str(out)!r} would register its file {name + '.jsonl'!r} as entry {name!r} of "
                         f"{info!r}, replacing the entry this run reads: give another --out")


def _partial(path: Path) -> Path:
    """Where ``path`` is written until it is complete (nothing half-written under the final name)."""
    return path.with_name(path.name + ".partial")


@contextlib.contextmanager
def _partial_file(tmp: Path):
    """``tmp`` opened for writing, locked for this run: another export of the same split into the same folder
    running meanwhile wrote the same file at once (each overwriting the other's lines) and removed it under the
    other. It is refused instead; a file no run holds (a killed run's) is taken. Removed if the block fails."""
    from ..shards.paths import file_identity

    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o666), "wb") as f:  # (not emptied before it is ours)
        try:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{str(tmp)!r} is being written by another export of this split into --out now: "
                             f"wait for it to end, or give another --out") from None
        except (ImportError, OSError):  # Windows, or a file system without locks: one export per split at a time
            pass
        else:
            # (opened just before the run holding it ended: that file is now its complete export, renamed to the
            # final name, and emptying it lost that export)
            held = os.fstat(f.fileno())
            if file_identity(tmp) != (held.st_dev, held.st_ino):
                raise ValueError(f"{str(tmp)!r} was being written by another export of this split into --out, "
                                 f"which has just ended: run this export again, or give another --out")
        f.truncate(0)
        try:
            yield f
        except BaseException:
            tmp.unlink(missing_ok=True)  # (still this run's: locked until closed)
            raise


def _refuse_skipped_rows_among_outputs(rows_path: Optional[str], outputs: list[Path]) -> None:
    """A --skipped-rows file that is one of the files --out writes (or its .partial): the skipped rows were
    appended to a file the export then replaced with its rows, or written into the rows (lost either way, while
    the summary pointed at that file), and a dataset_info.json was emptied."""
    from ..shards.paths import same_file

    if not rows_path:
        return
    for path in outputs:
        if same_file(rows_path, path) or same_file(rows_path, _partial(path)):
            # the output named apart only where it is another name of it (a link, a .partial): not "'x' is 'x'"
            named = "" if Path(rows_path) == path else f" (as {str(path)!r})"
            raise ValueError(f"--skipped-rows {rows_path!r}{named} is a file --out writes: give a file "
                             "outside the export's files")


def _llamafactory_columns(row: dict) -> set[str]:
    from ..builders.llamafactory.writer import columns_used

    return columns_used(row)


def _llamafactory_entry(file_name: str, used: set[str]) -> dict:
    from ..builders.llamafactory.writer import dataset_info_entry

    return dataset_info_entry(file_name, used)


def _read_dataset_info(path: Path) -> dict:
    """The folder's dataset_info.json (entries of other exports), {} if there is none; its values read exactly
    (an integer beyond 64 bits is written back as it was, not as a float)."""
    from ..codec import loads

    if not path.exists():
        return {}
    try:
        info = loads(path.read_bytes())
    except ValueError as exc:
        raise InvalidJsonError(f"not valid JSON ({exc}); fix or remove it", file=str(path), field="<file>") from None
    if not isinstance(info, dict):
        raise InvalidValueError("is not a JSON object of dataset entries (what LLaMA-Factory reads); fix or remove "
                                "it", file=str(path), field="<file>")
    return info


def _register(path: Path, name: str, entry: Optional[dict]) -> None:
    """Add or replace the entry ``name`` (None: no entry for that file); other files' entries stay. The file is
    read again, not taken from the start of the run: entries another export into this folder wrote meanwhile
    (two sources exported at once into one folder) are kept, not overwritten with the copy read at the start."""
    with _folder_locked(path.parent):
        info = _read_dataset_info(path)
        if entry is None:
            info.pop(name, None)
        else:
            info[name] = entry
        tmp = _partial(path)
        try:
            # (the stdlib writes integers beyond 64 bits, which orjson refuses, and floats as exactly)
            tmp.write_bytes(json.dumps(info, indent=2, ensure_ascii=False).encode() + b"\n")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _folder_locked(folder: Path) -> Iterator[None]:
    """The block run by one export at a time per folder (an advisory lock on the folder itself, which leaves no
    file behind): two exports registering at once wrote the same .partial file together, and dataset_info.json
    became two registries run into one, not JSON, or lost the entry read before the other's was written."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks; one export per folder at a time
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a folder that can be written but not read (mode -wx): unlocked there, as before the lock
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # (NFS takes no lock on a folder: one export per folder at a time there)
            pass
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _print_registered(path: Path, entries: dict[str, Optional[dict]]) -> None:
    kept = [name for name, entry in entries.items() if entry is not None]
    empty = [name for name, entry in entries.items() if entry is None]
    print(f"{path}: {len(kept)} entr{'y' if len(kept) == 1 else 'ies'}" + (f" ({', '.join(kept)})" if kept else "")
          + (f"; not registered, no rows: {', '.join(empty)}" if empty else ""))
