"""Dataset cards for mirrors: YAML metadata that ``datasets`` loads the mirror from, and prose rendered from
``cards/templates/dataset_card.md.j2`` with the per-source text in ``builders/<source>/card.md``.

Everything in the card is derived from the mirror's manifest (statistics, examples, provenance), so the card
never disagrees with the data and a rebuilt, unchanged mirror renders the same card byte for byte (no dates).

Re-publishing merges with the card already in the repo (:func:`merge_cards`): the generated prose sits
between two HTML comment markers and only that block is replaced; text outside it stays. Metadata keys
this package does not generate stay; list-valued keys users extend (``tags``, ``language``...) are
merged; ``configs`` and ``dataset_info`` describe files this package owns and are replaced.
"""
from __future__ import annotations

import hashlib
import re
from importlib import resources
from typing import Any, Iterable, Optional

import jinja2
import yaml
from datasets import DatasetInfo, Features, SplitDict, SplitInfo
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from . import registry
from .codec import dumps
from .exact_features import holds_json
from .mirror.manifest import README_NAME as README_FILE
from .mirror.manifest import Manifest, MirrorError, option_value_text
from .schema import schema_table

BEGIN_MARKER = ("<!-- BEGIN tooluse-datasets generated section: replaced on every publish; "
                "write your own text outside it -->")
END_MARKER = "<!-- END tooluse-datasets generated section -->"
PLACEHOLDER_REPO_ID = "<org>/<repo>"
TEMPLATE = "dataset_card.md.j2"
# List-valued metadata a user may extend: union of ours and theirs (ours first) instead of replacement.
MERGED_LIST_KEYS = ("tags", "task_categories", "task_ids", "language", "source_datasets")
# Metadata that describes the files of the mirror: always ours.
OWNED_KEYS = ("configs", "dataset_info")
BASE_TAGS = ["tool-use", "function-calling", "tool-calling", "agent", "tooluse-datasets"]
SIZE_CATEGORIES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                   (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
                   (10**10, "1B<n<10B"), (10**11, "10B<n<100B"), (10**12, "100B<n<1T")]

# The Hub's license ids: it refuses a commit whose README has another `license` ("license" must be one of ...).
# A license of one's own is `other` (with `license_name` and `license_link` in the card on the Hub).
HUB_LICENSES = (
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
    "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0",
    "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0",
    "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "cdla-sharing-1.0", "cdla-permissive-1.0",
    "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0", "etalab-2.0", "eupl-1.1", "eupl-1.2", "agpl-3.0",
    "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0", "isc", "h-research", "intel-research",
    "lppl-1.3c", "ms-pl", "apple-ascl", "apple-amlr", "mpl-2.0", "odc-by", "odbl", "openmdw-1.0", "openrail++",
    "osl-3.0", "postgresql", "ofl-1.1", "ncsa", "unlicense", "zlib", "pddl", "lgpl-lr", "deepfloyd-if-license",
    "fair-noncommercial-research-license", "llama2", "llama3", "llama3.1", "llama3.2", "llama3.3", "llama4",
    "grok2-community", "gemma", "unknown", "other",
)


def hub_license(value: str) -> str:
    """``value`` as the Hub's license id (its ids are lower case; the SPDX spelling ``MIT`` is ``mit``), checked
    before a mirror is built rather than refused by the Hub when it is published."""
    if value.strip().lower() in HUB_LICENSES:
        return value.strip().lower()
    raise MirrorError(f"the license {value!r} (--license) is not an id the Hub accepts (it refuses the card on publish): "
                      f"give one of {', '.join(HUB_LICENSES)}; for a license of your own, give 'other' and name "
                      f"it in the card on the Hub (license_name, license_link)")


# How a repo's address starts where a repo id was meant (a URL, an hf:// path, a type prefix): type, then the rest.
_REPO_ADDRESS = re.compile(r"^(?:(?:https?://[^/]+|hf:/)/)?(datasets|models|spaces)/(.*)$")


def repo_id_problem(repo_id: str, why_datasets: str) -> Optional[str]:
    """Why ``repo_id`` is not the id of a dataset repo the Hub takes, ``<org or user>/<name>`` (None if it is one):
    an address given for the id is named with the id to give, a model or Space address names a repo of another
    type (``why_datasets`` says why a dataset repo is meant), and a name the Hub refuses is named as
    huggingface_hub names it."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    address = _REPO_ADDRESS.match(repo_id)
    if address is not None:
        kind, rest = address.groups()
        if kind == "datasets":
            given = "/".join(rest.split("/")[:2])  # without a /tree/main or /blob/... after the id
            if given.count("/") != 1 or not all(given.split("/")):  # ('nestful' alone would be refused next)
                return f"repo id {repo_id!r} is an address naming no '<org or user>/<name>': give the dataset repo's id"
            return f"repo id {repo_id!r} is an address: give the dataset repo's id alone, {given!r}"
        return (f"repo id {repo_id!r} names a {kind[:-1]} repo: {why_datasets}; give '<org or user>/<name>' of a "
                f"dataset repo")
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts) or any(c.isspace() for c in repo_id):
        return f"repo id {repo_id!r} is not of the form '<org or user>/<name>'"
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        return f"repo id {repo_id!r} is not a name the Hub takes: {exc}"
    return None


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def render_card(manifest: Manifest, repo_id: Optional[str] = None) -> str:
    """The full README.md (YAML front matter + generated body) of a mirror, for ``repo_id``."""
    prose_meta, prose = source_prose(manifest.source, manifest.options)
    data = card_metadata(manifest, prose_meta)
    body = _template().render(**_template_context(manifest, repo_id or PLACEHOLDER_REPO_ID, prose, data))
    return _compose(data, f"{BEGIN_MARKER}\n{body.strip()}\n{END_MARKER}\n")


def generated_metadata(manifest: Manifest) -> dict:
    """The YAML metadata :func:`render_card` writes for ``manifest`` but ``configs``/``dataset_info`` (an earlier
    publish's manifest may hold features of a type this datasets does not know)."""
    return card_metadata(manifest, source_prose(manifest.source, manifest.options)[0], entries=False).to_dict()


def card_metadata(manifest: Manifest, prose_meta: Optional[dict] = None, entries: bool = True) -> DatasetCardData:
    """The card's YAML: license and discovery keys, plus (``entries``) ``configs``/``dataset_info`` written by
    datasets' own helpers so that ``load_dataset`` reads back exactly what it expects."""
    prose_meta = dict(prose_meta or {})
    up = manifest.provenance.upstream or {}
    prose_license = prose_meta.pop("license", None)
    license_ = manifest.license or prose_license or up.get("license") or "unknown"
    if manifest.provenance.origin == "files":
        # Data files given to the mirror command: the upstream's license, provenance and language are not theirs.
        up = {}
        license_ = manifest.license or "unknown"
        prose_meta.pop("source_datasets", None)
        prose_meta.pop("language", None)
    data = DatasetCardData(
        license=license_,
        pretty_name=prose_meta.pop("pretty_name", None) or f"{_pretty_name(manifest)} (tool-use mirror)",
        task_categories=_union(["text-generation"], prose_meta.pop("task_categories", [])),
        # the largest config: raw keeps rows that do not convert to the default unified
        size_categories=[size_category(max(entry.num_examples for entry in manifest.configs.values()))],
        source_datasets=prose_meta.pop("source_datasets", None) or _default_source_datasets(up),
        language=prose_meta.pop("language", None),
        tags=_union(BASE_TAGS + [manifest.source], prose_meta.pop("tags", [])),
        **prose_meta,
    )
    if not entries:
        return data
    DatasetInfosDict({name: _dataset_info(manifest, name) for name in manifest.configs}).to_dataset_card_data(data)
    MetadataConfigs({
        name: {"data_files": [{"split": split, "path": f"{name}/{split}-*"} for split in entry.splits],
               # datasets keys its cache of a local folder on the card's YAML (and the folder's name), not on
               # the files: naming their digest here makes a rebuilt mirror load its new rows, not the cached ones
               "description": f"{entry.description.removesuffix(' (default)')}; data files sha256 "
                              f"{_files_digest(manifest, name)}",
               **({"default": True} if name == manifest.default_config else {})}
        for name, entry in manifest.configs.items()
    }).to_dataset_card_data(data)
    return data


def _files_digest(manifest: Manifest, config: str) -> str:
    """sha256 of the paths and sha256s of a config's data files: changes whenever one of them does."""
    files = {f.path: f.sha256 for f in manifest.files}
    paths = sorted(p for split in manifest.configs[config].splits.values() for p in split.files)
    return hashlib.sha256("".join(f"{p} {files[p]}\n" for p in paths).encode()).hexdigest()


def _dataset_info(manifest: Manifest, config: str) -> DatasetInfo:
    entry = manifest.configs[config]
    splits = SplitDict()
    for name, split in entry.splits.items():
        splits.add(SplitInfo(name=name, num_bytes=split.num_bytes, num_examples=split.num_examples))
    files = {f.path: f.num_bytes for f in manifest.files}
    download = sum(files[p] for split in entry.splits.values() for p in split.files)
    return DatasetInfo(features=Features.from_dict(entry.features), splits=splits, download_size=download,
                       dataset_size=sum(s.num_bytes for s in entry.splits.values()), config_name=config)


def size_category(rows: int) -> str:
    for bound, label in SIZE_CATEGORIES:
        if rows < bound:
            return label
    return "n>1T"


def _default_source_datasets(upstream: dict) -> Optional[list[str]]:
    """The upstream Hub repo; other origins (GitHub, local files) have no Hub id, so the key is left out."""
    return [upstream["repo"]] if upstream.get("host") == "hf" else None


def _union(first: list, second: Any) -> list:
    """``first`` then the items of ``second`` it lacks. A card on the Hub can hold any YAML under a key (a
    mapping in ``tags``, whose keys may be of several types, a nested list in ``language``): such values are kept
    as they are, compared by equality, never hashed nor sorted (the lists are a few items long)."""
    if second is None:
        second = []
    elif not isinstance(second, list):
        second = [second]
    merged: list = []
    for value in [*first, *second]:
        if value not in merged:
            merged.append(value)
    return merged


def source_prose(source: str, options: Optional[dict] = None) -> tuple[dict, str]:
    """The source folder's ``card.md`` (or the card its ``options`` choose: NESTFUL v1's): optional YAML front
    matter (extra card metadata such as ``language`` or ``tags``) and the Markdown prose that introduces the
    source. Falls back to the source's description."""
    source_class = registry.builder_class(source).SOURCE_CLASS
    path = resources.files(registry.SOURCES[source]) / source_class.card_file(options or {})
    if not path.is_file():
        return {}, source_class.description
    meta, body = split_front_matter(path.read_text(encoding="utf-8"))
    return meta, body.strip()


def split_front_matter(text: str) -> tuple[dict, str]:
    match = re.match(r"^---\s*\n(.*?)\n---\s*\n?", text, flags=re.DOTALL)
    if not match:
        return {}, text
    meta = yaml.safe_load(match.group(1)) or {}
    if not isinstance(meta, dict):
        raise MirrorError(f"card front matter is not a mapping: {match.group(1)[:200]!r}")
    return meta, text[match.end():]


def _template() -> jinja2.Template:
    text = (resources.files("tooluse_datasets.cards") / "templates" / TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters["cell"] = markdown_cell
    env.filters["number"] = lambda n: f"{n:,}"
    env.filters["bytes"] = human_bytes
    return env.from_string(text)


def _template_context(manifest: Manifest, repo_id: str, prose: str, data: DatasetCardData) -> dict:
    default = manifest.default_config
    source = registry.builder_class(manifest.source).SOURCE_CLASS
    files = {f.path: f for f in manifest.files}
    configs = []
    for name, entry in manifest.configs.items():
        configs.append({
            "name": name,
            # the format's own description says "(default)" for unified: the table flags the mirror's default
            "description": entry.description.removesuffix(" (default)"),
            "default": name == default,
            "splits": [{"name": s, "rows": e.num_examples, "skipped": e.skipped["skipped"],
                        "reasons": e.skipped["by_reason"], "shards": len(e.files),
                        "download": sum(files[p].num_bytes for p in e.files)} for s, e in entry.splits.items()],
            "omitted_splits": [{"name": s, "rows": 0, "skipped": r["skipped"], "reasons": r["by_reason"]}
                               for s, r in entry.omitted_splits.items()],
            "rows": entry.num_examples,
            "download": sum(files[p].num_bytes for e in entry.splits.values() for p in e.files),
            "feature_types": feature_types(Features.from_dict(entry.features)),
            "example": dumps_pretty(entry.example),
        })
    return {
        "repo_id": repo_id,
        "pretty_name": _pretty_name(manifest),
        "source": manifest.source,
        "prose": prose,
        "default_config": default,
        "first_split": next(iter(manifest.configs[default].splits)),
        "configs": configs,
        "config_names": list(manifest.configs),
        # the note on Json() features and exact decoding concerns configs that have such columns
        "json_configs": [name for name in manifest.configs if any(map(holds_json, manifest.features(name).values()))],
        "omitted": manifest.omitted_configs,
        "schema_table": schema_table(),
        "statistics": manifest.statistics,
        "rows_by_config": {name: {s: e.num_examples for s, e in entry.splits.items()}
                           for name, entry in manifest.configs.items()},
        # configs with more rows than the statistics describe (rows that read, but do not convert to unified)
        "beyond_statistics": [name for name, entry in manifest.configs.items()
                              if any(e.num_examples > manifest.statistics.get(s, {}).get("rows", 0)
                                     for s, e in entry.splits.items())],
        "figures": [f.path for f in manifest.figures],
        "validation": manifest.validation,
        "provenance": manifest.provenance,
        "selection": manifest.selection,
        "selection_text": manifest.selection_text(),
        "input_text": input_arguments(manifest),
        "layout_text": layout_arguments(manifest),
        # local inputs are named relative to the folder they share (above), so the command runs there
        "input_local": any("://" not in i.name for i in manifest.provenance.inputs),
        # the command names local files (--data-files, or the dataset_info.json naming them) relative to that folder
        "run_where_inputs_are": manifest.provenance.origin == "files" and bool(input_arguments(manifest)
                                                                             or "dataset_info" in manifest.options),
        "options": [f"{name}={option_value_text(value)}" for name, value in manifest.options.items()],
        "options_text": manifest.options_text(),
        # local paths in the options: relative to the folder the input files share, or by their last part alone
        "paths_relative": manifest.local_path_options() if manifest.provenance.local_files_given() else [],
        "paths_named_alone": [] if manifest.provenance.local_files_given() else manifest.local_path_options(),
        "parquet": manifest.parquet,
        "license": data.license,
        "citation": source.citation.strip(),
        **_swift_snippet_context(manifest, repo_id),
    }


def _pretty_name(manifest: Manifest) -> str:
    """What the card calls the data: by the options the mirror was built with (NESTFUL v1), also for a manifest
    written before the source named the data by them."""
    return registry.builder_class(manifest.source).SOURCE_CLASS.pretty_name_for(manifest.options)


def input_arguments(manifest: Manifest) -> str:
    """The mirror command's arguments that read the input this mirror was built from, for the rebuild command
    of a partial mirror: without them the command would read the upstream at its pinned revision, other data
    than the sample, the data files or the revision the mirror was built from."""
    import shlex

    provenance = manifest.provenance
    if provenance.origin == "sample":
        return "--sample"
    if provenance.origin == "upstream":
        revision = (provenance.upstream or {}).get("revision")
        return f"--revision {shlex.quote(revision)}" if revision else ""
    # A LLaMA-Factory dataset_info entry's files are named too: data files given beside it are read instead of
    # the entry's file_name (which gives only the columns and tags then), and its file_name can be edited later.
    if provenance.split_inputs:
        return ""  # files given per split: --data-files would read them as one split (the card lists them)
    return "--data-files " + " ".join(shlex.quote(i.name) for i in provenance.inputs)


def layout_arguments(manifest: Manifest) -> str:
    """The mirror command's Parquet layout options where the mirror's differ from the defaults: the same rows
    in other row groups or shards are other files."""
    from .mirror.parts import ParquetLayout

    default = ParquetLayout()
    options = (("--row-group-rows", "row_group_rows"), ("--row-group-size", "row_group_bytes"),
               ("--max-shard-size", "shard_bytes"))
    return " ".join(f"{option} {manifest.parquet[key]}" for option, key in options
                    if key in manifest.parquet and manifest.parquet[key] != getattr(default, key))


def _swift_snippet_context(manifest: Manifest, repo_id: str) -> dict:
    """The splits of the ``swift`` config, and the ``--custom_dataset_info`` that names them: ms-swift loads only
    the ``train`` split of a dataset it has not registered, so a mirror without one needs its splits named."""
    import json

    splits = list(manifest.configs["swift"].splits) if "swift" in manifest.configs else []
    info = [{"hf_dataset_id": repo_id, "split": splits}]
    return {"swift_splits": splits, "swift_dataset_info": json.dumps(info, ensure_ascii=False)}


def feature_types(features: Features) -> list[tuple[str, str]]:
    """``[(column, compact type)]``: ``list<struct<role: string, …>>``, ``json`` for Json leaves."""
    return [(name, _type_name(feature)) for name, feature in features.items()]


def _type_name(feature: Any) -> str:
    from datasets import Json, LargeList, List, Value

    if isinstance(feature, Json):
        return "json"
    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, (List, LargeList)):
        return f"list<{_type_name(feature.feature)}>"
    if isinstance(feature, dict):
        return "struct<" + ", ".join(f"{k}: {_type_name(v)}" for k, v in feature.items()) + ">"
    return type(feature).__name__


def markdown_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell or list item (no pipes or line breaks: a skip reason names a field,
    which may hold a key of the data, and a line break of its own would start a heading or a table row)."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def human_bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def dumps_pretty(value: Any) -> str:
    """Indented JSON of an example row, exact (the codec's text, re-indented without re-encoding floats)."""
    import json

    return json.dumps(json.loads(dumps(value)), indent=2, ensure_ascii=False) if value is not None else "null"


# --------------------------------------------------------------------------------------------------
# Composing and merging cards
# --------------------------------------------------------------------------------------------------


def _compose(data: DatasetCardData, body: str) -> str:
    # Normalised spacing, so that merging a card with itself gives it back byte for byte (no-op publishing).
    return f"---\n{data.to_yaml()}\n---\n\n{body.lstrip()}"


def merge_cards(generated: str, existing: Optional[str], *, previous_configs: Iterable[str] = (),
                previous_meta: Optional[dict] = None, notes: Optional[list[str]] = None) -> str:
    """The generated card merged into ``existing`` (the card already in the repo):

    * body: the generated block replaces the block between the markers in ``existing``; text before and
      after it stays. A card without markers keeps its whole text below the generated block.
    * metadata: keys only the user has stay; ``MERGED_LIST_KEYS`` become ours + theirs, where the items of
      ``previous_meta`` (the metadata an earlier publish of this mirror wrote) are ours, not theirs; every other
      key we generate (license, ...) is ours.
    * ``configs``/``dataset_info``: our entries, then the existing card's entries for configs that are not
      ours: neither one we generate now nor one of ``previous_configs`` (the configs an earlier publish of
      this mirror wrote, whose entries go with their files). A user's own config stays in the YAML.
    * an existing card whose YAML cannot be read (malformed, or not a mapping) contributes no metadata; its
      whole text, the unreadable block included, is kept as the user's text, and a note says so.
    * an existing card whose markers do not enclose one generated section (an end marker deleted while
      editing, say) is refused (:class:`CardMarkersError`): where the old generated text ends and the user's
      begins cannot be told, and guessing either keeps a stale generated section or drops the user's text.

    ``notes`` (if given) receives one line per thing the merge did that the user should know about.
    """
    notes = notes if notes is not None else []
    if not existing or not existing.strip():
        return generated
    check_generated_section(existing)
    new_card = DatasetCard(generated)
    old_meta, old_text = read_card_leniently(existing, notes)
    new_meta = new_card.data.to_dict()
    ours = set(previous_configs) | {e["config_name"] for e in _entries(new_meta.get("configs"))}
    merged = dict(old_meta)
    for key in MERGED_LIST_KEYS:
        # What an earlier publish wrote goes when this one no longer writes it (a mirror of data files claims no
        # upstream's source_datasets or language): only the items the user added are theirs to keep.
        written = _union([], (previous_meta or {}).get(key))
        if written and key in merged:  # (emptied in place: the keys keep their order, a no-op publish stays one)
            merged[key] = [item for item in _union([], merged[key]) if item not in written]
    for key, value in new_meta.items():
        if key in OWNED_KEYS:
            merged[key] = value
        elif key in MERGED_LIST_KEYS and merged.get(key):
            merged[key] = _union(value or [], merged[key])
        else:
            merged[key] = value
    for key in MERGED_LIST_KEYS:
        if merged.get(key) == [] and key not in new_meta:
            del merged[key]
    theirs_default = _keep_foreign_configs(merged, old_meta, ours, notes)
    block = _generated_block(new_card.text)
    if theirs_default is not None:  # the card's sentence naming our default would no longer be true
        ours_default = next((e["config_name"] for e in _entries(new_meta.get("configs")) if e.get("default")), None)
        block = block.replace(f"`{ours_default}` is the default.",
                              f"The repository's default config is `{theirs_default}`, which this mirror did not "
                              f"write: load this mirror's configs by name (`{ours_default}`, ...).")
        block = block.replace(f"| `{ours_default}` (default) |", f"| `{ours_default}` |")
    body = _merge_body(block, old_text)
    return _compose(DatasetCardData(**merged), body)


def read_card_leniently(text: str, notes: Optional[list[str]] = None) -> tuple[dict, str]:
    """``(metadata, text below the YAML)`` of a README; a YAML block that cannot be read gives no metadata,
    and the whole README (that block included) is returned as its text, with a note in ``notes``."""
    try:
        card = DatasetCard(text)
        return card.data.to_dict(), card.text
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if notes is not None:
            notes.append(f"{README_FILE}: its YAML metadata cannot be read ({type(exc).__name__}: {reason}); it "
                         f"is not merged (the metadata is the generated one), and the old README's whole text, "
                         f"that YAML block included, is kept below the generated section: move the keys you "
                         f"want back into the YAML")
        return {}, _fence_front_matter(text)


def _fence_front_matter(text: str) -> str:
    """The README with its unreadable front matter shown as a YAML code block (kept, but no longer front
    matter, and not read as Markdown headings)."""
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    match = REGEX_YAML_BLOCK.search(text)
    if not match:
        return text
    block = match.group(2)
    fence = "````" if "```" in block else "```"
    return (f"The YAML metadata below could not be read when this card was last published:\n\n"
            f"{fence}yaml\n{block}\n{fence}\n\n{text[match.end():]}")


def card_config_names(text: Optional[str]) -> list[str]:
    """The ``config_name`` of every ``configs`` entry in a README (none if its YAML cannot be read)."""
    if not text:
        return []
    meta, _ = read_card_leniently(text)
    return [e["config_name"] for e in _entries(meta.get("configs")) if isinstance(e["config_name"], str)]


def _entries(value: Any) -> list[dict]:
    """A ``configs``/``dataset_info`` value as a list of entries with a ``config_name`` (datasets writes a
    single config's ``dataset_info`` as one mapping, whose missing name means ``default``)."""
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    return [{"config_name": "default", **e} if "config_name" not in e else e for e in value if isinstance(e, dict)]


def _is_ours(entry: dict, ours: set) -> bool:
    # a config_name that is not text (a list, say, in a hand-edited card) names no config of ours: kept as theirs
    return isinstance(entry["config_name"], str) and entry["config_name"] in ours


def _is_default(entry: dict) -> bool:
    return entry.get("config_name") == "default" or bool(entry.get("default"))


def _keep_foreign_configs(merged: dict, old_meta: dict, ours: set, notes: list[str]) -> Optional[str]:
    """Append the existing card's ``configs``/``dataset_info`` entries that are not ours to ours. Only one
    config can be the default (datasets refuses two): if the user's is, ours gives the flag up, and the user's
    default config is returned."""
    foreign = [e for e in _entries(old_meta.get("configs")) if not _is_ours(e, ours)]
    theirs_default = None
    if foreign:
        own = _entries(merged.get("configs"))
        theirs_default = next((e["config_name"] for e in foreign if _is_default(e)), None)
        if theirs_default is not None and any(e.get("default") for e in own):
            own = [{k: v for k, v in e.items() if k != "default"} for e in own]
            notes.append(f"{README_FILE}: the repo's default config stays {theirs_default!r} (the user's); this "
                         f"mirror's configs load by name")
        else:
            theirs_default = None
        merged["configs"] = own + foreign
        notes.append(f"{README_FILE}: kept the configs that are not this mirror's: "
                     + ", ".join(repr(e["config_name"]) for e in foreign))
    foreign_infos = [e for e in _entries(old_meta.get("dataset_info")) if not _is_ours(e, ours)]
    if foreign_infos:
        merged["dataset_info"] = _entries(merged.get("dataset_info")) + foreign_infos
    return theirs_default


class CardMarkersError(MirrorError):
    """The card in the repo has a generated-section marker without its partner (or several sections): the
    merge cannot tell the old generated text from the user's."""


def check_generated_section(text: str) -> None:
    """Refuse a README whose generated-section markers do not enclose exactly one section (no marker at all is
    fine: the whole README is the user's). Line numbers count from the README's first line."""
    begins = [_line_of(text, m.start()) for m in re.finditer(re.escape(BEGIN_MARKER), text)]
    ends = [_line_of(text, m.start()) for m in re.finditer(re.escape(END_MARKER), text)]
    if not begins and not ends:
        return
    if len(begins) == 1 and len(ends) == 1 and ends[0] > begins[0]:
        return
    fix = (f"edit the {README_FILE} on the Hub so that one generated section is left, from the line {BEGIN_MARKER} "
           f"to the line {END_MARKER} (or delete the generated text, its markers included), then publish again; "
           f"nothing was published")
    if len(begins) == 1 and not ends:
        what = (f"has the start marker of the generated section (line {begins[0]}) but not its end marker, so "
                f"where the old generated text ends and your own text starts cannot be told (publishing would "
                f"keep the stale generated text or drop yours)")
        fix = (f"put the line {END_MARKER} back after the generated text in the {README_FILE} on the Hub (or "
               f"delete the generated text, its start marker included), then publish again; nothing was published")
    elif len(ends) == 1 and not begins:
        what = (f"has the end marker of the generated section (line {ends[0]}) but not its start marker, so "
                f"where your own text ends and the old generated text starts cannot be told")
        fix = (f"put the line {BEGIN_MARKER} back before the generated text in the {README_FILE} on the Hub (or "
               f"delete the generated text, its end marker included), then publish again; nothing was published")
    elif len(begins) == 1 and len(ends) == 1:
        what = f"has the end marker of the generated section (line {ends[0]}) before its start marker (line {begins[0]})"
    else:
        what = (f"has {len(begins)} start markers (lines {', '.join(map(str, begins)) or 'none'}) and {len(ends)} end "
                f"markers (lines {', '.join(map(str, ends)) or 'none'}) of the generated section, where one of each "
                f"is expected: an earlier generated section was left in it")
    raise CardMarkersError(f"the {README_FILE} in the repo {what}: {fix}")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _generated_block(text: str) -> str:
    start, end = text.find(BEGIN_MARKER), text.find(END_MARKER)
    if start < 0 or end < start:
        raise MirrorError("the generated card has no generated-section markers")
    return text[start:end + len(END_MARKER)]


def _merge_body(block: str, old_text: str) -> str:
    start, end = old_text.find(BEGIN_MARKER), old_text.find(END_MARKER)
    if start >= 0 and end > start:
        before, after = old_text[:start], old_text[end + len(END_MARKER):]
        return f"{before}{block}{after}" if after.endswith("\n") else f"{before}{block}{after}\n"
    user_text = old_text.strip()
    return f"{block}\n\n{user_text}\n" if user_text else f"{block}\n"
