"""Files as they come: zip and tar archives, files that cannot be opened, http(s) URLs, Parquet cells that are not
UTF-8, and streams left unfinished at interpreter exit. Whatever goes wrong with a file is a typed error naming it
(on_error="raise") or one reported whole-file skip (on_error="skip") while every good row of the other files
arrives; map-style, streaming and num_proc=2 agree."""
from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import threading
import zipfile
from pathlib import Path
from typing import Callable

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
# 1. A zip archive that cannot be read, or holds no file
# --------------------------------------------------------------------------------------------------


def _bad_zips(folder: Path) -> dict[str, Path]:
    garbage = folder / "garbage.jsonl.zip"
    garbage.write_bytes(b"PK\x03\x04garbage")
    empty = folder / "empty.jsonl.zip"
    zipfile.ZipFile(empty, "w").close()
    folders_only = folder / "folders.jsonl.zip"
    with zipfile.ZipFile(folders_only, "w") as z:
        z.writestr("data/", b"")
    truncated = folder / "truncated.jsonl.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("a.jsonl", swift_lines(3))
    truncated.write_bytes(buffer.getvalue()[:-30])  # the central directory cut
    return {"garbage": garbage, "empty": empty, "folders_only": folders_only, "truncated": truncated}


@pytest.mark.parametrize("kind", ["garbage", "empty", "folders_only", "truncated"])
def test_a_zip_that_cannot_be_read_or_holds_no_file_is_one_reported_file_and_the_good_file_loads(
        tmp_path, cache_dir, good, kind):
    bad = _bad_zips(tmp_path)[kind]
    results = load_modes([str(good), str(bad)], cache_dir)
    for mode, (rows, report) in results.items():
        assert [r["id"] for r in rows] == ["ms_swift/good/0", "ms_swift/good/1"], mode
        assert report.rows_read == 3 and report.skipped == 1, mode
        assert whole_file_skips(report) == [(str(bad), None, "<file>")], mode
    for kwargs in MODES.values():  # on_error="raise": the typed error naming the archive
        with pytest.raises(td.InvalidValueError, match=bad.name) as caught:
            list(td.load("ms_swift", data_files=[str(good), str(bad)], split="train", cache_dir=cache_dir + "-raise",
                         **kwargs))
        assert caught.value.field == "<file>"


# --------------------------------------------------------------------------------------------------
# 2. Every file of a zip archive is read; tar archives are a typed error
# --------------------------------------------------------------------------------------------------


def test_every_file_of_a_zip_is_read_as_a_file_of_its_own(tmp_path, cache_dir, good):
    archive = tmp_path / "two.jsonl.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("b.jsonl", swift_lines(3, 10))
        z.writestr("a.jsonl", swift_lines(3))
    results = load_modes([str(good), str(archive)], cache_dir)
    # datasets' order for an archive's files (sorted), each file's rows numbered from 0, ids after its own name
    expected = ["ms_swift/good/0", "ms_swift/good/1"] + [f"ms_swift/{m}/{n}" for m in "ab" for n in range(3)]
    for mode, (rows, report) in results.items():
        assert [r["id"] for r in rows] == expected, mode
        assert [r["messages"][0]["content"] for r in rows[2:]] == ["q0", "q1", "q2", "q10", "q11", "q12"], mode
        assert report.rows_read == 8 and report.skipped == 0, mode


def test_every_file_of_a_zip_is_read_in_the_all_mix_too(tmp_path, cache_dir):
    archive = tmp_path / "two.jsonl.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.jsonl", swift_lines(3))
        z.writestr("b.jsonl", swift_lines(3, 10))
    for streaming in (False, True):
        rows = list(td.load("all", data_files={"ms_swift": [str(archive)]}, split="train", streaming=streaming,
                            cache_dir=cache_dir))
        assert [r["id"] for r in rows] == [f"ms_swift/{m}/{n}" for m in "ab" for n in range(3)]


def test_a_file_given_twice_for_a_split_is_refused_not_loaded_twice(tmp_path, cache_dir, good):
    """Overlapping globs list a file twice: its rows would load twice, with the same ids. The same file in two
    splits is the user's choice."""
    (tmp_path / "folder").symlink_to(good.parent)
    os.link(good, tmp_path / "hard.jsonl")
    for source, data_files in (("ms_swift", [str(tmp_path / "*.jsonl"), str(good)]),
                               ("all", {"ms_swift": [str(good), str(good)]}),
                               # the same file by two names of its path: each name was read, every row twice
                               ("ms_swift", [str(good), str(good.parent / "." / good.name)]),
                               ("ms_swift", [str(good), str(tmp_path / "folder" / good.name)])):
        for streaming in (False, True):
            with pytest.raises(ValueError, match="more than once .* its rows would load twice"):
                td.load(source, data_files=data_files, split="train", streaming=streaming, cache_dir=cache_dir)
    # map-style, datasets gives both spellings of a path as one name: the message said "overlapping globs?" alone
    with pytest.raises(ValueError, match=re.escape("(overlapping globs, or two spellings of its path such as")):
        td.load("ms_swift", data_files=[str(good), str(good.parent / "." / good.name)], split="train",
                cache_dir=cache_dir)
    # a file by a second name is said by both (the second alone was said to be given "more than once")
    with pytest.raises(ValueError, match=re.escape(f"gives {str(good)!r} more than once for split 'train' (also as "
                                                   f"{str(tmp_path / 'folder' / good.name)!r}, the same file)")):
        td.load("ms_swift", data_files=[str(good), str(tmp_path / "folder" / good.name)], split="train",
                cache_dir=cache_dir)
    # a link under a name of its own is a file of its own, as huggingface_hub's cache links a repo's files that hold
    # the same text to one blob: read, with ids from its name
    ids = [row["id"] for row in td.load("ms_swift", data_files=[str(good), str(tmp_path / "hard.jsonl")],
                                        split="train", cache_dir=cache_dir)]
    assert len(ids) == len(set(ids)) == 2 * len(good.read_text().splitlines())
    both = td.load("ms_swift", data_files={"train": [str(good)], "test": [str(good)]}, cache_dir=cache_dir)
    assert len(both["train"]) == len(both["test"]) == 2


def test_a_zip_made_by_zip_r_with_folder_entries_and_hidden_files_loses_no_row(tmp_path, cache_dir):
    archive = tmp_path / "dirfirst.jsonl.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data/", b"")
        z.writestr("data/a.jsonl", swift_lines(3))
        z.writestr("data/sub/", b"")
        z.writestr("data/sub/c.jsonl", swift_lines(1, 20))
        z.writestr("data/b.json", json.dumps([swift_row(7)]))
        z.writestr("__MACOSX/data/._a.jsonl", b"\x00\x05\x16\x07binary")  # macOS Finder's resource forks
        z.writestr("data/.DS_Store", b"\x00\x00\x00\x01Bud1")
    results = load_modes(str(archive), cache_dir)
    for mode, (rows, report) in results.items():
        # as datasets walks an extracted archive: a folder's files sorted, then its folders
        assert [r["id"] for r in rows] == ["ms_swift/a/0", "ms_swift/a/1", "ms_swift/a/2", "ms_swift/b/0",
                                           "ms_swift/c/0"], mode
        assert report.rows_read == 5 and report.skipped == 0, mode


def test_rows_of_zip_files_are_the_rows_of_the_files_extracted(tmp_path, cache_dir):
    folder = tmp_path / "extracted"
    folder.mkdir()
    (folder / "a.jsonl").write_text(swift_lines(3))
    pq.write_table(pa.table({"messages": [json.dumps(swift_row(i)["messages"]) for i in range(4)]}),
                   folder / "p.parquet", row_group_size=2)
    with gzip.open(folder / "z.jsonl.gz", "wt") as f:
        f.write(swift_lines(2, 30))
    archive = tmp_path / "mixed.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(folder.iterdir()):
            z.write(path, path.name)
    extracted = load_modes(sorted(str(p) for p in folder.iterdir()), cache_dir + "-extracted")
    zipped = load_modes(str(archive), cache_dir)
    for mode in MODES:
        assert zipped[mode][0] == extracted[mode][0], mode
        assert zipped[mode][1].rows_read == 9, mode


def test_one_file_of_a_zip_named_as_errors_name_it_loads_alone(tmp_path, cache_dir):
    archive = tmp_path / "two.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.jsonl", swift_lines(2))
        z.writestr("b.jsonl", swift_lines(3, 10))
    for mode, (rows, report) in load_modes(f"zip://b.jsonl::{archive}", cache_dir).items():
        assert [r["id"] for r in rows] == ["ms_swift/b/0", "ms_swift/b/1", "ms_swift/b/2"], mode


def test_a_zip_archive_named_by_a_file_url_is_read_where_it_is(tmp_path, cache_dir, monkeypatch):
    """``zip://b.jsonl::file:///data/two.zip`` (fsspec opens it so): datasets' xopen looked for the archive at the
    current folder joined with its path, and the load failed as a file gone since planning."""
    archive = tmp_path / "data" / "two.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("b.jsonl", swift_lines(3, 10))
    monkeypatch.chdir(tmp_path)
    for mode, (rows, report) in load_modes(f"zip://b.jsonl::file://{archive}", cache_dir).items():
        assert [r["id"] for r in rows] == ["ms_swift/b/0", "ms_swift/b/1", "ms_swift/b/2"], mode


def test_a_bad_row_in_a_zip_file_names_the_file_inside_the_archive_and_its_row(tmp_path, cache_dir):
    archive = tmp_path / "rows.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.jsonl", swift_lines(2))
        z.writestr("b.jsonl", swift_lines(1) + '{"messages": [}\n')
    member = f"zip://b.jsonl::{archive}"
    for mode, (rows, report) in load_modes(str(archive), cache_dir).items():
        assert len(rows) == 3 and report.skipped == 1, mode
        assert whole_file_skips(report) == [(member, 1, "<line>")], mode
    with pytest.raises(td.InvalidJsonError) as caught:
        list(td.load("ms_swift", data_files=str(archive), split="train", streaming=True))
    assert (caught.value.file, caught.value.row) == (member, 1)


@pytest.mark.parametrize("name, mode", [("t.jsonl.tar", "w"), ("t.jsonl.tar.gz", "w:gz")])
def test_a_tar_archive_is_one_reported_file_saying_so(tmp_path, cache_dir, good, name, mode):
    archive = tmp_path / name
    data = swift_lines(3).encode()
    with tarfile.open(archive, mode) as t:
        info = tarfile.TarInfo("a.jsonl")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    for run, (rows, report) in load_modes([str(good), str(archive)], cache_dir).items():
        assert len(rows) == 2 and report.skipped == 1, run
        assert whole_file_skips(report) == [(str(archive), None, "<file>")], run
        assert "tar archive" in report.examples[0].message, run
    with pytest.raises(td.InvalidValueError, match="tar archive"):
        list(td.load("ms_swift", data_files=str(archive), split="train", streaming=True))


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


def _compressed(data: bytes, codec: str) -> bytes:
    import bz2
    import lzma

    if codec == "zst":
        zstandard = pytest.importorskip("zstandard")
        return zstandard.ZstdCompressor().compress(data)
    return {"gz": gzip.compress, "xz": lzma.compress,
            "bz2": lambda d: bz2.compress(d, compresslevel=1)}[codec](data)  # bz2: blocks of 100 KB


def _decompressed_prefix(cut: bytes, codec: str) -> bytes:
    """What a cut compressed file decompresses to before the cut."""
    import bz2
    import lzma
    import zlib

    if codec == "zst":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    return {"gz": lambda: zlib.decompressobj(31), "xz": lzma.LZMADecompressor,
            "bz2": bz2.BZ2Decompressor}[codec]().decompress(cut)


@pytest.mark.parametrize("codec", ["gz", "zst", "xz", "bz2"])
def test_a_small_json_array_cut_short_keeps_its_elements_before_the_cut(tmp_path, cache_dir, codec):
    """A JSON array under the size read whole (ARRAY_WHOLE_BYTES), compressed and cut short: the elements
    whole before the cut are rows, as in a larger array or a JSON Lines file, then one error naming the file."""
    sample = Path(td.sample_files("ms_swift")["train"][0]).read_text().splitlines()
    elements = [json.loads(line) for line in sample if line.strip()] * 100  # 340 KB, several zstd and bz2 blocks
    texts = [json.dumps(e) for e in elements]
    data = ("[" + ", ".join(texts) + "]").encode()
    packed = _compressed(data, codec)
    (tmp_path / "whole").mkdir()
    (tmp_path / "cut").mkdir()
    whole = tmp_path / "whole" / f"rows.json.{codec}"
    whole.write_bytes(packed)
    cut = tmp_path / "cut" / f"rows.json.{codec}"
    # Cut inside the last blocks (the rows repeat: the data compresses to a few KB, an xz file ends in 60 bytes
    # of index and footer)
    cut.write_bytes(packed[:-(len(packed) // 20 if codec == "xz" else 20)])
    # The elements whose text and comma are within the bytes the cut file decompresses to
    prefix, end, kept = len(_decompressed_prefix(cut.read_bytes(), codec)), 1, 0
    for text in texts:
        end += len(text) + 1
        if end > prefix:
            break
        kept, end = kept + 1, end + 1
    assert 0 < kept < len(elements)
    (intact, _), = load_modes([str(whole)], cache_dir + "-whole", modes={"map": {}}).values()
    assert len(intact) == len(elements)
    for mode, (rows, report) in load_modes([str(cut)], cache_dir).items():
        assert rows == intact[:kept], mode
        assert whole_file_skips(report) == [(str(cut), None, "<file>")], mode
        assert report.skipped == 1 and report.rows_read == kept + 1, mode
    for kwargs in MODES.values():  # on_error="raise": the typed error naming the file
        with pytest.raises(td.InvalidValueError, match=cut.name) as caught:
            list(td.load("ms_swift", data_files=[str(cut)], split="train", cache_dir=cache_dir + "-raise", **kwargs))
        assert caught.value.field == "<file>"


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
    # fsspec keeps file system instances (their sync methods set on each instance): later tests that patch
    # HTTPFileSystem's methods on the class must not meet one made here.
    from fsspec.implementations.http import HTTPFileSystem

    HTTPFileSystem.clear_instance_cache()


def test_an_http_url_loads_again_in_the_same_process_map_style_and_streaming(http_folder, cache_dir):
    folder, base = http_folder
    (folder / "good.jsonl").write_text(swift_lines(3))
    expected = [f"ms_swift/good/{n}" for n in range(3)]
    for attempt in range(2):  # the second load failed: aiohttp's NonHttpUrlClientError
        for mode, kwargs in MODES.items():
            rows = list(td.load("ms_swift", data_files=f"{base}/good.jsonl", split="train",
                                cache_dir=f"{cache_dir}-{attempt}-{mode}", **kwargs))
            assert [r["id"] for r in rows] == expected, (attempt, mode)


class _CutShortHandler(_RangeHandler):
    """Sends half of each file and drops the connection while ``cutting`` is set, then serves it whole."""

    cutting = True

    def do_GET(self):
        if not type(self).cutting:
            return super().do_GET()
        body = self.send_head().getvalue()  # the headers of the whole answer (a byte range's too)
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.close_connection = True


@pytest.mark.parametrize("name", ["data.jsonl", "data.parquet"])
@pytest.mark.parametrize("streaming", [False, True])
def test_an_http_file_whose_transfer_is_cut_short_is_no_bad_file_to_skip(tmp_path, cache_dir, monkeypatch, streaming,
                                                                         name):
    """A dropped connection was the file's InvalidValueError: with on_error="skip" a counted skip, and map-style the
    rows before the cut were prepared as the complete split, served from the cache after the server came back. It
    is a DataNotFoundError whatever on_error says, nothing of it kept; the next load reads the whole file."""
    import datasets

    monkeypatch.setattr(datasets.config, "STREAMING_READ_MAX_RETRIES", 1)  # datasets' retries: 20, 5 s apart
    monkeypatch.setattr(datasets.config, "STREAMING_READ_RETRY_INTERVAL", 0)
    folder = tmp_path / "served"
    folder.mkdir()
    if name == "data.jsonl":
        (folder / name).write_text(swift_lines(40))
    else:
        datasets.Dataset.from_list([swift_row(i) for i in range(40)]).to_parquet(folder / name)
    handler = type("Handler", (_CutShortHandler,), {"cutting": True})
    _cut_short_then_whole(handler, folder / name, cache_dir, streaming, rows=40)


def _cut_short_then_whole(handler: type, path: Path, cache_dir, streaming: bool, rows: int) -> None:
    """``path`` served by ``handler`` while it cuts transfers short: a load with on_error="skip" is a
    DataNotFoundError naming the file, nothing skipped; with ``handler.cutting`` unset (the server back), the next
    load reads every row (nothing of the cut load was kept as complete)."""
    from tooluse_datasets.errors import DataNotFoundError

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(path.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{path.name}"
    try:
        report = td.SkipReport()
        with pytest.raises(DataNotFoundError, match=rf"{re.escape(path.name)}: the transfer was cut short"):
            list(td.load("ms_swift", data_files=url, split="train", cache_dir=cache_dir, on_error="skip",
                         report=report, streaming=streaming))
        assert report.skipped == 0
        handler.cutting = False  # the server is back
        read = list(td.load("ms_swift", data_files=url, split="train", cache_dir=cache_dir, on_error="skip",
                            streaming=streaming))
        assert [row["id"] for row in read] == [f"ms_swift/data/{n}" for n in range(rows)]
    finally:
        server.shutdown()
        server.server_close()
        from fsspec.implementations.http import HTTPFileSystem

        HTTPFileSystem.clear_instance_cache()


class _RowGroupsCutShortHandler(_RangeHandler):
    """Serves a file's end (a Parquet footer) whole, and drops the connection halfway through a byte range that
    starts before ``cut_below`` (the row groups) while ``cutting`` is set."""

    cutting, cut_below = True, 0

    def do_GET(self):
        start = int((self.headers.get("Range") or "bytes=0-")[6:].partition("-")[0] or 0)
        if not type(self).cutting or start >= type(self).cut_below:
            return super().do_GET()
        body = self.send_head().getvalue()
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        self.close_connection = True


@pytest.mark.parametrize("streaming", [False, True])
def test_a_parquet_url_cut_short_while_its_row_groups_are_read_is_no_bad_rows_to_skip(tmp_path, cache_dir,
                                                                                      monkeypatch, streaming):
    """The footer read whole, a dropped connection while a row group was read made each of its rows the row
    group's InvalidValueError: with on_error="skip" counted skips, and map-style the other row groups prepared as
    the complete split. It is a DataNotFoundError, as a transfer cut short at the footer is."""
    import datasets

    monkeypatch.setattr(datasets.config, "STREAMING_READ_MAX_RETRIES", 1)
    monkeypatch.setattr(datasets.config, "STREAMING_READ_RETRY_INTERVAL", 0)
    folder = tmp_path / "served"
    folder.mkdir()
    # larger than the 64 KiB pyarrow reads for the footer, so the row groups take requests of their own
    rows = [swift_row(i) for i in range(600)]
    for row in rows:
        row["messages"][1]["content"] += " " + "x" * 400
    pq.write_table(pa.Table.from_pylist(rows), folder / "data.parquet", row_group_size=100, compression="none",
                   use_dictionary=False)
    assert pq.ParquetFile(folder / "data.parquet").metadata.num_row_groups == 6
    assert (folder / "data.parquet").stat().st_size > 3 * (64 << 10)
    handler = type("Handler", (_RowGroupsCutShortHandler,), {"cutting": True, "cut_below": 64 << 10})
    _cut_short_then_whole(handler, folder / "data.parquet", cache_dir, streaming, rows=600)


class _NoRangeHandler(http.server.SimpleHTTPRequestHandler):
    """Python's own file server: a byte-range request is answered with the whole file."""

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("source, name, split", [("toolmind", "data.parquet", "synthetic"),
                                                  ("ms_swift", "data.jsonl", "train")])
def test_a_url_read_by_ranges_on_a_server_without_them_is_an_error_saying_to_download_it(tmp_path, cache_dir,
                                                                                         streaming, source, name,
                                                                                         split):
    """fsspec's bare ValueError ("The HTTP server doesn't appear to support range requests... Open with
    block_size=0"), naming no file, left the load (datasets' load_dataset downloads the file whole first): for a
    Parquet file, read from its end, and for a JSON Lines file of 20 MB, read a block at a time (in map-style as
    datasets' "An error occurred while generating the dataset")."""
    from tooluse_datasets.errors import DataNotFoundError

    folder = tmp_path / "served"
    folder.mkdir()
    sample = Path(td.sample_files(source)["train"][0])
    if name.endswith(".jsonl"):
        (folder / name).write_bytes(sample.read_bytes() * (20_000_000 // sample.stat().st_size + 1))
    else:
        shutil.copy(sample, folder / name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_NoRangeHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{name}"
    try:
        with pytest.raises(DataNotFoundError, match=rf"^{re.escape(url)}: its server does not answer byte-range "
                                                    rf"requests.*curl -fLO {re.escape(url)}"):
            list(td.load(source, data_files=url, split=split, cache_dir=cache_dir, on_error="skip",
                         streaming=streaming))
    finally:
        server.shutdown()
        server.server_close()
        from fsspec.implementations.http import HTTPFileSystem

        HTTPFileSystem.clear_instance_cache()


def test_an_http_file_changed_on_its_server_is_read_anew_map_style(http_folder, cache_dir):
    """datasets keys an http(s) file on its ETag only, and a server that sends none (this one, Python's
    http.server, many plain file servers) left the key without anything of the file: map-style served the rows
    cached before the file changed, while a stream read the new ones. Its size and time are part of the key."""
    from conftest import shared_data

    real = shared_data("ms_swift")
    folder, base = http_folder
    url = f"{base}/data.jsonl"

    def both():
        prepared = list(td.load("ms_swift", data_files=url, split="train", cache_dir=cache_dir))
        assert prepared == list(td.load("ms_swift", data_files=url, split="train", streaming=True))
        return prepared

    shutil.copy(real / "agent_support_doc_examples_en.jsonl", folder / "data.jsonl")
    before = both()
    shutil.copy(real / "custom_dataset_doc_agent_rows_en.jsonl", folder / "data.jsonl")
    assert both() != before


class _DatedRangeHandler(_RangeHandler):
    """A range-answering server that says when each file was modified (Last-Modified), as http.server does."""

    def send_head(self):
        self._served = self.translate_path(self.path)
        return super().send_head()

    def end_headers(self):
        if os.path.isfile(getattr(self, "_served", "")):
            self.send_header("Last-Modified", self.date_time_string(os.stat(self._served).st_mtime))
        super().end_headers()


def test_an_http_file_rewritten_under_a_stream_of_its_byte_ranges_is_the_files_error(tmp_path):
    """An http(s) JSON Lines file is streamed as byte ranges planned from its size. Rewritten on its server
    meanwhile (here with as many bytes), its later ranges were read from the new file after the rows of the old
    one, without a word: what the server says of the file (size, Last-Modified, ETag) is its version, checked as a
    local file's is."""
    folder = tmp_path / "served"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_DatedRangeHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        path = folder / "rows.jsonl"
        lines = swift_lines(400).splitlines(keepends=True)
        path.write_text("".join(lines))
        url = f"http://127.0.0.1:{server.server_address[1]}/rows.jsonl"
        from fsspec.implementations.http import HTTPFileSystem

        if "Last-Modified" not in HTTPFileSystem().info(url):
            pytest.skip("this fsspec's http info() gives no Last-Modified (older releases give only ETag, "
                        "Content-MD5 and Digest), so a same-size rewrite on a server sending only it goes unseen")
        ds = td.load("ms_swift", split="train", data_files=url, streaming=True, shard_bytes=path.stat().st_size // 4)
        assert ds.n_shards >= 4
        handed = []
        with pytest.raises(td.InvalidValueError, match="changed since the stream or load was planned") as caught:
            for row in ds:
                handed.append(row["messages"][0]["content"])
                if len(handed) == 3:
                    mtime = path.stat().st_mtime
                    path.write_text("".join(lines[::-1]))  # the same length, other rows
                    os.utime(path, (mtime + 5, mtime + 5))
        assert caught.value.file.endswith("/rows.jsonl") and caught.value.field == "<file>"
        assert len(handed) < 400
    finally:
        server.shutdown()
        server.server_close()
        from fsspec.implementations.http import HTTPFileSystem

        HTTPFileSystem.clear_instance_cache()


@contextlib.contextmanager
def served_rows(monkeypatch, protocol: str, described: Callable[[dict], dict]):
    """A file system ``protocol`` holding ``/rows.jsonl`` (3 rows), whose ``info()`` answers are ``described``
    of its own, as a server's headers describe a file: yields the file system and a shard of the file, its version
    taken."""
    from fsspec.implementations.memory import MemoryFileSystem

    from tooluse_datasets.shards.shard import LINES, Shard
    from tooluse_datasets.shards.versions import with_versions

    class Described(MemoryFileSystem):
        @classmethod
        def _strip_protocol(cls, path):
            return "/" + path.split("://", 1)[-1].lstrip("/")

        def info(self, path, **kwargs):
            return described(super().info(path, **kwargs))

    Described.protocol = protocol
    monkeypatch.setitem(importlib.import_module("fsspec.registry")._registry, protocol, Described)
    fs = Described()
    fs.pipe("/rows.jsonl", swift_lines(3).encode())
    try:
        shard, = with_versions([Shard(f"{protocol}://rows.jsonl", LINES)])
        yield fs, shard
    finally:
        fs.rm("/rows.jsonl")


def test_a_file_whose_server_gives_its_size_one_time_and_not_the_next_is_not_said_to_have_changed(monkeypatch):
    """A file read through fsspec is known by its size and what its server says of it (an ETag here). A server
    gives no size when neither its HEAD nor its GET answer has one (a transfer streamed, a compressed answer): the
    same file, its ETag the same, was said to be "shorter (-1 bytes, ... then)" and the stream stopped with the
    file's error. A size given then and now still tells a file cut short."""
    from tooluse_datasets.shards.versions import check_unchanged

    sized = [True, False, True]  # whether each info() answer gives the size

    def described(info: dict) -> dict:
        info = {**info, "ETag": '"rows-v1"'}
        return info if sized.pop(0) else {**info, "size": None}

    with served_rows(monkeypatch, "sizedsometimes", described) as (fs, shard):
        assert shard.version.size == len(swift_lines(3))
        check_unchanged(shard)  # no size given now
        fs.pipe("/rows.jsonl", swift_lines(2).encode())
        with pytest.raises(td.InvalidValueError, match="is shorter"):
            check_unchanged(shard)


def test_a_server_giving_an_etag_is_not_judged_by_its_last_modified(monkeypatch):
    """Some servers set Last-Modified to the time of each request, and machines behind a load balancer give their
    own: a file whose ETag (or content digest) is given is known by that alone, else each check read as a change
    stopped the stream. Its ETag changing is still a change."""
    from tooluse_datasets.shards.versions import check_unchanged

    etag = ['"rows-v1"']
    answers = iter(range(100))

    def described(info: dict) -> dict:
        return {**info, "ETag": etag[0], "Last-Modified": f"Sun, 06 Dec 2026 12:00:{next(answers):02d} GMT"}

    with served_rows(monkeypatch, "datedeachrequest", described) as (fs, shard):
        check_unchanged(shard)
        check_unchanged(shard)
        etag[0] = '"rows-v2"'
        with pytest.raises(td.InvalidValueError, match="described otherwise"):
            check_unchanged(shard)


def test_a_file_url_is_versioned_as_the_local_file_it_names(tmp_path):
    """A ``file://`` path is a local file: its version is its contents' identity, as a plain path's is, so a file
    only touched (or copied with new times) is the same file, and one rewritten is another. (Asked of fsspec, its
    modification time was its version: touching it was a change, and a state saved from it named no contents.)"""
    from tooluse_datasets.shards.shard import LINES, Shard
    from tooluse_datasets.shards.versions import check_unchanged, state_token, version_of, with_versions

    path = tmp_path / "rows.jsonl"
    path.write_text(swift_lines(3), encoding="utf-8")
    shard, = with_versions([Shard(f"file://{path}", LINES)])
    assert state_token(shard.version) == state_token(version_of(str(path), LINES))
    os.utime(path, ns=(1, 1))
    check_unchanged(shard)
    path.write_text(swift_lines(3).replace("q1", "Q1"), encoding="utf-8")
    with pytest.raises(td.InvalidValueError, match="holds other contents"):
        check_unchanged(shard)


def test_a_state_saved_before_a_zip_archive_was_rewritten_is_the_files_error(tmp_path):
    """A member of a zip archive resumes at its row: the archive rewritten since the state was saved, the new
    member's rows were read on from there. Its CRC and time in the archive are its version."""
    archive = tmp_path / "rows.zip"

    def write(text: str) -> None:
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("rows.jsonl", text)

    write(swift_lines(6))
    url = f"zip://rows.jsonl::{archive}"
    ds = td.load("ms_swift", split="train", data_files=url, streaming=True)
    iterator = iter(ds)
    head = [next(iterator)["messages"][0]["content"] for _ in range(2)]
    state = ds.state_dict()
    iterator.close()
    assert head == ["q0", "q1"]
    write(swift_lines(6, start=10))
    reader = td.load("ms_swift", split="train", data_files=url, streaming=True)
    reader.load_state_dict(state)
    with pytest.raises(td.InvalidValueError, match="changed since") as caught:
        next(iter(reader))
    assert caught.value.file == url and caught.value.field == "<file>"


def test_a_stream_of_a_zip_archive_of_many_files_reads_its_directory_once_per_version_not_per_check(tmp_path,
                                                                                                     monkeypatch):
    """Each file of an archive is a shard whose version (its CRC and time in the archive) is taken when planned and
    checked before and after it is read. Asked of fsspec's zip file system, each of those opened the archive and
    read its whole directory again: three times per file on top of reading it, most of a stream's time for an
    archive of many small files. The archive's directory is read once while the archive is unchanged."""
    archive = tmp_path / "parts.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for i in range(40):
            z.writestr(f"parts/{i:03d}.jsonl", swift_lines(1, start=i))
    opened = []
    open_archive = zipfile.ZipFile.__init__

    def counted(self, file, *args, **kwargs):  # (a path, or the file fsspec opened)
        if str(getattr(file, "path", getattr(file, "name", file))) == str(archive):
            opened.append(file)
        open_archive(self, file, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", counted)
    ds = td.load("ms_swift", split="train", data_files=str(archive), streaming=True)
    assert ds.n_shards == 40
    assert sorted(row["messages"][0]["content"] for row in ds) == sorted(f"q{i}" for i in range(40))
    # Each file is opened once to be read; the archive is listed when its files are found and when versioned.
    assert len(opened) <= 40 + 2, len(opened)


def test_an_http_file_its_server_does_not_describe_for_the_cache_key_is_an_error(http_folder, cache_dir, monkeypatch):
    """The cache key holds an http(s) file's size, time and ETag, asked of its server after datasets asked it. When
    that one request failed (a flaky server, a timeout) the file was left out of the key: every load it failed for
    shared one cache, which then served the rows the file held at the first such load, also after it changed. It
    is a DataNotFoundError naming the file; the next load reads the file as it is."""
    from conftest import shared_data

    from tooluse_datasets import cache_keys
    from tooluse_datasets.errors import DataNotFoundError

    real = shared_data("ms_swift")
    folder, base = http_folder
    url = f"{base}/data.jsonl"
    looked = cache_keys.url_to_fs

    def unanswered(path, **kwargs):  # this request meets no server (port 9: nothing listens)
        return looked(path.replace(base, "http://127.0.0.1:9"), **kwargs)

    def load():
        return list(td.load("ms_swift", data_files=url, split="train", cache_dir=cache_dir))

    for name in ("agent_support_doc_examples_en.jsonl", "custom_dataset_doc_agent_rows_en.jsonl"):
        shutil.copy(real / name, folder / "data.jsonl")
        with monkeypatch.context() as flaky:
            flaky.setattr(cache_keys, "url_to_fs", unanswered)
            with pytest.raises(DataNotFoundError, match="data.jsonl"):
                load()
        assert load() == list(td.load("ms_swift", data_files=url, split="train", streaming=True))


def test_http_files_of_every_kind_load_map_style_as_streaming_as_local_files(http_folder, cache_dir, tmp_path):
    folder, base = http_folder
    (folder / "lines.jsonl").write_text(swift_lines(2))
    pq.write_table(pa.table({"messages": [json.dumps(swift_row(i)["messages"]) for i in range(2)]}),
                   folder / "table.parquet")
    with gzip.open(folder / "packed.jsonl.gz", "wt") as f:
        f.write(swift_lines(2, 5))
    with zipfile.ZipFile(folder / "archive.zip", "w") as z:
        z.writestr("inner.jsonl", swift_lines(2, 9))
    names = ["lines.jsonl", "table.parquet", "packed.jsonl.gz", "archive.zip"]
    local = load_modes([str(folder / n) for n in names], cache_dir + "-local", modes={"map": {}})["map"][0]
    assert [r["id"] for r in local] == ["ms_swift/lines/0", "ms_swift/lines/1", "ms_swift/table/0",
                                        "ms_swift/table/1", "ms_swift/packed/0", "ms_swift/packed/1",
                                        "ms_swift/inner/0", "ms_swift/inner/1"]
    for mode, (rows, report) in load_modes([f"{base}/{n}" for n in names], cache_dir).items():
        assert rows == local and report.skipped == 0, mode


def test_a_host_that_cannot_be_resolved_is_a_typed_error_naming_the_data_files(cache_dir):
    """fsspec's FTP file system connects when it is made, and a host name that does not resolve raised a bare
    socket.gaierror ("Name or service not known") naming neither the files nor what to do (.invalid never
    resolves: RFC 2606)."""
    url = "ftp://nowhere.invalid/rows.jsonl"
    for mode, kwargs in MODES.items():
        with pytest.raises(td.DataNotFoundError, match="cannot reach the data files") as caught:
            td.load("ms_swift", data_files=url, split="train", cache_dir=f"{cache_dir}-{mode}", **kwargs)
        assert url in str(caught.value), mode


@pytest.mark.parametrize("url", ["foo://x/y.jsonl", "zip://y.jsonl::foo://x/a.zip"])
def test_a_data_file_of_an_unknown_protocol_is_refused_naming_it_and_the_protocols_that_work(url, cache_dir, capsys):
    """fsspec's "ValueError: Protocol not known: foo" named neither the data file nor the protocols read."""
    from tooluse_datasets.cli import main

    for kwargs in MODES.values():
        refused = f"^data file {re.escape(repr(url))}: protocol 'foo' is not known; "
        with pytest.raises(ValueError, match=refused) as caught:
            td.load("ms_swift", data_files=url, cache_dir=cache_dir, **kwargs)
        assert "local paths, http(s):// or hf:// URLs" in str(caught.value)
        assert {"hf", "https", "zip"} <= set(str(caught.value).rsplit("(", 1)[1].rstrip(")").split(", "))
    assert main(["validate", "ms_swift", "--data-files", url]) == 2
    assert capsys.readouterr().err.startswith(f"error: ValueError: data file {url!r}: protocol 'foo' is not known")
    for kwargs in MODES.values():  # a data_dir of one: was "no data files matching ... under data_dir='foo://x'"
        with pytest.raises(ValueError, match=r"^data_dir 'foo://x': protocol 'foo' is not known; "):
            td.load("ms_swift", data_dir="foo://x", cache_dir=cache_dir, **kwargs)


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


@pytest.mark.parametrize("streaming", [False, True])
def test_a_data_dir_holding_an_export_mirror_metadata_or_a_cache_reads_only_its_rows(tmp_path, streaming):
    # An export folder for LLaMA-Factory holds its dataset_info.json beside the rows; a folder may also hold a
    # mirror's hidden manifest, a cache folder or __pycache__: none of them is rows.
    from tooluse_datasets.cli import main

    folder = tmp_path / "lf"
    assert main(["export", "nestful", "--sample", "--format", "llamafactory", "--out", str(folder)]) == 0
    assert (folder / "dataset_info.json").is_file()
    (folder / ".tooluse-datasets.json").write_text('{"configs": []}')
    for hidden in (".cache", "__pycache__"):
        (folder / hidden).mkdir()
        (folder / hidden / "x.json").write_text('{"not": "a row"}')
    report = td.SkipReport()
    ds = td.load("llamafactory", data_dir=str(folder), split="train", streaming=streaming, on_error="skip",
                 report=report, cache_dir=str(tmp_path / "cache"))
    rows = list(ds)
    assert len(rows) == 5 and report.skipped == 0
    assert rows == list(td.load("llamafactory", data_files=str(folder / "nestful-llamafactory-train.jsonl"),
                                split="train", streaming=True))


@pytest.mark.parametrize("streaming", [False, True])
def test_a_data_dir_reads_its_compressed_and_zipped_files_too(tmp_path, cache_dir, streaming):
    """A data_dir's `a.jsonl.gz` and `c.zip` were left out without a word (datasets' own data_dir reads them): 3
    rows of 9, and a folder of only compressed files was "no data files matching"."""
    import gzip
    import zipfile

    first, second = td.sample_files("ms_swift")["train"][:2]
    folder = tmp_path / "dd"
    folder.mkdir()
    (folder / "a.jsonl.gz").write_bytes(gzip.compress(Path(first).read_bytes()))
    with zipfile.ZipFile(folder / "c.zip", "w") as archive:
        archive.write(second, "b.jsonl")
    shutil.copy(second, folder / "d.jsonl")
    expected = [row for path in (first, second, second)
                for row in td.load("ms_swift", data_files=path, split="train", streaming=True)]
    rows = list(td.load("ms_swift", data_dir=str(folder), split="train", streaming=streaming, cache_dir=cache_dir))
    assert len(rows) == len(expected) and [r["messages"] for r in rows] == [r["messages"] for r in expected]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("given", ["file", "glob", "split dict", "data_dir"])
def test_a_path_under_the_home_folder_is_read_where_tilde_says(tmp_path, monkeypatch, cache_dir, given, streaming):
    """``data_dir="~/data"`` found no file (datasets' load_dataset reads it), and ``data_files="~/data/x.jsonl"`` was
    looked for in a folder named "~" of the current one."""
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    sample = td.sample_files("ms_swift")["train"][0]
    shutil.copy(sample, home / "data" / os.path.basename(sample))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    where = {"file": {"data_files": f"~/data/{os.path.basename(sample)}"}, "glob": {"data_files": "~/data/*.jsonl"},
             "split dict": {"data_files": {"train": ["~/data/*.jsonl"]}}, "data_dir": {"data_dir": "~/data"}}[given]
    ds = td.load("ms_swift", split="train", streaming=streaming, cache_dir=cache_dir, **where)
    expected = td.load("ms_swift", split="train", data_files=sample, cache_dir=cache_dir)
    assert list(ds) == list(expected) and len(list(ds)) == 3


@pytest.mark.parametrize("streaming", [False, True])
def test_a_relative_data_dir_names_its_files_by_absolute_path(tmp_path, monkeypatch, cache_dir, streaming):
    """As data_files name them (the README: an absolute path for a local file): errors and skip records named
    "folder/rows.jsonl", a path that meant nothing once the process had moved on or in a shared rows_path."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(swift_lines(2) + '{"x": 1}\n')
    monkeypatch.chdir(tmp_path)
    report = td.SkipReport(keep_all=True)
    rows = list(td.load("ms_swift", data_dir="folder", split="train", streaming=streaming, on_error="skip",
                        report=report, cache_dir=cache_dir))
    assert len(rows) == 2 and [skip["file"] for skip in report.rows] == [str(folder / "rows.jsonl")]
    with pytest.raises(td.MissingFieldError, match=re.escape(f"{folder / 'rows.jsonl'}, row 2")):
        list(td.load("ms_swift", data_dir="folder", split="train", streaming=streaming, cache_dir=cache_dir))


@pytest.mark.parametrize("streaming", [False, True])
def test_relative_data_files_beside_a_data_dir_url_are_read_under_the_url(http_folder, cache_dir, streaming):
    """A data_dir made absolute as a local path ("/cwd/http:/host/data") looked for its data_files on this disk."""
    folder, base = http_folder
    (folder / "rows.jsonl").write_text(swift_lines(2))
    ds = td.load("ms_swift", data_dir=base, data_files="rows.jsonl", split="train", streaming=streaming,
                 cache_dir=cache_dir)
    assert [row["id"] for row in ds] == ["ms_swift/rows/0", "ms_swift/rows/1"]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("data_files", ["rows.jsonl", "*.jsonl", {"train": ["rows.jsonl"]}])
def test_relative_data_files_beside_data_dir_are_read_under_it(tmp_path, monkeypatch, cache_dir, data_files,
                                                                streaming):
    """As datasets' load_dataset resolves them: they were looked for in the current folder and data_dir was not
    used, so a file of the same name there was read instead, silently."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(swift_lines(3))
    (tmp_path / "rows.jsonl").write_text(swift_lines(5, start=100))  # another file of that name, where the load runs
    monkeypatch.chdir(tmp_path)
    ds = td.load("ms_swift", data_dir=str(folder), data_files=data_files, split="train", streaming=streaming,
                 cache_dir=cache_dir)
    assert [row["messages"][0]["content"] for row in ds] == ["q0", "q1", "q2"]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("data_files, path", [("rows [v2].jsonl", "rows [v2].jsonl"),
                                              ("run[1]/*.jsonl", "run[1]/rows.jsonl")])
def test_relative_data_files_beside_data_dir_whose_names_hold_glob_characters_are_read_as_named(
        tmp_path, monkeypatch, cache_dir, data_files, path, streaming):
    """A file or folder named with [, * or ? is read as named, and relative data_files are read under data_dir:
    together, whether the name exists was asked of the current folder, not of data_dir, so the name was read as a
    pattern and matched no file."""
    folder = tmp_path / "folder"
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_text(swift_lines(3))
    monkeypatch.chdir(tmp_path)
    ds = td.load("ms_swift", data_dir=str(folder), data_files=data_files, split="train", streaming=streaming,
                 cache_dir=cache_dir)
    assert [row["messages"][0]["content"] for row in ds] == ["q0", "q1", "q2"]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("data_files", ["agent_rows.jsonl", "*.jsonl", "rows [v2].jsonl"])
def test_relative_data_files_under_a_data_dir_whose_own_name_holds_glob_characters_are_found(
        tmp_path, cache_dir, data_files, streaming):
    """datasets joins data_dir and a relative name into one pattern: data_dir="run[1]" matched no folder, so a file
    there was "Unable to find" (a glob: "match no file")."""
    sample = Path(td.sample_files("ms_swift")["train"][0])  # agent_rows.jsonl
    folder = tmp_path / "run[1]"
    folder.mkdir()
    shutil.copy(sample, folder / ("rows [v2].jsonl" if "[" in data_files else sample.name))
    ds = td.load("ms_swift", data_dir=str(folder), data_files=data_files, split="train", streaming=streaming,
                 cache_dir=cache_dir)
    expected = td.load("ms_swift", data_files=str(sample), split="train", cache_dir=cache_dir)
    rows = list(ds)
    assert len(rows) == len(expected) > 0
    assert [row["messages"] for row in rows] == list(expected["messages"])


@pytest.mark.parametrize("streaming", [False, True])
def test_a_data_dir_holding_a_file_name_that_is_not_utf_8_loads_with_its_bytes_escaped(tmp_path, cache_dir,
                                                                                       streaming):
    """The data_dir's cache key encoded the name as UTF-8: a raw UnicodeEncodeError ('surrogates not allowed')
    before anything was read, where the same file passed as data_files loads."""
    sample = Path(td.sample_files("ms_swift")["train"][0])
    folder = os.fsdecode(tmp_path / "data")
    os.mkdir(folder)
    shutil.copy(sample, os.path.join(folder, os.fsdecode(b"caf\xe9.jsonl")))
    ds = td.load("ms_swift", data_dir=folder, split="train", streaming=streaming, cache_dir=cache_dir)
    expected = td.load("ms_swift", data_files=str(sample), split="train", cache_dir=cache_dir)
    rows = list(ds)
    assert [row["id"] for row in rows] == [f"ms_swift/caf\\xe9/{i}" for i in range(len(expected))]
    assert [row["messages"] for row in rows] == list(expected["messages"]) and rows


@pytest.mark.parametrize("streaming", [False, True])
def test_a_data_dir_whose_own_name_is_not_utf_8_loads_map_style_as_streamed(tmp_path, cache_dir, streaming):
    """datasets names the cache folder after data_dir, quoted as UTF-8: map-style, a raw UnicodeEncodeError
    ('surrogates not allowed') before anything was read, where the stream loaded."""
    sample = Path(td.sample_files("ms_swift")["train"][0])
    folder = os.path.join(os.fsdecode(tmp_path), os.fsdecode(b"caf\xe9"))
    os.mkdir(folder)
    shutil.copy(sample, os.path.join(folder, sample.name))
    ds = td.load("ms_swift", data_dir=folder, split="train", streaming=streaming, cache_dir=cache_dir)
    expected = td.load("ms_swift", data_files=str(sample), split="train", cache_dir=cache_dir)
    rows = list(ds)
    assert [row["id"] for row in rows] == list(expected["id"]) and rows
    assert [row["messages"] for row in rows] == list(expected["messages"])


class _RefusingHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status its path starts with (/403/..., /500/...)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(int(self.path.split("/")[1]))
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET


@pytest.mark.parametrize("streaming", [False, True])
def test_an_http_data_file_its_server_refuses_says_what_the_server_answered(streaming):
    """fsspec words a 403, a 500 and a server that cannot be reached as a file not found ("Unable to find '<url>'"):
    the user looked for a typo in the path."""
    from tooluse_datasets.errors import DataNotFoundError

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RefusingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for url, said in [(f"{base}/403/rows.jsonl", r"\[its server answered 403 Forbidden\]"),
                          (f"{base}/500/rows.jsonl", r"\[its server answered 500 Internal Server Error\]"),
                          ("http://127.0.0.1:9/rows.jsonl", r"\[its server cannot be reached: ConnectionRefusedError"),
                          (f"{base}/404/rows.jsonl", r"\(data_files="),  # right as it was
                          # a name with a space: urllib's bare InvalidURL left the load
                          (f"{base}/403/my rows.jsonl", r"\[its server answered 403 Forbidden\]"),
                          (f"{base}/404/my rows.jsonl", r"\(data_files=")]:
            with pytest.raises(DataNotFoundError, match=rf"^ms_swift: Unable to find '{re.escape(url)}' {said}"):
                td.load("ms_swift", data_files=url, split="train", streaming=streaming)
    finally:
        server.shutdown()
        server.server_close()
        from fsspec.implementations.http import HTTPFileSystem

        HTTPFileSystem.clear_instance_cache()
