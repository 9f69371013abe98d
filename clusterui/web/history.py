"""The cluster's history as a nodes x time grid: one row per node, one column per bucket of
the range, each cell the node's mean over its GPUs' samples (GPU utilization, SM activity,
power) or its NICs' summed traffic.

Read from the node rollups compaction keeps (hourly for columns of an hour or more, else
5-minute; columns are never narrower than 5 minutes), in one statement. The hot samples compaction has not rolled up yet (the
hour in progress and ``RAW_HOT_MINUTES`` after it) are not read: at 1,000 nodes they are
millions of rows, and the page says where its data ends (``rolled_up_to``). The node and
GPU pages show those minutes.
"""

import datetime as dt
from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction

from clusterui.inventory.models import Node
from clusterui.telemetry.metrics import NODE_ROLLUP_TABLES
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
                  ("nic_bytes_per_s",), 1e-9),
}


@dataclass
class History:
    metric: str
    nodes: list[tuple[int, str, str]]  # (id, name, cluster), the rows in order
    ts: list[dt.datetime]  # each column's start
    step: int  # seconds per column
    z: np.ndarray  # nodes x columns, NaN where the node has no rolled-up sample
    # No sample after this is read (see the module docstring); None: nothing rolled up yet.
    rolled_up_to: dt.datetime | None

    @property
    def info(self) -> Metric:
        return METRICS[self.metric]


def _table(tables: dict[int, str], step: int) -> str:
    """The coarsest rollup whose buckets tile a column (every step is whole minutes)."""
    return tables[max(w for w in tables if step % w == 0)]


# Per node and column: the mean over the node's GPUs' samples (the node rollups keep the
# sums and counts), or the mean of its NICs' summed traffic. One row per node, its columns and values as arrays: 1,000 rows
# to decode rather than 168,000. A column's number is computed in double precision
# (date_part), not numeric (extract), and a rollup as wide as the column is not regrouped.
_COL = "floor((date_part('epoch', {bucket}) - %(first)s) / %(step)s)::int"
_SQL = """
SELECT node_id, array_agg(col), array_agg(value) FROM (
    SELECT node_id, {col} AS col, {value} AS value
    FROM {table}
    WHERE bucket >= %(start)s AND bucket < %(end)s {nodes}
    {group}
) per_column WHERE value IS NOT NULL GROUP BY node_id
"""


def _rolled_up_to() -> dt.datetime | None:
    """The end of the newest bucket compaction has rolled up (read backwards on the 5-minute
    node rollups' primary key, bucket first)."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT max(bucket) FROM {NODE_ROLLUP_TABLES[300]}")
        newest = cur.fetchone()[0]
    return newest + dt.timedelta(minutes=5) if newest is not None else None


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
    rolled_up_to = _rolled_up_to()
    z = np.full((len(nodes), len(ts)), np.nan)
    if nodes and ts:
        params = {"first": first.timestamp(), "start": first,
                  "end": min(end, rolled_up_to or first), "step": step}
        where = ""
        if cluster:
            where, params["nodes"] = "AND node_id = ANY(%(nodes)s)", list(row_of)
        (m,) = info.columns
        table = _table(NODE_ROLLUP_TABLES, step)
        regroup = table != NODE_ROLLUP_TABLES.get(step)
        if info.source == "gpu":
            value = (f"sum({m}_sum) / NULLIF(sum({m}_n), 0)" if regroup
                     else f"{m}_sum / NULLIF({m}_n, 0)")
        else:  # the node's NICs' summed traffic: its mean over the column
            value = f"avg({m})" if regroup else m
        sql = _SQL.format(col=_COL.format(bucket="bucket"), value=value, table=table,
                          nodes=where, group="GROUP BY 1, 2" if regroup else "")
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET LOCAL work_mem = '64MB'")  # the regrouping stays in memory
            cur.execute(sql, params)
            for node_id, cols, values in cur.fetchall():
                row = row_of.get(node_id)
                if row is None:
                    continue
                cols = np.asarray(cols)
                inside = (cols >= 0) & (cols < len(ts))
                z[row, cols[inside]] = np.asarray(values, dtype=float)[inside] * info.scale
    return History(metric=metric, nodes=nodes, ts=ts, step=step, z=z,
                   rolled_up_to=rolled_up_to)
