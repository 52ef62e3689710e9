"""`verify` with expected failures (--expect-failures FILE, --expect-failure ID, expected_failures= in Python), so
that it can gate CI on data where some gold sequences are known not to reproduce. On the real rows: the toy row
that needs the network, and real math rows broken on purpose. Upstream functions run only in the sandbox."""
from __future__ import annotations

import json

import pytest

from tooluse_datasets import cli
from tooluse_datasets.builders.nestful.expected_failures import read_expected_failures
from tooluse_datasets.builders.nestful.verify import verify

from conftest import shared_data

TOY = ("nestful", "third_party", "AtakanTekparmak_NESTFUL_27c2028", "data_v2", "toy_data.jsonl")
CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
FUNCTIONS = ("nestful", "data_v2", "executable_functions")
NETWORK_ROW = "fa57c28a-e9d8-44fb-a358-a9404a557d5b"  # get_url_content("https://www.example.com"): refused


@pytest.fixture(scope="module")
def functions_dir():
    return str(shared_data(*FUNCTIONS))


@pytest.fixture
def rows_file(tmp_path):
    """The network row, a real math row (reproduces) and a copy of it dividing by zero (fails): ids in order."""
    network = json.loads(next(line for line in shared_data(*TOY).read_text().splitlines() if NETWORK_ROW in line))
    math_row = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
    broken = json.loads(json.dumps(math_row))
    broken["sample_id"] += "-zero"
    broken["output"][0]["arguments"]["arg_1"] = 0
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (network, math_row, broken)))
    return path, [NETWORK_ROW, math_row["sample_id"], broken["sample_id"]]


def run_verify(path, functions_dir, capsys, *extra):
    code = cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir,
                     "--json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def test_listed_failures_are_expected_and_pass_the_run(rows_file, functions_dir, tmp_path, capsys):
    path, (network, passing, broken) = rows_file
    listing = tmp_path / "expected.txt"
    listing.write_text(f"# known upstream failures\n\n{network}   # needs the network\n{broken}\n")
    code, out, _ = run_verify(path, functions_dir, capsys, "--expect-failures", str(listing))
    assert code == 0 and out["passed"] is True
    assert (out["rows"], out["reproduced"], out["failures"]) == (3, 1, [])
    assert [(f["sample_id"], f["reason"], f["expected_reason"]) for f in out["expected_failures"]] == [
        (network, "network", "needs the network"), (broken, "exception", "")]
    assert out["unexpected_passes"] == [] and out["expected_not_in_data"] == []
    # The table says which failures were expected, and why
    assert cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir,
                     "--expect-failure", network, "--expect-failure", broken]) == 0
    table = capsys.readouterr().out
    assert "expected failures (2, listed):" in table
    assert f"  {network} (code): network at output[0]: network access refused (urllib.Request) [expected]" in table
    assert f"  {broken} (math): exception at output[0]: divide: ZeroDivisionError: division by zero [expected]" in table


def test_an_unlisted_failure_still_fails_the_run(rows_file, functions_dir, capsys):
    path, (network, _, broken) = rows_file
    code, out, _ = run_verify(path, functions_dir, capsys, "--expect-failure", network)
    assert code == 1 and out["passed"] is False
    assert [f["sample_id"] for f in out["failures"]] == [broken]
    assert [f["sample_id"] for f in out["expected_failures"]] == [network]


def test_a_listed_row_that_reproduces_fails_the_run_so_the_list_stays_honest(rows_file, functions_dir, tmp_path,
                                                                            capsys):
    path, (network, passing, broken) = rows_file
    listing = tmp_path / "expected.txt"
    listing.write_text(f"{network}\n{broken}\n{passing}  # was broken upstream once\n")
    code, out, _ = run_verify(path, functions_dir, capsys, "--expect-failures", str(listing))
    assert code == 1 and out["passed"] is False and out["failures"] == []
    assert out["unexpected_passes"] == [{"sample_id": passing, "category": "math",
                                         "expected_reason": "was broken upstream once"}]
    cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir,
              "--expect-failures", str(listing)])
    table = capsys.readouterr().out
    assert "listed as expected failures but reproduce (1): take them off the list" in table
    assert f"  {passing} (math) [expected: was broken upstream once]" in table


def test_listed_ids_that_no_row_has_are_an_error_naming_them(rows_file, functions_dir, tmp_path, capsys):
    path, (network, _, broken) = rows_file
    listing = tmp_path / "expected.txt"
    listing.write_text(f"{network}\n{broken}\nd448887d-not-in-this-file  # one of upstream's four\n")
    code, out, err = run_verify(path, functions_dir, capsys, "--expect-failures", str(listing),
                                "--expect-failure", "typo-id")
    assert code == 2
    assert "error: ids listed as expected failures that no row verified has: d448887d-not-in-this-file, typo-id" in err
    assert out["expected_not_in_data"] == ["d448887d-not-in-this-file", "typo-id"] and out["passed"] is False


def test_the_python_api_takes_ids_or_ids_with_reasons(rows_file, functions_dir):
    path, (network, passing, broken) = rows_file
    report = verify(str(path), functions_dir=functions_dir, expected_failures={network: "network", broken: ""})
    assert report.passed and [f["sample_id"] for f in report.expected_failures] == [network, broken]
    report = verify(str(path), functions_dir=functions_dir, expected_failures=[network, passing, "absent"])
    assert not report.passed
    assert [f["sample_id"] for f in report.failures] == [broken]
    assert [p["sample_id"] for p in report.unexpected_passes] == [passing]
    assert report.expected_not_in_data == ["absent"]
    assert verify(str(path), functions_dir=functions_dir).passed is False  # nothing listed: as before
    with pytest.raises(TypeError, match="expected_failures takes ids"):
        verify(str(path), functions_dir=functions_dir, expected_failures=network)  # one id, not its characters


def test_list_files_are_read_line_by_line_with_comments(tmp_path):
    listing = tmp_path / "expected.txt"
    listing.write_bytes("\ufeff# header\r\n  a-1  \r\ns#2 # an id may hold '#'\r\n\r\nb#3\t#\tspaced  \r\na-1 # again\n"
                        "s#2 # listed twice\ns#2 # listed twice\n".encode())
    # an id listed again keeps every reason given (the second line's was dropped)
    assert read_expected_failures(listing) == {"a-1": "again", "s#2": "an id may hold '#'; listed twice",
                                               "b#3": "spaced"}


@pytest.mark.parametrize("content, message", [
    (b"a-1\nb-2 c-3  # two ids\n", r"expected\.txt', line 2: one id a line, got 'b-2 c-3'"),
    (b"a-1\n\xff\xfe\n", r"expected\.txt' is not UTF-8 text \(byte 4\)"),
])
def test_a_list_that_cannot_be_read_is_refused_before_any_row_runs(content, message, rows_file, tmp_path, capsys,
                                                                   monkeypatch):
    from tooluse_datasets.builders.nestful import verify as verify_module

    listing = tmp_path / "expected.txt"
    listing.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_expected_failures(listing)
    monkeypatch.setattr(verify_module, "run_sequences", lambda *a, **k: pytest.fail("rows ran"))
    path, _ = rows_file
    assert cli.main(["verify", "nestful", "--data-files", str(path), "--expect-failures", str(listing)]) == 2
    assert "error: ValueError: " in capsys.readouterr().err
    assert cli.main(["verify", "nestful", "--data-files", str(path), "--expect-failures",
                     str(tmp_path / "absent.txt")]) == 2
    assert "--expect-failures" in capsys.readouterr().err  # (named: not a bare "No such file or directory")


def test_the_table_shows_control_characters_of_an_id_as_escapes(tmp_path, functions_dir, capsys):
    """The table quotes sample ids and failure details from the data: a terminal control sequence in an id (ESC
    [2J clears the screen) is printed as a visible escape, never sent to the terminal."""
    row = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
    row["sample_id"] = "evil\x1b[2J"
    row["output"][0]["arguments"]["arg_1"] = 0  # divides by zero: a failure, listed in the table
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir]) == 1
    out = capsys.readouterr().out
    assert "evil\\u001b[2J" in out and "\x1b" not in out


FORGED = "nowhere\n  3a4b7b77-f0a1-4537-8623-432023f545bb (math): network: forged"


def find_file_row(sample_id: str) -> dict:
    """A row calling upstream's find_file_by_pattern on a folder that does not exist: it raises
    FileNotFoundError(f"Directory {directory_path} not found."), quoting its argument, line breaks included."""
    tool = {"name": "find_file_by_pattern", "description": "Searches a folder for a file name pattern.",
            "parameters": {"directory_path": {"type": "string", "description": "The folder."},
                           "pattern": {"type": "string", "description": "The pattern."}},
            "output_parameters": {"output_0": {"type": "array", "description": "The file path and name."}}}
    calls = [{"name": "find_file_by_pattern", "arguments": {"directory_path": FORGED, "pattern": "a"},
              "label": "$var1"}]
    return {"sample_id": sample_id, "input": "Find the file.", "output": calls, "tools": [tool],
            "gold_answer": ["nowhere/a", "a"]}


def test_a_multi_line_failure_detail_stays_on_its_failure_line(tmp_path, functions_dir, capsys):
    """Upstream code's messages quote their arguments: a line break in one printed a line of its own under the
    failure, which reads as another row's failure. The table keeps one line a failure, breaks as escapes."""
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(find_file_row("multi-line")) + "\n")
    assert cli.main(["verify", "nestful", "--data-files", str(path), "--executable-functions", functions_dir]) == 1
    lines = capsys.readouterr().out.splitlines()
    (failure,) = [line for line in lines if "FileNotFoundError" in line]
    assert failure.startswith("  multi-line (code): exception at output[0]: find_file_by_pattern: "
                              "FileNotFoundError: Directory "
                              "nowhere\\u000a  3a4b7b77")
    assert not any(line.startswith("  3a4b7b77") for line in lines)


def test_a_multi_line_execution_detail_stays_on_its_sample_line_when_scoring(tmp_path, functions_dir, capsys):
    row = find_file_row("multi-line")
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(dict(row, generated_text=json.dumps(row["output"]))) + "\n")
    assert cli.main(["score", "nestful", str(path), "--executable-functions", functions_dir, "--samples"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (sample,) = [line for line in lines if "FileNotFoundError" in line]
    assert sample.startswith("  multi-line: partial 1.000, win False, error at output[0]: exception: "
                             "find_file_by_pattern: "
                             "FileNotFoundError: Directory nowhere\\u000a  3a4b7b77")
    assert not any(line.startswith("  3a4b7b77") for line in lines)


def test_a_string_answer_lost_to_its_hf_str_text_says_so(tmp_path, functions_dir, cache_dir):
    """HF's text column holds str() of each answer: the toy row whose answer is a string looking like JSON reads as
    the object it spells, so its right calls lose; verify and an executed load say why, other mismatches do not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import tooluse_datasets as td

    rows = [json.loads(line) for line in shared_data(*TOY).read_text().splitlines()]
    row = next(r for r in rows if isinstance(r["gold_answer"], str) and r["gold_answer"].startswith("{"))
    broken = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
    broken["output"][0]["arguments"]["arg_1"] = 50  # a plain mismatch: 45.0, not 40.0
    path = tmp_path / "hf.parquet"
    pq.write_table(pa.Table.from_pylist([{"sample_id": r["sample_id"], "input": r["input"],
                                          "output": json.dumps(r["output"]), "tools": json.dumps(r["tools"]),
                                          "gold_answer": str(r["gold_answer"])} for r in (row, broken)]), path)
    note = "the answer is the gold answer's text itself: a text column (HF's) writes a string answer and the value"
    details = {f["sample_id"]: f["detail"] for f in verify(str(path), executable_functions=functions_dir).failures}
    assert set(details) == {row["sample_id"], broken["sample_id"]}
    assert note in details[row["sample_id"]] and note not in details[broken["sample_id"]]
    report = td.SkipReport()
    kept = td.load("nestful", split="train", data_files=str(path), execute=True, executable_functions=functions_dir,
                   require_reproduced=True, on_error="skip", report=report, cache_dir=cache_dir)
    messages = {e["row_id"].rsplit("/", 1)[1]: e["message"] for e in report.to_dict()["examples"]}
    assert len(kept) == 0 and note in messages[row["sample_id"]] and note not in messages[broken["sample_id"]]


def test_scoring_a_string_answer_lost_to_its_hf_str_gold_text_says_so(tmp_path, functions_dir, capsys):
    """Keyed predictions scored against HF's text column (str() of each answer): the gold calls of the toy row whose
    answer is a string looking like JSON lose to the object its text reads as, and the scores said nothing of why;
    they note it as verify does, for gold rows read from the file or given in HF's form, and not for another loss."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tooluse_datasets.builders.nestful.score import score_file

    rows = [json.loads(line) for line in shared_data(*TOY).read_text().splitlines()]
    row = next(r for r in rows if isinstance(r["gold_answer"], str) and r["gold_answer"].startswith("{"))
    broken = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
    broken["output"][0]["arguments"]["arg_1"] = 50  # a plain mismatch: 45.0, not 40.0
    hf_rows = [{"sample_id": r["sample_id"], "input": r["input"], "output": json.dumps(r["output"]),
                "tools": json.dumps(r["tools"]), "gold_answer": str(r["gold_answer"])} for r in (row, broken)]
    gold = tmp_path / "hf.parquet"
    pq.write_table(pa.Table.from_pylist(hf_rows), gold)
    keyed = tmp_path / "keyed.jsonl"
    keyed.write_text("".join(json.dumps({"sample_id": r["sample_id"], "calls": r["output"]}) + "\n"
                             for r in (row, broken)))
    note = "the answer is the gold answer's text itself: a text column (HF's) writes a string answer and the value"
    assert cli.main(["score", "nestful", str(keyed), "--gold-data-files", str(gold), "--parser", "calls", "--samples",
                     "--executable-functions", functions_dir, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(s["sample_id"], s["win"], s["execution"]["status"]) for s in out["samples"]] == [
        (row["sample_id"], False, "ok"), (broken["sample_id"], False, "ok")]
    assert [n.split(": ", 1)[0] for n in out["notes"] if note in n] == [row["sample_id"]]
    given = score_file(keyed, gold_rows={r["sample_id"]: r for r in hf_rows}, parser="calls",
                       executable_functions_dir=functions_dir)
    assert [n.split(": ", 1)[0] for n in given.notes if note in n] == [row["sample_id"]]


def test_a_listed_id_whose_row_cannot_be_read_is_said_to_be_possibly_unread(rows_file, functions_dir, capsys):
    path, (network, passing, broken) = rows_file
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1], lines[2][:150]]) + "\n")  # the listed row cut short
    code, out, err = run_verify(path, functions_dir, capsys, "--expect-failure", network, "--expect-failure", broken,
                                "--on-error", "skip")
    assert code == 2 and out["skipped"] == 1 and out["expected_not_in_data"] == [broken]
    assert (f"no row verified has: {broken}; 1 row(s) could not be read and were not verified (--on-error skip): "
            "a listed id may be one of them") in err
