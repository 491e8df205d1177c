"""The alert router's settings (``lineage alerts route``): environment first, then the config file (LINEAGE_CONFIG),
then these defaults. The routes themselves live in their own file (``LINEAGE_ALERT_ROUTES``, see ``config.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_lineage.runtime.config import (
    ConfigError,
    crash_points_setting,
    merged_environment,
    port_setting,
    positive_setting,
)


@dataclass(frozen=True)
class RouterSettings:
    routes_file: Path
    ui_url: str = ""  # LINEAGE_UI_URL: where links in messages point; else the routes file's, else local_ui_url
    local_ui_url: str = "http://127.0.0.1:5050"  # the lineage server on this machine (LINEAGE_SERVER_PORT)
    group_id: str = "lineage-alert-router"
    # where a new group starts reading the alert topic: latest (the alerts from its first start on: a router added to
    # a pipeline that ran for months must not post its history) or earliest (everything the topic holds)
    start_from: str = "latest"
    poll_seconds: float = 0.5
    report_seconds: float = 30.0
    crash_points: str = ""  # tests and fault campaigns only: ROUTER_CRASH_POINTS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RouterSettings:
        values = merged_environment(env)
        routes = values.get("LINEAGE_ALERT_ROUTES", "").strip()
        if not routes:
            raise ConfigError("LINEAGE_ALERT_ROUTES: name the routes file (YAML: which alerts go to which "
                              "destinations; see the README's \"Alert routing\")")
        default = cls(routes_file=Path(routes))
        server_port = port_setting(values, "LINEAGE_SERVER_PORT", 5050)
        start_from = values.get("LINEAGE_ROUTER_START", default.start_from).strip().lower()
        if start_from not in ("latest", "earliest"):
            raise ConfigError(f"LINEAGE_ROUTER_START: latest or earliest, got {start_from!r}")
        return cls(
            routes_file=Path(routes).expanduser().resolve(),
            ui_url=values.get("LINEAGE_UI_URL", "").strip().rstrip("/"),
            local_ui_url=f"http://127.0.0.1:{server_port}",
            group_id=values.get("LINEAGE_ROUTER_GROUP", default.group_id),
            start_from=start_from,
            poll_seconds=positive_setting(values, "LINEAGE_SINK_POLL_SECONDS", default.poll_seconds),
            report_seconds=positive_setting(values, "LINEAGE_REPORT_SECONDS", default.report_seconds),
            crash_points=crash_points_setting(values, "LINEAGE_ROUTER_CRASH_POINTS", ROUTER_CRASH_POINTS),
        )


# Where the router can be made to die on purpose: a message accepted by its destination but not yet in the ledger
# (after-delivery: the one window where a restart sends it again, with the same X-Lineage-Delivery key), and an
# alert in the ledger whose offset is not committed yet (after-record).
ROUTER_CRASH_POINTS = ("after-delivery", "after-record")
