"""Run a Databricks source notebook (``notebooks/*.py``) outside Databricks.

A notebook gets ``spark`` and ``dbutils`` from Databricks. Here the runner supplies a Spark
session and a stand-in for ``dbutils.widgets`` that returns each widget's default, or the value
given with ``--widget name=value``. ``%pip`` and ``%md`` cells are comments in the source format,
so they are skipped.

    python -m tests.harness.notebook_runner notebooks/eos_pipeline.py --widget bootstrap_servers=127.0.0.1:9092

``--fail-at POINT`` (test scaffolding, see :mod:`tests.harness.faults`) makes the notebook's
``kafka_eos`` sink fail or kill its driver at that point of the commit.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NOTEBOOK_HEADER = "# Databricks notebook source"


class Widgets:
    """``dbutils.widgets``: widgets are declared with defaults; ``get`` returns an override or the default."""

    def __init__(self, overrides: Mapping[str, str]) -> None:
        self._overrides = dict(overrides)
        self._values: dict[str, str] = {}

    def text(self, name: str, defaultValue: str = "", label: str | None = None) -> None:
        self._values[name] = self._overrides.get(name, defaultValue)

    def dropdown(self, name: str, defaultValue: str, choices: list[str], label: str | None = None) -> None:
        value = self._overrides.get(name, defaultValue)
        if value not in choices:
            raise ValueError(f"widget {name!r}: {value!r} is not one of {choices}")
        self._values[name] = value

    def get(self, name: str) -> str:
        if name not in self._values:
            raise ValueError(f"widget {name!r} was never declared (dbutils.widgets.text/dropdown)")
        return self._values[name]

    def removeAll(self) -> None:
        self._values.clear()


class Dbutils:
    """The part of ``dbutils`` the notebooks use."""

    def __init__(self, widgets: Mapping[str, str]) -> None:
        self.widgets = Widgets(widgets)

    def check_overrides_used(self) -> None:
        """An override for a widget the notebook never declared is a typo: say so."""
        unused = sorted(set(self.widgets._overrides) - set(self.widgets._values))
        if unused:
            raise ValueError(f"widget overrides {unused} name no widget of the notebook")


def is_notebook(path: Path) -> bool:
    return path.read_text().startswith(NOTEBOOK_HEADER)


def run_notebook(path: Path | str, spark: Any, widgets: Mapping[str, str]) -> dict[str, Any]:
    """Execute the notebook at ``path`` with ``spark`` and the widget overrides; its namespace after."""
    path = Path(path)
    dbutils = Dbutils(widgets)
    namespace: dict[str, Any] = {
        "__name__": "__main__", "__file__": str(path), "spark": spark, "dbutils": dbutils,
        "display": lambda df, *args, **kwargs: df.show(50, truncate=False),
    }
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    dbutils.check_overrides_used()
    return namespace


def notebook_command(notebook: Path, **widgets: str) -> list[str]:
    """The command that runs ``notebook`` with these widget values in a driver process of its own."""
    return [sys.executable, "-m", "tests.harness.notebook_runner", str(notebook)] + [
        arg for name, value in widgets.items() for arg in ("--widget", f"{name}={value}")
    ]


def local_spark(app_name: str, master: str = "local[2]", conf: Mapping[str, str] | None = None) -> Any:
    """A local session (``local[2]``, or ``local-cluster[2,1,1024]`` for executors in JVMs of their own)
    whose Python workers run this interpreter (and can import ``tests``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from tests.harness.faults import make_importable_by_workers

    make_importable_by_workers()
    builder = SparkSession.builder
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = (
        builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--widget", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--fail-at", help="test scaffolding: testing.failAt for the notebook's kafka_eos sink")
    parser.add_argument("--master", default="local[2]", help="Spark master, e.g. local-cluster[2,1,1024]")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    args = parser.parse_args(argv)
    widgets = dict(w.split("=", 1) for w in args.widget)
    if args.fail_at:
        from tests.harness.faults import FAIL_AT_ENV

        os.environ[FAIL_AT_ENV] = args.fail_at  # before Spark starts: its Python workers inherit it
    spark = local_spark(args.notebook.stem, args.master, dict(c.split("=", 1) for c in args.conf))
    if args.fail_at:
        from tests.harness.faults import FAULTS_FORMAT, FaultInjectingDataSource

        spark.dataSource.register(FaultInjectingDataSource)
        widgets["sink_format"] = FAULTS_FORMAT
    try:
        run_notebook(args.notebook, spark, widgets)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
