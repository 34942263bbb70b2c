"""The Airflow side: the task logic the DAG file wires (`tasks`), and the spark-submit path
(`submit_operator` builds the operator, `submit` is the application it runs). Layer 6."""
