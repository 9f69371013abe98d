"""A job's detection window: the numbers every detector decides on, read from the slices.

``read_windows`` adds up the per-minute slices of many jobs in two queries and reads the GPU
events of their windows in a third; the result is plain data (``JobWindow``), so a detector
is a function a test can call with numbers it wrote by hand.
"""

import datetime as dt
import math
from dataclasses import dataclass, field

from clusterui.fabric.metrics import ERROR_FIELDS
from clusterui.findings import bulk


@dataclass
class Correlation:
    """Sums for Pearson's r between busy (x) and traffic (y), sample by sample."""

    n: int = 0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    yy: float = 0.0
    xy: float = 0.0

    def add(self, other: "Correlation") -> None:
        self.n += other.n
        self.x += other.x
        self.y += other.y
        self.xx += other.xx
        self.yy += other.yy
        self.xy += other.xy

    def r(self, min_points: int) -> float | None:
        if self.n < min_points:
            return None
        cov = self.xy - self.x * self.y / self.n
        vx = self.xx - self.x * self.x / self.n
        vy = self.yy - self.y * self.y / self.n
        if vx <= 1e-9 * max(1.0, self.xx) or vy <= 1e-9 * max(1.0, self.yy):
            return None  # one side is flat: no correlation to speak of
        return max(-1.0, min(1.0, cov / math.sqrt(vx * vy)))


@dataclass
class Traffic:
    """A link's utilization over the window, in % of capacity."""

    samples: int = 0
    mean: float | None = None
    peak: float | None = None
    high_share: float | None = None  # share of samples at or above the comm threshold
    corr: Correlation = field(default_factory=Correlation)


@dataclass
class GpuWindow:
    gpu_id: int
    uuid: str
    index: int
    node: str
    model: str
    samples: int = 0
    util_mean: float | None = None  # NVML utilization
    sm_mean: float | None = None  # GPM SM activity, None when the GPU has no GPM
    busy_mean: float | None = None  # SM activity where reported, NVML utilization otherwise
    nvlink: Traffic = field(default_factory=Traffic)
    throttled_share: float = 0.0
    throttle_bits: int = 0
    throttled_clock_mhz: float | None = None
    free_clock_max_mhz: float | None = None
    wasted_gpu_hours: float = 0.0  # since the job started (from its efficiency)
    node_id: int | None = None

    @property
    def activity(self) -> float | None:
        """What the GPU did, as waste is judged: GPM SM activity where the GPU reported
        it, NVML utilization only where GPM is missing. NVML utilization is the share of
        time *a* kernel ran, however few SMs it used: a stream of tiny kernels reads 99 %."""
        return self.sm_mean if self.sm_mean is not None else self.util_mean


@dataclass
class GpuEventRow:
    ts: dt.datetime
    gpu_id: int
    node: str
    index: int
    kind: str
    code: int | None
    message: str


@dataclass
class JobWindow:
    job_id: int
    start: dt.datetime
    end: dt.datetime
    gpus_allocated: int
    nodes: int
    interval_s: float
    gpus: list[GpuWindow] = field(default_factory=list)  # GPUs with samples in the window
    nic: Traffic = field(default_factory=Traffic)
    cpu_frac_mean: float | None = None  # host CPU used / allocated, per node sample
    cpus_per_node: int | None = None
    events: list[GpuEventRow] = field(default_factory=list)
    gpu_hours_allocated: float = 0.0  # since the job started (from its efficiency)
    gpu_hours_used: float = 0.0
    gpu_hours_wasted: float = 0.0
    # The share of the job's run (from its start) its samples cover (``measured_pct``): the
    # GPU-hours figures above take the rest to be like it; severities count only this share.
    measured_share: float = 1.0
    # Highest SM clock each GPU model reached busy and unthrottled, cluster-wide, this pass.
    reference_clock_mhz: dict[str, float] = field(default_factory=dict)
    # Multi-node jobs: each node's fabric NIC traffic over the window, mean % of capacity.
    node_fabric: dict[str, float] = field(default_factory=dict)
    # Multi-node jobs: each node's fabric port error counter increases over the window,
    # summed over its ports ({node: {counter: increase}}; a node with none is absent).
    node_port_errors: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def span_s(self) -> float:
        return (self.end - self.start).total_seconds()

    def _mean(self, attr: str, gpus=None) -> float | None:
        values = [(getattr(g, attr), g.samples) for g in (gpus or self.gpus)
                  if getattr(g, attr) is not None]
        weight = sum(n for _, n in values)
        return sum(v * n for v, n in values) / weight if weight else None

    @property
    def util_mean(self) -> float | None:
        return self._mean("util_mean")

    @property
    def sm_mean(self) -> float | None:
        return self._mean("sm_mean")

    @property
    def busy_mean(self) -> float | None:
        return self._mean("busy_mean")

    @property
    def activity_mean(self) -> float | None:
        """The GPUs' ``activity`` (SM activity, NVML utilization where GPM is missing),
        sample-weighted."""
        return self._mean("activity")

    @property
    def busy_source(self) -> str:
        with_sm = sum(1 for g in self.gpus if g.sm_mean is not None)
        if with_sm == len(self.gpus):
            return "SM activity"
        return "NVML utilization" if with_sm == 0 else "SM activity / NVML utilization"

    @property
    def nvlink(self) -> Traffic:
        """The job's NVLink traffic, all its GPUs together."""
        out = Traffic()
        gpus = [g for g in self.gpus if g.nvlink.samples]
        out.samples = sum(g.nvlink.samples for g in gpus)
        if not out.samples:
            return out
        out.mean = sum(g.nvlink.mean * g.nvlink.samples for g in gpus) / out.samples
        out.peak = max(g.nvlink.peak for g in gpus if g.nvlink.peak is not None)
        out.high_share = sum(g.nvlink.high_share * g.nvlink.samples for g in gpus) / out.samples
        for g in gpus:
            out.corr.add(g.nvlink.corr)
        return out

    def min_gpu_samples(self) -> int:
        return min((g.samples for g in self.gpus), default=0)


@dataclass
class GpuInfo:
    gpu_id: int
    uuid: str
    index: int
    node_id: int
    node: str
    model: str
    memory_total_mib: int | None
    nvlink_bytes_per_s: float | None
    mig_share: float | None = None  # a MIG instance's share of its GPU; None: a whole GPU

    @property
    def mig(self) -> bool:
        return self.mig_share is not None

    @property
    def share(self) -> float:
        """How much of a GPU this is, as job efficiency counts it."""
        return self.mig_share if self.mig_share is not None else 1.0


_GPU_WINDOW_SQL = """
SELECT s.job_id, s.gpu_id, sum(samples), sum(util_sum), sum(util_n), sum(sm_sum), sum(sm_n),
       sum(busy_sum), sum(busy_n), sum(nvlink_sum), sum(nvlink_n), max(nvlink_max),
       sum(nvlink_high), sum(nvc_n), sum(nvc_x), sum(nvc_y), sum(nvc_xx), sum(nvc_yy),
       sum(nvc_xy), sum(throttled), bit_or(throttle_bits), sum(throttled_clock_sum),
       sum(throttled_clock_n), max(free_clock_max)
FROM unnest(%s::int[], %s::timestamptz[], %s::timestamptz[]) AS w(job_id, t0, t1)
CROSS JOIN LATERAL (
    SELECT * FROM findings_gpuslice s
    WHERE s.job_id = w.job_id AND s.bucket >= w.t0 AND s.bucket <= w.t1
    OFFSET 0
) s
GROUP BY 1, 2
"""

_JOB_WINDOW_SQL = """
SELECT s.job_id, sum(nic_n), sum(nic_sum), max(nic_max), sum(nic_high), sum(nc_n), sum(nc_x),
       sum(nc_y), sum(nc_xx), sum(nc_yy), sum(nc_xy), sum(cpu_n), sum(cpu_frac_sum)
FROM unnest(%s::int[], %s::timestamptz[], %s::timestamptz[]) AS w(job_id, t0, t1)
CROSS JOIN LATERAL (
    SELECT * FROM findings_jobslice s
    WHERE s.job_id = w.job_id AND s.bucket >= w.t0 AND s.bucket <= w.t1
    OFFSET 0
) s
GROUP BY 1
"""

_NODE_WINDOW_SQL = """
SELECT s.job_id, s.node_id, sum(nic_sum) / NULLIF(sum(nic_n), 0)
FROM unnest(%s::int[], %s::timestamptz[], %s::timestamptz[]) AS w(job_id, t0, t1)
CROSS JOIN LATERAL (
    SELECT * FROM findings_nodeslice s
    WHERE s.job_id = w.job_id AND s.bucket >= w.t0 AND s.bucket <= w.t1
    OFFSET 0
) s
GROUP BY 1, 2
"""

# The error increases that fabric/store.py wrote (only samples where a counter rose) on
# the ports of each (job, node) pair, over the job's window.
_NODE_ERRORS_SQL = f"""
SELECT w.job_id, w.node_id, {", ".join(f"sum(e.{f})" for f in ERROR_FIELDS)}
FROM unnest(%s::int[], %s::int[], %s::timestamptz[], %s::timestamptz[])
    AS w(job_id, node_id, t0, t1)
JOIN inventory_nic n ON n.node_id = w.node_id
JOIN fabric_porterrors e ON e.nic_id = n.id AND e.ts >= w.t0 AND e.ts <= w.t1
GROUP BY 1, 2
"""

_EVENTS_SQL = """
SELECT w.job_id, e.ts, e.gpu_id, e.kind, e.code, e.message
FROM unnest(%s::int[], %s::int[], %s::timestamptz[], %s::timestamptz[])
    AS w(job_id, gpu_id, t0, t1)
JOIN telemetry_gpuevent e ON e.gpu_id = w.gpu_id AND e.ts >= w.t0 AND e.ts <= w.t1
ORDER BY e.ts
"""


def _div(a, b):
    return a / b if b else None


def read_windows(windows: list[JobWindow], gpus_of: dict[int, list[GpuInfo]],
                 event_start: dict[int, dt.datetime]) -> None:
    """Fill ``windows`` (start and end set) from their slices and events, in place."""
    if not windows:
        return
    by_id = {w.job_id: w for w in windows}
    ids = [w.job_id for w in windows]
    starts = [w.start for w in windows]
    ends = [w.end for w in windows]
    info = {(job, g.gpu_id): g for job, gs in gpus_of.items() for g in gs}
    with bulk.cursor() as cur:
        cur.execute(_GPU_WINDOW_SQL, [ids, starts, ends])
        for (job_id, gpu_id, n, util_s, util_n, sm_s, sm_n, busy_s, busy_n, nvl_s, nvl_n,
             nvl_max, nvl_high, c_n, c_x, c_y, c_xx, c_yy, c_xy, thr, bits, thr_clock_s,
             thr_clock_n, free_max) in cur.fetchall():
            g = info.get((job_id, gpu_id))
            if g is None or not n:
                continue
            gw = GpuWindow(
                gpu_id=gpu_id, uuid=g.uuid, index=g.index, node=g.node, model=g.model,
                samples=n, util_mean=_div(util_s, util_n), sm_mean=_div(sm_s, sm_n),
                busy_mean=_div(busy_s, busy_n), throttled_share=thr / n,
                throttle_bits=bits or 0, throttled_clock_mhz=_div(thr_clock_s, thr_clock_n),
                free_clock_max_mhz=free_max, node_id=g.node_id,
            )
            gw.nvlink = Traffic(
                samples=nvl_n, mean=_div(nvl_s, nvl_n), peak=nvl_max,
                high_share=_div(nvl_high, nvl_n),
                corr=Correlation(c_n, c_x, c_y, c_xx, c_yy, c_xy),
            )
            by_id[job_id].gpus.append(gw)
        cur.execute(_JOB_WINDOW_SQL, [ids, starts, ends])
        for (job_id, nic_n, nic_s, nic_max, nic_high, c_n, c_x, c_y, c_xx, c_yy, c_xy, cpu_n,
             cpu_s) in cur.fetchall():
            w = by_id[job_id]
            w.nic = Traffic(samples=nic_n, mean=_div(nic_s, nic_n), peak=nic_max,
                            high_share=_div(nic_high, nic_n),
                            corr=Correlation(c_n, c_x, c_y, c_xx, c_yy, c_xy))
            w.cpu_frac_mean = _div(cpu_s, cpu_n)
        ev_rows = [(job, g.gpu_id, event_start[job], by_id[job].end)
                   for job in ids for g in gpus_of.get(job, ())]
        if ev_rows:
            cur.execute(_EVENTS_SQL, [[r[0] for r in ev_rows], [r[1] for r in ev_rows],
                                      [r[2] for r in ev_rows], [r[3] for r in ev_rows]])
            for job_id, ts, gpu_id, kind, code, message in cur.fetchall():
                g = info[(job_id, gpu_id)]
                by_id[job_id].events.append(GpuEventRow(ts, gpu_id, g.node, g.index, kind,
                                                        code, message))
        multi = [w for w in windows if w.nodes > 1]
        if multi:
            names = {g.node_id: g.node for gs in gpus_of.values() for g in gs}
            cur.execute(_NODE_WINDOW_SQL, [[w.job_id for w in multi], [w.start for w in multi],
                                           [w.end for w in multi]])
            for job_id, node_id, fabric in cur.fetchall():
                if fabric is not None and node_id in names:
                    by_id[job_id].node_fabric[names[node_id]] = fabric
            pairs = [(w, node_id) for w in multi
                     for node_id in sorted({g.node_id for g in gpus_of.get(w.job_id, ())})]
            cur.execute(_NODE_ERRORS_SQL, [[w.job_id for w, _ in pairs], [n for _, n in pairs],
                                           [w.start for w, _ in pairs],
                                           [w.end for w, _ in pairs]])
            for job_id, node_id, *sums in cur.fetchall():
                errors = {f: int(v) for f, v in zip(ERROR_FIELDS, sums, strict=True) if v}
                if errors and node_id in names:
                    by_id[job_id].node_port_errors[names[node_id]] = errors
    for w in windows:
        w.gpus.sort(key=lambda g: (g.node, g.index))
