"""The README tells the truth: its schema table is the code's, and .ci/run runs its test command."""
from __future__ import annotations

import re

from tooluse_datasets.schema import UNIFIED_FEATURES, FIELD_DOCS, schema_table

from conftest import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text()


def test_readme_schema_table_is_generated_from_the_code():
    assert schema_table() in README


def test_every_unified_column_is_documented():
    documented = {name for name, _, _ in FIELD_DOCS if "." not in name and "[" not in name}
    assert documented == set(UNIFIED_FEATURES)


def test_ci_runs_exactly_the_readme_test_command():
    commands = re.findall(r"```bash\n(.+?)\n```", README)
    assert len(commands) >= 2
    setup_and_demo, tests = commands[0], commands[1]
    assert "tooluse-datasets demo" in setup_and_demo and "pytest" in tests
    assert tests in (PROJECT_ROOT / ".ci" / "run").read_text()


def test_readme_tables_are_not_cut_by_a_line_break():
    """A table row wrapped onto the next line ends the table there: the rest of the row shows as a paragraph."""
    lines = README.splitlines()
    in_code = False
    for number, (line, following) in enumerate(zip(lines, lines[1:]), start=2):
        in_code ^= line.startswith("```")
        if not in_code and line.startswith("|") and following.strip() and not following.startswith("|"):
            raise AssertionError(f"README.md line {number} continues a table row: {following[:80]!r}")


def test_layout_names_every_module_of_the_package():
    layout = re.search(r"## Layout\n\n```\n(.+?)\n```", README, re.S).group(1)
    package = PROJECT_ROOT / "tooluse_datasets"
    names = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    names += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    missing = [name for name in sorted(names) if not re.search(rf"(?<![\w/]){re.escape(name)}", layout)]
    assert not missing, f"README's Layout does not name {missing}"


def test_layout_names_every_module_of_the_subpackages_and_builders():
    """The modules inside tooluse_datasets' folders and each source's folder, by name (the lines of their folder
    list them without their .py)."""
    layout = re.search(r"## Layout\n\n```\n(.+?)\n```", README, re.S).group(1)
    modules = [p for p in (PROJECT_ROOT / "tooluse_datasets").glob("*/**/*.py")]
    modules += [p for p in (PROJECT_ROOT / "builders").glob("*/**/*.py") if p.parent.name != "dummy_data"]
    missing = sorted(str(p.relative_to(PROJECT_ROOT)) for p in modules if p.name != "__init__.py"
                     and not re.search(rf"(?<![\w/]){re.escape(p.stem)}(?![\w/])", layout))
    assert not missing, f"README's Layout does not name {missing}"
