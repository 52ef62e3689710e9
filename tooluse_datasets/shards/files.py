"""JSON and JSON Lines files opened for reading bytes: decompressed by their names (zstd and lz4 through
readers of their own), the files of zip archives, and reads whose errors are typed errors naming the file."""
from __future__ import annotations

import io
import logging
from typing import Optional

from datasets.utils.file_utils import is_local_path, xopen

from ..errors import DataNotFoundError, InvalidValueError, ToolUseDataError
from ..network import failure_text, is_network_error
from .paths import display_path, is_compressed, is_zip_archive, without_query

logger = logging.getLogger("tooluse_datasets")


def open_text_file(path: str):
    """A JSON/JSON Lines file opened for reading bytes, decompressed when its name says so (``.gz``, ``.bz2``,
    ``.xz``...; a member of a zip archive by its own name; streaming's chained URLs such as
    ``gzip://x.jsonl::...`` already decompress). A file that cannot be opened (permissions, a zip archive that
    is not one...), and reading past a truncated or corrupt compressed stream, raise an
    :class:`InvalidValueError` naming the file; a file that is not there, FileNotFoundError."""
    try:
        if is_zip_archive(path):  # left whole: it cannot be read or holds no file (archive_files says which)
            files = archive_files(path)
            raise InvalidValueError(f"zip archive of {len(files)} files read as one file: pass its files "
                                    f"(zip://<file>::<archive>), or pass the archive in data_files, which reads "
                                    f"every one", file=display_path(path), field="<file>")
        if "::" not in path and not is_compressed(path) and is_local_path(path):
            # Lines of JSON rows are a few KB: with the default 8 KiB buffer nearly every line is a system call
            # (2.7 us a line of ms-swift rows, against 0.5 us with 1 MiB).
            return _CheckedReads(open(path, "rb", buffering=_READ_BUFFER_BYTES), path)
        # fsspec's open for URLs and chains (auth and retries); decompressed here, after the name of the file
        # itself (the chain's first part), since xopen hands a compression= argument to the http client.
        raw = xopen(path, "rb")
        codec = _compression(path)
        if codec is None:
            return _CheckedReads(raw, path)
        try:
            return _CheckedReads(_decompressed(raw, codec), path, raw)
        except BaseException:
            raw.close()
            raise
    except (FileNotFoundError, ToolUseDataError):
        raise
    except (*_DECOMPRESSION_ERRORS, NotImplementedError) as exc:  # permissions, a damaged header, a zip member
        # compressed in a way zipfile does not read...
        raise InvalidValueError(f"file cannot be read ({type(exc).__name__}: {exc})", file=display_path(path),
                                field="<file>") from None


def transfer_cut_short(path: str, exc: BaseException) -> DataNotFoundError:
    """A file read by URL whose connection dropped: no fault of its rows, so not the file's error that
    ``on_error="skip"`` would count, leaving a prepared cache of its rows before the cut served as complete."""
    return DataNotFoundError(f"{display_path(path)}: the transfer was cut short ({failure_text(exc)}); nothing of "
                             f"it is kept: load again to read it")


def no_range_requests(path: str, needed_for: str) -> DataNotFoundError:
    """A file read by URL from a server that sends the whole file for a byte range (``python -m http.server``):
    fsspec's ValueError for it named neither the file nor what to do."""
    return DataNotFoundError(f"{display_path(path)}: its server does not answer byte-range requests, which "
                             f"{needed_for}: download the file (curl -fLO {path}) and pass its local path")


# Compression of a file by its name (datasets' and fsspec's suffixes), and the module that reads it.
_CODECS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd", ".lz4": "lz4"}
_CODEC_PACKAGES = {"zstd": "zstandard", "lz4": "lz4"}


def _compression(path: str) -> Optional[str]:
    name = without_query(path.split("::")[0]).lower()
    return next((codec for ext, codec in _CODECS.items() if name.endswith(ext)), None)


def _decompressed(raw, codec: str):
    if codec == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if codec == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="rb")
    if codec == "xz":
        import lzma

        return lzma.LZMAFile(raw, mode="rb")
    if codec == "zstd":
        try:
            import zstandard
        except ImportError:
            raise OSError("the file is zstd-compressed, and reading it needs the zstandard package (pip install "
                          "zstandard)") from None
        return _ZstdReader(raw, zstandard)
    from fsspec.compression import compr

    if codec not in compr:
        raise OSError(f"the file is {codec}-compressed, and reading it needs the {_CODEC_PACKAGES[codec]} package "
                      f"(pip install {_CODEC_PACKAGES[codec]})")
    if codec == "lz4":
        return _Lz4Reader(compr[codec](raw, mode="rb"))
    return compr[codec](raw, mode="rb")


class _Lz4Reader:
    """lz4's frame reader, whose errors (a corrupt frame, a file that is not lz4 at all) are RuntimeErrors:
    here OSErrors, as the other codecs' readers raise, so that they become the typed error naming the file."""

    def __init__(self, f):
        self._f = f

    def _call(self, method, *args):
        try:
            return getattr(self._f, method)(*args)
        except RuntimeError as exc:
            raise OSError(str(exc)) from None

    def read(self, size: int = -1) -> bytes:
        return self._call("read", size)

    def read1(self, size: int = -1) -> bytes:
        return self._call("read1", size)

    def readline(self) -> bytes:
        return self._call("readline")

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._call("seek", offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a zstd-compressed file, frame after frame. zstandard's own reader stops at the end
    of the first frame by default (a file of several frames, concatenated or written by a parallel compressor,
    would end early) and takes a file cut inside a frame for a shorter file; here that is an EOFError, as gzip's
    reader raises."""

    _CHUNK = 1 << 16  # compressed bytes fed at a time: what one feed decompresses to stays bounded

    def __init__(self, raw, zstandard):
        self._raw, self._zstandard = raw, zstandard
        self._frame = None  # the decompressor of the current frame
        self._input = b""   # compressed bytes read but not fed yet (the start of the next frame)
        self._output = b""  # decompressed bytes not handed out yet

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._output:
            data = self._input or self._raw.read(self._CHUNK)
            self._input = b""
            if not data:
                if self._frame is not None and not self._frame.eof:
                    raise EOFError("compressed file ended before the end of a zstd frame")
                return 0
            if self._frame is None or self._frame.eof:
                self._frame = self._zstandard.ZstdDecompressor().decompressobj()
            self._output = self._frame.decompress(data)
            if self._frame.eof:
                self._input = self._frame.unused_data
        n = min(len(buffer), len(self._output))
        buffer[:n] = self._output[:n]
        self._output = self._output[n:]
        return n


class _ZstdReader:
    """A zstd-compressed file read as gzip's reader reads one: lines, ``tell``, and ``seek`` (forward by reading
    on, backward by starting again from the file's start); zstandard's own reader has neither readline nor
    seek."""

    def __init__(self, raw, zstandard):
        self._raw, self._zstandard = raw, zstandard
        self._start()

    def _start(self) -> None:
        self._f = io.BufferedReader(_ZstdFrames(self._raw, self._zstandard), buffer_size=_READ_BUFFER_BYTES)
        self._position = 0

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._position += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        data = self._f.read1(size)
        self._position += len(data)
        return data

    def readline(self) -> bytes:
        line = self._f.readline()
        self._position += len(line)
        return line

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET or offset < 0:
            raise io.UnsupportedOperation("a zstd-compressed file seeks to an offset from its start")
        if offset < self._position:
            self._raw.seek(0)
            self._start()
        while self._position < offset:
            if not self.read(min(offset - self._position, _READ_BUFFER_BYTES)):
                break
        return self._position

    def close(self) -> None:
        self._f.close()


def archive_files(path: str) -> list[str]:
    """The files of a zip archive as paths fsspec opens, ``zip://<file>::<archive>``: every file but folders and
    names starting with ``.`` or ``__`` (``__MACOSX/``, ``.DS_Store``), in the order datasets reads an archive's
    files (its ``iter_files``: a folder's files sorted by name, then its folders, each sorted). An archive that
    cannot be read, or holds no file, is an :class:`InvalidValueError` naming it; one that is not there,
    FileNotFoundError."""
    import zipfile

    try:
        with xopen(path, "rb") as f:
            names = [info.filename for info in zipfile.ZipFile(f).infolist()]
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, ValueError, NotImplementedError, *_DECOMPRESSION_ERRORS) as exc:
        raise InvalidValueError(f"file cannot be read as a zip archive ({type(exc).__name__}: {exc})",
                                file=display_path(path), field="<file>") from None
    files = _walk_order([n for n in names if not n.endswith("/")])
    if not files:
        raise InvalidValueError(f"zip archive holds no file{' to read' if names else ''}"
                                f"{f' ({len(names)} folders and hidden files)' if names else ''}",
                                file=display_path(path), field="<file>")
    left_out = len([n for n in names if not n.endswith("/")]) - len(files)
    if left_out:
        logger.info("%s: %d hidden files of the zip archive left out (names starting with '.' or '__')",
                    display_path(path), left_out)
    return [f"zip://{name}::{path}" for name in files]


def _walk_order(names: list[str]) -> list[str]:
    """File names of an archive in the order of a walk (os.walk, top down): a folder's files sorted, then each
    of its folders sorted; hidden names (``.``, ``__``) left out, folders too."""
    tree: dict = {}
    for name in names:
        *folders, base = name.strip("/").split("/")
        if any(part.startswith((".", "__")) for part in folders + [base]):
            continue
        node = tree
        for folder in folders:
            node = node.setdefault(folder + "/", {})
        node[base] = None
    out: list[str] = []

    def walk(node: dict, prefix: str) -> None:
        out.extend(prefix + name for name in sorted(n for n, v in node.items() if v is None))
        for folder in sorted(n for n, v in node.items() if v is not None):
            walk(node[folder], prefix + folder)

    walk(tree, "")
    return out


def with_archive_files(paths: list[str]) -> list[str]:
    """``paths`` with every zip archive replaced by its files (:func:`archive_files`), each then read as a file of
    its own (its rows numbered from 0, ids after its own name). An archive that cannot be read or holds no file
    stays, and reading it reports why (one whole-file error)."""
    out: list[str] = []
    for path in paths:
        if is_zip_archive(path):
            try:
                out += archive_files(path)
                continue
            except ToolUseDataError:
                pass
        out.append(path)
    return out


def _decompression_errors() -> tuple[type, ...]:
    import lzma
    import zipfile
    import zlib

    errors: list[type] = [EOFError, OSError, zlib.error, lzma.LZMAError, zipfile.BadZipFile]  # (a bad CRC...)
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


_READ_BUFFER_BYTES = 1 << 20


class _CheckedReads:
    """A file object whose read errors (a truncated or corrupt archive, a dropped connection) are typed errors
    naming the file, so the error policy decides instead of a raw traceback."""

    def __init__(self, f, path: str, raw=None):
        self._f, self._path, self._raw = f, path, raw  # raw: the file a decompressing ``f`` reads
        self._failed: Optional[ToolUseDataError] = None  # a read error held back, after the bytes read before it

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self._f.close()
        finally:
            if self._raw is not None:
                self._raw.close()

    def _call(self, method, *args):
        try:
            out = getattr(self._f, method)(*args)
            if out == b"" and self._raw is not None and self._raw.tell() == 0:
                # gzip's and zstd's readers take a 0-byte file (a download cut short) for an empty one
                raise EOFError("compressed file is empty (0 bytes), not even a header: a download cut short?")
            return out
        except _DECOMPRESSION_ERRORS as exc:
            if is_network_error(exc):
                raise transfer_cut_short(self._path, exc) from exc
            raise InvalidValueError(f"file cannot be read on ({type(exc).__name__}: {exc})",
                                    file=display_path(self._path), field="<file>") from None
        except ValueError as exc:
            if "range requests" not in str(exc):
                raise
            # fsspec reads a URL a block at a time, by ranges past the first (a file of over about 8 MB)
            raise no_range_requests(self._path, "reading a large file by URL needs") from exc

    def read(self, size: int = -1) -> bytes:
        """``size`` bytes (all, if negative: then a read error is raised) unless the file ends first. A read
        error after some of the ``size`` is held back for the next read: a buffered reader asked for many bytes
        at once drops those it read before the error, and a reader keeps the rows they hold (a JSON array cut
        short keeps its elements before the cut, as a JSON Lines file keeps its lines)."""
        if self._failed is not None:
            raise self._failed
        if size < 0:
            return self._call("read", size)
        read1 = getattr(self._f, "read1", None)
        pieces: list[bytes] = []
        left = size
        try:
            while left > 0:
                # One read of the underlying reader at a time (read1), or small reads when it has none.
                piece = self._call("read1", left) if read1 is not None else self._call("read", min(left, 1 << 16))
                if not piece:
                    break
                pieces.append(piece)
                left -= len(piece)
        except ToolUseDataError as exc:
            if not pieces:
                raise
            self._failed = exc
        return b"".join(pieces)

    def readline(self) -> bytes:
        if self._failed is not None:
            raise self._failed
        return self._call("readline")

    def seek(self, offset: int) -> int:
        self._failed = None
        return self._call("seek", offset)

    def tell(self) -> int:
        return self._f.tell()


_DECOMPRESSION_ERRORS = _decompression_errors()
