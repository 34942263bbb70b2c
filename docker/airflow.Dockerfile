# Airflow with lakejoin, Java (the Spark driver runs in the task) and the pinned stack.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless npm \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
COPY --chown=airflow:root pyproject.toml constraints.txt README.md /opt/lakejoin/
COPY --chown=airflow:root spark_jobs /opt/lakejoin/spark_jobs
RUN pip install --no-cache-dir -c /opt/lakejoin/constraints.txt -e "/opt/lakejoin[airflow]"
# Delta's jars, resolved once here into the image's environment (<venv>/spark-jars/ivy/jars), as
# `make install` does: every container of docker-compose.yaml runs this image, so a Spark start
# in any of them lists these files (spark.jars, spark-submit --jars), resolves nothing and needs
# no registry. Ivy's cache holds a second copy of each file and goes.
# Data Docs' scripts and styles (npm pack), shipped with each site: its pages work offline.
RUN python -m lakejoin.quality.docs_assets
RUN python -m lakejoin.delta.jars \
 && rm -rf "$(python -c 'from lakejoin.delta.jars import FOLDER; print(FOLDER)')/ivy/cache"
