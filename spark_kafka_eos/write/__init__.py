"""The write path (exactly-once, two-phase commit coordinated by the Spark driver).

:mod:`.writer` (Spark's interfaces; :func:`~.writer.open_stream_writer` / :func:`~.writer.open_batch_writer` validate and recovers on the driver) ->
:mod:`.task_producer` (executors: one open transaction per task attempt) -> :mod:`.commit_message` ->
:mod:`.coordinator` (the driver's two-phase commit, with :mod:`.decision_log` and :mod:`.recovery`).
The protocol is described in the README ("Writing, exactly once") and in :mod:`.coordinator`.
"""
