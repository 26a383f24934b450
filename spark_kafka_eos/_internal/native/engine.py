"""The engine options (``readEngine``, ``writeEngine``): which client moves the records.

With ``auto`` (the default), a configuration the compiled extension cannot run (a Python callback such as AWS
MSK IAM's token signer, or a SASL mechanism it is built without, such as GSSAPI) or a missing wheel takes the
pure-Python path; with ``native`` either is an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Literal, TypeVar

from spark_kafka_eos._internal.native.extension import native_installed
from spark_kafka_eos.errors import KafkaEosOptionError

Engine = Literal["auto", "native", "python"]
"""Which client moves the records: the compiled one (``native``), confluent-kafka's (``python``), or the
compiled one where it is installed and can run the configuration (``auto``)."""

_ENGINES: dict[str, Engine] = {"auto": "auto", "native": "native", "python": "python"}
_Client = TypeVar("_Client")


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


def choose_client(engine: Engine, open_native: Callable[[bool], _Client | None], open_python: Callable[[], _Client]) -> _Client:
    """The client ``engine`` picks, for the read and the write path alike: the compiled one unless ``python``
    (``auto``: where it is installed and can run the configuration, else the pure-Python one; ``native``: or an
    error, which ``open_native`` raises when told the compiled client is required)."""
    client = None if engine == "python" else open_native(engine == "native")
    return client if client is not None else open_python()
