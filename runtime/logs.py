"""Logging for the long-running components: JSON lines or readable text, secrets always redacted.

``configure_logging(level, json_format)`` installs one handler on the root logger. Every record it handles is
redacted first — the formatted message (so ``%``-args of any type are covered), the ``extra=`` fields, the exception
traceback of ``log.exception`` and ``stack_info`` — by a :class:`Redactor`:

* values of keys that look like secrets (``password``, ``passwd``, ``pwd``, ``secret``, ``token``, ``api_key``,
  ``sasl.password``, ``basic.auth.user.info``, ``credentials``, ``private_key``, ``access_key`` …) written as
  ``key=value``, ``key: value``, ``'key': 'value'`` (dict reprs, JSON, YAML, env dumps, JDBC/ODBC strings);
* ``Authorization`` header values and bare ``Bearer <token>`` / ``Basic <base64>`` credentials;
* passwords embedded in URLs: ``scheme://user:pass@host`` → ``scheme://user:***@host``;
* PEM private-key blocks;
* literal secret values known from configuration (e.g. the Neo4j password), wherever they appear, also URL- or
  JSON-escaped.

``problem(log, what, action, ...)`` logs one line per problem, saying what happened and what to do about it.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

from kafka_lineage.runtime.terminal import shown

if TYPE_CHECKING:
    from kafka_lineage.runtime.config import OperationsSettings

MASK = "***"
# Secrets shorter than this are not masked as literals: masking e.g. every "ab" would destroy the logs, and such a
# secret is no protection anyway. Key/URL/header patterns still mask them.
MIN_LITERAL_LENGTH = 4
# The ``extra=`` fields the text format shows after the message (JSON shows every extra field).
CONTEXT_FIELDS = ("run_id", "job", "dataset", "stage", "topic", "partition", "offset")

_SECRET_WORDS = (r"passw(?:or)?d|pwd|secret|token|api[_.-]?key|apikey|credentials?|private[_.-]?key|access[_.-]?key"
                 r"|basic\.auth\.user\.info")
_SENSITIVE_KEY = re.compile(rf"{_SECRET_WORDS}|authorization", re.IGNORECASE)
# Authorization is not among the text keys: its own pattern masks the whole value, scheme kept ("Bearer ***").
# A key is a whole run of [\w.-] with a secret word in it. The lookahead finds the word, then the run is taken
# possessively: "[\w.-]*?word[\w.-]*" would retry the rest of the run after every occurrence of a word, quadratic in
# the run's length ("tokentoken…"); the match is the same, since a key is always followed by a non-key character.
_KEY = rf"(?=[\w.-]*?(?:{_SECRET_WORDS}))[\w.-]*+"
_QUOTED = r"""b?"(?:[^"\\\n]|\\.)*"|b?'(?:[^'\\\n]|\\.)*'"""
_UNQUOTED = r"""[^\s,;&'"}\])]+"""

_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # -----BEGIN RSA PRIVATE KEY----- … -----END RSA PRIVATE KEY-----
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL),
     "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"),
    # scheme://user:pass@host (an empty user too); RFC 3986 ends the userinfo at / ? # so those are not the password.
    # Only a whole run of scheme characters is tried (see _userinfo): trying every letter of a long dotted name as a
    # scheme's start was quadratic in its length.
    (re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z0-9+.-]*+://)([^\s:/?#@]*):([^\s/?#@]+)@"),
     lambda match: _userinfo(match)),
    # Authorization: Bearer x / "Authorization": "Basic x" / ('Authorization', 'x')
    (re.compile(r"""(?i)(\bauthorization["']?[ \t]*[:=,][ \t]*["']?)(?:((?:bearer|basic|digest|token|apikey)[ \t]+))?"""
                r"""[^\s"',;}\])]+"""), rf"\1\2{MASK}"),
    # Bearer <token>: any token of 8+ characters; Basic <base64>: 8+ characters with a digit, capital, + / or =,
    # so that prose such as "Basic authentication" stays readable.
    (re.compile(r"\b([Bb]earer|BEARER)[ \t]+[A-Za-z0-9\-._~+/]{8,}=*"), rf"\1 {MASK}"),
    (re.compile(r"\b([Bb]asic|BASIC)[ \t]+(?=[A-Za-z0-9+/]*[0-9A-Z+/])[A-Za-z0-9+/]{8,}={0,2}"), rf"\1 {MASK}"),
)
_WORD_CHAR = re.compile(r"\w")


def _userinfo(match: re.Match[str]) -> str:
    """``scheme://user:***@`` if the run before ``://`` holds a scheme as ``\b[A-Za-z][A-Za-z0-9+.-]*`` finds it: a
    letter at a word boundary (the run's start, or after one of + . -), else the text unchanged."""
    run, start, text = match.group(1)[:-3], match.start(), match.string
    for offset, char in enumerate(run):
        if ("A" <= char <= "Z" or "a" <= char <= "z") and (
                run[offset - 1] in "+.-" if offset else start == 0 or not _WORD_CHAR.match(text, start - 1)):
            return f"{match.group(1)}{match.group(2)}:{MASK}@"
    return match.group(0)


# 'password', 'x' (a tuple in a repr) and password=x, password: "x", 'sasl.password': 'x', NEO4J_PASSWORD=x
_PAIR = re.compile(rf"""(?i)(?<![\w.-])(?P<key>(?P<q>["']){_KEY}(?P=q)[ \t]*,[ \t]*)(?P<value>{_QUOTED})""")
_KEY_VALUE = re.compile(
    rf"""(?i)(?<![\w.-])(?P<key>(?P<q>["']?){_KEY}(?P=q)[ \t]*[:=][ \t]*)(?P<value>{_QUOTED}|{_UNQUOTED})""")

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    quote_at = 1 if value[:1] == "b" and value[1:2] in "'\"" else 0
    if value[quote_at:quote_at + 1] in ("'", '"'):
        quote_char = value[quote_at]
        masked = f"{value[:quote_at + 1]}{MASK}{quote_char}"
    else:
        masked = MASK
    return f"{match.group('key')}{masked}"


def is_sensitive_key(key: str) -> bool:
    """Whether a field, parameter or header name (``neo4j_password``, ``sasl.password``, ``Authorization``) names a
    secret."""
    return bool(_SENSITIVE_KEY.search(key))


class Redactor:
    """Masks secrets in text and in structured values. Thread-safe; ``add_secrets`` may be called at any time."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._literal: re.Pattern[str] | None = None
        self.add_secrets(*secrets)

    def add_secrets(self, *values: str | None) -> None:
        """Mask these literal values (e.g. the configured Neo4j password) wherever they appear; ``None``, empty and
        too-short values (below ``MIN_LITERAL_LENGTH``) are ignored."""
        with self._lock:
            for value in values:
                if value and len(value) >= MIN_LITERAL_LENGTH:
                    self._secrets.update({value, quote(value, safe=""), quote_plus(value, safe=""),
                                          json.dumps(value)[1:-1], repr(value)[1:-1]})
            ordered = sorted(self._secrets, key=len, reverse=True)  # the longest form first
            self._literal = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        literal = self._literal
        if literal is not None:
            text = literal.sub(MASK, text)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        text = _PAIR.sub(_mask_value, text)
        return _KEY_VALUE.sub(_mask_value, text)

    def redact_field(self, key: object, value: object) -> object:
        """A named value: masked completely when the name looks like a secret, else redacted as a value."""
        if isinstance(key, str) and is_sensitive_key(key) and value not in (None, ""):
            return MASK
        return self.redact_value(value)

    def redact_value(self, value: object) -> object:
        """Strings redacted, mappings and sequences redacted recursively (values of secret keys masked), numbers
        kept; any other object becomes its redacted ``str`` if that contained a secret, else stays as it is."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, bytes | bytearray):
            return self.redact(bytes(value).decode("utf-8", "replace"))
        if isinstance(value, Mapping):
            return {key: self.redact_field(key, item) for key, item in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.redact_value(item) for item in value]
        try:
            text = str(value)
        except Exception:
            return f"<unprintable {type(value).__name__}>"
        redacted = self.redact(text)
        return value if redacted == text else redacted


_active = Redactor()


def redact(text: str) -> str:
    """``text`` redacted by the process's redactor (the one ``configure_logging`` installed)."""
    return _active.redact(text)


def active_redactor() -> Redactor:
    return _active


class RedactingFilter(logging.Filter):
    """Redacts a record in place before any formatter sees it: the message is formatted with its args and redacted
    (args are then dropped), extras, exception text and stack are redacted. Idempotent. Attach it to any further
    handler (e.g. one a framework installs) so that handler cannot leak secrets either."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = self.redactor or _active
        try:
            message = record.getMessage()
        except Exception as exc:  # format and args do not match: keep the record, drop the args (they may be secrets)
            message = f"{record.msg} [log call failed: {type(exc).__name__}: {exc}; its arguments are not shown]"
        record.msg, record.args = redactor.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.redact(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _RECORD_ATTRIBUTES:
                setattr(record, key, redactor.redact_field(key, value))
        return True


_FORMATTER = logging.Formatter()


def _utc_time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items()
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO-8601 UTC), level, logger, message, the ``extra=`` fields (run_id, job,
    dataset, stage, topic, partition, offset, …), exception and stack when present. Every value is redacted."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        redactor = self.redactor or _active
        entry: dict[str, Any] = {"time": _utc_time(record), "level": record.levelname, "logger": record.name,
                                 "message": redactor.redact(record.getMessage())}
        for key, value in _extras(record).items():
            if key not in entry:
                entry[key] = redactor.redact_field(key, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = redactor.redact(record.exc_text)
        if record.stack_info:
            entry["stack"] = redactor.redact(self.formatStack(record.stack_info))
        return json.dumps(entry, ensure_ascii=False, default=lambda value: redactor.redact(str(value)))


class TextFormatter(logging.Formatter):
    """``2024-05-01T10:00:00.123Z WARNING kafka_lineage.sinks.graph.sink message [stage=graph-sink partition=0]``,
    then the traceback if any. The whole output is redacted."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self.redactor = redactor

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_time(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        """Messages quote names from events: control characters shown as escapes, and the lines after the first
        indented, so no message can draw a line that passes for a record of its own (records start unindented)."""
        original = record.message
        record.message = "\n    ".join(shown(line) for line in original.split("\n"))
        try:
            return super().formatMessage(record)
        finally:
            record.message = original

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = " ".join(f"{field}={getattr(record, field)}" for field in CONTEXT_FIELDS
                           if getattr(record, field, None) is not None)
        if context:
            first, newline, rest = text.partition("\n")
            text = f"{first} [{context}]{newline}{rest}"
        return (self.redactor or _active).redact(text)


# The pipeline's LINEAGE_LOG_LEVEL names (Faust's) → logging's.
LOG_LEVELS = {"crit": "CRITICAL", "error": "ERROR", "warn": "WARNING", "info": "INFO", "debug": "DEBUG"}


def configure_logging(level: str | int = "INFO", json_format: bool = False, *, secrets: Iterable[str | None] = (),
                      stream: IO[str] | None = None, logger: str = "") -> Redactor:
    """Replace the handlers of the root logger (or ``logger``) with one writing JSON lines or readable text to
    ``stream`` (stderr by default), redacting every record; ``secrets`` are literal values to mask (e.g. the Neo4j
    password, the collector token). Also routes ``warnings`` through logging. Returns the process's redactor, to which
    more secrets may be added later. A level that is not a logging level name raises ``ValueError``."""
    global _active
    if isinstance(level, str):
        number = logging.getLevelNamesMapping().get(level.strip().upper())
        if number is None:
            raise ValueError(f"log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        level = number
    redactor = Redactor(secrets)
    _active = redactor
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(RedactingFilter(redactor))
    handler.setFormatter(JsonFormatter(redactor) if json_format else TextFormatter(redactor))
    target = logging.getLogger(logger)
    for old in list(target.handlers):
        target.removeHandler(old)
        if isinstance(old, logging.FileHandler):
            old.close()
    target.addHandler(handler)
    target.setLevel(level)
    logging.captureWarnings(True)
    return redactor


def problem(log: logging.Logger, what: str, action: str, *, error: BaseException | None = None,
            retry_in: float | None = None, level: int = logging.WARNING, **context: Any) -> None:
    """Log one line for one problem: what happened, the error, the retry delay and what to do, e.g.
    ``Neo4j unavailable (ServiceUnavailable: …); retrying in 2.0s — check LINEAGE_NEO4J_URI and that Neo4j is
    running``. ``context`` (stage, topic, partition, offset, run_id, …) goes to the record's extra fields; the JSON
    format also gets ``problem`` and ``action`` as fields. The error's traceback is not logged (use log.exception for
    unexpected errors)."""
    message = what
    if error is not None:
        detail = " ".join(str(error).split())  # one line, whatever the driver put into the message
        message += f" ({type(error).__name__}: {detail})" if detail else f" ({type(error).__name__})"
    if retry_in is not None:
        message += f"; retrying in {retry_in:.1f}s"
    message += f" — {action}"
    log.log(level, message, extra={**context, "problem": what, "action": action}, stacklevel=2)


def bootstrap_logging(operations: OperationsSettings, secrets: Iterable[str | None], *,
                      default_level: str = "info", stream: IO[str] | None = None) -> Redactor:
    """Every command's logging from its settings (LINEAGE_LOG_LEVEL, else ``default_level``; LINEAGE_LOG_FORMAT),
    every line redacted of ``secrets``."""
    level = LOG_LEVELS[operations.log_level or default_level]
    return configure_logging(level, operations.log_format == "json", secrets=secrets, stream=stream)
