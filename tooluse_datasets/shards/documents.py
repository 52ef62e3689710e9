"""``.json`` files read: an array of rows (parsed whole, or streamed a block at a time, in runs of elements or
element by element), one object, or JSON Lines saved as ``.json``."""
from __future__ import annotations

import io
import itertools
import json
import re
from typing import Any, Callable, Iterator, Optional, Union

import orjson

from ..errors import InvalidJsonError, ToolUseDataError, json_kind
from .batches import _batched
from .files import open_text_file
from .json_text import _SNIFF_BYTES, UTF8_BOM, _not_json_reason, refuse_binary
from .lines import read_lines
from .paths import display_path
from .shard import LINES, NativeItem, RawBatch, Shard


def read_document(shard: Shard, batch_size: int, resume: Optional[tuple[int, int]] = None,
                  wanted: Optional[Callable[[int], bool]] = None) -> Iterator[RawBatch]:
    """A ``.json`` file: an array of row objects, one object (on one line or several), or JSON Lines saved as
    ``.json``. Elements of an array are numbered from 0; in an array that does not parse as a whole, each
    element that does is a row and each that does not is an error at its index (:func:`_array_elements`).
    An array of up to :data:`ARRAY_WHOLE_BYTES` is parsed whole; a larger one, or a piece of one
    (:func:`cut_array`), is read a block at a time (:func:`_streamed_array`). ``wanted`` picks rows by number,
    as for JSON Lines (elements delimited one by one are then not even parsed)."""
    from ..codec import loads, try_loads

    with open_text_file(shard.file) as f:
        # The first bytes say whether it is an array; only then is the file read on (JSON Lines is not).
        head = _sniffed(f)
        array = head.lstrip().startswith(b"[")
        if array:  # UTF-16 without its byte-order mark ("[\x00{\x00..."): one file error, as in JSON Lines
            refuse_binary(head, shard.file)
        data = b""
        # Where reading starts inside an array (after an element and its comma; 0: at its start), and the index
        # of the element there: a piece's start, or a position (see _streamed_array).
        inside, index = shard.start, shard.first_row or 0
        if resume and resume[1] > 0:
            inside, index = resume[1], resume[0]
        elif resume and resume[1] < 0:
            inside, into = _unpacked(resume[1])
            index = resume[0] - into
        later = resume[0] if resume else 0  # (a resume at 0, after the last element: the rows before it are skipped)
        if array and inside:
            if shard.stop is not None and inside >= shard.stop:
                return  # resumed after the piece's last element
            if resume and resume[1]:
                _check_element_start(f, shard.file, inside)
            f.seek(inside)
            elements = _streamed_array(f, [], inside, index, lambda n: n >= later and (wanted is None or wanted(n)),
                                       stop=shard.stop)
            yield from _array_batches(elements, batch_size)
            return
        if array:
            after_bracket = f.tell() - len(head) + head.index(b"[") + 1  # the file offset blocks start at
            blocks, size = [head], len(head)
            failed: Optional[ToolUseDataError] = None
            try:
                while shard.stop is None and size <= ARRAY_WHOLE_BYTES and (block := f.read(_ARRAY_READ_BYTES)):
                    blocks.append(block)
                    size += len(block)
            except ToolUseDataError as exc:  # cut short (a damaged compressed file): the elements read whole
                failed = exc                 # before the damage are rows, as in a larger array, then the error
            if size > ARRAY_WHOLE_BYTES or shard.stop is not None or failed is not None:
                # large, the first piece of a cut array, or cut short
                blocks[0] = head[head.index(b"[") + 1:]
                elements = _streamed_array(f if failed is None else _FailedReads(failed), blocks, after_bracket, 0,
                                           lambda n: n >= later and (wanted is None or wanted(n)), stop=shard.stop)
                yield from _array_batches(elements, batch_size)
                return
            data = b"".join(blocks)
        document = None
        if not array and head.lstrip().startswith(b"{"):
            # A first line that is not a JSON value of its own may open one object written over several lines.
            start = f.tell() - len(head)
            if b"\n" not in head:
                head += f.readline()
            first = head.lstrip().split(b"\n", 1)[0]
            if not try_loads(first)[0] and not _one_value_leniently(first):
                document = _multiline_object(head + f.read(), start)
    if not array:
        if document is not None:
            if not resume or resume[0] == 0:
                yield RawBatch([(0, document)], [(1, 0)])
            return
        yield from read_lines(Shard(shard.file, LINES), batch_size, resume, wanted)  # also a broken first line's
        return
    try:
        elements: list = loads(data)
    except (ValueError, RecursionError):
        # One bad element (a truncated value, NaN, 1e400, a lone surrogate escape...) must not cost the others:
        # delimit the elements and parse each on its own.
        elements = list(_array_elements(data, after_bracket - data.index(b"[") - 1))
    if later > len(elements):
        raise ValueError(f"{display_path(shard.file)}: a saved stream resumes at element {later}, past the end of "
                         f"the array ({len(elements)} elements): the file changed since the state_dict was saved; a "
                         "state resumes the data it was taken from")
    for start in range(later, len(elements), batch_size):
        chunk = elements[start:start + batch_size]
        items: list[NativeItem] = [(start + i, _array_row(row, start + i)) for i, row in enumerate(chunk)]
        yield RawBatch(items, [(n + 1, 0) for n, _ in items])


def _check_element_start(f, path: str, offset: int) -> None:
    """Where a saved stream resumes an array read a block at a time, ``offset`` follows an element's comma (or
    the opening bracket, a run of elements starting there). Elsewhere the file was edited since the state was
    saved, and reading on would take the rest of an element for one (a bad row reported, real rows lost)."""
    f.seek(offset - 1)
    before = f.read(1)
    if before not in (b",", b"["):
        raise ValueError(f"{display_path(path)}: a saved stream resumes at byte {offset}, which "
                         f"{'is past the end of the file' if not before else 'does not follow an element'}: the "
                         "file changed since the state_dict was saved; a state resumes the data it was taken from")


# Lines after the first of a .json file looked at to tell JSON Lines from one object written over several lines.
_LINES_TO_TELL = 64


def _one_value_leniently(line: bytes) -> bool:
    """The line is one value to Python's json, which also takes what the exact reader refuses (NaN, -Infinity,
    1e400, a lone surrogate escape; integers past Python's digit limit, kept as text): a bad row of JSON Lines,
    not the first line of an object written over several lines (whose other lines, read as one object, would
    make the file one error instead of a row each)."""
    try:
        json.loads(line, parse_int=str)
    except (ValueError, RecursionError):
        return False
    return True


def _multiline_object(text: bytes, start: int) -> Union[dict, ToolUseDataError, None]:
    """The object of a ``.json`` file whose first line is not JSON alone (``text``, from file offset ``start``):
    one object written over several lines; or, when that does not parse and none of the next lines is an object
    of its own either, the error saying why, for the whole file (read as lines, each line of it would be a row
    that is not JSON: a pretty-printed object with one stray comma was a hundred errors). None: the file is JSON
    Lines with a bad first line, whose other lines are rows."""
    from ..codec import loads, try_loads

    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:
        rest = (line for line in itertools.islice(io.BytesIO(text), 1, None) if line.strip())
        later = list(itertools.islice(rest, _LINES_TO_TELL))
        if not later or any(isinstance(try_loads(line)[1], dict) for line in later):
            return None  # (one line alone: a bad line of JSON Lines as much as a bad object)
        why = f"is not {_not_json_reason(text, exc, start)}" if isinstance(exc, ValueError) else \
            "nests values too deeply to read"
        return InvalidJsonError(f"file holds one JSON object written over several lines that {why}", row=0,
                                field="<file>")
    return value if isinstance(value, dict) else None


class _FailedReads:
    """A file whose every read raises the error that ended the reading of it."""

    def __init__(self, error: ToolUseDataError):
        self._error = error

    def read(self, size: int = -1) -> bytes:
        raise self._error


def _sniffed(f) -> bytes:
    """The first bytes of a JSON file read from ``f`` that are not all white space (a UTF-8 BOM dropped): what
    it holds starts there, at file offset ``f.tell() - len(head)``."""
    head = f.read(_SNIFF_BYTES).removeprefix(UTF8_BOM)
    while head and not head.strip():  # leading white space longer than one sniff
        head = f.read(_SNIFF_BYTES)
    return head


# A JSON array of up to this many bytes is parsed whole; a larger one is read a block of _ARRAY_READ_BYTES at a
# time, in runs of elements (or element by element), so memory holds a block and a run, not the file. Runs are
# the faster way as well: 47 MB of ms-swift rows read in 0.19 s CPU and 188 MiB peak, against 0.27 s and 360 MiB
# parsed whole (first row after 29 instead of 250 ms).
ARRAY_WHOLE_BYTES = 4 << 20
_ARRAY_READ_BYTES = 4 << 20


def _array_batches(elements: Iterator[tuple[int, Any, int]], batch_size: int) -> Iterator[RawBatch]:
    """Batches of ``(index, element, offset)``; a read error (a truncated compressed file) comes after the
    elements before it, as in JSON Lines."""
    return _batched((((index, _array_row(element, index)), (index + 1, offset)) for index, element, offset in elements),
                    batch_size)


def _element_pattern(depth: int) -> bytes:
    """A JSON object or array nesting at most ``depth`` levels: brackets around runs of other characters and
    whole strings, each run matched at C speed. (A ``{`` closed by ``]`` matches too: the parser refuses it.)"""
    pattern = rb'[\[{](?:[^{}\[\]"]++|' + _STRING + rb')*+[\]}]'
    for _ in range(depth - 1):
        pattern = rb'[\[{](?:[^{}\[\]"]++|' + _STRING + rb'|' + pattern + rb')*+[\]}]'
    return pattern


_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# An array element (with the white space around it) and the comma or bracket after it: the common case, found by
# one regex match, about twice as fast as token by token. Deeper elements, and text that is not JSON, are
# delimited token by token instead, as is everything on Python 3.10 (no possessive quantifiers, without which
# a failing match could backtrack exponentially).
try:
    _ELEMENT: Optional[re.Pattern] = re.compile(
        rb'(\s*+(?:' + _element_pattern(8) + rb'|' + _STRING + rb'|[^\s{}\[\],"]++)\s*+)([,\]])', re.DOTALL)
except re.error:
    _ELEMENT = None


def _streamed_array(f, blocks: list[bytes], base: int, index: int, wanted: Optional[Callable[[int], bool]], *,
                    stop: Optional[int] = None, parse: bool = True,
                    run_bytes: int = 0) -> Iterator[tuple[int, Any, int]]:
    """``(index, element or error, position to resume at)`` for the elements of a JSON array read from ``f``, from
    ``blocks`` (the bytes read so far, which start at file offset ``base``, just after ``[`` or an element's
    comma; emptied here, so that this generator alone holds them) on. The same elements, errors and numbering
    as :func:`_array_elements` on the whole text. Elements ``wanted`` refuses are not yielded (those delimited
    one by one are not parsed either). ``stop``: end after the element whose comma ends at that offset (a piece
    of a cut array); ``parse=False``: yield each element as None (finding cuts); ``run_bytes``: the span of a
    run of elements parsed together (0: :data:`RUN_BYTES`, which is 0 to read every element alone).

    Runs of elements are parsed together where they can be (:func:`_element_run`), else each is delimited and
    parsed alone. The position is the offset after the element's comma, 0 after the last element (a resume
    there reads the array again, skipping its elements), or, inside a run, a negative number packing the run's
    start and how many of its elements come before the resume point (:func:`_packed`)."""
    from ..codec import loads

    failed: Optional[ToolUseDataError] = None

    def read(size: int = -1) -> bytes:
        """The next bytes of ``f``; after a read error (a compressed file cut short), none: the elements whole
        before it are still given, then the error (the element it cuts is not one)."""
        nonlocal failed
        if failed is not None:
            return b""
        try:
            return f.read(size)
        except ToolUseDataError as exc:
            failed = exc
            return b""

    buf = b"".join(blocks)
    blocks.clear()
    pos, eof = 0, False
    run_bytes = run_bytes or RUN_BYTES
    runs_from = base if run_bytes else None  # file offset from which runs are tried again (None: never)
    while True:
        if runs_from is not None and base + pos >= runs_from:
            if not eof and len(buf) - pos < 2 * run_bytes:  # room for a whole run
                pending = [buf[pos:]]
                while not eof and sum(map(len, pending)) < 2 * run_bytes:
                    pending.append(read(_ARRAY_READ_BYTES))
                    eof = not pending[-1]
                base, buf, pos = base + pos, b"".join(pending), 0
            limit = len(buf) if stop is None else min(len(buf), stop - base)  # the comma may end at stop
            comma, values = _element_run(buf, pos, limit, run_bytes)
            if values is None:
                runs_from = base + comma
            else:
                run_start = base + pos
                last = len(values) - 1
                for i, value in enumerate(values):
                    if wanted is None or wanted(index + i):
                        yield index + i, value if parse else None, \
                            base + comma + 1 if i == last else _packed(run_start, i + 1)
                index += len(values)
                pos = comma + 1
                if stop is not None and base + pos >= stop:
                    return
                if len(buf) - pos < pos:
                    base, buf, pos = base + pos, buf[pos:], 0
                continue
        match = _ELEMENT.match(buf, pos) if _ELEMENT is not None else None
        if match is not None:
            text, separator, end = match.group(1), match.group(2), match.end()
        else:
            found = _token_delimited(buf, pos)
            if found is None:  # the element goes on past the bytes read, or cannot be delimited at all
                if not eof:  # read at least as much again as is pending: an element is scanned O(log n) times
                    more = read(max(_ARRAY_READ_BYTES, len(buf) - pos))
                    eof = not more
                    base, buf, pos = base + pos, buf[pos:] + more, 0
                    continue
                if failed is not None:
                    raise failed
                rest = buf[pos:]  # a string that never ends, or no closing bracket: nothing after it can be cut
                # "[{...}, {...}": the file ends right after a whole element, which is a row; the cut is after it
                whole = bool(rest.strip()) and _one_value_leniently(rest)
                if whole:
                    if wanted is None or wanted(index):
                        yield index, _parse_element(loads, rest, index, base + pos) if parse else None, 0
                    index += 1
                if rest.strip() and not whole and (wanted is None or wanted(index)):
                    yield index, InvalidJsonError(f"element {index} and what follows cannot be read (unterminated "
                                                  f"string or missing bracket; {len(rest)} bytes to the end of the "
                                                  f"file)", row=index, field="<element>"), 0
                elif wanted is None or wanted(index):  # "[{...}," or "[" at the end: a file cut short there
                    after = (f"element {index - 1}" + ("" if whole else " and its comma")) if index else \
                        "its opening bracket"
                    yield index, InvalidJsonError(f"the array has no closing bracket: the file ends after {after} "
                                                  f"(cut short?)", row=index, field="<file>"), 0
                return
            text, separator, end = buf[pos:found], buf[found:found + 1], found + 1
        if not (separator == b"]" and index == 0 and not text.strip()):  # "[]" holds no element
            if wanted is None or wanted(index):
                if not parse:
                    element = None
                elif separator == b"]" and not text.strip():  # "[{...},]": a comma and no element after it
                    element = InvalidJsonError(f"trailing comma after the last element (byte {base + pos - 1}); "
                                               "JSON allows none: remove it", row=index, field="<file>")
                else:
                    element = _parse_element(loads, text, index, base + pos)
                yield index, element, base + end if separator == b"," else 0
            index += 1
        if stop is not None and separator == b"," and base + end >= stop:
            return
        pos = end
        if separator == b"]":
            rest = (buf[pos:] + read()).strip()
            if failed is not None:
                raise failed
            if rest and (wanted is None or wanted(index)):
                yield index, InvalidJsonError(f"{len(rest)} bytes of text after the array's end", row=index,
                                              field="<file>"), 0
            return
        if len(buf) - pos < pos:  # drop what was consumed once it outweighs what is left
            base, buf, pos = base + pos, buf[pos:], 0


# Elements parsed together span up to this many bytes (a few hundred rows); an element larger than that, or
# the elements of a run that did not parse, are read one by one.
RUN_BYTES = 1 << 20
# An object element's start: white space, the brace, and its first key (up to 64 characters, no escapes).
_OBJECT_START = re.compile(rb'\s*\{\s*"[^"\\]{0,64}"\s*:')
_INTO_BITS = 23  # a packed position: elements into the run (a 1 MB run holds at most 150K), then the run's offset


def _element_run(buf: bytes, pos: int, limit: int, run_bytes: int) -> tuple[int, Optional[list]]:
    """The elements of ``buf`` from ``pos`` (just after ``[`` or an element's comma) up to a comma before
    ``limit``, parsed in one orjson call: ``(the comma's index, their values)``; or ``(where to try again, None)``.

    The comma is a guess: the last one in the next ``run_bytes`` followed by the same white space, brace and
    first key as the element at ``pos`` (the next element's start, in an array of rows alike). ``[`` + the text
    before it + ``]`` then parses only if the guess is right: a comma inside a string leaves the string open, one
    inside an element leaves its brackets open (orjson accepts no trailing commas or unclosed values). A run
    holding what the exact reader treats apart (an integer beyond 64 bits, NaN, an element too deep or not JSON)
    does not parse or is not taken, and its elements are read one by one."""
    start = _OBJECT_START.match(buf, pos)
    if start is None:
        return pos + 1, None  # not an object: this element alone
    signature = b"," + start.group()
    comma = buf.rfind(signature, pos + 1, min(limit - 1, pos + run_bytes) + len(signature))
    if comma < 0:
        return pos + run_bytes, None  # no boundary in reach: read on one by one
    from ..codec import may_hold_big_int

    try:
        values = orjson.loads(b"[" + buf[pos:comma] + b"]")
    except orjson.JSONDecodeError:
        return comma + 1, None
    if may_hold_big_int(values):  # orjson rounds integers beyond 64 bits to floats: read each alone, exactly
        return comma + 1, None
    if len(values) >> _INTO_BITS:  # more elements than a packed position can count into a run
        return comma + 1, None
    return comma, values


def _packed(run_start: int, into: int) -> int:
    return -(run_start << _INTO_BITS | into)


def _unpacked(position: int) -> tuple[int, int]:
    """(a run's start offset, elements into it) of a packed position."""
    return -position >> _INTO_BITS, -position & ((1 << _INTO_BITS) - 1)


def _token_delimited(data: bytes, start: int) -> Optional[int]:
    """Where the array element starting at ``start`` ends (the offset of the comma or bracket after it), found
    token by token as :func:`_array_elements` does; None if ``data`` ends first or a string in it never does."""
    depth = 0
    for token in _ARRAY_TOKEN.finditer(data, start):
        char = token.group()
        if char in (b"[", b"{"):
            depth += 1
        elif char in (b"]", b"}") and depth:
            depth -= 1
        elif char == b'"':
            return None
        elif depth == 0 and char in (b",", b"]"):
            return token.start()
    return None


def _array_row(element, index: int) -> Union[dict, ToolUseDataError]:
    if isinstance(element, (dict, ToolUseDataError)):
        return element
    return InvalidJsonError(f"element is a JSON {json_kind(element)}, not an object", row=index, field="<element>")


# Strings (whole, escapes included), a quote that opens no complete string, and the structural characters.
_ARRAY_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|["\[\]{},]', re.DOTALL)


def _array_elements(data: bytes, offset: int = 0) -> Iterator[Any]:
    """The elements of a JSON array that does not parse as a whole: each element's text is found by
    matching brackets outside strings, then parsed alone; an element that does not parse is an
    :class:`InvalidJsonError` at its index. Where the text stops being delimitable (an unterminated string,
    a missing bracket), the rest of the file is one error at the index it starts at. (The streamed reader over
    text already in memory; ``offset``: the file offset ``data`` starts at, for the byte offsets errors name.)"""
    opened = data.index(b"[") + 1
    return (value for _, value, _ in _streamed_array(io.BytesIO(), [data[opened:]], offset + opened, 0, None))


def _parse_element(loads, text: bytes, index: int, start: int) -> Any:
    """The value of an array element's ``text`` (at file offset ``start``), or the error saying why it has none."""
    try:
        return loads(text)
    except ValueError as exc:
        return InvalidJsonError(f"element is not {_not_json_reason(text, exc, start)}", row=index, field="<element>")
    except RecursionError:
        return InvalidJsonError("element nests values too deeply to read", row=index, field="<element>")
