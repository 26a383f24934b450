"""``readEngine`` and ``writeEngine``: parsed on the driver, with errors that name the option, where the
value came from and the fix."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from spark_kafka_eos._internal.config.reader import READ_ENGINE_VARIABLE, parse_reader_options
from spark_kafka_eos._internal.config.writer import WRITE_ENGINE_VARIABLE, parse_writer_options
from spark_kafka_eos._internal.native import extension as native_extension
from spark_kafka_eos.errors import KafkaEosOptionError

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9"}
ENGINES = {
    "readEngine": (READ_ENGINE_VARIABLE, "read", lambda raw: parse_reader_options({**BOOTSTRAP, "subscribe": "t", **raw}, streaming=False).read_engine),
    "writeEngine": (WRITE_ENGINE_VARIABLE, "write", lambda raw: parse_writer_options(
        {**BOOTSTRAP, "topic": "t", "transactional.id.prefix": "engines", **raw}, streaming=False).write_engine),
}


@pytest.mark.parametrize("option", list(ENGINES))
def test_engine_errors_name_the_option_and_the_fix(monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    variable, path, engine_of = ENGINES[option]
    parse: Callable[[dict[str, str]], Any] = engine_of
    key = option.lower()  # as Spark passes option names
    with pytest.raises(KafkaEosOptionError, match=rf"{option}.*'rust'.*use auto \(the default\), native or python"):
        parse({key: "rust"})
    monkeypatch.setenv(variable, "fast")
    with pytest.raises(KafkaEosOptionError, match=f"{option}.*'fast' \\(from the environment variable {variable}\\)"):
        parse({})
    monkeypatch.setenv(variable, "python")
    assert parse({}) == "python"
    # The unit tier runs without the compiled wheel (make unit builds no Rust): stand in for it where it is missing.
    monkeypatch.setattr(native_extension, "native", native_extension.native or ModuleType("spark_kafka_eos_native"))
    assert parse({key: "Native"}) == "native"  # the option wins over the environment, in any case
    monkeypatch.delenv(variable)
    assert parse({}) == "auto"
    monkeypatch.setattr(native_extension, "native", None)
    with pytest.raises(KafkaEosOptionError, match=f"{option}.*compiled {path} path \\(spark-kafka-eos-native\\) is not installed.*make native"):
        parse({key: "native"})
