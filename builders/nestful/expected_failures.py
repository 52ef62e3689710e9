"""The rows ``verify`` is told not to count against the data: gold sequences known not to reproduce (upstream's
4 broken gold answers, a row that needs the network), so that ``verify`` can gate CI on the full file.

A list file holds one id a line (the id ``verify`` names a failure by: the ``sample_id``, or the unified id of a
row without one), with an optional ``# reason`` after it; blank lines and lines that are only a comment are
ignored::

    d448887d-...   # upstream's gold answer is wrong
    fa57c28a-e9d8-44fb-a358-a9404a557d5b  # needs the network, which the sandbox refuses
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Mapping, Optional, Union

ExpectedFailures = Union[Mapping[str, str], Iterable[str]]

# A comment starts at a "#" that begins the line or follows white space: an id may hold "#" ("s#2", an id
# suffixed for a repeated sample_id)
_COMMENT = re.compile(r"(?:^|\s)#")


def read_expected_failures(path: Union[str, os.PathLike]) -> dict[str, str]:
    """id -> reason (the line's comment, ``""`` without one; an id listed twice, its reasons joined by ``"; "``) of a
    list file; a file that is not UTF-8 text, or a line holding more than one id, is a ``ValueError`` naming the
    file and line."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"expected failures file {os.fspath(path)!r} is not UTF-8 text (byte {exc.start})") from None
    expected: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _COMMENT.search(line)
        name, reason = (line[:match.start()], line[match.end():]) if match else (line, "")
        name = name.strip()
        if not name:
            continue
        if len(name.split()) > 1:
            raise ValueError(f"expected failures file {os.fspath(path)!r}, line {number}: one id a line, got "
                             f"{name!r} (a reason goes after '#')")
        # an id listed twice keeps both reasons (the second was dropped without a word), a reason given again once
        reasons = [r for r in expected.get(name, "").split("; ") if r]
        if reason.strip() and reason.strip() not in reasons:
            reasons.append(reason.strip())
        expected[name] = "; ".join(reasons)
    return expected


def expected_failures_of(listed: Optional[ExpectedFailures]) -> dict[str, str]:
    """id -> reason of what ``verify`` takes: a mapping, ids (no reason), or None (nothing expected)."""
    if listed is None:
        return {}
    if isinstance(listed, (str, bytes)):  # one id would be read as its characters
        raise TypeError(f"expected_failures takes ids (a list, a set, or id -> reason), got {listed!r:.80}")
    if isinstance(listed, Mapping):
        pairs = list(listed.items())
    else:
        pairs = [(name, "") for name in listed]
    for name, reason in pairs:
        if not isinstance(name, str) or not name or not isinstance(reason, str):
            raise TypeError(f"expected failures are ids (non-empty strings) with reasons (strings), got "
                            f"{name!r:.80}: {reason!r:.80}")
    return dict(pairs)
