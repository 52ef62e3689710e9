"""Shared fixtures. Real upstream samples are read from ../shared/data (beside the project root); tests that
need them skip with a clear reason where that folder is absent."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data; skips the calling test if it is not there."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real upstream sample {path} is absent (../shared/data is provided beside the project in CI)")
    return path


@pytest.fixture(autouse=True, scope="session")
def _datasets_cache_outside_home(tmp_path_factory):
    """A load without ``cache_dir`` (streaming builders too) writes in datasets' default cache: the tests use a
    temporary one, never the user's."""
    import datasets

    mp = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("hf-datasets-cache")
    mp.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    # computed from the cache folder when datasets was imported
    mp.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    mp.setattr(datasets.config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
    yield
    mp.undo()


@pytest.fixture(autouse=True, scope="session")
def _one_ray_auth_mode():
    """Ray reads its auth mode once per process, while each Ray a test starts reads it from the environment: a
    test that started Ray with token auth disabled (as the cluster tests must) made a later test's plain
    ``ray.init`` fail ("InvalidAuthToken"), depending on the order the tests ran in. One mode for the session."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_AUTH_MODE", "disabled")
    yield
    mp.undo()


@pytest.fixture
def cache_dir(tmp_path):
    return str(tmp_path / "cache")


def count_calls(monkeypatch, cls: type, *names: str) -> dict[str, int]:
    """``{method name: calls so far}`` for methods of ``cls``, which keep working as before."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(cls, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, counted)
    return calls


def benchmark_module(name: str) -> ModuleType:
    """A script of benchmarks/ imported as module ``name`` (once per session: its functions must keep one
    identity, or the process pools that pickle them fail)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PROJECT_ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def nestful_mirror(tmp_path_factory) -> Path:
    """NESTFUL's bundled sample as a mirror (unified and raw), one per test module that uses it."""
    from mirror_support import build_sample_mirror

    return build_sample_mirror("nestful", tmp_path_factory.mktemp("nestful-mirror"), configs=["unified", "raw"])
