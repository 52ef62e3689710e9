"""``show`` / ``demo`` previews: a readable conversation, plain text in a pipe, colours on a terminal, long text
elided with its length kept, calls with their arguments and the references between them."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

import tooluse_datasets as td
from tooluse_datasets.cli import main
from tooluse_datasets.preview import elide, render_row
from tooluse_datasets.registry import source_names

from conftest import shared_data


def test_show_renders_calls_arguments_and_references_as_plain_text_in_a_pipe(capsys):
    assert main(["show", "nestful", "--sample", "--row", "0"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # no colour codes when stdout is not a terminal
    assert "[0] user" in out and "[1] assistant · 2 calls" in out
    assert "→ add  id $var_1" in out and '"arg_1": 0.3' in out
    assert "↳ arg_0 ← output result of $var_1" in out  # call_graph edge


def test_show_finds_a_row_by_id_and_reports_a_missing_one(capsys):
    assert main(["show", "ms_swift", "--sample", "--id", "ms_swift/agent_rows/1"]) == 0
    out = capsys.readouterr().out
    assert "ms_swift/agent_rows/1" in out and "result of call_0 (read_receipt)" in out
    assert "thinking: I need the total" in out and "images: receipts/lunch_2024-05-17.jpg" in out
    assert main(["show", "ms_swift", "--sample", "--id", "nope"]) == 2  # bad input: see tests/test_cli.py
    assert "no id 'nope'" in capsys.readouterr().err


def test_show_of_a_json_format_in_a_pipe_is_json_with_lines_longer_than_the_console(capsys):
    """Other formats print as JSON: its lines were cut at the pipe's 100 columns, so `| jq` failed."""
    assert main(["show", "ms_swift", "--sample", "--config", "raw", "--row", "0", "--max-chars", "0"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) > 100
    row = json.loads(out)
    expected = next(iter(td.load("ms_swift", "raw", data_files=td.sample_files("ms_swift"), split="train",
                                 streaming=True)))
    assert row == json.loads(td.codec.dumps(expected))


def test_long_text_is_elided_with_a_visible_marker_and_its_length(cache_dir):
    text = "x" * 1000 + "END"
    cut = elide(text, 60)
    assert cut.startswith("x" * 40) and cut.endswith("END") and "of 1,003 chars elided" in cut
    assert elide("short", 60) == "short"
    row = td.load("toolmind", data_files=td.sample_files("toolmind"), split="synthetic", cache_dir=cache_dir)[0]
    longest = max((m["content"] for m in row["messages"]), key=len)
    buffer = io.StringIO()
    Console(file=buffer, width=100, no_color=True).print(render_row(row, max_chars=40))
    assert f"of {len(longest):,} chars elided" in buffer.getvalue()


def test_a_long_tool_catalog_in_the_header_is_elided_as_long_text_is(tmp_path, capsys):
    """The header listed every tool name whatever --max-chars said: a row offering 3,000 tools printed hundreds of
    lines of names before its first message."""
    line = Path(td.sample_files("ms_swift")["train"][0]).read_text(encoding="utf-8").splitlines()[0]
    row = json.loads(line)
    tool = json.loads(row["tools"])[0]
    row["tools"] = json.dumps([{**tool, "function": {**tool["function"], "name": f"tool_{i}"}} for i in range(3000)]
                              + [tool])
    path = tmp_path / "catalog.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["show", "ms_swift", "--data-files", str(path), "--max-chars", "120"]) == 0
    out = capsys.readouterr().out
    header = out[:out.index("[0] system")]
    assert "tools (3001): tool_0, tool_1, " in header and "tool_2999, get_exchange_rate" in header  # head and tail
    assert "chars elided …]" in header and len(header) < 400
    assert main(["show", "ms_swift", "--data-files", str(path), "--max-chars", "0"]) == 0  # 0: never elide
    assert "tool_1500, tool_1501" in capsys.readouterr().out


def test_a_long_media_path_such_as_a_data_url_is_elided_as_long_text_is(tmp_path, capsys):
    """An image given inline (ms-swift's data:image/png;base64,... URLs) was printed whole on the media line,
    tens of kilobytes of base64, whatever --max-chars said."""
    url = "data:image/png;base64," + "QUJD" * 10_000
    row = {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
                                                     {"type": "image_url", "image_url": {"url": url}}]},
                        {"role": "assistant", "content": "A cat."}]}
    path = tmp_path / "image.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["show", "ms_swift", "--data-files", str(path)]) == 0
    media = capsys.readouterr().out.split("media: ", 1)[1]  # (wrapped at the console width)
    assert len(media) < 700 and f"of {len(url):,} chars elided" in " ".join(media.split())
    assert "".join(media.split()).startswith("images:data:image/png;base64,QUJD")
    assert main(["show", "ms_swift", "--data-files", str(path), "--max-chars", "0"]) == 0  # 0: never elide
    assert url in capsys.readouterr().out.replace("\n", "")


def test_colours_on_a_terminal(cache_dir):
    row = td.load("nestful", data_files=td.sample_files("nestful"), split="train", cache_dir=cache_dir)[0]
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, width=100).print(render_row(row))
    assert "\x1b[" in buffer.getvalue()


def test_demo_previews_one_row_of_every_source(capsys, cache_dir, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", Path(cache_dir))  # demo has no --cache-dir
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for source in source_names():
        assert f"{source}: " in out and f"{source}/" in out
    assert out.count("╭─ [0] ") >= len(source_names())


def _markup_file(tmp_path):
    """An ms-swift row whose tool name holds what rich reads as a closing markup tag."""
    path = tmp_path / "markup.jsonl"
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": "look [bold]this[/bold] up"},
        {"role": "tool_call", "content": json.dumps({"name": "lookup[/x]", "arguments": {"q": "[red]a"}})},
        {"role": "tool_response", "content": '{"r": 1}'},
        {"role": "assistant", "content": "done"}]}) + "\n")
    return path


def test_names_and_ids_in_panel_titles_are_text_not_markup(tmp_path, capsys):
    """A result's panel title names its call and tool: as a str, rich parsed it as markup, so a tool named
    'lookup[/x]' stopped `show` with 'unexpected MarkupError ... (a bug)'."""
    assert main(["show", "ms_swift", "--data-files", str(_markup_file(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "[2] tool · result of call_0 (lookup[/x])" in out
    assert "→ lookup[/x]  id call_0" in out and "look [bold]this[/bold] up" in out and '"q": "[red]a"' in out


def test_terminal_control_sequences_in_the_data_are_shown_not_sent_to_the_terminal(tmp_path, capsys):
    """An ESC in a message (clear the screen, set the window title) or a C1 CSI reached the terminal raw, and a
    pipe got them as bytes; now they show as their escape, and `--config raw` stays JSON that parses."""
    row = {"messages": [
        {"role": "user", "content": "clear \x1b[2J title \x1b]0;pwned\x07 csi \x9b31m tab\tend"},
        {"role": "tool_call", "content": json.dumps({"name": "f\x1b[31m", "arguments": {"q": "a\x9bb\x7f"}})},
        {"role": "tool_response", "content": "ok \x1b[0m"},
        {"role": "assistant", "content": "done"}]}
    path = tmp_path / "controls.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert main(["show", "ms_swift", "--data-files", str(path)]) == 0
    out = capsys.readouterr().out
    assert not any(0x7f <= ord(c) < 0xa0 or (ord(c) < 0x20 and c not in "\n") for c in out)
    assert "clear \\u001b[2J title \\u001b]0;pwned" in out and "csi \\u009b31m" in out
    assert "→ f\\u001b[31m" in out and '"q": "a\\u009bb\\u007f"' in out and "ok \\u001b[0m" in out
    assert main(["show", "ms_swift", "--data-files", str(path), "--config", "raw", "--max-chars", "0"]) == 0
    out = capsys.readouterr().out
    assert not any(0x7f <= ord(c) < 0xa0 for c in out)
    assert json.loads(out)["messages"][0]["content"] == row["messages"][0]["content"]


@pytest.mark.parametrize("value", ["-5", "many"])
def test_a_negative_or_non_numeric_max_chars_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as info:
        main(["show", "ms_swift", "--sample", "--max-chars", value])
    assert info.value.code == 2
    assert "--max-chars: must be a number of characters, 0 or more (0: never elide)" in capsys.readouterr().err


def test_plain_text_lines_quoting_the_data_send_no_control_characters_to_the_terminal(tmp_path, capsys, caplog):
    """`show` escaped an ESC in the data, but `validate`'s table (a rule message naming the tool and argument
    key), `export`'s skipped rows and the skipped-row log lines printed it raw: a tool name could clear the
    screen or set the window title of whoever checked the data."""
    tool = "f\x1b[2J\x1b]0;pwned\x07"
    row = {"messages": [
        {"role": "user", "content": "q"},
        {"role": "tool_call", "content": json.dumps({"name": tool, "arguments": {"k\x1b[31m": 1}})},
        {"role": "assistant", "content": "done"}],
        "tools": [{"type": "function", "function": {"name": tool, "description": "d",
                                                    "parameters": {"type": "object", "properties": {}}}}]}
    path = tmp_path / "controls.jsonl"
    path.write_text(json.dumps(row) + "\n")

    def raw_controls(text):
        return [c for c in text if 0x7f <= ord(c) < 0xa0 or (ord(c) < 0x20 and c not in "\n\t")]

    assert main(["validate", "ms_swift", "--data-files", str(path)]) == 0
    out = capsys.readouterr().out
    assert "declares no parameter" in out and "f\\u001b[2J\\u001b]0;pwned\\u0007" in out
    assert raw_controls(out) == []
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        assert main(["export", "ms_swift", "--data-files", str(path), "--format", "toolmind", "--out",
                     str(tmp_path / "out"), "--on-error", "skip"]) == 1
    out = capsys.readouterr().out
    assert "has no result" in out and "f\\u001b[2J" in out and raw_controls(out) == []
    logged = [r.getMessage() for r in caplog.records if "skipped row" in r.getMessage()]
    assert logged and all("f\\u001b[2J" in line and raw_controls(line) == [] for line in logged)


def test_bidirectional_overrides_in_the_data_are_shown_as_escapes(tmp_path, capsys):
    """A right-to-left override in a tool name reversed the rest of the line on terminals that apply it ("Trojan
    source"): show and the plain-text commands write it as its escape; right-to-left text itself stays."""
    tool = "get\u202eerehw\u202c_x"
    row = {"messages": [
        {"role": "user", "content": "שלום \u2067isolated\u2069"},
        {"role": "tool_call", "content": json.dumps({"name": tool, "arguments": {}})},
        {"role": "tool_response", "content": "ok"},
        {"role": "assistant", "content": "done"}],
        "tools": [{"type": "function", "function": {"name": "other", "description": "d",
                                                    "parameters": {"type": "object", "properties": {}}}}]}
    path = tmp_path / "bidi.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n")
    bidi = {chr(c) for c in [*range(0x202a, 0x202f), *range(0x2066, 0x206a)]}
    assert main(["show", "ms_swift", "--data-files", str(path)]) == 0
    out = capsys.readouterr().out
    assert not bidi & set(out)
    assert "get\\u202eerehw\\u202c_x" in out and "שלום \\u2067isolated\\u2069" in out
    assert main(["validate", "ms_swift", "--data-files", str(path)]) == 1  # call.unknown_tool names the tool
    out = capsys.readouterr().out
    assert "get\\u202eerehw\\u202c_x" in out and not bidi & set(out)


def test_demo_takes_several_sources_after_one_source_flag_as_the_readme_writes_it(capsys):
    """README: `demo [--source S ...]`; `--source nestful ms_swift` was a usage error (the flag took one value
    and had to be repeated). Both spellings name the same sources now."""
    assert main(["demo", "--source", "nestful", "ms_swift", "--streaming"]) == 0
    together = capsys.readouterr().out
    assert main(["demo", "--source", "nestful", "--source", "ms_swift", "--streaming"]) == 0
    assert capsys.readouterr().out == together
    shown = [line.split(":")[0] for line in together.splitlines() if line.startswith("== ")]
    assert shown == ["== nestful", "== ms_swift"]


def test_show_refuses_a_negative_row_before_reading_any_row(capsys, monkeypatch):
    """``--row -1`` was taken: every row of the data was read looking for row -1 (a whole upstream split), then
    the command said the split has no row -1, or stopped at an unrelated bad row on the way."""
    from conftest import shared_data
    from tooluse_datasets.builders.ms_swift.source import MsSwiftSource

    files = [str(p) for p in sorted(shared_data("ms_swift").glob("*.jsonl"))]
    reads = []
    original = MsSwiftSource.read
    monkeypatch.setattr(MsSwiftSource, "read", lambda self, *a, **kw: reads.append(1) or original(self, *a, **kw))
    with pytest.raises(SystemExit) as exit_:
        main(["show", "ms_swift", "--data-files", *files, "--row", "-1"])
    assert exit_.value.code == 2
    assert "argument --row: must be a row number, 0 or more; got '-1'" in capsys.readouterr().err
    assert not reads
    assert main(["show", "ms_swift", "--data-files", *files, "--row", "0"]) == 0  # 0 is still the first row
    assert "ms_swift/agent_support_doc_examples_en/0" in capsys.readouterr().out


def test_error_and_skip_lines_escape_control_characters_as_the_tables_do(tmp_path, capsys, caplog):
    """Messages quote the data with repr, which writes an ESC `\\x1b` and a carriage return `\\r`: error lines,
    skipped rows and log lines said `'user\\x1b[2J'` where `show`, `validate`, `verify` and `score` write
    `\\u001b`. Every line now writes a control character one way, whether it quotes the value or shows it."""
    rows = [json.loads(line) for line in
            shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()]
    rows[0]["messages"][0]["role"] = "user\x1b[2J\r"
    call = json.loads(rows[1]["messages"][2]["content"])
    call["arguments"] = {"x\x9b31m": 1}  # an argument the tool does not declare (a validation finding)
    rows[1]["messages"][2]["content"] = json.dumps(call)
    path = tmp_path / "controls.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    quoted_role = "'user\\u001b[2J\\u000d'"

    def python_escapes(text):
        return [e for e in ("\\x1b", "\\x9b", "\\r'") if e in text]

    assert main(["export", "ms_swift", "--data-files", str(path), "--out", str(tmp_path / "raise")]) == 2
    err = capsys.readouterr().err
    assert quoted_role in err and python_escapes(err) == [], err
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        assert main(["export", "ms_swift", "--data-files", str(path), "--out", str(tmp_path / "skip"),
                     "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    assert quoted_role in out and python_escapes(out) == [], out
    logged = [r.getMessage() for r in caplog.records if "skipped row" in r.getMessage()]
    assert logged and all(quoted_role in line and python_escapes(line) == [] for line in logged)
    main(["validate", "ms_swift", "--data-files", str(path), "--on-error", "skip"])
    out = capsys.readouterr().out
    assert quoted_role in out and "x\\u009b31m" in out and python_escapes(out) == [], out


def test_show_writes_the_control_characters_rich_would_drop_as_escapes_too(tmp_path, capsys):
    """`show` left a carriage return, a bell, a backspace, a vertical tab and a form feed to rich, which drops them:
    "4\\r2" was shown as "42", a value the row does not hold, where `validate` and the error lines write
    `\\u000d`. They are written as the other control characters are."""
    rows = [json.loads(line) for line in
            shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()]
    rows[0]["messages"][0]["content"] = "aqi 4\r2 bell\x07 bs\x08 vt\x0b ff\x0c end"
    path = tmp_path / "controls.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n")
    assert main(["show", "ms_swift", "--data-files", str(path)]) == 0
    out = capsys.readouterr().out
    assert "aqi 4\\u000d2 bell\\u0007 bs\\u0008 vt\\u000b ff\\u000c end" in out, out


def test_json_outputs_write_c1_controls_and_bidi_overrides_as_escapes(tmp_path, capsys):
    """`validate --json` and `stats` print JSON, which writes a C0 control as its escape but a C1 CSI (\\x9b) or a
    right-to-left override as it is: an argument key holding them reached the terminal raw from the field names
    these outputs list. They are written as the escapes every other line uses; the JSON reads back the same."""
    rows = [json.loads(line) for line in
            shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()]
    key = "x\x9b31m\u202e"
    call = json.loads(rows[1]["messages"][2]["content"])
    call["arguments"] = {key: 1}  # an argument the tool does not declare: validation findings name it
    rows[1]["messages"][2]["content"] = json.dumps(call)
    path = tmp_path / "controls.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    field = f"messages[1].tool_calls[0].function.arguments.{key}"

    def raw_controls(text):
        return [c for c in text if 0x7f <= ord(c) < 0xa0 or c in "\u202e"]

    for command in (["validate", "ms_swift", "--data-files", str(path), "--json"],
                    ["stats", "ms_swift", "--data-files", str(path)]):
        main(command)
        out = capsys.readouterr().out
        assert raw_controls(out) == [] and "arguments.x\\u009b31m\\u202e" in out, command
        assert field in json.dumps(json.loads(out), ensure_ascii=False), command


def test_show_says_which_id_it_did_not_find_with_the_escapes_of_every_other_line(capsys):
    """The error line of `show --id` quoted the id with repr (`'x\\x1b[2J'`), unlike every other line."""
    assert main(["show", "ms_swift", "--sample", "--id", "x\x1b[2J"]) == 2
    err = capsys.readouterr().err
    assert "no id 'x\\u001b[2J'" in err and "\\x1b" not in err, err


def test_the_skip_summary_escapes_a_field_that_holds_a_key_of_the_data(tmp_path, capsys, caplog):
    """A skip is counted under its field, which may name a key of the data (a tool's parameter): the summary line
    `export` prints, that loads log and SkipReport.summary() gives (...skipped (ConversionError:...)) held its ESC raw."""
    rows = [json.loads(line) for line in
            shared_data("ms_swift", "agent_support_doc_examples_en.jsonl").read_text().splitlines()]
    tools = json.loads(rows[0]["tools"])
    tools[0]["function"]["parameters"]["properties"]["p\x1b[2J"] = {"type": "integer", "enum": [1, 2]}
    rows[0]["tools"] = json.dumps(tools)  # LLaMA-Factory's tool prompt cannot join integer enum values
    path = tmp_path / "enum.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level("WARNING", logger="tooluse_datasets"):
        assert main(["export", "ms_swift", "--data-files", str(path), "--format", "llamafactory", "--out",
                     str(tmp_path / "out"), "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    summary = "2 rows read, 1 skipped (ConversionError:tools[0].function.parameters.properties.p\\u001b[2J.enum x1)"
    assert summary in out and "\x1b" not in out, out
    logged = [r.getMessage() for r in caplog.records]
    assert logged and not any("\x1b" in line for line in logged), logged
    report = td.SkipReport()
    list(td.load("ms_swift", "llamafactory", data_files=str(path), split="train", streaming=True, on_error="skip",
                 report=report))
    assert report.summary() == summary


def write_one_call_row(path: Path, name: str) -> Path:
    """An ms-swift file of one row: a call of the tool ``name``, its result (panel ``[2] tool``), then an answer."""
    path.write_text(json.dumps({
        "tools": [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}],
        "messages": [{"role": "user", "content": "q"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"type": "function", "function": {"name": name, "arguments": "{}"}}]},
                     {"role": "tool", "content": "the result"},
                     {"role": "assistant", "content": "done"}]}) + "\n")
    return path


def test_a_panel_title_too_wide_for_the_console_is_shown_whole_not_cut(tmp_path, capsys):
    """A result's title names its call and tool; rich cuts a title wider than the console without a mark, so a
    result answering a tool of a long name (100 columns in a pipe) lost the end of the name, and nothing said so.
    The whole title then goes on the panel's first line, wrapped like any text."""
    name = "lookup_" + "x" * 120 + "_END"
    path = write_one_call_row(tmp_path / "long_name.jsonl", name)
    assert main(["show", "ms_swift", "--data-files", str(path)]) == 0
    out = capsys.readouterr().out
    result = out[out.index("[2] tool"):out.index("[3] assistant")]
    assert result.splitlines()[0].startswith("[2] tool ─")  # the title keeps its start
    text = "".join(line.strip("│ ") for line in result.splitlines()[1:]).replace(" ", "")  # (wrapped lines)
    assert f"resultofcall_0({name})" in text and "theresult" in text
    assert max(len(line) for line in out.splitlines()) <= 100


@pytest.mark.parametrize("spare", [4, 5])
def test_a_panel_title_a_few_columns_narrower_than_the_console_is_shown_whole(tmp_path, capsys, spare):
    """rich draws a title between "╭─ " and "─╮" and keeps it whole only with five columns to spare: with four, the
    title was taken to fit and lost its last character (the ")" closing the tool's name), nothing said so. With
    five it is whole in the title, as it always was."""
    from tooluse_datasets.preview import PIPE_WIDTH

    name = "lookup_" + "x" * (PIPE_WIDTH - spare - len("[2] tool · result of call_0 ()") - len("lookup_"))
    title = f"[2] tool · result of call_0 ({name})"
    assert len(title) == PIPE_WIDTH - spare
    path = write_one_call_row(tmp_path / "name.jsonl", name)
    assert main(["show", "ms_swift", "--data-files", str(path)]) == 0
    out = capsys.readouterr().out
    result = out[out.index("[2] tool"):out.index("[3] assistant")].splitlines()
    if spare == 5:
        assert result[0].startswith(title)
    else:
        assert result[0].startswith("[2] tool ─") and f"result of call_0 ({name})" in result[1]
