"""Property-based fuzzing of every source's reader: files of mutated real rows (the bundled samples and, where
present, the upstream rows in ../shared/data), JSON Lines, JSON and Parquet, loaded with ``on_error="skip"``
map-style and streaming. Mutations, file variations and the checked properties are in
``benchmarks/fuzz_rows.py`` (shared with ``benchmarks/fuzz_run.py``, the 10,000-rows-per-source run):

* every row is converted or reported with its file, row and reason, and the counts add up
  (rows converted + rows skipped == rows read == rows in the files);
* only the package's error types escape (none does, in skip mode);
* map-style and streaming give the same rows, as JSON, and the same skip counts;
* ids are unique, and every number planted in call arguments (``-0.0``, ``5e-324``, ``2**63``, ``2**70``...)
  comes back with the same bits, while non-finite ones (``NaN``, ``Infinity``, ``1e400``) make the row reported.

No example is timed (hypothesis' deadline is off): how long rows take is measured by ``benchmarks/fuzz_run.py``.

Derandomized, so a run is reproducible; ``TOOLUSE_FUZZ_EXAMPLES=N`` runs N examples per source instead of the
default (each example holds 1-3 files of up to 8 rows: about 6 mutated rows).
"""
from __future__ import annotations

import logging
import os
import random
import re
import tempfile
from pathlib import Path

import pytest

from conftest import SHARED_DATA, benchmark_module

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install -e '.[test]'")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

fuzz_rows = benchmark_module("fuzz_rows")

EXAMPLES = int(os.environ.get("TOOLUSE_FUZZ_EXAMPLES", "150"))


@pytest.fixture(autouse=True)
def quiet_skips():
    """Thousands of skipped rows are logged as warnings; the checks read the skip reports instead."""
    logger = logging.getLogger("tooluse_datasets")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("source", fuzz_rows.SOURCES)
def test_every_mutated_row_is_converted_exactly_or_reported(source):
    import datasets

    datasets.disable_progress_bars()
    seeds = fuzz_rows.seed_rows(source, SHARED_DATA)
    numbers_checked = []

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(seed=st.integers(0, 2**32 - 1), files=st.integers(1, 3), rows_per_file=st.integers(0, 8))
    def check(seed, files, rows_per_file):
        with tempfile.TemporaryDirectory() as folder:
            specs = fuzz_rows.make_files(source, seeds, Path(folder), random.Random(seed), files=files,
                                         rows_per_file=rows_per_file, huge_chars=50_000)
            mapped = fuzz_rows.load_case(source, specs, streaming=False, cache_dir=f"{folder}/cache")
            streamed = fuzz_rows.load_case(source, specs, streaming=True)
            result = fuzz_rows.check_case(source, specs, mapped, streamed)
            details = "\n".join(f"  {Path(s.path).name}: {s.items} rows, mutations {s.mutations}" for s in specs)
            assert not result.problems, f"seed {seed}:\n" + "\n".join(result.problems) + "\n" + details
            assert result.unaccounted == 0 and not result.escaped and not result.typed_failures
            numbers_checked.append(result.numbers_checked)

    check()
    assert sum(numbers_checked) > 0  # the exactness property was exercised, not vacuously true


@pytest.mark.parametrize("seed", [30, 68], ids=["messages", "split"])
def test_a_toolmind_parquet_refused_for_a_column_type_is_one_item(tmp_path, seed):
    """A ToolMind Parquet file whose split column is not text, or whose messages column holds no conversations,
    is one error naming the column (README): the fuzz check counted its rows as items and took the error for a
    row without a number, which failed whenever hypothesis generated such a file (its examples depend on the
    modules loaded, so on which tests ran before)."""
    import datasets

    datasets.disable_progress_bars()
    specs = fuzz_rows.make_files("toolmind", fuzz_rows.seed_rows("toolmind"), tmp_path, random.Random(seed),
                                 files=1, rows_per_file=3)
    mapped = fuzz_rows.load_case("toolmind", specs, streaming=False, cache_dir=str(tmp_path / "cache"))
    streamed = fuzz_rows.load_case("toolmind", specs, streaming=True)
    assert [(r["row"], r["field"]) for r in mapped.reported] == [(None, "messages" if seed == 30 else "split")]
    result = fuzz_rows.check_case("toolmind", specs, mapped, streamed)
    assert not result.problems and result.unaccounted == 0 and result.file_errors == 1


def test_the_fuzz_files_hold_what_their_specs_say(tmp_path):
    """The generator's own accounting, against a reading of the files it wrote (so that a generator bug cannot
    make the fuzz test pass or fail for the wrong reason): Parquet rows and JSON Lines lines counted here, the
    rows of a JSON array as the package's reader counts them (parsed whole or, where that fails, element by
    element), so that arrays with a bad element, a cut last element or text after them are checked too."""
    import pyarrow.parquet as pq

    from tooluse_datasets.shards.plan import whole_file_shard
    from tooluse_datasets.shards.reading import read_shard

    seeds = fuzz_rows.seed_rows("ms_swift", None)
    kinds = set()
    for seed in range(40):
        folder = tmp_path / str(seed)
        folder.mkdir()
        for spec in fuzz_rows.make_files("ms_swift", seeds, folder, random.Random(seed), files=3, rows_per_file=5):
            data = Path(spec.path).read_bytes()
            kinds.add((Path(spec.path).suffix, spec.kind, spec.whole_file_error))
            if spec.whole_file_error:
                assert spec.items == 1
            elif spec.kind == "parquet":
                assert spec.items == pq.ParquetFile(spec.path).metadata.num_rows
            elif spec.kind == "jsonl":
                assert spec.items == sum(1 for line in data.lstrip(b"\xef\xbb\xbf").split(b"\n") if line.strip())
            else:
                assert spec.items == sum(len(batch.items) for batch in read_shard(whole_file_shard(spec.path), 64))
    assert {(".jsonl", "jsonl", False), (".json", "json", False), (".parquet", "parquet", False),
            (".json", "jsonl", False), (".parquet", "parquet", True)} <= kinds


def test_mutated_json_arrays_read_alike_whole_one_by_one_in_runs_and_in_pieces(monkeypatch):
    """Differential: every JSON array the fuzzer writes (bad tokens in elements, a cut last element, text after
    the array, huge strings, planted numbers, BOMs, CRLF) gives the same items, errors included, parsed whole,
    delimited element by element, in runs of elements parsed together, and cut into pieces; and a resume at
    each position of a run gives the rest."""
    import json

    import tooluse_datasets as td
    from tooluse_datasets.shards import documents, plan, reading

    def shown(value):
        if isinstance(value, td.ToolUseDataError):
            return f"{type(value).__name__} {value.row} {value.field}: {value.message}"
        return json.dumps(value, sort_keys=True)

    def items(shard_list, resume=None):
        return [(n, shown(v)) for s in shard_list for b in reading.read_shard(s, 5, resume) for n, v in b.items]

    seeds = fuzz_rows.seed_rows("ms_swift", SHARED_DATA)
    compared = runs = 0
    for seed in range(60):
        with tempfile.TemporaryDirectory() as folder:
            specs = fuzz_rows.make_files("ms_swift", seeds, Path(folder), random.Random(seed), files=3,
                                         rows_per_file=12, huge_chars=20_000)
            for spec in specs:
                if spec.kind != "json" or spec.whole_file_error:
                    continue
                whole = plan.whole_file_shard(spec.path)
                expected = items([whole])
                with monkeypatch.context() as m:
                    m.setattr(documents, "ARRAY_WHOLE_BYTES", 0)
                    m.setattr(documents, "_ARRAY_READ_BYTES", 64)
                    m.setattr(documents, "RUN_BYTES", 0)
                    assert items([whole]) == expected, (seed, spec.path, "one by one")
                    m.setattr(documents, "RUN_BYTES", 2000)
                    assert items([whole]) == expected, (seed, spec.path, "in runs")
                    positions = [p for b in reading.read_shard(whole, 5) for p in b.positions]
                    runs += sum(offset < 0 for _, offset in positions)
                    for position in positions[:: max(1, len(positions) // 4)]:
                        rest = items([whole], resume=position)
                        assert rest == [(n, v) for n, v in expected if n >= position[0]], (seed, position)
                    assert items(plan.cut_array(spec.path, 3000)) == expected, (seed, spec.path, "pieces")
                compared += 1
    assert compared >= 20 and runs > 0  # arrays were compared, and runs were read


def test_the_scale_fuzz_run_runs(capsys):
    """``benchmarks/fuzz_run.py`` at a tiny size: it drives the converter's per-batch step itself (to time rows
    one by one), so a change of that step's signature must not leave the scale run broken."""
    fuzz_run = benchmark_module("fuzz_run")
    assert fuzz_run.main(["--rows", "24", "--files", "3", "--sources", "ms_swift", "--huge-chars", "2000"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"ms_swift: \d+ mutated rows in 3 files, .* escaped 0, typed load failures 0, unaccounted 0", out)
    assert re.search(r"slowest row \d+ ms of [1-9][\d,]* timed", out)
