"""The compiled read and write paths, from Python (the ``spark-kafka-eos-native`` wheel: Rust over librdkafka,
``native/`` of the repository): :mod:`.extension` whether it is installed, :mod:`.engine` the ``readEngine`` and
``writeEngine`` options and the one chooser between a compiled client and the pure-Python one, :mod:`.clients` what
the compiled clients share (opening one, the settings it can run, its logs, its errors). It depends on none of the
options' parsing: ``config/`` asks it whether the extension is installed."""
