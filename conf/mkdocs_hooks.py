"""MkDocs hooks of the docs site (mkdocs.yml): the home page is the README, the options page's tables are made
from the package's option declarations, and the API page from the package's public modules, so that none is
written twice."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README_MARKER = "<!-- the README -->"
OPTIONS_MARKER = re.compile(r"<!-- options: (read|write|both|spark) -->")
API_MARKER = "<!-- the public API -->"
PACKAGE = "spark_kafka_eos"


def readme_as_home_page() -> str:
    """The README, its links into docs/ made relative to the site's root."""
    return (ROOT / "README.md").read_text().replace("](docs/", "](")


def this_trees_package() -> None:
    """The pages describe this tree's package, not whatever version is installed. Put first on ``sys.path`` when a
    page needs it: an entry put there as the hooks loaded was gone by the time the pages were built."""
    if sys.path[:1] != [str(ROOT)]:
        sys.path.insert(0, str(ROOT))


def public_modules() -> list[str]:
    """The package, then each module at its top: what is internal lives in ``_internal/`` (or starts with ``_``)."""
    top = sorted(path.stem for path in (ROOT / PACKAGE).glob("*.py") if not path.stem.startswith("_"))
    return [PACKAGE] + [f"{PACKAGE}.{name}" for name in top]


def public_names() -> dict[str, list[str]]:
    """Public module -> the names of its ``__all__`` documented under it: a name defined by another public module
    is documented there, once."""
    this_trees_package()
    modules = public_modules()
    documented: dict[str, list[str]] = {}
    for name in modules:
        module = importlib.import_module(name)
        exports = getattr(module, "__all__", None)
        if exports is None:
            raise ValueError(f"the public module {name} ({module.__file__}) has no __all__: say what of it is public")
        homes = {export: getattr(getattr(module, export), "__module__", None) for export in exports}
        documented[name] = [export for export, home in homes.items() if home == name or home not in modules]
    return documented


def public_api() -> str:
    """The API page's body: per public module its docstring, then each of its names (a class without its members,
    which its docstring names)."""
    sections = []
    for name, exports in public_names().items():
        lines = [f"## `{name}`", "", f"::: {name}", "    options:", "      show_root_heading: false", "      members: false", ""]
        for export in exports:
            is_class = inspect.isclass(getattr(importlib.import_module(name), export))
            lines += [f"::: {name}.{export}", "    options:", "      heading_level: 3"]
            lines += ["      members: false", ""] if is_class else [""]
        sections.append("\n".join(lines))
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if README_MARKER in markdown:
        markdown = markdown.replace(README_MARKER, readme_as_home_page())
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, public_api())
    if OPTIONS_MARKER.search(markdown):
        this_trees_package()
        from spark_kafka_eos._internal.config.options import options_table

        markdown = OPTIONS_MARKER.sub(lambda match: options_table(match.group(1)), markdown)  # type: ignore[arg-type]
    return markdown
