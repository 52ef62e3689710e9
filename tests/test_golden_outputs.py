"""Every config of every source produces the same rows as the saved outputs, bit for bit.

The saved file (tests/golden/outputs.json) holds, per input set and config: the split names, the number of
rows, a sha256 prefix of each row's storage form (JSON leaves as their stored text, so floats and integers
are compared as written) and the skip counts. It was written by the conversion code before the batch
rewrite; a rewrite that changes any byte of any row fails here, naming the case, split and row.

Regenerate only for an intended change of output: ``TOOLUSE_WRITE_GOLDEN=1 pytest tests/test_golden_outputs.py``.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import tooluse_datasets as td

from conftest import PROJECT_ROOT, SHARED_DATA

GOLDEN = Path(__file__).parent / "golden" / "outputs.json"
WRITE = os.environ.get("TOOLUSE_WRITE_GOLDEN") == "1"
CONFIGS = ("unified", "raw", "swift", "toolmind")

NESTFUL_SHARED = {
    "toy": "nestful/third_party/AtakanTekparmak_NESTFUL_27c2028/data_v2/toy_data.jsonl",
    "github": "nestful/third_party/reconstructed_current_v2/rows_github_native_format.jsonl",
    "hf_strings": "nestful/third_party/reconstructed_current_v2/rows_hf_string_format.jsonl",
    "icl": "nestful/src/icl_examples.json",
}
MS_SWIFT_SHARED = ("agent_support_doc_examples_en.jsonl", "agent_support_doc_examples_zh.jsonl",
                   "custom_dataset_doc_agent_rows_en.jsonl")


@pytest.fixture(scope="module")
def generated_toolmind(tmp_path_factory) -> dict[str, str]:
    """Generated ToolMind-format files (the benchmark generator, fixed arguments): many layouts, all splits."""
    out = tmp_path_factory.mktemp("golden_toolmind")
    files = {}
    for name, extra in (("ascii", []), ("utf8", ["--utf8"])):
        path = out / f"{name}.parquet"
        subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "generate_toolmind.py"), str(path),
                        "--rows", "350", "--seed", "7", "--workers", "1", "--row-group-size", "100", *extra],
                       check=True, capture_output=True)
        files[name] = str(path)
    return files


def _cases(generated_toolmind) -> dict[str, tuple[str, object, tuple[str, ...]]]:
    """case name -> (source, data_files, configs)."""
    cases = {f"{s}/sample": (s, td.sample_files(s), CONFIGS) for s in ("nestful", "ms_swift", "toolmind")}
    mixed = {name: files for name, files in td.sample_files("all").items() if name in ("nestful", "ms_swift", "toolmind")}
    cases["all/sample"] = ("all", mixed, ("unified", "swift", "toolmind"))
    for name, path in generated_toolmind.items():
        cases[f"toolmind/generated_{name}"] = ("toolmind", path, CONFIGS)
    if SHARED_DATA.exists():
        for name, rel in NESTFUL_SHARED.items():
            cases[f"nestful/shared_{name}"] = ("nestful", str(SHARED_DATA / rel), CONFIGS)
        cases["ms_swift/shared"] = ("ms_swift", [str(SHARED_DATA / "ms_swift" / f) for f in MS_SWIFT_SHARED], CONFIGS)
    return cases


def _row_digest(row: dict) -> str:
    return hashlib.sha256(orjson.dumps(row)).hexdigest()[:16]


def _outputs(source: str, data_files, config: str, cache_dir: str) -> dict:
    report = td.SkipReport()
    splits = td.load(source, config, data_files=data_files, on_error="skip", cache_dir=cache_dir, report=report)
    out = {"skips": {"rows_read": report.rows_read, "skipped": report.skipped,
                     "by_reason": dict(sorted(report.by_reason.items()))}, "splits": {}}
    for split, ds in splits.items():
        rows = ds.data.table.to_pylist()  # storage form: JSON leaves as their stored text
        if rows:  # a split left empty by skips counts as absent
            out["splits"][split] = {"rows": len(rows), "digests": [_row_digest(r) for r in rows]}
    return out


def test_outputs_equal_the_saved_ones(generated_toolmind, cache_dir):
    if not WRITE and not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} is missing; write it with TOOLUSE_WRITE_GOLDEN=1")
    saved = {} if WRITE else json.loads(GOLDEN.read_text())
    cases = _cases(generated_toolmind)
    produced = {}
    for case, (source, data_files, configs) in cases.items():
        for config in configs:
            key = f"{case}/{config}"
            produced[key] = _outputs(source, data_files, config, cache_dir)
    if WRITE:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(produced, indent=0, sort_keys=True) + "\n")
        return
    missing = sorted(set(saved) - set(produced))
    if not SHARED_DATA.exists():
        missing = [k for k in missing if "/shared" not in k]
    assert not missing, f"saved cases not produced: {missing}"
    for key, got in produced.items():
        want = saved[key]
        assert got["skips"] == want["skips"], f"{key}: skip counts changed"
        assert sorted(got["splits"]) == sorted(want["splits"]), f"{key}: split names changed"
        for split, g in got["splits"].items():
            w = want["splits"][split]
            assert g["rows"] == w["rows"], f"{key}/{split}: {g['rows']} rows, saved {w['rows']}"
            for i, (a, b) in enumerate(zip(g["digests"], w["digests"])):
                assert a == b, f"{key}/{split}: row {i} differs from the saved output"
