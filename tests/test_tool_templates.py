"""Every row of every source, bundled and upstream (../shared/data), map-style and streamed, renders under every
bundled tool-calling chat template (tests/chat_templates.py): after the template's remedy where the template
refuses the row as it is, with every user turn, call, result and answer in the text. Llama 3.1 and 3.2 render one
call per assistant turn and raise on the others (most NESTFUL and ToolMind rows): ``td.one_call_per_turn``
splits such a turn into one turn per call, each followed by its own results."""
from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("transformers", reason="chat template tests need transformers (the test extra)")
from jinja2.exceptions import TemplateError  # noqa: E402

import tooluse_datasets as td  # noqa: E402
from chat_templates import TEMPLATES  # noqa: E402
from conftest import PROJECT_ROOT, shared_data  # noqa: E402
from test_call_ids import _loads, _text_only  # noqa: E402
from test_trl import assert_rendered, byte_tokenizer, refusal  # noqa: E402

# What a user does before training under a template that refuses rows as they are.
REMEDY = {"mistral": td.short_call_ids, "llama3.1": td.one_call_per_turn, "llama3.2": td.one_call_per_turn}


def _calls(row: dict) -> list[tuple[str, str]]:
    return [(c["id"], c["function"]["name"]) for m in row["messages"] for c in m.get("tool_calls") or []]


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("template", ["llama3.1", "llama3.2"])
def test_every_row_renders_under_llama_after_one_call_per_turn(template, streaming, cache_dir):
    tokenizer = byte_tokenizer(TEMPLATES[template])
    rows = refused = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, streaming=streaming, cache_dir=cache_dir).values():
            mapped = ds.map(td.one_call_per_turn)
            if not streaming:
                mapped = td.exact(mapped)  # map gives fresh features: back to the chat shape
            for row, fixed in zip(ds, mapped):
                if not _text_only(row):
                    continue
                if refusal(template, row) is not None:
                    with pytest.raises(TemplateError, match="single tool-calls"):  # the row as it is
                        tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
                    refused += 1
                assert fixed["id"] == row["id"] and _calls(fixed) == _calls(row)  # every call, in order
                text = tokenizer.apply_chat_template(fixed["messages"], tools=fixed["tools"], tokenize=False)
                if template == "llama3.1" and _starts_without_user(fixed):
                    # Llama 3.1 puts the tools into the first turn after the system prompt, taking it for the
                    # user's: a row that opens on a call turn (an ms-swift doc example) renders that call as text.
                    assert _calls(fixed)[0][1] not in text
                    continue
                assert_rendered(fixed, text, template)
                rows += 1
    assert rows >= 100 and refused >= 50


def test_readme_counts_the_rows_with_several_calls_in_a_turn(cache_dir):
    """The README's count of the rows Llama 3.x refuses (several calls in one assistant turn) is that of the rows
    these tests render: each row once, not once per access mode."""
    shared_data("ms_swift")  # the count includes the upstream rows
    rows = several = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, cache_dir=cache_dir).values():
            for row in filter(_text_only, ds):
                rows += 1
                several += any(len(m.get("tool_calls", [])) > 1 for m in row["messages"])
    readme = " ".join((PROJECT_ROOT / "README.md").read_text(encoding="utf-8").split())
    stated = re.search(r"most NESTFUL and ToolMind rows: (\d+) of the (\d+) text rows", readme)
    assert (int(stated[1]), int(stated[2])) == (several, rows)


def _starts_without_user(row: dict) -> bool:
    return next(m["role"] for m in row["messages"] if m["role"] != "system") != "user"


def test_one_call_per_turn_puts_each_result_after_its_call_and_keeps_everything_else(cache_dir):
    split = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, cache_dir=cache_dir).values():
            for row in ds:
                before = td.dumps(row)
                fixed = td.one_call_per_turn(row)
                assert td.dumps(row) == before  # the row itself is left alone
                assert {k: v for k, v in fixed.items() if k != "messages"} == \
                    {k: v for k, v in row.items() if k != "messages"}
                messages = fixed["messages"]
                assert all(len(m.get("tool_calls") or []) <= 1 for m in messages)
                assert not any(v is None for m in messages for v in m.values())  # still the decoded shape
                # every other message kept, each once: results may move (after their call), nothing else does
                others, kept = ([m for m in ms if not m.get("tool_calls")] for ms in (row["messages"], messages))
                assert sorted(map(td.dumps, kept)) == sorted(map(td.dumps, others))
                assert [m for m in kept if m["role"] != "tool"] == [m for m in others if m["role"] != "tool"]
                texts = [(m["content"], m.get("reasoning_content")) for m in messages if m.get("tool_calls")]
                originals = [(m["content"], m.get("reasoning_content")) for m in row["messages"] if m.get("tool_calls")]
                assert [t for t in texts if t != ("", None)] == [t for t in originals if t != ("", None)]
                # each result after its own call's turn
                last_call = None
                for m in messages:
                    if m.get("tool_calls"):
                        last_call = m["tool_calls"][0]["id"]
                    elif m["role"] == "tool" and m.get("tool_call_id") in dict(_calls(row)):
                        assert m["tool_call_id"] == last_call, row["id"]
                if len(messages) > len(row["messages"]):
                    split += 1
    assert split >= 50


def test_one_call_per_turn_on_a_complete_row_keeps_text_reasoning_and_stray_results():
    row = td.complete_row({"id": "r", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Looking.", "reasoning_content": "two lookups", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": {}}}]},
        {"role": "tool", "content": "from g", "tool_call_id": "b", "name": "g"},
        {"role": "tool", "content": "from nowhere", "tool_call_id": "zzz", "name": "h"},
        {"role": "tool", "content": "from f", "tool_call_id": "a", "name": "f"},
        {"role": "assistant", "content": "done"}]})
    messages = td.one_call_per_turn(row)["messages"]
    assert [(m["role"], m["content"], m["reasoning_content"], [c["id"] for c in m["tool_calls"]], m["tool_call_id"])
            for m in messages] == [
        ("user", "hi", None, [], None),
        ("assistant", "Looking.", "two lookups", ["a"], None),
        ("tool", "from f", None, [], "a"),
        ("assistant", "", None, ["b"], None),
        ("tool", "from g", None, [], "b"),
        ("tool", "from nowhere", None, [], "zzz"),  # answers no call of the turn: kept, after the turn's results
        ("assistant", "done", None, [], None)]
    assert set(messages[3]) == set(row["messages"][1])  # the complete shape: every key
    text = byte_tokenizer(TEMPLATES["llama3.2"]).apply_chat_template(td.strip_empty(messages), tokenize=False)
    assert text.index('"x": 1') < text.index("from f") < text.index('"name": "g"') < text.index("from g")


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_row_of_every_source_renders_under_every_template(template, streaming, cache_dir):
    """Rows a template refuses as they are (refusal() says which and why) render after its remedy, if it has one
    (Hermes 3's refusal, a type name outside its map, has none: those rows are counted, not rendered)."""
    tokenizer = byte_tokenizer(TEMPLATES[template])
    rows = refused = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, streaming=streaming, cache_dir=cache_dir).values():
            for row in ds:
                if not _text_only(row):
                    continue
                if refusal(template, row) is not None:
                    refused += 1
                    if template not in REMEDY:
                        continue
                    row = REMEDY[template](row)
                if template == "llama3.1" and _starts_without_user(row):
                    continue  # see test_every_row_renders_under_llama_after_one_call_per_turn
                text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
                assert_rendered(row, text, template)
                rows += 1
    assert rows >= 50
    assert (refused > 0) == (template in ("llama3.1", "llama3.2", "hermes3", "mistral"))


TOOL_PROMPTS = {"llama3.1": "Environment: ipython", "llama3.2": "Environment: ipython",
                "toolace": "You are an expert in composing functions"}


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
def test_rows_without_tools_lose_the_tool_prompt_after_the_readme_recipe(streaming, cache_dir):
    """Llama 3.1, Llama 3.2 and ToolACE test ``tools is not none``: a row's ``tools: []`` gets their tool prompt
    (and Llama 3.1 moves the first user turn into it). README: ``ds.map(lambda r: {"tools": r["tools"] or None})``
    (map-style through ``td.exact``) gives those rows null tools, and the templates leave the prompt out."""
    tokenizers = {name: byte_tokenizer(TEMPLATES[name]) for name in TOOL_PROMPTS}
    checked = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, streaming=streaming, cache_dir=cache_dir).values():
            mapped = ds.map(lambda r: {"tools": r["tools"] or None})
            if not streaming:
                mapped = td.exact(mapped)
            for row, fixed in zip(ds, mapped):
                if row["tools"] or not _text_only(row):
                    continue
                assert fixed["tools"] is None and fixed["messages"] == row["messages"]
                for name, tokenizer in tokenizers.items():
                    before = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
                    after = tokenizer.apply_chat_template(fixed["messages"], tools=fixed["tools"], tokenize=False)
                    assert TOOL_PROMPTS[name] in before and TOOL_PROMPTS[name] not in after, (name, row["id"])
                    assert_rendered(fixed, after, name)
                checked += 1
    assert checked >= 2


NO_REASONING = ("qwen2.5", "hermes3", "llama3.1", "llama3.2", "mistral", "granite", "deepseekv3", "toolace")


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("template", NO_REASONING)
def test_reasoning_renders_under_templates_without_it_after_reasoning_in_content(template, streaming, cache_dir):
    """These templates never render ``reasoning_content``; ``td.reasoning_in_content`` writes it into the turn's
    text as a leading ``<think>`` block, which they render wherever they render the turn's text (every answer;
    call turns where they render text beside calls)."""
    from test_trl import RENDERS_TEXT_BESIDE_CALLS

    tokenizer = byte_tokenizer(TEMPLATES[template])
    recovered = shown = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, streaming=streaming, cache_dir=cache_dir).values():
            mapped = ds.map(td.reasoning_in_content)
            if not streaming:
                mapped = td.exact(mapped)
            for row, fixed in zip(ds, mapped):
                if not _text_only(row) or not any(m.get("reasoning_content") for m in row["messages"]):
                    continue
                if refusal(template, row) is not None:
                    if template not in REMEDY:
                        continue
                    row, fixed = REMEDY[template](row), REMEDY[template](fixed)
                before = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
                text = tokenizer.apply_chat_template(fixed["messages"], tools=fixed["tools"], tokenize=False)
                assert not any(m.get("reasoning_content") for m in fixed["messages"])
                for m, f in zip(row["messages"], fixed["messages"]):
                    if not m.get("reasoning_content"):
                        assert f == m
                        continue
                    assert f["content"] == f"<think>\n{m['reasoning_content']}\n</think>\n\n{m['content']}"
                    if m.get("tool_calls") and not RENDERS_TEXT_BESIDE_CALLS[template]:
                        continue
                    assert m["reasoning_content"] not in before
                    assert f["content"].strip() in text, (template, row["id"])
                    recovered += 1
                shown += 1
    assert shown >= 10 and recovered >= 10


def test_reasoning_in_content_keeps_the_complete_shape_and_leaves_the_row_alone():
    row = td.complete_row({"id": "r", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "reasoning_content": "look it up", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}]},
        {"role": "tool", "content": "1", "tool_call_id": "a", "name": "f"},
        {"role": "assistant", "content": "It is 1.", "reasoning_content": ""}]})
    before = td.dumps(row)
    messages = td.reasoning_in_content(row)["messages"]
    assert td.dumps(row) == before
    assert [set(m) for m in messages] == [set(m) for m in row["messages"]]
    assert messages[1]["content"] == "<think>\nlook it up\n</think>\n\n" and messages[1]["reasoning_content"] is None
    assert messages[3] == row["messages"][3]  # empty reasoning is no reasoning


def _json_values(text: str) -> set[str]:
    """Every JSON object written in ``text`` (each ``{`` that starts one), as exact JSON text to compare."""
    decoder, found = json.JSONDecoder(), set()
    for start, char in enumerate(text):
        if char == "{":
            try:
                value, _ = decoder.raw_decode(text, start)
            except ValueError:
                continue
            found.add(td.dumps(value))
    return found


@pytest.mark.parametrize("streaming", [False, True], ids=["map-style", "streaming"])
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_tool_of_the_catalog_renders_whole(template, streaming, cache_dir):
    """Each tool of a row is in the rendered text whole, as a JSON value equal to the unified tool (every key:
    NESTFUL's ``output_parameters``, which say what field a reference such as ``$var_1.result$`` reads, nested
    schemas, defaults), keys in order, values exact. Hermes 3 is the exception: its template writes each tool
    from its name, description and parameters only, so ``output_parameters`` never reaches the model."""
    tokenizer = byte_tokenizer(TEMPLATES[template])
    tools = with_outputs = 0
    for source, files in _loads():
        for ds in td.load(source, data_files=files, streaming=streaming, cache_dir=cache_dir).values():
            for row in ds:
                if not _text_only(row) or not row["tools"]:
                    continue
                if refusal(template, row) is not None:
                    if template not in REMEDY:
                        continue
                    row = REMEDY[template](row)
                text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
                shown = _json_values(text)
                for tool in row["tools"]:
                    tools += 1
                    with_outputs += "output_parameters" in tool["function"]
                    if template == "hermes3":
                        assert tool["function"]["name"] in text
                        continue
                    assert td.dumps(tool) in shown or td.dumps(tool["function"]) in shown, \
                        f"{row['id']}: tool {tool['function']['name']!r} not rendered whole ({template})"
                if template == "hermes3":
                    assert "output_parameters" not in text
    assert tools >= 500 and with_outputs >= 400
