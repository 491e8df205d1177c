"""Which Neo4j errors are a record's fault and which are the environment's: pure, by the server's status code.

A record fault fails the same way however often it is retried (its statement is refused for what it carries), so
the record goes to the DLQ. Everything else — authentication, authorization (a read-only database too), expired
tokens, transient and database errors (disk full, out of memory, database unavailable), cluster routing — is about
the database, not the record: dead-lettering would throw away valid lineage, so the batch waits and retries.
"""

from __future__ import annotations

from neo4j.exceptions import Neo4jError

# Codes refusing a statement for the data it was given (``Neo.<classification>.<category>.<title>``).
_RECORD_CATEGORIES = ("Neo.ClientError.Statement.", "Neo.ClientError.Schema.ConstraintValidationFailed",
                      "Neo.ClientError.Request.Invalid")
# ... except those in these categories that are really about the caller or the server.
_ENVIRONMENT_TITLES = ("Neo.ClientError.Statement.AccessMode", "Neo.ClientError.Statement.RemoteExecutionFailed",
                       "Neo.ClientError.Statement.ExternalResourceFailed")


def is_record_fault(exc: BaseException) -> bool:
    """True when Neo4j refused the statement for what the record carries (dead-letter it); False for errors of the
    environment (retry: it will pass once the database, credentials or permissions are back)."""
    if not isinstance(exc, Neo4jError):
        return False
    code = exc.code or ""
    return code.startswith(_RECORD_CATEGORIES) and not code.startswith(_ENVIRONMENT_TITLES)
