"""The decision log: what each epoch decided, durable in a compacted Kafka topic.

:mod:`.protocol` says what the write path and the operator tools need of a decision log; :mod:`.kafka_log` is the
log on Kafka (its topic and the topic's checks; append, fence, read); :mod:`.index_group` finds a prefix's last
record; :mod:`.records` are its records, :mod:`.envelope` their chunks, :mod:`.group_marker` the mark a decision
leaves on a consumer group, :mod:`.coordinator_id` the transactional id that writes it. It depends on neither the
write path nor the operator tools.
"""
