"""Session fixtures: a real Kafka broker and a local Spark session.

The broker is started from the jars resolved by ``make kafka-jars`` on a free loopback port with
a fresh data directory, and stopped at the end. Set ``KAFKA_EOS_BOOTSTRAP_SERVERS`` to run the
tests against an existing cluster instead (as confluent-kafka-python's suite does with its own
variable).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_kafka_eos._internal.config.reader import READ_ENGINE_VARIABLE
from spark_kafka_eos._internal.config.writer import WRITE_ENGINE_VARIABLE
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS
from tests.benchmarks.common import find_connector_jars
from tests.harness.kafka import KafkaTestCluster

if TYPE_CHECKING:
    from tests.harness.local_cluster import LocalCluster

BOOTSTRAP_ENV = "KAFKA_EOS_BOOTSTRAP_SERVERS"
CONNECTOR_JARS_DIR = Path(__file__).resolve().parent.parent / ".cache" / "spark-kafka" / "jars"


ENGINES = ("auto", "native", "python")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--engine", choices=ENGINES, default="auto",
        help="the read and write path of every kafka_eos read and write of the session that names none (the default of "
             "readEngine and writeEngine, set through KAFKA_EOS_READ_ENGINE and KAFKA_EOS_WRITE_ENGINE, which Spark and "
             "its Python workers inherit); make test-all runs the reader's and writer's suites again with --engine=python",
    )


def pytest_configure(config: pytest.Config) -> None:
    chosen: str = config.getoption("engine")
    if chosen != "auto":  # before any Spark starts: its JVM and Python workers take the environment they start with
        os.environ[READ_ENGINE_VARIABLE] = chosen
        os.environ[WRITE_ENGINE_VARIABLE] = chosen


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """The Kafka cluster of this test session."""
    existing = os.environ.get(BOOTSTRAP_ENV)
    if existing:
        yield KafkaTestCluster(existing)
        return
    from tests.harness.broker_watchdog import BrokerWatchdog
    from tests.harness.local_kafka import LocalKafka

    broker = LocalKafka(tmp_path_factory.mktemp("kafka"))
    broker.start()
    watchdog = BrokerWatchdog(broker, tmp_path_factory.getbasetemp() / "broker-deaths.log").start()
    try:
        yield KafkaTestCluster(broker.bootstrap_servers)
    finally:
        watchdog.stop()
        # Range consumers this process kept would log their reconnections to the killed broker until exit.
        IDLE_CONSUMERS.close_all()
        if broker.running:  # its data is thrown away: a controlled shutdown would only cost seconds
            broker.kill()


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A three-broker KRaft cluster (replication factor 3, min.insync.replicas 2), started only for the
    modules that ask for it and stopped at the end of each: three idle brokers left running take CPU from the
    rest of a run on a 2-core machine. A test that kills a node restarts it."""
    from tests.harness.local_cluster import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("kafka-cluster")).start()
    try:
        yield cluster
    finally:
        for node_id in cluster.node_ids:  # its data is thrown away: no controlled shutdown to wait for
            if cluster.running(node_id):
                cluster.kill(node_id)


@pytest.fixture(scope="session", autouse=True)
def fault_markers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where injected faults record that they fired (inherited by Spark's workers and job subprocesses)."""
    from tests.harness.faults import MARKERS_ENV

    os.environ[MARKERS_ENV] = str(tmp_path_factory.mktemp("fault-markers"))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, fault_markers: None) -> Iterator[object]:
    """A local[2] Spark session whose Python workers run this interpreter, with Spark's own Kafka
    connector on its classpath when ``make test`` resolved it (the oracle of the differential
    reader tests, see :func:`spark_kafka_source`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from tests.harness.faults import FaultInjectingDataSource, make_importable_by_workers

    make_importable_by_workers()

    warehouse = Path(tmp_path_factory.mktemp("warehouse"))
    jars = find_connector_jars(CONNECTOR_JARS_DIR) + spark_avro_jars()
    builder = SparkSession.builder.config("spark.jars", ",".join(str(j) for j in jars)) if jars else SparkSession.builder
    session = (
        builder.master("local[2,3]")
        .appName("spark-kafka-eos-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(FaultInjectingDataSource)
    try:
        yield session
    finally:
        session.stop()


def spark_avro_jars() -> list[Path]:
    """spark-avro (Spark's ``from_avro``), resolved by make beside Spark's Kafka connector."""
    return sorted(CONNECTOR_JARS_DIR.glob("spark-avro_2.13-*.jar"))


@pytest.fixture(scope="session")
def spark_with_avro(spark: object) -> object:
    """The test session's Spark, with Spark's ``from_avro``. Fails (never skips) without spark-avro."""
    if not spark_avro_jars():
        pytest.fail(f"spark-avro is not in {CONNECTOR_JARS_DIR}: run `make test` (it resolves conf/spark-kafka-connector-pom.xml).")
    return spark


@pytest.fixture(scope="session")
def spark_kafka_source(spark: object) -> object:
    """The test session's Spark, where ``format("kafka")`` is Spark's own Kafka source. Fails (never
    skips) without it: ``make test`` resolves it from Maven Central."""
    if not find_connector_jars(CONNECTOR_JARS_DIR):
        pytest.fail(
            f"Spark's Kafka connector is not in {CONNECTOR_JARS_DIR}; the differential reader tests need it. "
            "Run `make test` (it resolves conf/spark-kafka-connector-pom.xml), or that file's mvn command."
        )
    return spark


@pytest.fixture(params=["native", "python"])
def read_engine(request: pytest.FixtureRequest) -> str:
    """Both read paths, as the ``readEngine`` option: the compiled consumer (``make test`` builds it,
    so a missing one fails the test) and confluent-kafka's."""
    engine: str = request.param
    return engine
