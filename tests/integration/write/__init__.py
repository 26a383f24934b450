"""Integration tests of the sink: tasks, the driver's commit, the decision log, operations, faults."""
