"""The cluster's history as a nodes x time grid: one row per node, one column per bucket of
the range, each cell the node's mean over its GPUs' samples (GPU utilization, SM activity,
power) or its NICs' summed traffic.

Read from the rollups only, aggregated per node in SQL (one statement): the node rollups
compaction keeps (hourly for columns of an hour or more, else 5-minute; columns are never
narrower than 5 minutes), and for network traffic the NIC rollups (5-minute, ranges up to a
day). The hot samples compaction has not rolled up yet (the
hour in progress and ``RAW_HOT_MINUTES`` after it) are not read: at 1,000 nodes they are
millions of rows, and the page says where its data ends (``rolled_up_to``). The node and
GPU pages show those minutes.
"""

import datetime as dt
from dataclasses import dataclass

import numpy as np
from django.db import connection

from clusterui.inventory.models import Node
from clusterui.telemetry.compaction import horizon
from clusterui.telemetry.metrics import NIC_ROLLUP_TABLES, NODE_ROLLUP_TABLES
from clusterui.telemetry.series import pick_step

# Columns at most: a week in hours (168), a day in 10-minute buckets (144).
COLUMNS = 200
_ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str
    zmax: float | None  # the colour scale's top; None: the data's own maximum
    source: str  # "gpu" or "nic"
    columns: tuple[str, ...]
    scale: float = 1.0  # stored unit -> shown unit


METRICS = {
    "util": Metric("GPU utilization (NVML)", "%", 100.0, "gpu", ("util_pct",)),
    "sm": Metric("SM activity (GPM)", "%", 100.0, "gpu", ("sm_active_pct",)),
    "power": Metric("GPU power", "W", None, "gpu", ("power_w",)),
    "nic": Metric("Network traffic (receive + transmit)", "GB/s", None, "nic",
                  ("rx_bytes_per_s", "tx_bytes_per_s"), 1e-9),
}


@dataclass
class History:
    metric: str
    nodes: list[tuple[int, str, str]]  # (id, name, cluster), the rows in order
    ts: list[dt.datetime]  # each column's start
    step: int  # seconds per column
    z: np.ndarray  # nodes x columns, NaN where the node has no rolled-up sample
    rolled_up_to: dt.datetime  # no sample after this is read (see the module docstring)

    @property
    def info(self) -> Metric:
        return METRICS[self.metric]


def _table(tables: dict[int, str], step: int) -> str:
    """The coarsest rollup whose buckets tile a column (every step is whole minutes)."""
    return tables[max(w for w in tables if step % w == 0)]


# Per node and column: the mean over the node's GPUs' samples (the node rollups keep the
# sums and counts), or the NICs' means summed (each NIC's mean over the column, then the
# sum over the node's NICs).
_GPU_SQL = """
SELECT node_id, floor(extract(epoch FROM bucket - %(first)s) / %(step)s)::int AS col,
       sum({m}_sum) / NULLIF(sum({m}_n), 0)
FROM {table}
WHERE bucket >= %(first)s AND bucket < %(end)s {nodes}
GROUP BY 1, 2
"""
_NIC_SQL = """
SELECT node_id, col, sum(value) FROM (
    SELECT k.node_id, r.nic_id,
           floor(extract(epoch FROM r.bucket - %(first)s) / %(step)s)::int AS col,
           {value} AS value
    FROM {table} r JOIN inventory_nic k ON k.id = r.nic_id
    WHERE r.bucket >= %(first)s AND r.bucket < %(end)s {nodes}
    GROUP BY 1, 2, 3
) per_nic GROUP BY 1, 2
"""
# The NICs keep 5-minute rollups at most: a week of them for 1,000 nodes is 10 million
# rows, so their history is offered up to a day.
NIC_MAX_SPAN = dt.timedelta(days=1, minutes=5)


def _nic_value(columns) -> str:
    parts = [f"sum(r.{c}_avg * COALESCE(r.{c}_n, r.n)) "
             f"/ NULLIF(sum(COALESCE(r.{c}_n, r.n)) FILTER (WHERE r.{c}_avg IS NOT NULL), 0)"
             for c in columns]
    return " + ".join(f"COALESCE({p}, 0)" for p in parts)


def history(metric: str, start: dt.datetime, end: dt.datetime, *, cluster: str = "",
            now: dt.datetime | None = None) -> History:
    """Every node (of ``cluster``, if given) over [start, end)."""
    info = METRICS[metric]
    nodes_qs = Node.objects.order_by("cluster__name", "name")
    if cluster:
        nodes_qs = nodes_qs.filter(cluster__name=cluster)
    nodes = list(nodes_qs.values_list("id", "name", "cluster__name"))
    row_of = {n[0]: i for i, n in enumerate(nodes)}
    step = pick_step(start, end, max_points=COLUMNS, minimum=300)
    first = _ORIGIN + dt.timedelta(seconds=((start - _ORIGIN).total_seconds() // step) * step)
    ts = []
    t = first
    while t < end:
        ts.append(t)
        t += dt.timedelta(seconds=step)
    rolled_up_to = horizon(now or end)[0]
    z = np.full((len(nodes), len(ts)), np.nan)
    if nodes and ts:
        params = {"first": first, "end": min(end, rolled_up_to), "step": step}
        where = ""
        if cluster:
            where, params["nodes"] = "AND node_id = ANY(%(nodes)s)", list(row_of)
        if info.source == "gpu":
            (column,) = info.columns
            sql = _GPU_SQL.format(m=column, table=_table(NODE_ROLLUP_TABLES, step),
                                  nodes=where)
        else:
            sql = _NIC_SQL.format(value=_nic_value(info.columns),
                                  table=_table(NIC_ROLLUP_TABLES, step),
                                  nodes=where.replace("node_id", "k.node_id"))
        with connection.cursor() as cur:
            cur.execute(sql, params)
            for node_id, col, value in cur.fetchall():
                row = row_of.get(node_id)
                if row is not None and value is not None and 0 <= col < len(ts):
                    z[row, col] = value * info.scale
    return History(metric=metric, nodes=nodes, ts=ts, step=step, z=z,
                   rolled_up_to=rolled_up_to)
