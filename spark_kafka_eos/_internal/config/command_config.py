"""Client settings for the ``kafka-eos`` command from where Kafka's own tools take them, so that a secret never has
to be on a command line: a Java properties file (``--command-config FILE``) and the environment
(``KAFKA_EOS_KAFKA_SASL_PASSWORD`` is ``sasl.password``).

A properties file written for Kafka's tools may hold a JAAS line: ``sasl.jaas.config`` of the PLAIN and SCRAM login
modules becomes ``sasl.username`` and ``sasl.password``; any other Java-only setting is refused later, with what to
use instead (:data:`spark_kafka_eos._internal.config.librdkafka.JAVA_ONLY_SETTINGS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

ENVIRONMENT_PREFIX = "KAFKA_EOS_KAFKA_"
"""``KAFKA_EOS_KAFKA_<KEY>``: a client setting, its key upper-cased with ``_`` for ``.``."""

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class CommandConfigError(ValueError):
    """A properties file that cannot be read; the message names the file and line, never a value."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Java's logical lines: comments dropped, a line ending in an odd number of backslashes joined to the next
    (whose leading blanks are dropped); each with its first line's number."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            pending, start = "", number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        out.append((start, pending + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def _unescape(text: str, where: str) -> str:
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        code = text[i + 1]
        if code == "u":
            digits = text[i + 2:i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise CommandConfigError(f"{where}: a \\u escape needs four hex digits")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(code, code))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and raw value: the key ends at the first unescaped ``=``, ``:`` or blank."""
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def read_properties(path: str | Path) -> dict[str, str]:
    """The entries of a Java properties file (``java.util.Properties.load``'s syntax)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise CommandConfigError(f"cannot read --command-config {path}: {err.strerror or err}") from None
    entries: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        where = f"{path}, line {number}"
        entries[_unescape(raw_key, where)] = _unescape(raw_value, where)
    return entries


def _from_jaas(settings: dict[str, str]) -> dict[str, str]:
    """``sasl.jaas.config`` of a PLAIN or SCRAM login module as ``sasl.username`` and ``sasl.password``."""
    jaas = settings.get("sasl.jaas.config", "")
    if not any(module in jaas for module in _JAAS_MODULES):
        return settings
    options = {name: re.sub(r"\\(.)", r"\1", value) for name, value in _JAAS_OPTION.findall(jaas)}
    if "username" not in options or "password" not in options:
        return settings
    out = {key: value for key, value in settings.items() if key != "sasl.jaas.config"}
    return {"sasl.username": options["username"], "sasl.password": options["password"], **out}


def file_settings(path: str | Path) -> dict[str, str]:
    """Client settings of a ``--command-config`` file (keys lower-cased, a ``kafka.`` prefix dropped)."""
    entries = {key.strip().lower().removeprefix("kafka."): value for key, value in read_properties(path).items()}
    return _from_jaas(entries)


def environment_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """Client settings of ``KAFKA_EOS_KAFKA_*`` variables."""
    return {name[len(ENVIRONMENT_PREFIX):].lower().replace("_", "."): value
            for name, value in environ.items() if name.startswith(ENVIRONMENT_PREFIX) and len(name) > len(ENVIRONMENT_PREFIX)}
