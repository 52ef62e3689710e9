"""The Arrow memory pool the package's reads and tables allocate from (see tooluse_datasets/arrow_memory.py)."""
from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Features, Json, Value

from tooluse_datasets import arrow_memory
from tooluse_datasets.codec import RowEncoder
from tooluse_datasets.shards.parquet import open_parquet

needs_mimalloc_default = pytest.mark.skipif(
    not sys.platform.startswith("linux") or pa.default_memory_pool().backend_name != "mimalloc",
    reason="the package changes pools only where pyarrow's default is mimalloc on Linux")


@pytest.fixture
def fresh_choice(monkeypatch):
    arrow_memory.package_memory_pool.cache_clear()
    yield monkeypatch
    arrow_memory.package_memory_pool.cache_clear()


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

    read = _allocated_while(pool, lambda: next(open_parquet(str(path)).iter_batches(batch_size=200)))
    assert read >= 200 * 5000
    assert pa.default_memory_pool().backend_name == "mimalloc"  # the user's default is left as it was

    encoder = RowEncoder(Features({"id": Value("string"), "args": Json()}))
    rows = [encoder.encode_row({"id": str(i), "args": {"text": "y" * 1000}}) for i in range(200)]
    built = _allocated_while(pool, lambda: encoder.table(rows))
    assert built >= 200 * 1000
