"""A route's delivery rules, pure: the HTTP request for a message (where, which headers, the webhook's signature),
what an answer means (delivered, try again and when, refused for good), and the pace (a token bucket, and how many
waiting alerts go into one message).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Literal

from kafka_lineage.sinks.alerts.routing.config import Delivery, RouteConfig

USER_AGENT = "kafka-lineage-alert-router/1"
# Answers worth another try: timeouts, too early, rate limits, and every server-side error. Any other 4xx says the
# request itself is wrong (a bad template, a revoked webhook, a deleted channel): sending it again cannot help.
RETRIED_STATUSES = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER = 3600.0  # a Retry-After further away than this is waited at most this long
MAX_REASON = 300  # characters of a refusal's answer kept in the dead letter and the log


@dataclass(frozen=True)
class Request:
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Outcome:
    result: Literal["delivered", "retry", "refused"]
    reason: str = ""
    retry_after: float | None = None  # seconds the destination asked to wait (Retry-After)


def signature(key: bytes, timestamp: str, body: bytes) -> str:
    """``v1=`` + HMAC-SHA256 over ``timestamp.body``: the timestamp signed with the body, so a receiver that checks
    it is recent refuses a captured request replayed later."""
    return "v1=" + hmac.new(key, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def request(route: RouteConfig, body: bytes, delivery_id: str, now: float | None = None) -> Request:
    destination = route.route.destination
    url = route.secrets.url
    if destination.type == "alertmanager" and not url.rstrip("/").endswith("/api/v2/alerts"):
        url = url.rstrip("/") + "/api/v2/alerts"
    headers = {**destination.headers, "Content-Type": "application/json", "User-Agent": USER_AGENT,
               "X-Lineage-Delivery": delivery_id}
    if route.secrets.token:
        headers["Authorization"] = f"Bearer {route.secrets.token}"
    if route.secrets.key is not None:
        timestamp = str(int(time.time() if now is None else now))
        headers["X-Lineage-Timestamp"] = timestamp
        headers["X-Lineage-Signature"] = signature(route.secrets.key, timestamp, body)
    return Request(url, headers, body)


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP date), bounded; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def outcome(status: int, headers: Mapping[str, str], text: str) -> Outcome:
    """What an HTTP answer means for the message. Slack answers its errors with a short code in the body
    (``invalid_blocks``, ``channel_not_found``), kept as the reason."""
    answer = " ".join(text.split())[:MAX_REASON]
    reason = f"HTTP {status}" + (f" {answer}" if answer else "")
    if 200 <= status < 300:
        return Outcome("delivered")
    if status in RETRIED_STATUSES or status >= 500:
        lowered = {key.lower(): value for key, value in headers.items()}
        return Outcome("retry", reason, retry_after(lowered.get("retry-after")))
    return Outcome("refused", reason)


class Pace:
    """At most ``rate_per_minute`` messages, in bursts of up to a tenth of it (at least one): a token bucket."""

    def __init__(self, rate_per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = rate_per_minute / 60.0
        self.capacity = max(1.0, rate_per_minute / 10.0)
        self.tokens, self.clock, self.last = self.capacity, clock, clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.per_second)
        self.last = now

    def wait_needed(self) -> float:
        """Seconds until a message may go (0: now)."""
        self._refill()
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.per_second

    def spend(self) -> None:
        self._refill()
        self.tokens -= 1.0


def batch_size(waiting: int, delivery: Delivery) -> int:
    """How many of the ``waiting`` alerts the next message carries: one, or — more than ``digest_after`` waiting —
    a digest of up to ``digest_max``."""
    if delivery.digest_after and waiting > delivery.digest_after:
        return min(waiting, delivery.digest_max)
    return min(waiting, 1)
