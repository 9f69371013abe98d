"""The series ``/metrics`` exposes, read fresh at each scrape from the tables every "now"
view reads (the latest values kept by ingest, running jobs, open findings, the ingest log's
last minutes and the broker), through ``prometheus_client``'s custom-collector API.

Low cardinality by design: labels are cluster, node, finding kind and severity, never a job
or a user. A job label makes one new series per job, which is what made a scheduler
exporter's operators drop job labels; per-job figures belong to the API
(``/api/v1/jobs/``) and per-GPU ones to NVIDIA's dcgm-exporter on the nodes.
"""

import datetime as dt

from django.conf import settings
from django.db import connection
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from clusterui.fabric import health as port_health
from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.measured import measured_share_sql
from clusterui.ingest import health
from clusterui.inventory.counting import (
    BUSY_UTIL_PCT,
    SQL_BUSY_PCT,
    SQL_PHYSICAL,
    SQL_PRESENT,
    SQL_SHARE,
)

NODE = ["cluster", "node"]

# (name, help, column of _NODES) for the per-node GPU gauges.
NODE_GAUGES = (
    ("clusterui_node_gpus",
     "Physical GPUs the node reports (a MIG-enabled GPU once, gone GPUs not at all)", "gpus"),
    ("clusterui_node_gpus_reporting",
     "Physical GPUs with a current sample (0 while the node is silent)", "reporting"),
    ("clusterui_node_gpus_busy",
     f"GPUs at {BUSY_UTIL_PCT:g} % or more busy (the larger of NVML utilization and SM "
     "activity; a MIG instance: SM activity, counted as its share of its GPU)", "busy"),
    ("clusterui_node_gpus_allocated",
     "GPUs reporting that they are held by a job (a MIG instance counts its share of its "
     "GPU)", "allocated"),
    ("clusterui_node_gpus_idle_allocated",
     f"GPUs held by a job but below {BUSY_UTIL_PCT:g} % busy (the larger of NVML "
     "utilization and SM activity; a MIG instance: SM activity, as its share): waste now",
     "idle_allocated"),
    ("clusterui_node_silent",
     "1 when no batch of the node arrived for NODE_SILENT_AFTER_S seconds", "silent"),
)

# One row per node. A silent node's latest rows are old: its GPUs count as not reporting,
# the rule of the overview (clusterui.web.snapshot). GPUs are counted as everywhere
# (clusterui.inventory.counting): physical GPUs their node still reports, and a MIG
# instance's allocation as its share.
_NODES = f"""
SELECT c.name, n.name, s.silent, count(g.id) FILTER (WHERE {SQL_PHYSICAL}),
       count(l.gpu_id) FILTER (WHERE NOT s.silent AND {SQL_PHYSICAL}),
       COALESCE(sum({SQL_SHARE}) FILTER (WHERE NOT s.silent AND {SQL_BUSY_PCT} >= %(busy)s), 0),
       COALESCE(sum({SQL_SHARE}) FILTER (WHERE NOT s.silent AND l.job_id IS NOT NULL), 0),
       COALESCE(sum({SQL_SHARE}) FILTER (WHERE NOT s.silent AND l.job_id IS NOT NULL
                                        AND {SQL_BUSY_PCT} < %(busy)s), 0),
       avg(l.util_pct) FILTER (WHERE NOT s.silent),
       sum(l.power_w) FILTER (WHERE NOT s.silent)
FROM inventory_node n
JOIN inventory_cluster c ON c.id = n.cluster_id
CROSS JOIN LATERAL (SELECT COALESCE(n.reported_at, n.last_seen) < %(silent_before)s
                    AS silent) s
LEFT JOIN inventory_gpu g ON g.node_id = n.id AND {SQL_PRESENT}
LEFT JOIN telemetry_gpulatest l ON l.gpu_id = g.id
GROUP BY c.name, n.name, s.silent
ORDER BY c.name, n.name
"""

_RUNNING = f"""
SELECT c.name, count(j.id), COALESCE(sum(e.gpu_hours_wasted), 0),
       COALESCE(sum(e.gpu_hours_allocated), 0),
       COALESCE(sum(e.gpu_hours_allocated * {measured_share_sql("e")}), 0)
FROM inventory_cluster c
LEFT JOIN jobs_job j ON j.cluster_id = c.id AND j.state = 'running'
LEFT JOIN findings_jobefficiency e ON e.job_id = j.id
GROUP BY c.name
"""

_NODE_NAMES = """
SELECT n.id, c.name, n.name FROM inventory_node n JOIN inventory_cluster c ON c.id = n.cluster_id
WHERE n.id = ANY(%(ids)s) ORDER BY c.name, n.name
"""

# A finding is about a job (its cluster) or a node (its cluster).
_FINDINGS = """
SELECT COALESCE(jc.name, nc.name), f.kind, f.severity, count(*)
FROM findings_finding f
LEFT JOIN jobs_job j ON j.id = f.job_id
LEFT JOIN inventory_cluster jc ON jc.id = j.cluster_id
LEFT JOIN inventory_node n ON n.id = f.node_id
LEFT JOIN inventory_cluster nc ON nc.id = n.cluster_id
WHERE f.state = %(open)s
GROUP BY 1, 2, 3
"""


def _rows(sql: str, params: dict | None = None) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(sql, params or {})
        return cur.fetchall()


class ClusterCollector(Collector):
    """Everything ``/metrics`` shows, read at ``collect()``."""

    def __init__(self, now: dt.datetime | None = None):
        self.now = now

    def collect(self):
        now = self.now or timezone.now()
        yield from self.nodes(now)
        yield from self.fabric(now)
        yield from self.jobs()
        yield from self.findings()
        yield from self.ingest(now)

    def nodes(self, now):
        silent_before = now - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S)
        rows = _rows(_NODES, {"busy": BUSY_UTIL_PCT, "silent_before": silent_before,
                              "gpu_gone_after": settings.GPU_GONE_AFTER_S})
        families = {col: GaugeMetricFamily(name, text, labels=NODE)
                    for name, text, col in NODE_GAUGES}
        util = GaugeMetricFamily("clusterui_node_gpu_utilization_percent",
                                 "Mean utilization (NVML) of the node's reporting GPUs",
                                 labels=NODE)
        power = GaugeMetricFamily("clusterui_node_gpu_power_watts",
                                  "Power draw of the node's reporting GPUs, summed",
                                  labels=NODE)
        for (cluster, node, silent, gpus, reporting, busy, allocated, idle_allocated,
             util_mean, power_sum) in rows:
            values = {"gpus": gpus, "reporting": reporting, "busy": round(busy, 4),
                      "allocated": round(allocated, 4),
                      "idle_allocated": round(idle_allocated, 4),
                      "silent": int(silent)}
            for col, family in families.items():
                family.add_metric([cluster, node], values[col])
            if util_mean is not None:
                util.add_metric([cluster, node], util_mean)
            if power_sum is not None:
                power.add_metric([cluster, node], power_sum)
        yield from families.values()
        yield util
        yield power

    def fabric(self, now):
        family = GaugeMetricFamily(
            "clusterui_node_fabric_ports",
            "InfiniBand / RoCE ports heard from in the detector window, by verdict as the "
            "fabric page gives it (down after having been up, degraded below its nominal "
            "rate, erroring, healthy); 0 where none, nodes without such ports absent",
            labels=[*NODE, "verdict"])
        threshold = port_health.error_threshold()
        counts: dict[int, dict[str, int]] = {}
        for port in port_health.ports(*port_health.window(now)):
            verdicts = counts.setdefault(port.node_id, dict.fromkeys(port_health.VERDICTS, 0))
            verdicts[port.verdict(threshold)] += 1
        if counts:
            names = _rows(_NODE_NAMES, {"ids": list(counts)})
            for node_id, cluster, node in names:
                for verdict, n in counts[node_id].items():
                    family.add_metric([cluster, node, verdict], n)
        yield family

    def jobs(self):
        running = GaugeMetricFamily("clusterui_running_jobs", "Jobs running now",
                                    labels=["cluster"])
        wasted = GaugeMetricFamily(
            "clusterui_running_jobs_wasted_gpu_hours",
            "GPU-hours the jobs running now have wasted so far (as their efficiency counts "
            "them, updated by the detector pass every minute)", labels=["cluster"])
        allocated = GaugeMetricFamily(
            "clusterui_running_jobs_allocated_gpu_hours",
            "GPU-hours the jobs running now have held so far", labels=["cluster"])
        measured = GaugeMetricFamily(
            "clusterui_running_jobs_measured_gpu_hours",
            "Of the allocated GPU-hours, those the jobs' samples cover (the rest began before "
            "ClusterUI sampled the job, and the wasted figure takes it to be like the time "
            "measured): measured / allocated is the share measured", labels=["cluster"])
        for cluster, jobs, wasted_h, allocated_h, measured_h in _rows(_RUNNING):
            running.add_metric([cluster], jobs)
            wasted.add_metric([cluster], wasted_h)
            allocated.add_metric([cluster], allocated_h)
            measured.add_metric([cluster], measured_h)
        yield from (running, wasted, allocated, measured)

    def findings(self):
        family = GaugeMetricFamily("clusterui_findings_open",
                                   "Open findings, by kind and severity (0 where none)",
                                   labels=["cluster", "kind", "severity"])
        counts = {(c, k, s): n for c, k, s, n in _rows(_FINDINGS, {"open": FindingState.OPEN})}
        clusters = {c for c, _ in _rows("SELECT name, 1 FROM inventory_cluster")}
        clusters |= {c for c, _, _ in counts if c is not None}
        for cluster in sorted(clusters):
            for kind in FindingKind.values:
                for severity in Severity.values:
                    family.add_metric([cluster, kind, severity],
                                      counts.get((cluster, kind, severity), 0))
        yield family

    def ingest(self, now):
        queue = health.queue_depth()
        up = GaugeMetricFamily("clusterui_ingest_broker_up",
                               "1 when the broker (Redis) answered this scrape")
        up.add_metric([], 0 if queue["error"] else 1)
        yield up
        for key, name, text in (
                ("queued", "clusterui_ingest_queue_messages",
                 "Batches waiting in the ingest queue"),
                ("reserved", "clusterui_ingest_reserved_messages",
                 "Batches taken by a consumer and not stored yet"),
                ("consumers", "clusterui_ingest_consumers", "Live bulk ingest consumers"),
                ("dead_letters", "clusterui_ingest_dead_letters",
                 "Messages set aside in the dead-letter list (docs/operations.md)")):
            if queue[key] is not None:
                family = GaugeMetricFamily(name, text)
                family.add_metric([], queue[key])
                yield family
        rates = health.batch_rates(now)
        batches = GaugeMetricFamily("clusterui_ingest_batches_per_second",
                                    "Batches stored per second over the last minute")
        batches.add_metric([], rates["batches_per_s_1m"])
        yield batches
        for key, name, text in (
                ("delay_p50_s", "clusterui_ingest_delay_p50_seconds",
                 "Median of arrival minus send time of the last 5 minutes' batches"),
                ("delay_max_s", "clusterui_ingest_delay_max_seconds",
                 "Longest arrival minus send time of the last 5 minutes' batches")):
            if rates[key] is not None:
                family = GaugeMetricFamily(name, text)
                family.add_metric([], float(rates[key]))
                yield family
        refused = {"item": 0, "batch": 0}
        for row in health.rejected_by_reason(now - dt.timedelta(minutes=5)):
            refused[row["scope"]] += row["count"]
        family = GaugeMetricFamily(
            "clusterui_ingest_refused_5m",
            "Refused in the last 5 minutes: items inside stored batches (scope=item), whole "
            "batches (scope=batch); reasons on the ingest health page", labels=["scope"])
        for scope, count in refused.items():
            family.add_metric([scope], count)
        yield family
        signatures = health.signature_versions(now - dt.timedelta(hours=1))
        family = GaugeMetricFamily(
            "clusterui_ingest_batches_by_signature_version_1h",
            "Batches stored in the last hour by signature version (unsigned, 1, 2; unknown: "
            "stored before versions were recorded)", labels=["version"])
        for row in signatures["versions"]:
            family.add_metric([row["version"]], row["batches"])
        yield family
        # One series per node still on version 1: none once the transition can end.
        family = GaugeMetricFamily(
            "clusterui_ingest_node_signature_v1_batches_1h",
            "Batches a node signed with version 1 in the last hour (docs/protocol.md: the "
            "transition to version 2 can end when there is no such series)", labels=NODE)
        for row in signatures["v1_nodes"]:
            family.add_metric([row["cluster"], row["node"]], row["batches"])
        yield family
