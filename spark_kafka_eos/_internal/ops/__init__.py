"""The operator's tools, ``kafka-eos``: :mod:`.console` wires the commands, :mod:`.output` renders what they found
(text, or one JSON object), :mod:`.prefix_status` is every prefix's state (``list``, the exporter) and
:mod:`.exporter` serves it as Prometheus metrics. What ``recover`` and ``reset`` do to a prefix is the write path's
(:mod:`spark_kafka_eos._internal.write.prefix_repair`): nothing here builds a decision log record.
"""
