"""Package discovery only (metadata lives in pyproject.toml).

builders/ and cards/ sit at the top of the repository, one folder per source, and ship inside the
wheel as ``tooluse_datasets.builders.<source>`` and ``tooluse_datasets.cards``. Discovering the
sub-packages here means adding a source folder needs no packaging change.
"""
from setuptools import find_packages, setup

packages = find_packages(include=["tooluse_datasets", "tooluse_datasets.*"])
for top in ("builders", "cards"):
    packages += [f"tooluse_datasets.{name}" for name in find_packages(include=[top, f"{top}.*"])]

setup(packages=packages)
