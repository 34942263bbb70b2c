"""The I/O edge: the Spark session and its jars, source tables and their versions, change
feeds, driver lookups with delta-rs, commit markers and the batch log. Layer 2: it knows the
spec, never a view or the engine."""
