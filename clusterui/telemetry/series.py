"""Time series read back for charts and the API.

Every reader returns series *aligned* on one time axis of fixed ``step`` buckets, at a
resolution that fits the range: about ``MAX_POINTS`` points per series at most, never the
raw rows of a long range. Buckets with no sample are ``None`` (a gap is shown, not hidden).

GPU series read both storage tiers, whatever the range: a sample is in exactly one of them
(compaction moves it in one transaction), so each bucket combines partial aggregates
(sum and count, max or min) from every source:

- step a multiple of 60 s (300 s, 3,600 s): the 1-minute (5-minute, 1-hour) rollups plus
  the hot table aggregated in SQL, in one statement (one snapshot), for the whole buckets of
  that width in the range; what is left at the end (a range ending mid-hour, say) is read
  from the next finer rollup (1 hour, then 5 minutes, then 1 minute) in the same statement,
  and a part shorter than a minute like a short step reads it;
- otherwise, and for what the rollups cannot answer (avg of the energy counter; anything
  of the throttle-reason bit mask): the packed chunks, decoded, plus the hot table
  aggregated in SQL, again in one statement.

Values from the packed tier and the rollups carry the codec's quantisation
(``codec.PRECISION``: none for byte rates and the energy counter); the rollups' averages
are float4, the byte rates' float8 (migration 0008). A rollup's average is weighted by
the number of its bucket's samples that reported the metric (``<m>_n``, NULL when all ``n``
did), so a bucket combined from rollups and hot rows is the mean over exactly the samples
that carry the metric, as if read raw (rows written before migration 0006 have no count and
are weighted by ``n``).
"""

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusterui.telemetry import codec, nicpack, packed, rollupcodec
from clusterui.telemetry.metrics import (
    GPU_CHUNK_TABLE,
    GPU_METRIC_NAMES,
    GPU_PACKED_ROLLUP_WIDTHS,
    GPU_ROLLUP_BLOB_SPAN,
    GPU_ROLLUP_TABLES,
    GPU_SAMPLE_TABLE,
    JOB_METRIC_NAMES,
    JOB_SAMPLE_TABLE,
    NIC_METRIC_NAMES,
    NIC_ROLLUP_DUE_TABLE,
    NIC_ROLLUP_TABLES,
    ROLLUP_GAUGES,
)

MAX_POINTS = 600
# Bucket widths a chart may use, in seconds; the smallest that keeps the range within
# MAX_POINTS wins (never finer than the 1 s a collector can sample at).
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
AGGREGATES = {"avg": "avg", "max": "max", "min": "min"}
_PACKED_TABLES = frozenset(GPU_ROLLUP_TABLES[w] for w in GPU_PACKED_ROLLUP_WIDTHS)
_BLOB_SPAN = {GPU_ROLLUP_TABLES[w]: span for w, span in GPU_ROLLUP_BLOB_SPAN.items()}
_ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
# A row's bucket on the axis, computed by the database (the same buckets as
# date_bin(step, t, origin); the axis's first bucket is aligned on the origin), without
# sending and parsing a timestamp per row. Parameters: the axis's first bucket, the step.
_BUCKET = "floor(extract(epoch FROM {t} - %s) / %s)::int"


class SeriesError(ValueError):
    """A bad request for a series (unknown metric, reversed range, ...): a 400, not a 500."""


def pick_step(start: dt.datetime, end: dt.datetime, *, max_points: int = MAX_POINTS,
              minimum: float = 1) -> int:
    """The finest bucket that keeps the range within ``max_points``, and no finer than
    ``minimum`` (the collectors' sampling interval: finer buckets would be half empty) or
    than the finest tier retention still keeps for ``start`` (``retained_minimum``)."""
    minimum = max(minimum, retained_minimum(start))
    span = (end - start).total_seconds()
    for step in STEPS:
        if step >= minimum and span / step <= max_points:
            return step
    return STEPS[-1]


def retained_minimum(start: dt.datetime, now: dt.datetime | None = None) -> int:
    """The finest step whose tier still holds data from ``start`` (retention drops whole
    day partitions, oldest first): raw samples (any step) for ``RAW_RETENTION_DAYS``, then
    the 1-minute rollups (steps of whole minutes) for ``ROLLUP_1M_RETENTION_DAYS``, the
    5-minute ones (steps of 5 minutes) for ``ROLLUP_5M_RETENTION_DAYS``, then hours. A chart
    of an old range reads the coarser tier that is there rather than a finer one that was
    dropped (a blank chart)."""
    age = (now or timezone.now()) - start
    out = 1
    for days, step in ((settings.RAW_RETENTION_DAYS, 60),
                       (settings.ROLLUP_1M_RETENTION_DAYS, 300),
                       (settings.ROLLUP_5M_RETENTION_DAYS, 3600)):
        if age > dt.timedelta(days=days):
            out = max(out, step)
    return out


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


def _stat(agg: str) -> str:
    """The rollup aggregate a read with ``agg`` takes: a mean is a bucket's sum over its count."""
    return "sum" if agg == "avg" else agg


def _check_raw_only(start, metrics, agg) -> None:
    """The max or min of a gauge the rollups keep only the sum of (``rollupcodec.KEPT``)
    exists in the raw tier alone: a range starting before it would come back blank."""
    stat = _stat(agg)
    lacking = [m for m in metrics if m in ROLLUP_GAUGES and stat not in rollupcodec.KEPT[m]]
    days = settings.RAW_RETENTION_DAYS
    if lacking and timezone.now() - start > dt.timedelta(days=days):
        kept = [m for m in ROLLUP_GAUGES if stat in rollupcodec.KEPT[m]]
        raise SeriesError(
            f"the {agg} of {', '.join(lacking)} is kept with the raw samples, {days} days, and "
            f"this range starts earlier: ask for its mean (agg=avg), or a range in the last "
            f"{days} days (older {agg}s are kept of {', '.join(kept)})")


def _axis(start, end, step) -> tuple[dt.datetime, list[dt.datetime]]:
    origin = _ORIGIN
    first = origin + dt.timedelta(seconds=((start - origin).total_seconds() // step) * step)
    axis = []
    t = first
    while t < end:
        axis.append(t)
        t += dt.timedelta(seconds=step)
    return first, axis


def _read(table: str, key_col: str, keys, metrics, start, end, step, agg, minimum,
          sum_over: str | None = None, table_params: int = 0) -> Series:
    """``table`` is a table, or a FROM item taking ``table_params`` parameters, which are
    the keys, the start and the end (``nicpack.SAMPLES``)."""
    step = step or pick_step(start, end, minimum=minimum)
    first, axis = _axis(start, end, step)
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
                 f"GROUP BY {key_col}, {sum_over}, {_BUCKET.format(t='ts')}) parts")
        cols = ", ".join(f"sum({m})" for m in metrics)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT {key_col}, {_BUCKET.format(t="ts")} AS i, {cols}
            FROM {table}
            WHERE {key_col} = ANY(%s) AND ts >= %s AND ts < %s
            GROUP BY 1, 2 ORDER BY 1, 2
            """,
            # Placeholders in text order: the select list, the FROM item (the parts subquery
            # or the source's), the WHERE.
            [first, step, *([keys, first, end, first, step] if sum_over else []),
             *[keys, first, end][:table_params], keys, first, end],
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
    """GPU metrics from the hot table, the packed chunks and the rollups (module docstring)."""
    _check(start, end, metrics, GPU_METRIC_NAMES, step)
    _check_raw_only(start, metrics, agg)
    metrics = list(metrics)
    step = step or pick_step(start, end, minimum=minimum)
    first, axis = _axis(start, end, step)
    out = Series(start=start, end=end, step=step, ts=axis)
    keys = sorted(set(gpu_ids))
    if not keys or not axis:
        out.values = {k: {m: [None] * len(axis) for m in metrics} for k in keys}
        return out
    acc = _Partials(keys, metrics, len(axis), agg)
    if rollup_width(step, agg, metrics):
        parts, cut = _tier_parts(GPU_ROLLUP_TABLES, first, end, step)
    else:
        parts, cut = [], first
    if cut > first:
        _rollup_and_hot(acc, keys, metrics, first, cut, step, agg, parts)
    if cut < end:
        _packed_and_hot(acc, keys, metrics, first, cut, end, step, agg)
    out.values = acc.result()
    return out


def _tier_parts(tables: dict[int, str], first, end, step: int):
    """[first, end) as consecutive parts, each read from the widest rollup table (width in
    seconds -> table) whose width divides ``step`` and whose whole buckets fill the part
    (``first`` is aligned on the step, so on every width dividing it): ([(table, lo, hi),
    ...], the end of the last part); what is left after it is read raw."""
    parts, cut = [], first
    for w in sorted(tables, reverse=True):
        if step % w:
            continue
        to = first + dt.timedelta(seconds=((end - first).total_seconds() // w) * w)
        if to > cut:
            parts.append((tables[w], cut, to))
            cut = to
    return parts, cut


def rollup_width(step: int, agg: str, metrics) -> int | None:
    """The widest rollup (60, 300 or 3,600 s) that answers this read exactly, or None:
    raw data."""
    if step % 60:
        return None
    stat = _stat(agg)
    for m in metrics:
        if m in ROLLUP_GAUGES and stat in rollupcodec.KEPT[m]:
            continue
        if m == "energy_j" and agg in ("max", "min"):
            continue
        return None
    return max(w for w in GPU_ROLLUP_TABLES if step % w == 0)


class _Partials:
    """Per key, metric and bucket: the running sum (avg), max or min, and the count."""

    def __init__(self, keys, metrics, n: int, agg: str):
        self.metrics = metrics
        self.agg = agg
        self.keys = np.array(sorted(keys), dtype=np.int64)
        fill = {"avg": 0.0, "max": -np.inf, "min": np.inf}[agg]
        # Metric-major: each metric's (key, bucket) cells are one contiguous slab.
        shape = (len(metrics), len(self.keys), n)
        self.values = np.full(shape, fill)
        self.counts = np.zeros(shape, np.int64)
        self.value = {int(k): self.values[:, p] for p, k in enumerate(self.keys)}
        self.count = {int(k): self.counts[:, p] for p, k in enumerate(self.keys)}
        self.n = n

    def add_rows(self, rows) -> None:
        """(key, bucket index, value 1, count 1, value 2, count 2, ...) rows, combined a
        whole column at a time (a big job's day is tens of thousands of rows)."""
        if not rows:
            return
        # One float64 matrix: None (a bucket where a metric had no sample) becomes NaN.
        self.add_table(np.array(rows, dtype=np.float64))

    def add_table(self, table: np.ndarray) -> None:
        """``add_rows``'s rows as a float64 matrix."""
        if not len(table):
            return
        index = table[:, 1]
        ok = ~np.isnan(index) & (index >= 0) & (index < self.n)
        table, index = table[ok], index[ok].astype(np.int64)
        pos = np.searchsorted(self.keys, table[:, 0].astype(np.int64))
        cell = pos * self.n + index
        for j in range(len(self.metrics)):
            values, counts = self.values[j].reshape(-1), self.counts[j].reshape(-1)
            v, c = table[:, 2 + 2 * j], table[:, 3 + 2 * j]
            has = c > 0
            at, v = cell[has], v[has]
            counts += np.bincount(at, weights=c[has], minlength=counts.size).astype(np.int64)
            if self.agg == "avg":
                values += np.bincount(at, weights=v, minlength=values.size)
            elif self.agg == "max":
                np.maximum.at(values, at, v)
            else:
                np.minimum.at(values, at, v)

    def add_block(self, key, block: codec.Block, first_ms: int, step_ms: int, lo_ms: int,
                  hi_ms: int) -> None:
        inside = (block.ts >= lo_ms) & (block.ts < hi_ms)
        index = (block.ts - first_ms) // step_ms
        inside &= (index >= 0) & (index < self.n)
        value, count = self.value[key], self.count[key]
        for j, m in enumerate(self.metrics):
            ok = inside & ~block.nulls[m]
            i, v = index[ok], block.values[m][ok].astype(np.float64)
            np.add.at(count[j], i, 1)
            if self.agg == "avg":
                np.add.at(value[j], i, v)
            elif self.agg == "max":
                np.maximum.at(value[j], i, v)
            else:
                np.minimum.at(value[j], i, v)

    def result(self) -> dict[int, dict[str, list[float | None]]]:
        out = {}
        for key, value in self.value.items():
            count = self.count[key]
            if self.agg == "avg":
                value = value / np.maximum(count, 1)
            # Lists of Python floats with None for empty buckets, built at C speed.
            cells = value.astype(object)
            cells[count == 0] = None
            out[key] = {m: cells[j].tolist() for j, m in enumerate(self.metrics)}
        return out


def _hot_parts(metrics, agg) -> str:
    if agg == "avg":
        return ", ".join(f"sum({m})::float8, count({m})" for m in metrics)
    return ", ".join(f"{agg}({m})::float8, count({m})" for m in metrics)


def _rollup_parts(metrics, agg) -> str:
    parts = []
    for m in metrics:
        if agg == "avg":
            # Weighted by the samples that reported the metric (``<m>_n``; NULL: all n).
            k = f"COALESCE({m}_n, n)"
            parts.append(f"sum({m}_avg::float8 * {k}), sum({k}) FILTER (WHERE {m}_avg IS NOT NULL)")
        else:
            parts.append(f"{agg}({m}_{agg})::float8, count({m}_{agg})")
    return ", ".join(parts)


def _rollup_selects(key_col, keys, metrics, first, step, agg, parts, *, skip=""):
    """One SELECT of partial aggregates per rollup part (``parts``: (table, lo, hi)) for a
    UNION ALL, and their parameters; ``skip``, a condition on the rollup row ``r`` that
    leaves it out."""
    selects, params = [], []
    for table, lo, hi in parts:
        selects.append(f"""
            SELECT {key_col}, {_BUCKET.format(t="bucket")}, {_rollup_parts(metrics, agg)}
            FROM {table} r
            WHERE {key_col} = ANY(%s) AND bucket >= %s AND bucket < %s{skip}
            GROUP BY 1, 2""")
        params += [first, step, keys, lo, hi]
    return selects, params


def _rollup_and_hot(acc: "_Partials", keys, metrics, first, cut, step, agg, parts) -> None:
    """Add the partial aggregates for [first, cut) from the rollups (``parts``: (table, lo,
    hi); the 1-hour rows aggregated in SQL, the packed 1- and 5-minute blobs decoded here) and
    the hot table (one statement, so a compaction committing meanwhile cannot move a sample
    between them)."""
    rows_parts = [p for p in parts if p[0] not in _PACKED_TABLES]
    blob_parts = [p for p in parts if p[0] in _PACKED_TABLES]
    width = 2 * len(metrics)
    selects, params = _rollup_selects("gpu_id", keys, metrics, first, step, agg, rows_parts)
    selects = [sql.replace("SELECT gpu_id,", "SELECT gpu_id, NULL::bytea, NULL::int,", 1)
                  .replace("GROUP BY 1, 2", "GROUP BY 1, 4") for sql in selects]
    blank = ", ".join(["NULL::float8"] * width)
    for p, (table, lo, hi) in enumerate(blob_parts):
        selects.append(f"""
            SELECT gpu_id, data, {p}, NULL::int, {blank}
            FROM {table}
            WHERE gpu_id = ANY(%s) AND start > %s AND start < %s""")
        params += [keys, lo - dt.timedelta(seconds=_BLOB_SPAN[table]), hi]
    selects.append(f"""
            SELECT gpu_id, NULL::bytea, NULL::int, {_BUCKET.format(t="ts")},
                   {_hot_parts(metrics, agg)}
            FROM {GPU_SAMPLE_TABLE}
            WHERE gpu_id = ANY(%s) AND ts >= %s AND ts < %s
            GROUP BY 1, 4""")
    params += [first, step, keys, first, cut]
    with connection.cursor() as cur:
        cur.execute("\n            UNION ALL".join(selects), params)
        rows = cur.fetchall()
    acc.add_rows([(key, *rest) for key, data, _, *rest in rows if data is None])
    first_ms = packed.dt_to_ms(first)
    for key, data, p, *_ in rows:
        if data is None:
            continue
        _, lo, hi = blob_parts[p]
        acc.add_table(_blob_partials(key, rollupcodec.unpack(bytes(data)), metrics, agg,
                                     first_ms, step * 1000, packed.dt_to_ms(lo),
                                     packed.dt_to_ms(hi)))


def _blob_partials(key, r: rollupcodec.RollupBlock, metrics, agg, first_ms, step_ms, lo_ms,
                   hi_ms) -> np.ndarray:
    """(key, bucket index, value, count, ...) rows, as ``_Partials.add_table`` takes them,
    of a packed rollup's buckets inside [lo, hi): per metric the sum (avg) or the max or min
    of the samples that reported it, and how many those were."""
    keep = (r.bucket >= lo_ms) & (r.bucket < hi_ms)
    cols = [np.full(int(keep.sum()), key, np.float64),
            ((r.bucket[keep] - first_ms) // step_ms).astype(np.float64)]
    stat = _stat(agg)
    for m in metrics:
        cols += [r.stats[m][stat][keep].astype(np.float64), r.k[m][keep].astype(np.float64)]
    return np.column_stack(cols) if len(cols[0]) else np.zeros((0, len(cols)))


def _packed_and_hot(acc: _Partials, keys, metrics, first, lo, hi, step, agg) -> None:
    """Add [lo, hi): the packed chunks (decoded here) and the hot table (aggregated by the
    database), in one statement."""
    width = 2 * len(metrics)
    blank = ", ".join(["NULL::float8"] * width)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT gpu_id, NULL::int, data, {blank}
            FROM {GPU_CHUNK_TABLE}
            WHERE gpu_id = ANY(%s) AND start > %s AND start < %s
            UNION ALL
            SELECT gpu_id, {_BUCKET.format(t="ts")}, NULL::bytea,
                   {_hot_parts(metrics, agg)}
            FROM {GPU_SAMPLE_TABLE}
            WHERE gpu_id = ANY(%s) AND ts >= %s AND ts < %s
            GROUP BY 1, 2
            """,
            [keys, lo - dt.timedelta(hours=1), hi, first, step, keys, lo, hi])
        rows = cur.fetchall()
    acc.add_rows([(key, i, *parts) for key, i, data, *parts in rows if data is None])
    first_ms, lo_ms, hi_ms = packed.dt_to_ms(first), packed.dt_to_ms(lo), packed.dt_to_ms(hi)
    for key, _, data, *_ in rows:
        if data is not None:
            acc.add_block(key, codec.unpack(bytes(data)), first_ms, step * 1000, lo_ms, hi_ms)


def nic_series(nic_ids, metrics, start, end, *, step=None, agg="avg", minimum=1) -> Series:
    """NIC metrics: for a step of whole 5 minutes, the 5-minute NIC rollups for the whole
    buckets of the range, except the (NIC, hour)s whose rollups are due (the recent hours,
    late data), which come from the samples with what is left at the end, in one
    statement; other steps read the samples (``telemetry_nic_samples``: hot and packed).
    A step finer than 5 minutes over a range older than ``RAW_RETENTION_DAYS``, whose
    samples retention dropped, is read at the next step of whole 5 minutes (the Series says
    which): the rollup is the finest tier left there."""
    _check(start, end, metrics, NIC_METRIC_NAMES, step)
    metrics = list(metrics)
    step = step or pick_step(start, end, minimum=minimum)
    if step % 300 and timezone.now() - start > dt.timedelta(days=settings.RAW_RETENTION_DAYS):
        step = next(s for s in STEPS if s >= step and s % 300 == 0)
    if step % 60:
        return _read(f"{nicpack.SAMPLES} s", "nic_id", nic_ids, metrics, start, end, step, agg,
                     minimum, table_params=3)
    first, axis = _axis(start, end, step)
    out = Series(start=start, end=end, step=step, ts=axis)
    keys = sorted(set(nic_ids))
    if not keys or not axis:
        out.values = {k: {m: [None] * len(axis) for m in metrics} for k in keys}
        return out
    acc = _Partials(keys, metrics, len(axis), agg)
    parts, cut = _tier_parts(NIC_ROLLUP_TABLES, first, end, step)
    selects, params = _rollup_selects("nic_id", keys, metrics, first, step, agg, parts, skip=f"""
              AND NOT EXISTS (SELECT 1 FROM {NIC_ROLLUP_DUE_TABLE} d
                              WHERE d.nic_id = r.nic_id AND d.hour <= r.bucket
                                AND d.hour > r.bucket - interval '1 hour')""")
    if cut > first:
        selects.append(f"""
            SELECT s.nic_id, {_BUCKET.format(t="s.ts")}, {_hot_parts(metrics, agg)}
            FROM {NIC_ROLLUP_DUE_TABLE} d
            CROSS JOIN LATERAL telemetry_nic_samples(ARRAY[d.nic_id], d.hour,
                                                     d.hour + interval '1 hour') s
            WHERE d.nic_id = ANY(%s) AND d.hour > %s AND d.hour < %s
              AND s.ts >= %s AND s.ts < %s
            GROUP BY 1, 2""")
        params += [first, step, keys, first - dt.timedelta(hours=1), cut, first, cut]
    if cut < end:
        selects.append(f"""
            SELECT nic_id, {_BUCKET.format(t="ts")}, {_hot_parts(metrics, agg)}
            FROM {nicpack.SAMPLES}
            GROUP BY 1, 2""")
        params += [first, step, keys, cut, end]
    with connection.cursor() as cur:
        cur.execute("\n            UNION ALL".join(selects), params)
        acc.add_rows(cur.fetchall())
    out.values = acc.result()
    return out


def job_host_series(job_ids, metrics, start, end, *, step=None, agg="avg", minimum=1) -> Series:
    """A job's host CPU and memory: per bucket, each node's aggregate, summed over nodes."""
    _check(start, end, metrics, JOB_METRIC_NAMES, step)
    return _read(JOB_SAMPLE_TABLE, "job_id", job_ids, list(metrics), start, end, step, agg,
                 minimum, sum_over="node_id")
