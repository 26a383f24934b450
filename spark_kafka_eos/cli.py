"""The ``kafka-eos`` command's entry point, and ``python -m spark_kafka_eos.cli`` where the package is importable but
its command is not installed."""

from __future__ import annotations

import sys

from spark_kafka_eos._internal.ops.console import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
