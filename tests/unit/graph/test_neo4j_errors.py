"""Record faults (dead letter) against errors of the environment (wait and retry), with the driver's own errors."""

from __future__ import annotations

import pytest
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

from kafka_lineage.graph.neo4j_errors import is_record_fault


def _server_error(code: str) -> Neo4jError:
    """The exception the driver raises for a failure the server reports with ``code`` (its own class mapping)."""
    return Neo4jError._basic_hydrate(neo4j_code=code, message=f"server says {code}")


@pytest.mark.parametrize("code", [
    "Neo.ClientError.Statement.TypeError", "Neo.ClientError.Statement.ArgumentError",
    "Neo.ClientError.Statement.SemanticError", "Neo.ClientError.Schema.ConstraintValidationFailed",
    "Neo.ClientError.Request.InvalidFormat"])
def test_statements_refused_for_their_data_are_the_records_fault(code: str) -> None:
    assert is_record_fault(_server_error(code))


@pytest.mark.parametrize("code", [
    "Neo.ClientError.Security.Unauthorized", "Neo.ClientError.Security.Forbidden",
    "Neo.ClientError.Security.TokenExpired", "Neo.ClientError.Security.AuthorizationExpired",
    "Neo.ClientError.Statement.AccessMode",  # a read-only database or a follower
    "Neo.ClientError.Database.DatabaseNotFound", "Neo.ClientError.Transaction.TransactionTimedOut",
    "Neo.TransientError.General.OutOfMemoryError", "Neo.TransientError.Database.DatabaseUnavailable",
    "Neo.DatabaseError.General.UnknownError", "Neo.DatabaseError.Statement.ExecutionFailed",
    "Neo.ClientError.Cluster.NotALeader", "not a code at all"])
def test_errors_of_the_database_credentials_or_permissions_are_the_environments(code: str) -> None:
    assert not is_record_fault(_server_error(code))


def test_connection_errors_and_anything_else_are_the_environments() -> None:
    for exc in (ServiceUnavailable("gone"), SessionExpired("expired"), OSError("disk full"), ValueError("x")):
        assert not is_record_fault(exc)
