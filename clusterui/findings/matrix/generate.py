"""From cases to contract-1 batches: every case at every sampling rate, for every delivery
shape, as a collector would have sampled and flushed it.

Each (shape, rate, case) is one job on nodes of its own, named so that a reader can tell
what it is (``mx-<run>-lv10-idle-gpus-0``: live, 10 s, the idle-gpus case, node rank 0).
A case's signal is made second by second (``cases``); a sample at ``r`` seconds reports
the mean of its interval for activities, rates and power, and the value at its end for
clocks, clock-event reasons and memory, as NVML and the collector do. The energy counter is
the running sum of the power. A node flushes a batch every minute of data.

The nodes of multi-node jobs also report their InfiniBand port's health as
``collectors/fabric.py`` does: link state, width and rate, and the increase of its error
counters over each sample (symbol errors from the case's signal; a tenth of them dropped as
receive errors; a link error recovery a minute while it errs). Ethernet rows carry none.
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import chain, repeat

import numpy as np

from clusterui.findings.matrix.cases import (
    CASES,
    CPUS_PER_GPU,
    ETH_BYTES_PER_S,
    IB_BYTES_PER_S,
    Case,
)

RATES = (1, 2, 10, 30, 60)
SHAPES = ("live", "backlog", "out-of-order", "spool-replay")
SHAPE_TAGS = {"live": "lv", "backlog": "bl", "out-of-order": "oo", "spool-replay": "sp"}
FLUSH_S = 60
RUN_S = 40 * 60  # a job's data in the live, backlog and out-of-order shapes
# The spool-replay shape: live for 20 minutes, then one node of every job is cut off for two
# hours (its collector spools), then it replays the spool while the stream goes on.
SPOOL_BEFORE_S = 20 * 60
SPOOL_GAP_S = 2 * 3600
SPOOL_AFTER_S = 15 * 60
NIC_FIELDS = ["ts", "nic", "rx_bytes_per_s", "tx_bytes_per_s"]
FABRIC_FIELDS = ["link_state", "phys_state", "link_width", "link_gbps", "symbol_error",
                 "port_rcv_errors", "link_error_recovery"]
IB_LINK = [4, 5, 4, IB_BYTES_PER_S * 8 / 1e9]  # ACTIVE, LinkUp, 4X, 400 Gb/s
GPU_FIELDS = ["ts", "gpu", "job", "util_pct", "mem_util_pct", "mem_used_mib", "power_w",
              "temp_c", "sm_clock_mhz", "sm_active_pct", "tensor_active_pct",
              "dram_active_pct", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s",
              "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "throttle_reasons", "energy_j"]


@dataclass
class NodeFeed:
    """One node's batches in data order; ``times[i]`` is where batch i's data ends."""

    name: str
    job_id: str
    rank: int
    batches: list[dict] = field(default_factory=list)
    times: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class MatrixJob:
    shape: str
    rate: int
    case: Case
    external_id: str
    nodes: tuple[str, ...]


@dataclass
class Plan:
    run: str
    cluster: str
    account: str
    end: float  # where every job's data ends
    jobs: list[MatrixJob] = field(default_factory=list)
    feeds: dict[str, list[NodeFeed]] = field(default_factory=dict)  # per shape

    def cut(self) -> tuple[float, float]:
        """The data times (start, end] the spool-replay shape's cut-off nodes hold back."""
        start = self.end - SPOOL_AFTER_S - SPOOL_GAP_S
        return start, start + SPOOL_GAP_S


def duration_s(shape: str, case: Case) -> float:
    if case.minutes is not None:
        return case.minutes * 60
    return SPOOL_BEFORE_S + SPOOL_GAP_S + SPOOL_AFTER_S if shape == "spool-replay" else RUN_S


def build(*, run: str, cluster: str, end: float, seed: int = 7,
          shapes=SHAPES, rates=RATES, cases=CASES) -> Plan:
    plan = Plan(run=run, cluster=cluster, account=f"matrix-{run}",
                end=float(int(end) // FLUSH_S * FLUSH_S))
    for shape in shapes:
        feeds = plan.feeds.setdefault(shape, [])
        for rate in rates:
            for case in cases:
                prefix = f"mx-{run}-{SHAPE_TAGS[shape]}{rate}-{case.name}"
                job = MatrixJob(shape, rate, case, external_id=prefix,
                                nodes=tuple(f"{prefix}-{r}" for r in range(case.nodes)))
                plan.jobs.append(job)
                rng = np.random.default_rng(
                    [seed, zlib.crc32(prefix.removeprefix(f"mx-{run}-").encode())])
                for rank, node in enumerate(job.nodes):
                    feeds.append(_feed(plan, job, node, rank, rng))
    return plan


def _rounded(values: np.ndarray, digits: int | None) -> list:
    """``[round(float(v), digits) for v in values]`` (nested lists for a 2-D array), the
    same values at numpy's speed. ``rint(v * 10**digits) / 10**digits`` is Python's
    correctly rounded result wherever the scaled value is not within the product's rounding
    error of a half (the division then gives the double nearest the same decimal); the few
    that are near a half are rounded by Python itself. ``None`` digits: ints, as
    ``round(v)`` gives (no product, so no fix-up)."""
    values = np.asarray(values, dtype=np.float64)
    if digits is None:  # rint is exact, and rounds half to even as round does
        return np.rint(values).astype(np.int64).tolist()
    scale = 10.0 ** digits
    scaled = values * scale  # within half an ulp (|scaled| * 2**-53) of the exact product
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) <= np.abs(scaled) * 2.0 ** -50
    out = (np.rint(scaled) / scale).tolist()
    if near_half.any():
        flat, rows = values.reshape(-1), None
        for at in np.flatnonzero(near_half).tolist():
            exact = round(float(flat[at]), digits)
            if values.ndim == 1:
                out[at] = exact
            else:
                rows = rows or values.shape[1]
                out[at // rows][at % rows] = exact
    return out


def _feed(plan: Plan, job: MatrixJob, node: str, rank: int, rng) -> NodeFeed:
    case, rate = job.case, job.rate
    seconds = int(duration_s(job.shape, case))
    start = plan.end - seconds
    sig = case.signal(rng, seconds, case.gpus, case, rank)
    g = case.gpu
    n = seconds // rate
    ends = np.arange(1, n + 1) * rate  # a sample at start + ends[k] covers (ends[k] - rate, ends[k]]

    def mean(a):  # per interval, last axis
        return a[..., : n * rate].reshape(*a.shape[:-1], n, rate).mean(axis=-1)

    def at_end(a):
        return a[..., ends - 1]

    power_s = 60.0 + (g.power_limit_w - 60.0) * sig.sm / 100.0
    energy = 1.0e7 * (1 + rank) + np.cumsum(power_s, axis=-1)
    util, sm = mean(sig.util), mean(sig.sm)
    power, nvlink = mean(power_s), mean(sig.nvlink)
    fabric, cpu = mean(sig.fabric), mean(sig.cpu)
    clock, throttle, joules = at_end(sig.clock), at_end(sig.throttle), at_end(energy)
    mem_used = np.where(at_end(sig.sm) > 5, 0.55 * g.memory_mib, 600.0)
    port_errors = None
    if case.nodes > 1:
        # Cumulative counters at each sample's end, differenced: what the collector sends.
        sym = np.cumsum(sig.port_errors) if sig.port_errors is not None else np.zeros(seconds)
        erring = sig.port_errors is not None and sig.port_errors.any()
        cumulative = np.stack([sym, sym // 10,
                               np.arange(1, seconds + 1) // 60 if erring else np.zeros(seconds)])
        at = np.concatenate([np.zeros((3, 1)), at_end(cumulative)], axis=1)
        port_errors = np.diff(at, axis=1).astype(np.int64)
    cpus = case.gpus * CPUS_PER_GPU
    times = start + ends
    feed = NodeFeed(node, job.external_id, rank)
    gpus = [{"uuid": f"GPU-{node}-{i}", "index": i, "model": g.model,
             "memory_total_mib": g.memory_mib, "power_limit_w": g.power_limit_w,
             "pci_bus_id": f"00000000:{i + 24:02X}:00.0",
             "nvlink_bytes_per_s": g.nvlink_bytes_per_s} for i in range(case.gpus)]
    nics = [{"name": "mlx5_0:1", "kind": "infiniband", "link_bytes_per_s": IB_BYTES_PER_S},
            {"name": "eth0", "kind": "ethernet", "link_bytes_per_s": ETH_BYTES_PER_S}]
    meta = {"id": job.external_id, "scheduler": "slurm", "user": "matrix",
            "name": case.name, "account": plan.account, "partition": "gpu",
            "started_at": float(start), "ended_at": None, "gpus": list(range(case.gpus)),
            "cpus": cpus}
    xid = None if case.xid_after_s is None or rank else start + case.xid_after_s
    # Each column as Python lists, rounded once per array (``_rounded``: exactly Python's
    # round), so that a row is only list lookups: per value, numpy's scalar access and
    # Python's round took most of a plan's minute of building.
    busy = sm
    nvl = ([[None] * n] * case.gpus if g.nvlink_bytes_per_s is None
           else _rounded(nvlink * g.nvlink_bytes_per_s, None))
    gpm = ((_rounded(busy, 2), _rounded(busy * 0.5, 2), _rounded(busy * 0.4, 2)) if g.gpm
           else ([[None] * n] * case.gpus,) * 3)
    columns = (util.tolist(), _rounded(busy * 0.4, 1), _rounded(mem_used, None),
               _rounded(power, 1), _rounded(35 + 45 * busy / 100, 1), _rounded(clock, None),
               *gpm, nvl, throttle.astype(np.int64).tolist(), _rounded(joules, 3))
    (util_c, mem_util_c, mem_used_c, power_c, temp_c, clock_c, sm_c, tensor_c, dram_c, nvl_c,
     throttle_c, joules_c) = columns
    ib = _rounded(fabric * IB_BYTES_PER_S, None)
    cpu_c = _rounded(cpu * cpus, 2)
    times_c = times.tolist()
    # Every row of the feed, made once, column-wise (zip runs in C); each batch then takes
    # the rows of its minute: the GPUs' rows sample by sample, then the ports', the job's.
    ext = job.external_id
    gpu_rows = [list(map(list, zip(
        times_c, repeat(i), repeat(ext), util_c[i], mem_util_c[i], mem_used_c[i], power_c[i],
        temp_c[i], clock_c[i], sm_c[i], tensor_c[i], dram_c[i], repeat(100_000_000),
        repeat(120_000_000), nvl_c[i], nvl_c[i], throttle_c[i], joules_c[i])))
        for i in range(case.gpus)]
    if port_errors is None:
        ib_rows = list(map(list, zip(times_c, repeat(0), ib, ib)))
        eth_rows = [[ts, 1, 1_000_000, 1_000_000] for ts in times_c]
    else:
        ib_rows = [[ts, 0, v, v, *IB_LINK, *errors]
                   for ts, v, errors in zip(times_c, ib, port_errors.T.tolist(), strict=True)]
        eth_rows = [[ts, 1, 1_000_000, 1_000_000, *[None] * len(FABRIC_FIELDS)]
                    for ts in times_c]
    job_all = list(map(list, zip(times_c, repeat(ext), cpu_c, repeat(2 * 10**10))))
    seq, k = 0, 0
    for flush_end in np.arange(start + FLUSH_S, plan.end + 1e-6, FLUSH_S):
        upto = bisect_right(times_c, flush_end, lo=k, hi=n)
        rows = list(chain.from_iterable(zip(*(r[k:upto] for r in gpu_rows), strict=True)))
        nic_rows = list(chain.from_iterable(zip(ib_rows[k:upto], eth_rows[k:upto], strict=True)))
        job_rows = job_all[k:upto]
        k = upto
        if not rows:
            continue
        events = []
        if xid is not None and flush_end - FLUSH_S < xid <= flush_end:
            events.append({"ts": float(xid), "gpu": 0, "kind": "xid", "code": 79,
                           "message": "GPU has fallen off the bus (scenario matrix)"})
        seq += 1
        feed.batches.append({
            "schema": 1, "cluster": plan.cluster, "node": node,
            "agent": {"version": "scenario-matrix", "boot_id": f"{node}-boot", "seq": seq,
                      "spool_dropped": 0, "simulated": True},
            "sent_at": float(flush_end), "interval_s": rate, "gpus": gpus, "nics": nics,
            "jobs": [meta],
            "gpu_samples": {"fields": GPU_FIELDS, "rows": rows},
            "nic_samples": {"fields": NIC_FIELDS + (FABRIC_FIELDS if port_errors is not None
                                                    else []), "rows": nic_rows},
            "job_samples": {"fields": ["ts", "job", "cpu_cores_used", "host_mem_used_bytes"],
                            "rows": job_rows},
            "events": events,
        })
        feed.times.append(float(flush_end))
    return feed
