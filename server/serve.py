"""`lineage serve`: the lineage server in one process on uvicorn (SIGTERM/SIGINT: stop accepting, finish the
requests in flight, close the Neo4j driver)."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_lineage.graph.driver import driver_for
from kafka_lineage.graph.store import GraphStore
from kafka_lineage.runtime.config import ClientSettings
from kafka_lineage.runtime.gc_tuning import tune_gc
from kafka_lineage.runtime.metrics import Metrics
from kafka_lineage.runtime.status import ServiceProbe
from kafka_lineage.server.api import create_app
from kafka_lineage.server.feeds import AlertFeed
from kafka_lineage.server.settings import ServerSettings

GRACEFUL_SHUTDOWN_SECONDS = 10


def serve(settings: ServerSettings, clients: ClientSettings, groups: Mapping[str, str],
          services: ServiceProbe | None = None) -> None:
    """Serve until SIGTERM/SIGINT; ``groups`` (stage → consumer group) and ``services`` feed /api/v2/status."""
    import uvicorn

    # every wait bounded: connecting, acquiring a connection, the driver's own retries
    driver = driver_for(clients, connection_timeout=5.0, connection_acquisition_timeout=settings.query_timeout,
                        max_transaction_retry_time=settings.query_timeout)
    feed = AlertFeed(clients).start()
    app = create_app(GraphStore(driver, settings.query_timeout), settings, Metrics(),
                     {"neo4j": driver.verify_connectivity}, feed, clients, groups, services)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, server_header=False,
                            ssl_certfile=settings.tls_cert or None, ssl_keyfile=settings.tls_key or None,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS)
    scheme = "https" if settings.tls_cert else "http"
    print(f"lineage server: {scheme}://{settings.host}:{settings.port}/  API: /api/v1 (Marquez), /api/v2; "
          f"OpenAPI: /openapi.json; health: /health/ready; metrics: /metrics", flush=True)
    tune_gc()  # answers allocate many short-lived objects and almost no cycles
    try:
        uvicorn.Server(config).run()
    finally:
        feed.close()
        driver.close()
