"""The optional compiled extension (the ``spark-kafka-eos-native`` wheel) and what its read and write paths
share: whether it is installed, the librdkafka settings it can run, its log lines, and the engine options
(``readEngine``, ``writeEngine``) that choose between it and confluent-kafka.

With ``auto`` (the default), a configuration the extension cannot run (a Python callback such as AWS MSK
IAM's token signer, or a SASL mechanism it is built without, such as GSSAPI) or a missing wheel takes the
pure-Python path; with ``native`` either is an error.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Literal, TypeVar

from spark_kafka_eos.config.librdkafka import LIBRDKAFKA_LOGGER
from spark_kafka_eos.config.secrets import scrub
from spark_kafka_eos.errors import KafkaEosOptionError

Engine = Literal["auto", "native", "python"]
"""Which client moves the records: the compiled one (``native``), confluent-kafka's (``python``), or the
compiled one where it is installed and can run the configuration (``auto``)."""

# librdkafka's syslog levels, as confluent-kafka maps them for its ``logger``.
_LOG_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR, 4: logging.WARNING, 5: logging.INFO, 6: logging.INFO}
# Settings the Python client handles itself, not librdkafka.
_PYTHON_SETTINGS = {"logger", "stats_cb", "on_delivery"}
_ENGINES: dict[str, Engine] = {"auto": "auto", "native": "native", "python": "python"}
_Client = TypeVar("_Client")

log = logging.getLogger(__name__)


def _compiled_module() -> ModuleType | None:
    try:
        return importlib.import_module("spark_kafka_eos_native")
    except ImportError:  # the wheel is optional
        return None


native = _compiled_module()


def native_installed() -> bool:
    """Whether the compiled extension (the ``spark-kafka-eos-native`` wheel) is importable here."""
    return native is not None


def librdkafka_settings(config: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``config`` (what :func:`~spark_kafka_eos.config.librdkafka.for_librdkafka` made) as librdkafka's
    name/value strings; None if a setting needs Python (a callback), which the extension cannot run."""
    settings = []
    for name, value in config.items():
        if name in _PYTHON_SETTINGS:
            continue
        if callable(value) or isinstance(value, Mapping):
            return None
        settings.append((name, ("true" if value else "false") if isinstance(value, bool) else str(value)))
    return settings


def open_compiled(config: Mapping[str, Any], make: Callable[[ModuleType, list[tuple[str, str]]], _Client], option: str,
                  path: str, required: bool) -> _Client | None:
    """``make(extension, settings)``: the compiled client of ``config`` (what
    :func:`~spark_kafka_eos.config.librdkafka.for_librdkafka` made). None where it cannot run it (the wheel is
    missing, a setting needs Python, librdkafka refuses the configuration with ``ValueError``), unless
    ``required`` (``option`` is native), which makes that an error. ``path`` names what it runs, for logs."""
    settings = librdkafka_settings(config)
    if native is None or settings is None:
        if required:
            raise KafkaEosOptionError(
                option, "is native, but " + ("spark-kafka-eos-native is not installed where this task runs."
                                             if native is None else "these kafka.* settings need a Python callback."),
                f"install the spark-kafka-eos-native wheel on the driver and the executors, or use {option}=auto.",
            )
        return None
    try:
        return make(native, settings)
    except ValueError as err:
        problem = scrub(str(err), config)  # librdkafka may quote a setting's value
        if required:
            raise KafkaEosOptionError(option, f"is native, but the compiled path refused the configuration: {problem}.",
                                      f"use {option}=auto or python.") from None
        log.debug("The compiled %s path cannot run this configuration (%s); taking the pure-Python path.", path, problem)
        return None


def forward_logs(lines: list[tuple[int, str, str, str]]) -> None:
    """Log librdkafka's lines (syslog level, facility, client name, line) as confluent-kafka's ``logger`` would."""
    for level, facility, client, line in lines:
        LIBRDKAFKA_LOGGER.log(_LOG_LEVELS.get(level, logging.DEBUG), "%s [%s] %s", facility, client, line)


def engine_option(opts: Mapping[str, str], option: str, variable: str, path: str) -> Engine:
    """The engine ``option`` (looked up lower-cased in ``opts``), else the driver's environment ``variable``
    (a default for a whole deployment), else auto. ``path`` names what it chooses, for errors."""
    given = opts.get(option.lower())
    origin = "" if given is not None else f" (from the environment variable {variable})"
    engine = (given if given is not None else os.environ.get(variable, "auto")).strip().lower()
    if engine not in _ENGINES:
        raise KafkaEosOptionError(option, f"is {engine!r}{origin}.", "use auto (the default), native or python.")
    if engine == "native" and not native_installed():
        raise KafkaEosOptionError(
            option, f"is native{origin}, but the compiled {path} path (spark-kafka-eos-native) is not installed.",
            f"install its wheel on the driver and the executors (make native builds it), or use {option}=auto.",
        )
    return _ENGINES[engine]
