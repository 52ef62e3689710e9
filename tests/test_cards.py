"""Generated dataset cards: valid YAML + Markdown that huggingface_hub and datasets parse back; statistics,
examples and provenance that match the data (recomputed here independently); merging keeps user content."""
from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import pytest
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

import tooluse_datasets as td
from tooluse_datasets.dataset_card import (BEGIN_MARKER, END_MARKER, merge_cards, render_card, size_category,
                                           split_front_matter)
from tooluse_datasets.mirror import MirrorRequest, ParquetLayout, build_mirror, read_manifest, shorten
from tooluse_datasets.registry import builder_class

from mirror_support import build_sample_mirror, reference_rows

REPO = "acme/nestful-tooluse"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Path:
    return build_sample_mirror("nestful", tmp_path_factory.mktemp("cards"), configs=["unified", "raw"], repo_id=REPO)


@pytest.fixture(scope="module")
def card(mirror) -> DatasetCard:
    return DatasetCard.load(mirror / "README.md")


@pytest.fixture(scope="module")
def unified_rows(tmp_path_factory) -> list[dict]:
    return reference_rows("nestful", "unified", "train", str(tmp_path_factory.mktemp("cache")))


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    body_start = text.index(f"\n{heading}\n") + len(heading) + 2
    nxt = re.search(rf"\n#{{1,{level}}} ", text[body_start:])
    return text[body_start: body_start + nxt.start()] if nxt else text[body_start:]


# -- metadata --------------------------------------------------------------------------------------------


def test_card_yaml_round_trips_through_datasets_helpers(card, mirror):
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    assert list(configs) == ["raw", "unified"]
    assert configs.get_default_config_name() == "unified"
    assert sum(1 for c in configs.values() if c.get("default")) == 1
    for name, config in configs.items():
        assert config["data_files"] == [{"split": "train", "path": f"{name}/train-*"}]
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    manifest = read_manifest(mirror)
    for name in ("raw", "unified"):
        assert infos[name].features.to_dict() == td.features("nestful", name).to_dict()
        assert infos[name].splits["train"].num_examples == 5
        assert infos[name].download_size == sum(f.num_bytes for f in manifest.files if f.path.startswith(name + "/"))
    # and written back by the same helpers, the YAML is unchanged
    rewritten = DatasetCardData()
    infos.to_dataset_card_data(rewritten)
    configs.to_dataset_card_data(rewritten)
    assert rewritten["dataset_info"] == card.data["dataset_info"]
    assert rewritten["configs"] == card.data["configs"]


def test_card_yaml_declares_json_dtypes(card):
    unified = next(i for i in card.data["dataset_info"] if i["config_name"] == "unified")
    features = {f["name"]: f for f in unified["features"]}
    assert features["tools"] == {"name": "tools", "list": "json"}
    assert features["meta"] == {"name": "meta", "dtype": "json"}


def test_card_discovery_metadata(card):
    source = builder_class("nestful").SOURCE_CLASS
    assert card.data.license == source.upstream.license == "apache-2.0"
    assert card.data.pretty_name == "NESTFUL (tool-use mirror)"
    assert card.data.size_categories == ["n<1K"]
    assert card.data.task_categories == ["text-generation"]
    assert card.data.source_datasets == ["ibm-research/nestful"]
    assert card.data.language == ["en"]
    assert {"tool-use", "function-calling", "nestful", "benchmark"} <= set(card.data.tags)


@pytest.mark.parametrize("rows, label", [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (279_737, "100K<n<1M"),
                                         (10**6, "1M<n<10M")])
def test_size_categories(rows, label):
    assert size_category(rows) == label


def _label_bounds(label: str) -> tuple[float, float]:
    """``(lower, upper)`` row counts of a Hub size category label (``1K<n<10K``, ``n<1K``, ``n>1T``)."""
    scale = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
    number = lambda text: int(text[:-1]) * scale[text[-1]] if text[-1] in scale else int(text)
    if label.startswith("n<"):
        return 0, number(label[2:])
    if label.startswith("n>"):
        return number(label[2:]), float("inf")
    low, _, high = label.split("<")
    return number(low), number(high)


@pytest.mark.parametrize("rows", [10**k + d for k in range(3, 14) for d in (-1, 0)])
def test_the_size_category_holds_the_row_count(rows):
    low, high = _label_bounds(size_category(rows))
    assert low <= rows < high


# -- body --------------------------------------------------------------------------------------------------


def test_statistics_in_the_card_match_the_data(card, mirror, unified_rows):
    rows = unified_rows
    messages = [m for r in rows for m in r["messages"]]
    calls = [c for m in messages for c in m.get("tool_calls", [])]
    arg_sizes = [len(json.dumps(c["function"]["arguments"], separators=(",", ":"), ensure_ascii=False).encode())
                 for c in calls]
    roles: dict[str, int] = {}
    for m in messages:
        roles[m["role"]] = roles.get(m["role"], 0) + 1
    expected = {
        "rows": len(rows),
        "messages": len(messages),
        "messages_per_row": round(len(messages) / len(rows), 2),
        "tool_calls": len(calls),
        "tool_calls_per_row": round(len(calls) / len(rows), 2),
        "max_tool_calls_in_a_row": max(sum(len(m.get("tool_calls", [])) for m in r["messages"]) for r in rows),
        "distinct_tools_called": len({c["function"]["name"] for c in calls}),
        "tools_offered_per_row": round(sum(len(r["tools"]) for r in rows) / len(rows), 2),
        "mean_argument_bytes": round(sum(arg_sizes) / len(arg_sizes), 1),
        "max_argument_bytes": max(arg_sizes),
        "roles": dict(sorted(roles.items())),
    }
    assert expected["tool_calls"] > expected["rows"] > 0  # a sample where the numbers say something
    assert read_manifest(mirror).statistics == {"train": expected}
    e = expected
    role_text = ", ".join(f"{k} {v}" for k, v in e["roles"].items())
    line = (f"| train | {e['rows']} | {e['messages_per_row']} | {e['tool_calls']} | {e['tool_calls_per_row']} | "
            f"{e['max_tool_calls_in_a_row']} | {e['distinct_tools_called']} | {e['tools_offered_per_row']} | "
            f"{e['mean_argument_bytes']} / {e['max_argument_bytes']} | {role_text} |")
    assert line in _section(card.text, "## Statistics")


def test_validation_counts_in_the_card(card, unified_rows):
    for row in unified_rows:
        td.validate_unified(row)  # every sample row is valid, so the card must say 5 of 5
    section = _section(card.text, "### Validation")
    assert "| `unified` | train | 5 | 0 | – |" in section
    assert "| `raw` | train | 5 | 0 | – |" in section
    assert "- train: 5 of 5 unified rows pass validation; none has warnings." in section


def test_the_cards_validation_counts_are_those_validate_gives_warnings_included(tmp_path):
    """The card said its rows were checked with validate_unified (the structural rules) and that "114 of 155 rows
    pass validation", naming the error rules only: the build checks every rule, and the 10 rows with warnings
    went unmentioned. The words say what is checked, and each split's numbers are those `validate` reports."""
    from conftest import shared_data

    files = sorted(str(p) for p in shared_data("nestful", "data_v1", "non-executable").glob("*.json"))
    folder = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=files, on_error="skip",
                                        source_options={"data_version": "v1"}), tmp_path)
    section = _section(DatasetCard.load(folder / "README.md").text, "### Validation")
    assert "validate_unified" not in section and "every validation rule" in section
    result = td.validate("nestful", data_files=files, data_version="v1")
    assert sorted(result.splits) == ["glaive", "sgd"]
    for split, checked in result.splits.items():
        report = checked.rules.to_dict()
        assert report["warned"] > 0 and report["failed"] > 0  # data where both numbers say something
        errors = ", ".join(f"{rule} ×{n}" for rule, n in report["by_reason"].items())
        warnings = ", ".join(f"{rule} ×{n}" for rule, n in report["warnings"].items())
        assert (f"- {split}: {report['checked'] - report['failed']} of {report['checked']} unified rows pass "
                f"validation ({report['failed']} break an error rule: {errors}); {report['warned']} "
                f"{'has' if report['warned'] == 1 else 'have'} warnings ({warnings}).") in section


def test_a_skip_reason_naming_a_key_with_line_breaks_stays_on_its_line_of_the_card(tmp_path, capsys, caplog):
    """A skip reason names the field, which may hold a key of the data: the list of configs left out printed it
    as it was, so an argument named "arg_0\\n## Heading" started a heading of the card (and a carriage return, a
    line of a table)."""
    lines = Path(td.sample_files("nestful")["train"][0]).read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[0])
    bad["sample_id"] = "bad-1"
    bad["output"][1]["arguments"] = {"arg_0\n## Injected\r| x | y |": "$var_9.result$", "arg_1": 4}
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join([*lines, json.dumps(bad)]) + "\n", encoding="utf-8")
    folder = build_mirror(MirrorRequest("nestful", data_files=[str(path)], on_error="skip"), tmp_path / "out")
    text = (folder / "README.md").read_text(encoding="utf-8")
    reason = "UndefinedReferenceError:output[1].arguments.arg_0 ## Injected"
    assert f"- `toolmind`: 4 rows read, 4 skipped (" in text and f"| `unified` | train | 3 | 1 | {reason}" in text
    assert "toolmind" in read_manifest(folder).omitted_configs and f", {reason}" in text  # the list of left-out configs
    assert not [line for line in text.splitlines() if line.startswith(("## Injected", "| x"))]
    # the command's summary and log print the reason on one line too
    from tooluse_datasets.cli import main

    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="tooluse_datasets"):
        assert main(["mirror", "nestful", "--data-files", str(path), "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "  toolmind: omitted (4 rows read, 4 skipped (" in out and "arg_0\\u000a## Injected\\u000d| x | y |" in out
    assert not [line for line in out.splitlines() + caplog.text.splitlines() if line.startswith(("## Injected", "| x"))]
    assert "toolmind: no rows left" in caplog.text


def test_examples_in_the_card_are_the_first_rows(card, unified_rows, tmp_path):
    first = unified_rows[0]
    assert shorten(first) == first  # short sample rows: the card must show them unchanged
    blocks = re.findall(r"<summary><code>(\w+)</code></summary>\n\n```json\n(.*?)\n```", card.text, re.DOTALL)
    examples = {name: json.loads(block) for name, block in blocks}
    assert set(examples) == {"unified", "raw"}
    assert examples["unified"] == first
    assert examples["raw"] == reference_rows("nestful", "raw", "train", str(tmp_path))[0]


def test_shorten_cuts_long_strings_and_lists_and_says_so():
    value = {"s": "x" * 305, "l": list(range(8)), "n": {"deep": ["y" * 301]}, "k": 1.5}
    assert shorten(value) == {"s": "x" * 300 + "… [+5 chars]", "l": [0, 1, 2, 3, 4, 5, "… [+2 items]"],
                              "n": {"deep": ["y" * 300 + "… [+1 chars]"]}, "k": 1.5}


def test_loading_snippets_name_the_repo_and_configs(card):
    loading = _section(card.text, "## Loading")
    assert f'load_dataset("{REPO}", "unified", split="train")' in loading
    assert "streaming=True" in loading and "tooluse_datasets.exact(ds)" in loading
    assert "SFTTrainer" in loading  # TRL


def _swift_sft_loads(card_text: str, folder: Path, cache_dir: str) -> dict[str, int]:
    """Rows per split that the card's `swift sft` command trains on, read as ms-swift 4.6 reads them
    (swift.dataset.loader): `--dataset <repo>:<subset>`, the splits `--custom_dataset_info` registers for that
    repo, else `train` alone (an unregistered dataset's default), each through
    ``datasets.load_dataset(repo, subset, split=...)``; the repo is read from the local mirror."""
    import shlex

    from datasets import load_dataset

    section = _section(card_text, "### ms-swift")
    command = shlex.split(re.search(r"```bash\n(.*?)\n```", section, re.DOTALL).group(1).replace("\\\n", " "))
    options = {command[i]: command[i + 1] for i in range(len(command) - 1) if command[i].startswith("--")}
    repo, subset = options["--dataset"].split(":")
    registered = json.loads(options.get("--custom_dataset_info", "[]"))
    splits = next((info["split"] for info in registered if info["hf_dataset_id"] == repo), ["train"])
    return {split: len(load_dataset(str(folder), subset, split=split, cache_dir=cache_dir)) for split in splits}


@pytest.mark.parametrize("source", ["nestful", "toolmind"])
def test_the_swift_sft_snippet_trains_on_every_split_of_the_swift_config(source, tmp_path, cache_dir):
    """ms-swift reads only `train` of a dataset it does not know: ToolMind's splits (synthetic, xlam...) need
    naming, or `swift sft` stops at an unknown split."""
    repo = f"acme/{source}-tooluse"
    folder = build_sample_mirror(source, tmp_path, configs=["unified", "swift"], repo_id=repo)
    swift = read_manifest(folder).configs["swift"]
    assert _swift_sft_loads((folder / "README.md").read_text(), folder, cache_dir) == \
        {split: entry.num_examples for split, entry in swift.splits.items()}


def test_provenance_lists_every_input_with_its_sha256(card, mirror):
    prov = read_manifest(mirror).provenance
    section = _section(card.text, "## Provenance")
    files = td.sample_files("nestful")["train"]
    assert prov.origin == "sample" and len(prov.inputs) == len(files) == 2
    for path in files:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        name = f"tooluse_datasets.builders/nestful/dummy_data/{Path(path).name}"
        assert f"| `{name}` | `{digest}` | {Path(path).stat().st_size:,} |" in section
    assert "IBM/NESTFUL" in section and "fc2c4123e73500a56185a5fb354f05d1c8b4890c" in section
    assert f"tooluse-datasets {td.__version__}" in section


def test_schema_license_and_citation(card):
    source = builder_class("nestful").SOURCE_CLASS
    assert td.schema.schema_table() in card.text
    assert "`apache-2.0`" in _section(card.text, "## License")
    assert source.citation.strip() in _section(card.text, "## Citation")


def test_per_source_prose_front_matter_is_metadata_not_text():
    from importlib import resources

    text = (resources.files("tooluse_datasets.builders.nestful") / "card.md").read_text()
    meta, body = split_front_matter(text)
    assert meta["language"] == ["en"] and "---" not in body.splitlines()[0]


def test_a_nestful_v1_mirror_is_introduced_as_v1_not_as_the_current_data(tmp_path):
    """The prose comes from the card the build's options choose: a data_version=v1 mirror (300 samples in the
    splits executable, glaive and sgd) used to be introduced as v2's 1861 samples in a single split, train."""
    from conftest import shared_data

    files = sorted(str(p) for p in shared_data("nestful", "data_v1").glob("*/*.json"))
    folder = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=files, on_error="skip",
                                        source_options={"data_version": "v1"}), tmp_path)
    card = DatasetCard.load(folder / "README.md")
    prose = card.text.split(BEGIN_MARKER, 1)[1].split("## ", 1)[0]
    splits = list(read_manifest(folder).configs["unified"].splits)
    assert sorted(splits) == ["executable", "glaive", "sgd"]
    assert "NESTFUL v1" in prose and all(f"`{split}`" in prose for split in splits)
    assert "single split" not in prose
    assert card.data.pretty_name == "NESTFUL v1 (tool-use mirror)"
    # the headings name the data as pretty_name does (they said "NESTFUL", the current data's name)
    assert "\n# NESTFUL v1: tool-use data as Parquet\n" in card.text
    assert "This repository holds NESTFUL v1 converted by" in card.text
    manifest = read_manifest(folder)
    assert manifest.pretty_name == "NESTFUL v1"
    manifest.pretty_name = "NESTFUL"  # as a mirror built before recorded it: its card is rendered anew so too
    assert "\n# NESTFUL v1: tool-use data as Parquet\n" in render_card(manifest)
    # a v2 mirror keeps the card of the current data
    v2 = build_sample_mirror("nestful", tmp_path / "v2", configs=["unified"])
    v2_text = (v2 / "README.md").read_text()
    assert "1861 samples" in v2_text and "\n# NESTFUL: tool-use data as Parquet\n" in v2_text
    assert "pretty_name: NESTFUL (tool-use mirror)" in v2_text


def test_the_nestful_v1_prose_does_not_say_a_mirror_of_other_files_holds_the_upstream_samples(tmp_path):
    """The v1 prose said "This mirror holds NESTFUL v1, the 300 samples ..., read from the upstream data_v1/
    folder" whatever the mirror was built from: a mirror of one group's files (85 rows, one split) said so too. It
    describes the dataset, as the current data's prose does; the tables and the provenance say what the mirror holds."""
    from conftest import shared_data

    files = sorted(str(p) for p in shared_data("nestful", "data_v1", "executable").glob("*.json"))
    folder = build_mirror(MirrorRequest("nestful", configs=["unified"], data_files=files, on_error="skip",
                                        source_options={"data_version": "v1"}), tmp_path)
    manifest = read_manifest(folder)
    assert manifest.configs["unified"].num_examples == 85
    prose = (folder / "README.md").read_text().split(BEGIN_MARKER, 1)[1].split("## ", 1)[0]
    assert "This mirror holds" not in prose and "300 samples" in prose  # the dataset's size, not the mirror's
    assert "the tables below count them" not in prose  # this mirror skipped none of them


def test_a_mirror_of_data_files_given_per_split_names_them_instead_of_a_command_that_reads_one_split(tmp_path):
    """data_files={split: files} (Python) cannot be given on the command line: the card's rebuild command of a
    partial mirror listed every file after one --data-files, which builds a single train split, another mirror."""
    from conftest import shared_data

    english = str(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl"))
    others = [str(shared_data("ms_swift", name)) for name in ("agent_support_doc_examples_zh.jsonl",
                                                               "custom_dataset_doc_agent_rows_en.jsonl")]
    folder = build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files={"test": [english],
                                                                                      "train": others}), tmp_path)
    assert list(read_manifest(folder).configs["unified"].splits) == ["test", "train"]
    card = (folder / "README.md").read_text()
    assert "tooluse-datasets mirror ms_swift --data-files" not in card
    assert ("- The data files of each split (given per split in Python, as `data_files={split: files}`; "
            "`--data-files` reads its files as one split): `test`: `agent_support_doc_examples_en.jsonl`; `train`: "
            "`agent_support_doc_examples_zh.jsonl`, `custom_dataset_doc_agent_rows_en.jsonl`.") in card
    assert "- Built from part of the data (`--configs unified` of the data files above)." in card


def test_every_registered_source_has_prose():
    from importlib import resources

    from tooluse_datasets.registry import source_names

    missing = [s for s in source_names() if not (resources.files(f"tooluse_datasets.builders.{s}") / "card.md").is_file()]
    assert missing == []


# -- merging -----------------------------------------------------------------------------------------------


USER_CARD = f"""---
license: apache-2.0
tags:
- my-own-tag
my_team_key: keep me
---

## Our intro

Written by hand before the generated part.

{BEGIN_MARKER}
stale generated text that must go
{END_MARKER}

## Acknowledgements

Thanks, written by hand after the generated part.
"""


def test_merge_keeps_user_sections_and_metadata_and_replaces_the_generated_block(mirror):
    generated = render_card(read_manifest(mirror), REPO)
    merged = merge_cards(generated, USER_CARD)
    card = DatasetCard(merged)
    assert card.data["my_team_key"] == "keep me"
    assert "my-own-tag" in card.data.tags and "tool-use" in card.data.tags
    assert card.data["configs"] == DatasetCard(generated).data["configs"]
    assert "stale generated text" not in merged
    assert merged.index("## Our intro") < merged.index(BEGIN_MARKER) < merged.index(END_MARKER) \
        < merged.index("## Acknowledgements")
    block = generated[generated.index(BEGIN_MARKER):generated.index(END_MARKER)]
    assert block in merged
    assert merged.count(BEGIN_MARKER) == 1
    assert MetadataConfigs.from_dataset_card_data(card.data).get_default_config_name() == "unified"


def test_merge_is_idempotent(mirror):
    generated = render_card(read_manifest(mirror), REPO)
    once = merge_cards(generated, USER_CARD)
    assert merge_cards(generated, once) == once
    assert merge_cards(generated, generated) == generated
    assert merge_cards(generated, None) == generated


def test_a_card_without_markers_keeps_its_text_below_the_generated_block(mirror):
    generated = render_card(read_manifest(mirror), REPO)
    merged = merge_cards(generated, "---\nfoo: bar\n---\n# Hand-written card\n\nSome words.\n")
    assert DatasetCard(merged).data["foo"] == "bar"
    assert merged.index(END_MARKER) < merged.index("# Hand-written card")
    assert merge_cards(generated, merged) == merged


def test_a_license_given_with_the_mirror_replaces_the_upstream_one(tmp_path):
    folder = build_sample_mirror("nestful", tmp_path, configs=["raw"], license="cc-by-4.0")
    card = DatasetCard.load(folder / "README.md")
    assert card.data.license == "cc-by-4.0"
    license_section = _section(card.text, "## License")
    assert "`cc-by-4.0`" in license_section and "license of the upstream data" not in license_section


def _ms_swift_files() -> list[str]:
    from conftest import shared_data

    return sorted(str(path) for path in shared_data("ms_swift").glob("*.jsonl"))


@pytest.mark.parametrize("given, hub_id", [("MIT", "mit"), ("Apache-2.0", "apache-2.0"), ("CC-BY-4.0", "cc-by-4.0")])
def test_a_license_given_in_another_case_is_written_as_the_hubs_id(given, hub_id, tmp_path):
    """The Hub's license ids are lower case and it refuses a README with any other value at publish time:
    an SPDX spelling of one of them is the same license."""
    from tooluse_datasets.cli import main

    assert main(["mirror", "ms_swift", "--data-files", *_ms_swift_files(), "--license", given,
                 "--out", str(tmp_path)]) == 0
    card = DatasetCard.load(tmp_path / "ms_swift" / "README.md")
    assert card.data.license == hub_id and read_manifest(tmp_path / "ms_swift").license == hub_id
    assert f"`{hub_id}`, as given for the data files" in _section(card.text, "## License")


@pytest.mark.parametrize("given", ["Apache 2.0", "gpl-2.0-or-later", ""])
def test_a_license_the_hub_refuses_is_refused_before_anything_is_built(given, tmp_path, capsys):
    from tooluse_datasets.cli import main

    assert main(["mirror", "ms_swift", "--data-files", *_ms_swift_files(), "--license", given,
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"the license {given!r} (--license) is not an id the Hub accepts" in err and "other" in err
    assert not (tmp_path / "out").exists()


def test_the_card_states_the_source_options_the_mirror_was_built_with(tmp_path, monkeypatch):
    """Source options decide the rows (ToolMind's strict, NESTFUL's data_version, LLaMA-Factory's columns...): the
    manifest records them and the card states them, in the rebuild command of a partial mirror too; a local
    path by its name, so the mirror does not depend on where it was built."""
    mirror = build_sample_mirror("toolmind", tmp_path / "a", configs=["unified", "raw"],
                                 source_options={"strict": False, "shard_bytes": 3000})
    manifest = read_manifest(mirror)
    assert manifest.options == {"shard_bytes": 3000, "strict": False}
    text = (mirror / "README.md").read_text(encoding="utf-8")
    assert "source options `shard_bytes=3000`, `strict=false`" in text
    assert ("`tooluse-datasets mirror toolmind --sample --configs unified raw --option shard_bytes=3000 "
            "--option strict=false`") in text

    info = Path(__file__).parent / "data" / "llamafactory"
    monkeypatch.chdir(info.parent)
    options = {"dataset_info": "llamafactory", "dataset": "mllm_demo"}
    first = build_mirror(MirrorRequest("llamafactory", configs=["unified"], source_options=options), tmp_path / "b")
    # (relative to the folder the entry's files share, as the card names them: their folder here)
    assert read_manifest(first).options == {"dataset": "mllm_demo", "dataset_info": "."}
    assert "source options `dataset=mllm_demo`, `dataset_info=.`" in (first / "README.md").read_text()
    absolute = {**options, "dataset_info": str(info / "dataset_info.json")}
    second = build_mirror(MirrorRequest("llamafactory", configs=["unified"], source_options=absolute),
                          tmp_path / "c")
    assert read_manifest(second).options["dataset_info"] == "dataset_info.json"
    assert str(info) not in (second / "README.md").read_text()


def _rebuild_command(card_text: str) -> list[str]:
    import shlex

    match = re.search(r"Built from part of the data \(`tooluse-datasets (mirror [^`]+)`", card_text)
    assert match, "the card of a partial mirror gives the command that rebuilds it"
    return shlex.split(match.group(1))


def _data_files(folder: Path) -> dict[str, str]:
    return {f.path: f.sha256 for f in read_manifest(folder).files}


@pytest.mark.parametrize("origin", ["sample", "files"])
def test_the_rebuild_command_of_a_partial_mirror_rebuilds_it_from_the_same_input(origin, tmp_path, monkeypatch):
    """Run as the card gives it, the command rebuilds the same files: it reads the bundled sample or the data
    files the mirror was built from, never the upstream (which it would read without --sample/--data-files)."""
    from tooluse_datasets.cli import main

    (sample,) = td.sample_files("toolmind")["train"]
    if origin == "sample":
        # a Parquet layout of its own too: the same rows in other row groups and shards are other files
        first = build_sample_mirror("toolmind", tmp_path / "a", configs=["unified", "swift"], split="tau_train",
                                    layout=ParquetLayout(row_group_rows=1, shard_bytes=20_000))
        assert len(read_manifest(first).files) > 2
    else:
        folder = tmp_path / "input"
        folder.mkdir()
        (folder / "rows.parquet").write_bytes(Path(sample).read_bytes())
        monkeypatch.chdir(folder)
        first = build_mirror(MirrorRequest("toolmind", configs=["unified", "swift"], split="tau_train",
                                           data_files=["rows.parquet"]), tmp_path / "a")
    command = _rebuild_command((first / "README.md").read_text(encoding="utf-8"))
    assert main([*command, "--out", str(tmp_path / "b")]) == 0
    again = tmp_path / "b" / "toolmind"
    assert read_manifest(again).provenance.origin == origin
    assert _data_files(again) == _data_files(first)


def test_the_rebuild_command_names_the_data_files_in_the_order_they_were_read(tmp_path, monkeypatch):
    """Rows come in the order of the data files given: the command listed them sorted, so files given in
    another order were rebuilt with their rows in another order (other files, and a publish that is no no-op)."""
    from tooluse_datasets.cli import main

    monkeypatch.chdir(tmp_path)
    given = []
    for sample in reversed(td.sample_files("ms_swift")["train"]):  # alias_..., agent_...: not sorted
        given.append(Path(sample).name)
        Path(given[-1]).write_bytes(Path(sample).read_bytes())
    first = build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=given), tmp_path / "a")
    command = _rebuild_command((first / "README.md").read_text(encoding="utf-8"))
    assert command[command.index("--data-files") + 1:][:2] == given
    assert main([*command, "--out", str(tmp_path / "b")]) == 0
    assert _data_files(tmp_path / "b" / "ms_swift") == _data_files(first)


@pytest.mark.parametrize("given", ["folder", "file"])
def test_the_rebuild_command_of_a_mirror_of_a_dataset_info_entry_rebuilds_it(given, tmp_path, monkeypatch):
    """`--option dataset_info=/dir/x`: the card's rebuild command named it `dataset_info=x` (its name alone), which
    reads no entry wherever it is run. It is named relative to the folder the entry's files share (the folder the
    command is said to run in), so the command run there rebuilds the same files."""
    import shutil

    from tooluse_datasets.cli import main

    data = Path(__file__).parent / "data" / "llamafactory"
    root = tmp_path / "lf"
    (root / "rows").mkdir(parents=True)
    shutil.copy(data / "mllm_demo.json", root / "rows")
    entry = {**json.loads((data / "dataset_info.json").read_text())["mllm_demo"], "file_name": "rows/mllm_demo.json"}
    (root / "dataset_info.json").write_text(json.dumps({"mllm_demo": entry}))
    info = root if given == "folder" else root / "dataset_info.json"
    monkeypatch.chdir(tmp_path)
    assert main(["mirror", "llamafactory", "--option", f"dataset_info={info}", "--option", "dataset=mllm_demo",
                 "--configs", "unified", "--out", str(tmp_path / "a")]) == 0
    first = tmp_path / "a" / "llamafactory"
    text = (first / "README.md").read_text(encoding="utf-8")
    named = ".." if given == "folder" else "../dataset_info.json"
    assert read_manifest(first).options["dataset_info"] == named
    assert f"--option dataset_info={named}`, run in the folder the input files share" in text
    assert str(tmp_path) not in text
    monkeypatch.chdir(root / "rows")  # the folder the input files share
    assert main([*_rebuild_command(text), "--out", str(tmp_path / "b")]) == 0
    assert _data_files(tmp_path / "b" / "llamafactory") == _data_files(first)
    assert (tmp_path / "b" / "llamafactory" / "README.md").read_text(encoding="utf-8") == text


def test_the_rebuild_command_of_a_mirror_of_data_files_beside_a_dataset_info_entry_reads_those_files(
        tmp_path, monkeypatch):
    """`--data-files few.json --option dataset_info=..`: the build reads few.json (the entry gives its columns and
    tags), but the card's command left --data-files out, and so read the entry's own file_name: other rows."""
    import shutil

    from tooluse_datasets.cli import main

    data = Path(__file__).parent / "data" / "llamafactory"
    root = tmp_path / "lf"
    (root / "rows").mkdir(parents=True)
    shutil.copy(data / "mllm_demo.json", root / "rows")
    rows = json.loads((data / "mllm_demo.json").read_text(encoding="utf-8"))
    (root / "rows" / "few.json").write_text(json.dumps(rows[:1]), encoding="utf-8")
    entry = {**json.loads((data / "dataset_info.json").read_text())["mllm_demo"], "file_name": "rows/mllm_demo.json"}
    (root / "dataset_info.json").write_text(json.dumps({"mllm_demo": entry}))
    monkeypatch.chdir(root / "rows")
    assert main(["mirror", "llamafactory", "--data-files", "few.json", "--option", "dataset_info=..", "--option",
                 "dataset=mllm_demo", "--configs", "unified", "--out", str(tmp_path / "a")]) == 0
    first = tmp_path / "a" / "llamafactory"
    assert read_manifest(first).configs["unified"].num_examples == 1
    text = (first / "README.md").read_text(encoding="utf-8")
    assert main([*_rebuild_command(text), "--out", str(tmp_path / "b")]) == 0
    assert _data_files(tmp_path / "b" / "llamafactory") == _data_files(first)
    assert (tmp_path / "b" / "llamafactory" / "README.md").read_text(encoding="utf-8") == text


def test_a_path_option_beside_a_glob_is_named_relative_to_the_files_it_read(tmp_path, monkeypatch):
    """`--data-files '*/*.json' --option dataset_info=.` in lf/: the card names the files read (`a/x.json`,
    `b/y.json`) from lf/, the folder they share, but dataset_info was named relative to the glob's folder (`lf/*`),
    `..`, which the command run in lf/ reads from lf's parent."""
    import shutil

    from tooluse_datasets.cli import main

    data = Path(__file__).parent / "data" / "llamafactory"
    root = tmp_path / "lf"
    for folder, name in (("a", "x.json"), ("b", "y.json")):
        (root / folder).mkdir(parents=True)
        shutil.copy(data / "mllm_demo.json", root / folder / name)
    entry = json.loads((data / "dataset_info.json").read_text())["mllm_demo"]
    (root / "dataset_info.json").write_text(json.dumps({"mllm_demo": entry}))
    monkeypatch.chdir(root)
    assert main(["mirror", "llamafactory", "--data-files", "*/*.json", "--option", "dataset_info=.", "--option",
                 "dataset=mllm_demo", "--configs", "unified", "--out", str(tmp_path / "a")]) == 0
    first = tmp_path / "a" / "llamafactory"
    assert read_manifest(first).options["dataset_info"] == "."
    text = (first / "README.md").read_text(encoding="utf-8")
    assert main([*_rebuild_command(text), "--out", str(tmp_path / "b")]) == 0
    assert _data_files(tmp_path / "b" / "llamafactory") == _data_files(first)
    assert (tmp_path / "b" / "llamafactory" / "README.md").read_text(encoding="utf-8") == text


def test_a_path_option_beside_data_files_per_split_says_what_it_is_relative_to(tmp_path):
    """data_files={split: files} with dataset_info: the card has no command to run somewhere, only the options
    `dataset_info=..` "of the data files above", which did not say what `..` is relative to."""
    import shutil

    data = Path(__file__).parent / "data" / "llamafactory"
    root = tmp_path / "lf"
    for folder in ("a", "b"):
        (root / "rows" / folder).mkdir(parents=True)
        shutil.copy(data / "mllm_demo.json", root / "rows" / folder)
    entry = json.loads((data / "dataset_info.json").read_text())["mllm_demo"]
    (root / "dataset_info.json").write_text(json.dumps({"mllm_demo": entry}))
    files = {"train": [str(root / "rows" / "a" / "mllm_demo.json")],
             "test": [str(root / "rows" / "b" / "mllm_demo.json")]}
    folder = build_mirror(MirrorRequest("llamafactory", configs=["unified"], data_files=files,
                                        source_options={"dataset_info": str(root), "dataset": "mllm_demo"}),
                          tmp_path / "out")
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert "`train`: `a/mllm_demo.json`; `test`: `b/mllm_demo.json`" in text
    assert ("`dataset=mllm_demo`, `dataset_info=..` (`--option NAME=VALUE` of the mirror command; `dataset_info` "
            "relative to the folder the input files share)") in text


def test_the_rebuild_command_of_an_executed_nestful_mirror_reads_the_same_functions(tmp_path, monkeypatch):
    """`--option executable_functions=/dir/functions`: the manifest and card named the folder `functions` (its name
    alone), which the rebuild command, run in the folder the input files share, does not find. It is named relative
    to that folder, as dataset_info is, and the command run there rebuilds the same files (executed in the
    package's sandbox)."""
    import shutil

    from conftest import shared_data

    from tooluse_datasets.cli import main

    functions = shared_data("nestful", "data_v2", "executable_functions")
    (tmp_path / "rows").mkdir()
    for sample in td.sample_files("nestful")["train"]:
        shutil.copy(sample, tmp_path / "rows")
    (tmp_path / "functions").symlink_to(functions)
    monkeypatch.chdir(tmp_path / "rows")
    names = sorted(p.name for p in (tmp_path / "rows").iterdir())
    assert main(["mirror", "nestful", "--data-files", *names, "--option", "execute=true", "--option",
                 f"executable_functions={tmp_path / 'functions'}", "--configs", "unified",
                 "--out", str(tmp_path / "a")]) == 0
    first = tmp_path / "a" / "nestful"
    assert read_manifest(first).options["executable_functions"] == "../functions"
    text = (first / "README.md").read_text(encoding="utf-8")
    assert str(tmp_path) not in text
    assert main([*_rebuild_command(text), "--out", str(tmp_path / "b")]) == 0
    assert _data_files(tmp_path / "b" / "nestful") == _data_files(first)
    assert (tmp_path / "b" / "nestful" / "README.md").read_text(encoding="utf-8") == text


def test_a_path_option_beside_a_bundled_sample_is_named_alone_and_the_card_says_to_point_it(tmp_path, monkeypatch):
    """`--sample --option dataset_info=/dir/info`: the path was named relative to the package's sample folder
    (`../../../../dir/info`), a name of the build machine that the command, run anywhere, does not read. A sample's
    command runs in no given folder: the path is named by its last part, and the card says to point it at a copy."""
    from tooluse_datasets.cli import main

    info = tmp_path / "lf"
    info.mkdir()
    (info / "dataset_info.json").write_text(json.dumps({"s": {
        "file_name": "x.json", "formatting": "sharegpt", "columns": {"messages": "conversations", "tools": "tools"}}}))
    monkeypatch.chdir(tmp_path)
    assert main(["mirror", "llamafactory", "--sample", "--option", f"dataset_info={info}", "--option", "dataset=s",
                 "--configs", "unified", "--out", str(tmp_path / "a")]) == 0
    first = tmp_path / "a" / "llamafactory"
    assert read_manifest(first).options["dataset_info"] == "lf"
    text = (first / "README.md").read_text(encoding="utf-8")
    assert "`dataset_info` names a local path by its last part alone" in text
    assert "../" not in text and str(tmp_path).lstrip("/") not in text


@pytest.mark.parametrize("data_files", ["path", "list", "split: path", "split: list"])
def test_a_dataset_info_option_is_named_relative_to_the_data_files_however_they_are_given(data_files, tmp_path):
    """The data files beside a dataset_info entry, given as one path per split (`{"train": "/dir/rows/x.json"}`):
    the path's characters were taken for its files, and the manifest and card named the dataset_info folder by
    its absolute path without the leading slash (a name of this machine, which reads nothing elsewhere)."""
    import shutil

    data = Path(__file__).parent / "data" / "llamafactory"
    root = tmp_path / "lf"
    (root / "rows").mkdir(parents=True)
    rows = str(shutil.copy(data / "mllm_demo.json", root / "rows"))
    entry = {**json.loads((data / "dataset_info.json").read_text())["mllm_demo"], "file_name": "rows/mllm_demo.json"}
    (root / "dataset_info.json").write_text(json.dumps({"mllm_demo": entry}))
    given = {"path": rows, "list": [rows], "split: path": {"train": rows}, "split: list": {"train": [rows]}}
    folder = build_mirror(MirrorRequest("llamafactory", configs=["unified"], data_files=given[data_files],
                                        source_options={"dataset_info": str(root), "dataset": "mllm_demo"}),
                          tmp_path / "out")
    assert read_manifest(folder).options["dataset_info"] == ".."
    assert str(tmp_path).lstrip("/") not in (folder / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("yaml_text, key, kept", [
    ("tags:\n- team: search", "tags", {"team": "search"}),
    ("tags: 5", "tags", 5),
    ("language:\n- [en, fr]", "language", ["en", "fr"]),
    ("tags:\n- {2024: release, team: search}", "tags", {2024: "release", "team": "search"}),  # keys of two types
])
def test_a_hub_card_with_odd_values_under_merged_keys_is_merged_not_crashed_on(mirror, yaml_text, key, kept):
    """Keys whose lists are merged (tags, language...) can hold any YAML in a card edited on the Hub: a mapping or
    a nested list is kept as the user wrote it beside ours, instead of failing the publish on hashing it."""
    from tooluse_datasets.dataset_card import card_config_names

    generated = render_card(read_manifest(mirror), REPO)
    existing = f"---\n{yaml_text}\nconfigs:\n- config_name: [mine]\n  data_files: mine/*.csv\n---\n# Ours\n"
    merged = merge_cards(generated, existing)
    data = DatasetCard(merged).data.to_dict()
    assert kept in data[key] and data[key][0] == DatasetCard(generated).data.to_dict()[key][0]
    assert {"config_name": ["mine"], "data_files": "mine/*.csv"} in data["configs"]  # theirs, kept
    assert merge_cards(generated, merged) == merged
    assert card_config_names(existing) == []  # no config name that is text


def _examples(text: str) -> tuple[str, dict]:
    section = _section(text, "## Examples")
    blocks = re.findall(r"<code>(\w+)</code></summary>\n\n```json\n(.*?)\n```", section, flags=re.DOTALL)
    return " ".join(section.split("<details>")[0].split()), {name: json.loads(block) for name, block in blocks}


def test_the_examples_note_says_only_unified_leaves_null_keys_out(tmp_path):
    """The card's examples: unified's leave the null and empty message keys out (tooluse_datasets.exact), the
    other configurations' keep them (ms-swift's raw messages carry loss: null...), and the note says which."""
    mirror = build_sample_mirror("ms_swift", tmp_path / "a", configs=["unified", "raw"])
    note, examples = _examples((mirror / "README.md").read_text(encoding="utf-8"))
    assert all(None not in m.values() for m in examples["unified"]["messages"] if isinstance(m, dict))
    assert any(None in m.values() for m in examples["raw"]["messages"] if isinstance(m, dict))
    assert "in `unified`, the null and empty keys of messages" in note
    assert "the other configurations show every key" in note

    without_unified = build_sample_mirror("ms_swift", tmp_path / "b", configs=["raw"])
    note, examples = _examples((without_unified / "README.md").read_text(encoding="utf-8"))
    assert any(None in m.values() for m in examples["raw"]["messages"] if isinstance(m, dict))
    assert "left out" not in note


def test_the_json_columns_note_names_the_configs_that_have_json_columns(tmp_path):
    """The note on Json() features (datasets>=4.7, exact decoding) is about the configs that have JSON columns;
    a mirror of plain-text formats only (swift, llamafactory: tools as JSON text) has none, and no such note."""
    from datasets import Json

    def has_json(feature) -> bool:
        return isinstance(feature, Json) or any(map(has_json, getattr(feature, "values", lambda: [])())) or \
            has_json(getattr(feature, "feature", None)) if feature is not None else False

    plain = build_sample_mirror("ms_swift", tmp_path / "a", configs=["swift", "llamafactory"])
    manifest = read_manifest(plain)
    assert not any(has_json(f) for c in manifest.configs for f in manifest.features(c).values())
    loading = _section((plain / "README.md").read_text(encoding="utf-8"), "## Loading")
    assert "JSON columns" not in loading and "Json()" not in loading

    mixed = build_sample_mirror("ms_swift", tmp_path / "b", configs=["unified", "raw", "swift"])
    manifest = read_manifest(mixed)
    assert [c for c in manifest.configs if any(map(has_json, manifest.features(c).values()))] == ["unified", "raw"]
    loading = " ".join(_section((mixed / "README.md").read_text(encoding="utf-8"), "## Loading").split())
    assert "JSON columns (tool schemas, call arguments, `meta`) of `unified`, `raw` are stored as" in loading


def test_an_example_with_an_object_of_thousands_of_keys_is_cut_in_the_card(tmp_path):
    """A call whose arguments hold thousands of keys: the card shows the first ones and says how many more there
    are, instead of every key of the object in each configuration's example."""
    tools = json.dumps([{"type": "function", "function": {"name": "bulk", "description": "d",
                                                          "parameters": {"type": "object", "properties": {}}}}])
    arguments = {f"k{i}": i for i in range(5000)}
    row = {"tools": tools, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool_call", "content": json.dumps({"name": "bulk", "arguments": arguments})},
        {"role": "tool_response", "content": "ok"}, {"role": "assistant", "content": "done"}]}
    data = tmp_path / "bulk.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    mirror = build_mirror(MirrorRequest("ms_swift", configs=["unified"], data_files=[str(data)]), tmp_path / "out")
    _, examples = _examples((mirror / "README.md").read_text(encoding="utf-8"))
    shown = examples["unified"]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert list(shown)[:3] == ["k0", "k1", "k2"] and len(shown) < 100
    assert shown["…"] == f"[+{5000 - len(shown) + 1} keys]"
    assert (mirror / "README.md").stat().st_size < 30_000


def test_a_mirror_of_given_data_files_claims_no_language(tmp_path):
    """The per-source prose states the upstream's languages (ToolMind: en; ms-swift's examples: en, zh): a mirror
    of the user's own files, in whatever language, claims none, as it claims no upstream provenance or license."""
    (sample,) = td.sample_files("toolmind")["train"]
    upstream_card = DatasetCard.load(build_sample_mirror("toolmind", tmp_path / "a", configs=["raw"]) / "README.md")
    assert upstream_card.data.language == ["en"]
    data = tmp_path / "mine.parquet"
    data.write_bytes(Path(sample).read_bytes())
    for source, files in (("toolmind", [str(data)]), ("ms_swift", _ms_swift_files())):
        folder = build_mirror(MirrorRequest(source, configs=["raw"], data_files=files), tmp_path / source)
        card = DatasetCard.load(folder / "README.md")
        assert read_manifest(folder).provenance.origin == "files"
        assert card.data.language is None and "language" not in card.data.to_dict()
        assert card.data.license == "unknown" and "source_datasets" not in card.data.to_dict()


def test_the_rows_note_names_configs_holding_rows_the_statistics_leave_out(tmp_path):
    """A row that reads but does not convert to unified (a tool_call that is not JSON) is in `raw` and not in the
    statistics: the table shows raw with more rows than the statistics, and the note above it says why, where it
    used to say only that configurations hold fewer rows."""
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "tool_call", "content": "get_weather(city=Paris"},
                          {"role": "tool_response", "content": "ok"}, {"role": "assistant", "content": "done"}]},
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    mirror = build_mirror(MirrorRequest("ms_swift", configs=["unified", "raw"], data_files=[str(data)]), tmp_path / "o")
    manifest = read_manifest(mirror)
    assert manifest.statistics["train"]["rows"] == 1 and manifest.configs["raw"].splits["train"].num_examples == 2
    text = " ".join((mirror / "README.md").read_text(encoding="utf-8").split())
    assert ("`raw` also holds rows that could not be converted to the unified schema, which the statistics leave "
            "out") in text
    assert "| train | 1 | 1 | 2 |" in text

    plain = " ".join((build_sample_mirror("ms_swift", tmp_path / "s", configs=["unified", "raw"]) / "README.md")
                     .read_text(encoding="utf-8").split())
    assert "could not be converted to the unified schema" not in plain


def test_the_size_category_counts_the_largest_config(tmp_path):
    """1000 rows of which one does not convert to unified: unified (the default) holds 999, raw 1000, and the
    dataset's size category is the one of its 1000 rows."""
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    bad = {"messages": [{"role": "user", "content": "hi"}, {"role": "tool_call", "content": "get_weather(city=Paris"},
                        {"role": "tool_response", "content": "ok"}, {"role": "assistant", "content": "done"}]}
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [bad] + [good] * 999), encoding="utf-8")
    mirror = build_mirror(MirrorRequest("ms_swift", configs=["unified", "raw"], data_files=[str(data)]), tmp_path / "o")
    manifest = read_manifest(mirror)
    assert (manifest.configs["unified"].num_examples, manifest.configs["raw"].num_examples) == (999, 1000)
    assert DatasetCard.load(mirror / "README.md").data.size_categories == ["1K<n<10K"]


def test_the_schema_section_describes_only_the_configs_the_mirror_has(tmp_path):
    """A mirror without the unified config (--configs raw swift) has no `unified` schema table: the card's Schema
    section lists the repository's configurations, and a table for one it lacks reads as a config to load."""
    without = _section((build_sample_mirror("ms_swift", tmp_path / "a", configs=["raw", "swift"]) / "README.md")
                       .read_text(encoding="utf-8"), "## Schema")
    assert re.findall(r"^### `(\w+)`$", without, flags=re.MULTILINE) == ["raw", "swift"]
    assert td.schema.schema_table() not in without
    with_unified = _section((build_sample_mirror("ms_swift", tmp_path / "b", configs=["raw", "unified"]) / "README.md")
                            .read_text(encoding="utf-8"), "## Schema")
    assert re.findall(r"^### `(\w+)`$", with_unified, flags=re.MULTILINE) == ["unified", "raw"]
    assert td.schema.schema_table() in with_unified
