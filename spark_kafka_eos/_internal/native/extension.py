"""The optional compiled extension module (the ``spark-kafka-eos-native`` wheel), imported once: ``None`` where
it is not installed. It imports nothing of the package, so that option parsing and the compiled paths can both
ask whether it is there."""

from __future__ import annotations

import importlib
from types import ModuleType


def _load() -> ModuleType | None:
    try:
        return importlib.import_module("spark_kafka_eos_native")
    except ImportError:  # the wheel is optional
        return None


native = _load()


def native_module() -> ModuleType | None:
    """The compiled extension module, or None where it is not installed."""
    return native


def native_installed() -> bool:
    """Whether the compiled extension (the ``spark-kafka-eos-native`` wheel) is importable here."""
    return native is not None
