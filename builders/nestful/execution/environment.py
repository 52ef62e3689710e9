"""What executed rows depend on besides the functions' files: the interpreter that runs them and the libraries they
import (numpy, pandas, torch...), for the cache key. A library installed, upgraded or removed after a prepare
changes what the functions return (an ImportError before ``pip install torch``, a result after it); without this
the cached results of the old environment were served. Nothing here imports a library: a spec is looked up and the
file it would load is looked at (its name, size and times change when pip replaces it).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Iterable

# The top-level modules the functions of the pinned upstream folder import that are outside the standard library
# of some supported Python: distutils left it in 3.12 (setuptools provides it since). tests/test_nestful_execution.py
# checks pinned_third_party_imports() against the folder itself, when ../shared/data holds it.
PINNED_IMPORTS = ("dateutil", "distutils", "numpy", "pandas", "pkg_resources", "pytz", "requests", "torch")


def pinned_third_party_imports() -> tuple[str, ...]:
    """The libraries outside this interpreter's standard library that the pinned functions import."""
    return tuple(name for name in PINNED_IMPORTS if name not in sys.stdlib_module_names)

# `import a.b, c as d` and `from a.b import x` at any indentation (imports inside a function too); a relative
# `from . import x` names no library.
_IMPORT = re.compile(rb"^[ \t]*(?:import[ \t]+([\w.]+(?:[ \t]*(?:as[ \t]+\w+)?[ \t]*,[ \t]*[\w.]+)*)"
                     rb"|from[ \t]+(\w[\w.]*)[ \t]+import\b)", re.M)


def third_party_imports(folder: str | os.PathLike, version: str = "") -> list[str]:
    """The top-level modules outside the standard library that the ``.py`` files under ``folder`` import, sorted
    (read as text, never run; a word that only looks like an import, in a docstring, is one more name). Kept for
    the process by ``version`` (the folder's tree digest) when given: reading the pinned folder's 4,350 files
    takes a few tenths of a second."""
    if version:
        key = (os.fspath(folder), version)
        if key not in _IMPORTS:
            _IMPORTS[key] = _scanned(folder)
        return _IMPORTS[key]
    return _scanned(folder)


_IMPORTS: dict[tuple[str, str], list[str]] = {}


def _scanned(folder: str | os.PathLike) -> list[str]:
    names: set[str] = set()
    local: set[str] = set()  # the folder's own modules, which its files import by name
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".py"):
                continue
            local.add(name[:-3])
            try:
                text = Path(root, name).read_bytes()
            except OSError:  # the sandbox reports an unreadable function when it runs it
                continue
            for imported, imported_from in _IMPORT.findall(text):
                for part in (imported or imported_from).split(b","):
                    module = part.strip().split()[0].split(b".")[0].decode("ascii", "replace")
                    names.add(module)
    return sorted(n for n in names - local if n.isidentifier() and n not in sys.stdlib_module_names)


def environment_digest(modules: Iterable[str]) -> str:
    """A digest of the interpreter and of where each of ``modules`` would be imported from (its file's name, size
    and times), or that it is not installed."""
    digest = hashlib.sha1(f"{sys.implementation.name}\0{sys.version}".encode())
    for module in sorted(set(modules)):
        digest.update(f"\n{module}\0{_where(module)}".encode())
    return digest.hexdigest()[:16]


def _where(module: str) -> str:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a broken installation: keyed as such, and the run reports it
        return "unfindable"
    if spec is None:
        return "absent"
    paths = [spec.origin] if spec.origin and os.path.isabs(spec.origin) else list(spec.submodule_search_locations or ())
    stamps = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append(f"{path}\0?")
            continue
        stamps.append(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}")
    return "\0".join(stamps) or str(spec.origin)
