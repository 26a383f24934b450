"""The write path (exactly-once, two-phase commit coordinated by the Spark driver): see DESIGN.md."""
