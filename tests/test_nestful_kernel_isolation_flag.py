"""Requiring the sandbox's kernel isolation from the command line (`verify`/`score --kernel-isolation`) and from
load() (`execution_kernel_isolation=True`, what `export`/`stats`/`mirror --option` pass): where the kernel
isolates, the runs say so; where it cannot, the run stops with one typed error instead of falling back to the
audit hook alone. The refusal is tested on every machine, with a sandbox whose kernel is made to refuse (our own
child module, its isolate() replaced); upstream functions run only in the sandbox, on the real rows."""
from __future__ import annotations

import json
import textwrap

import pytest

import tooluse_datasets as td
from tooluse_datasets import cli
from tooluse_datasets.builders.nestful.execution import SandboxLimits, SequenceJob, run_sequences

from conftest import shared_data

CURRENT = ("nestful", "third_party", "reconstructed_current_v2", "rows_github_native_format.jsonl")
FUNCTIONS = ("nestful", "data_v2", "executable_functions")
REFUSED = "unavailable: unshare failed (Operation not permitted)"


@pytest.fixture(scope="module")
def functions_dir():
    return str(shared_data(*FUNCTIONS))


@pytest.fixture
def predictions(tmp_path):
    """Upstream's result rows for the real rows, each predicting its own gold calls (all win)."""
    rows = [json.loads(line) for line in shared_data(*CURRENT).read_text().splitlines() if line.strip()]
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps({
        "sample_id": r["sample_id"], "input": r["input"], "output": json.dumps(r["output"]),
        "gold_answer": json.dumps(r["gold_answer"]), "tools": json.dumps(r["tools"]),
        "generated_text": json.dumps(r["output"])}) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def kernel_refuses(tmp_path, monkeypatch):
    """The sandbox started through a script that runs its child module with isolate() reporting what a kernel
    without namespaces for this user reports."""
    from tooluse_datasets.builders.nestful.execution import sandbox

    script = tmp_path / "refusing_child.py"
    script.write_text(textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("child", {str(sandbox.CHILD)!r})
        child = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(child)
        child.isolate = lambda network, kernel, work, disk_mb: (
            {{k: "off" if mode is False else {REFUSED!r} for k, mode in
              (("network", network), ("filesystem", kernel), ("processes", kernel))}}, False)
        sys.exit(child.main())
    """))
    monkeypatch.setattr(sandbox, "CHILD", script)


def machine_isolates(functions_dir) -> bool:
    row = json.loads(shared_data(*CURRENT).read_text().splitlines()[0])
    (probe,) = run_sequences([SequenceJob(row["output"], {t["name"]: ["result"] for t in row["tools"]})],
                             functions_dir, SandboxLimits())
    return (probe.filesystem, probe.processes) == ("read-only", "namespace")


def test_required_kernel_isolation_runs_where_the_machine_gives_it(functions_dir, predictions, capsys):
    if not machine_isolates(functions_dir):
        pytest.skip("this machine cannot give the sandbox kernel isolation (no namespaces for this user): the "
                    "refusal is tested below")
    code = cli.main(["score", "nestful", predictions, "--executable-functions", functions_dir, "--json",
                     "--kernel-isolation"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["win_rate"] == 1.0
    assert out["isolation"] == {"network": "namespace", "filesystem": "read-only", "processes": "namespace"}
    code = cli.main(["verify", "nestful", "--data-files", str(shared_data(*CURRENT)), "--executable-functions",
                     functions_dir, "--json", "--kernel-isolation"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and (out["rows"], out["reproduced"]) == (2, 2)
    assert (out["filesystem"], out["processes"]) == ("read-only", "namespace")


def test_score_and_verify_stop_with_one_line_where_the_kernel_cannot_isolate(kernel_refuses, functions_dir,
                                                                             predictions, capsys):
    # Without the flag the sandbox falls back to the audit hook and says so...
    assert cli.main(["score", "nestful", predictions, "--executable-functions", functions_dir, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["win_rate"] == 1.0 and out["isolation"]["filesystem"] == REFUSED
    # ...with it, the run stops: one line, no traceback, no scores computed without the isolation asked for
    for command in (["score", "nestful", predictions], ["verify", "nestful", "--data-files",
                                                         str(shared_data(*CURRENT))]):
        code = cli.main([*command, "--executable-functions", functions_dir, "--json", "--kernel-isolation"])
        captured = capsys.readouterr()
        assert code == 2 and captured.out == ""
        assert captured.err.strip() == (f"error: sandbox: kernel isolation was required: file system {REFUSED}; "
                                        f"processes {REFUSED}")


def test_score_refuses_kernel_isolation_when_nothing_runs(predictions, capsys):
    assert cli.main(["score", "nestful", predictions, "--no-win-rate", "--kernel-isolation"]) == 2
    assert "--kernel-isolation applies to the win rate and the executions it makes, which --no-win-rate skips" in \
        capsys.readouterr().err


def test_executed_loads_require_it_with_an_option(kernel_refuses, functions_dir, tmp_path, capsys):
    files = str(shared_data(*CURRENT))
    options = dict(data_files=files, split="train", streaming=True, execute=True, executable_functions=functions_dir)
    assert len(list(td.load("nestful", **options))) == 2  # (the audit hook alone)
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("nestful", on_error="skip", report=report, execution_kernel_isolation=True, **options))
    assert rows == [] and dict(report.by_reason) == {"SandboxError:sandbox": 2}
    assert all("kernel isolation was required" in r["message"] and r["row_id"] for r in report.rows)
    # The commands that execute through --option: one line, exit 2
    out = tmp_path / "out"
    code = cli.main(["export", "nestful", "--data-files", files, "--format", "toolmind", "--out", str(out),
                     "--option", "execute=true", "--option", f"executable_functions={functions_dir}",
                     "--option", "execution_kernel_isolation=true"])
    err = capsys.readouterr().err
    assert code == 2 and "sandbox: kernel isolation was required" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="execution_kernel_isolation only applies to executed rows"):
        td.load("nestful", data_files=files, split="train", streaming=True, execution_kernel_isolation=True)
