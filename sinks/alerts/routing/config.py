"""The alert router's routes file (``LINEAGE_ALERT_ROUTES``): which alerts go where, and how they are delivered.

A YAML (or JSON) document, validated whole at start; every error names its place (``routes[2].destination.url``).
Secrets (webhook URLs that embed a token, HMAC keys, bearer tokens) are only ever read from files (``*_file``), so
they never sit in the routes file, the environment or a log line. Pure: files are read here, nothing is sent.

    ui_url: https://lineage.example.com          # links in messages point into this web UI
    routes:
      - name: payments-slack
        match: {owners: ["team:payments"], severity: [BREAKING, COMPATIBLE]}
        destination: {type: slack, url_file: /run/secrets/slack-payments}
        delivery: {rate_per_minute: 10, digest_after: 5}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from kafka_lineage.runtime.config import ConfigError

DESTINATION_TYPES = ("webhook", "slack", "teams", "alertmanager")
MAX_ROUTES = 200
MAX_PATTERNS = 100  # per criterion
MAX_SECRET_BYTES = 4096  # a URL, key or token file larger than this is not one
MAX_TEMPLATE_BYTES = 256 * 1024
ROUTE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")  # in ledger keys, metric labels and logs
# what an HTTP header may hold, sent as it is: a line break would split it, a non-ASCII value fails to encode
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
HEADER_VALUE = re.compile(r"[ -~]{0,4000}")


def _listed(value: Any) -> Any:
    """One value where a list is expected is a list of one (``severity: BREAKING``)."""
    return [value] if isinstance(value, str) else value


Patterns = Annotated[list[Annotated[str, Field(min_length=1, max_length=1000)]], BeforeValidator(_listed),
                     Field(max_length=MAX_PATTERNS)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Match(_Strict):
    """What an alert must have for the route to take it: every criterion given holds (and), each criterion is met by
    any of its values (or). Name criteria are globs (``fnmatch``: ``*``, ``?``, ``[abc]``), case-sensitive."""

    kind: Annotated[list[Literal["schemaDrift", "sensitiveExposure"]], BeforeValidator(_listed)] = []
    severity: Annotated[list[Literal["BREAKING", "COMPATIBLE", "UNKNOWN"]], BeforeValidator(_listed)] = []
    # a schema change is taken if any of its field changes is of one of these kinds
    change: Annotated[list[Literal["ADDED", "REMOVED", "TYPE_CHANGED", "NULLABILITY_CHANGED", "OTHER"]],
                      BeforeValidator(_listed)] = []
    namespace: Patterns = []  # the alert's dataset
    name: Patterns = []
    owners: Patterns = []  # an owner of the dataset, or of any job or dataset it impacts (ownership facets)
    dataset_owners: Patterns = []  # an owner of the alert's dataset itself
    tags: Patterns = []  # a dataset-level tag of the alert's dataset


class Destination(_Strict):
    type: Literal["webhook", "slack", "teams", "alertmanager"]
    url: str | None = None  # an address that is no secret (an Alertmanager's); else url_file
    url_file: Path | None = None  # Slack and Teams webhook URLs carry their token: keep them in a file
    secret_file: Path | None = None  # the webhook's HMAC-SHA256 key
    token_file: Path | None = None  # sent as ``Authorization: Bearer …`` (an Alertmanager behind a proxy)
    headers: dict[str, str] = Field(default={}, max_length=20)  # further headers that are no secret
    template: Path | None = None  # a Jinja2 file rendering the request body's JSON; else the type's default
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)

    @model_validator(mode="after")
    def _one_address(self) -> Destination:
        if (self.url is None) == (self.url_file is None):
            raise ValueError("give exactly one of url and url_file")
        if self.type == "webhook" and self.secret_file is None:
            raise ValueError("a webhook is signed: secret_file names the file holding its HMAC key")
        if self.type != "webhook" and self.secret_file is not None:
            raise ValueError(f"secret_file signs webhooks only; a {self.type} destination does not take one")
        for name, value in self.headers.items():
            if name.lower() in ("authorization", "content-type") or name.lower().startswith("x-lineage-"):
                raise ValueError(f"header {name!r} is set by the router (a token goes in token_file)")
            if not HEADER_NAME.fullmatch(name) or not HEADER_VALUE.fullmatch(value):
                raise ValueError(f"header {name!r}: a name of letters, digits and -_. and a value of printable ASCII "
                                 "(no line breaks)")
        return self


class Delivery(_Strict):
    """How the route delivers: at most ``rate_per_minute`` messages, a burst gathered into digests, failures
    retried with exponential backoff (never given up: only a refusal for good dead-letters an alert)."""

    rate_per_minute: int = Field(default=20, ge=1, le=6000)
    # more than this many alerts waiting at once go out as one digest message; 0: never a digest
    digest_after: int = Field(default=5, ge=0, le=10_000)
    digest_max: int = Field(default=500, ge=2, le=5_000)  # alerts in one digest at most
    gather_seconds: float = Field(default=2.0, ge=0, le=300)  # how long the first alert of a burst waits for others
    retry_initial_seconds: float = Field(default=1.0, gt=0, le=600)
    retry_max_seconds: float = Field(default=300.0, gt=0, le=3600)
    max_pending: int = Field(default=20_000, ge=10, le=1_000_000)  # alerts waiting; past it the router stops reading


class Route(_Strict):
    name: str
    match: Match = Match()
    destination: Destination
    delivery: Delivery = Delivery()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ROUTE_NAME.match(value):
            raise ValueError("lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most "
                             "63 characters")
        return value


class RoutesFile(_Strict):
    ui_url: str = ""  # empty: the lineage server on this machine (LINEAGE_SERVER_PORT)
    routes: list[Route] = Field(min_length=1, max_length=MAX_ROUTES)

    @model_validator(mode="after")
    def _unique(self) -> RoutesFile:
        names = [route.name for route in self.routes]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"route names must be unique: {', '.join(repeated)} repeated")
        return self


class Secrets(BaseModel):
    """A route's secrets, read from their files. Kept out of reprs and logs."""

    model_config = ConfigDict(frozen=True)
    url: str = Field(repr=False)
    key: bytes | None = Field(default=None, repr=False)
    token: str | None = Field(default=None, repr=False)

    def values(self, *, url: bool = True) -> list[str]:
        """What the log redactor masks: the token and key, and (``url``: the URL is a secret, read from a file) the
        URL with its path and query values (a Slack URL's token is its path, a Teams Workflows URL's signature a
        query value)."""
        found = [self.token, self.key.decode("utf-8", "replace") if self.key else None]
        if url:
            parts = urlsplit(self.url)
            found += [self.url, parts.path, *(value for _name, value in parse_qsl(parts.query))]
        return [value for value in found if value]


class RouteConfig(BaseModel):
    """A validated route with its secrets and template read."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    route: Route
    secrets: Secrets
    template: str = Field(repr=False)

    @property
    def name(self) -> str:
        return self.route.name

    def secret_values(self) -> list[str]:
        """What the log redactor masks for this route (a URL given inline is no secret)."""
        return self.secrets.values(url=self.route.destination.url_file is not None)

    def where(self) -> str:
        """The destination for logs and errors: its type and host, never its path or query (tokens live there)."""
        parts = urlsplit(self.secrets.url)
        return f"{self.route.destination.type} at {parts.scheme}://{parts.hostname}" + (
            f":{parts.port}" if parts.port else "")


def load_routes(path: Path, default_templates: Mapping[str, str]) -> tuple[str, list[RouteConfig]]:
    """The file's ``ui_url`` and its routes, with secrets and templates read. ConfigError names what is wrong."""
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {path} is not valid YAML: {' '.join(str(exc).split())}") from None
    return parse_routes(document, path.parent, default_templates, source=str(path))


def parse_routes(document: Any, base: Path, default_templates: Mapping[str, str], source: str = "routes"
                 ) -> tuple[str, list[RouteConfig]]:
    try:
        parsed = RoutesFile.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(f"{_place(error['loc'])}: {error['msg'].removeprefix('Value error, ')}"
                             for error in exc.errors()[:10])
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {source}: {problems}") from None
    ui_url = parsed.ui_url.rstrip("/")
    if ui_url:
        _check_url(ui_url, "ui_url", source)
    routes = []
    for index, route in enumerate(parsed.routes):
        place = f"routes[{index}] ({route.name})"
        destination = route.destination
        url = destination.url if destination.url is not None else _secret(base, destination.url_file, place,
                                                                             "url_file")
        _check_url(url, f"{place}.destination", source, show=destination.url is not None)
        key = _secret(base, destination.secret_file, place, "secret_file").encode() \
            if destination.secret_file else None
        token = _secret(base, destination.token_file, place, "token_file") if destination.token_file else None
        if token is not None and not HEADER_VALUE.fullmatch(token):
            raise ConfigError(f"LINEAGE_ALERT_ROUTES: {place}.destination.token_file: the token must be printable "
                              "ASCII on one line (it is sent in the Authorization header)")
        template = _template(base, destination.template, place) if destination.template \
            else default_templates[destination.type]
        routes.append(RouteConfig(route=route, secrets=Secrets(url=url, key=key, token=token), template=template))
    return ui_url, routes


def _place(location: tuple[Any, ...]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the document"


def _resolve(base: Path, path: Path) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() else base / path


def _secret(base: Path, path: Path | None, place: str, field: str) -> str:
    assert path is not None
    resolved = _resolve(base, path)
    try:
        data = resolved.read_bytes()
    except OSError as exc:
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {place}.destination.{field}: cannot read {resolved}: "
                          f"{exc.strerror or exc}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {place}.destination.{field}: {resolved} holds {len(data)} bytes, "
                          f"more than a secret ({MAX_SECRET_BYTES})")
    value = data.decode("utf-8", "replace").strip()
    if not value:
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {place}.destination.{field}: {resolved} is empty")
    return value


def _template(base: Path, path: Path, place: str) -> str:
    resolved = _resolve(base, path)
    try:
        if resolved.stat().st_size > MAX_TEMPLATE_BYTES:
            raise ConfigError(f"LINEAGE_ALERT_ROUTES: {place}.destination.template: {resolved} is larger than "
                              f"{MAX_TEMPLATE_BYTES} bytes")
        return resolved.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {place}.destination.template: cannot read {resolved}: "
                          f"{exc}") from None


def _check_url(url: str, place: str, source: str, *, show: bool = True) -> None:
    """http(s) with a host. A URL read from a secret file is never quoted in the error."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f" {url!r}" if show else " (read from its file, not shown)"
        raise ConfigError(f"LINEAGE_ALERT_ROUTES: {source}: {place}: an http(s) URL with a host expected, "
                          f"got{shown}")
