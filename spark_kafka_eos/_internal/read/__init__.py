"""The read path: options -> planner (driver) -> offset ranges -> partition reader (executor)."""
