"""The code blocks of the README and the docs site, as a user types them, for tests/integration/docs.

A block is run as it is written, with two substitutions only: the example broker addresses (``broker1:9092``,
``broker2:9092``) become the test broker's, and ``/chk/`` (a checkpoint directory) becomes a directory of the test.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\s*$")
_EXAMPLE_BROKERS = re.compile(r"broker1:9092(,broker2:9092)?")
_EXIT_CODE = re.compile(r"exit code (\d)")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    """Of its opening fence, 1-based."""
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One command line of a shell block: its words, and the exit code its comment states (0 unless it says)."""

    words: list[str]
    exit_code: int
    line: str


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    found: list[Block] = []
    language, start, body = None, 0, []
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        fence = _FENCE.match(line)
        if fence and language is None:
            language, start, body = fence.group(1), number, []
        elif line.startswith("```") and language is not None:
            found.append(Block(str(page.relative_to(ROOT)), start, language, "\n".join(body) + "\n"))
            language = None
        elif language is not None:
            body.append(line)
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def substituted(text: str, bootstrap_servers: str, checkpoint_root: Path) -> str:
    """``text`` with the example brokers made the test broker, and ``/chk/`` a directory of the test."""
    return _EXAMPLE_BROKERS.sub(bootstrap_servers, text).replace("/chk/", f"{checkpoint_root}/")


def commands(block: Block) -> list[Command]:
    """The command lines of a shell block (comments and continuation lines joined); the exit code a line expects
    is the one its comment names ("exit code 1"), else 0."""
    lines: list[str] = []
    for raw in block.text.splitlines():
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        elif raw.strip() and not raw.lstrip().startswith("#"):
            lines.append(raw.strip())
    found = []
    for line in lines:
        words = shlex.split(line, comments=True)
        comment = line[line.index("#"):] if "#" in line else ""
        expected = _EXIT_CODE.search(comment)
        found.append(Command(words, int(expected.group(1)) if expected else 0, line))
    return found
