"""How options become client settings, in one place.

* :mod:`.options`: the option names shared by reader and writer, and the ``kafka.*`` settings refused for both.
* :mod:`.reader` and :mod:`.writer`: each side's options, parsed and validated once, on the driver.
* :mod:`.connection` and :mod:`.secrets`: which cluster and how to reach it (security settings, redacted).
* :mod:`.librdkafka`, :mod:`.kafka_python` and :mod:`.oauth`: a connection's settings translated for each client.
"""
