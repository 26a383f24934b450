"""The write path (exactly-once, two-phase commit coordinated by the Spark driver).

:mod:`.open_writer` (validation and recovery on the driver) -> :mod:`.writer` (Spark's interfaces) ->
:mod:`.task_producer` (executors: one open transaction per task attempt, through a producer of :mod:`.producers`)
-> :mod:`.commit_message` ->
:mod:`.coordinator` (the driver's two-phase commit, with :mod:`.decision_log` and :mod:`.recovery`).
The protocol is described in the README ("Writing, exactly once") and in :mod:`.coordinator`.
"""
