"""The graph's Neo4j shell: the pipeline's driver, the constraints, the statements' write transaction, the
fingerprint. Everything that reads or writes the graph gets its driver here."""

from __future__ import annotations

from typing import Any

from neo4j import Driver, GraphDatabase

from kafka_lineage.graph import epoch
from kafka_lineage.graph.batch import GraphBatch
from kafka_lineage.graph.coverage import READ_QUERY, Coverage, CoverageChanged, coverage_from
from kafka_lineage.graph.events import graph_batch
from kafka_lineage.graph.fingerprint import FINGERPRINT_QUERIES, PARTITION_FINGERPRINT_QUERIES, fingerprint
from kafka_lineage.graph.known import KnownRows
from kafka_lineage.graph.statements import BACKFILL, CONSTRAINTS, statements
from kafka_lineage.runtime.config import ClientSettings


def driver_for(clients: ClientSettings, **options: Any) -> Driver:
    """The pipeline's Neo4j driver; ``options``: further driver settings (timeouts)."""
    # Notifications off: the server otherwise warns about every label a query names before the graph has one.
    return GraphDatabase.driver(clients.neo4j_uri, auth=(clients.neo4j_user, clients.neo4j_password),
                                notifications_min_severity="OFF", **options)


def ensure_constraints(driver: Driver) -> None:
    with driver.session() as session:
        for statement in [*CONSTRAINTS, epoch.CONSTRAINT, epoch.ENSURE, *BACKFILL]:
            session.run(statement).consume()


def ensure_indexes_online(driver: Driver, timeout_seconds: int = 600) -> None:
    """The constraints and indexes, and the wait until they are online (after a bulk import: built in the
    background, a query before then scans)."""
    ensure_constraints(driver)
    driver.execute_query(f"CALL db.awaitIndexes({int(timeout_seconds)})")


def graph_fingerprint(driver: Driver) -> str:
    """Canonical hash of every node and relationship with its identity (``lineage graph fingerprint``)."""
    with driver.session() as session:
        rows = {name: [record.data() for record in session.run(query)]
                for name, query in {**FINGERPRINT_QUERIES, **PARTITION_FINGERPRINT_QUERIES}.items()}
    return fingerprint(rows)


def write_events(driver: Driver, events: list[dict[str, Any]]) -> None:
    """All statements of one batch in one write transaction (retried by the driver on transient errors)."""
    write_statements(driver, statements(graph_batch(events)))


def read_coverage(driver: Driver) -> Coverage:
    """The graph's rebuild coverage (``graph.coverage``)."""
    records, _, _ = driver.execute_query(READ_QUERY)
    return coverage_from([record.data() for record in records])


def write_statements(driver: Driver, work: list[tuple[str, dict[str, Any]]], expected: Coverage | None = None,
                     graph_epoch: epoch.Epoch | None = None) -> None:
    """Run prepared ``graph.statements.statements`` in one write transaction (a thread may do this while the caller
    prepares the next batch: the driver waits on the socket without holding the GIL). ``expected``: the rebuild
    coverage the batch was filtered with; the transaction first reads the graph's own and, if it is another, writes
    nothing and raises ``CoverageChanged`` with it. ``graph_epoch``: the epoch the batch's rows were left out for
    (``graph.known``), read before and after the statements: another raises ``EpochChanged`` (rolled back)."""

    def transaction(tx: Any) -> None:
        if graph_epoch is not None:
            epoch.check(tx, graph_epoch)
        if expected is not None:
            found = coverage_from([record.data() for record in tx.run(READ_QUERY)])
            if found.rebuild != expected.rebuild:
                raise CoverageChanged(found)
        for query, parameters in work:
            if parameters.get("rows") != []:  # a statement whose rows all went with another (schema fields)
                tx.run(query, parameters).consume()
        if graph_epoch is not None:  # a deleter that began meanwhile may have removed rows left out as known
            epoch.check(tx, graph_epoch)

    with driver.session() as session:
        session.execute_write(transaction)


def write_changes(driver: Driver, batch: GraphBatch, known: KnownRows) -> None:
    """Write the rows of ``batch`` that ``known`` does not say the graph holds, in one transaction (the whole batch
    again when the graph's epoch is not the memory's), then remember them."""
    while True:
        planned = known.epoch
        sent = known.changes(batch)
        try:
            write_statements(driver, statements(sent), graph_epoch=planned)
        except epoch.EpochChanged as changed:
            known.reset(changed.epoch)
            continue
        known.learn(sent, planned)
        return
