"""Every source's ``export --format llamafactory`` through LLaMA-Factory 0.9.5 itself: its loader, sharegpt
converter and supervised encoding under real templates, run by ``benchmarks/llamafactory_check.py`` in
LLaMA-Factory's own environment (it pins ``datasets<=4.0``, which cannot share ours).

Optional: runs when ``LLAMAFACTORY_PYTHON`` names a Python with ``llamafactory==0.9.5`` installed, e.g.
``bash benchmarks/llamafactory_env.sh`` then ``LLAMAFACTORY_PYTHON=benchmarks/.venv-llamafactory/bin/python``;
skipped otherwise (too heavy for CI). ``tests/test_llamafactory.py`` checks the same rules without it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.registry import source_names

from conftest import PROJECT_ROOT, shared_data

DRIVER = PROJECT_ROOT / "benchmarks" / "llamafactory_check.py"
# Templates whose tool formatting takes every exported row: ReAct-style, Qwen 2.5, Qwen 3 (reasoning), Llama 3.
TOOL_TEMPLATES = ("default", "qwen", "qwen3", "llama3")
# LLaMA-Factory 0.9.5's own limits, one template each: Llama2Template-based templates (mistral, gemma, llama2...)
# do not hand the thought words to the function formatter, so a call turn with reasoning is not JSON to them;
# GLM-4's tool format refuses parallel calls.
LIMITED_TEMPLATES = {"mistral": "Invalid JSON format in function message",
                     "glm4": "GLM-4 does not support parallel functions"}
THINK_OPEN = "<think>\n"
LF_DATA = Path(__file__).parent / "data" / "llamafactory"  # LLaMA-Factory's own demo files and their entries
RESULT_SEPARATOR = "\n</tool_response>\n<tool_response>\n"


def llamafactory_python() -> str:
    python = os.environ.get("LLAMAFACTORY_PYTHON")
    if not python:
        pytest.skip("LLAMAFACTORY_PYTHON is not set (bash benchmarks/llamafactory_env.sh, then "
                    "LLAMAFACTORY_PYTHON=benchmarks/.venv-llamafactory/bin/python)")
    probe = subprocess.run([python, "-c", "from importlib.metadata import version; print(version('llamafactory'))"],
                           capture_output=True, text=True, check=False)
    if probe.returncode or probe.stdout.strip() != "0.9.5":
        pytest.skip(f"LLAMAFACTORY_PYTHON={python} has no llamafactory 0.9.5: "
                    f"{(probe.stdout + probe.stderr).strip()[-200:]}")
    return python


def run_driver(python: str, folder: Path, templates) -> tuple[int, dict[str, dict]]:
    done = subprocess.run([python, str(DRIVER), str(folder), "--templates", ",".join(templates)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.stdout.strip(), done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, {r["file"]: r for r in reports}


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """Every source's sample exported to one folder, then checked under every template in one driver run."""
    python = llamafactory_python()
    folder = tmp_path_factory.mktemp("llamafactory-export")
    for source in source_names():
        assert main(["export", source, "--sample", "--format", "llamafactory", "--out", str(folder),
                     "--on-error", "skip"]) == 0
    _, reports = run_driver(python, folder, (*TOOL_TEMPLATES, *LIMITED_TEMPLATES))
    return folder, reports


def exported_rows(folder: Path, source: str) -> dict[str, list[dict]]:
    return {path.name: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            for path in sorted(folder.glob(f"{source}-llamafactory-*.jsonl"))}


def calls_in(value: str) -> list:
    if value.startswith(THINK_OPEN):
        value = value.split("\n</think>\n\n", 1)[1]
    parsed = json.loads(value)
    return parsed if isinstance(parsed, list) else [parsed]


def expected_counts(rows: list[dict]) -> dict[str, int]:
    turns = [t for row in rows for t in row["conversations"]]
    return {"calls": sum(len(calls_in(t["value"])) for t in turns if t["from"] == "function_call"),
            "observations": sum(t["from"] == "observation" for t in turns),
            "answers": sum(t["from"] == "gpt" for t in turns)}


def has_media(row: dict) -> bool:
    return any(row.get(column) for column in ("images", "videos", "audios"))


@pytest.mark.parametrize("source", source_names())
def test_llamafactory_loads_converts_and_encodes_every_exported_row_intact(checked, source):
    folder, reports = checked
    files = exported_rows(folder, source)
    unified = sum(1 for ds in td.load(source, data_files=td.sample_files(source), streaming=True).values()
                  for _ in ds)
    written = sum(len(rows) for rows in files.values())
    # What the writer refuses is reported by export (tests/test_llamafactory.py checks the reasons), never dropped.
    assert unified - written == {"ms_swift": 2}.get(source, 0)
    assert files
    for name, rows in files.items():
        report = reports[name]
        assert report["rows_in_file"] == report["rows_loaded"] == report["rows_converted"] == len(rows), report
        assert report["converter_rejected"] == []
        media = [i for i, row in enumerate(rows) if has_media(row)]
        text = [row for row in rows if not has_media(row)]
        for template in TOOL_TEMPLATES:
            outcome = report["templates"][template]
            assert outcome["failed"] == {} and outcome["altered"] == {}, (template, outcome)
            assert outcome["needs_vision"] == media  # LLaMA-Factory refuses images under a text template
            assert outcome["rows_encoded"] == len(text)
            for what, count in expected_counts(text).items():
                assert outcome[what] == outcome[f"{what}_intact"] == count, (template, what)
            # The tool catalog: whole (as JSON, NESTFUL's output_parameters included) where the template writes
            # tools as JSON; LLaMA-Factory's default ReAct prompt prints a summary of each (names, descriptions,
            # parameters' types), so no tool is there whole.
            tools = sum(len(json.loads(row["tools"])) for row in text if row["tools"])
            assert outcome["tools"] == tools
            assert outcome["tools_whole"] == (0 if template == "default" else tools), template
        if media:
            vision = report["templates"]["llava"]
            assert vision["ok"] and vision["rows_encoded"] == len(media), vision
            assert vision["calls_intact"] == expected_counts([rows[i] for i in media])["calls"]
        else:
            assert "llava" not in report["templates"]


@pytest.mark.parametrize("template, reason", LIMITED_TEMPLATES.items())
def test_template_limits_of_llamafactory_are_the_only_failures(checked, template, reason):
    folder, reports = checked
    failed_somewhere = False
    for source in source_names():
        for name, rows in exported_rows(folder, source).items():
            outcome = reports[name]["templates"][template]
            assert outcome["altered"] == {}
            for i, row in enumerate(rows):
                calls = [t["value"] for t in row["conversations"] if t["from"] == "function_call"]
                limited = (any(v.startswith(THINK_OPEN) for v in calls) if template == "mistral"
                           else any(len(calls_in(v)) > 1 for v in calls))
                if has_media(row):
                    assert i in outcome["needs_vision"] or str(i) in outcome["failed"]
                elif limited:
                    assert reason in outcome["failed"][str(i)], (name, i)
                    failed_somewhere = True
                else:
                    assert str(i) not in outcome["failed"], (name, i, outcome["failed"].get(str(i)))
    assert failed_somewhere  # the samples do exercise the limit


def test_the_check_reports_rows_llamafactory_drops_or_alters(tmp_path):
    """A control: rows LLaMA-Factory drops (roles out of alternation) or double-encodes (string arguments)."""
    python = llamafactory_python()
    call = {"from": "function_call", "value": json.dumps({"name": "f", "arguments": '{"x": 0.1}'})}
    rows = [{"conversations": [{"from": "human", "value": "a"}, {"from": "human", "value": "b"}], "tools": ""},
            {"conversations": [{"from": "human", "value": "a"}, call, {"from": "observation", "value": "r"},
                               {"from": "gpt", "value": "done"}], "tools": ""}]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    entry = {"file_name": "bad.jsonl", "formatting": "sharegpt",
             "columns": {"messages": "conversations", "tools": "tools"}}
    (tmp_path / "dataset_info.json").write_text(json.dumps({"bad": entry}))
    returncode, reports = run_driver(python, tmp_path, ["qwen"])
    report = reports["bad.jsonl"]
    assert returncode == 1 and not report["ok"]
    assert report["rows_loaded"] == 2 and report["converter_rejected"] == [0]
    qwen = report["templates"]["qwen"]
    assert qwen["rows_encoded"] == 1 and "dropped" in qwen["failed"]["0"]
    assert qwen["altered"] == {"1": ["conversations[1] call 0 (f) not found with exact arguments"]}


def converted_by_llamafactory(python: str, folder: Path) -> dict[str, list[dict]]:
    """Every entry of ``folder/dataset_info.json`` as LLaMA-Factory's loader and sharegpt converter give it."""
    done = subprocess.run([python, str(DRIVER), str(folder), "--aligned"], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
    return {report["entry"]: report["rows"] for report in map(json.loads, done.stdout.splitlines())}


def as_converted(row: dict) -> dict:
    """A unified row as LLaMA-Factory's converter would give the file it was read from (no reasoning in these
    files): calls as (name, arguments), the results of a call group as one observation."""
    messages = row["messages"]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    turns: list = []
    for m in messages[1 if system else 0:]:
        assert m.get("reasoning_content") is None
        if m["role"] == "tool" and turns[-1][0] == "observation" and turns[-1][2]:
            turns[-1] = ("observation", turns[-1][1] + RESULT_SEPARATOR + m["content"], True)
        elif m["role"] == "tool":
            turns.append(("observation", m["content"], True))
        elif m.get("tool_calls"):
            turns.append(("function", [(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]]))
        else:
            turns.append((m["role"], m["content"]))
    return {"turns": [t[:2] for t in turns], "system": system, "tools": [t["function"]["name"] for t in row["tools"]],
            **{c: row.get(c) or None for c in ("images", "videos", "audios")}}


def llamafactory_reading(aligned: dict) -> dict:
    turns = []
    for m in aligned["_prompt"] + aligned["_response"]:
        if m["role"] == "function":
            calls = json.loads(m["content"])
            turns.append(("function", [(c["name"], c["arguments"]) for c in (calls if isinstance(calls, list)
                                                                               else [calls])]))
        else:
            turns.append((m["role"], m["content"]))
    tools = json.loads(aligned["_tools"]) if aligned["_tools"] else []
    return {"turns": turns, "system": aligned["_system"] or "",
            "tools": [t["function"]["name"] if t.get("type") == "function" else t["name"] for t in tools],
            "images": aligned["_images"], "videos": aligned["_videos"], "audios": aligned["_audios"]}


def test_entries_with_their_own_columns_and_tags_read_as_llamafactory_reads_them(tmp_path):
    """LLaMA-Factory's own demo entries (glaive tool calls, mllm_demo with messages/role/content and images) and the
    glaive rows in OpenAI-style spelling: what the source reads from each entry is what LLaMA-Factory's converter
    reads, turn for turn and call for call, and the export of those rows (default names) converts to the same
    rows as the original file does."""
    python = llamafactory_python()
    folder = tmp_path / "data"
    shutil.copytree(LF_DATA, folder)
    entries = json.loads((folder / "dataset_info.json").read_text())
    info = dict(entries)
    unified = {}
    for name in entries:
        unified[name] = list(td.load("llamafactory", dataset_info=str(folder), dataset=name, split="train",
                                     streaming=True))
        out = tmp_path / f"export-{name}"
        assert main(["export", "llamafactory", "--option", f"dataset_info={folder}", "--option", f"dataset={name}",
                     "--format", "llamafactory", "--out", str(out)]) == 0
        (entry,) = json.loads((out / "dataset_info.json").read_text()).values()
        shutil.copy(out / entry["file_name"], folder / f"{name}-export.jsonl")
        info[f"{name}-export"] = {**entry, "file_name": f"{name}-export.jsonl"}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    converted = converted_by_llamafactory(python, folder)
    for name in entries:
        rows = converted[name]
        assert len(rows) == len(unified[name]) > 0, name
        assert all(r["_prompt"] and r["_response"] for r in rows), name  # the converter dropped none
        assert [llamafactory_reading(r) for r in rows] == [as_converted(r) for r in unified[name]], name
        assert converted[f"{name}-export"] == rows, name
    calls = sum(len(t[1]) for r in unified["glaive_toolcall_openai_style"] for t in as_converted(r)["turns"]
                if t[0] == "function")
    assert calls > 5 and any(r["images"] for r in unified["mllm_demo"])


def test_a_sliced_split_of_an_entry_reads_as_llamafactory_trains_it(tmp_path):
    """An entry's ``split: "train[:3]"``: LLaMA-Factory converts only those rows of the file, and ``load()`` with
    that split reads the same ones (without it, every row, with a warning)."""
    python = llamafactory_python()
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(LF_DATA / "glaive_toolcall_en_demo.json", folder)
    entry = json.loads((LF_DATA / "dataset_info.json").read_text())["glaive_toolcall_en_demo"]
    (folder / "dataset_info.json").write_text(json.dumps({"sliced": {**entry, "split": "train[:3]"}}))
    rows = converted_by_llamafactory(python, folder)["sliced"]
    read = td.exact(td.load("llamafactory", dataset_info=str(folder), dataset="sliced", split="train[:3]",
                            cache_dir=str(tmp_path / "cache")))
    assert len(rows) == 3
    assert [llamafactory_reading(r) for r in rows] == [as_converted(r) for r in read]


def test_a_falsy_items_in_a_tool_parameter_trains_and_is_written_back_as_it_is(tmp_path):
    """LLaMA-Factory's default tool prompt skips a falsy ``items`` (``[]``, ``false``): it loads, converts and encodes
    such rows with every call intact; the source reads them and writes them back byte for byte."""
    python = llamafactory_python()
    demo = json.loads((LF_DATA / "glaive_toolcall_en_demo.json").read_text())
    native = next(row for row in demo if '"items"' in row["tools"])
    rows = []
    for items in ([], False):
        tools = json.loads(native["tools"])
        for tool in tools:
            for spec in tool["parameters"]["properties"].values():
                if "items" in spec:
                    spec["items"] = items
        rows.append({**native, "tools": json.dumps(tools)})
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    written = list(td.load("llamafactory", "llamafactory", data_files=str(folder / "items.jsonl"), split="train",
                           streaming=True))
    assert [(w["conversations"], w["tools"]) for w in written] == [(r["conversations"], r["tools"]) for r in rows]
    (folder / "dataset_info.json").write_text(json.dumps({"items": {
        "file_name": "items.jsonl", "formatting": "sharegpt", "columns": {"messages": "conversations", "tools": "tools"}}}))
    returncode, reports = run_driver(python, folder, TOOL_TEMPLATES)
    report = reports["items.jsonl"]
    assert returncode == 0 and report["ok"] and report["converter_rejected"] == []
    for template in TOOL_TEMPLATES:
        outcome = report["templates"][template]
        assert outcome["failed"] == {} and outcome["altered"] == {} and outcome["rows_encoded"] == len(rows)
        assert outcome["calls"] == outcome["calls_intact"] == expected_counts(rows)["calls"] > 0


def test_calls_spelled_in_tool_call_tags_are_read_exported_and_trained_intact(tmp_path):
    """LLaMA-Factory's glaive demo with each function_call spelled Qwen's way (``<tool_call>\\n{...}\\n</tool_call>``,
    which its FunctionFormatter reads under every template's default tool_call_words): the source reads every row,
    the export writes them as spelled, and LLaMA-Factory loads, converts and encodes each with every call intact."""
    python = llamafactory_python()
    demo = json.loads((LF_DATA / "glaive_toolcall_en_demo.json").read_text())
    tagged = [{**row, "conversations": [
        {**turn, "value": f"<tool_call>\n{turn['value']}\n</tool_call>"} if turn["from"] == "function_call" else turn
        for turn in row["conversations"]]} for row in demo]
    source = tmp_path / "tagged.json"
    source.write_text(json.dumps(tagged))
    out = tmp_path / "export"
    assert main(["export", "llamafactory", "--data-files", str(source), "--format", "llamafactory",
                 "--out", str(out)]) == 0
    (entry,) = json.loads((out / "dataset_info.json").read_text()).values()
    written = [json.loads(line) for line in (out / entry["file_name"]).read_text().splitlines()]
    assert [row["conversations"] for row in written] == [row["conversations"] for row in tagged]
    returncode, reports = run_driver(python, out, TOOL_TEMPLATES)
    report = reports[entry["file_name"]]
    assert returncode == 0 and report["ok"] and report["converter_rejected"] == []
    for template in TOOL_TEMPLATES:
        outcome = report["templates"][template]
        assert outcome["failed"] == {} and outcome["altered"] == {} and outcome["rows_encoded"] == len(tagged)
        assert outcome["calls"] == outcome["calls_intact"] == expected_counts(demo)["calls"] > 5


def test_answers_quoting_the_tool_call_tags_are_trained_verbatim(tmp_path):
    """An answer, and its reasoning, holding literal ``<tool_call>`` tags (only a function_call value is parsed
    for calls): exported and encoded by LLaMA-Factory with every answer verbatim in its trained span."""
    python = llamafactory_python()
    demo = json.loads((LF_DATA / "glaive_toolcall_en_demo.json").read_text())
    quote = '<tool_call>{"name": "...", "arguments": {...}}</tool_call>'
    rows = [{**row, "conversations": [*row["conversations"][:-1], {
        "from": "gpt", "value": f"<think>\nQuoting {quote}\n</think>\n\n{row['conversations'][-1]['value']} {quote}"}]}
        for row in demo if row["conversations"][-1]["from"] == "gpt"]
    source = tmp_path / "quoting.json"
    source.write_text(json.dumps(rows))
    out = tmp_path / "export"
    assert main(["export", "llamafactory", "--data-files", str(source), "--format", "llamafactory",
                 "--out", str(out)]) == 0
    (entry,) = json.loads((out / "dataset_info.json").read_text()).values()
    returncode, reports = run_driver(python, out, TOOL_TEMPLATES)
    report = reports[entry["file_name"]]
    assert returncode == 0 and report["ok"] and report["rows_in_file"] == len(rows) > 5
    for template in TOOL_TEMPLATES:
        outcome = report["templates"][template]
        assert outcome["failed"] == {} and outcome["altered"] == {} and outcome["rows_encoded"] == len(rows)
        assert outcome["answers"] == outcome["answers_intact"] == expected_counts(rows)["answers"]


NESTFUL_V2 = [("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl"),
              ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl"),
              ("nestful", "third_party", "reconstructed_current_v2", "rows_hf_string_format.jsonl")]


def graphsyn_rows_file(folder: Path) -> str:
    """ToolMind's graph_syn rows (OpenAI messages under ``conversations``, as ms-swift reads them) as JSON Lines."""
    sample = json.loads(shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json").read_text())
    path = folder / "graphsyn.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in sample["rows"]), encoding="utf-8")
    return str(path)


def assert_every_row_and_call_intact(folder: Path, reports: dict, expected_rows: dict[str, int]) -> None:
    for name, count in expected_rows.items():
        rows = [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines()]
        report = reports[name]
        assert len(rows) == count and report["rows_loaded"] == report["rows_converted"] == count, report
        for template in TOOL_TEMPLATES:
            outcome = report["templates"][template]
            assert outcome["failed"] == {} and outcome["altered"] == {}, (name, template, outcome)
            assert outcome["rows_encoded"] == count
            for what, number in expected_counts(rows).items():
                assert outcome[what] == outcome[f"{what}_intact"] == number, (name, template, what)


def test_upstream_toolmind_graph_syn_and_nestful_v2_rows_train_with_every_call(tmp_path):
    """Rows the sample exports do not hold: ToolMind's graph_syn rows (read as ms-swift reads OpenAI messages;
    reasoning in call turns, a row ending on a call) and NESTFUL v2's upstream files (the toy file, the current
    GitHub and Hub spellings). Every row is written, and LLaMA-Factory loads, converts and encodes each with every
    call, observation and answer intact."""
    python = llamafactory_python()
    folder = tmp_path / "export"
    nestful = [str(shared_data(*parts)) for parts in NESTFUL_V2]
    read = {"ms_swift": sum(1 for _ in td.load("ms_swift", data_files=graphsyn_rows_file(tmp_path), split="train",
                                                streaming=True)),
            "nestful": sum(1 for _ in td.load("nestful", data_files=nestful, split="train", streaming=True))}
    assert read["ms_swift"] == 4 and read["nestful"] == 68
    assert main(["export", "ms_swift", "--data-files", str(tmp_path / "graphsyn.jsonl"), "--format", "llamafactory",
                 "--out", str(folder)]) == 0
    assert main(["export", "nestful", "--data-files", *nestful, "--format", "llamafactory", "--out", str(folder)]) == 0
    code, reports = run_driver(python, folder, TOOL_TEMPLATES)
    assert code == 0, reports
    assert_every_row_and_call_intact(folder, reports, {"ms_swift-llamafactory-train.jsonl": read["ms_swift"],
                                                       "nestful-llamafactory-train.jsonl": read["nestful"]})


def test_big_integers_negative_zero_and_escapes_in_calls_train_as_the_source_wrote_them(tmp_path):
    """Each source's row whose call passes integers beyond 64 bits, -0.0, 5e-324, escapes and nested objects
    (tests/tricky_values.py): LLaMA-Factory encodes every call with its arguments value for value."""
    from tricky_values import write_files

    python = llamafactory_python()
    by_source: dict[str, list[str]] = {}
    splits = {}
    for source, path, split in write_files(tmp_path / "rows"):
        by_source.setdefault(source, []).append(path)
        splits[source] = split
    assert set(by_source) == set(source_names())
    folder = tmp_path / "export"
    for source, paths in by_source.items():
        assert main(["export", source, "--data-files", *paths, "--format", "llamafactory", "--out", str(folder)]) == 0
    code, reports = run_driver(python, folder, TOOL_TEMPLATES)
    assert code == 0, reports
    assert_every_row_and_call_intact(folder, reports, {f"{source}-llamafactory-{splits[source]}.jsonl": len(paths)
                                                       for source, paths in by_source.items()})


def test_rows_ending_on_results_train_with_every_call_once_their_results_are_dropped(tmp_path):
    """ms-swift's documentation rows that end on a tool result: LLaMA-Factory drops such a row as written (an odd
    turn count), which is why the writer refuses it; after ``td.drop_trailing_results`` it ends on its call turn,
    and LLaMA-Factory loads, converts and encodes it with every call intact. So does it the file ``export
    --drop-trailing-results`` writes of the same rows (registered in the same dataset_info.json)."""
    from tooluse_datasets.builders.llamafactory.writer import dataset_info_entry, unified_to_llamafactory
    from tooluse_datasets.errors import ConversionError

    python = llamafactory_python()
    path = shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl")
    rows = [row for row in td.load("ms_swift", data_files=str(path), split="train", streaming=True,
                                   on_error="skip") if row["messages"][-1]["role"] == "tool"]
    written, as_they_end = [], []
    for row in rows:
        with pytest.raises(ConversionError):
            unified_to_llamafactory(row)
        try:
            written.append(unified_to_llamafactory(td.drop_trailing_results(row)))
        except ConversionError:
            continue  # refused for another reason (tests/test_llamafactory.py)
        # The row as LLaMA-Factory would get it without the helper: the same turns and the result after them.
        result = {"from": "observation", "value": row["messages"][-1]["content"]}
        as_they_end.append({**written[-1], "conversations": [*written[-1]["conversations"], result]})
    assert written
    for name, file_rows in (("trimmed", written), ("ending", as_they_end)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in file_rows))
    entries = {name: dataset_info_entry(f"{name}.jsonl", {"tools"}) for name in ("trimmed", "ending")}
    (tmp_path / "dataset_info.json").write_text(json.dumps(entries))
    assert main(["export", "ms_swift", "--data-files", str(path), "--format", "llamafactory",
                 "--drop-trailing-results", "--on-error", "skip", "--out", str(tmp_path)]) == 0
    exported = [json.loads(line) for line in (tmp_path / "ms_swift-llamafactory-train.jsonl").read_text().splitlines()]
    assert all(row in exported for row in json.loads(json.dumps(written)))
    _, reports = run_driver(python, tmp_path, TOOL_TEMPLATES)
    assert reports["ending.jsonl"]["converter_rejected"] == list(range(len(as_they_end)))
    assert_every_row_and_call_intact(tmp_path, reports, {"trimmed.jsonl": len(written)})
    report = reports["ms_swift-llamafactory-train.jsonl"]  # (its image row encodes under a vision template only)
    media = [i for i, row in enumerate(exported) if has_media(row)]
    assert report["rows_loaded"] == report["rows_converted"] == len(exported) and report["converter_rejected"] == []
    for template in TOOL_TEMPLATES:
        outcome = report["templates"][template]
        assert outcome["failed"] == {} and outcome["altered"] == {}, (template, outcome)
        assert outcome["needs_vision"] == media and outcome["rows_encoded"] == len(exported) - len(media)
        assert outcome["calls"] == outcome["calls_intact"] > 0
    assert not media or report["templates"]["llava"]["ok"]
