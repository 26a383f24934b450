"""The docs site (mkdocs.yml, docs/) stays true: the README is a front page that links into it, the options page is
made from the option declarations, the API page from the public modules (everything else is in ``_internal/``), and
the testing page's map of promises names only tests that exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import spark_kafka_eos
from spark_kafka_eos._internal.config.options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 250
PACKAGE_DIR = ROOT / "spark_kafka_eos"


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "conf" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_a_front_page_whose_links_into_the_docs_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    pages = re.findall(r"\]\(docs/([^)#]+)", readme)
    assert pages, "the README links into no page of the docs"
    assert [page for page in pages if not (DOCS / page).is_file()] == []
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [page for page in set(pages) if f": {page}" not in nav] == [], "linked pages missing from mkdocs.yml's nav"


def test_the_home_page_is_the_readme_with_its_links_made_relative_to_the_site() -> None:
    home = hooks().on_page_markdown((DOCS / "index.md").read_text(), None, None, None)
    assert home.startswith("# spark-kafka-eos") and "](docs/" not in home and "](reading.md)" in home


def test_the_options_page_lists_every_declared_option_once_with_its_default_and_meaning() -> None:
    page = hooks().on_page_markdown((DOCS / "options.md").read_text(), None, None, None)
    assert "<!-- options:" not in page
    for option in OPTIONS.values():
        assert page.count(f"| `{option.name}` | {option.default} | {option.doc} |") == 1, option.name
    rows = re.findall(r"^\| `([^`]+)` \|", page, flags=re.MULTILINE)
    assert sorted(rows) == sorted(OPTIONS)


def test_the_testing_page_names_only_tests_that_exist() -> None:
    """Each ``path.py::test_name`` (or ``::test_name`` after a path) of the promise map is a test function of that
    file; a renamed or deleted test fails here instead of leaving a promise mapped to nothing."""
    text = (DOCS / "testing.md").read_text()
    missing, checked, current = [], 0, None
    for match in re.finditer(r"([\w/]*test_\w+\.py)|::(test_\w+)", text):
        path, name = match.groups()
        if path is not None:
            # A bare file name is in the directory of the path before it.
            path = path.removeprefix("tests/")
            current = path if "/" in path or current is None else f"{current.rsplit('/', 1)[0]}/{path}"
            path = current
            if not (ROOT / "tests" / path).is_file():
                missing.append(path)
            continue
        assert current is not None, f"::{name} names no file"
        source = ROOT / "tests" / current
        if not source.is_file() or not re.search(rf"^(?:async )?def {name}\(", source.read_text(), flags=re.MULTILINE):
            missing.append(f"{current}::{name}")
        checked += 1
    assert checked > 200
    assert missing == [], missing


def test_the_top_of_the_package_holds_only_the_public_modules_and_the_internals() -> None:
    top = {path.name for path in PACKAGE_DIR.iterdir() if path.name != "__pycache__"}
    assert top == {"__init__.py", "py.typed", "_internal", "cli.py", "datasource.py", "errors.py", "schema_registry.py"}, (
        "a new module goes in spark_kafka_eos/_internal/, unless it is public API (then on the API page, by its __all__)")


def test_the_api_page_documents_every_exported_name_once_from_a_public_module() -> None:
    site = hooks()
    directives = re.findall(r"^::: (\S+)$", site.public_api(), re.MULTILINE)
    assert not [d for d in directives if "._internal" in d]
    documented = [d.rsplit(".", 1)[1] for d in directives if "." in d and d.rsplit(".", 1)[0] in site.public_modules()]
    assert sorted(documented) == sorted(set(documented)), "a name documented twice"
    assert set(spark_kafka_eos.__all__) <= set(documented)
    assert {"wire_format", "payload", "schema_id", "main"} <= set(documented)


def test_the_api_page_is_the_generated_one() -> None:
    page = (DOCS / "api.md").read_text()
    assert hooks().API_MARKER in page
    assert ":::" not in page, "the API page's directives are generated (conf/mkdocs_hooks.py), not written by hand"
