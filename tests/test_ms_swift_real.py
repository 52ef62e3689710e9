"""Every source's ``export --format swift`` read by ms-swift 4.6 itself: its ``load_dataset`` and automatic
preprocessor (what ``swift sft`` runs before tokenizing) and its ``Template.encode``, in ms-swift's own environment
(``benchmarks/swift_env.sh``; it pins ``datasets<4.8.5``, which cannot share ours), driven by
``benchmarks/swift_rows.py``.

Optional: runs when ``SWIFT_PYTHON`` names a Python with ``ms-swift`` 4.6 installed, e.g.
``SWIFT_PYTHON=benchmarks/.venv-swift/bin/python``; skipped otherwise (too heavy for CI).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.registry import source_names

from conftest import PROJECT_ROOT, shared_data

DRIVER = PROJECT_ROOT / "benchmarks" / "swift_rows.py"


def swift_python() -> str:
    python = os.environ.get("SWIFT_PYTHON")
    if not python:
        pytest.skip("SWIFT_PYTHON is not set (bash benchmarks/swift_env.sh, then "
                    "SWIFT_PYTHON=benchmarks/.venv-swift/bin/python)")
    if os.sep in python:  # a relative path is the caller's (the driver runs in the export's folder)
        python = os.path.abspath(python)
    probe = subprocess.run([python, "-c", "from importlib.metadata import version; print(version('ms-swift'))"],
                           capture_output=True, text=True, check=False)
    if probe.returncode or not probe.stdout.strip().startswith("4.6"):
        pytest.skip(f"SWIFT_PYTHON={python} has no ms-swift 4.6: {(probe.stdout + probe.stderr).strip()[-200:]}")
    return python


def swift_rows(python: str, path: Path, streaming: bool, *flags: str) -> list[dict]:
    done = subprocess.run([python, str(DRIVER), str(path), *flags] + (["--streaming"] if streaming else []),
                          capture_output=True, text=True, timeout=900, check=False, cwd=str(path.parent))
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, list[Path]]:
    python = swift_python()
    folder = tmp_path_factory.mktemp("swift-export")
    files = {}
    for source in source_names():
        assert main(["export", source, "--sample", "--format", "swift", "--out", str(folder)]) == 0
        files[source] = sorted(folder.glob(f"{source}-swift-*.jsonl"))
    return {"python": python, "files": files}


def plain(messages: list[dict]) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("source", source_names())
def test_ms_swift_preprocesses_every_exported_row_as_the_raw_config_reads_it(exported, source, streaming):
    """Nothing dropped, and each row's messages (roles, contents: calls, results, answers, reasoning, system),
    tools and media as ms-swift preprocesses them are the rows our ``raw`` config reads from the same file
    ("the rows as ms-swift sees them after its preprocessing")."""
    files = exported["files"][source]
    assert files
    for path in files:
        ours = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True))
        theirs = swift_rows(exported["python"], path, streaming)
        assert len(theirs) == len(ours) == sum(1 for _ in path.open(encoding="utf-8"))
        for i, (mine, swift) in enumerate(zip(ours, theirs)):
            assert plain(swift["messages"]) == plain(mine["messages"]), (path.name, i)
            for column in ("images", "audios", "videos"):
                assert swift[column] == mine[column], (path.name, i, column)
            if not streaming:
                # ms-swift's streaming reads tool schemas through an Arrow struct that pads and reorders their
                # keys beyond what its Template.encode cleans; map-style keeps them verbatim.
                assert (swift.get("tools") or []) == mine["tools"], (path.name, i)


def test_a_dpo_row_is_refused_where_ms_swift_finds_its_rejected_call_equal_to_the_chosen_one(tmp_path):
    """DPO rows built from the doc's OpenAI call (``content: null``), the chosen response that call and the rejected
    one a variant of it: ms-swift's ``TemplateInputs.from_dict`` (the first step of ``Template.encode``) fails on
    exactly the rows our reader refuses with a typed error naming ``rejected_response``, and no others."""
    python = swift_python()
    doc_row = json.loads(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text().splitlines()[0])
    user, call = doc_row["messages"][:2]

    def variant(content=None, arguments=None, name=True):
        rejected = json.loads(json.dumps(call))
        rejected["content"] = content
        function = rejected["tool_calls"][0]["function"]
        if arguments is not None:
            function["arguments"] = arguments
        if not name:
            del function["name"]
        return rejected

    variants = [variant(), variant(content=""), variant(arguments={"city": "Beijing"}),
                variant(content="I will check."), variant(arguments='{"city": "Paris"}'), variant(name=False),
                {"role": "assistant", "content": "Sunny"}]
    path = tmp_path / "dpo.jsonl"
    path.write_text("".join(json.dumps({"messages": [user, call], "rejected_response": [rejected]}) + "\n"
                            for rejected in variants))
    theirs = swift_rows(python, path, False, "--template-inputs")
    assert len(theirs) == len(variants)
    dropped_by_swift = [i for i, row in enumerate(theirs) if row["template_inputs_error"]]
    assert dropped_by_swift == [0, 1, 2, 5]  # the same call three ways, and a call without a name

    report = td.SkipReport()
    kept = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True,
                        on_error="skip", report=report))
    kept_rejected = [row["extra"]["rejected_response"][0] for row in kept]
    assert [i for i, v in enumerate(variants) if v not in kept_rejected] == dropped_by_swift
    assert report.by_reason == {"InvalidValueError:rejected_response": 3,
                                "InvalidValueError:rejected_response[0].tool_calls[0]": 1}


def test_a_dpo_row_whose_rejected_message_lacks_role_or_content_is_refused_where_ms_swift_drops_it(tmp_path):
    """ms-swift reads every rejected message's role, and the content of a one-message rejected response it compares
    with the chosen one: a KeyError in ``TemplateInputs.from_dict`` drops those rows. Ours refuses the same rows."""
    python = swift_python()
    chosen = [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "Sunny"}]
    variants = [[{"content": "Rainy"}], [{"role": "assistant"}],
                [{"role": "assistant", "content": "Rainy"}, {"role": "assistant"}],
                [{"role": "assistant", "content": "Rainy"}]]
    path = tmp_path / "dpo.jsonl"
    path.write_text("".join(json.dumps({"messages": chosen, "rejected_response": rejected}) + "\n"
                            for rejected in variants))
    theirs = swift_rows(python, path, False, "--template-inputs")
    dropped_by_swift = [i for i, row in enumerate(theirs) if row["template_inputs_error"]]
    assert dropped_by_swift == [0, 1]

    report = td.SkipReport()
    kept = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True,
                        on_error="skip", report=report))
    assert [row["extra"]["rejected_response"] for row in kept] == [variants[i] for i in (2, 3)]
    assert report.by_reason == {"InvalidValueError:rejected_response[0].role": 1,
                                "InvalidValueError:rejected_response[0].content": 1}


def test_tool_results_given_as_lists_are_refused_exactly_where_ms_swift_drops_the_row(tmp_path):
    """A result whose list holds an element that is not an object fails ms-swift's provider-format detection and the
    row is dropped; ours refuses the same rows (naming the element) and reads the others."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()[0])
    results = ["text", [{"aqi": 10}], [10, 72], [], ["Beijing"], [{"aqi": 10}, 72], {"aqi": 10}]
    rows = []
    for k, content in enumerate(results):
        row = json.loads(json.dumps(doc))
        row["messages"][0]["content"] = f"variant {k}"
        row["messages"][3]["content"] = content
        rows.append(row)
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    kept_by_swift = [int(row["messages"][0]["content"].split()[1]) for row in swift_rows(python, path, False)]
    assert kept_by_swift == [0, 1, 3, 6]

    report = td.SkipReport()
    kept = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [int(row["messages"][0]["content"].split()[1]) for row in kept] == kept_by_swift
    assert report.by_reason == {"InvalidValueError:messages[3].content[0]": 2,
                                "InvalidValueError:messages[3].content[1]": 1}


def test_blocks_in_an_anthropic_row_are_refused_exactly_where_ms_swift_drops_the_row(tmp_path):
    """ms-swift converts a row with tool_use/tool_result blocks block by block and drops it on a block it cannot
    convert (an image_url block, an image without a source, a tool_result list holding other blocks); ours refuses
    the same rows and reads the others."""
    from test_ms_swift import anthropic_variants

    python = swift_python()
    variants = anthropic_variants()
    rows = []
    for k, (native, _) in enumerate(variants):
        row = json.loads(json.dumps(native))
        row["messages"][0]["content"][0]["text"] = f"variant {k}"
        rows.append(row)
    path = tmp_path / "anthropic.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    def variant(row: dict) -> int:  # the first message's text is "variant <k>", then the image's tag
        return int(row["messages"][0]["content"].split("variant ")[1].split("<")[0])

    kept_by_swift = [variant(row) for row in swift_rows(python, path, False)]
    assert kept_by_swift == [k for k, (_, field) in enumerate(variants) if field is None]

    report = td.SkipReport()
    kept = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [variant(row) for row in kept] == kept_by_swift
    assert report.skipped == len(variants) - len(kept_by_swift)


def test_ms_swift_drops_every_row_whose_messages_column_is_named_in_other_case(tmp_path):
    """With ``Messages`` instead of ``messages`` ms-swift's automatic preprocessor reads the file as query/response
    rows and deletes every one (no messages); its ``System``/``Images`` columns are renamed in any case. Our reader
    refuses the first row and reads the second as ms-swift does."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()[1])
    cased = tmp_path / "cased.jsonl"
    cased.write_text(json.dumps({("Messages" if k == "messages" else k): v for k, v in doc.items()}) + "\n")
    done = subprocess.run([python, str(DRIVER), str(cased)], capture_output=True, text=True, timeout=900,
                          check=False, cwd=str(tmp_path))
    assert done.stdout == "" and "messages: []" in done.stderr and "the data will be deleted" in done.stderr
    with pytest.raises(td.MissingFieldError, match="'Messages'"):
        td.load("ms_swift", "raw", data_files=str(cased), split="train", streaming=True).__iter__().__next__()

    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"messages": doc["messages"], "tools": doc["tools"], "System": "Be brief.",
                                 "Images": doc["images"]}) + "\n")
    theirs = swift_rows(python, other, False)
    ours = list(td.load("ms_swift", "raw", data_files=str(other), split="train", streaming=True))
    assert plain(theirs[0]["messages"]) == plain(ours[0]["messages"]) and theirs[0]["images"] == ours[0]["images"]


def test_openai_results_spelled_with_an_alias_pair_by_position_as_ms_swift_pairs_them(tmp_path):
    """ms-swift re-sorts OpenAI results by ``tool_call_id`` only when their role is written ``"role": "tool"`` (or
    ``tool_response``); results under an alias role or under ``from`` keep their order and pair by position. Ours
    reads the rows whose ids agree with that and refuses, naming the id, the ones where they contradict it."""
    python = swift_python()
    calls = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "id": "a", "function": {"name": "realtime_aqi", "arguments": '{"city": "Beijing"}'}},
        {"type": "function", "id": "b", "function": {"name": "realtime_aqi", "arguments": '{"city": "Shanghai"}'}}]}

    def row(k: int, result: dict, ids: tuple) -> dict:
        results = [{**result, "tool_call_id": i, ("value" if "from" in result else "content"): f"for {i}"} for i in ids]
        return {"messages": [{"role": "user", "content": f"variant {k}"}, calls, *results,
                             {"role": "assistant", "content": "Done."}]}

    spellings = [{"role": "tool"}, {"role": "observation"}, {"from": "tool"}, {"role": "function_response"}]
    rows = [row(2 * n + r, spelling, ids) for n, spelling in enumerate(spellings)
            for r, ids in enumerate([("a", "b"), ("b", "a")])]
    path = tmp_path / "openai.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    theirs = swift_rows(python, path, False)
    # ms-swift keeps every row; it puts results in call order only for those written "role": "tool"
    results_by_swift = [[m["content"] for m in r["messages"] if m["role"] in ("tool", "tool_response")]
                        for r in theirs]
    assert results_by_swift == [["for a", "for b"]] * 2 + [["for a", "for b"], ["for b", "for a"]] * 3

    report = td.SkipReport()
    ours = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [r["messages"][0]["content"] for r in ours] == ["variant 0", "variant 1", "variant 2", "variant 4",
                                                          "variant 6"]
    by_variant = {r["messages"][0]["content"]: r for r in theirs}
    for r in ours:
        assert plain(r["messages"]) == plain(by_variant[r["messages"][0]["content"]]["messages"])
    assert report.by_reason == {"InvalidValueError:messages[2].tool_call_id": 3}


def test_tools_are_read_without_the_nulls_ms_swift_drops_as_arrow_padding(tmp_path):
    """Tools with nulls (as ``Dataset.to_json`` pads them) reach ms-swift's template without the nulls its
    ``remove_arrow_padding`` drops; the unified row has the same tools, given as a list or as JSON text."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()[0])
    tool = json.loads(doc["tools"])[0]
    properties = tool["function"]["parameters"]["properties"]
    properties["city"].update({"default": None, "enum": ["Beijing", None], "examples": None, "x-note": None})
    properties["unit"] = None
    tool["function"]["parameters"]["description"] = None
    path = tmp_path / "padded.jsonl"
    path.write_text(json.dumps({**doc, "tools": [tool]}) + "\n" + json.dumps({**doc, "tools": json.dumps([tool])}) + "\n")
    theirs = [row["tools"] for row in swift_rows(python, path, False)]
    ours = [row["tools"] for row in td.load("ms_swift", data_files=str(path), split="train", streaming=True)]
    assert ours == theirs and "unit" not in json.dumps(ours) and '"default": null' in json.dumps(ours)


def test_anthropic_results_in_a_tool_message_are_read_as_ms_swift_reads_them(tmp_path):
    """ms-swift converts tool_result blocks in a message of any role: one result per block, in call order."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text().splitlines()[3])
    calls = {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}},
                                              {"type": "tool_use", "id": "b", "name": "f", "input": {"x": 2}}]}
    results = [{"type": "tool_result", "tool_use_id": "b", "content": "rb"},
               {"type": "tool_result", "tool_use_id": "a", "content": "ra"}]
    rows = []
    for role in ("tool", "observation"):
        row = json.loads(json.dumps(doc))
        row["messages"][2]["role"] = role
        rows += [row, {"messages": [{"role": "user", "content": "q"}, calls, {"role": role, "content": results},
                                    {"role": "assistant", "content": "Done."}]}]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    theirs = swift_rows(python, path, False)
    ours = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True))
    assert len(theirs) == len(ours) == 4
    for mine, swift in zip(ours, theirs):
        assert plain(mine["messages"]) == plain(swift["messages"]) and mine["images"] == swift["images"]


def test_two_aliases_of_a_column_are_read_as_ms_swift_reads_them(tmp_path):
    """Beside each other, ms-swift renames neither alias of a column: ``System`` with ``system_prompt`` gives no
    system message, ``Images`` with ``image`` no images, and ``conversations`` with ``Messages`` no row."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()[1])
    aliases = tmp_path / "aliases.jsonl"
    aliases.write_text(json.dumps({"messages": doc["messages"], "tools": doc["tools"], "System": "A",
                                   "system_prompt": "B", "Images": doc["images"], "image": doc["images"]}) + "\n")
    theirs = swift_rows(python, aliases, False)
    ours = list(td.load("ms_swift", "raw", data_files=str(aliases), split="train", streaming=True))
    assert plain(ours[0]["messages"]) == plain(theirs[0]["messages"]) and ours[0]["images"] == theirs[0]["images"] == []

    both = tmp_path / "both.jsonl"
    both.write_text(json.dumps({"conversations": doc["messages"], "Messages": doc["messages"]}) + "\n")
    done = subprocess.run([python, str(DRIVER), str(both)], capture_output=True, text=True, timeout=900,
                          check=False, cwd=str(tmp_path))
    assert done.stdout == "" and "the data will be deleted" in done.stderr
    with pytest.raises(td.InvalidValueError, match="'Messages'"):
        next(iter(td.load("ms_swift", "raw", data_files=str(both), split="train", streaming=True)))


def test_loss_of_a_message_of_anthropic_results_is_read_as_ms_swift_reads_it(tmp_path):
    python = swift_python()
    calls = {"role": "assistant", "loss": False, "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}},
                                                            {"type": "tool_use", "id": "b", "name": "f", "input": {}}]}
    results = {"role": "user", "loss": True, "loss_scale": 0.5, "content": [
        {"type": "tool_result", "tool_use_id": "b", "content": "rb"},
        {"type": "tool_result", "tool_use_id": "a", "content": "ra"}]}
    path = tmp_path / "loss.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}, calls, results,
                                             {"role": "assistant", "content": "Done."}]}) + "\n")
    theirs = swift_rows(python, path, False)[0]["messages"]
    ours = next(iter(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True)))["messages"]
    keys = ("role", "content", "loss", "loss_scale")
    assert [tuple(m.get(k) for k in keys) for m in ours] == [tuple(m.get(k) for k in keys) for m in theirs]


def test_an_audio_or_video_given_as_one_object_is_refused_where_ms_swift_reads_its_keys(tmp_path):
    """ms-swift wraps one image object in a list, but reads one audio or video object as the list of its keys (a
    file named "path"): refused here, naming the column."""
    python = swift_python()
    path = tmp_path / "media.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "<audio>q"},
                                             {"role": "assistant", "content": "a"}],
                                "audios": {"path": "a.wav"}}) + "\n")
    assert swift_rows(python, path, False)[0]["audios"] == ["path"]
    with pytest.raises(td.InvalidValueError, match="single object") as info:
        next(iter(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True)))
    assert info.value.field == "audios"


# ms-swift's template reading of each row (StdTemplateInputs.from_dict: list contents to text, media tags, images)
TEMPLATE_READING = """
import json, sys
from swift.template.template_inputs import StdTemplateInputs
for line in open(sys.argv[1], encoding="utf-8"):
    inputs = StdTemplateInputs.from_dict(json.loads(line))
    print(json.dumps({"images": inputs.images, "contents": [m["content"] for m in inputs.messages]}))
"""


def test_blocks_are_read_the_anthropic_way_only_where_ms_swift_converts_them_so(tmp_path):
    """In a row with OpenAI calls ms-swift's template reads an Anthropic image block's ``image`` key, not its
    ``source``: the tag stays, the image is lost (refused here, naming the block). A result's blocks under
    ``value`` in an Anthropic row are not converted: the template trains their JSON, as the unified row holds it."""
    from test_ms_swift import ANSWER, CALL

    python = swift_python()
    custom = [json.loads(line) for line in
              shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text().splitlines()]
    openai, anthropic = custom[1], custom[3]
    in_openai = json.loads(json.dumps(openai))
    in_openai["messages"][0]["content"][1] = anthropic["messages"][0]["content"][1]
    blocks = [{"type": "text", "text": "A sunny beach."}]
    under_value = {"messages": [anthropic["messages"][0], CALL, {"role": "tool_response", "value": blocks}, ANSWER]}
    path = tmp_path / "blocks.jsonl"
    path.write_text(json.dumps(in_openai) + "\n")
    done = subprocess.run([python, "-c", TEMPLATE_READING, str(path)], capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout.splitlines()[-1])
    assert theirs["images"] == ["https://example.com/input.png"]  # two tags, one image: the source's is lost
    assert theirs["contents"][0] == "Compare these images.<image><image>"
    path.write_text(json.dumps(in_openai) + "\n" + json.dumps(under_value) + "\n")
    report = td.SkipReport(keep_all=True)
    ours = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [(r["row"], r["field"]) for r in report.rows] == [(0, "messages[0].content[1]")]
    swift = swift_rows(python, path, False)[1]
    assert plain(swift["messages"])[2] == {"role": "tool_response", "content": blocks}  # not converted
    assert [m["content"] for m in ours[0]["messages"] if m["role"] == "tool"] == [json.dumps(blocks)]
    assert ours[0]["images"] == swift["images"]


def test_text_blocks_of_an_anthropic_row_under_from_are_refused_where_ms_swift_drops_the_row(tmp_path):
    """ms-swift drops an Anthropic row whose text or image blocks are in a message with ``from`` for its role, and
    reads one whose tool blocks alone are; ours refuses and reads the same rows."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "custom_dataset_doc_agent_rows_en.jsonl").read_text().splitlines()[3])
    rows = []
    for k in range(3):  # [text, image], [tool_use], [tool_result]
        row = json.loads(json.dumps(doc))
        row["messages"][k] = {"from": row["messages"][k].pop("role"), **row["messages"][k]}
        rows.append(row)
    path = tmp_path / "from.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    theirs = swift_rows(python, path, False)
    report = td.SkipReport(keep_all=True)
    ours = list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [(r["row"], r["field"]) for r in report.rows] == [(0, "messages[0].from")]
    assert len(theirs) == len(ours) == 2
    assert [plain(row["messages"]) for row in ours] == [plain(row["messages"]) for row in theirs]


def test_a_tool_integer_beyond_64_bits_is_refused_since_ms_swift_fails_to_load_the_whole_file(tmp_path):
    """ms-swift stores tools in a datasets ``Json`` column read back by pandas' ujson: one integer beyond 64 bits in
    a tool of the seventh row fails the load of every row ("Value is too big!"). The export skips that row, names
    the integer, and ms-swift loads the rest."""
    python = swift_python()
    doc = json.loads(shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()[0])
    tools = json.loads(doc["tools"])
    tools[0]["function"]["parameters"]["properties"]["city"]["maxLength"] = 123456789012345678901234567890
    source = tmp_path / "big.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in [doc] * 6 + [{**doc, "tools": json.dumps(tools)}]))
    done = subprocess.run([python, str(DRIVER), str(source)], capture_output=True, text=True, timeout=900,
                          check=False, cwd=str(tmp_path))
    assert done.returncode != 0 and "Value is too big" in done.stderr

    skipped = tmp_path / "skipped.jsonl"
    assert main(["export", "ms_swift", "--data-files", str(source), "--format", "swift", "--out", str(tmp_path / "out"),
                 "--on-error", "skip", "--skipped-rows", str(skipped)]) == 0
    [skip] = [json.loads(line) for line in skipped.read_text().splitlines()]
    assert (skip["row"], skip["field"]) == (6, "tools[0].function.parameters.properties.city.maxLength")
    theirs = swift_rows(python, tmp_path / "out" / "ms_swift-swift-train.jsonl", False)
    assert len(theirs) == 6


def test_tools_given_as_empty_text_are_refused_where_ms_swift_cannot_parse_them(tmp_path):
    """ms-swift keeps ``"tools": ""`` as one tool, ``[""]``, and its agent template fails on that entry (the row is
    not trained); ours refuses such rows naming ``tools`` and reads ``[]`` and a null column as no tools."""
    python = swift_python()
    chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    path = tmp_path / "empty.jsonl"
    path.write_text("".join(json.dumps({**chat, "tools": tools}) + "\n" for tools in ["", " ", "[]", None]))
    theirs = [row.get("tools") for row in swift_rows(python, path, False)]
    assert theirs[:2] == [[""], [" "]] and not theirs[2] and not theirs[3]
    parse = ("from swift.agent_template import agent_template_map\nt = agent_template_map['hermes']()\n"
             "t.wrap_tool(t._parse_json(''))")
    done = subprocess.run([python, "-c", parse], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "AssertionError: tool: None" in done.stderr

    report = td.SkipReport(keep_all=True)
    ours = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [(r["row"], r["field"]) for r in report.rows] == [(0, "tools"), (1, "tools")]
    assert [r["tools"] for r in ours] == [[], []]


def test_an_empty_image_path_is_refused_where_ms_swift_keeps_it_and_fails_loading_it(tmp_path):
    """ms-swift keeps an empty or blank image path through preprocessing, and its template fails loading it
    (``Template._load_image``, with images loaded or not): the row is not trained. Ours refuses such rows naming
    the entry."""
    python = swift_python()
    chat = {"messages": [{"role": "user", "content": "<image>What is it?"}, {"role": "assistant", "content": "A cat."}]}
    path = tmp_path / "blank.jsonl"
    path.write_text("".join(json.dumps({**chat, "images": images}) + "\n" for images in [[""], [" "], ["cat.png"]]))
    assert [row["images"] for row in swift_rows(python, path, False)] == [[""], [" "], ["cat.png"]]
    load = ("from swift.template.base import Template\n"
            "for path in ('', ' '):\n"
            "    for load_images in (False, True):\n"
            "        try:\n"
            "            Template._load_image({'bytes': None, 'path': path}, load_images)\n"
            "        except Exception as exc:\n"
            "            print('FAILED', type(exc).__name__)\n")
    done = subprocess.run([python, "-c", load], capture_output=True, text=True, check=False, cwd=str(tmp_path))
    assert [line for line in done.stdout.splitlines() if line.startswith("FAILED")] == [
        "FAILED AttributeError", "FAILED IsADirectoryError"] * 2, done.stdout + done.stderr

    report = td.SkipReport(keep_all=True)
    ours = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert [(r["row"], r["field"]) for r in report.rows] == [(0, "images[0]"), (1, "images[0]")]
    assert [r["images"] for r in ours] == [["cat.png"]]


def test_an_openai_legacy_function_call_is_refused_where_ms_swift_drops_the_call(tmp_path):
    """ms-swift removes an assistant message's legacy ``function_call`` with the other keys it does not know and
    keeps the row: it trains the message's text alone, as if no call had been made. Ours refuses the row naming
    the key."""
    python = swift_python()
    legacy = {"role": "assistant", "content": "Let me check.",
              "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    path = tmp_path / "legacy.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "Weather in Oslo?"}, legacy,
                                             {"role": "assistant", "content": "2 C."}]}) + "\n")
    theirs = swift_rows(python, path, False)
    assert [m["role"] for m in theirs[0]["messages"]] == ["user", "assistant", "assistant"]
    assert theirs[0]["messages"][1] == {"role": "assistant", "content": "Let me check."}

    report = td.SkipReport(keep_all=True)
    ours = list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report))
    assert ours == [] and [(r["row"], r["field"]) for r in report.rows] == [(0, "messages[1].function_call")]


NESTFUL_V2 = [("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl"),
              ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl"),
              ("nestful", "third_party", "reconstructed_current_v2", "rows_hf_string_format.jsonl")]


def _calls_kept(path: Path, unified_rows: list[dict], theirs: list[dict]) -> int:
    """Every call of the unified rows is a tool_call message of ms-swift's preprocessed row, in order, with its
    name and arguments value for value (floats by their bits); returns the calls checked."""
    from tricky_values import bits

    checked = 0
    for i, (row, swift) in enumerate(zip(unified_rows, theirs)):
        ours = [c["function"] for m in row["messages"] for c in m.get("tool_calls", [])]
        seen = [json.loads(m["content"]) if isinstance(m["content"], str) else m["content"]
                for m in swift["messages"] if m["role"] == "tool_call"]
        assert len(seen) == len(ours), (path.name, i)
        for mine, kept in zip(ours, seen):
            assert kept["name"] == mine["name"] and bits(kept["arguments"]) == bits(mine["arguments"]), (path.name, i)
            checked += 1
    return checked


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_upstream_and_tricky_rows_are_preprocessed_by_ms_swift_with_every_call(tmp_path, streaming):
    """Rows the sample exports do not hold: ToolMind's graph_syn rows (OpenAI messages under ``conversations``,
    read with the ms_swift source), NESTFUL v2's upstream files, and one row per source whose call passes integers
    beyond 64 bits, -0.0, 5e-324, escapes and nested objects (tests/tricky_values.py). Every row is exported as
    ``--format swift``, and ms-swift keeps each, with every call's arguments value for value."""
    from tricky_values import write_files

    python = swift_python()
    sample = json.loads(shared_data("toolmind", "nanbeige_toolmind_graphsyn_raw_sample.json").read_text())
    graphsyn = tmp_path / "graphsyn.jsonl"
    graphsyn.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sample["rows"]), encoding="utf-8")
    loads = [("ms_swift", [str(graphsyn)]), ("nestful", [str(shared_data(*parts)) for parts in NESTFUL_V2])]
    for source, path, _ in write_files(tmp_path / "rows"):
        loads.append((source, [path]))
    # every export in one file, read by ms-swift in one run
    together = tmp_path / "together.jsonl"
    unified = []
    with together.open("w", encoding="utf-8") as out:
        for number, (source, files) in enumerate(loads):
            folder = tmp_path / f"export-{number}"
            assert main(["export", source, "--data-files", *files, "--format", "swift", "--out", str(folder)]) == 0
            (path,) = sorted(folder.glob(f"{source}-swift-*.jsonl"))
            out.write(path.read_text(encoding="utf-8"))
            unified += [row for ds in td.load(source, data_files=files, streaming=True).values() for row in ds]
    theirs = swift_rows(python, together, streaming)
    ours = list(td.load("ms_swift", "raw", data_files=str(together), split="train", streaming=True))
    assert len(theirs) == len(ours) == len(unified) == sum(1 for _ in together.open(encoding="utf-8")) == 4 + 68 + 5
    for i, (mine, swift) in enumerate(zip(ours, theirs)):
        assert plain(swift["messages"]) == plain(mine["messages"]), i
        if not streaming:  # see the test above: ms-swift's streaming pads and reorders tool schemas
            assert (swift.get("tools") or []) == mine["tools"], i
    assert _calls_kept(together, unified, theirs) == 6 + 255 + 5


def test_calls_with_a_null_or_empty_name_are_refused_as_names_ms_swift_would_train(tmp_path):
    """ms-swift drops a row whose call lacks ``name`` (its converters index the key) but keeps one whose name is
    null or empty, and its template renders that name: ours refuses both, a missing name as a
    ``MissingFieldError``, a null or empty one as an ``InvalidValueError`` that does not claim the row is dropped."""
    python = swift_python()
    tools = json.dumps([{"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}])

    def row(k: int, call: dict) -> dict:
        return {"tools": tools, "messages": [
            {"role": "user", "content": f"variant {k}"}, {"role": "tool_call", "content": json.dumps(call)},
            {"role": "tool_response", "content": "r"}, {"role": "assistant", "content": "a"}]}

    calls = [{"arguments": {}}, {"name": None, "arguments": {}}, {"name": "", "arguments": {}}]
    path = tmp_path / "names.jsonl"
    path.write_text("".join(json.dumps(row(k, call)) + "\n" for k, call in enumerate(calls)))
    theirs = swift_rows(python, path, False, "--template-inputs")
    assert len(theirs) == 3 and not any(r["template_inputs_error"] for r in theirs)
    parse = ("import json, sys\nfrom swift.agent_template.base import BaseAgentTemplate as T\n"
             "for line in sys.stdin:\n"
             "    content = json.loads(line)['messages'][1]['content']\n"
             "    try:\n        print(repr(T._parse_tool_call(content)['name']))\n"
             "    except KeyError:\n        print('KeyError')\n")
    done = subprocess.run([python, "-c", parse], input=path.read_text(), capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["KeyError", "None", "''"]  # dropped at encoding; kept under null and ""

    report = td.SkipReport(keep_all=True)
    assert list(td.load("ms_swift", data_files=str(path), split="train", streaming=True, on_error="skip",
                        report=report)) == []
    assert [(r["row"], r["reason"]) for r in report.rows] == [
        (0, "MissingFieldError:messages[1].content.name"), (1, "InvalidValueError:messages[1].content.name"),
        (2, "InvalidValueError:messages[1].content.name")]


def test_loss_given_as_text_is_refused_since_ms_swift_trains_a_message_whose_loss_is_the_text_false(tmp_path):
    """ms-swift tests a message's loss for truth (``LossScale``): ``"loss": "false"`` trains the message it was meant
    to mask, as ``"0"`` does, while the booleans do what they say. Refused here, naming the message's loss."""
    python = swift_python()
    probe = ("import json\n"
             "from swift.loss_scale.base import LossScale\n"
             "from swift.template.utils import ContextType\n"
             "scales = {}\n"
             "for loss in ['false', '0', False, True]:\n"
             "    messages = [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': 'a', 'loss': loss}]\n"
             "    scales[json.dumps(loss)] = LossScale('default')(['q', 'a'], [ContextType.OTHER, "
             "ContextType.RESPONSE], messages)[1][-1]\n"
             "print(json.dumps(scales))\n")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {'"false"': 1.0, '"0"': 1.0, "false": 0.0, "true": 1.0}
    path = tmp_path / "loss.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "q"},
                                             {"role": "assistant", "content": "a", "loss": "false"}]}) + "\n")
    for streaming in (False, True):
        with pytest.raises(td.InvalidValueError, match="loss is text") as info:
            list(td.load("ms_swift", "raw", data_files=str(path), split="train", streaming=streaming,
                         cache_dir=str(tmp_path / "cache")))
        assert info.value.field == "messages[1].loss" and info.value.row == 0


# ms-swift's own load, preprocessing and Template.encode of each row (what `swift sft --template T --agent_template
# hermes` trains), under a byte-level tokenizer built here (no model is downloaded): per template, per row, the
# decoded input and the trained (labels != -100) stretches.
TEMPLATE_ENCODING = """
import json, os, sys, tempfile
cache = tempfile.mkdtemp(prefix="swift-encode-cache-")
os.environ.update({"MODELSCOPE_CACHE": cache, "HF_DATASETS_CACHE": os.path.join(cache, "hf"), "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_OFFLINE": "1", "USE_HF": "1"})
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from swift.dataset import load_dataset
from swift.model import MODEL_MAPPING
from swift.model.model_meta import ModelInfo
from swift.template import get_template

byte_level = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))},
                                  merges=[]))
byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
byte_level.decoder = decoders.ByteLevel()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=byte_level, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                    additional_special_tokens=["<|im_start|>"])
rows = list(load_dataset(sys.argv[1], load_from_cache_file=False)[0])
for template_type, model_type in (("qwen2_5", "qwen2"), ("qwen3", "qwen3")):
    tokenizer.model_info = ModelInfo(model_type, cache, torch.float32, 1 << 20, None, 0, task_type="causal_lm")
    tokenizer.model_meta = MODEL_MAPPING[model_type]
    template = get_template(tokenizer, template_type=template_type, agent_template="hermes")
    template.set_mode("train")
    for row in rows:
        encoded = template.encode(row)
        trained, stretch = [], []
        for token, label in zip(encoded["input_ids"], encoded["labels"]):
            if label != -100:
                stretch.append(token)
            elif stretch:
                trained, stretch = trained + [tokenizer.decode(stretch)], []
        trained += [tokenizer.decode(stretch)] if stretch else []
        print(json.dumps({"template": template_type, "input": tokenizer.decode(encoded["input_ids"]),
                          "trained": trained}, ensure_ascii=False))
"""


def test_ms_swift_template_encoding_trains_every_call_and_answer_of_every_source_exactly(tmp_path):
    """Each source's sample rows, its tricky row (tests/tricky_values.py) and a row whose call passes
    0.30000000000000004, booleans, null and non-ASCII text, exported as ``--format swift`` and encoded by ms-swift's
    ``Template.encode`` (qwen2_5 and qwen3, hermes agent template): every system and user turn, tool result and tool
    name is in the input, and every call (its name and arguments as exact JSON), answer and reasoning in a trained
    stretch. Rows with media are left out: they need a vision-language template."""
    from tricky_values import write_files

    python = swift_python()
    extra = tmp_path / "floats.jsonl"
    arguments = '{"f": 0.30000000000000004, "ok": true, "none": null, "city": "Zürich", "z": -0.0}'
    extra.write_text(json.dumps({"tools": [{"type": "function", "function": {
        "name": "weigh", "description": "Weighs.", "parameters": {"type": "object", "properties": {}}}}], "messages": [
        {"role": "user", "content": "Weigh it."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "weigh", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "a", "content": "0.30000000000000004 kg"},
        {"role": "assistant", "content": "It weighs 0.3 kg."}]}, ensure_ascii=False) + "\n", encoding="utf-8")
    loads = [(source, td.sample_files(source)) for source in source_names()] + [("ms_swift", [str(extra)])]
    loads += [(source, [path]) for source, path, _ in write_files(tmp_path / "rows")]
    together = tmp_path / "together.jsonl"
    unified = []
    with together.open("w", encoding="utf-8") as out:
        for number, (source, files) in enumerate(loads):
            folder = tmp_path / f"export-{number}"
            flags = ["--data-files", *files] if isinstance(files, list) else ["--sample"]
            assert main(["export", source, *flags, "--format", "swift", "--out", str(folder)]) == 0
            for split, rows in td.load(source, data_files=files, streaming=True).items():
                lines = (folder / f"{source}-swift-{split}.jsonl").read_text(encoding="utf-8").splitlines()
                for line, row in zip(lines, rows, strict=True):
                    if not any(row.get(media) for media in ("images", "audios", "videos")):
                        out.write(line + "\n")
                        unified.append(row)
    done = subprocess.run([python, "-c", TEMPLATE_ENCODING, str(together)], capture_output=True, text=True,
                          timeout=900, check=False, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    encoded = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["template"] for e in encoded] == ["qwen2_5"] * len(unified) + ["qwen3"] * len(unified)
    assert len(unified) == 37 - 2 + 1 + 5  # the samples less two ms-swift rows with images
    calls = 0
    for row, swift in zip(unified * 2, encoded):
        where = (swift["template"], row["id"])
        text, trained = swift["input"], swift["trained"]
        for tool in row["tools"]:
            assert json.dumps(tool["function"]["name"], ensure_ascii=False) in text, where
        for message in row["messages"]:
            if message["role"] in ("system", "user", "tool"):
                assert message["content"] in text, where
            if message.get("reasoning_content"):
                assert any(message["reasoning_content"] in stretch for stretch in trained), where
            if message["role"] != "assistant":
                continue
            if message["content"]:
                assert any(message["content"] in stretch for stretch in trained), where
            for call in message.get("tool_calls") or []:
                shown = json.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]},
                                   ensure_ascii=False)
                assert any(shown in stretch for stretch in trained), (where, shown)
                calls += 1
    assert calls > 2 * 40
