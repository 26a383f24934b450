"""What the compiled extension's read and write paths share: opening a client of it (or None, for the pure-Python
path, where it cannot run the configuration), the librdkafka settings it can run, and its log lines. Whether it is
installed: :mod:`~spark_kafka_eos._internal.native.extension`; the engine options that choose it:
:mod:`~spark_kafka_eos._internal.native.engine`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, TypeVar

from spark_kafka_eos._internal.client_errors import ClientCallError, ClientError, KafkaErrorCode
from spark_kafka_eos._internal.librdkafka_logs import log_librdkafka_line
from spark_kafka_eos._internal.native.extension import native_module
from spark_kafka_eos._internal.secrets import scrub
from spark_kafka_eos.errors import KafkaEosOptionError

# Settings the Python client handles itself, not librdkafka.
_PYTHON_SETTINGS = {"logger", "stats_cb", "on_delivery"}
_Client = TypeVar("_Client")

log = logging.getLogger(__name__)


def librdkafka_settings(config: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``config`` (what :func:`~spark_kafka_eos._internal.config.librdkafka.for_librdkafka` made) as librdkafka's
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
    :func:`~spark_kafka_eos._internal.config.librdkafka.for_librdkafka` made). None where it cannot run it (the wheel is
    missing, a setting needs Python, librdkafka refuses the configuration with ``ValueError``), unless
    ``required`` (``option`` is native), which makes that an error. ``path`` names what it runs, for logs."""
    settings = librdkafka_settings(config)
    native = native_module()
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
        log_librdkafka_line(level, facility, client, line)


def compiled_client_error(code: int, reason: str | None = None, fatal: bool = False, retriable: bool = False,
                          txn_requires_abort: bool = False) -> ClientError:
    """An error code the extension reported, with librdkafka's name and (unless ``reason``) description."""
    error_name = getattr(native_module(), "error_name", None)  # None: a wheel built before it had error_name
    name, description = error_name(code) if error_name is not None else _known_name(code)
    return ClientError(code, name, reason or description, fatal, retriable, txn_requires_abort)


def _known_name(code: int) -> tuple[str, str]:
    try:
        known = KafkaErrorCode(code)
    except ValueError:
        return str(code), ""
    return (f"_{known.name}" if code < 0 else known.name), ""


def raise_compiled_error(code: int) -> None:
    """Raise :class:`ClientCallError` for a call of the extension that returned the error ``code`` (0: none)."""
    if code:
        raise ClientCallError(compiled_client_error(code))
