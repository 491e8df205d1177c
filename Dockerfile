# Image for the pipeline's own components (see docker-compose.yml, profile `pipeline`).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kafka-lineage
COPY pyproject.toml README.md constraints.txt ./
COPY schemas ./schemas
COPY runtime ./runtime
COPY graph ./graph
COPY producers ./producers
COPY processors ./processors
COPY sinks ./sinks
COPY replay ./replay
COPY server ./server
COPY app ./app
# the extras the components need (Neo4j's driver, Faust, aiohttp, Jinja2 ...), at the versions CI tests
RUN pip install --no-cache-dir -c constraints.txt ".[all]"
ENTRYPOINT []
