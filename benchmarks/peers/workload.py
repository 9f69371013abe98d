"""A simulated but realistic mix of GPUs, as numpy arrays (seeded): every value at the
collector's own resolution, as ``tests/telemetry/test_tier_precision.py`` states it (two
decimals for utilisation, whole mW for power, whole MHz and °C, byte rates as a counter's
increase over a measured interval, the energy counter in mJ / 1000).

Each node runs one of four profiles on all its GPUs, in turn by node: ``busy`` (a training
job near 100 %), ``idle`` (no job: 0 %, the idle clock-event bit), ``spiky`` (a job whose
utilisation jumps between phases every one to five minutes) and ``comm`` (a
communication-bound job: 30-50 % busy, NVLink near its capacity, utilisation dips where
traffic peaks). Every fifth node has no GPM (pre-Hopper): its SM, tensor and DRAM activity
are null throughout. Rates and GPM metrics are null in each GPU's first sample, as the
collector sends them (a rate needs two readings). Simulated data: these are not
measurements of real GPUs.

With ``nics_per_node``, each node also has that many InfiniBand ports (NDR, 400 Gb/s),
sampled with its GPUs, as ``collectors/nic.py`` reads them: ``port_rcv_data`` and
``port_xmit_data`` count 4-byte words, so each byte rate is a whole number of words times 4
over the measured interval (null in the first sample). Their traffic follows the node's
profile: ``comm`` near two thirds of the link, ``busy`` gradient all-reduce bursts, ``spiky``
in phases, ``idle`` the subnet manager's trickle. Each row also carries the fabric fields the
collector sends for an InfiniBand port (``collectors/fabric.py``): the link active at 4X
400 Gb/s, no error counter rising (the first reading's increases unknown), the RoCE
counters null.
"""

from dataclasses import dataclass, field

import numpy as np

from clusterui.fabric.metrics import ERROR_FIELDS
from clusterui.telemetry.metrics import GPU_METRIC_NAMES, GPU_METRICS, NIC_METRIC_NAMES
from collectors.agent import NIC_FIELDS

PROFILES = ("busy", "idle", "spiky", "comm")
INTEGER = frozenset(m.name for m in GPU_METRICS if m.integer)
GPM = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")
RATES = tuple(m for m in GPU_METRIC_NAMES if m.endswith("_bytes_per_s"))
IB_LINK_BYTES_PER_S = 50_000_000_000  # NDR: 400 Gb/s, as the collector reports the port
# An active, healthy 4X NDR port (the fabric fields other than these are null).
IB_LINK = {"link_state": 4, "phys_state": 5, "link_width": 4, "link_gbps": 400.0,
           "counters_saturated": 0}


@dataclass
class Workload:
    """``nodes`` x ``gpus_per_node`` GPUs, ``n`` samples each. Arrays are (GPU, sample),
    GPU ``g`` being node ``g // gpus_per_node``'s GPU ``g % gpus_per_node``; ``values[m]``
    is float64 with NaN for null, int64 for the integer metrics (never null here)."""

    nodes: int
    gpus_per_node: int
    interval_s: float
    start_ms: int
    ts_ms: np.ndarray  # (gpus, n) int64 ms since the epoch
    values: dict[str, np.ndarray] = field(default_factory=dict)
    profiles: list[str] = field(default_factory=list)  # per node
    nics_per_node: int = 0
    # (NIC, sample) float64, NaN for null: NIC ``k`` is node ``k // nics_per_node``'s port
    # ``k % nics_per_node``; its samples have its node's GPUs' timestamps.
    nic_values: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def n(self) -> int:
        return self.ts_ms.shape[1]

    @property
    def samples(self) -> int:
        return self.ts_ms.size

    @property
    def nics(self) -> int:
        return self.nodes * self.nics_per_node

    @property
    def nic_ts_ms(self) -> np.ndarray:
        """(NIC, sample) int64 ms: each port is read with its node's GPUs."""
        return np.repeat(self.ts_ms[::self.gpus_per_node], self.nics_per_node, axis=0)

    @property
    def nic_samples(self) -> int:
        return self.nics * self.n

    @staticmethod
    def nic_name(port: int) -> str:
        return f"mlx5_{port}:1"

    def node_name(self, node: int) -> str:
        return f"peer{node:03d}"

    def job_id(self, node: int) -> str | None:
        """The scheduler's id of the node's job, None on an idle node."""
        return None if self.profiles[node] == "idle" else str(800_000 + node)


def _decimals(x, digits=2):
    return np.rint(x * 10**digits) / 10**digits


def _pct(x):
    return _decimals(np.clip(x, 0, 100))


def generate(nodes: int, gpus_per_node: int, hours: float, interval_s: float, start_ms: int,
             seed: int = 17, nics_per_node: int = 0) -> Workload:
    rng = np.random.default_rng(seed)
    n = int(round(hours * 3600 / interval_s))
    g = nodes * gpus_per_node
    step = int(interval_s * 1000)
    # A node samples all its GPUs at once, a few ms after each tick (the collector's work).
    jitter = rng.integers(0, 40, (nodes, n))
    ts = start_ms + np.arange(n) * step + np.repeat(jitter, gpus_per_node, axis=0)
    profiles = [PROFILES[i % len(PROFILES)] for i in range(nodes)]
    prof = np.repeat(np.array(profiles), gpus_per_node)[:, None]
    t = np.arange(n)[None, :]

    busy = np.clip(rng.normal(97, 2.5, (g, n)), 0, 100)
    idle = np.where(rng.random((g, n)) < 0.01, rng.uniform(0, 3, (g, n)), 0.0)
    period = rng.integers(6, 31, (g, 1))  # one to five minutes at 10 s
    phase = (t // period) % 2 == 0
    spiky = np.where(phase, rng.normal(90, 6, (g, n)), rng.normal(8, 5, (g, n)))
    traffic = np.clip(rng.normal(0.85, 0.1, (g, n)), 0, 1)  # share of NVLink capacity
    comm = 75 - 40 * traffic + rng.normal(0, 4, (g, n))
    util = np.select([prof == "busy", prof == "idle", prof == "spiky"], [busy, idle, spiky], comm)
    util = _pct(util)
    working = util / 100

    v: dict[str, np.ndarray] = {"util_pct": util}
    v["mem_util_pct"] = _pct(working * 55 + rng.normal(0, 3, (g, n)) * (working > 0))
    base_mem = np.where(prof == "idle", 0, rng.integers(20_000, 78_000, (g, 1)))
    v["mem_used_mib"] = (base_mem + (base_mem > 0) * rng.integers(-512, 512, (g, n))
                         ).astype(np.int64)
    power_mw = 62_000 + working * 610_000 + rng.normal(0, 9_000, (g, n))
    v["power_w"] = np.clip(np.rint(power_mw), 50_000, 700_000) / 1000.0
    temp = 31 + working * 45 + rng.normal(0, 1.2, (g, n))
    v["temp_c"] = np.rint(temp)
    clock = np.where(util > 0, 1980 - rng.choice([0, 0, 0, 15, 30, 45, 90], (g, n)), 345)
    v["sm_clock_mhz"] = clock.astype(np.float64)
    v["sm_active_pct"] = _pct(util * 0.82 + rng.normal(0, 2, (g, n)) * (util > 0))
    v["tensor_active_pct"] = _pct(util * 0.55 + rng.normal(0, 2, (g, n)) * (util > 0))
    v["dram_active_pct"] = _pct(util * 0.35 + rng.normal(0, 2, (g, n)) * (util > 0))
    # Byte rates: a counter's increase (whole bytes for PCIe, KiB for NVLink) over the time
    # between two readings, which is never exactly the interval.
    elapsed = interval_s + rng.normal(0, 0.004, (g, n))
    pcie_peak = np.where(prof == "idle", 1e5, 8e9)
    for name in ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"):
        delta = np.rint(rng.uniform(0, 1, (g, n)) * pcie_peak * working.clip(0.02) * interval_s)
        v[name] = delta / elapsed
    nvlink_share = np.where(prof == "comm", traffic, working * 0.15)
    for name in ("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s"):
        kib = np.rint(450e9 * nvlink_share * rng.uniform(0.9, 1.0, (g, n)) * interval_s / 1024)
        v[name] = kib * 1024 / elapsed
    reasons = np.where(util == 0, 0x1, rng.choice([0, 0, 0, 0, 0x4, 0x20], (g, n)))
    v["throttle_reasons"] = reasons.astype(np.int64)
    energy_mj = rng.integers(10**9, 10**11, (g, 1)) + np.cumsum(
        np.rint(v["power_w"] * 1000 * interval_s), axis=1)
    v["energy_j"] = energy_mj / 1000.0
    for name in (*RATES, *GPM):
        v[name][:, 0] = np.nan
    no_gpm = np.repeat(np.arange(nodes) % 5 == 4, gpus_per_node)
    for name in GPM:
        v[name][no_gpm] = np.nan
    assert set(v) == set(GPU_METRIC_NAMES)
    # The ports' draws come after every GPU draw: the GPUs' values are the same with or
    # without them.
    nic_values = _nic_values(rng, profiles, nics_per_node, n, interval_s) if nics_per_node \
        else {}
    return Workload(nodes=nodes, gpus_per_node=gpus_per_node, interval_s=interval_s,
                    start_ms=start_ms, ts_ms=ts.astype(np.int64), values=v, profiles=profiles,
                    nics_per_node=nics_per_node, nic_values=nic_values)


def _nic_values(rng, profiles: list[str], per_node: int, n: int, interval_s: float
                ) -> dict[str, np.ndarray]:
    k = len(profiles) * per_node
    prof = np.repeat(np.array(profiles), per_node)[:, None]
    t = np.arange(n)[None, :]
    comm = np.clip(rng.normal(0.65, 0.12, (k, n)), 0, 0.95)  # share of the link
    bursts = rng.random((k, n)) < 0.3  # an all-reduce of gradients in the interval
    busy = np.where(bursts, rng.uniform(0.05, 0.35, (k, n)), rng.uniform(0, 0.01, (k, n)))
    period = rng.integers(6, 31, (k, 1))
    spiky = np.where((t // period) % 2 == 0, rng.uniform(0.1, 0.4, (k, n)),
                     rng.uniform(0, 0.005, (k, n)))
    idle = rng.uniform(0, 4e-7, (k, n))  # a few kB/s of management traffic
    share = np.select([prof == "comm", prof == "busy", prof == "spiky"], [comm, busy, spiky],
                      idle)
    elapsed = interval_s + rng.normal(0, 0.004, (k, n))  # one reading for both counters
    out = {}
    for name in NIC_METRIC_NAMES:
        words = np.rint(share * rng.uniform(0.9, 1.0, (k, n)) * IB_LINK_BYTES_PER_S
                        * interval_s / 4)
        out[name] = words * 4 / elapsed
        out[name][:, 0] = np.nan
    return out


def batches(w: Workload, cluster: str = "peers"):
    """Contract-1 batches as the collector sends them (``docs/protocol.md``): one per node
    and tick (``flush`` = ``interval``, its default), each node's job listed in every
    batch. Yields them node-interleaved, in time order."""
    fields = ["ts", "gpu", "job", *GPU_METRIC_NAMES]
    gpn = w.gpus_per_node
    cols = {m: w.values[m].astype(object) for m in GPU_METRIC_NAMES}
    for m in GPU_METRIC_NAMES:
        if m in INTEGER:
            cols[m] = np.vectorize(int, otypes=[object])(w.values[m])
        else:
            c = w.values[m].astype(object)
            c[np.isnan(w.values[m])] = None
            cols[m] = c
    started = w.start_ms / 1000 - 600
    npn = w.nics_per_node
    nic_cols = {}
    for m in NIC_METRIC_NAMES:
        c = w.nic_values[m].astype(object) if npn else None
        if npn:
            c[np.isnan(w.nic_values[m])] = None
        nic_cols[m] = c
    fabric = [IB_LINK.get(f) for f in NIC_FIELDS[4:]]
    no_errors = [0 if f in ERROR_FIELDS else v for f, v in zip(NIC_FIELDS[4:], fabric,
                                                                strict=True)]
    for k in range(w.n):
        for node in range(w.nodes):
            job = w.job_id(node)
            ts = w.ts_ms[node * gpn, k] / 1000
            rows = [[ts, i, job, *(cols[m][node * gpn + i, k] for m in GPU_METRIC_NAMES)]
                    for i in range(gpn)]
            nic_rows = [[ts, i, *(nic_cols[m][node * npn + i, k] for m in NIC_METRIC_NAMES),
                         *(fabric if k == 0 else no_errors)] for i in range(npn)]
            name = w.node_name(node)
            yield {
                "schema": 1, "cluster": cluster, "node": name,
                "agent": {"version": "bench", "boot_id": "peers", "seq": k + 1},
                "sent_at": ts + 0.2, "interval_s": w.interval_s,
                "gpus": [{"uuid": f"GPU-{name}-{i}", "index": i,
                          "model": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                          "power_limit_w": 700.0, "pci_bus_id": f"00000000:{i + 16:02X}:00.0",
                          "nvlink_bytes_per_s": 450e9} for i in range(gpn)],
                "nics": [{"name": w.nic_name(i), "kind": "infiniband",
                          "link_bytes_per_s": IB_LINK_BYTES_PER_S} for i in range(npn)],
                "jobs": [] if job is None else [
                    {"id": job, "scheduler": "slurm", "user": "bench", "name": w.profiles[node],
                     "account": "bench", "partition": "gpu", "started_at": started,
                     "ended_at": None, "gpus": list(range(gpn)), "cpus": 32}],
                "gpu_samples": {"fields": fields, "rows": rows},
                "nic_samples": {"fields": list(NIC_FIELDS), "rows": nic_rows},
                "job_samples": {"fields": ["ts", "job", "cpu_cores_used",
                                           "host_mem_used_bytes"], "rows": []},
                "events": [],
            }
