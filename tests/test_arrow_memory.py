"""The Arrow memory pool the package's reads and tables allocate from (see tooluse_datasets/arrow_memory.py)."""
from __future__ import annotations

import concurrent.futures
import contextlib
import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import shared_data
from datasets import Features, Json, Value, interleave_datasets

import tooluse_datasets as td
from tooluse_datasets import arrow_memory
from tooluse_datasets.arrow_rows import RowEncoder
from tooluse_datasets.shards.parquet import open_parquet

needs_mimalloc_default = pytest.mark.skipif(
    not sys.platform.startswith("linux") or pa.default_memory_pool().backend_name != "mimalloc",
    reason="the package changes pools only where pyarrow's default is mimalloc on Linux")


@pytest.fixture
def fresh_choice(monkeypatch):
    arrow_memory.replacement_pool.cache_clear()
    yield monkeypatch
    arrow_memory.replacement_pool.cache_clear()


@needs_mimalloc_default
def test_linux_mimalloc_default_gives_jemalloc_or_system(fresh_choice):
    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    pool = arrow_memory.package_memory_pool()
    expected = "jemalloc" if "jemalloc" in pa.supported_memory_backends() else "system"
    assert pool is not None and pool.backend_name == expected


def test_users_choice_of_pool_is_kept(fresh_choice):
    fresh_choice.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
    assert arrow_memory.package_memory_pool() is None


def test_default_pool_is_restored_after_an_error():
    before = pa.default_memory_pool().backend_name
    with pytest.raises(RuntimeError):
        with arrow_memory.default_pool(pa.system_memory_pool()):
            assert pa.default_memory_pool().backend_name == "system"
            raise RuntimeError("boom")
    assert pa.default_memory_pool().backend_name == before


def _allocated_while(pool: pa.MemoryPool, make) -> int:
    """Bytes ``pool`` holds while what ``make`` returns is alive, beyond what it held before."""
    before = pool.bytes_allocated()
    kept = make()
    grown = pool.bytes_allocated() - before
    del kept
    return grown


@needs_mimalloc_default
def test_parquet_reads_and_tables_allocate_from_the_package_pool(tmp_path, fresh_choice):
    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    pool = arrow_memory.package_memory_pool()
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"messages": ["x" * 5000] * 200}), path)

    def first_batch():
        with open_parquet(str(path)) as pf:
            return next(pf.iter_batches(batch_size=200))

    read = _allocated_while(pool, first_batch)
    assert read >= 200 * 5000
    assert pa.default_memory_pool().backend_name == "mimalloc"  # the user's default is left as it was

    encoder = RowEncoder(Features({"id": Value("string"), "args": Json()}))
    rows = [encoder.encode_row({"id": str(i), "args": {"text": "y" * 1000}}) for i in range(200)]
    built = _allocated_while(pool, lambda: encoder.table(rows))
    assert built >= 200 * 1000


@needs_mimalloc_default
def test_files_opened_by_several_threads_at_once_leave_the_default_pool_as_it_was(tmp_path, fresh_choice):
    # datasets' interleave_datasets fetches the next row of each stream in a thread of its own, so streams
    # open their Parquet files at the same time: swaps of the default pool must not interleave.
    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    pool = arrow_memory.package_memory_pool()
    sample = str(tmp_path / "rows.parquet")  # large enough for its reads to stand out in the pool's count
    pq.write_table(pa.table({"messages": ["x" * 5000] * 200}), sample)
    threads = 8
    start = threading.Barrier(threads)

    with contextlib.ExitStack() as files:
        def open_often(_):
            start.wait()
            return [files.enter_context(open_parquet(sample)) for _ in range(25)]

        with concurrent.futures.ThreadPoolExecutor(threads) as executor:
            opened = [pf for pfs in executor.map(open_often, range(threads)) for pf in pfs]
        assert pa.default_memory_pool().backend_name == "mimalloc"
        # each reader keeps the pool it was made with: the package's, whichever thread's swap was in place
        # (read in one thread: the pool's count of allocations made in Arrow's own threads lagged in some runs)
        assert all(_allocated_while(pool, lambda: pf.read_row_group(0, use_threads=False)) >= 200 * 5000
                   for pf in opened)


@needs_mimalloc_default
def test_interleaved_streams_leave_the_default_pool_as_it_was(fresh_choice):
    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    sample = td.sample_files("toolmind")["train"]
    ids = {row["id"] for row in td.load("toolmind", data_files=sample, split="synthetic", streaming=True)}
    for _ in range(5):
        streams = [td.load("toolmind", data_files=sample, split="synthetic", streaming=True) for _ in range(4)]
        assert {row["id"] for row in interleave_datasets(streams)} == ids
        assert pa.default_memory_pool().backend_name == "mimalloc"


def test_nested_use_restores_the_pool_of_each_level():
    before = pa.default_memory_pool().backend_name
    with arrow_memory.default_pool(pa.system_memory_pool()):
        with arrow_memory.default_pool(pa.system_memory_pool()):
            assert pa.default_memory_pool().backend_name == "system"
        assert pa.default_memory_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == before


@needs_mimalloc_default
def test_a_pool_the_user_sets_after_the_first_read_is_kept(tmp_path, fresh_choice):
    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"messages": ["x" * 5000] * 200}), path)
    with open_parquet(str(path)):
        pass  # the package has chosen its pool
    before, users = pa.default_memory_pool(), pa.system_memory_pool()
    pa.set_memory_pool(users)
    try:
        with open_parquet(str(path)) as pf:
            assert _allocated_while(users, lambda: pf.read_row_group(0, use_threads=False)) >= 200 * 5000
        encoder = RowEncoder(Features({"id": Value("string"), "args": Json()}))
        rows = [encoder.encode_row({"id": str(i), "args": {"text": "y" * 1000}}) for i in range(200)]
        assert _allocated_while(users, lambda: encoder.table(rows)) >= 200 * 1000
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)


def test_without_jemalloc_the_system_allocator_replaces_mimalloc(fresh_choice):
    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    fresh_choice.setattr(sys, "platform", "linux")
    fresh_choice.setattr(pa, "supported_memory_backends", lambda: ["mimalloc", "system"])
    fresh_choice.setattr(pa, "default_memory_pool", pa.mimalloc_memory_pool)
    assert arrow_memory.package_memory_pool().backend_name == "system"


@needs_mimalloc_default
def test_prepared_record_batches_are_joined_in_the_package_pool(fresh_choice):
    # Prepare joins a batch's tables into one record batch (builder.write_batches): under mimalloc that copy
    # refaulted huge pages a batch at a time, as the tables themselves did before they moved to this pool.
    from tooluse_datasets.builder import write_batches
    from tooluse_datasets.schema import UNIFIED_FEATURES

    fresh_choice.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    pool = arrow_memory.package_memory_pool()
    files = [str(p) for p in sorted(shared_data("ms_swift").glob("*.jsonl"))]
    rows = list(td.load("ms_swift", data_files=files, split="train", streaming=True))
    encoder = RowEncoder(UNIFIED_FEATURES)
    tables = [encoder.table([encoder.encode_row(row)]) for row in rows]
    joined = []
    grown = _allocated_while(pool, lambda: joined.extend(write_batches(tables, rows=1000)) or joined)
    assert [t.num_rows for t in joined] == [len(rows)] and len(rows) > 1
    assert joined[0].column("messages").num_chunks == 1
    assert grown >= joined[0].nbytes
