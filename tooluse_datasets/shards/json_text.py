"""What a file that should hold JSON text holds: a UTF-8 BOM, binary data told by its first bytes, and why a
line is not JSON."""
from __future__ import annotations

import re
from typing import Optional

from ..errors import InvalidValueError
from .paths import display_path

UTF8_BOM = b"\xef\xbb\xbf"


def _not_json_reason(line: bytes, exc: ValueError, start: Optional[int] = None) -> str:
    """Why a line is not JSON: bytes that are not UTF-8 are named by value and place (orjson says only that
    the text is not UTF-8, at a position in characters it could not decode), else the parser's message.
    ``start``: the file offset of the text (an array element), which then names its byte in the file."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        where = f"byte {bad.start} of the line" if start is None else f"byte {start + bad.start} of the file"
        return f"UTF-8 text (byte 0x{line[bad.start]:02x} at {where}; JSON files are UTF-8)"
    return f"valid JSON ({exc})"


# What a file that should hold JSON may hold instead, by its first bytes.
_MAGIC = ((b"PAR1", "Parquet data (name it .parquet)"), (b"\x1f\x8b", "gzip-compressed data (name it .gz)"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed data (name it .zst)"), (b"PK\x03\x04", "a zip archive (name it .zip)"),
          (b"\xfd7zXZ\x00", "xz-compressed data (name it .xz)"),
          (b"\x04\x22\x4d\x18", "lz4-compressed data (name it .lz4)"),
          (b"\xff\xfe", "UTF-16 text (JSON files are UTF-8)"), (b"\xfe\xff", "UTF-16 text (JSON files are UTF-8)"))
_BZIP2_MAGIC = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
_SNIFF_BYTES = 1024


def first_line(line: bytes, file: str) -> bytes:
    """A JSON Lines file's first line without its UTF-8 BOM; a file that is plainly not JSON text is an error."""
    refuse_binary(line, file)
    return line.removeprefix(UTF8_BOM)


def refuse_binary(head: bytes, file: str) -> None:
    """A typed error naming the file if the file starting with ``head`` is plainly not JSON text."""
    kind = not_json_text(head[:_SNIFF_BYTES])
    if kind:
        raise InvalidValueError(f"file holds {kind}, not JSON text", file=display_path(file), field="<file>")


def not_json_text(head: bytes) -> Optional[str]:
    """What the file starting with ``head`` holds if it is plainly not JSON text (binary data), else None."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if _BZIP2_MAGIC.match(head):  # "BZh", the block size, then a block's or the end's magic (no JSON text starts so)
        return "bzip2-compressed data (name it .bz2)"
    if head[257:262] == b"ustar":  # a tar header's magic (POSIX and GNU)
        return "a tar archive (extract it and pass its files, or zip them: a .zip archive's files are read)"
    # Text that opens with a brace or bracket holds a bad byte in a row of JSON text (that row's error, not the
    # whole file's) unless it is UTF-16, a NUL after every character: after the first and the second alike.
    text = head.removeprefix(UTF8_BOM).lstrip()
    if b"\x00" not in head:
        # Bytes that open no JSON value and are not UTF-8 (an image's header) are not rows either: one error
        # for the file, not one for every line its bytes happen to split into.
        opens_value = text[:1] in _VALUE_STARTS
        return None if opens_value or _is_utf8(text) else "data that is not UTF-8 text (JSON files are UTF-8)"
    utf16 = text[1:2] == b"\x00" and text[3:4] == b"\x00"
    return None if text[:1] in (b"{", b"[") and not utf16 else "binary data"


# The first bytes of a JSON value: a row of JSON text, however damaged, opens with one of them.
_VALUE_STARTS = frozenset(bytes([b]) for b in b'{["-0123456789tfn')


def _is_utf8(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as bad:
        return bad.reason == "unexpected end of data"  # a character cut where the sniffed bytes end
    return True
