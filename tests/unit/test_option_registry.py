"""Each option is declared once (``config/options.py``): the declared defaults are the parsers' defaults, the
option tables of the reading and writing pages name exactly the declared options, and the help and the options
page's tables are made from the declarations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_kafka_eos import KafkaEosDataSource
from spark_kafka_eos._internal.config.options import OPTIONS, boolean_option, options_table
from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos.errors import KafkaEosOptionError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def option_table_names(page: str) -> set[str]:
    """The options named in the first column of the page's first option table."""
    text = (DOCS / page).read_text()
    start = text.index("| option | meaning |")
    table = text[start:text.index("\n\n", start)]
    names = set()
    for row in table.splitlines()[2:]:
        names |= set(re.findall(r"`([^`]+)`", row.split("|")[1]))
    return {name for name in names if not name.startswith("kafka.")}


def declared(*sides: str) -> set[str]:
    return {name for name, option in OPTIONS.items() if option.side in sides}


def test_the_pages_option_tables_name_exactly_the_declared_options() -> None:
    reader, writer = option_table_names("reading.md"), option_table_names("writing.md")
    assert reader - declared("read", "both") == set(), "the reader's table names options not declared"
    assert writer - declared("write", "both") == set(), "the writer's table names options not declared"
    assert declared("read") - reader == set(), "declared reader options missing from the reader's table"
    assert declared("write") - writer == set(), "declared writer options missing from the writer's table"
    assert declared("both") - (reader | writer) == set()


def test_the_declared_defaults_are_the_parsers_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_EOS_READ_ENGINE", raising=False)
    monkeypatch.delenv("KAFKA_EOS_WRITE_ENGINE", raising=False)
    read = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}, streaming=False)
    parsed = {
        "failOnDataLoss": str(read.fail_on_data_loss).lower(),
        "includeHeaders": str(read.include_headers).lower(),
        "gcFreeze": str(read.gc_freeze).lower(),
        "minRecordsPerPartition": str(read.min_records_per_partition),
        "maxTriggerDelay": f"{read.max_trigger_delay_ms // 60_000}m",
        "maxRecordsPerBatch": str(read.max_records_per_batch),
        "maxBytesPerBatch": str(read.max_bytes_per_batch),
        "kafkaConsumer.pollTimeoutMs": str(read.poll_timeout_ms),
        "fetchOffset.numRetries": str(read.fetch_offset_retries),
        "fetchOffset.retryIntervalMs": str(read.fetch_offset_retry_interval_ms),
        "readEngine": read.read_engine,
        "startingOffsetsByTimestampStrategy": read.timestamp_strategy,
        "groupIdPrefix": read.group_id.rsplit("-", 5)[0],
    }
    write = parse_writer_options({"kafka.bootstrap.servers": "127.0.0.1:9", "transactional.id.prefix": "p"}, streaming=False)
    parsed |= {
        "decisionLogTopic": write.decision_log_topic,
        "allowNewPrefix": str(write.allow_new_prefix).lower(),
        "writeEngine": write.write_engine,
    }
    assert parsed == {name: OPTIONS[name].default for name in parsed}
    assert str(parse_writer_options({"kafka.bootstrap.servers": "127.0.0.1:9", "transactional.id.prefix": "p"},
                                    streaming=True).gc_freeze).lower() == OPTIONS["gcFreeze"].default


def test_a_boolean_option_takes_its_declared_default_and_refuses_anything_but_true_or_false() -> None:
    assert boolean_option({}, "failOnDataLoss") is True
    assert boolean_option({}, "includeHeaders") is False
    assert boolean_option({"includeheaders": " TRUE "}, "includeHeaders") is True
    with pytest.raises(KafkaEosOptionError, match="Option 'includeHeaders': is 'yes'. Fix: use true or false."):
        boolean_option({"includeheaders": "yes"}, "includeHeaders")


def test_the_help_and_the_tables_are_made_from_the_declarations() -> None:
    manual = KafkaEosDataSource.__doc__ or ""
    for option in OPTIONS.values():
        assert f"* ``{option.name}``" in manual and option.doc in manual
    table = options_table("write").splitlines()
    assert table[:2] == ["| option | default | meaning |", "|---|---|---|"]
    assert table[2:] == [f"| `{o.name}` | {o.default} | {o.doc} |" for o in OPTIONS.values() if o.side == "write"]
