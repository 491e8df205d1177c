"""Log formats, secret redaction (messages, args, extras, tracebacks) and problem lines, without services."""

from __future__ import annotations

import io
import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kafka_lineage.runtime import logs
from kafka_lineage.runtime.logs import MASK, RedactingFilter, Redactor, configure_logging, is_sensitive_key, problem

SECRET = "n3o4j-S3cret!pw"  # the "configured" Neo4j password
LOGGER = "kl_test"


@dataclass
class Settings:
    neo4j_uri: str
    neo4j_password: str


@dataclass
class Where:
    topic: str


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], io.StringIO]]:
    """configure_logging on a logger of our own, writing to a StringIO; undone afterwards."""
    monkeypatch.setattr(logs, "_active", logs.Redactor())
    target = logging.getLogger(LOGGER)

    def configure(json_format: bool) -> io.StringIO:
        stream = io.StringIO()
        configure_logging("debug", json_format, secrets=[SECRET], stream=stream, logger=LOGGER)
        return stream

    yield configure
    for handler in list(target.handlers):
        target.removeHandler(handler)
    target.setLevel(logging.NOTSET)
    logging.captureWarnings(False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2 user=bob", "password=*** user=bob"),
        ("{'sasl.password': 'p4ss', 'bootstrap': 'x'}", "{'sasl.password': '***', 'bootstrap': 'x'}"),
        ('{"password": "a\\"b", "x": 1}', '{"password": "***", "x": 1}'),
        ("LINEAGE_NEO4J_PASSWORD=abc123 next", "LINEAGE_NEO4J_PASSWORD=*** next"),
        ("passwd: hunter2", "passwd: ***"),
        ("basic.auth.user.info=user:pw and more", "basic.auth.user.info=*** and more"),
        ("api_key: 'k1'", "api_key: '***'"),
        ("client_secret = \"zz\"", 'client_secret = "***"'),
        ("GET /x?token=abc&page=1", "GET /x?token=***&page=1"),
        ("('password', b'x')", "('password', b'***')"),
        ("jdbc:sqlserver://h;user=u;password=p;db=x", "jdbc:sqlserver://h;user=u;password=***;db=x"),
        ("Server=x;Uid=u;Pwd=p;", "Server=x;Uid=u;Pwd=***;"),
        ("Authorization: Bearer abc.def.ghi", "Authorization: Bearer ***"),
        ("headers={'Authorization': 'Basic dXNlcjpwYXNz'}", "headers={'Authorization': 'Basic ***'}"),
        ("('Authorization', 'tok')", "('Authorization', '***')"),
        ("got Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "got Bearer ***"),
        ("sent Basic dXNlcjpwYXNz", "sent Basic ***"),
        ("http://alice:s3cr3t@host:80/p?q=1", "http://alice:***@host:80/p?q=1"),
        ("redis://:pw@cache and bolt://neo4j:x@db:7687", "redis://:***@cache and bolt://neo4j:***@db:7687"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- after",
         "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY----- after"),
        # left alone
        ("use Basic authentication", "use Basic authentication"),
        ("http://host:8080/path@x", "http://host:8080/path@x"),
        ("bolt://neo4j@localhost:7687", "bolt://neo4j@localhost:7687"),
        ("Neo4j unavailable (ServiceUnavailable: Couldn't connect to localhost:7687)",
         "Neo4j unavailable (ServiceUnavailable: Couldn't connect to localhost:7687)"),
        ("check LINEAGE_NEO4J_PASSWORD and restart", "check LINEAGE_NEO4J_PASSWORD and restart"),
        ("password=\nnext line", "password=\nnext line"),
    ],
)
def test_patterns(text: str, expected: str) -> None:
    redactor = Redactor()
    assert redactor.redact(text) == expected
    assert redactor.redact(expected) == expected  # idempotent


def test_literal_secrets_are_masked_in_every_spelling() -> None:
    redactor = Redactor([SECRET, None, "", "ab"])
    text = f"auth=('neo4j', '{SECRET}') url-encoded n3o4j-S3cret%21pw json {json.dumps(SECRET)} ab cab"
    assert redactor.redact(text) == "auth=('neo4j', '***') url-encoded *** json \"***\" ab cab"
    redactor.add_secrets("collector-token-1")
    assert redactor.redact("x collector-token-1 y") == "x *** y"


def test_values_are_redacted_recursively() -> None:
    redactor = Redactor([SECRET])
    value = {"neo4j_password": "whatever", "Authorization": "Bearer t", "nested": [f"p={SECRET}", 3, None],
             "token": "", "port": 7687, "settings": Settings("bolt://h", SECRET)}
    assert redactor.redact_value(value) == {
        "neo4j_password": MASK, "Authorization": MASK, "nested": ["p=***", 3, None], "token": "", "port": 7687,
        "settings": "Settings(neo4j_uri='bolt://h', neo4j_password='***')"}
    plain = Where("lineage.events")
    assert redactor.redact_value(plain) is plain  # nothing secret in its str: the object itself stays


@pytest.mark.parametrize("key", ["password", "NEO4J_PASSWORD", "sasl.password", "basic.auth.user.info", "api_key",
                                 "apiKey", "client_secret", "Authorization", "access-key", "credentials"])
def test_sensitive_keys(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize("key", ["partition", "offset", "topic", "user", "neo4j_uri", "stage"])
def test_ordinary_keys(key: str) -> None:
    assert not is_sensitive_key(key)


def log_everything(log: logging.Logger) -> None:
    """Secrets through every door a record has: message, %-args, extras, exception text, chained cause, stack."""
    log.info("connecting with %s and %r", {"sasl.password": "kafka-pw-1"}, Settings("bolt://h", SECRET),
             extra={"stage": "graph-sink", "topic": "lineage.events", "partition": 2, "offset": 41,
                    "neo4j_password": "another-pw", "run_id": "r-1", "config": {"token": "tok-123456"}})
    log.warning("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig, url http://u:url-pw-9@h/x")
    try:
        try:
            raise ConnectionError(f"login failed for bolt://neo4j:{SECRET}@localhost:7687")
        except ConnectionError as exc:
            raise RuntimeError("retry failed; password=hunter2-inline") from exc
    except RuntimeError:
        log.exception("write failed for job %s", "orders", extra={"job": "orders", "dataset": "db.orders"})
    log.debug("where from", stack_info=True, extra={"api_key": "k-77"})


LEAKS = (SECRET, "kafka-pw-1", "another-pw", "tok-123456", "eyJhbGciOiJIUzI1NiJ9", "url-pw-9", "hunter2-inline",
         "k-77")


def test_json_lines_carry_context_and_no_secret(capture: Callable[[bool], io.StringIO]) -> None:
    stream = capture(True)
    log_everything(logging.getLogger(f"{LOGGER}.sink"))
    output = stream.getvalue()
    for leak in LEAKS:
        assert leak not in output
    lines = [json.loads(line) for line in output.splitlines()]
    assert len(lines) == 4
    first, second, third, fourth = lines
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert first["level"] == "INFO" and first["logger"] == "kl_test.sink"
    assert first["message"] == ("connecting with {'sasl.password': '***'} and "
                                "Settings(neo4j_uri='bolt://h', neo4j_password='***')")
    assert (first["stage"], first["topic"], first["partition"], first["offset"], first["run_id"]) == (
        "graph-sink", "lineage.events", 2, 41, "r-1")
    assert first["neo4j_password"] == MASK and first["config"] == {"token": MASK}
    assert second["message"] == "Authorization: Bearer ***, url http://u:***@h/x"
    assert third["level"] == "ERROR" and third["message"] == "write failed for job orders"
    assert (third["job"], third["dataset"]) == ("orders", "db.orders")
    assert "Traceback" in third["exception"] and "The above exception was the direct cause" in third["exception"]
    assert "bolt://neo4j:***@localhost:7687" in third["exception"] and "password=***" in third["exception"]
    assert fourth["api_key"] == MASK and "Stack (most recent call last)" in fourth["stack"]


def test_text_format_is_readable_and_has_no_secret(capture: Callable[[bool], io.StringIO]) -> None:
    stream = capture(False)
    log_everything(logging.getLogger(f"{LOGGER}.sink"))
    output = stream.getvalue()
    for leak in LEAKS:
        assert leak not in output
    first = output.splitlines()[0]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO kl_test\.sink connecting with \{'sasl\.password': '\*\*\*'\} "
        r"and Settings\(neo4j_uri='bolt://h', neo4j_password='\*\*\*'\) "
        r"\[run_id=r-1 stage=graph-sink topic=lineage\.events partition=2 offset=41\]", first)
    assert "ERROR kl_test.sink write failed for job orders [job=orders dataset=db.orders]\nTraceback" in output
    assert "bolt://neo4j:***@localhost:7687" in output


def test_text_messages_cannot_drive_the_terminal_or_forge_a_record(capture: Callable[[bool], io.StringIO]) -> None:
    stream = capture(False)
    logging.getLogger(LOGGER).warning("dataset %s", "evil\x1b]0;pwned\x07\rSPOOF\u202e\n2024-01-01T00:00:00.000Z "
                                      "INFO forged record")
    output = stream.getvalue()
    assert "\x1b" not in output and "\r" not in output and "\u202e" not in output
    assert "evil\\x1b]0;pwned\\x07\\x0dSPOOF\\u202e" in output
    _first, second = output.splitlines()
    assert second.startswith("    2024-01-01T00:00:00.000Z INFO forged record")  # indented: not a record of its own


def test_secrets_added_after_configuration_are_masked(capture: Callable[[bool], io.StringIO]) -> None:
    stream = capture(True)
    logs.active_redactor().add_secrets("late-secret-value")
    logging.getLogger(LOGGER).info("value late-secret-value; %s", logs.redact("late-secret-value"))
    assert json.loads(stream.getvalue())["message"] == "value ***; ***"


def test_a_broken_format_string_is_kept_and_redacted(capture: Callable[[bool], io.StringIO]) -> None:
    stream = capture(True)
    logging.getLogger(LOGGER).info("password=%s %d", "hunter2-broken")
    output = stream.getvalue()
    assert "hunter2-broken" not in output
    assert json.loads(output)["message"] == ("password=*** %d [log call failed: TypeError: not enough arguments for "
                                             "format string; its arguments are not shown]")


def test_the_filter_protects_other_handlers() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(Redactor([SECRET])))
    log = logging.getLogger(f"{LOGGER}.other")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("password is %s", SECRET, extra={"secret": "x"})
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)
    assert stream.getvalue() == "password is ***\n"


def test_configure_logging_replaces_handlers_and_checks_the_level(capture: Callable[[bool], io.StringIO]) -> None:
    capture(False)
    stream = capture(True)
    assert len(logging.getLogger(LOGGER).handlers) == 1
    assert logging.getLogger(LOGGER).level == logging.DEBUG
    logging.getLogger(LOGGER).info("once")
    assert len(stream.getvalue().splitlines()) == 1
    with pytest.raises(ValueError, match="LOUD"):
        configure_logging("LOUD", logger=LOGGER)


def test_problem_is_one_line_with_cause_retry_and_action(capture: Callable[[bool], io.StringIO]) -> None:
    stream = capture(True)
    error = ConnectionError(f"Couldn't connect to bolt://neo4j:{SECRET}@localhost:7687\n  (reason: refused)")
    problem(logging.getLogger(f"{LOGGER}.sink"), "Neo4j unavailable",
            "check LINEAGE_NEO4J_URI and that Neo4j is running", error=error, retry_in=2, stage="graph-sink")
    problem(logging.getLogger(LOGGER), "registry unreachable", "start the stack", level=logging.ERROR)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == ("Neo4j unavailable (ConnectionError: Couldn't connect to "
                                "bolt://neo4j:***@localhost:7687 (reason: refused)); retrying in 2.0s — "
                                "check LINEAGE_NEO4J_URI and that Neo4j is running")
    assert first["level"] == "WARNING" and first["stage"] == "graph-sink"
    assert (first["problem"], first["action"]) == ("Neo4j unavailable",
                                                   "check LINEAGE_NEO4J_URI and that Neo4j is running")
    assert second == {**second, "level": "ERROR", "message": "registry unreachable — start the stack"}


def test_problem_points_at_the_caller(capture: Callable[[bool], io.StringIO]) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    capture(False)
    keep = Keep()
    logging.getLogger(LOGGER).addHandler(keep)
    problem(logging.getLogger(LOGGER), "lag high", "add consumers")
    assert records[0].funcName == "test_problem_points_at_the_caller"


# --- redaction is linear in the line's length (issue 16 item 6) --------------------------------------------------
def _cpu_seconds(redactor: Redactor, text: str, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        redactor.redact(text)
        best = min(best, time.process_time() - started)
    return max(best, 1e-5)


@pytest.mark.parametrize("unit", ["orders.daily_", "a-b+c.", "tokenpassword.",
                                  "job=x password=hunter22 url=postgres://u:pw@db/x Bearer abcdefghijk "],
                         ids=["dotted-name", "scheme-characters", "secret-words", "mixed"])
def test_redaction_time_grows_linearly_with_the_line(unit: str) -> None:
    """A 1 M-character line costs about 100 times a 10 K one (quadratic would be 10,000 times; a 128 K name took 48 s
    before). The bound is generous against noise; the times are CPU seconds of this process."""
    redactor = Redactor([SECRET])
    short, long = unit * (10_000 // len(unit)), unit * (1_000_000 // len(unit))
    ratio = _cpu_seconds(redactor, long, 1) / _cpu_seconds(redactor, short, 5)
    assert ratio < 400, f"{ratio:.0f}x for 100x the characters"


# The patterns before they were made linear: the reference that the results must still equal.
_OLD_KEY = rf"[\w.-]*?(?:{logs._SECRET_WORDS})[\w.-]*"
_OLD_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s:/?#@]*):([^\s/?#@]+)@")
_OLD_PAIR = re.compile(rf"""(?i)(?<![\w.-])(?P<key>(?P<q>["']){_OLD_KEY}(?P=q)[ \t]*,[ \t]*)"""
                       rf"""(?P<value>{logs._QUOTED})""")
_OLD_KEY_VALUE = re.compile(rf"""(?i)(?<![\w.-])(?P<key>(?P<q>["']?){_OLD_KEY}(?P=q)[ \t]*[:=][ \t]*)"""
                            rf"""(?P<value>{logs._QUOTED}|{logs._UNQUOTED})""")


def _reference_redact(text: str) -> str:
    for index, (pattern, replacement) in enumerate(logs._PATTERNS):
        if index == 1:
            pattern, replacement = _OLD_URL, rf"\1\2:{MASK}@"
        text = pattern.sub(replacement, text)
    text = _OLD_PAIR.sub(logs._mask_value, text)
    return _OLD_KEY_VALUE.sub(logs._mask_value, text)


def test_linear_redaction_gives_the_same_results_as_before() -> None:
    """Differential: random lines made of the pieces the patterns care about, redacted both ways."""
    pieces = ["password", "token", "api_key", "secret", "user", "=", ":", ": ", ",", "'", '"', "\\", "://", "@", "/",
              "?", "#", ".", "-", "+", "_", " ", "\t", "x", "Z", "9", "é", "ß", "http", "s3a", "1x", "Bearer ",
              "Basic QWxhZGRpbjpvcGVu", "authorization: ", "b'", "}", "]", ")", ";", "&", "\n", "PRIVATE KEY"]
    rng = random.Random(16)
    redactor = Redactor()
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14)))
        assert redactor.redact(text) == _reference_redact(text), repr(text)
    for text in ("x.http://u:p@h", "-1.http://u:p@h", "_http://u:p@h", "éhttp://u:p@h", "1http://u:p@h",
                 "a+b://:p@h", "://u:p@h", "pg://u:p@h/a://v:q@i", "my_password_file.txt=/etc/x", "'tokens', 'v'"):
        assert redactor.redact(text) == _reference_redact(text), text
