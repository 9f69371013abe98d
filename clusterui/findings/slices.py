"""Adding a pass's new raw samples to the per-minute slices and the jobs' running totals.

Two statements per pass, each over MANY jobs at once (the jobs' new time ranges travel as
arrays and are joined to the day-partitioned raw tables through their (gpu, ts), (nic, ts)
and (job, ts) indexes):

- ``add_gpu_samples``: per (job, GPU) minute, the sums a window needs (``GpuSlice``, upserted
  in the same statement) and, per (job, GPU), the totals the job's efficiency accumulates
  (returned): counts and sums of NVML utilization, GPM SM activity and "busy" (SM activity
  where the GPU reports it, NVML utilization otherwise), a 1 %-bin histogram of busy, the
  memory high-water mark, energy from the counter's differences, NVLink against capacity.
- ``add_job_samples``: per job minute, its nodes' fabric NICs, its host CPU and busy against
  NIC traffic (``JobSlice``), for a multi-node job each node's fabric NICs (``NodeSlice``),
  and per job the totals.

Only samples attributed to the job count (``job_id`` on the sample): a GPU's time before or
after the job is not the job's.
"""

import datetime as dt
import json
from dataclasses import dataclass, field

from clusterui.findings import bulk
from clusterui.findings.thresholds import REAL_THROTTLE_BITS, SLICE_S, Thresholds

ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
GPU_IDLE_BIT = 0x1


@dataclass
class Work:
    """One job's share of a pass: its new samples are those in (t0, t1]."""

    job_id: int
    t0: dt.datetime
    t1: dt.datetime
    keep_from: dt.datetime  # minutes older than this are never read by a window: no slices
    cpus_per_node: int | None
    # (gpu id, node id, NVLink capacity bytes/s or None, energy counter's last value or None,
    # the time of the GPU's last sample already added or None)
    gpus: list[tuple[int, int, float | None, float | None, dt.datetime | None]] = field(
        default_factory=list)
    # node id -> sampling interval, s
    nodes: dict[int, float] = field(default_factory=dict)


def minute_floor(t: dt.datetime) -> dt.datetime:
    return ORIGIN + dt.timedelta(seconds=((t - ORIGIN).total_seconds() // SLICE_S) * SLICE_S)


def minute_ceil(t: dt.datetime) -> dt.datetime:
    floor = minute_floor(t)
    return floor if floor == t else floor + dt.timedelta(seconds=SLICE_S)


# More than any GPU draws (NVIDIA's B200 is rated 1,000 W, the GB300 about 1,400 W): an
# energy counter step above this times its interval is not a step of the same counter.
MAX_GPU_POWER_W = 2000.0

_GPU_SQL = """
WITH w AS (
    SELECT * FROM unnest(%(job)s::int[], %(gpu)s::int[], %(t0)s::timestamptz[],
                         %(t1)s::timestamptz[], %(keep)s::timestamptz[], %(cap)s::float8[],
                         %(energy)s::float8[], %(prev_ts)s::timestamptz[])
        AS w(job_id, gpu_id, t0, t1, keep_from, nvl_cap, prev_energy, prev_ts)
),
raw AS MATERIALIZED (
    SELECT w.job_id, w.gpu_id, w.keep_from, s.ts, s.util_pct, s.sm_active_pct,
           COALESCE(s.sm_active_pct, s.util_pct) AS busy, s.mem_used_mib, s.energy_j,
           CASE WHEN row_number() OVER g = 1 THEN s.energy_j - w.prev_energy
                ELSE s.energy_j - lag(s.energy_j) OVER g END AS de,
           s.power_w,
           extract(epoch FROM s.ts - COALESCE(lag(s.ts) OVER g, w.prev_ts, w.t0)) AS dts,
           100.0 * GREATEST(s.nvlink_tx_bytes_per_s, s.nvlink_rx_bytes_per_s)
                 / NULLIF(w.nvl_cap, 0) AS nvl,
           COALESCE(s.throttle_reasons, 0) & %(bits)s AS tbits,
           COALESCE(s.throttle_reasons, 0) & %(idle)s <> 0 AS idle,
           s.sm_clock_mhz AS clock
    FROM w
    -- LATERAL with OFFSET 0 (which keeps the planner from flattening it into a join): one
    -- index range scan on (gpu_id, ts) per GPU. As a plain join the planner misjudges the
    -- arrays' sizes and scans the whole day's partition.
    CROSS JOIN LATERAL (
        SELECT * FROM telemetry_gpusample s
        WHERE s.gpu_id = w.gpu_id AND s.ts > w.t0 AND s.ts <= w.t1 AND s.job_id = w.job_id
          AND s.ts > %(lo)s AND s.ts <= %(hi)s
        OFFSET 0
    ) s
    WINDOW g AS (PARTITION BY w.job_id, w.gpu_id ORDER BY s.ts)
),
slices AS (
    INSERT INTO findings_gpuslice AS o (
        job_id, gpu_id, bucket, samples, util_sum, util_n, sm_sum, sm_n, busy_sum, busy_n,
        nvlink_sum, nvlink_n, nvlink_max, nvlink_high, nvc_n, nvc_x, nvc_y, nvc_xx, nvc_yy,
        nvc_xy, throttled, throttle_bits, throttled_clock_sum, throttled_clock_n,
        free_clock_max)
    SELECT job_id, gpu_id, date_bin(%(step)s, ts, %(origin)s), count(*),
           COALESCE(sum(util_pct), 0), count(util_pct),
           COALESCE(sum(sm_active_pct), 0), count(sm_active_pct),
           COALESCE(sum(busy), 0), count(busy),
           COALESCE(sum(nvl), 0), count(nvl), max(nvl),
           count(*) FILTER (WHERE nvl >= %(high)s),
           count(*) FILTER (WHERE busy IS NOT NULL AND nvl IS NOT NULL),
           COALESCE(sum(busy) FILTER (WHERE nvl IS NOT NULL), 0),
           COALESCE(sum(nvl) FILTER (WHERE busy IS NOT NULL), 0),
           COALESCE(sum(busy * busy) FILTER (WHERE nvl IS NOT NULL), 0),
           COALESCE(sum(nvl * nvl) FILTER (WHERE busy IS NOT NULL), 0),
           COALESCE(sum(busy * nvl), 0),
           count(*) FILTER (WHERE tbits <> 0),
           COALESCE(bit_or(tbits), 0),
           COALESCE(sum(clock) FILTER (WHERE tbits <> 0), 0),
           count(clock) FILTER (WHERE tbits <> 0),
           max(clock) FILTER (WHERE tbits = 0 AND NOT idle)
    FROM raw WHERE ts >= keep_from
    GROUP BY 1, 2, 3
    ON CONFLICT (job_id, gpu_id, bucket) DO UPDATE SET
        samples = o.samples + EXCLUDED.samples,
        util_sum = o.util_sum + EXCLUDED.util_sum, util_n = o.util_n + EXCLUDED.util_n,
        sm_sum = o.sm_sum + EXCLUDED.sm_sum, sm_n = o.sm_n + EXCLUDED.sm_n,
        busy_sum = o.busy_sum + EXCLUDED.busy_sum, busy_n = o.busy_n + EXCLUDED.busy_n,
        nvlink_sum = o.nvlink_sum + EXCLUDED.nvlink_sum,
        nvlink_n = o.nvlink_n + EXCLUDED.nvlink_n,
        nvlink_max = GREATEST(o.nvlink_max, EXCLUDED.nvlink_max),
        nvlink_high = o.nvlink_high + EXCLUDED.nvlink_high,
        nvc_n = o.nvc_n + EXCLUDED.nvc_n, nvc_x = o.nvc_x + EXCLUDED.nvc_x,
        nvc_y = o.nvc_y + EXCLUDED.nvc_y, nvc_xx = o.nvc_xx + EXCLUDED.nvc_xx,
        nvc_yy = o.nvc_yy + EXCLUDED.nvc_yy, nvc_xy = o.nvc_xy + EXCLUDED.nvc_xy,
        throttled = o.throttled + EXCLUDED.throttled,
        throttle_bits = o.throttle_bits | EXCLUDED.throttle_bits,
        throttled_clock_sum = o.throttled_clock_sum + EXCLUDED.throttled_clock_sum,
        throttled_clock_n = o.throttled_clock_n + EXCLUDED.throttled_clock_n,
        free_clock_max = GREATEST(o.free_clock_max, EXCLUDED.free_clock_max)
),
hist AS (
    SELECT job_id, gpu_id, jsonb_object_agg(bin, n) AS hist
    FROM (SELECT job_id, gpu_id, LEAST(100, GREATEST(0, round(busy)))::int AS bin,
                 count(*) AS n
          FROM raw WHERE busy IS NOT NULL GROUP BY 1, 2, 3) b
    GROUP BY 1, 2
)
SELECT t.*, hist.hist
FROM (
    SELECT job_id, gpu_id, count(*) AS n, min(ts) AS first_ts, max(ts) AS last_ts,
           COALESCE(sum(util_pct), 0) AS util_sum, count(util_pct) AS util_n,
           count(sm_active_pct) AS sm_n, COALESCE(sum(sm_active_pct), 0) AS sm_sum,
           COALESCE(sum(busy), 0) AS busy_sum, count(busy) AS busy_n,
           max(mem_used_mib) AS mem_max,
           -- A rise no GPU could make in the time (more than %(max_w)s W), or a fall to
           -- more than it could have used since a driver reload: not this counter's
           -- steps (a replaced or re-simulated counter); the power reading stands in.
           sum(CASE WHEN de >= 0 AND de <= dts * %(max_w)s THEN de
                    WHEN de < 0 AND energy_j <= dts * %(max_w)s THEN energy_j
                    WHEN de IS NOT NULL THEN COALESCE(power_w, 0) * dts END) AS energy,
           (array_agg(energy_j ORDER BY ts DESC) FILTER (WHERE energy_j IS NOT NULL))[1]
               AS energy_last,
           COALESCE(sum(nvl), 0) AS nvl_sum, count(nvl) AS nvl_n, max(nvl) AS nvl_max
    FROM raw GROUP BY 1, 2
) t
LEFT JOIN hist USING (job_id, gpu_id)
"""

GPU_TOTAL_FIELDS = ("n", "first_ts", "last_ts", "util_sum", "util_n", "sm_n", "sm_sum",
                    "busy_sum", "busy_n", "mem_max", "energy", "energy_last", "nvl_sum",
                    "nvl_n", "nvl_max", "hist")


def add_gpu_samples(work: list[Work], t: Thresholds) -> dict[tuple[int, int], dict]:
    """Upsert the GPU slices of the work's new samples; return {(job, gpu): totals}."""
    rows = [(w, g) for w in work for g in w.gpus]
    if not rows:
        return {}
    params = {
        "job": [w.job_id for w, _ in rows],
        "gpu": [g[0] for _, g in rows],
        "t0": [w.t0 for w, _ in rows],
        "t1": [w.t1 for w, _ in rows],
        "keep": [w.keep_from for w, _ in rows],
        "cap": [g[2] for _, g in rows],
        "energy": [g[3] for _, g in rows],
        "prev_ts": [g[4] for _, g in rows],
        "lo": min(w.t0 for w in work),
        "hi": max(w.t1 for w in work),
        "max_w": MAX_GPU_POWER_W,
        "bits": REAL_THROTTLE_BITS,
        "idle": GPU_IDLE_BIT,
        "high": t.comm_traffic_pct,
        "step": dt.timedelta(seconds=SLICE_S),
        "origin": ORIGIN,
    }
    with bulk.cursor() as cur:
        cur.execute(_GPU_SQL, params)
        out = {}
        for row in cur.fetchall():
            job_id, gpu_id, *values = row
            totals = dict(zip(GPU_TOTAL_FIELDS, values, strict=True))
            # Django's connection hands jsonb back as text.
            if isinstance(totals["hist"], str):
                totals["hist"] = json.loads(totals["hist"])
            out[(job_id, gpu_id)] = totals
    return out


_JOB_SQL = """
WITH w AS (
    SELECT * FROM unnest(%(job)s::int[], %(node)s::int[], %(t0)s::timestamptz[],
                         %(t1)s::timestamptz[], %(keep)s::timestamptz[], %(interval)s::float8[],
                         %(cpus)s::float8[], %(multi)s::bool[])
        AS w(job_id, node_id, t0, t1, keep_from, interval_s, cpus, multi)
),
f AS (
    SELECT * FROM unnest(%(f_node)s::int[], %(f_nic)s::int[], %(f_cap)s::float8[])
        AS f(node_id, nic_id, cap)
),
nic AS MATERIALIZED (
    SELECT w.job_id, w.node_id, w.keep_from, w.multi, n.ts,
           100.0 * sum(GREATEST(n.rx_bytes_per_s, n.tx_bytes_per_s))
                 / NULLIF(sum(f.cap) FILTER (WHERE n.rx_bytes_per_s IS NOT NULL
                                              OR n.tx_bytes_per_s IS NOT NULL), 0) AS util,
           sum(COALESCE(n.rx_bytes_per_s, 0) + COALESCE(n.tx_bytes_per_s, 0)) * w.interval_s
               AS bytes
    FROM w
    JOIN f ON f.node_id = w.node_id
    CROSS JOIN LATERAL (
        SELECT * FROM telemetry_nicsample n
        WHERE n.nic_id = f.nic_id AND n.ts > w.t0 AND n.ts <= w.t1
          AND n.ts > %(lo)s AND n.ts <= %(hi)s
        OFFSET 0
    ) n
    GROUP BY w.job_id, w.node_id, w.keep_from, w.multi, w.interval_s, n.ts
),
node_slices AS (
    INSERT INTO findings_nodeslice AS o (job_id, node_id, bucket, nic_n, nic_sum)
    SELECT job_id, node_id, date_bin(%(step)s, ts, %(origin)s), count(util),
           COALESCE(sum(util), 0)
    FROM nic WHERE multi AND ts >= keep_from
    GROUP BY 1, 2, 3
    ON CONFLICT (job_id, node_id, bucket) DO UPDATE SET
        nic_n = o.nic_n + EXCLUDED.nic_n, nic_sum = o.nic_sum + EXCLUDED.nic_sum
),
busy AS MATERIALIZED (
    SELECT w.job_id, w.node_id, s.ts, avg(COALESCE(s.sm_active_pct, s.util_pct)) AS busy
    FROM w
    JOIN inventory_gpu g ON g.node_id = w.node_id
    CROSS JOIN LATERAL (
        SELECT * FROM telemetry_gpusample s
        WHERE s.gpu_id = g.id AND s.ts > w.t0 AND s.ts <= w.t1 AND s.job_id = w.job_id
          AND s.ts > %(lo)s AND s.ts <= %(hi)s
        OFFSET 0
    ) s
    GROUP BY 1, 2, 3
),
pts AS (
    -- Busy and NIC utilization of the same node sample, paired by grouping (the row
    -- estimates of CTEs are too poor to trust the planner with a join here).
    SELECT job_id, max(keep_from) AS keep_from, ts, max(x) AS x, max(y) AS y
    FROM (SELECT job_id, node_id, keep_from, ts, NULL::float8 AS x, util AS y FROM nic
          UNION ALL
          SELECT job_id, node_id, NULL, ts, busy, NULL FROM busy) u
    GROUP BY job_id, node_id, ts
    HAVING count(x) > 0 AND count(y) > 0
),
cpu AS MATERIALIZED (
    SELECT w.job_id, w.keep_from, j.ts, j.cpu_cores_used AS cores,
           j.cpu_cores_used / NULLIF(w.cpus, 0) AS frac
    FROM w
    CROSS JOIN LATERAL (
        SELECT * FROM telemetry_jobsample j
        WHERE j.job_id = w.job_id AND j.node_id = w.node_id AND j.ts > w.t0 AND j.ts <= w.t1
          AND j.ts > %(lo)s AND j.ts <= %(hi)s AND j.cpu_cores_used IS NOT NULL
        OFFSET 0
    ) j
),
slices AS (
    INSERT INTO findings_jobslice AS o (
        job_id, bucket, nic_n, nic_sum, nic_max, nic_high, nic_bytes,
        nc_n, nc_x, nc_y, nc_xx, nc_yy, nc_xy, cpu_n, cpu_frac_sum)
    SELECT job_id, bucket,
           COALESCE(max(nic_n), 0), COALESCE(max(nic_sum), 0), max(nic_max),
           COALESCE(max(nic_high), 0), COALESCE(max(nic_bytes), 0),
           COALESCE(max(nc_n), 0), COALESCE(max(nc_x), 0), COALESCE(max(nc_y), 0),
           COALESCE(max(nc_xx), 0), COALESCE(max(nc_yy), 0), COALESCE(max(nc_xy), 0),
           COALESCE(max(cpu_n), 0), COALESCE(max(cpu_frac_sum), 0)
    FROM (
        SELECT job_id, date_bin(%(step)s, ts, %(origin)s) AS bucket,
               count(util) AS nic_n, sum(util) AS nic_sum, max(util) AS nic_max,
               count(*) FILTER (WHERE util >= %(high)s) AS nic_high, sum(bytes) AS nic_bytes,
               NULL::int AS nc_n, NULL::float8 AS nc_x, NULL::float8 AS nc_y,
               NULL::float8 AS nc_xx, NULL::float8 AS nc_yy, NULL::float8 AS nc_xy,
               NULL::int AS cpu_n, NULL::float8 AS cpu_frac_sum
        FROM nic WHERE ts >= keep_from GROUP BY 1, 2
        UNION ALL
        SELECT job_id, date_bin(%(step)s, ts, %(origin)s), NULL, NULL, NULL, NULL, NULL,
               count(*), sum(x), sum(y), sum(x * x), sum(y * y), sum(x * y), NULL, NULL
        FROM pts WHERE ts >= keep_from GROUP BY 1, 2
        UNION ALL
        SELECT job_id, date_bin(%(step)s, ts, %(origin)s), NULL, NULL, NULL, NULL, NULL,
               NULL, NULL, NULL, NULL, NULL, NULL, count(frac), sum(frac)
        FROM cpu WHERE ts >= keep_from GROUP BY 1, 2
    ) parts
    GROUP BY 1, 2
    ON CONFLICT (job_id, bucket) DO UPDATE SET
        nic_n = o.nic_n + EXCLUDED.nic_n, nic_sum = o.nic_sum + EXCLUDED.nic_sum,
        nic_max = GREATEST(o.nic_max, EXCLUDED.nic_max),
        nic_high = o.nic_high + EXCLUDED.nic_high,
        nic_bytes = o.nic_bytes + EXCLUDED.nic_bytes,
        nc_n = o.nc_n + EXCLUDED.nc_n, nc_x = o.nc_x + EXCLUDED.nc_x,
        nc_y = o.nc_y + EXCLUDED.nc_y, nc_xx = o.nc_xx + EXCLUDED.nc_xx,
        nc_yy = o.nc_yy + EXCLUDED.nc_yy, nc_xy = o.nc_xy + EXCLUDED.nc_xy,
        cpu_n = o.cpu_n + EXCLUDED.cpu_n, cpu_frac_sum = o.cpu_frac_sum + EXCLUDED.cpu_frac_sum
)
SELECT job_id, max(nic_n), max(nic_sum), max(nic_max), max(net_bytes),
       max(cpu_ts_n), max(cpu_cores_sum)
FROM (
    SELECT job_id, count(util) AS nic_n, sum(util) AS nic_sum, max(util) AS nic_max,
           sum(bytes) AS net_bytes, NULL::bigint AS cpu_ts_n, NULL::float8 AS cpu_cores_sum
    FROM nic GROUP BY 1
    UNION ALL
    SELECT job_id, NULL, NULL, NULL, NULL, count(*), sum(cores)
    FROM (SELECT job_id, ts, sum(cores) AS cores FROM cpu GROUP BY 1, 2) per_ts
    GROUP BY 1
) parts
GROUP BY 1
"""

JOB_TOTAL_FIELDS = ("nic_n", "nic_sum", "nic_max", "net_bytes", "cpu_ts_n", "cpu_cores_sum")


def add_job_samples(work: list[Work], fabric: dict[int, list[tuple[int, float]]],
                    t: Thresholds) -> dict[int, dict]:
    """Upsert the job slices of the work's new samples; return {job: totals}.

    ``fabric`` maps a node to its fabric NICs (nic id, link capacity bytes/s): the
    InfiniBand / RoCE ports where the node has any, its Ethernet ports otherwise.
    """
    rows = [(w, node, interval) for w in work for node, interval in w.nodes.items()]
    if not rows:
        return {}
    nodes = {node for _, node, _ in rows}
    f = [(node, nic, cap) for node in nodes for nic, cap in fabric.get(node, ())]
    params = {
        "job": [w.job_id for w, _, _ in rows],
        "node": [node for _, node, _ in rows],
        "t0": [w.t0 for w, _, _ in rows],
        "t1": [w.t1 for w, _, _ in rows],
        "keep": [w.keep_from for w, _, _ in rows],
        "interval": [interval for _, _, interval in rows],
        "cpus": [w.cpus_per_node for w, _, _ in rows],
        "multi": [len(w.nodes) > 1 for w, _, _ in rows],
        "f_node": [x[0] for x in f],
        "f_nic": [x[1] for x in f],
        "f_cap": [x[2] for x in f],
        "lo": min(w.t0 for w in work),
        "hi": max(w.t1 for w in work),
        "high": t.comm_traffic_pct,
        "step": dt.timedelta(seconds=SLICE_S),
        "origin": ORIGIN,
    }
    with bulk.cursor() as cur:
        cur.execute(_JOB_SQL, params)
        return {
            job_id: dict(zip(JOB_TOTAL_FIELDS, values, strict=True))
            for job_id, *values in cur.fetchall()
        }


_FIRST_SQL = """
SELECT w.job_id, min(f.ts)
FROM unnest(%s::int[], %s::int[], %s::timestamptz[]) AS w(job_id, gpu_id, lo)
CROSS JOIN LATERAL (
    SELECT s.ts FROM telemetry_gpusample s
    WHERE s.gpu_id = w.gpu_id AND s.ts >= w.lo AND s.job_id = w.job_id
    ORDER BY s.ts LIMIT 1
) f
GROUP BY 1
"""


def first_samples(rows: list[tuple[int, int, dt.datetime]]) -> dict[int, dt.datetime]:
    """{job: time of its first GPU sample} for (job, gpu, not before) rows: where a job seen
    for the first time starts to have data (its start may predate our data by days)."""
    if not rows:
        return {}
    with bulk.cursor() as cur:
        cur.execute(_FIRST_SQL, [[r[0] for r in rows], [r[1] for r in rows],
                                 [r[2] for r in rows]])
        return dict(cur.fetchall())


def prune(before: dt.datetime, finished_jobs: list[int]) -> None:
    """Drop minutes no window reaches any more, and every minute of finalized jobs."""
    with bulk.cursor() as cur:
        for table in ("findings_gpuslice", "findings_jobslice", "findings_nodeslice"):
            cur.execute(f"DELETE FROM {table} WHERE bucket < %s", [before])
            if finished_jobs:
                cur.execute(f"DELETE FROM {table} WHERE job_id = ANY(%s)", [finished_jobs])
