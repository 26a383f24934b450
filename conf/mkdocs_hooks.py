"""MkDocs hooks of the docs site (mkdocs.yml): the home page is the README, and the options page's tables are made
from the package's option declarations, so that neither is written twice."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README_MARKER = "<!-- the README -->"
OPTIONS_MARKER = re.compile(r"<!-- options: (read|write|both|spark) -->")


def readme_as_home_page() -> str:
    """The README, its links into docs/ made relative to the site's root."""
    return (ROOT / "README.md").read_text().replace("](docs/", "](")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if README_MARKER in markdown:
        markdown = markdown.replace(README_MARKER, readme_as_home_page())
    if OPTIONS_MARKER.search(markdown):
        from spark_kafka_eos.config.options import options_table

        markdown = OPTIONS_MARKER.sub(lambda match: options_table(match.group(1)), markdown)  # type: ignore[arg-type]
    return markdown
