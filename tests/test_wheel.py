"""The built wheel works on its own: builders/ and cards/ ship inside it as tooluse_datasets.builders/.cards.

The wheel is built without network (no build isolation) and installed with --no-deps into a fresh venv
that sees the test environment's dependencies through a .pth line, so this checks what the wheel itself
carries (sub-packages, dummy data, templates, entry point) without re-downloading datasets and pyarrow.
Dependencies themselves are checked by .ci/run, which installs the project into a clean venv.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Building without isolation uses this environment's build backend: the test extra installs it.
    pytest.importorskip("wheel", reason="building the wheel offline needs the test extra's wheel and setuptools>=77")
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"building the wheel offline needs setuptools>=77 (the test extra), not {setuptools.__version__}")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(PROJECT_ROOT)], check=True)
    (path,) = out.glob("tooluse_datasets-*.whl")
    return path


def test_wheel_contains_builders_cards_and_their_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("tooluse_datasets/builders/nestful/__init__.py",
                     "tooluse_datasets/builders/nestful/dummy_data/nestful_github.jsonl",
                     "tooluse_datasets/cards/__init__.py"):
        assert required in names
    assert not any(n.startswith(("builders/", "cards/", "tests/")) for n in names)


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]
    Path(site, "test_deps.pth").write_text(deps + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    return venv


def run_in(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(cwd / "hf-cache"))
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_fresh_venv_imports_builders_from_the_wheel(fresh_venv, tmp_path):
    code = ("import tooluse_datasets, tooluse_datasets.builders.nestful as n; "
            "print(tooluse_datasets.__file__); print(n.Builder.__name__); "
            "print(tooluse_datasets.sample_files('nestful'))")
    result = run_in(fresh_venv, str(fresh_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert str(fresh_venv) in result.stdout.splitlines()[0]  # the wheel, not the source tree
    assert "Builder" in result.stdout and "dummy_data" in result.stdout


def test_fresh_venv_cli_help_and_offline_demo(fresh_venv, tmp_path):
    cli = str(fresh_venv / "bin" / "tooluse-datasets")
    help_result = run_in(fresh_venv, cli, "--help", cwd=tmp_path)
    assert help_result.returncode == 0 and "demo" in help_result.stdout and "export" in help_result.stdout
    demo = run_in(fresh_venv, cli, "demo", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "== nestful: 5 rows" in demo.stdout
