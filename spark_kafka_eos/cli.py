"""The ``kafka-eos`` command's entry point, and ``python -m spark_kafka_eos.cli`` where the package is importable but
its command is not installed. The commands are :mod:`spark_kafka_eos.ops.console`'s."""

from __future__ import annotations

import sys

from spark_kafka_eos.ops.console import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
