"""JSON Lines shards read: the lines that start in a byte range, numbered from the file's start (line starts
remembered per file, so that a file's ranges read in order scan it once)."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Optional

from ..errors import InvalidJsonError, InvalidValueError, ToolUseDataError, json_kind
from .files import open_text_file
from .json_text import _SNIFF_BYTES, _not_json_reason, first_line, not_json_text
from .paths import display_path
from .shard import NativeItem, RawBatch, Shard


def read_lines(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
               wanted: Optional[Callable[[int], bool]] = None,
               parse: Optional[Callable[[bytes], Any]] = None) -> Iterator[RawBatch]:
    """JSON Lines of a byte range: the lines that start in ``[start, stop)``. Row numbers count lines in the
    file from 0, blank lines included (they are skipped, not numbered anew). Lines whose row number
    ``wanted`` refuses are skipped unparsed. ``parse``: what reads a line instead of the exact decoder (a
    planner that needs one key); it raises ValueError for a line that is not JSON."""
    from ..codec import loads

    loads = parse or loads

    with open_text_file(shard.file) as f:
        if resume is not None:
            row, offset = resume
            if offset:
                offset = _check_line_start(f, shard.file, offset)
            else:
                f.seek(offset)
        else:
            # The bytes first_line sniffs, the first line's: the file's first shard reports it as a whole, or
            # reads it, and then so does this one.
            if shard.start and not_json_text(f.read(_SNIFF_BYTES).partition(b"\n")[0]):
                return
            offset = _first_line_start(f, shard.file, shard.start)
            if shard.first_row is not None and offset == shard.start:
                row = shard.first_row
            else:
                row = _count_lines_before(f, shard.file, offset) if offset else 0
            f.seek(offset)
        items: list[NativeItem] = []
        positions: list[tuple[int, int]] = []
        while shard.stop is None or offset < shard.stop:
            try:
                line = f.readline()
            except ToolUseDataError:
                if items:  # the rows before the damage are rows
                    yield RawBatch(items, positions)
                raise
            if not line:
                _remember_line_number(shard.file, offset, row)
                break
            start_of_line = offset
            offset += len(line)
            if start_of_line == 0:
                line = first_line(line, shard.file)
            if (wanted is None or wanted(row)) and line.strip():
                try:
                    value = loads(line)
                except ValueError as exc:
                    value = InvalidJsonError(f"line is not {_not_json_reason(line, exc)}", row=row, field="<line>")
                except RecursionError:
                    value = InvalidJsonError("line nests values too deeply to read", row=row, field="<line>")
                else:
                    if not isinstance(value, dict):
                        value = InvalidJsonError(f"line holds a JSON {json_kind(value)}, not an object",
                                                 row=row, field="<line>")
                items.append((row, value))
                positions.append((row + 1, offset))
                if len(items) >= batch_size:
                    yield RawBatch(items, positions)
                    items, positions = [], []
            row += 1
        _remember_line_number(shard.file, offset, row)
        if items:
            yield RawBatch(items, positions)


def _check_line_start(f, path: str, offset: int) -> int:
    """Move ``f`` to ``offset``, where a saved stream resumes, and return where the next line starts: ``offset``,
    the start of a line (after a newline), or the end of a file whose last line has none; past the newline
    written after that last line since, when rows were appended (it ends the line the state counted). Elsewhere
    the file was edited since the state was saved, and reading on would take the rest of a line for a row (a bad
    row reported, the real one lost, rows numbered wrongly)."""
    f.seek(offset - 1)
    before = f.read(1)
    if before == b"\n":
        return offset
    after = f.read(2)
    if after[:1] == b"\n" or after == b"\r\n":
        offset += after.index(b"\n") + 1
        f.seek(offset)
    elif not before or after:
        raise ValueError(f"{display_path(path)}: a saved stream resumes at byte {offset}, which "
                         f"{'is past the end of the file' if not before else 'is not the start of a line'}: the "
                         "file changed since the state_dict was saved; a state resumes the data it was taken from")
    return offset


def _first_line_start(f, path: str, start: int) -> int:
    """Offset of the first line that starts at or after ``start``. A range that starts past the file's end was
    planned when the file was longer: it was cut short since (rewritten under a stream), and its rows are
    gone, which the file's error says rather than the stream ending early without a word."""
    if start == 0:
        return 0
    f.seek(start - 1)
    before = f.read(1)
    if not before:
        raise InvalidValueError(f"the file ends before byte {start}, where a range of it planned to be read starts: "
                                "it was cut short since the stream or load was planned (read it again from the "
                                "start)", file=display_path(path), field="<file>")
    if before == b"\n":
        return start
    f.readline()
    return f.tell()


# Row numbers of line starts readers reached, per file (this process): a reader of a later byte range counts
# lines from the nearest known start before its own instead of from the top of the file, so reading a file's
# shards in order scans it once, not once per shard.
# A local file is known by its size and times too, so a file rewritten in place is counted anew.
_LINE_NUMBERS: dict[tuple, dict[int, int]] = {}
_MAX_REMEMBERED_FILES = 64


def file_version(path: str) -> tuple:
    """What tells a file's contents apart in this process: its path, size, modification and status-change times (a
    URL: its path). Every write sets the status-change time and nothing sets it back, so a rewrite that keeps the
    size and modification time (``touch -r``) is told apart too (see cache_keys). A file of a zip archive
    (``zip://<member>::<archive>``) has the archive's: rewritten, the archive holds other rows at the same member
    path."""
    try:
        stat = os.stat(path.split("::")[-1])
    except (OSError, ValueError):  # a URL: pinned revisions do not change
        return (path,)
    return (path, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _remember_line_number(path: str, offset: int, row: int) -> None:
    key = file_version(path)
    if key not in _LINE_NUMBERS and len(_LINE_NUMBERS) >= _MAX_REMEMBERED_FILES:
        _LINE_NUMBERS.pop(next(iter(_LINE_NUMBERS)))
    _LINE_NUMBERS.setdefault(key, {})[offset] = row


def _count_lines_before(f, path: str, offset: int) -> int:
    known = _LINE_NUMBERS.get(file_version(path), {})
    start = max((o for o in known if o <= offset), default=0)
    f.seek(start)
    count, remaining = known.get(start, 0), offset - start
    while remaining:
        chunk = f.read(min(remaining, 16 << 20))
        if not chunk:
            break
        count += chunk.count(b"\n")
        remaining -= len(chunk)
    return count
