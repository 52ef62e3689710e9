"""Which columns and keys of a sharegpt file hold what: LLaMA-Factory's ``columns`` and ``tags``, given as source
options or taken from an entry of a ``dataset_info.json``.

The names and defaults are those of LLaMA-Factory 0.9.5's ``DatasetAttr`` (``data/parser.py``)::

    columns: messages ("conversations"), system, tools, images, videos, audios (not read unless named)
    tags:    role_tag ("from"), content_tag ("value"), user_tag ("human"), assistant_tag ("gpt"),
             observation_tag ("observation"), function_tag ("function_call"), system_tag ("system")

``columns=`` and ``tags=``: a key left out has the default above, so ``system``, ``tools`` and the media columns
are read only when named. Without ``columns=`` (and without ``dataset_info=``) every column is read under its
default name, as ``export --format llamafactory`` writes them. An entry's ``columns`` and ``tags`` are read as
``DatasetAttr.join`` reads them: when the entry has ``tags``, a tag it leaves out is null, not its default (no
``observation``/``function_call``/``system`` turn then; a leading system message is a turn LLaMA-Factory drops
the row over), and ``columns`` or ``tags`` that leave out ``messages``, ``role_tag``, ``content_tag``,
``user_tag`` or ``assistant_tag`` (LLaMA-Factory fails on, or drops, every row) are a ValueError.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import logging
import os
from typing import Any, Optional

from tooluse_datasets.errors import DataNotFoundError, json_kind, shown

logger = logging.getLogger("tooluse_datasets")
_SAID: set = set()  # entries (and their keys) whose num_samples, sliced split or unknown key was said

DATA_CONFIG = "dataset_info.json"
COLUMN_KEYS = ("messages", "system", "tools", "images", "videos", "audios")
LLAMAFACTORY_COLUMNS: dict[str, Optional[str]] = {"messages": "conversations", "system": None, "tools": None,
                                                  "images": None, "videos": None, "audios": None}
# No columns= and no dataset_info=: every column under its default name (what the writer writes).
READER_COLUMNS: dict[str, Optional[str]] = {key: ("conversations" if key == "messages" else key) for key in COLUMN_KEYS}
TAGS: dict[str, Optional[str]] = {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                                  "assistant_tag": "gpt", "observation_tag": "observation",
                                  "function_tag": "function_call", "system_tag": "system"}
# LLaMA-Factory's other column keys: what they are, for the error that refuses them.
OTHER_COLUMNS = {"prompt": "an alpaca column", "query": "an alpaca column", "response": "an alpaca column",
                 "history": "an alpaca column", "chosen": "a preference (ranking) column",
                 "rejected": "a preference (ranking) column", "kto_tag": "a KTO label column"}
# Tags an entry may leave out (None to LLaMA-Factory: no such turn); the others it cannot do without.
ENTRY_NULLABLE_TAGS = ("observation_tag", "function_tag", "system_tag")
# LLaMA-Factory's FILEEXT2TYPE (extras/constants.py): a file's extension -> the datasets loader it reads it with.
FILE_TYPES = {"arrow": "arrow", "csv": "csv", "json": "json", "jsonl": "json", "parquet": "parquet", "txt": "text"}
READ_FILE_TYPES = ("json", "parquet")  # the loaders whose rows this source reads as LLaMA-Factory does
# Entry keys that say where LLaMA-Factory reads the data from, other than a local file_name (it prefers them).
REMOTE_KEYS = ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name")
# Every key of an entry LLaMA-Factory 0.9.5 reads (get_dataset_list and DatasetAttr.join).
ENTRY_KEYS = ("file_name", *REMOTE_KEYS, "formatting", "ranking", "subset", "split", "folder", "num_samples",
              "columns", "tags")


@dataclasses.dataclass(frozen=True)
class Layout:
    """The names a file uses. ``columns``: every key of COLUMN_KEYS (None: not read); ``tags``: every key of
    TAGS (``system_tag`` may be None). ``files``: the entry's own files (``dataset_info=`` without data_files)."""

    columns: dict
    tags: dict
    explicit_columns: bool = False  # columns named by the user or an entry (not READER_COLUMNS)
    messages_named: bool = False  # the conversations column named by columns= or the entry's columns
    entry: Optional[str] = None  # "dataset_info.json entry 'x' (path)" when read from one
    file_path: Optional[str] = None  # the entry's file_name, joined to the dataset_info.json folder
    no_file: Optional[str] = None  # why an entry gives no local file (a Hub entry...)

    def files(self) -> tuple[str, ...]:
        """The files of the entry (for ``dataset_info=`` without data_files)."""
        if self.file_path is None:
            raise ValueError(self.no_file or "no dataset_info entry")
        return entry_files(self.file_path, self.entry or "")

    @property
    def default_tag(self) -> dict[str, str]:
        """The file's role tag -> LLaMA-Factory's default spelling of it (``"user"`` -> ``"human"``)."""
        return {self.tags[key]: TAGS[key] for key in TAGS if key.endswith("_tag") and key not in
                ("role_tag", "content_tag") and self.tags[key] is not None}

    def describe_tags(self) -> str:
        return ", ".join(f"{key[:-4]} {self.tags[key]!r}" for key in TAGS
                         if key not in ("role_tag", "content_tag") and self.tags[key] is not None)


DEFAULT_LAYOUT = Layout(columns=dict(READER_COLUMNS), tags=dict(TAGS))


def layout_of(options: Any) -> Layout:
    """The layout the options give (``columns``, ``tags``, ``dataset_info``, ``dataset``); ValueError naming the
    option, key or entry that is wrong."""
    columns, tags, info, name = options.columns, options.tags, options.dataset_info, options.dataset
    if info is None:
        if name is not None:
            raise ValueError("option dataset names an entry of a dataset_info.json: give dataset_info=PATH (the file "
                             "or its folder) too")
        return Layout(columns=check_columns(columns, "columns") if columns is not None else dict(READER_COLUMNS),
                      tags=check_tags(tags, "tags") if tags is not None else dict(TAGS),
                      explicit_columns=columns is not None,
                      messages_named=isinstance(columns, dict) and "messages" in columns)
    given = [option for option, value in (("columns", columns), ("tags", tags)) if value is not None]
    if given:
        raise ValueError(f"option {' and '.join(given)} and dataset_info exclude each other: the columns and tags "
                         f"are the dataset_info.json entry's (edit the entry, or give {' and '.join(given)} without "
                         f"dataset_info)")
    path, entries = read_dataset_info(info)
    if name is None:
        raise ValueError(f"option dataset_info needs dataset=NAME, the entry to read; {path} has "
                         f"{_listed(entries)}")
    if name not in entries:
        close = difflib.get_close_matches(name, list(entries), 1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"{path} has no entry {name!r}{hint}; its entries: {_listed(entries)}")
    return entry_layout(entries[name], f"{DATA_CONFIG} entry {name!r} ({path})", os.path.dirname(path))


def read_dataset_info(info: Any) -> tuple[str, dict]:
    """``dataset_info=`` (the file, or the folder holding it) -> (its path, its entries)."""
    path = os.path.expanduser(os.fspath(info))  # (as data_dir and data_files are: "~" is no folder of its own)
    if os.path.isdir(path):
        path = os.path.join(path, DATA_CONFIG)
    try:
        with open(path, "rb") as f:
            entries = json.loads(f.read())
    except FileNotFoundError:
        raise DataNotFoundError(f"option dataset_info: {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"option dataset_info: {path} is not readable JSON ({exc})") from None
    if not isinstance(entries, dict):
        raise ValueError(f"option dataset_info: {path} must be a JSON object of entries, got {json_kind(entries)}")
    return path, entries


def entry_layout(entry: Any, where: str, folder: str) -> Layout:
    """One ``dataset_info.json`` entry, as LLaMA-Factory's ``DatasetAttr.join`` reads it."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a JSON object, got {json_kind(entry)}")
    formatting = entry.get("formatting", "alpaca")
    if formatting != "sharegpt":
        default = " (LLaMA-Factory's default where an entry names none)" if "formatting" not in entry else ""
        hint = (" (OpenAI-style messages with tool_calls read with the ms_swift source: "
                "td.load('ms_swift', data_files=...))" if formatting == "openai" else "")
        raise ValueError(f"{where} has formatting {formatting!r}{default}: the llamafactory source reads sharegpt "
                         f"entries only{hint}")
    if entry.get("ranking"):
        raise ValueError(f"{where} is a preference dataset (ranking: true): its rows are chosen/rejected pairs, "
                         f"not conversations the llamafactory source reads")
    for key in ("columns", "tags"):
        if key in entry and not isinstance(entry[key], dict):
            raise ValueError(f"{where}: {key} must be a JSON object, got {json_kind(entry[key])}")
    warn_unknown_keys(entry, where)
    if entry.get("num_samples") is not None and where not in _SAID:
        _SAID.add(where)
        logger.warning("%s: num_samples=%r is a training setting (LLaMA-Factory samples that many rows each run); "
                       "every row of the file is read here", where, entry["num_samples"])
    columns = check_columns(entry.get("columns", {}), f"{where}: columns")
    if "columns" in entry and entry["columns"].get("messages") is None:
        # DatasetAttr.join sets every column key from the entry's columns, None where left out: LLaMA-Factory
        # then reads the conversation from no column, and fails on the first row
        raise ValueError(f"{where}: columns names no 'messages' column; LLaMA-Factory reads an entry's columns "
                         f"without defaults and fails on every row (add \"messages\": \"conversations\")")
    tags = dict(TAGS)
    if "tags" in entry:
        # Likewise for tags: a tag the entry's tags leave out is None to LLaMA-Factory, not its default; so a
        # file whose tags name no observation_tag, function_tag or system_tag has no such turns (LLaMA-Factory
        # drops rows holding them, and reads a leading system turn as a turn, not as the system prompt).
        given = {**{key: None for key in TAGS}, **entry["tags"]}
        # (a tag it cannot do without, left out or null, is said below with what to add; of another type, it is
        # not offered null)
        tags = check_tags(given, f"{where}: tags", nullable=tuple(key for key in TAGS if key in ENTRY_NULLABLE_TAGS
                                                                   or given[key] is None))
        missing = [key for key in TAGS if key not in ENTRY_NULLABLE_TAGS and tags[key] is None]
        if missing:
            fails = {"role_tag", "content_tag"} & set(missing)
            raise ValueError(f"{where}: tags name no {' and no '.join(map(repr, missing))}; LLaMA-Factory reads an "
                             f"entry's tags without defaults (a tag left out is null), so it "
                             f"{'fails on' if fails else 'drops'} every conversation: add "
                             f"{', '.join(f'{key!r}: {TAGS[key]!r}' for key in missing)} to the entry's tags")
    remote = [key for key in REMOTE_KEYS if key in entry]
    if not remote:
        check_file_split(entry.get("split", "train"), where)
    file_path = no_file = None
    if remote:  # LLaMA-Factory prefers these to a file_name
        no_file = (f"{where} is not a local file (LLaMA-Factory reads it from {remote[0]} {entry[remote[0]]!r}): "
                   f"pass data_files= (its files) to read them with the entry's columns and tags")
    elif not isinstance(entry.get("file_name"), str) or not entry["file_name"]:
        given = entry.get("file_name")  # (one given of another type is said as what it is, not as none)
        got = f" (file_name must be a path, got {json_kind(given)})" if given not in (None, "") else ""
        no_file = f"{where} names no file_name{got}: pass data_files="
    else:
        file_path = os.path.join(folder, entry["file_name"])
    return Layout(columns=columns, tags=tags, explicit_columns=True, entry=where, file_path=file_path,
                  no_file=no_file, messages_named="columns" in entry)  # (an entry's columns name it: checked above)


def warn_unknown_keys(entry: dict, where: str) -> None:
    """A key LLaMA-Factory does not read (``colums``, ``tag``): it ignores the key, as this reader does, so a
    misspelt ``columns`` or ``tags`` means the defaults to both; said once per key, with the key meant."""
    for key in entry:
        if key in ENTRY_KEYS or (where, key) in _SAID:
            continue
        _SAID.add((where, key))
        close = difflib.get_close_matches(key, ENTRY_KEYS, 1)
        logger.warning("%s: key %r is not one LLaMA-Factory reads (it ignores it, and so does this reader)%s",
                       where, key, f"; did you mean {close[0]!r}?" if close else "")


def check_file_split(split: Any, where: str) -> None:
    """An entry's ``split``, as LLaMA-Factory passes it to ``load_dataset`` for a local file: the file has one
    split, ``train``, so another name fails there (ValueError here); a slice (``train[:100]``, ``train[10%:]``)
    trains only those rows, which ``load(split=...)`` reads, so it is said (every row is read otherwise)."""
    if not isinstance(split, str) or not split.strip():
        raise ValueError(f"{where}: split must be a split name such as 'train', got {shown(split)}")
    names = {part.split("[", 1)[0].strip() for part in split.split("+")}
    if names != {"train"}:
        raise ValueError(f"{where} has split {split!r}, but a local file has only a 'train' split: LLaMA-Factory "
                         f"fails on the entry (Unknown split); name 'train', or a slice of it such as 'train[:100]'")
    if split != "train" and (where, "split") not in _SAID:
        _SAID.add((where, "split"))
        logger.warning("%s: split=%r: LLaMA-Factory trains only those rows of the file; every row is read here "
                       "unless load() is given split=%r (map-style)", where, split, split)


def entry_files(local_path: str, where: str) -> tuple[str, ...]:
    """The files LLaMA-Factory reads for an entry's ``file_name``: the file, or every name in the folder (it lists
    subfolders and hidden files too), each typed by its extension as its loader types it."""
    if os.path.isdir(local_path):
        files = [os.path.join(local_path, name) for name in sorted(os.listdir(local_path))]
        if not files:
            raise DataNotFoundError(f"{where}: the folder {local_path} holds no file")
    elif os.path.isfile(local_path):
        files = [local_path]
    else:
        raise DataNotFoundError(f"{where}: file_name {local_path} does not exist")
    for path in files:
        if _extension(path) not in FILE_TYPES:
            what = ("a folder" if os.path.isdir(path) else
                    f"a .{_extension(path)} file" if _extension(path) else "a file without an extension")
            raise ValueError(f"{where}: {path} is {what}, which LLaMA-Factory refuses (allowed file types: "
                             f"{', '.join(FILE_TYPES)})")
    # LLaMA-Factory: "File types should be identical.", by its loader's type (.json and .jsonl are both json)
    types = {FILE_TYPES[_extension(path)] for path in files}
    if len(types) > 1:
        suffixes = sorted({os.path.splitext(path)[1] for path in files})
        raise ValueError(f"{where}: the folder {local_path} holds files of several types ({', '.join(suffixes)}); "
                         f"LLaMA-Factory refuses it")
    loader = types.pop()
    if loader not in READ_FILE_TYPES:
        # Its csv and text loaders give columns of text (a .txt file's lines are one 'text' column), not the
        # conversations of a sharegpt row; its arrow loader reads files this source does not
        raise ValueError(f"{where}: LLaMA-Factory reads {files[0]} with its {loader} loader, not as JSON or "
                         f"Parquet; the llamafactory source reads .json, .jsonl and .parquet files (rename JSON "
                         f"Lines to .jsonl)")
    return tuple(files)


def _extension(path: str) -> str:
    return os.path.splitext(path)[1][1:]


def check_columns(columns: Any, where: str) -> dict:
    out = _names(columns, LLAMAFACTORY_COLUMNS, where, "column", nullable=set(COLUMN_KEYS) - {"messages"},
                 null_means="not read", refused=OTHER_COLUMNS)
    _check_distinct(out, where)
    return out


def check_tags(tags: Any, where: str, nullable: tuple = ("system_tag",)) -> dict:
    null_means = "no system message in the list" if tuple(nullable) == ("system_tag",) else "no such turn in the list"
    out = _names(tags, TAGS, where, "tag", nullable=set(nullable), null_means=null_means)
    _check_distinct({k: out[k] for k in ("role_tag", "content_tag")}, where)
    _check_distinct({k: v for k, v in out.items() if k not in ("role_tag", "content_tag")}, where)
    return out


def _names(given: Any, defaults: dict, where: str, kind: str, *, nullable: set, null_means: str,
           refused: Optional[dict] = None) -> dict:
    """``defaults`` updated with ``given`` (``columns`` or ``tags``): LLaMA-Factory's keys only, each a name, or
    null where ``nullable``; ``refused`` keys (name -> what they are) are LLaMA-Factory's, for other formats."""
    if not isinstance(given, dict):
        raise ValueError(f"{where} must be a dict of LLaMA-Factory's {kind} keys ({', '.join(defaults)}), "
                         f"got {type(given).__name__}")
    out = dict(defaults)
    for key, value in given.items():
        if refused and key in refused:
            raise ValueError(f"{where}: {key!r} is {refused[key]}, which the llamafactory source does not "
                             f"read (sharegpt conversations use {', '.join(defaults)})")
        if key not in defaults:
            raise ValueError(f"{where}: unknown key {key!r}; LLaMA-Factory's sharegpt {kind}s are "
                             f"{', '.join(defaults)}")
        if value is None and key in nullable:
            out[key] = None
            continue
        if not isinstance(value, str) or not value:
            allowed = f" (or null: {null_means})" if key in nullable else ""
            raise ValueError(f"{where}: {key!r} must name a {kind}{allowed}, got {shown(value)}")
        out[key] = value
    return out


def _check_distinct(names: dict, where: str) -> None:
    seen: dict[str, str] = {}
    for key, value in names.items():
        if value is None:
            continue
        if value in seen:
            raise ValueError(f"{where}: {seen[value]!r} and {key!r} both name {value!r}, so LLaMA-Factory could not "
                             f"tell them apart")
        seen[value] = key


def entry_digest(options_kwargs: dict) -> Optional[str]:
    """A digest of the ``dataset_info.json`` entry a build reads (for the cache key: the entry's columns and
    tags decide the rows, and the entry can be edited under the same path); None without ``dataset_info``."""
    info, name = options_kwargs.get("dataset_info"), options_kwargs.get("dataset")
    if info is None:
        return None
    try:
        _, entries = read_dataset_info(info)
    except (OSError, ValueError):
        return None  # the source reports it, with its reason
    text = json.dumps(entries.get(name), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _listed(entries: dict) -> str:
    sharegpt = [name for name, entry in entries.items()
                if isinstance(entry, dict) and entry.get("formatting") == "sharegpt"]
    if not entries:
        return "no entry"
    shown = ", ".join(map(repr, sharegpt[:20])) + (", ..." if len(sharegpt) > 20 else "")
    return f"sharegpt entries {shown}" if sharegpt else f"no sharegpt entry (of {len(entries)})"
