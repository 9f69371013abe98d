"""Each port's health as the pages and the detector see it: its link now (``PortLink``),
its nominal rate, and its error increases summed over a window (``PortErrors``)."""

import datetime as dt
import json
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from clusterui.fabric.metrics import (
    ERROR_FIELDS,
    LINK_ACTIVE,
    PHYS_LINK_UP,
    PHYS_NAMES,
    STATE_NAMES,
    STORM_FIELDS,
)
from clusterui.telemetry.timebounds import UNIX_EPOCH

# A port's verdicts (``PortHealth.verdict``), worst first.
VERDICTS = ("down", "degraded", "erroring", "healthy")


@dataclass
class PortHealth:
    nic_id: int
    node_id: int
    node: str
    name: str
    kind: str
    ts: dt.datetime
    link_state: int | None
    phys_state: int | None
    link_width: int | None
    link_gbps: float | None
    nominal_gbps: float | None
    nominal_width: int | None
    counters_saturated: int | None
    congestion: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)  # error counter -> increase in the window
    # Its traffic now (``NicLatest``), None where the port has no sample within
    # NODE_SILENT_AFTER_S of the window's end: a silent port's last rates are not "now".
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None

    @property
    def state_text(self) -> str:
        return _named(STATE_NAMES, self.link_state)

    @property
    def phys_text(self) -> str:
        return _named(PHYS_NAMES, self.phys_state)

    @property
    def down(self) -> bool:
        """Not ACTIVE (or its physical link not LinkUp), having been ACTIVE before: a port
        never seen up (no cable, disabled on purpose) is not a fault."""
        if self.nominal_gbps is None:
            return False
        return (self.link_state is not None and self.link_state != LINK_ACTIVE) or (
            self.phys_state is not None and self.phys_state != PHYS_LINK_UP)

    @property
    def degraded(self) -> bool:
        """Up, but at a lower rate than it has run at (fewer lanes or a lower speed)."""
        return (not self.down and self.link_gbps is not None and self.nominal_gbps is not None
                and self.link_gbps < self.nominal_gbps)

    @property
    def roce_rising(self) -> list[tuple[str, int]]:
        """The RoCE counters (congestion, drops, retransmissions, pauses) that rose in the newest
        interval, largest first; ``congestion`` holds every one the port reports."""
        return sorted(((k, v) for k, v in self.congestion.items() if v),
                      key=lambda kv: (-kv[1], kv[0]))

    @property
    def pause_storm(self) -> dict[str, int]:
        """The pause storm counters (mlx5 ``tx_pause_storm_*_events``) that rose in the
        newest interval: the port sent pauses for long (warning) or until the device's
        timeout stopped its pause frames (error; drops may have followed)."""
        return {k: self.congestion[k] for k in STORM_FIELDS if self.congestion.get(k)}

    @property
    def errors_rising(self) -> list[tuple[str, int]]:
        """The error counters that rose in the window, in the collector's order."""
        return [(k, v) for k, v in self.errors.items() if v]

    @property
    def error_total(self) -> int:
        return sum(v for v in self.errors.values() if v)

    def erroring(self, threshold: int) -> bool:
        return self.error_total >= threshold or bool(self.errors.get("link_downed"))

    def verdict(self, threshold: int) -> str:
        """One word for the port, the worst that holds: ``down``, ``degraded``,
        ``erroring`` (``threshold`` error increases in the window, or the link went down
        and came back) or ``healthy``."""
        if self.down:
            return "down"
        if self.degraded:
            return "degraded"
        return "erroring" if self.erroring(threshold) else "healthy"

    def unhealthy(self, threshold: int) -> bool:
        return self.verdict(threshold) != "healthy"

    @property
    def rate_pct(self) -> float | None:
        if self.link_gbps is None or not self.nominal_gbps:
            return None
        return 100.0 * self.link_gbps / self.nominal_gbps

    @property
    def load_pct(self) -> float | None:
        """The busier direction's share of the link's current rate (a link runs full duplex:
        each direction has the whole rate)."""
        rates = [r for r in (self.rx_bytes_per_s, self.tx_bytes_per_s) if r is not None]
        if not rates or not self.link_gbps:
            return None
        return 100.0 * max(rates) * 8 / (self.link_gbps * 1e9)

    def badness(self) -> tuple:
        """Worst first: down, then degraded (by the share of rate lost), then errors."""
        return (self.down, self.degraded, -(self.rate_pct or 100.0), self.error_total)


def _named(names: dict, code: int | None) -> str:
    return "not reported" if code is None else names.get(code, "unknown")


def is_port_evidence(entry) -> bool:
    """Whether an item of a finding's evidence is a fabric port (``port_evidence_text``)."""
    return isinstance(entry, dict) and "name" in entry and "nominal_gbps" in entry


def port_evidence_text(entry: dict) -> str:
    """One port of a fabric link finding's evidence (``findings/detectors/fabric_link.py``)
    as the fabric page says it, on the node page and in the email: "mlx5_1:1 (infiniband):
    ACTIVE / LinkUp, 100 Gb/s (1X) of 400 Gb/s (4X), degraded; errors: symbol_error 7200"."""
    def rate(gbps, width):
        return f"{gbps:g} Gb/s ({width}X)" if width else f"{gbps:g} Gb/s"

    text = (f"{entry.get('name')} ({entry.get('kind')}): "
            f"{_named(STATE_NAMES, entry.get('state'))} / "
            f"{_named(PHYS_NAMES, entry.get('phys_state'))}")
    if entry.get("gbps") is not None:
        text += ", " + rate(entry["gbps"], entry.get("width"))
        if entry.get("nominal_gbps") is not None:
            text += " of " + rate(entry["nominal_gbps"], entry.get("nominal_width"))
    verdict = "down" if entry.get("down") else "degraded" if entry.get("degraded") else ""
    text += f", {verdict}" if verdict else ""
    errors = {k: v for k, v in (entry.get("errors") or {}).items() if v}
    if errors:
        text += "; errors: " + ", ".join(f"{k} {v}" for k, v in errors.items())
    if entry.get("counters_saturated"):
        text += f"; {entry['counters_saturated']} counters saturated"
    if entry.get("pause_storm"):
        text += "; pause storm"
    return text


# Read back cheaply, a row per port of the whole fabric (8,000 ports: 1,000 nodes of 8):
# the link time as integer microseconds (Django's timestamptz loader parses text in Python,
# measured as a third of the call), an empty congestion object as NULL (no JSON to parse)
# and the sums as int8 (not numeric, which psycopg reads as Decimal).
_PORTS_SQL = f"""
SELECT l.nic_id, n.node_id, d.name, n.name, n.kind,
       (extract(epoch FROM l.ts) * 1000000)::int8, l.link_state, l.phys_state,
       l.link_width, l.link_gbps, l.nominal_gbps, l.nominal_width, l.counters_saturated,
       NULLIF(l.congestion, '{{{{}}}}'::jsonb), x.rx_bytes_per_s, x.tx_bytes_per_s,
       {", ".join(f"e.{f}" for f in ERROR_FIELDS)}
FROM fabric_portlink l
JOIN inventory_nic n ON n.id = l.nic_id
JOIN inventory_node d ON d.id = n.node_id
LEFT JOIN telemetry_niclatest x ON x.nic_id = l.nic_id AND x.ts > %(current)s
LEFT JOIN LATERAL (
    SELECT {", ".join(f"sum({f})::int8 AS {f}" for f in ERROR_FIELDS)}
    FROM fabric_porterrors p WHERE p.nic_id = l.nic_id AND p.ts > %(start)s AND p.ts <= %(end)s
) e ON true
WHERE l.ts > %(heard)s {{node_filter}}
ORDER BY d.name, n.name
"""


def ports(start: dt.datetime, end: dt.datetime, node_ids=None, *, cluster: str = ""
          ) -> list[PortHealth]:
    """The ports heard from since ``start`` (all nodes, or ``node_ids``; of every cluster,
    or the one named ``cluster``), with their error increases in (start, end] and their
    traffic as of ``end``."""
    params = {"start": start, "end": end, "heard": start,
              "current": end - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)}
    node_filter = ""
    if node_ids is not None:
        node_filter, params["nodes"] = "AND n.node_id = ANY(%(nodes)s)", list(node_ids)
    if cluster:
        node_filter += (" AND d.cluster_id = (SELECT id FROM inventory_cluster "
                        "WHERE name = %(cluster)s)")
        params["cluster"] = cluster
    out = []
    with connection.cursor() as cur:
        cur.execute(_PORTS_SQL.format(node_filter=node_filter), params)
        for row in cur.fetchall():
            errors = {f: v for f, v in zip(ERROR_FIELDS, row[16:], strict=True)
                      if v is not None}
            out.append(PortHealth(*row[:5], UNIX_EPOCH + dt.timedelta(microseconds=row[5]),
                                  *row[6:13], congestion=_json(row[13]), errors=errors,
                                  rx_bytes_per_s=row[14], tx_bytes_per_s=row[15]))
    return out



def _json(value) -> dict:
    """A jsonb column read by a raw cursor: Django has psycopg hand it over as text (its
    JSONField decodes it itself), so a dict only where another driver decoded it."""
    if isinstance(value, str):
        return json.loads(value)
    return value or {}


def error_threshold() -> int:
    return settings.DETECTOR_FABRIC_ERRORS


def window(end: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The detector window up to ``end``: the span the pages, the API and ``/metrics``
    judge ports over (``ports(*window(now))``)."""
    return end - dt.timedelta(seconds=settings.DETECTOR_WINDOW_S), end


def worst_first(items: list[PortHealth]) -> list[PortHealth]:
    """Worst first (``badness``); ports alike in it in node and port order."""
    return sorted(sorted(items, key=lambda p: (p.node, p.name)), key=PortHealth.badness,
                  reverse=True)


def prune(now: dt.datetime) -> int:
    """Delete error rows older than the raw retention (the detector pass calls it)."""
    from clusterui.fabric.models import PortErrors

    cutoff = now - dt.timedelta(days=settings.RAW_RETENTION_DAYS)
    return PortErrors.objects.filter(ts__lt=cutoff).delete()[0]
