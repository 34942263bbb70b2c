"""The demo's marketplace: its tables and its change batches (used by `make demo` and the
Airflow tests). An application of lakejoin, outside the engine."""
