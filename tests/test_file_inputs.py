"""Files as they come: zip and tar archives, files that cannot be opened, http(s) URLs, Parquet cells that are not
UTF-8, and streams left unfinished at interpreter exit. Whatever goes wrong with a file is a typed error naming it
(on_error="raise") or one reported whole-file skip (on_error="skip") while every good row of the other files
arrives; map-style, streaming and num_proc=2 agree."""
from __future__ import annotations

import functools
import gzip
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import threading
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tooluse_datasets as td

MODES = {"map": {}, "stream": {"streaming": True}, "map_num_proc_2": {"num_proc": 2}}


def swift_row(i: int) -> dict:
    return {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}


def swift_lines(n: int, start: int = 0) -> str:
    return "".join(json.dumps(swift_row(i)) + "\n" for i in range(start, start + n))


def load_modes(data_files, cache_dir: str, source: str = "ms_swift", modes=MODES, **options):
    """``{mode: (rows of the train split, report)}`` with on_error="skip"."""
    out = {}
    for mode, kwargs in modes.items():
        report = td.SkipReport()
        ds = td.load(source, data_files=data_files, split="train", on_error="skip", report=report,
                     cache_dir=f"{cache_dir}-{mode}", **kwargs, **options)
        out[mode] = (list(ds), report)
    return out


def whole_file_skips(report: td.SkipReport) -> list[tuple]:
    return [(e.file, e.row, e.field) for e in report.examples]


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "good.jsonl"
    path.write_text(swift_lines(2))
    return path


# --------------------------------------------------------------------------------------------------
# 3. Files that cannot be opened (permissions)
# --------------------------------------------------------------------------------------------------

_UNREADABLE_SCRIPT = textwrap.dedent('''
    import gzip, json, os, sys, zipfile
    import pyarrow as pa, pyarrow.parquet as pq
    import tooluse_datasets as td

    folder = sys.argv[1]
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    good = os.path.join(folder, "good.jsonl")
    with open(good, "w") as f:
        f.write(json.dumps(row) + "\\n")
    files = {"jsonl": "u.jsonl", "json": "u.json", "gz": "u.jsonl.gz", "parquet": "u.parquet", "zip": "u.zip"}
    files = {kind: os.path.join(folder, name) for kind, name in files.items()}
    with open(files["jsonl"], "w") as f:
        f.write(json.dumps(row) + "\\n")
    with open(files["json"], "w") as f:
        json.dump([row] * 50, f)  # cut into pieces where num_proc divides it (shard_bytes below)
    with gzip.open(files["gz"], "wt") as f:
        f.write(json.dumps(row) + "\\n")
    pq.write_table(pa.table({"messages": [json.dumps(row["messages"])]}), files["parquet"])
    with zipfile.ZipFile(files["zip"], "w") as z:
        z.writestr("a.jsonl", json.dumps(row) + "\\n")
    for path in files.values():
        os.chmod(path, 0)
    try:
        open(files["jsonl"], "rb").close()
        print(json.dumps("readable"))
        sys.exit(0)
    except PermissionError:
        pass
    results = {}
    for kind, path in files.items():
        for mode, kwargs in {"map": {}, "stream": {"streaming": True}, "map_num_proc_2": {"num_proc": 2},
                             "stream_num_proc_2": {"streaming": True, "num_proc": 2}}.items():
            report = td.SkipReport()
            try:
                rows = list(td.load("ms_swift", data_files=[good, path], split="train", on_error="skip",
                                    report=report, cache_dir=os.path.join(folder, "cache", kind, mode),
                                    shard_bytes=1000, **kwargs))
                skipped = [[e.file, e.row, e.field, e.message] for e in report.examples]
                result = {"ids": [r["id"] for r in rows], "read": report.rows_read, "skipped": skipped}
            except Exception as exc:
                result = {"escaped": f"{type(exc).__name__}: {exc}"}
            try:
                list(td.load("ms_swift", data_files=[good, path], split="train", shard_bytes=1000,
                             cache_dir=os.path.join(folder, "cache", kind, mode + "-raise"), **kwargs))
                result["raised"] = None
            except td.ToolUseDataError as exc:
                result["raised"] = [type(exc).__name__, exc.file, exc.field]
            except Exception as exc:
                result["raised"] = [type(exc).__name__, None, str(exc)]
            results[f"{kind} {mode}"] = result
    print(json.dumps(results))
''')


def _without_read_override(script: Path, folder: Path) -> subprocess.CompletedProcess:
    """``script`` run in a process that cannot read a file its mode forbids: as root, with the capabilities
    that override file modes dropped (capsh), else as this user."""
    command = [sys.executable, str(script), str(folder)]
    if os.geteuid() == 0:
        capsh = shutil.which("capsh")
        if capsh is None:
            pytest.skip("running as root without capsh: a chmod-000 file stays readable here")
        command = [capsh, "--drop=cap_dac_override,cap_dac_read_search", "--",
                   "-c", " ".join(f"'{part}'" for part in command)]
    env = dict(os.environ, HF_DATASETS_CACHE=str(folder / "hf-cache"), HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def test_a_file_that_cannot_be_opened_is_one_reported_file_of_every_kind(tmp_path):
    script = tmp_path / "unreadable.py"
    script.write_text(_UNREADABLE_SCRIPT)
    folder = tmp_path / "data"
    folder.mkdir()
    done = _without_read_override(script, folder)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    if results == "readable":
        pytest.skip("this process reads a chmod-000 file anyway (root without capabilities dropped)")
    assert len(results) == 5 * 4
    for case, result in results.items():
        assert "escaped" not in result, (case, result)
        assert result["ids"] == ["ms_swift/good/0"] and result["read"] == 2, (case, result)
        [(file, row, field, message)] = result["skipped"]
        assert (os.path.dirname(file), row, field) == (str(folder), None, "<file>"), (case, result)
        assert os.path.basename(file) == f"u.{dict(gz='jsonl.gz').get(case.split()[0], case.split()[0])}", (case, result)
        assert "Permission denied" in message, (case, result)
        assert result["raised"] == ["InvalidValueError", file, "<file>"], (case, result)


# --------------------------------------------------------------------------------------------------
# 4. http(s) URLs: a second load in one process, and map-style as streaming
# --------------------------------------------------------------------------------------------------


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """A static file server that answers byte-range requests (as real hosts do; http.server does not)."""

    def log_message(self, *args):
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404)
            return None
        data = Path(path).read_bytes()
        wanted = self.headers.get("Range")
        start, stop = 0, len(data)
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[6:].partition("-")
            start, stop = int(first or 0), min(len(data), int(last) + 1 if last else len(data))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(stop - start))
        self.end_headers()
        return io.BytesIO(data[start:stop])


@pytest.fixture
def http_folder(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_RangeHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_http_url_loads_again_in_the_same_process_map_style_and_streaming(http_folder, cache_dir):
    folder, base = http_folder
    (folder / "good.jsonl").write_text(swift_lines(3))
    expected = [f"ms_swift/good/{n}" for n in range(3)]
    for attempt in range(2):  # the second load failed: aiohttp's NonHttpUrlClientError
        for mode, kwargs in MODES.items():
            rows = list(td.load("ms_swift", data_files=f"{base}/good.jsonl", split="train",
                                cache_dir=f"{cache_dir}-{attempt}-{mode}", **kwargs))
            assert [r["id"] for r in rows] == expected, (attempt, mode)



# --------------------------------------------------------------------------------------------------
# 5. A Parquet cell that is not UTF-8 names its column
# --------------------------------------------------------------------------------------------------


def test_a_parquet_cell_that_is_not_utf8_names_its_column(tmp_path, cache_dir):
    text = json.dumps(swift_row(0)["messages"]).encode()
    column = pa.array([text, text[:5] + b"\xff" + text[5:], text], pa.binary()).view(pa.string())
    path = tmp_path / "cells.parquet"
    pq.write_table(pa.table({"messages": column}), path)
    for mode, kwargs in MODES.items():
        with pytest.raises(td.InvalidValueError, match="0xff") as caught:
            list(td.load("ms_swift", data_files=str(path), split="train", cache_dir=f"{cache_dir}-raise-{mode}",
                         **kwargs))
        assert (caught.value.file, caught.value.row, caught.value.field) == (str(path), 1, "messages"), mode
    for mode, (rows, report) in load_modes(str(path), cache_dir).items():
        assert [r["id"] for r in rows] == ["ms_swift/cells/0", "ms_swift/cells/2"], mode
        assert whole_file_skips(report) == [(str(path), 1, "messages")], mode
        assert report.by_reason == {"InvalidValueError:messages": 1}, mode


# --------------------------------------------------------------------------------------------------
# 6. A stream left unfinished until interpreter exit closes quietly
# --------------------------------------------------------------------------------------------------

_UNFINISHED_SCRIPT = textwrap.dedent('''
    import json, os, sys
    import pyarrow as pa, pyarrow.parquet as pq
    import tooluse_datasets as td

    folder = sys.argv[1]
    rows = pq.read_table(td.sample_files("toolmind")["train"][0]).to_pylist()
    toolmind = os.path.join(folder, "toolmind.parquet")
    pq.write_table(pa.Table.from_pylist(rows * 20), toolmind, row_group_size=50)  # several row groups
    row = {"messages": [{"role": "user", "content": "hi " * 50}, {"role": "assistant", "content": "hello"}]}
    array = os.path.join(folder, "array.json")
    with open(array, "w") as f:
        json.dump([row] * 30000, f)
    assert os.path.getsize(array) > 4 << 20  # read a block at a time
    # Iterators kept in globals: they are still open when the interpreter exits.
    tm = td.load("toolmind", data_files=toolmind, split="synthetic", streaming=True)
    tm_rows = iter(tm)
    first_tm = next(tm_rows)
    swift = td.load("ms_swift", data_files=array, split="train", streaming=True)
    swift_rows = iter(swift)
    first_swift = next(swift_rows)
    print(first_tm["id"], first_swift["id"])
''')


def test_a_stream_left_unfinished_at_interpreter_exit_prints_nothing(tmp_path):
    script = tmp_path / "unfinished.py"
    script.write_text(_UNFINISHED_SCRIPT)
    env = dict(os.environ, HF_DATASETS_CACHE=str(tmp_path / "hf-cache"), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["toolmind/synthetic/0", "ms_swift/array/0"]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
