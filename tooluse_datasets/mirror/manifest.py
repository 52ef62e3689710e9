"""A mirror's manifest (``.tooluse-datasets.json``): everything the card and ``publish`` need, so neither has to
read the data again, and the names of a mirror's files.

Layout of a mirror folder (one folder = one Hub dataset repo)::

    <source>/README.md                                   card: YAML metadata + generated prose
    <source>/.tooluse-datasets.json                      this manifest: files + sha256, statistics, provenance
    <source>/<config>/<split>-00000-of-00002.parquet     data, one folder per config (= output format)

Data file names follow ``push_to_hub`` (``<data_dir>/<split>-XXXXX-of-NNNNN.parquet``) and the card's ``configs``
entries use the same ``<config>/<split>-*`` globs, so a repo written here and one written by ``push_to_hub``
look alike.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Optional

from datasets import Features

from .hidden_paths import build_running, staging_path, stopped_swap_leftovers

MANIFEST_NAME = ".tooluse-datasets.json"
README_NAME = "README.md"
MANIFEST_FORMAT_VERSION = 1
# Source options that name a local file or folder (NESTFUL's functions, a LLaMA-Factory dataset_info entry).
PATH_OPTIONS = ("executable_functions", "dataset_info")
SAMPLE_PREFIX = "tooluse_datasets.builders/"  # how the inputs name a bundled sample's files
# A data file this package writes; publish uses it to recognise stale shards of ours in a repo.
SHARD_FILE = re.compile(r"^(?P<config>[^/]+)/(?P<split>\w+(?:\.\w+)*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet$")


class MirrorError(Exception):
    """A mirror cannot be built or read (bad arguments, an unusable target folder, an integrity failure)."""


class StoppedSwapError(MirrorError):
    """No mirror at ``target``: a build was stopped while replacing it, and ``leftovers`` (its staged mirror,
    the old one moved aside) wait beside it for ``staging.recover_swap``."""

    def __init__(self, target: Path, leftovers: list[Path]):
        self.target, self.leftovers = target, leftovers
        staged = staging_path(target)
        names = ", ".join(f"{p.name} ({'the new mirror, staged' if p == staged else 'the old one, moved aside'})"
                          for p in leftovers)
        # quoted for the shell: a path holding quotes, `$` or spaces must not break the line or be expanded
        recover = shlex.quote(f"from tooluse_datasets.mirror import recover_swap; recover_swap({str(target)!r})")
        super().__init__(
            f"{target} is missing: a build was stopped while replacing it, which left in {target.parent}: {names}. "
            f"The next `tooluse-datasets mirror` of {target.name} into {target.parent}, or `tooluse-datasets "
            f"publish` of it, puts the complete one in place first; to do only that: python -c {recover}")


def data_file_name(config: str, split: str, index: int, count: int) -> str:
    """``<config>/<split>-XXXXX-of-NNNNN.parquet``: the posix path of a data file inside a mirror."""
    return f"{config}/{split}-{index:05d}-of-{count:05d}.parquet"


@dataclasses.dataclass
class DataFile:
    path: str  # posix path inside the mirror
    sha256: str
    num_bytes: int  # file size
    num_rows: int


@dataclasses.dataclass
class SplitEntry:
    num_examples: int
    num_bytes: int  # uncompressed Arrow bytes, what dataset_info.splits[].num_bytes records
    files: list[str]
    skipped: dict  # SkipReport.to_dict(): rows read, skipped, reasons, first examples


@dataclasses.dataclass
class ConfigEntry:
    description: str
    features: dict  # Features.to_dict()
    splits: dict[str, SplitEntry]
    example: Any  # the first row, decoded and shortened for the card
    # Splits left empty because every row was skipped: not published, but their skip counts are kept.
    omitted_splits: dict[str, dict] = dataclasses.field(default_factory=dict)

    @property
    def num_examples(self) -> int:
        return sum(s.num_examples for s in self.splits.values())


@dataclasses.dataclass
class InputFile:
    name: str  # URL, "tooluse_datasets.builders/<source>/dummy_data/<file>", or a local file's name
    sha256: str
    num_bytes: int


@dataclasses.dataclass
class Provenance:
    origin: str  # "upstream" (pinned revision), "sample" (bundled sample) or "files" (given data files)
    upstream: Optional[dict]  # host, repo, revision, homepage, license, url
    inputs: list[InputFile]
    versions: dict[str, str]
    # The inputs' names by split, where data files were given per split (Python's data_files={split: files}),
    # which --data-files cannot give: it reads its files as one split. {} otherwise.
    split_inputs: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def local_files_given(self) -> bool:
        """The inputs are local files given to the build (no URL, no bundled sample): the card's command runs in
        the folder they share, and names the local paths of the source options relative to it."""
        return self.origin == "files" and not any("://" in i.name or i.name.startswith(SAMPLE_PREFIX)
                                                  for i in self.inputs)


@dataclasses.dataclass
class Manifest:
    source: str
    pretty_name: str
    default_config: str
    configs: dict[str, ConfigEntry]
    omitted_configs: dict[str, str]  # config -> why it has no rows
    statistics: dict[str, dict]  # split -> SplitStatistics.result() of the unified rows
    validation: dict[str, dict]  # split -> ValidationCounter.to_dict() of the unified rows
    provenance: Provenance
    parquet: dict
    files: list[DataFile]
    license: Optional[str] = None  # given with the mirror request; else the card uses the upstream license
    # PNG plots of the distributions (plots/<measure>.png; num_rows 0), embedded in the card; [] without matplotlib
    figures: list[DataFile] = dataclasses.field(default_factory=list)
    # The part of the data the build was asked for, when not all of it: {"split": name} (``--split``) and/or
    # {"configs": [...]} (``--configs`` naming fewer than every format). {} for a mirror of the whole data.
    # Publish refuses to let such a mirror delete the other splits and configs of an earlier publish.
    selection: dict = dataclasses.field(default_factory=dict)
    # The source options the build was given (``--option NAME=VALUE``, ``--shard-size``): they decide the rows
    # (NESTFUL's data_version or execute, ToolMind's strict, LLaMA-Factory's columns...), so the card states
    # them. A local path is named relative to the folder local input files share (the folder the card's command
    # runs in), else by its last part (see local_path_options). {} when none was given.
    options: dict = dataclasses.field(default_factory=dict)
    format_version: int = MANIFEST_FORMAT_VERSION

    def local_path_options(self) -> list[str]:
        """The source options naming a local path: relative to the folder the inputs share where they are local
        files given to the build (``provenance.local_files_given()``), else by its last part alone (a bundled
        sample, the upstream), and a command must be pointed at a copy."""
        return [name for name in PATH_OPTIONS
                if isinstance(self.options.get(name), str) and "://" not in self.options[name]]

    def selection_text(self) -> str:
        """The selection as the mirror command's options (``--split X --configs a b``); '' for the whole data."""
        parts = [f"--split {self.selection['split']}"] if self.selection.get("split") else []
        if self.selection.get("configs"):
            parts.append("--configs " + " ".join(self.selection["configs"]))
        return " ".join(parts)

    def options_text(self) -> str:
        """The source options as the mirror command's ``--option NAME=VALUE`` arguments; '' without any."""
        import shlex

        return " ".join(f"--option {shlex.quote(f'{name}={option_value_text(value)}')}"
                        for name, value in self.options.items())

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        data = json.loads(text)
        if data.get("format_version") != MANIFEST_FORMAT_VERSION:
            raise MirrorError(f"manifest format {data.get('format_version')!r} is not {MANIFEST_FORMAT_VERSION}")
        configs = {name: ConfigEntry(**{**c, "splits": {s: SplitEntry(**e) for s, e in c["splits"].items()}})
                   for name, c in data.pop("configs").items()}
        prov = data.pop("provenance")
        provenance = Provenance(**{**prov, "inputs": [InputFile(**i) for i in prov["inputs"]]})
        files = [DataFile(**f) for f in data.pop("files")]
        figures = [DataFile(**f) for f in data.pop("figures", [])]
        manifest = cls(configs=configs, provenance=provenance, files=files, figures=figures, **data)
        manifest._check_references()
        return manifest

    def _check_references(self) -> None:
        """The names the manifest uses name its own entries: the card and publish look them up (a hand edit
        could leave a split naming a file the manifest does not list, or a default config it does not have)."""
        if self.default_config not in self.configs:
            raise MirrorError(f"its default_config {self.default_config!r} is none of its configs "
                              f"({', '.join(self.configs) or 'none'})")
        listed = {f.path for f in self.files}
        for name, entry in self.configs.items():
            for split, split_entry in entry.splits.items():
                unlisted = [path for path in split_entry.files if path not in listed]
                if unlisted:
                    raise MirrorError(f"configs.{name}.splits.{split} names files its files list lacks: "
                                      f"{', '.join(unlisted)}")

    def features(self, config: str) -> Features:
        return Features.from_dict(self.configs[config].features)


def option_value_text(value: Any) -> str:
    """A source option's value as ``--option NAME=VALUE`` takes it (JSON, or text where JSON would not read it
    back as that text)."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def read_manifest(folder: str | Path) -> Manifest:
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        target = Path(os.path.abspath(folder))
        # A reader leaves the folders as they are (recover_swap moves them); it says what happened and what to run.
        if not target.exists():
            leftovers = stopped_swap_leftovers(target)
            if leftovers:
                raise StoppedSwapError(target, leftovers)
            staged = staging_path(target)
            if not staged.is_dir():
                raise MirrorError(f"{folder} does not exist: give a mirror's folder (`tooluse-datasets mirror ... "
                                  f"--out DIR` writes DIR/<source>)")
            # one still running would refuse to be run again beside it ("another build is writing")
            raise MirrorError(f"{folder} does not exist: a build of it " + (
                "is running now: use it when it is done" if build_running(staged) else
                f"stopped before it was done ({staged.name} holds it): run the build again to finish it"))
        mirror = enclosing_mirror(folder)
        if mirror is not None:
            raise MirrorError(f"{folder} is not a mirror but a folder inside the mirror {mirror}: give that folder")
        raise MirrorError(f"{folder} is not a mirror: {MANIFEST_NAME} is missing "
                          f"(build one with `tooluse-datasets mirror`)")
    try:
        return Manifest.from_json(path.read_text(encoding="utf-8"))
    except (MirrorError, ValueError, TypeError, KeyError, AttributeError) as exc:
        # Cut short (a copy that stopped), edited by hand, or written by another version of the package.
        reason = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0] if str(exc) \
            else type(exc).__name__
        raise MirrorError(f"{path} cannot be read as a mirror manifest ({type(exc).__name__}: {reason}): "
                          f"rebuild the mirror with `tooluse-datasets mirror`") from exc


def enclosing_mirror(folder: str | Path) -> Optional[Path]:
    """The mirror ``folder`` lies inside (one of its config folders, say), if any."""
    return next((parent for parent in Path(os.path.abspath(folder)).parents if (parent / MANIFEST_NAME).is_file()),
                None)


def write_manifest(folder: Path, manifest: Manifest) -> None:
    (folder / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")


def mirror_files(folder: str | Path) -> list[str]:
    """Every file of a mirror folder as posix paths relative to it, in a stable order."""
    root = Path(folder)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
