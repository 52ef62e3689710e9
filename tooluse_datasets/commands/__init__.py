"""CLI subcommands; each module has ``add_parser(subparsers)`` and ``run(args)``."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
from typing import Iterator, Optional


def add_source_arguments(p: argparse.ArgumentParser, *, many: bool = False, on_error: str = "raise") -> None:
    """The arguments every data-reading command shares."""
    from ..registry import MIX, source_names

    names = ", ".join(source_names())
    if many:
        p.add_argument("sources", nargs="+", metavar="SOURCE", action=Distinct, help=f"{names} (or {MIX})")
    else:
        p.add_argument("source", metavar="SOURCE", help=f"{names} or {MIX} (every source in one schema)")
    p.add_argument("--data-files", nargs="+", action="extend", metavar="PATH", type=a_path,
                   help="local files or hf:// / https:// URLs (default: the pinned upstream files); for "
                        f"{MIX}, each as SOURCE=PATH (nestful=data.jsonl ms_swift=agent.jsonl)")
    p.add_argument("--sample", action="store_true", help="use the small sample bundled with the package (offline)")
    # not "default: all": --split all is datasets' union of the splits, read as one (export, stats, validate)
    p.add_argument("--split", default=None, action=_Once, type=a_split,
                   help="a split, or a+b for several (default: every split, each on its own)")
    p.add_argument("--on-error", choices=["raise", "skip"], default=on_error,
                   help=f"raise: stop at the first bad row; skip: drop, count and report bad rows (default: {on_error})")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", dest="options",
                   help="a source option, as load(source, ..., NAME=VALUE) takes it (e.g. strict=false, "
                        "split_column=null, data_version=v1, shard_bytes=33554432); VALUE is read as JSON, else "
                        "as text; repeat for several")


def non_negative(what: str, note: str = ""):
    """An argparse type: a whole number, 0 or more (``what`` says of what, for the message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be {what}, 0 or more{note}; got {text!r}")
        return value

    return parse


def a_path(text: str) -> str:
    """An argparse type: a path, never empty (``--out "$OUT"`` with OUT unset meant the current folder, and an
    empty --skipped-rows, --plots or --expect-failures no file at all, without a word), a leading ``~`` expanded
    as the shell leaves it in ``--out=~/x``: outputs went to a folder named "~" of the current one, while the
    checks before any row looked at the home folder's."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty one (an unset shell variable?)")
    return os.path.expanduser(text)


def a_revision(text: str) -> str:
    """An argparse type: a branch, tag or commit, never empty (``--revision "$REV"`` with REV unset made mirror read
    NESTFUL's ``main``, not its pinned commit)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a branch, tag or commit, got an empty one "
                                         "(an unset shell variable?)")
    return text


def a_branch(text: str) -> str:
    """An argparse type: publish's --revision, a branch (a tag or commit is refused there), never empty."""
    if not text.removeprefix("refs/heads/").strip():  # (as publish_mirror reads it: refs/heads/<branch>)
        raise argparse.ArgumentTypeError("expected a branch, got an empty one (an unset shell variable?)")
    from ..publish import branch_problem

    problem = branch_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return text


def a_split(text: str) -> str:
    """An argparse type: a split name, never empty (``--split "$SPLIT"`` with SPLIT unset got datasets' "Bad split: ."
    after the files were resolved)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a split name, got an empty one (an unset shell variable?); for "
                                         "every split leave --split out")
    if "[" in text:
        # The commands read whole splits (streams): datasets' refusal advised .skip(n)/.take(n), which no command
        # has, or said "no split 'train[:2]'" as if the name were wrong
        raise argparse.ArgumentTypeError(f"takes split names (train, or a+b to read both), not a slice: got {text!r}; "
                                         "the commands read whole splits (in Python, load(..., split=...) takes "
                                         "slices)")
    if any(not part.strip() for part in text.split("+")):
        # (datasets refused `train+` as "Bad split", and mirror and validate as "no split ''")
        raise argparse.ArgumentTypeError(f"takes split names joined by + (train, or a+b to read both): {text!r} "
                                         "has an empty one")
    parts = [part.strip() for part in text.split("+")]
    twice = sorted({part for part in parts if parts.count(part) > 1})
    if twice:  # (load() refused it in its own terms, "split='a+a'", naming no option of the command)
        raise argparse.ArgumentTypeError(f"names {', '.join(map(repr, twice))} more than once in {text!r}: its rows "
                                         "would be read twice; give each split once")
    return text


class _Once(argparse.Action):
    """An option given once: argparse would keep the last of several silently (``--split a --split b`` reading
    only ``b``, where the user meant both)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} is given once (got {getattr(namespace, self.dest)!r} and {values!r}); "
                         f"for every split leave it out")
        setattr(namespace, self.dest, values)


class Distinct(argparse.Action):
    """Source names, each given once (repeated options extend the list): a name given twice would be read, and
    built or shown, twice."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, self.dest, None) or []) + list(values)
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            parser.error(f"{option_string or self.metavar} names {', '.join(twice)} more than once")
        setattr(namespace, self.dest, names)


# load()'s own arguments, which every data command sets from its own arguments: as --option they would be given
# twice (a TypeError, reported as a bug). name -> what the command takes instead.
COMMAND_ARGUMENTS = {
    "source": "the SOURCE argument", "config": "--config", "split": "--split",
    "streaming": "nothing: the command chooses", "data_files": "--data-files or --sample", "on_error": "--on-error",
    "report": "--skipped-rows",
}
# of them, those a command takes under another name, or not at all: command -> name -> what it takes instead
COMMAND_ARGUMENTS_BY_COMMAND = {
    "export": {"config": "--format"}, "show": {"report": "nothing: show names each skipped row on standard error"},
    "stats": {"config": "nothing: stats reads the unified rows"}, "mirror": {"config": "--configs"},
}


# load()'s own keywords that --option passes on, by command (the others: LOAD_KEYWORDS)
LOAD_KEYWORDS = ("num_proc", "validate", "revision", "cache_dir")
# of them, those whose value is text as given: read as JSON, a tag `1.0`, a commit prefix of digits or a folder
# `2024` would be a number
TEXT_KEYWORDS = ("revision", "cache_dir")
COMMAND_LOAD_KEYWORDS = {"validate": ("revision", "cache_dir"), "mirror": ()}
# source options a command sets with an argument of its own (refused as --option, naming the argument)
COMMAND_OWN_OPTIONS = {"export": {"trailing_results": "--drop-trailing-results"}}


def other_options_note(command: str) -> str:
    """What --option takes besides the source's options, for a command's message refusing an unknown one."""
    keywords = COMMAND_LOAD_KEYWORDS.get(command, LOAD_KEYWORDS)
    note = f"--option also takes {', '.join(keywords)}" if keywords else "--option takes the source's options only"
    # (the listing names them among the source's options, which --option then refused)
    own = "".join(f"; {name} is {argument}" for name, argument in COMMAND_OWN_OPTIONS.get(command, {}).items())
    return note + own


def source_options(args: argparse.Namespace, own: Optional[dict[str, str]] = None) -> dict:
    """``--option NAME=VALUE`` pairs as keyword arguments (values read as JSON where they parse, but those of
    :data:`TEXT_KEYWORDS` as given). A NAME the command sets itself (:data:`COMMAND_ARGUMENTS`, and ``own``:
    name -> the command's argument) is refused."""
    by_command = COMMAND_ARGUMENTS_BY_COMMAND.get(getattr(args, "command", None), {})
    taken = {**COMMAND_ARGUMENTS, **by_command, **(own or {})}
    out = {}
    for item in getattr(args, "options", None) or []:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--option takes NAME=VALUE, got {item!r}")
        if name.strip() in taken:
            raise ValueError(f"--option {name.strip()}: not a source option but an argument the command sets; "
                             f"give {taken[name.strip()]}")
        if name.strip() in out:  # (the last one was kept without a word: `strict=false` then `strict=true`)
            raise ValueError(f"--option {name.strip()} is given more than once: give it once")
        if name.strip() in TEXT_KEYWORDS:
            out[name.strip()] = text
            continue
        if name.strip() == "validate" and not text.replace(",", "").strip():
            # --option validate="$RULES" with RULES unset selected no rule: no row was checked, none dropped
            raise ValueError(f"--option validate= names no rule, got {text!r} (an unset shell variable?); give rule "
                             "ids, globs such as 'arguments.*', error, warning or all, or leave the option out")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError:
            out[name.strip()] = text
    return out


def data_files_for(args: argparse.Namespace, source: str):
    from ..loading import sample_files
    from ..registry import MIX

    if getattr(args, "sample", False):
        if args.data_files:  # reading the sample would leave the files named unread, their rows unchecked
            raise ValueError("--sample and --data-files exclude each other: give one of them")
        if "data_dir" in source_options(args):  # (the same: the sample's paths are whole, the folder unread)
            raise ValueError("--sample and --option data_dir= exclude each other: give one of them")
        return sample_files(source)
    if source == MIX and args.data_files:
        files = files_by_source(args.data_files)
        refuse_folders([path for paths in files.values() for path in paths])
        return files
    named = [names_a_source(item) for item in args.data_files or []]
    if any(named):
        # SOURCE=PATH items, as all and mirror take them (also beside plain paths): read as a path they were a file
        # not found ("Unable to find './nestful=a.jsonl'"), an item of another source read as this one's rows
        items = [files_by_source([item], source) if is_named else {source: [item]}
                 for item, is_named in zip(args.data_files, named)]
        others = sorted({name for item in items for name in item} - {source})
        if others:
            raise ValueError(f"--data-files gives files of {', '.join(others)} (SOURCE=PATH items), but the command "
                             f"reads {source}: give {source}'s files")
        files = [path for item in items for path in item[source]]
        refuse_folders(files)
        return files
    refuse_folders(args.data_files or [])
    return args.data_files


def names_a_source(item: str) -> bool:
    """``SOURCE=PATH`` (a registered source's name before the ``=``), and no file of that name."""
    from ..registry import source_names

    name, sep, _ = item.partition("=")
    return bool(sep) and name in source_names() and not os.path.exists(item)


def refuse_folders(paths: list[str], option: str = "--data-files") -> None:
    """A folder given as --data-files (or score's --gold-data-files), said in the command's terms (load() would
    advise data_dir=, which no command takes), and standard input, a pipe or a device, which are not read."""
    for path in paths:
        if not isinstance(path, str) or "://" in path or "::" in path:
            continue
        if os.path.isdir(path):
            raise ValueError(f"{option} names the folder {path!r}; give its files or a glob such as "
                             f"{os.path.join(path, '*.jsonl')!r}")
        # Standard input, a pipe or a device (-, /dev/stdin, <(...)): datasets found no file there ("Unable to
        # find '/dev/stdin'"), as if the path were wrong. Files are read by position (shards, a rerun's cache key).
        if path == "-" and not os.path.exists(path):
            raise ValueError(f"{option} -: standard input is not read; save the rows to a file and give its path")
        if os.path.exists(path) and not os.path.isfile(path):
            raise ValueError(f"{option} names {path!r}, which is not a regular file (a pipe or a device, as "
                             f"/dev/stdin or <(...) are): save the rows to a file and give its path")


def refuse_missing_file(path: str, argument: str, expected: str) -> None:
    """A local file a command reads by name (score's RESULT.jsonl, verify's --expect-failures) that is a folder or
    is not there, said naming the argument: open() named the path alone."""
    if not is_local(path):
        return
    if os.path.isdir(path):
        raise ValueError(f"{argument} {path!r} is a folder: give {expected}")
    if not os.path.exists(path):
        raise ValueError(f"{argument} {path!r} does not exist: give {expected}")


def with_data_dir_files(args: argparse.Namespace, source: str, data_files):
    """``data_files`` and, with ``--option data_dir=DIR``, the files the source reads as rows from DIR: an output
    written there (an export, a --skipped-rows file) is read back by the next run as one a --data-files glob
    matches is, so :func:`refuse_writing_inputs` must see them too. Without either, the files a source option
    names (a LLaMA-Factory ``dataset_info`` entry's file_name), which the export would replace while reading."""
    from ..cache_keys import data_dir_files
    from ..registry import MIX, builder_class

    options = source_options(args)
    data_dir = options.get("data_dir")
    if data_files is None and data_dir is None and source != MIX:
        return builder_class(source).data_files_from_options(options)
    if not isinstance(data_dir, str) or source == MIX or isinstance(data_files, dict):
        return data_files  # (the mix refuses data_dir, and so does load() any other value)
    source_class = builder_class(source).SOURCE_CLASS
    # (a leading ~ is the home folder, as load() reads data_dir: the shell leaves it after data_dir=, and the
    # folder named "~" looked for here held no files, so an --out into the folder read was not refused)
    folder = os.path.expanduser(data_dir)
    return [*(data_files or []), *data_dir_files(folder, source_class.local_patterns, source_class.local_not_data)]


def data_file_patterns(data_files) -> list:
    """The paths and globs ``data_files`` (a list, or source -> list) gives, in one list."""
    groups = data_files.values() if isinstance(data_files, dict) else [data_files or []]
    return [p for group in groups for p in ([group] if isinstance(group, str) else group)]


def is_local(pattern) -> bool:
    """Whether a data file path or glob names local files (not a URL, nor a chained ``zip://...::`` path)."""
    return isinstance(pattern, str) and "://" not in pattern and "::" not in pattern


def local_inputs(data_files) -> set[str]:
    """The real paths of the local files ``data_files`` (a list, or source -> list) names, globs expanded."""
    import glob

    from ..shards.paths import literal_folder_escaped

    return {os.path.realpath(path) for pattern in data_file_patterns(data_files) if is_local(pattern)
            # (a file or folder named with [, * or ? read as named, as loading reads it: an existing file is no
            # glob, and its name read as one matched other files, rows1.jsonl for rows[1].jsonl)
            for path in ([pattern] if os.path.isfile(os.path.expanduser(pattern)) else
                         [pattern, *glob.glob(literal_folder_escaped(os.path.expanduser(pattern)), recursive=True)])
            if os.path.exists(path)}


def refuse_writing_inputs(data_files, outputs: dict[str, list]) -> None:
    """An output file (option -> the paths it writes) that the local ``data_files`` (a list, or source -> list)
    name: a rerun with ``--out`` in the folder its glob reads would read its last output as rows (and replace
    it while read), a ``--skipped-rows`` file would be read back as bad rows."""
    from ..shards.paths import output_among_inputs

    found = output_among_inputs(local_inputs(data_files), outputs)
    if found is not None:
        option, path, _ = found
        raise ValueError(f"{option} would write {path!r}, which this run reads as input (--data-files, --option "
                         f"data_dir= or a dataset_info= entry): write it outside the files read")


def refuse_wrong_kind_outputs(*, folders: Optional[dict[str, Optional[str]]] = None,
                              files: Optional[dict[str, Optional[str]]] = None, renamed: bool = False) -> None:
    """Output arguments (option -> path) that cannot be what they name, refused before anything is read:
    ``folders`` (--out, --plots) naming a file, ``files`` (--skipped-rows) naming a folder, either under a file
    or in a folder this process cannot write (an existing file is written in place, so its own mode decides, unless
    ``renamed``: mirror writes its listing under another name and renames it onto the file).
    The system's own errors ("File exists", "Is a directory") named no argument, and mirror met a folder as
    --skipped-rows only once every row had been converted."""
    from pathlib import Path

    folders, files = folders or {}, files or {}
    for option, path in {**folders, **files}.items():
        if not path:
            continue
        full = Path(os.path.abspath(os.path.expanduser(path)))
        above = next((p for p in full.parents if p.exists() and not p.is_dir()), None)
        if above is not None:
            raise ValueError(f"{option} {path!r} cannot be made: {str(above)!r} is a file, not a folder")
        if option in folders and full.exists() and not full.is_dir():
            raise ValueError(f"{option} {path!r} is a file: give a folder (made if missing)")
        if option in files and full.is_dir():
            raise ValueError(f"{option} {path!r} is a folder: give a file, e.g. "
                             f"{os.path.join(path, 'skipped-rows.jsonl')!r}")
        # (stats met an unwritable --plots folder, and mirror one of --skipped-rows, once every row had been read)
        in_place = option in files and full.exists() and not renamed  # (/dev/null in /dev, which no user writes)
        nearest = next(p for p in ([full] if option in folders or in_place else []) + list(full.parents) if p.exists())
        if not os.access(nearest, os.W_OK | (os.X_OK if nearest.is_dir() else 0)):
            raise ValueError(f"{option} {path!r} cannot be written: {str(nearest)!r} is read-only here (a read-only "
                             f"file system, or no permission): give a {'file' if in_place else 'folder'} you can write")
    refuse_files_where_folders_go(files, folders)


def refuse_files_where_folders_go(files: dict[str, Optional[str]], folders: dict[str, Optional[str]]) -> None:
    """A file output (--skipped-rows) at an output folder (--out, --plots) or above it, neither there yet: one was
    made before the other failed, after every row was read ("File exists", "Is a directory", naming no
    argument; a mirror's staging folder was left behind)."""
    from pathlib import Path

    for option, path in files.items():
        for folder_option, folder in folders.items():
            if not path or not folder:
                continue
            made = Path(os.path.abspath(os.path.expanduser(folder)))
            if Path(os.path.abspath(os.path.expanduser(path))) in (made, *made.parents):
                raise ValueError(f"{option} {path!r} is a folder {folder_option} {folder!r} makes: give a file, "
                                 f"e.g. {os.path.join(folder, 'skipped-rows.jsonl')!r}")


@contextlib.contextmanager
def output_folder(path, option: str = "--out") -> Iterator[None]:
    """Make the output folder ``path`` (and its missing parents) for the block; if the block fails (a bad row, an
    unwritable file, Ctrl-C) the folders it made that are still empty are removed: a run that wrote nothing
    leaves nothing behind. One that cannot be made is a ValueError naming ``option`` and ``path``."""
    given, path = path, os.path.abspath(os.fspath(path))
    missing, made = [], []
    while not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    try:
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
            except OSError as exc:  # (--out /proc/x: the system's "No such file or directory" named no argument)
                raise ValueError(f"{option} {os.fspath(given)!r} cannot be made: {folder!r}: "
                                 f"{exc.strerror or exc}") from None
            made.insert(0, folder)
        yield
    except BaseException:
        for folder in made:  # deepest first; a folder holding a file (a split written before the failure) stays
            try:
                os.rmdir(folder)
            except OSError:
                break
        raise


def files_by_source(items: list[str], reader: Optional[str] = None) -> dict[str, list[str]]:
    """``SOURCE=PATH`` items as the mapping ``load("all", data_files=...)`` takes (source name -> files);
    ``reader``: the one source a command reads (named in the error), else the mix."""
    from ..registry import MIX, meant_source, source_names

    names = source_names()
    files: dict[str, list[str]] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or name not in names or not path:
            meant = meant_source(name) if sep and path else None
            hint = f" (did you mean {f'{meant}={path}'!r}?)" if meant in names else ""
            if reader is not None and sep and name in names:  # (`nestful=`: the item of one source names no file)
                raise ValueError(f"--data-files {item!r} names no file of {name}: give {name}=PATH or PATH")
            raise ValueError(f"{MIX} reads each source's own files: give --data-files as SOURCE=PATH items "
                             f"(SOURCE one of {', '.join(names)}), got {item!r}{hint}")
        # (a leading ~ is the home folder, as a_path reads it: the shell leaves it after SOURCE=, and the checks
        # before any row looked for a folder named "~")
        files.setdefault(name, []).append(os.path.expanduser(path))
    return files


def add_skipped_rows_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--skipped-rows", metavar="FILE", type=a_path,
                   help="write every skipped row to FILE, one JSON object per line (source, file, row, field, error, "
                        "reason, message); the summary lists the first 20")


def skip_report_for(args: argparse.Namespace):
    """The command's skip report: every skipped row also goes to ``--skipped-rows``. The file is left as it is
    until :func:`start_skipped_rows`: a command refused for its arguments does not empty it."""
    from ..errors import SkipReport

    return SkipReport(rows_path=getattr(args, "skipped_rows", None) or None)


def skipped_rows_folder(path: Optional[str]):
    """:func:`output_folder` for the folder of the ``--skipped-rows`` file, made if missing as ``--out`` is (and as
    ``mirror`` makes it): ``export``, ``stats`` and ``validate`` refused a file in a folder not there yet."""
    return output_folder(os.path.dirname(os.path.abspath(path)), "the folder of --skipped-rows") if path else \
        contextlib.nullcontext()


def start_skipped_rows(path: Optional[str]) -> None:
    """Empty the ``--skipped-rows`` file (skipped rows are appended to it): call once the run is set up."""
    if path:
        with open(path, "wb"):
            pass


def print_json(value, **options) -> None:
    """``value`` printed as JSON (``--json``, ``stats``). json writes C0 controls as escapes but DEL, C1 controls
    (a CSI) and bidirectional overrides as they are, which act on the terminal: they are written as the same
    escapes as in every other line (errors.escape_controls), the JSON reading back the same."""
    from ..errors import escape_controls

    print(escape_controls(json.dumps(value, ensure_ascii=False, **options)))


def print_skips(report) -> None:
    from ..errors import plain_printable

    print(report.summary())
    for e in report.examples:
        print(plain_printable(f"  {e.error}: {e.where}: {e.message}"))
    if report.rows_path and report.skipped:
        print(f"every skipped row: {report.rows_path}")
