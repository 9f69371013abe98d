"""Writing and reading the packed tier and the rollups.

``write_hours`` is the bulk writer: given whole (GPU, hour) blocks of samples as numpy arrays
(``codec.Block``), it writes their chunks and their GPU rollups, packed (``rollupcodec``):
a blob of 1-minute and one of 5-minute buckets per (GPU, hour), and the hour's bucket in the
1-hour blob of its (GPU, day) (the day's other hours kept). Then it recomputes the node
rollups of those nodes and hours and the hourly rollups of every job seen in them from the
GPU rollups, decoded; whatever those (GPU, hour)s and (job, hour)s held before is replaced:
writing the same hour twice gives the same rows. ``raw_samples`` reads full-resolution
samples back from both tiers. Compaction calls it inside its transaction; a benchmark can
call it directly to fill a database (``replace=False`` skips the deletes on an empty one).

A packed rollup keeps per bucket ``n`` samples and, per gauge, the count of the samples that
reported it, their exact sum (at the raw tier's precision), max and min; the OR of the
clock-event masks; the energy counter's min, max and last. Whoever combines rollup buckets
divides sums by those counts, never by ``n``: a metric missing from some samples (GPM's first
reading, intermittent GPM) would otherwise count the samples that lacked it.
Job rollups, per job and bucket over the job's GPUs:
``gpus``, ``samples``, ``gpu_s`` (GPU-seconds covered: samples x the node's sampling
interval, at most the bucket per GPU), ``util_pct``/``sm_active_pct``/``busy_pct`` (means
over the samples that reported them, with ``util_n``/``sm_active_n``/``busy_n``, NULL when
all ``samples`` did; busy is a GPU-minute's SM activity where any of its samples reported
it, NVML utilization otherwise), ``power_w`` (each GPU's mean power over the bucket, summed
over the GPUs) and ``mem_used_max_mib``.
"""

import datetime as dt
from dataclasses import dataclass

import numpy as np
from django.db import connection

from clusterui.telemetry import codec, partitions, pgcopy, rollupcodec
from clusterui.telemetry.metrics import (
    GPU_CHUNK_TABLE,
    GPU_METRIC_NAMES,
    GPU_ROLLUP_TABLES,
    GPU_SAMPLE_TABLE,
    JOB_ROLLUP_TABLES,
    NODE_ROLLUP_METRICS,
    NODE_ROLLUP_TABLES,
    PACKED_TABLES,
)

HOUR_MS = 3_600_000
ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
UTC = dt.UTC
# A hot row's time as the codec keeps it: ms since the epoch.
TS_MS = "round(extract(epoch FROM ts) * 1000)::bigint"


def ms_to_dt(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


def dt_to_ms(t: dt.datetime) -> int:
    return round(t.timestamp() * 1000)


# --- binary COPY straight from numpy columns -------------------------------------------

def copy_arrays(cur, table: str, columns: list[tuple[str, str, np.ndarray, np.ndarray | None]],
                *, rows_per_write: int = 100_000) -> int:
    """COPY rows given as columns: (name, type, values, null mask or None); ``pgcopy``."""
    return pgcopy.copy_columns(cur, table, columns, rows_per_write=rows_per_write)


# --- the bulk writer ------------------------------------------------------------------------

_DELETE_HOURS = """
DELETE FROM {table} r
USING unnest(%s::int[], %s::timestamptz[]) AS u(gpu_id, start)
WHERE r.gpu_id = u.gpu_id AND r.{col} >= u.start AND r.{col} < u.start + interval '1 hour'
  AND r.{col} >= %s AND r.{col} < %s
"""

_JOB_ROLLUP_SQL = """
INSERT INTO {table} (job_id, bucket, gpus, samples, gpu_s, util_pct, sm_active_pct,
                     busy_pct, power_w, mem_used_max_mib, util_n, sm_active_n, busy_n)
SELECT job_id, bucket, count(*), sum(n), sum(gpu_s),
       sum(util_s) / NULLIF(sum(util_n), 0), sum(sm_s) / NULLIF(sum(sm_n), 0),
       sum(busy_s) / NULLIF(sum(busy_n), 0), sum(power), max(mem),
       NULLIF(sum(util_n), sum(n)), NULLIF(sum(sm_n), sum(n)), NULLIF(sum(busy_n), sum(n))
FROM (
    SELECT r.job_id, r.gpu_id, date_bin(%(width)s, r.bucket, %(origin)s) AS bucket,
           sum(r.n) AS n,
           sum(LEAST(r.n * COALESCE(nd.sample_interval_s, 10), 60)) AS gpu_s,
           sum(r.util_pct_avg * r.util_k) AS util_s, sum(r.util_k) AS util_n,
           sum(r.sm_active_pct_avg * r.sm_k) AS sm_s, sum(r.sm_k) AS sm_n,
           sum(CASE WHEN r.sm_k > 0 THEN r.sm_active_pct_avg * r.sm_k
                    ELSE r.util_pct_avg * r.util_k END) AS busy_s,
           sum(CASE WHEN r.sm_k > 0 THEN r.sm_k ELSE r.util_k END) AS busy_n,
           sum(r.power_w_avg * r.power_k) / NULLIF(sum(r.power_k), 0) AS power,
           max(r.mem_used_mib_max) AS mem
    FROM unnest(%(job)s::int[], %(hour)s::timestamptz[]) AS t(job_id, hour)
    JOIN LATERAL (
        -- Each average weighted by the samples that reported it (``<m>_n``, NULL: all n).
        SELECT r.*,
               CASE WHEN r.util_pct_avg IS NULL THEN 0
                    ELSE COALESCE(r.util_pct_n, r.n) END AS util_k,
               CASE WHEN r.sm_active_pct_avg IS NULL THEN 0
                    ELSE COALESCE(r.sm_active_pct_n, r.n) END AS sm_k,
               CASE WHEN r.power_w_avg IS NULL THEN 0
                    ELSE COALESCE(r.power_w_n, r.n) END AS power_k
        FROM {source} r
        WHERE r.job_id = t.job_id AND r.bucket >= t.hour
          AND r.bucket < t.hour + interval '1 hour'
          AND r.bucket >= %(lo)s AND r.bucket < %(hi)s
    ) r ON true
    JOIN inventory_gpu g ON g.id = r.gpu_id
    JOIN inventory_node nd ON nd.id = g.node_id
    GROUP BY 1, 2, 3
) per_gpu
GROUP BY job_id, bucket
"""

# The nodes of these (GPU, hour)s, their buckets summed again over all their GPUs' rows of
# those hours (a node's other GPUs may be packed in another transaction: each one redoes
# the node's sums from what is there, so the last is complete).
# ``gpus`` counts physical GPUs: a MIG instance's row is summed, not counted as a GPU
# (clusterui.inventory.counting).
_NODE_ROLLUP_SQL = """
INSERT INTO {table} (node_id, bucket, gpus, {cols})
SELECT g.node_id, r.bucket, count(DISTINCT r.gpu_id) FILTER (WHERE g.parent_id IS NULL),
       {sums}
FROM (SELECT DISTINCT n.node_id, u.start
      FROM unnest(%(gpu)s::int[], %(start)s::timestamptz[]) AS u(gpu_id, start)
      JOIN inventory_gpu n ON n.id = u.gpu_id) t
JOIN inventory_gpu g ON g.node_id = t.node_id
JOIN {source} r ON r.gpu_id = g.id AND r.bucket >= t.start
 AND r.bucket < t.start + interval '1 hour' AND r.bucket >= %(lo)s AND r.bucket < %(hi)s
GROUP BY 1, 2
ON CONFLICT (node_id, bucket) DO UPDATE SET gpus = EXCLUDED.gpus, {updates}
"""


def _node_rollup_sql(width: int, source: str) -> str:
    cols = ", ".join(f"{m}_sum, {m}_n" for m in NODE_ROLLUP_METRICS)
    sums = ", ".join(
        f"sum(r.{m}_avg::float8 * COALESCE(r.{m}_n, r.n)), "
        f"sum(COALESCE(r.{m}_n, r.n)) FILTER (WHERE r.{m}_avg IS NOT NULL)"
        for m in NODE_ROLLUP_METRICS)
    updates = ", ".join(f"{m}_{k} = EXCLUDED.{m}_{k}" for m in NODE_ROLLUP_METRICS
                        for k in ("sum", "n"))
    return _NODE_ROLLUP_SQL.format(table=NODE_ROLLUP_TABLES[width], cols=cols, sums=sums,
                                   updates=updates, source=source)


_DELETE_JOB_HOURS = """
DELETE FROM {table} r
USING unnest(%(job)s::int[], %(hour)s::timestamptz[]) AS t(job_id, hour)
WHERE r.job_id = t.job_id AND r.bucket >= t.hour AND r.bucket < t.hour + interval '1 hour'
  AND r.bucket >= %(lo)s AND r.bucket < %(hi)s
"""


@dataclass
class Written:
    chunks: int = 0
    samples: int = 0
    rollup_rows: int = 0
    jobs: int = 0


def ensure_partitions(starts_ms) -> None:
    """The packed and rollup partitions for these hours (checked in the catalog every time,
    not from the in-process cache: a rolled-back transaction may have removed them)."""
    days = {ms_to_dt(int(s)).date() for s in starts_ms}
    partitions.forget_known()
    partitions.ensure_partitions(days, tables=PACKED_TABLES)


def write_hours(blocks: list[tuple[int, codec.Block]], *, replace: bool = True) -> Written:
    """Chunks and rollups for whole (gpu id, Block) hours, each Block one clock hour
    (``start`` hour-aligned, samples sorted by time, no repeated timestamps), all in the
    caller's transaction; the partitions must exist (``ensure_partitions``).

    ``replace``: delete what these (GPU, hour)s and their jobs' hours held first (compaction,
    late data); False on an empty database (a benchmark filling one)."""
    blocks = [(g, b) for g, b in blocks if len(b)]
    out = Written()
    if not blocks:
        return out
    gpus = [g for g, _ in blocks]
    starts = [ms_to_dt(b.start) for _, b in blocks]
    lo, hi = min(starts), max(starts) + dt.timedelta(hours=1)
    with connection.cursor() as wrapper:
        cur = wrapper.cursor
        if replace:
            for table in (GPU_CHUNK_TABLE, GPU_ROLLUP_TABLES[60], GPU_ROLLUP_TABLES[300]):
                cur.execute(_DELETE_HOURS.format(table=table, col="start"),
                            [gpus, starts, lo, hi])
        with cur.copy(f"COPY {GPU_CHUNK_TABLE} (gpu_id, start, n, data) FROM STDIN "
                      "(FORMAT BINARY)") as copy:
            copy.set_types(["int4", "timestamptz", "int4", "bytea"])
            for (g, b), start in zip(blocks, starts, strict=True):
                copy.write_row((g, start, len(b),
                                codec.pack(b.start, b.ts, b.job, b.values, b.nulls)))
        out.chunks = len(blocks)
        out.samples = sum(len(b) for _, b in blocks)
        # Every width's blob of each hour at once (the values quantised once).
        blobs = [rollupcodec.pack_hours(b, (60, 300, 3600), flat=(3600,)) for _, b in blocks]
        for width in (60, 300):
            with cur.copy(f"COPY {GPU_ROLLUP_TABLES[width]} (gpu_id, start, n, data) FROM STDIN "
                          "(FORMAT BINARY)") as copy:
                copy.set_types(["int4", "timestamptz", "int4", "bytea"])
                for (g, b), start, blob in zip(blocks, starts, blobs, strict=True):
                    copy.write_row((g, start, len(b), blob[width]))
            out.rollup_rows += len(blocks)
        days = _write_days(cur, blocks, [blob[3600] for blob in blobs])
        out.rollup_rows += len(days)
        # The nodes' 5-minute sums from every GPU of theirs in these hours (the others may
        # have been packed by an earlier transaction), decoded from the 5-minute blobs.
        cur.execute("SELECT g.id FROM inventory_gpu g WHERE g.node_id IN "
                    "(SELECT node_id FROM inventory_gpu WHERE id = ANY(%s))", [gpus])
        node_gpus = [r[0] for r in cur.fetchall()]
        for width in NODE_ROLLUP_TABLES:
            params = {"gpu": gpus, "start": starts, "lo": lo, "hi": hi}
            if width == 3600:  # the day blobs holding these hours
                params.update(_unpacked_rows(cur, width, node_gpus, days, days[0],
                                             days[-1] + dt.timedelta(days=1)))
            else:
                params.update(_unpacked_rows(cur, width, node_gpus, starts, lo, hi))
            cur.execute(_node_rollup_sql(width, _UNPACKED_SOURCE), params)
        pairs = {(int(j), int(b.start)) for _, b in blocks for j in np.unique(b.job) if j}
        out.jobs = len({j for j, _ in pairs})
        if pairs:
            params = {"job": [j for j, _ in pairs], "hour": [ms_to_dt(h) for _, h in pairs],
                      "lo": lo, "hi": hi, "origin": ORIGIN}
            # The 1-minute blobs of every GPU the jobs had in these hours: their allocations,
            # and the GPUs written here (a sample's job is what its batch said).
            cur.execute("SELECT DISTINCT gpu_id FROM jobs_jobgpu WHERE job_id = ANY(%s)",
                        [params["job"]])
            job_gpus = sorted({r[0] for r in cur.fetchall()} | set(gpus))
            hours = sorted({h for _, h in pairs})
            params.update(_unpacked_rows(cur, 60, job_gpus, [ms_to_dt(h) for h in hours],
                                         ms_to_dt(hours[0]),
                                         ms_to_dt(hours[-1]) + dt.timedelta(hours=1)))
            for width, table in JOB_ROLLUP_TABLES.items():
                if replace:
                    cur.execute(_DELETE_JOB_HOURS.format(table=table), params)
                cur.execute(_JOB_ROLLUP_SQL.format(table=table, source=_UNPACKED_SOURCE),
                            {**params, "width": dt.timedelta(seconds=width)})
    return out


DAY_MS = 24 * HOUR_MS
_DELETE_DAYS = """
DELETE FROM {table} r USING unnest(%s::int[], %s::timestamptz[]) AS u(gpu_id, start)
WHERE r.gpu_id = u.gpu_id AND r.start = u.start AND r.start >= %s AND r.start < %s
"""


def _write_days(cur, blocks: list[tuple[int, codec.Block]], hourly: list[bytes]
                ) -> list[dt.datetime]:
    """The 1-hour rollup blobs, one per (GPU, day), of the days these hours are on: each
    day's other hours as they were, these hours' buckets (``hourly``: each block's 1-hour
    blob, not split by job) replacing theirs; returns the days, sorted."""
    table = GPU_ROLLUP_TABLES[3600]
    new: dict[tuple[int, int], list[rollupcodec.RollupBlock]] = {}
    for (g, b), blob in zip(blocks, hourly, strict=True):
        new.setdefault((g, b.start - b.start % DAY_MS), []).append(rollupcodec.unpack(blob))
    days = sorted({ms_to_dt(d) for _, d in new})
    lo, hi = days[0], days[-1] + dt.timedelta(days=1)
    gpus = [g for g, _ in new]
    day_of = [ms_to_dt(d) for _, d in new]
    cur.execute(f"SELECT gpu_id, data FROM {table} WHERE gpu_id = ANY(%s) AND start = ANY(%s) "
                "AND start >= %s AND start < %s", [sorted(set(gpus)), days, lo, hi])
    for g, data in cur.fetchall():
        old = rollupcodec.unpack(bytes(data))
        hours = new.get((g, old.start))
        if hours is None:
            continue
        written = np.array([h.start - h.start % HOUR_MS for h in hours], np.int64)
        keep = ~np.isin(old.bucket, written)
        if keep.any():
            hours.append(rollupcodec.take(old, keep))
    cur.execute(_DELETE_DAYS.format(table=table), [gpus, day_of, lo, hi])
    with cur.copy(f"COPY {table} (gpu_id, start, n, data) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "timestamptz", "int4", "bytea"])
        for (g, day), parts in new.items():
            r = rollupcodec.concat(parts)
            copy.write_row((g, ms_to_dt(day), int(r.n.sum()), rollupcodec.pack_rows(
                day, 3600, r.bucket, r.job, r.n, r.k, r.stats)))
    return days


# The packed rollups' rows that the job and node rollups read, as a relation: arrays
# from ``_unpacked_rows`` (the means as sum / count; NaN where no sample reported it).
_UNPACKED = ("util_pct", "sm_active_pct", "power_w")
_UNPACKED_SOURCE = (
    "(SELECT gpu_id, job_id, 'epoch'::timestamptz + b * interval '1 millisecond' AS bucket, n, "
    + ", ".join(f"NULLIF({m}_avg, 'NaN') AS {m}_avg, {m}_n" for m in _UNPACKED)
    + ", mem_used_mib_max FROM unnest(%(r_gpu)s::int[], %(r_job)s::int[], %(r_b)s::int8[], "
    "%(r_n)s::int[], "
    + ", ".join(f"%(r_{m}_avg)s::float8[], %(r_{m}_n)s::int[]" for m in _UNPACKED)
    + ", %(r_mem)s::int[]) AS u(gpu_id, job_id, b, n, "
    + ", ".join(f"{m}_avg, {m}_n" for m in _UNPACKED) + ", mem_used_mib_max))")


def _unpacked_rows(cur, width: int, gpus, hours, lo, hi) -> dict[str, list]:
    """The ``width`` rollup blobs of these GPUs and hours, decoded into the parameters of
    ``_UNPACKED_SOURCE``."""
    cur.execute(f"SELECT gpu_id, data FROM {GPU_ROLLUP_TABLES[width]} WHERE gpu_id = ANY(%s) "
                "AND start = ANY(%s) AND start >= %s AND start < %s", [gpus, hours, lo, hi])
    parts = [(g, rollupcodec.unpack(bytes(data))) for g, data in cur.fetchall()]
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "r_gpu", "r_job", "r_b", "r_n", "r_mem",
        *(f"r_{m}_{a}" for m in _UNPACKED for a in ("avg", "n")))}
    for g, r in parts:
        cols["r_gpu"].append(np.full(len(r), g, np.int64))
        cols["r_job"].append(r.job)
        cols["r_b"].append(r.bucket)
        cols["r_n"].append(r.n)
        cols["r_mem"].append(np.where(r.k["mem_used_mib"] > 0,
                                      r.stats["mem_used_mib"]["max"], -1))
        for m in _UNPACKED:
            k = r.k[m]
            cols[f"r_{m}_avg"].append(np.where(k > 0, r.stats[m]["sum"] / np.maximum(k, 1),
                                               np.nan))
            cols[f"r_{m}_n"].append(k)
    out = {}
    for key, arrays in cols.items():
        values = np.concatenate(arrays).tolist() if arrays else []
        if key == "r_mem":
            values = [None if v < 0 else v for v in values]
        out[key] = values
    return out


# --- blocks from rows, merging ---------------------------------------------------------

def blocks_from_rows(rows) -> list[tuple[int, codec.Block]]:
    """(gpu, ts ms, job, *metrics) rows -> one Block per (GPU, hour), sorted by time."""
    cols = list(zip(*rows, strict=True))
    gpu = np.array(cols[0], np.int64)
    ts = np.array(cols[1], np.int64)
    job = np.array([0 if j is None else j for j in cols[2]], np.int64)
    values, nulls = {}, {}
    for name, col in zip(GPU_METRIC_NAMES, cols[3:], strict=True):
        null = np.array([v is None for v in col], bool)
        if name in codec.INTEGER_METRICS:
            values[name] = np.array([0 if v is None else v for v in col], np.int64)
        else:
            values[name] = np.array(col, np.float64)  # None becomes NaN
        nulls[name] = null
    return split_hours(gpu, ts, job, values, nulls)


def split_hours(gpu, ts, job, values, nulls) -> list[tuple[int, codec.Block]]:
    """Parallel sample arrays of any GPUs and hours -> one deduplicated Block per
    (GPU, hour); of samples with the same GPU and ms, the last one given wins."""
    hour = ts - ts % HOUR_MS
    order = np.lexsort((np.arange(len(ts)), ts, gpu))
    gpu, ts, hour, job = gpu[order], ts[order], hour[order], job[order]
    keep = np.ones(len(ts), bool)
    keep[:-1] = (gpu[1:] != gpu[:-1]) | (ts[1:] != ts[:-1])
    values = {m: v[order][keep] for m, v in values.items()}
    nulls = {m: v[order][keep] for m, v in nulls.items()}
    gpu, ts, hour, job = gpu[keep], ts[keep], hour[keep], job[keep]
    cuts = np.flatnonzero((gpu[1:] != gpu[:-1]) | (hour[1:] != hour[:-1])) + 1
    out = []
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ts)], strict=True):
        out.append((int(gpu[lo]), codec.Block(
            start=int(hour[lo]), ts=ts[lo:hi], job=job[lo:hi],
            values={m: v[lo:hi] for m, v in values.items()},
            nulls={m: v[lo:hi] for m, v in nulls.items()})))
    return out


def merge(old: codec.Block, new: codec.Block) -> codec.Block:
    """One hour's chunk and late samples of it: sorted, one sample per ms (``new`` wins)."""
    n = len(old) + len(new)
    merged = split_hours(
        np.zeros(n, np.int64), np.concatenate([old.ts, new.ts]),
        np.concatenate([old.job, new.job]),
        {m: np.concatenate([old.values[m], new.values[m]]) for m in GPU_METRIC_NAMES},
        {m: np.concatenate([old.nulls[m], new.nulls[m]]) for m in GPU_METRIC_NAMES})
    return merged[0][1]


# --- reading both tiers ---------------------------------------------------------------------

def raw_samples(gpu_ids, start: dt.datetime, end: dt.datetime, *, job_id: int | None = None
                ) -> list[tuple[int, codec.Block]]:
    """Every sample of these GPUs in [start, end) at full resolution, from the packed and
    the hot tier together (one statement: one snapshot, so a compaction committing
    meanwhile neither hides nor doubles a sample), as one Block per (GPU, hour).

    With ``job_id``, only the samples attributed to that job (pass the job's GPUs)."""
    gpu_ids = sorted(set(gpu_ids))
    if not gpu_ids:
        return []
    nulls_sql = ", ".join(f"NULL::{'bigint' if m in codec.INTEGER_METRICS else 'float8'}"
                          for m in GPU_METRIC_NAMES)
    cols = ", ".join(GPU_METRIC_NAMES)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT gpu_id, NULL::bigint, NULL::int, data, {nulls_sql}
            FROM {GPU_CHUNK_TABLE}
            WHERE gpu_id = ANY(%s) AND start > %s AND start < %s
            UNION ALL
            SELECT gpu_id, {TS_MS}, job_id, NULL::bytea, {cols}
            FROM {GPU_SAMPLE_TABLE}
            WHERE gpu_id = ANY(%s) AND ts >= %s AND ts < %s
            """,
            [gpu_ids, start - dt.timedelta(hours=1), end, gpu_ids, start, end])
        rows = cur.fetchall()
    hot = [(r[0], r[1], r[2], *r[4:]) for r in rows if r[3] is None]
    parts = [(g, codec.unpack(bytes(r[3]))) for r in rows if r[3] is not None for g in [r[0]]]
    if hot:
        parts += blocks_from_rows(hot)
    lo, hi = dt_to_ms(start), dt_to_ms(end)
    out = []
    for gpu_id, block in parts:
        keep = (block.ts >= lo) & (block.ts < hi)
        if job_id is not None:
            keep &= block.job == job_id
        if keep.any():
            out.append((gpu_id, _take(block, keep)))
    out.sort(key=lambda gb: (gb[0], gb[1].start))
    # A chunk and late hot rows of the same hour (compaction has not merged them yet).
    by_key: dict[tuple[int, int], codec.Block] = {}
    for gpu_id, block in out:
        key = (gpu_id, block.start)
        by_key[key] = merge(by_key[key], block) if key in by_key else block
    return [(g, b) for (g, _), b in by_key.items()]


def _take(block: codec.Block, keep: np.ndarray) -> codec.Block:
    return codec.Block(start=block.start, ts=block.ts[keep], job=block.job[keep],
                       values={m: v[keep] for m, v in block.values.items()},
                       nulls={m: v[keep] for m, v in block.nulls.items()})
