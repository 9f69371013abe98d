"""Time series read back for charts, the API and the detectors.

Every reader returns series *aligned* on one time axis of fixed ``step`` buckets, at a
resolution that fits the range: about ``MAX_POINTS`` points per series at most, never the
raw rows of a long range. Buckets with no sample are ``None`` (a gap is shown, not hidden).
"""

import datetime as dt
from dataclasses import dataclass, field

from django.db import connection

from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    GPU_SAMPLE_TABLE,
    JOB_METRIC_NAMES,
    JOB_SAMPLE_TABLE,
    NIC_METRIC_NAMES,
    NIC_SAMPLE_TABLE,
)

MAX_POINTS = 600
# Bucket widths a chart may use, in seconds; the smallest that keeps the range within
# MAX_POINTS wins (never finer than the 1 s a collector can sample at).
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
AGGREGATES = {"avg": "avg", "max": "max", "min": "min"}
_ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class SeriesError(ValueError):
    """A bad request for a series (unknown metric, reversed range, ...): a 400, not a 500."""


def pick_step(start: dt.datetime, end: dt.datetime, *, max_points: int = MAX_POINTS,
              minimum: float = 1) -> int:
    """The finest bucket that keeps the range within ``max_points``, and no finer than
    ``minimum`` (the collectors' sampling interval: finer buckets would be half empty)."""
    span = (end - start).total_seconds()
    for step in STEPS:
        if step >= minimum and span / step <= max_points:
            return step
    return STEPS[-1]


@dataclass
class Series:
    """Aligned series: ``ts`` holds each bucket's start; ``values[key][metric]`` a list
    parallel to ``ts`` (key is a GPU, NIC or job id)."""

    start: dt.datetime
    end: dt.datetime
    step: int
    ts: list[dt.datetime] = field(default_factory=list)
    values: dict[int, dict[str, list[float | None]]] = field(default_factory=dict)

    def points(self) -> int:
        return len(self.ts) * sum(len(m) for m in self.values.values())


def _check(start, end, metrics, known, step):
    if start.tzinfo is None or end.tzinfo is None:
        raise SeriesError("from and to must carry a time zone")
    if end <= start:
        raise SeriesError("to must be after from")
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise SeriesError(f"unknown metric(s): {', '.join(unknown)}; known: {', '.join(known)}")
    if not metrics:
        raise SeriesError("no metrics asked for")
    if step is not None and (step < 1 or (end - start).total_seconds() / step > 10 * MAX_POINTS):
        raise SeriesError(f"step {step} s gives too many points for this range")


def _read(table: str, key_col: str, keys, metrics, start, end, step, agg, minimum,
          sum_over: str | None = None) -> Series:
    step = step or pick_step(start, end, minimum=minimum)
    origin = _ORIGIN
    first = origin + dt.timedelta(seconds=((start - origin).total_seconds() // step) * step)
    axis = []
    t = first
    while t < end:
        axis.append(t)
        t += dt.timedelta(seconds=step)
    out = Series(start=start, end=end, step=step, ts=axis)
    keys = sorted(set(keys))
    for key in keys:
        out.values[key] = {m: [None] * len(axis) for m in metrics}
    if not keys or not axis:
        return out
    fn = AGGREGATES[agg]
    cols = ", ".join(f"{fn}({m})" for m in metrics)
    if sum_over:
        # Per bucket, each part's (e.g. each node's) aggregate first, then their sum: a
        # multi-node job's host CPU is the total over its nodes, not a per-node mean.
        inner = ", ".join(f"{fn}({m}) AS {m}" for m in metrics)
        table = (f"(SELECT {key_col}, {sum_over}, min(ts) AS ts, {inner} FROM {table} "
                 f"WHERE {key_col} = ANY(%s) AND ts >= %s AND ts < %s "
                 f"GROUP BY {key_col}, {sum_over}, floor(extract(epoch FROM ts - %s) / %s)) parts")
        cols = ", ".join(f"sum({m})" for m in metrics)
    with connection.cursor() as cur:
        # The bucket's position on the axis, computed by the database: the same buckets as
        # date_bin(step, ts, origin) (``first`` is aligned on the origin), without sending
        # and parsing a timestamp per row.
        cur.execute(
            f"""
            SELECT {key_col}, floor(extract(epoch FROM ts - %s) / %s)::int AS i, {cols}
            FROM {table}
            WHERE {key_col} = ANY(%s) AND ts >= %s AND ts < %s
            GROUP BY 1, 2 ORDER BY 1, 2
            """,
            # Placeholders in text order: the select list, the parts subquery, the WHERE.
            [first, step, *([keys, first, end, first, step] if sum_over else []),
             keys, first, end],
        )
        n = len(axis)
        for key, i, *values in cur.fetchall():
            if not 0 <= i < n:
                continue
            row = out.values[key]
            for metric, value in zip(metrics, values, strict=True):
                row[metric][i] = None if value is None else float(value)
    return out


def gpu_series(gpu_ids, metrics, start, end, *, step=None, agg="avg", minimum=1) -> Series:
    _check(start, end, metrics, GPU_METRIC_NAMES, step)
    return _read(GPU_SAMPLE_TABLE, "gpu_id", gpu_ids, list(metrics), start, end, step, agg, minimum)


def nic_series(nic_ids, metrics, start, end, *, step=None, agg="avg", minimum=1) -> Series:
    _check(start, end, metrics, NIC_METRIC_NAMES, step)
    return _read(NIC_SAMPLE_TABLE, "nic_id", nic_ids, list(metrics), start, end, step, agg, minimum)


def job_host_series(job_ids, metrics, start, end, *, step=None, agg="avg", minimum=1) -> Series:
    """A job's host CPU and memory: per bucket, each node's aggregate, summed over nodes."""
    _check(start, end, metrics, JOB_METRIC_NAMES, step)
    return _read(JOB_SAMPLE_TABLE, "job_id", job_ids, list(metrics), start, end, step, agg,
                 minimum, sum_over="node_id")
