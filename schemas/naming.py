"""Dataset namespaces and names per the OpenLineage naming spec (website/docs/spec/naming.md), pure functions.

Shared by the emitters (hooks) and the stream processor, so that every stage names one table or file the same way:

- ``namespace_for_url``: a connection URL (JDBC or SQLAlchemy style) → ``postgres://host:5432``, ``bigquery``, …
- ``table_dataset``: URL + table → (namespace, ``database.schema.table``) with the levels the platform has.
- ``path_dataset``: local path or storage URI → (namespace, name): ``file``, ``s3://bucket``, ``hdfs://nn:8020``, …
- ``kafka_namespace``: a bootstrap-server list → one canonical ``kafka://host:port``.
- ``canonical_dataset``: a (namespace, name) pair as some producer emitted it → the pair the functions above give.

Canonical form: scheme as in the spec, hosts lower-cased, the default port made explicit (so ``db`` and ``db:5432``
are one datasource), credentials and connection parameters never copied. Errors are ``ValueError`` whose message
shows the URL with its secrets redacted. Platforms the spec has no row for (Presto, ClickHouse, Hive) follow the same
``{scheme}://{host}:{port}`` pattern as their siblings (Trino, MySQL) and openlineage-python's naming helpers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = [
    "Connection",
    "canonical_dataset",
    "kafka_namespace",
    "namespace_for_url",
    "parse_connection",
    "path_dataset",
    "redact_url",
    "table_dataset",
]


@dataclass(frozen=True)
class _Platform:
    scheme: str  # namespace scheme
    default_port: int | None
    levels: int  # 3: {database}.{schema}.{table}; 2: {database}.{table}
    default_schema: str | None = None  # what an unqualified table resolves to on a stock server


_POSTGRES = _Platform("postgres", 5432, 3, "public")
_REDSHIFT = _Platform("redshift", 5439, 3, "public")
_MYSQL = _Platform("mysql", 3306, 2)
_SQLSERVER = _Platform("sqlserver", 1433, 3, "dbo")  # the JDBC driver's scheme (OpenLineage's Java/Spark side)
_MSSQL = _Platform("mssql", 1433, 3, "dbo")  # SQLAlchemy's and dbt's: both spellings exist, neither is rewritten
_ORACLE = _Platform("oracle", 1521, 3)
_SNOWFLAKE = _Platform("snowflake", None, 3)
_BIGQUERY = _Platform("bigquery", None, 3)
_TRINO = _Platform("trino", 8080, 3)
_PRESTO = _Platform("presto", 8080, 3)
_DB2 = _Platform("db2", 50000, 3)
_TERADATA = _Platform("teradata", 1025, 2)
_CLICKHOUSE = _Platform("clickhouse", 8123, 2)
# Hive tables are named by their metastore (OpenLineage's Spark side: hive.metastore.uris, thrift://host:9083). A
# HiveServer2 URL's port is no metastore's, so a hive:// namespace without one gets none; a thrift:// metastore URI
# is the hive:// namespace with the metastore's default port.
_HIVE = _Platform("hive", None, 2)
_HIVE_METASTORE = _Platform("hive", 9083, 2)

# URL scheme (after `jdbc:`, before any SQLAlchemy `+driver`) → platform.
_PLATFORMS: dict[str, _Platform] = {
    "postgres": _POSTGRES, "postgresql": _POSTGRES, "pgsql": _POSTGRES,
    "redshift": _REDSHIFT,
    "mysql": _MYSQL, "mariadb": _MYSQL,  # MariaDB speaks MySQL's protocol and naming; the spec has no row for it
    "sqlserver": _SQLSERVER, "mssql": _MSSQL,
    "oracle": _ORACLE,
    "snowflake": _SNOWFLAKE,
    "bigquery": _BIGQUERY,
    "trino": _TRINO,
    "presto": _PRESTO,
    "db2": _DB2,
    "teradata": _TERADATA, "teradatasql": _TERADATA,
    "clickhouse": _CLICKHOUSE, "ch": _CLICKHOUSE,
    "hive": _HIVE, "hive2": _HIVE, "thrift": _HIVE_METASTORE,
}

_HOST = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")
_IPV6 = re.compile(r"\[[0-9a-f:.]+\]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_SECRET_PARAM = re.compile(r"(?i)((?:password|passwd|pwd|secret|token|private_?key\w*|access_?key\w*)\s*=)[^;&,)\s]*")


# --- redaction and validation -------------------------------------------------------------------------------------
def redact_url(url: str) -> str:
    """``url`` safe for logs and errors: userinfo (``user:pw@``, Oracle ``user/pw@``) and secret parameters masked.

    Over-redacts on purpose: everything between ``//`` (or the scheme prefix) and the last ``@`` goes, since an
    unencoded password may itself contain ``/``, ``:`` or ``@``.
    """
    text = _SECRET_PARAM.sub(r"\1***", str(url))
    at = text.rfind("@")
    if at < 0:
        return text
    slashes = text.find("//")
    if 0 <= slashes < at:
        start = slashes + 2
    else:  # Oracle thin `jdbc:oracle:thin:scott/tiger@host`: keep the `a:b:c:` scheme prefix only
        prefix = re.match(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)*", text)
        start = prefix.end() if prefix else 0
    return f"{text[:start]}***{text[at:]}"


def _fail(message: str, url: str) -> ValueError:
    return ValueError(f"{message}: {redact_url(url)}")


def _check_text(url: str, what: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"{what} must be a string, not {type(url).__name__}")
    text = url.strip()
    if not text:
        raise ValueError(f"{what} is empty")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise _fail(f"{what} contains control characters", text.encode("unicode_escape").decode())
    return text


def _host_port(hostport: str, default_port: int | None, url: str) -> tuple[str, int | None]:
    """``host[:port]`` or ``[v6]:port`` → (lower-case host, port or the platform default), validated."""
    hostport = unquote(hostport.strip()).lower()
    if hostport.startswith("["):
        end = hostport.find("]")
        host, rest = hostport[: end + 1], hostport[end + 1:]
        if end < 0 or not _IPV6.fullmatch(host) or (rest and not rest.startswith(":")):
            raise _fail("invalid IPv6 host", url)
        port_text = rest[1:] if rest else ""
    else:
        host, _, port_text = hostport.partition(":")
        if not _HOST.fullmatch(host or "-"):
            raise _fail(f"invalid host {host!r}" if host else "missing host", url)
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _fail("invalid port", url)
    return host, int(port_text)


def _authority(host: str, port: int | None) -> str:
    return host if port is None else f"{host}:{port}"


# --- connection URLs --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Connection:
    """What naming needs from a connection URL: never credentials."""

    platform: str  # namespace scheme: postgres, mysql, …
    namespace: str
    database: str | None = None  # database / catalog / project / Oracle service or SID
    schema: str | None = None  # the URL's default schema (currentSchema=, schema=, path), if any
    levels: int = 3
    default_schema: str | None = None


def _split_scheme(url: str) -> tuple[str, str]:
    """(lower-case scheme without `jdbc:` and `+driver`, the rest after `scheme:`)."""
    text = url[5:] if url[:5].lower() == "jdbc:" else url
    scheme, colon, rest = text.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme):
        if _SCHEME.fullmatch(text):  # a bare platform name such as `bigquery`
            return text.lower().split("+")[0], ""
        raise _fail("not a connection URL (no scheme)", url)
    return scheme.lower().split("+")[0], rest


def _params(text: str) -> dict[str, str]:
    """Connection parameters from `?a=b&c=d`, `;a=b;c=d` and `:a=b;` tails, keys lower-cased."""
    params: dict[str, str] = {}
    for item in re.split(r"[?&;,]", text):
        key, eq, value = item.partition("=")
        if eq and key.strip():
            params.setdefault(key.strip().lower(), unquote(value.strip()))
    return params


def _split_authority(rest: str, url: str) -> tuple[str, str, str]:
    """`//[userinfo@]authority[/path][?;params]` → (authority, path, params text); userinfo dropped."""
    if not rest.startswith("//"):
        raise _fail("expected //host after the scheme", url)
    body = rest[2:]
    head_end = min((i for i in (body.find("?"), body.find(";")) if i >= 0), default=len(body))
    at = body.rfind("@", 0, head_end)  # the last `@` before the parameters: passwords may hold `/` or `@`
    if at >= 0:
        body = body[at + 1:]
        head_end -= at + 1
    cut = min((i for i in (body.find("/"), body.find("?"), body.find(";"), body.find("#")) if i >= 0),
              default=len(body))
    authority, tail = body[:cut], body[cut:]
    path = re.split(r"[?;#]", tail, maxsplit=1)[0]
    return authority, path, tail[len(path):]


def _path_segments(path: str) -> list[str]:
    return [unquote(p) for p in path.split("/") if p]


def _first_host(authority: str, platform: _Platform, url: str) -> tuple[str, int | None]:
    # Multi-host failover lists (`h2:5432,h1:5432`) name one cluster: take the smallest, like kafka_namespace.
    hosts = [_host_port(h, platform.default_port, url) for h in authority.split(",") if h.strip()]
    if not hosts:
        raise _fail("missing host", url)
    return min(hosts, key=lambda hp: (hp[0], hp[1] or 0))


def _generic(platform: _Platform, rest: str, url: str) -> Connection:
    authority, path, tail = _split_authority(rest, url)
    params = _params(tail)
    host, port = _first_host(authority, platform, url)
    segments = _path_segments(path)
    database = segments[0] if segments else None
    schema = segments[1] if len(segments) > 1 else None
    if platform is _DB2 and database and ":" in database:  # `/DB:currentSchema=S;`
        database, _, extra = database.partition(":")
        params = {**_params(extra), **params}
    if platform is _TERADATA:  # `//host/DATABASE=db,DBS_PORT=1025`
        params = {**_params(path.strip("/")), **params}
        database = params.get("database")
        if "dbs_port" in params and ":" not in authority:
            host, port = _host_port(f"{host}:{params['dbs_port']}", platform.default_port, url)
    if platform.scheme == "hive" and database:
        database = database.split(";")[0]
    database = params.get("database") or params.get("databasename") or params.get("db") or database
    schema = params.get("currentschema") or params.get("schema") or schema
    if schema and "," in schema:  # pgjdbc search path: the first entry is where unqualified tables resolve
        schema = schema.split(",")[0].strip()
    return Connection(platform.scheme, f"{platform.scheme}://{_authority(host, port)}", database or None,
                      schema or None, platform.levels, platform.default_schema)


_REDSHIFT_HOST = re.compile(r"([^.]+)\.[^.]+\.([^.]+)\.redshift(?:-serverless)?\.amazonaws\.com")


def _redshift(rest: str, url: str) -> Connection:
    iam = rest[:4].lower() == "iam:"
    rest = rest[4:] if iam else rest
    authority, path, tail = _split_authority(rest, url)
    cluster, _, region = authority.partition(":")
    if iam and region and not region.isdigit():  # `redshift:iam://cluster:region/db`: the "port" is the region
        authority = f"{cluster}.{region}"
    host, port = _host_port(authority, _REDSHIFT.default_port, url)
    match = _REDSHIFT_HOST.fullmatch(host)
    if match:  # the spec keys Redshift by {cluster_identifier}.{region_name}, common to SQL and Data API access
        host = f"{match[1]}.{match[2]}"
    conn = _generic(_REDSHIFT, f"//localhost{path}{tail}", url)  # database and schema parsing as for the others
    return Connection("redshift", f"redshift://{host}:{port}", conn.database, conn.schema, 3, "public")


def _sqlserver(platform: _Platform, rest: str, url: str) -> Connection:
    authority, path, tail = _split_authority(rest, url)
    params = _params(tail)
    if not authority:
        authority = params.get("servername", "")
    authority = re.sub(r"\\[^:]*", "", authority)  # a named instance `host\SQLEXPRESS`: the host is the datasource
    if "portnumber" in params and ":" not in authority:
        authority = f"{authority}:{params['portnumber']}"
    host, port = _host_port(authority, platform.default_port, url)
    segments = _path_segments(path)
    database = params.get("databasename") or params.get("database") or (segments[0] if segments else None)
    return Connection(platform.scheme, f"{platform.scheme}://{_authority(host, port)}", database or None,
                      params.get("schema"), 3, "dbo")


_ORACLE_DESCRIPTOR = re.compile(r"(?is)\(\s*(host|port|service_name|sid)\s*=\s*([^)\s]+)\s*\)")


def _oracle(rest: str, url: str) -> Connection:
    if rest.startswith("//"):  # SQLAlchemy `oracle://user:pw@host:1521/svc` or `/?service_name=svc`
        authority, path, tail = _split_authority(rest, url)
        host, port = _host_port(authority, _ORACLE.default_port, url)
        segments = _path_segments(path)
        params = _params(tail)
        service = params.get("service_name") or params.get("sid") or (segments[0] if segments else None)
        return Connection("oracle", f"oracle://{_authority(host, port)}", service, None, 3)
    at = rest.rfind("@")  # `thin:[user/pw]@...`
    if at < 0:
        raise _fail("expected `@host` in the Oracle URL", url)
    target = rest[at + 1:].strip()
    if target.startswith("("):  # TNS: (DESCRIPTION=(ADDRESS=(HOST=h)(PORT=p))(CONNECT_DATA=(SERVICE_NAME=s)))
        found: dict[str, str] = {}
        for key, value in _ORACLE_DESCRIPTOR.findall(target):
            found.setdefault(key.lower(), value)
        hostport = found.get("host", "") + (f":{found['port']}" if "port" in found else "")
        host, port = _host_port(hostport, _ORACLE.default_port, url)
        service = found.get("service_name") or found.get("sid")
    else:
        target = target.removeprefix("//")
        target = re.split(r"[?]", target, maxsplit=1)[0]
        if "/" in target:  # host[:port]/service
            hostport, _, service = target.partition("/")
            service = service.split(":")[0]  # `/svc:server_type`
        else:  # host:port:SID
            parts = target.split(":")
            hostport, service = ":".join(parts[:2]), (parts[2] if len(parts) > 2 else None)
        host, port = _host_port(hostport, _ORACLE.default_port, url)
    return Connection("oracle", f"oracle://{_authority(host, port)}", service or None, None, 3)


_SNOWFLAKE_SUFFIX = re.compile(r"(\.privatelink)?\.snowflakecomputing\.(com|cn)$")


def snowflake_account(account: str) -> str:
    """The account as OpenLineage names it: ``orgname-accountname`` alone (it never carries a region), an account
    locator with its region and cloud, completed with Snowflake's defaults (AWS, us-west-1 — the region of a bare
    legacy locator): ``xy12345`` → ``xy12345.us-west-1.aws``, ``xy12345.us-east-2`` → ``xy12345.us-east-2.aws``."""
    parts = account.split(".")
    if "-" in parts[0]:
        return parts[0]
    if len(parts) == 1:
        return f"{parts[0]}.us-west-1.aws"
    if len(parts) == 2:
        return f"{account}.aws"
    return account


def _snowflake(rest: str, url: str) -> Connection:
    authority, path, tail = _split_authority(rest, url)
    account = unquote(authority).lower().split(":")[0]  # a JDBC URL may carry :443
    account = _SNOWFLAKE_SUFFIX.sub("", account)
    if not _HOST.fullmatch(account or "-"):
        raise _fail("invalid Snowflake account", url)
    account = snowflake_account(account)
    params = _params(tail)
    segments = _path_segments(path)
    database = params.get("db") or params.get("database") or (segments[0] if segments else None)
    schema = params.get("schema") or (segments[1] if len(segments) > 1 else None)
    return Connection("snowflake", f"snowflake://{account}", database, schema, 3)


def _bigquery(rest: str, url: str) -> Connection:
    params = _params(rest)
    project = params.get("projectid") or params.get("project")
    dataset = params.get("defaultdataset") or params.get("dataset")
    if project is None and rest.startswith("//") and not rest.lower().startswith("//https"):
        # SQLAlchemy `bigquery://project/dataset`
        authority, path, _ = _split_authority(rest, url)
        segments = _path_segments(path)
        project = authority or None
        dataset = dataset or (segments[0] if segments else None)
    return Connection("bigquery", "bigquery", project, dataset, 3)


def parse_connection(url: str) -> Connection:
    """The naming-relevant parts of a connection URL; ``ValueError`` (URL redacted) for unknown or malformed ones."""
    text = _check_text(url, "connection URL")
    scheme, rest = _split_scheme(text)
    platform = _PLATFORMS.get(scheme)
    if platform is None:
        raise _fail(f"unsupported connection URL scheme {scheme!r}", text)
    if platform is _BIGQUERY:
        return _bigquery(rest, text)
    if not rest:
        raise _fail(f"{scheme} URL has no host", text)
    if platform is _REDSHIFT:
        return _redshift(rest, text)
    if platform in (_SQLSERVER, _MSSQL):
        return _sqlserver(platform, rest, text)
    if platform is _ORACLE:
        return _oracle(rest, text)
    if platform is _SNOWFLAKE:
        return _snowflake(rest, text)
    return _generic(platform, rest, text)


def namespace_for_url(url: str) -> str:
    """Connection/JDBC URL → naming-spec namespace: ``postgres://host:5432``, ``snowflake://org-acct``, ``bigquery``."""
    return parse_connection(url).namespace


# --- tables -------------------------------------------------------------------------------------------------------
def _identifier_parts(table: str) -> list[str]:
    """`db."my.schema".[t]` → ['db', 'my.schema', 't']: split on dots outside quotes, quotes removed."""
    parts, current, quote = [], [], ""
    closing = {'"': '"', "`": "`", "[": "]"}
    for ch in table:
        if quote:
            if ch == closing[quote]:
                quote = ""
            else:
                current.append(ch)
        elif ch in closing:
            quote = ch
        elif ch == ".":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if quote:
        raise ValueError(f"unbalanced quote in table name {table!r}")
    parts.append("".join(current).strip())
    return parts


def table_dataset(url: str, table: str | Sequence[str], default_schema: str | None = None) -> tuple[str, str]:
    """(namespace, name) of a table reached through ``url``; name = ``database.schema.table`` (or ``database.table``).

    ``table`` may be qualified (``schema.table``, ``db.schema.table``, quoted parts) or a sequence of parts. Missing
    levels come from ``default_schema``, then the URL (database, ``currentSchema=``/``schema=``), then the platform's
    stock default (``public`` on Postgres/Redshift, ``dbo`` on SQL Server). Levels nobody knows are left out rather
    than invented. On two-level platforms (MySQL, Teradata, ClickHouse, Hive) the schema *is* the database.
    """
    conn = parse_connection(url)
    if isinstance(table, str):
        text = _check_text(table, "table name")
        parts = _identifier_parts(text)
        if conn.platform == "bigquery":  # `proj.ds.t` quoted as one identifier in backticks
            parts = [p for part in parts for p in part.split(".")]
    else:
        parts = [str(p).strip() for p in table if p is not None and str(p).strip()]
    if not parts or any(not p for p in parts):
        raise ValueError(f"invalid table name {table!r}")
    if len(parts) > conn.levels:
        raise ValueError(f"table name {table!r} has more than the {conn.levels} levels {conn.platform} names have")
    if conn.levels == 2:
        if len(parts) == 1:
            database = default_schema or conn.database or conn.schema
            parts = [database, *parts] if database else parts
    else:
        if len(parts) == 1:
            schema = default_schema or conn.schema or conn.default_schema
            parts = [schema, *parts] if schema else parts
        if len(parts) == 2 and conn.database:
            parts = [conn.database, *parts]
    return conn.namespace, ".".join(parts)


# --- paths --------------------------------------------------------------------------------------------------------
_AZURE_HOST = re.compile(r"([a-z0-9-]+)\.(dfs|blob)\.core\.windows\.net")


def path_dataset(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Local path or storage URI → (namespace, name) per the spec.

    ``/data/x`` and ``file:`` URIs → (``file``, absolute path; relative paths resolve against the working
    directory); ``file://host/p`` → (``file://host``, ``/p``); ``s3``/``s3a``/``s3n`` → (``s3://bucket``, key);
    ``gs://b/k`` → (``gs://b``, key); ``hdfs://nn:8020/p`` → (``hdfs://nn:8020``, ``/p``);
    ``abfss``/``abfs`` and ``wasbs``/``wasb`` → (``{scheme}://container@account.dfs.core.windows.net``, path) —
    the spec's form for both, TLS scheme for both.
    """
    text = _check_text(os.fspath(path), "path")
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]+):", text)  # two letters minimum: `C:` is a drive, not a scheme
    if not match:
        if re.match(r"[A-Za-z]:[\\/]", text):
            raise ValueError(f"Windows paths are not supported: {text!r}")
        return "file", os.path.abspath(text)
    scheme, rest = match[1].lower(), text[match.end():]
    if scheme == "file":
        if rest.startswith("//"):
            host, slash, local = rest[2:].partition("/")
            host = unquote(host).lower()
            if host and host != "localhost":
                host, port = _host_port(host, None, text)
                return f"file://{_authority(host, port)}", "/" + unquote(local)
            rest = slash + local
        return "file", os.path.normpath("/" + unquote(rest).lstrip("/"))
    if not rest.startswith("//"):
        raise _fail(f"expected {scheme}://… in the path", text)
    authority, _, key = rest[2:].partition("/")
    if not scheme.startswith(("abfs", "wasb")):  # `@` separates container and account there, userinfo elsewhere
        authority = authority.rpartition("@")[2]
    key = unquote(key.split("?")[0].split("#")[0])
    if scheme in {"s3", "s3a", "s3n", "gs", "gcs"}:
        bucket = unquote(authority).lower()
        if not _HOST.fullmatch(bucket or "-"):
            raise _fail("invalid bucket name", text)
        return f"{'gs' if scheme in {'gs', 'gcs'} else 's3'}://{bucket}", key or "/"
    if scheme == "hdfs":
        host, port = _host_port(authority, 8020, text)
        return f"hdfs://{_authority(host, port)}", "/" + key
    if scheme in {"abfss", "abfs", "wasbs", "wasb"}:
        container, at, account_host = unquote(authority).lower().rpartition("@")
        account = _AZURE_HOST.fullmatch(account_host)
        if not at or not container or not account or not _HOST.fullmatch(container):
            raise _fail("expected container@account.dfs|blob.core.windows.net", text)
        namespace_scheme = "abfss" if scheme.startswith("abfs") else "wasbs"
        return f"{namespace_scheme}://{container}@{account[1]}.dfs.core.windows.net", key or "/"
    raise _fail(f"unsupported path scheme {scheme!r}", text)


# --- Kafka --------------------------------------------------------------------------------------------------------
def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` for a bootstrap list (``b:9092,A:9092`` → ``kafka://a:9092``).

    Clients list the same cluster's brokers in any order and subset; the smallest ``host:port`` (hosts lower-cased,
    default port 9092, ``SASL_SSL://`` prefixes dropped) is stable for one list however it is written, so every
    producer of a topic names it alike. Different subsets of one cluster still need the processor's alias map.
    """
    text = _check_text(bootstrap_servers, "bootstrap servers")
    brokers = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        item = re.sub(r"^[A-Za-z_]+://", "", item).rstrip("/")
        brokers.append(_host_port(item, 9092, text))
    if not brokers:
        raise ValueError("bootstrap servers list is empty")
    host, port = min(brokers, key=lambda hp: (hp[0], hp[1] or 0))
    return f"kafka://{host}:{port}"


# --- emitted pairs ------------------------------------------------------------------------------------------------
_STORAGE_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "hdfs", "abfs", "abfss", "wasb", "wasbs"})


def _name_from_uri(name: str, namespace: str) -> str:
    """A name written as a full storage URI (``s3://b/k`` under ``s3://b``) → its path, if it is in ``namespace``."""
    if "://" not in name and name[:5].lower() != "file:":
        return name
    try:
        uri_namespace, path = path_dataset(name)
    except ValueError:
        return name
    return path if uri_namespace == namespace else name


def canonical_dataset(namespace: str, name: str) -> tuple[str, str]:
    """A dataset identity as a producer emitted it → the canonical (namespace, name) the functions above would give.

    Storage namespaces (``s3a://B``, ``abfs://c@acct.blob.core.windows.net``, ``hdfs://NN``) go through
    ``path_dataset`` (a path inside the namespace moves into the name); ``file`` URIs in either part become
    ``file`` + absolute path; ``kafka://`` broker lists go through ``kafka_namespace``; connection URLs
    (``jdbc:postgresql://h/db``, ``postgresql://h``) through ``parse_connection``, and when the URL names a database
    or schema the name is qualified as ``table_dataset`` would (a name it cannot qualify is kept). Names are
    otherwise kept verbatim. ``ValueError`` for a namespace of no form known here: callers keep those as they are.
    """
    text = _check_text(namespace, "namespace")
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, not {type(name).__name__}")
    if text.lower() == "file":
        return ("file", _name_from_uri(name, "file")) if name[:5].lower() == "file:" else ("file", name)
    match = _SCHEME.match(text)
    scheme = match[0].lower() if match and text[match.end():match.end() + 1] == ":" else ""
    if scheme == "file":
        return path_dataset(f"{text.rstrip('/')}/{name.lstrip('/')}")
    if scheme in _STORAGE_SCHEMES:
        rest = text[len(scheme) + 1:]
        if not rest.startswith("//"):
            raise _fail(f"expected {scheme}://… in the namespace", text)
        authority, _, prefix = rest[2:].partition("/")
        if prefix.strip("/"):  # `s3a://bucket/prefix` + `part.csv`: the prefix belongs to the name
            return path_dataset(f"{text.rstrip('/')}/{name.lstrip('/')}")
        canonical, _ = path_dataset(f"{scheme}://{authority}")
        name = _name_from_uri(name, canonical)
        if canonical.startswith(("s3://", "gs://")) and len(name) > 1:  # an object key has no leading `/`
            name = name.lstrip("/") or name
        return canonical, name
    if scheme == "kafka":  # the broker list after `kafka://`, whose items may carry their own `SASL_SSL://`
        return kafka_namespace(text[len("kafka:"):].removeprefix("//")), name
    conn = parse_connection(text)  # ValueError for schemes that are no connection URL either
    if conn.database or conn.schema:
        try:
            return table_dataset(text, name)
        except ValueError:
            pass
    return conn.namespace, name
