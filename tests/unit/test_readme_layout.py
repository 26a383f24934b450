"""The contributing page's layout paragraph names every module of the package, and only modules that exist: the public
ones by their path in the package, the internal ones by their path in ``_internal/``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "spark_kafka_eos"
INTERNAL = PACKAGE / "_internal"


def layout_section() -> str:
    page = (ROOT / "docs" / "contributing.md").read_text()
    start = page.index("Layout, front to leaves")
    return page[start:page.index("Outside the package:", start)]


def test_the_layout_names_every_module_and_nothing_else() -> None:
    named = set(re.findall(r"`([a-z_/]+\.py)`", layout_section()))
    modules = {str(path.relative_to(INTERNAL if INTERNAL in path.parents else PACKAGE)) for path in PACKAGE.rglob("*.py")
               if path.name != "__init__.py"}
    assert modules - named == set(), "modules the layout does not name"
    assert named - modules == set(), "the layout names modules that do not exist"
