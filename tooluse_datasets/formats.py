"""An output format other than ``unified`` and ``raw``: its features and its writer from unified rows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from datasets import Features


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    features: Features
    from_unified: Callable[[dict], dict]
