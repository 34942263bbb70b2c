# Airflow with lakejoin, Java (the Spark driver runs in the task) and the pinned stack.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
COPY --chown=airflow:root pyproject.toml constraints.txt README.md /opt/lakejoin/
COPY --chown=airflow:root spark_jobs /opt/lakejoin/spark_jobs
RUN pip install --no-cache-dir -c /opt/lakejoin/constraints.txt -e "/opt/lakejoin[airflow]"
