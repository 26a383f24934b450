# spark-kafka-eos — every target installs what it needs from nothing:
# a virtualenv with the pinned Python packages, a Java 17+ check, and the Kafka broker jars (Maven).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KAFKA_LIBS := .cache/kafka/libs
KAFKA_DATA := .cache/kafka/data
KAFKA_PORT ?= 9092
CLUSTER_DATA := .cache/kafka/cluster
CLUSTER_PORT ?= 9093
PYTEST_ARGS ?=
# make test runs its files on this many pytest workers (pytest-xdist), each with its own broker and Spark: the
# suite mostly waits on Kafka and the JVMs, so two workers keep a 2-core machine busy. PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2

.PHONY: help venv native wheels lint-native java kafka-jars kafka-start kafka-stop cluster-start cluster-stop lint docs docs-check test test-all unit demo bench-read bench-write bench-latency bench-memory soak clean

help:
	@echo "make test         install everything, start a local Kafka, run the tests but the long tier (Spark's Kafka source is the readers' oracle)"
	@echo "make test-all     make test and the long tier: the soak, leader kills, benchmark smoke and memory probes, the wheel build; the reader's suites again on the pure-Python path"
	@echo "make demo         install everything, run the demo on an embedded local Kafka + local Spark"
	@echo "make kafka-start  start a local Kafka on 127.0.0.1:$(KAFKA_PORT) (make kafka-stop stops it)"
	@echo "make cluster-start start a 3-broker KRaft cluster on 127.0.0.1:$(CLUSTER_PORT)-$$(($(CLUSTER_PORT)+2)) (make cluster-stop stops it)"
	@echo "make unit         run only the tests that need no broker"
	@echo "make native       build the compiled read and write paths (native/, Rust) and install the wheel into the venv (make venv does)"
	@echo "make wheels       the package's sdist and wheel and the compiled paths' self-contained wheel, into dist/ (pip install 'spark-kafka-eos[native]' takes both)"
	@echo "make lint         ruff (pyflakes, pycodestyle, isort, pyupgrade) and mypy; with cargo, native/'s rustfmt, clippy and cargo test too; make test runs it first"
	@echo "make docs         serve the docs site (docs/, mkdocs.yml) on http://127.0.0.1:8000; make test builds it with mkdocs build --strict"
	@echo "make bench-read   batch read throughput at 2M and 4M records: kafka_eos (both read paths) vs Spark's Kafka source, the raw client and the Arrow ceiling"
	@echo "make bench-write  streaming write throughput vs Spark's Kafka sink and raw producer; commit latency"
	@echo "make soak         seeded fault soak on 3 brokers: SOAK_SEED=1 SOAK_RUNS=25 SOAK_MINUTES=60 SOAK_BROKERS=3 (pipelines and backfills; driver, task, executor and broker kills)"
	@echo "make bench-latency per-micro-batch time of the exactly-once sink vs Spark's Kafka sink, a Python sink dropping its input and the Python floor (2, 8, 32, 64 partitions); end to end"
	@echo "make bench-faults  how soon a stream delivers again after a network outage, reset, lost answer or broker crash, beside Spark's pipeline"
	@echo "make bench-commit  commit latency: the decision log's part, whole commits of 3 and 8 participants"
	@echo "make bench-exporter what kafka-eos list and an exporter scrape cost on a decision log of 1,000 prefixes"
	@echo "make bench-memory  peak Python worker memory reading and writing 1M and 4M records of one partition"

# Dependencies once; the package itself is (re)installed as a real, non-editable install whenever
# its sources change: Spark finds the pyspark_kafka_eos shim only among installed top-level modules.
PACKAGE_SOURCES := $(shell find spark_kafka_eos pyspark_kafka_eos -name '*.py' 2>/dev/null)

$(VENV)/.deps: pyproject.toml
	@echo ">> creating virtualenv $(VENV) and installing Python packages (pyspark, confluent-kafka, kafka-python, pyarrow, pandas, pytest, chispa)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet '.[test,docs]'
	@touch $@

$(VENV)/.installed: $(VENV)/.deps $(PACKAGE_SOURCES)
	@echo ">> installing spark-kafka-eos into $(VENV)"
	@$(PY) -m pip install --quiet --no-deps --force-reinstall .
	@rm -rf build
	@touch $@

# The compiled read and write paths (native/: Rust, librdkafka built from source by cargo), as a wheel in the venv.
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml native/spark_kafka_eos_native.pyi $(wildcard native/src/*.rs)
NATIVE_WHEELS := .cache/native-wheel

# librdkafka 2.15.1's source in the rdkafka-sys crate that native/Cargo.toml patches in (from crates.io and npm).
RDKAFKA_SYS := .cache/rdkafka-sys

$(RDKAFKA_SYS)/.librdkafka-2.15.1: native/fetch-librdkafka.sh
	@command -v npm >/dev/null 2>&1 || { echo "error: npm is required to fetch librdkafka 2.15.1's source for the compiled paths (apt-get install npm)" >&2; exit 1; }
	@echo ">> fetching librdkafka 2.15.1's source into $(RDKAFKA_SYS) (rdkafka-sys from crates.io, librdkafka from npm)"
	@bash native/fetch-librdkafka.sh $(CURDIR)/$(RDKAFKA_SYS)

$(VENV)/.native: $(VENV)/.deps $(NATIVE_SOURCES) $(RDKAFKA_SYS)/.librdkafka-2.15.1
	@command -v cargo >/dev/null 2>&1 || { echo "error: cargo (Rust 1.85+) is required to build the compiled read and write paths (native/). Install it with rustup (https://rustup.rs) or apt-get install cargo" >&2; exit 1; }
	@echo ">> building the compiled read and write paths (native/: Rust, librdkafka from source) into $(NATIVE_WHEELS)"
	@rm -rf $(NATIVE_WHEELS)
	@# maturin repairs the library in place, through a hard link to cargo's output: make cargo link it afresh,
	@# or a rebuild without a Rust change would find it already repaired and fail.
	@rm -f .cache/cargo-target/release/deps/libspark_kafka_eos_native.so .cache/cargo-target/maturin/libspark_kafka_eos_native.so
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" CARGO_TARGET_DIR=$(CURDIR)/.cache/cargo-target $(VENV)/bin/maturin build --release --quiet -m native/Cargo.toml --out $(NATIVE_WHEELS) -i $(PY)
	@$(PY) -m pip install --quiet --force-reinstall --no-deps $(NATIVE_WHEELS)/*.whl
	@touch $@

native: $(VENV)/.native

venv: $(VENV)/.installed $(VENV)/.native

java:
	@command -v java >/dev/null 2>&1 || [ -n "$$JAVA_HOME" ] || { echo "error: Java 17+ is required (for Kafka and Spark) and was not found on PATH or JAVA_HOME. Install a JDK 17, e.g. apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
	@$(PYTHON) tests/harness/local_kafka.py check-java

# Maven resolves the broker jars and Spark's Kafka connector: without it, stop and say how to get it.
REQUIRE_MAVEN = command -v mvn >/dev/null 2>&1 || { echo "error: Maven (mvn) is required to fetch $(1) from Maven Central. Install it, e.g. apt-get install maven" >&2; exit 1; }

$(KAFKA_LIBS)/.resolved: conf/kafka-broker-pom.xml
	@$(call REQUIRE_MAVEN,the Kafka broker jars)
	@echo ">> resolving the pinned Kafka broker and its dependencies from Maven Central into $(KAFKA_LIBS)"
	@rm -rf $(KAFKA_LIBS)
	@mvn -q -B -s conf/maven-settings.xml -f conf/kafka-broker-pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	@touch $@

# A Kafka 3.x broker too: the sinks and the reader are tested against one (tests/integration/packaging/test_kafka3_broker.py).
KAFKA3_VERSION := 3.9.1
KAFKA3_LIBS := .cache/kafka-$(KAFKA3_VERSION)/libs

$(KAFKA3_LIBS)/.resolved: conf/kafka-broker-pom.xml
	@$(call REQUIRE_MAVEN,the Kafka $(KAFKA3_VERSION) broker jars)
	@echo ">> resolving the Kafka $(KAFKA3_VERSION) broker (the 3.x compatibility test's) from Maven Central into $(KAFKA3_LIBS)"
	@rm -rf $(KAFKA3_LIBS)
	@mvn -q -B -s conf/maven-settings.xml -f conf/kafka-broker-pom.xml dependency:copy-dependencies -DincludeScope=runtime -Dkafka.version=$(KAFKA3_VERSION) -DoutputDirectory=$(CURDIR)/$(KAFKA3_LIBS)
	@touch $@

kafka-jars: java $(KAFKA_LIBS)/.resolved $(KAFKA3_LIBS)/.resolved

kafka-start: venv kafka-jars
	@$(PY) -m tests.harness.local_kafka start --port $(KAFKA_PORT) --data-dir $(KAFKA_DATA)

kafka-stop:
	@$(PY) -m tests.harness.local_kafka stop --data-dir $(KAFKA_DATA)

cluster-start: venv kafka-jars
	@$(PY) -m tests.harness.local_cluster start --port $(CLUSTER_PORT) --data-dir $(CLUSTER_DATA)

cluster-stop:
	@$(PY) -m tests.harness.local_cluster stop --data-dir $(CLUSTER_DATA)

# unit and lint need no compiled path: no cargo, no librdkafka build.
unit: $(VENV)/.installed
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# Prometheus's promtool (its `check metrics` lints the exporter's scrapes in the tests), built from the Go module proxy.
PROMTOOL_VERSION := v0.316.0
PROMTOOL := .cache/promtool/promtool
REQUIRE_GO = command -v go >/dev/null 2>&1 || { echo "error: Go is required to build $(1) from the Go module proxy. Install it, e.g. apt-get install golang" >&2; exit 1; }

$(PROMTOOL):
	@$(call REQUIRE_GO,Prometheus's promtool)
	@echo ">> building Prometheus's promtool $(PROMTOOL_VERSION) from the Go module proxy into $(dir $(PROMTOOL)) (once: a few minutes)"
	@GOBIN=$(CURDIR)/$(dir $(PROMTOOL)) go install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

# Kerberos, for the GSSAPI test (tests/integration/security/test_kerberos.py): MIT Kerberos' KDC and libkrb5's headers
# from Debian's packages, and python-gssapi (the [kerberos] extra) in the venv, built against libkrb5 once. apt-get runs
# where make runs as root and has it (CI: about 15 s); elsewhere, or if apt-get fails, the test is skipped, saying why.
KERBEROS_PACKAGES := krb5-kdc krb5-admin-server krb5-user libkrb5-dev

$(VENV)/.kerberos: $(VENV)/.deps
	@if ! { command -v krb5-config && PATH="$$PATH:/usr/sbin:/sbin" command -v krb5kdc; } >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo ">> installing MIT Kerberos with apt-get (the GSSAPI test's KDC, libkrb5's headers): $(KERBEROS_PACKAGES)"; \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(KERBEROS_PACKAGES) >/dev/null; } || \
			{ echo ">> apt-get could not install MIT Kerberos: the GSSAPI test is skipped"; exit 0; }; \
		else \
			echo ">> MIT Kerberos is not installed and apt-get cannot run here: the GSSAPI test is skipped (apt-get install $(KERBEROS_PACKAGES))"; \
			exit 0; \
		fi; \
	fi; \
	echo ">> installing python-gssapi into $(VENV) (the [kerberos] extra; built against libkrb5, once: about 2 minutes)"; \
	$(PY) -m pip install --quiet 'gssapi>=1.8,<2' && touch $@

# Spark's own Kafka connector: the benchmarks' peer and the differential reader tests' oracle.
SPARK_KAFKA_JARS := .cache/spark-kafka/jars

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check spark_kafka_eos pyspark_kafka_eos tests
	$(VENV)/bin/mypy
	@if command -v cargo >/dev/null 2>&1; then $(MAKE) --no-print-directory lint-native; \
	else echo ">> cargo not found: the Rust checks of native/ (rustfmt, clippy, cargo test) are skipped"; fi

# The Rust side's checks: rustfmt, clippy and the crate's unit tests (which link libpython, hence
# --no-default-features: no extension-module). --release and the same interpreter as make native's share its
# build of librdkafka.
CARGO_ENV = CARGO_TARGET_DIR=$(CURDIR)/.cache/cargo-target PYO3_PYTHON=$(CURDIR)/$(PY)
lint-native: $(VENV)/.deps $(RDKAFKA_SYS)/.librdkafka-2.15.1
	@echo ">> checking native/: rustfmt, clippy, cargo test"
	cargo fmt --manifest-path native/Cargo.toml --check
	$(CARGO_ENV) cargo clippy --quiet --release --manifest-path native/Cargo.toml --all-targets --no-default-features -- -D warnings
	$(CARGO_ENV) LD_LIBRARY_PATH=$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))') \
		cargo test --quiet --release --manifest-path native/Cargo.toml --no-default-features

# --max-worker-restart=0: pytest-xdist 3.8 re-queues a crashed worker's finished files under --dist loadfile as
# empty work units, and the session then waits for ever (pytest-xdist issues #1313, #1378). A crash ends the run
# at once, naming the test it crashed in.
# The docs site (mkdocs.yml, docs/): make docs serves it; make test builds it strictly, so a broken link or anchor fails.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8000

docs-check: $(VENV)/.installed
	@echo ">> building the docs site strictly (mkdocs build --strict) into .cache/site"
	@NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test: lint docs-check venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved $(PROMTOOL) $(VENV)/.kerberos
	@echo ">> running tests but the long tier (a local Kafka is started on a free loopback port unless KAFKA_EOS_BOOTSTRAP_SERVERS is set)"
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --max-worker-restart=0 -m "not long" --durations=25 $(PYTEST_ARGS)

# The reader's and writer's suites, run a second time in make test-all on the pure-Python paths (pytest --engine,
# tests/conftest.py): make test runs the compiled ones, and the range-, task-level and differential tests on both.
ENGINE_SUITES := tests/integration/read tests/integration/write tests/integration/security

test-all: lint docs-check venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved $(PROMTOOL) $(VENV)/.kerberos
	@echo ">> running every test, the long tier too (the soak, leader kills, benchmark smoke and memory probes, the wheel build)"
	$(PY) -m pytest --durations=25 $(PYTEST_ARGS)
	@echo ">> the reader's and writer's suites again, on the pure-Python paths (--engine=python)"
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --max-worker-restart=0 -m "not long" --engine=python $(ENGINE_SUITES) $(PYTEST_ARGS)

# Without cargo the demo runs the pure-Python read and write paths; with it, make native builds the compiled ones first.
demo: $(VENV)/.installed kafka-jars
	@if command -v cargo >/dev/null 2>&1; then $(MAKE) --no-print-directory native; \
	else echo ">> cargo not found: the demo runs the pure-Python read and write paths (make native adds the compiled ones)"; fi
	$(PY) notebooks/demo.py

# The wheels a user installs, into dist/: the package (and its sdist), and the compiled paths' self-contained wheel
# (librdkafka linked in, OpenSSL bundled; abi3, manylinux). pip install 'spark-kafka-eos[native]' takes both.
wheels: $(VENV)/.native
	@echo ">> building the package's sdist and wheel, and the compiled paths' wheel, into dist/"
	@rm -rf dist
	@$(PY) -m build --sdist --wheel --outdir dist . >/dev/null
	@cp $(NATIVE_WHEELS)/*.whl dist/
	@ls -1 dist

$(SPARK_KAFKA_JARS)/.resolved: conf/spark-kafka-connector-pom.xml
	@$(call REQUIRE_MAVEN,Spark's Kafka connector)
	@echo ">> resolving Spark's Kafka connector (benchmark peer, test oracle) from Maven Central into $(SPARK_KAFKA_JARS)"
	@rm -rf $(SPARK_KAFKA_JARS)
	@mvn -q -B -s conf/maven-settings.xml -f conf/spark-kafka-connector-pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(SPARK_KAFKA_JARS)
	@touch $@

bench-read: venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved
	$(PY) -m tests.benchmarks.bench_read

bench-latency: venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved
	$(PY) -m tests.benchmarks.bench_latency

bench-write: venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved
	$(PY) -m tests.benchmarks.bench_write

.PHONY: bench-faults
bench-faults: venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved
	$(PY) -m tests.benchmarks.bench_faults

bench-memory: venv kafka-jars $(SPARK_KAFKA_JARS)/.resolved
	$(PY) -m tests.benchmarks.bench_memory

clean:
	rm -rf $(VENV) .cache .pytest_cache spark-warehouse

.PHONY: bench-commit
bench-commit: venv kafka-jars
	$(PY) -m tests.benchmarks.bench_commit

.PHONY: bench-exporter
bench-exporter: venv kafka-jars
	BENCH_REQUESTS=1 $(PY) -m tests.benchmarks.bench_exporter

# The fault soak: seeded, bounded in runs and minutes (two short ones are in `make test-all`, the long tier).
SOAK_SEED ?= 1
SOAK_RUNS ?= 25
SOAK_MINUTES ?= 60
SOAK_BROKERS ?= 3
soak: venv kafka-jars
	$(PY) -m tests.harness.soak --seed $(SOAK_SEED) --runs $(SOAK_RUNS) --max-minutes $(SOAK_MINUTES) --brokers $(SOAK_BROKERS)
