"""A simulated GPU node: its GPUs' state for `SimNVML`, and the kernel's files for the rest.

`SimNode.advance(t)` moves the node's model to time `t` (virtual or wall clock, never
backwards) and rewrites, under `root_dir`, the files the real collector reads:

- ``sys/class/infiniband/mlx5_<i>/ports/1/`` (counters in octets/4, rate, state, link_layer,
  error counters, RoCE hw_counters; ``link_faults`` degrade a link: ``sim/fabric.py``)
- ``sys/class/net/{eth0,lo}/`` (statistics, speed; only eth0 has a ``device``)
- ``proc/<pid>/{cgroup,environ,comm}`` for each job process on a GPU
- the job's cgroup (Slurm cgroup v2 or v1, or a Kubernetes pod) with cpu and memory use
- ``run/clusterui-jobs/<gpu index>`` as the Slurm prolog writes it (Slurm layouts only)

Everything is a function of (seed, t): two nodes built alike and advanced through the same
times hold identical counters and files.
"""

from __future__ import annotations

import math
import os
import shutil
import uuid as uuidlib
import zlib
from dataclasses import dataclass, field

from collectors.sim import fabric as simfabric
from collectors.sim.hardware import (
    ETH_BYTES_PER_S,
    ETH_SPEED_MBPS,
    IB_BYTES_PER_S,
    IB_RATE_GBPS,
    MODELS,
    GpuModel,
)
from collectors.sim.scenarios import (
    ERRORING_PORT,
    ERRORING_PORT_SYMBOLS_PER_S,
    Behaviour,
    Gauges,
    HostUse,
    Scenario,
    behaviour,
    host_use,
    idle_behaviour,
    straggler_rank,
    xid_events,
)
from collectors.sim.scontrol import hostlist
from collectors.sim.signals import Wave, mix, unit

LAYOUTS = ("slurm-v2", "slurm-v1", "k8s")
JOB_MAP_DIR = os.path.join("run", "clusterui-jobs")
_BUS_IDS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


@dataclass(frozen=True)
class SimJob:
    """A job as the scheduler knows it (the ground truth the simulator plays)."""

    id: str
    scenario: Scenario
    user: str
    uid: int
    account: str
    partition: str
    name: str
    start: float
    end: float | None  # None: runs until the simulation stops
    nodes: tuple[str, ...]
    gpus_per_node: int
    cpus_per_node: int
    seed: int
    scheduler: str = "slurm"  # slurm | kubernetes
    gpus: tuple[tuple[str, tuple[int, ...]], ...] = ()  # ((node, (gpu index, ...)), ...)

    @property
    def nranks(self) -> int:
        return self.gpus_per_node * len(self.nodes)

    def active(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t < self.end)

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "scheduler": self.scheduler,
            "scenario": str(self.scenario),
            "user": self.user,
            "account": self.account,
            "partition": self.partition,
            "name": self.name,
            "nodes": list(self.nodes),
            "gpus_per_node": self.gpus_per_node,
            "cpus_per_node": self.cpus_per_node,
            "gpus": {node: list(g) for node, g in self.gpus},
            "start": self.start,
            "end": self.end,
        }


@dataclass
class Placement:
    """A job's share of this node: its GPUs, processes and host-side counters."""

    job: SimJob
    gpus: tuple[int, ...]
    node_rank: int
    pids: tuple[int, ...]
    behaviours: tuple[Behaviour, ...]
    host: HostUse
    cpu_seconds: float = 0.0
    written: bool = False

    def end(self) -> float:
        return math.inf if self.job.end is None else self.job.end


@dataclass
class GpuCounters:
    energy_j: float = 0.0
    pcie_tx: float = 0.0
    pcie_rx: float = 0.0
    nvlink_tx: float = 0.0
    nvlink_rx: float = 0.0
    sm: float = 0.0  # integral of SM activity % over seconds (GPM)
    tensor: float = 0.0
    dram: float = 0.0
    ecc_uncorrected: int = 0  # volatile: since the last GPU reset
    remapped_correctable: int = 0
    ecc_corrected: int = 0  # volatile
    ecc_corrected_lifetime: int = 0  # aggregate, before this driver load
    ecc_uncorrected_lifetime: int = 0
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    nvlink_errors: list = field(default_factory=lambda: [0, 0, 0, 0])  # replay .. crc data
    pcie_replays: int = 0


# GPU health faults (`SimNode(faults=...)`): a row remap pending with uncorrectable ECC
# errors rising (one every FAULT_ECC_EVERY_S) until the GPU is reset; or a remap failure.
PENDING_REMAP = "pending_remap"
REMAP_FAILURE = "remap_failure"
FAULT_ECC_EVERY_S = 120.0


@dataclass
class GpuFault:
    gpu: int
    kind: str  # PENDING_REMAP | REMAP_FAILURE
    start: float  # model time it begins
    cleared: bool = False  # the GPU was reset (`SimNode.reset_gpu`)


@dataclass
class XidEvent:
    ts: float
    gpu: int
    code: int


@dataclass
class _PortCounters:
    rx: float = 0.0
    tx: float = 0.0


@dataclass
class _EthCounters:
    rx: float = 0.0
    tx: float = 0.0
    wave_rx: Wave = field(default_factory=lambda: Wave(2e6))
    wave_tx: Wave = field(default_factory=lambda: Wave(1e6))


class SimNode:
    def __init__(
        self,
        root_dir: str,
        name: str,
        gpus: int = 8,
        model: str = "NVIDIA H100 80GB HBM3",
        ib_ports: int = 4,
        seed: int = 1,
        layout: str = "slurm-v2",
        roce: bool = False,
        faults: list[GpuFault] | tuple[GpuFault, ...] = (),
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"unknown GPU model {model!r}; known: {', '.join(MODELS)}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.root_dir = os.path.abspath(root_dir)
        self.name = name
        self.gpu_count = gpus
        self.model: GpuModel = MODELS[model]
        self.ib_ports = ib_ports
        self.seed = seed
        self.layout = layout
        self.roce = roce
        self.key = mix(seed, zlib.crc32(name.encode()))
        self.now: float | None = None
        self.placements: list[Placement] = []
        self.counters = [self._initial_counters(g) for g in range(gpus)]
        self.ports = [
            _PortCounters(rx=unit(self.key, 40, p) * 1e13, tx=unit(self.key, 41, p) * 1e13)
            for p in range(ib_ports)
        ]
        self.eth = _EthCounters(
            rx=unit(self.key, 42) * 1e11,
            tx=unit(self.key, 43) * 1e11,
            wave_rx=Wave(2.5e6, wobble=1.5e6, wobble_period=47.0),
            wave_tx=Wave(1.2e6, wobble=0.8e6, wobble_period=61.0),
        )
        self.gauges: list[Gauges] = []
        self.events: list[XidEvent] = []
        self._listeners: list = []
        self._idle = [idle_behaviour(self.model, key=self.key % 100000 + g) for g in range(gpus)]
        self._written_static = False
        self.faults = [GpuFault(f.gpu, f.kind, f.start) for f in faults]
        for f in self.faults:
            if f.kind not in (PENDING_REMAP, REMAP_FAILURE) or not 0 <= f.gpu < gpus:
                raise ValueError(f"bad GPU fault {f!r}")
        self.link_faults: list[simfabric.LinkFault] = []

    # -- identity ---------------------------------------------------------------------

    def uuid(self, gpu: int) -> str:
        return "GPU-" + str(uuidlib.UUID(int=mix(self.key, 1, gpu) << 64 | mix(self.key, 2, gpu)))

    def pci_bus_id(self, gpu: int) -> str:
        bus = _BUS_IDS[gpu] if gpu < len(_BUS_IDS) else 0x10 + gpu
        return f"{0:08X}:{bus:02X}:00.0"

    def serial(self, gpu: int) -> str:
        return str(1650000000000 + mix(self.key, 3, gpu) % 10**12)

    def gpus_per_port(self) -> int:
        return max(1, math.ceil(self.gpu_count / max(1, self.ib_ports)))

    def port_of(self, gpu: int) -> int:
        return min(self.ib_ports - 1, gpu // self.gpus_per_port()) if self.ib_ports else -1

    # -- jobs -------------------------------------------------------------------------

    def place(self, job: SimJob, gpus: tuple[int, ...] | list[int], node_rank: int = 0) -> None:
        """Give `job` these GPUs of this node (its `node_rank`-th node) over its lifetime."""
        gpus = tuple(gpus)
        first = node_rank * job.gpus_per_node
        behaviours = tuple(
            behaviour(job.scenario, self.model, job.seed, first + i, job.nranks,
                      job.gpus_per_node)
            for i in range(len(gpus))
        )
        if (job.scenario in ERRORING_PORT and self.ib_ports
                and node_rank == straggler_rank(job.seed, len(job.nodes))):
            # The job's straggler node: its first fabric port counts errors while it runs.
            self.link_faults.append(simfabric.LinkFault(
                port=0, start=job.start, kind="errors", per_s=ERRORING_PORT_SYMBOLS_PER_S,
                end=job.end))
        pids = tuple(1000 + mix(job.seed, self.key, g) % 3_000_000 for g in gpus)
        self.placements.append(
            Placement(
                job=job,
                gpus=gpus,
                node_rank=node_rank,
                pids=pids,
                behaviours=behaviours,
                host=host_use(job.scenario, job.seed, job.cpus_per_node),
            )
        )

    def active_placements(self, t: float | None = None) -> list[Placement]:
        t = self.now if t is None else t
        if t is None:
            return []
        return [p for p in self.placements if p.job.active(t)]

    def placement_of_gpu(self, gpu: int, t: float | None = None) -> Placement | None:
        for p in self.active_placements(t):
            if gpu in p.gpus:
                return p
        return None

    def busy_gpus(self, t: float) -> set[int]:
        return {g for p in self.active_placements(t) for g in p.gpus}

    def processes(self, gpu: int) -> list[tuple[int, int]]:
        """[(pid, used GPU memory bytes)] of the job process on `gpu` now."""
        p = self.placement_of_gpu(gpu)
        if p is None:
            return []
        i = p.gpus.index(gpu)
        used = int(self.gauges[gpu].mem_used_mib) * 1024 * 1024 if self.gauges else 0
        return [(p.pids[i], used)]

    def add_listener(self, callback) -> None:
        """`callback(event: XidEvent)` for each Xid event as the model passes it."""
        self._listeners.append(callback)

    # -- time -------------------------------------------------------------------------

    def advance(self, t: float, write: bool = True) -> None:
        """Move the model to time `t` and rewrite the generated trees (unless `write` is
        False: a caller passing through times nobody reads saves the file writes)."""
        t = float(t)
        if self.now is not None and t < self.now:
            raise ValueError(f"{self.name}: time goes forward only ({t} < {self.now})")
        if self.now is not None and t > self.now:
            self._integrate(self.now, t)
        self.now = t
        if write:
            self.gauges = [self._gauges(g, t) for g in range(self.gpu_count)]
            self._write_trees(t)

    def _initial_counters(self, g: int) -> GpuCounters:
        uptime = 86400 * (1 + 20 * unit(self.key, 30, g))
        return GpuCounters(
            energy_j=uptime * self.model.idle_power_w * 1.5,
            pcie_tx=unit(self.key, 31, g) * 1e14,
            pcie_rx=unit(self.key, 32, g) * 1e14,
            nvlink_tx=unit(self.key, 33, g) * 1e15 if self.model.nvlink_links else 0.0,
            nvlink_rx=unit(self.key, 34, g) * 1e15 if self.model.nvlink_links else 0.0,
            ecc_corrected_lifetime=int(unit(self.key, 35, g) * 20),
        )

    def _segments(self, gpu: int, a: float, b: float):
        """[(behaviour, job-time start, job-time end)] covering [a, b] for one GPU."""
        out = []
        covered = []
        for p in self.placements:
            if gpu not in p.gpus:
                continue
            lo, hi = max(a, p.job.start), min(b, p.end())
            if hi <= lo:
                continue
            b_ = p.behaviours[p.gpus.index(gpu)]
            out.append((b_, lo - p.job.start, hi - p.job.start))
            covered.append((lo, hi))
        covered.sort()
        cursor = a
        for lo, hi in covered:
            if lo > cursor:
                out.append((self._idle[gpu], cursor, lo))
            cursor = max(cursor, hi)
        if cursor < b:
            out.append((self._idle[gpu], cursor, b))
        return out

    def pcie_rate(self, gpu: int, tx: bool, window: float) -> float:
        """The GPU's PCIe bytes per second over the last ``window`` seconds: what the
        counters below integrate (the GPU's own traffic and its share of the InfiniBand
        DMA), as an instantaneous reading."""
        b = self.now
        a = b - window
        ib_share = IB_BYTES_PER_S / self.gpus_per_port() if self.ib_ports else 0.0
        if self.ib_ports:
            ib_share *= simfabric.link_share(self.link_faults, self.port_of(gpu), b)
        total = 0.0
        for beh, u, v in self._segments(gpu, a, b):
            ib = beh.ib.integral(u, v) * ib_share
            total += (beh.pcie_tx.integral(u, v) + ib if tx
                      else beh.pcie_rx.integral(u, v) + ib * 0.99)
        return total / window

    def _integrate(self, a: float, b: float) -> None:
        nvl_cap = self.model.nvlink_bytes_per_s
        ib_share = IB_BYTES_PER_S / self.gpus_per_port()
        for g in range(self.gpu_count):
            c = self.counters[g]
            port = self.ports[self.port_of(g)] if self.ib_ports else None
            share = ib_share * simfabric.link_share(self.link_faults, self.port_of(g),
                                                    (a + b) / 2) if port is not None else 0.0
            for beh, u, v in self._segments(g, a, b):
                c.energy_j += beh.power.integral(u, v)
                c.sm += beh.sm.integral(u, v)
                c.tensor += beh.tensor.integral(u, v)
                c.dram += beh.dram.integral(u, v)
                nvl = beh.nvlink.integral(u, v) * nvl_cap
                c.nvlink_tx += nvl
                c.nvlink_rx += nvl * 0.985
                ib = beh.ib.integral(u, v) * share
                c.pcie_tx += beh.pcie_tx.integral(u, v) + ib
                c.pcie_rx += beh.pcie_rx.integral(u, v) + ib * 0.99
                if port is not None:
                    port.tx += ib
                    port.rx += ib * 0.99
        for p in self.placements:
            lo, hi = max(a, p.job.start), min(b, p.end())
            if hi > lo:
                u, v = lo - p.job.start, hi - p.job.start
                p.cpu_seconds += p.host.cpu.integral(u, v) * p.job.cpus_per_node
                self._emit_xids(p, u, v)
        self.eth.rx += self.eth.wave_rx.integral(a, b)
        self.eth.tx += self.eth.wave_tx.integral(a, b)
        self._apply_faults(a, b)

    def _apply_faults(self, a: float, b: float) -> None:
        for f in self.faults:
            if f.cleared or b < f.start:
                continue
            c = self.counters[f.gpu]
            if f.kind == REMAP_FAILURE:
                if not c.remap_failure:
                    c.ecc_uncorrected += 1
                    c.remap_failure = True
                continue
            # Uncorrectable errors at start, start + FAULT_ECC_EVERY_S, ... in (a, b].
            before = -1 if a < f.start or not c.remap_pending else math.floor((a - f.start) / FAULT_ECC_EVERY_S)
            c.ecc_uncorrected += math.floor((b - f.start) / FAULT_ECC_EVERY_S) - before
            c.remap_pending = True

    def reset_gpu(self, gpu: int) -> None:
        """`nvidia-smi -r` at the current time: a pending remap is applied, volatile ECC
        counts start again at 0; a remap failure stays (it is in the InfoROM)."""
        c = self.counters[gpu]
        c.ecc_uncorrected_lifetime += c.ecc_uncorrected
        c.ecc_corrected_lifetime += c.ecc_corrected
        c.ecc_uncorrected = c.ecc_corrected = 0
        if c.remap_pending:
            c.remapped_uncorrectable += 1
            c.remap_pending = False
        for f in self.faults:
            if f.gpu == gpu and f.kind == PENDING_REMAP:
                f.cleared = True

    def _emit_xids(self, p: Placement, u: float, v: float) -> None:
        first = p.node_rank * p.job.gpus_per_node
        for tj, rank, code in xid_events(p.job.scenario, p.job.seed, p.job.nranks, u, v):
            local = rank - first
            if not 0 <= local < len(p.gpus):
                continue
            gpu = p.gpus[local]
            if code in (48, 94):
                self.counters[gpu].ecc_uncorrected += 1
            elif code == 63:
                self.counters[gpu].remapped_correctable += 1
            event = XidEvent(ts=p.job.start + tj, gpu=gpu, code=code)
            self.events.append(event)
            del self.events[:-1000]
            for callback in self._listeners:
                callback(event)

    def _gauges(self, gpu: int, t: float) -> Gauges:
        p = self.placement_of_gpu(gpu, t)
        if p is None:
            return self._idle[gpu].gauges(t, self.model)
        return p.behaviours[p.gpus.index(gpu)].gauges(t - p.job.start, self.model)

    def host_mem_bytes(self, p: Placement, t: float) -> int:
        return int(p.host.mem_bytes * (1.0 + 0.01 * math.sin((t - p.job.start) / 37.0)))

    # -- files ------------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return os.path.join(self.root_dir, *parts)

    @property
    def sysfs_root(self) -> str:
        return self.path("sys")

    @property
    def procfs_root(self) -> str:
        return self.path("proc")

    @property
    def cgroup_root(self) -> str:
        return self.path("sys", "fs", "cgroup")

    @property
    def job_map_dir(self) -> str:
        return self.path(JOB_MAP_DIR)

    def collector_config(self, **overrides):
        """A `collectors.config.Config` reading this node's trees, with nvml = "sim"."""
        import dataclasses

        from collectors.config import Config

        values = dict(
            node=self.name,
            nvml="sim",
            sysfs_root=self.sysfs_root,
            procfs_root=self.procfs_root,
            cgroup_root=self.cgroup_root,
            job_map_dir=self.job_map_dir,
            spool_dir=self.path("spool"),
            sim_seed=self.seed,
        )
        values.update(overrides)
        known = {f.name for f in dataclasses.fields(Config)}
        config = Config(**{k: v for k, v in values.items() if k in known})
        config._check()
        return config

    def _write_trees(self, t: float) -> None:
        if not self._written_static:
            self._write_static()
            self._written_static = True
        for p, port in enumerate(self.ports):
            cdir = self.path("sys", "class", "infiniband", f"mlx5_{p}", "ports", "1", "counters")
            _write(os.path.join(cdir, "port_xmit_data"), f"{int(port.tx) // 4}\n")
            _write(os.path.join(cdir, "port_rcv_data"), f"{int(port.rx) // 4}\n")
            _write(os.path.join(cdir, "port_xmit_packets"), f"{int(port.tx) // 4096}\n")
            _write(os.path.join(cdir, "port_rcv_packets"), f"{int(port.rx) // 4096}\n")
            faults = [f for f in self.link_faults if f.port == p]
            if faults or self.roce:
                simfabric.write_tick(os.path.dirname(cdir), faults, t, self.roce, port.tx)
        sdir = self.path("sys", "class", "net", "eth0", "statistics")
        _write(os.path.join(sdir, "rx_bytes"), f"{int(self.eth.rx)}\n")
        _write(os.path.join(sdir, "tx_bytes"), f"{int(self.eth.tx)}\n")
        keep = []
        for p in self.placements:
            if p.job.active(t):
                if not p.written:
                    self._write_job(p)
                    p.written = True
                self._write_usage(p, t)
                keep.append(p)
            elif p.job.start > t:
                keep.append(p)
            elif p.written:
                self._remove_job(p)
        self.placements = keep

    def _write_static(self) -> None:
        for p in range(self.ib_ports):
            pdir = self.path("sys", "class", "infiniband", f"mlx5_{p}", "ports", "1")
            roce = self.roce
            _write(os.path.join(pdir, "rate"), f"{IB_RATE_GBPS} Gb/sec (4X NDR)\n")
            _write(os.path.join(pdir, "state"), "4: ACTIVE\n")
            _write(os.path.join(pdir, "phys_state"), "5: LinkUp\n")
            _write(os.path.join(pdir, "link_layer"), "Ethernet\n" if roce else "InfiniBand\n")
            _write(os.path.join(pdir, "lid"), "0x0\n" if roce else f"{0x10 + p:#x}\n")
            simfabric.write_static(pdir, roce, simfabric.netdev_name(p))
        eth = self.path("sys", "class", "net", "eth0")
        _write(os.path.join(eth, "speed"), f"{ETH_SPEED_MBPS}\n")
        _write(os.path.join(eth, "operstate"), "up\n")
        os.makedirs(os.path.join(eth, "device"), exist_ok=True)
        lo = self.path("sys", "class", "net", "lo")
        _write(os.path.join(lo, "operstate"), "unknown\n")
        _write(os.path.join(lo, "statistics", "rx_bytes"), "123456789\n")
        _write(os.path.join(lo, "statistics", "tx_bytes"), "123456789\n")
        os.makedirs(self.path("sys", "fs", "cgroup"), exist_ok=True)
        os.makedirs(self.path("proc"), exist_ok=True)
        if self.layout != "k8s":
            os.makedirs(self.job_map_dir, exist_ok=True)
        _write(self.path("SIMULATED"), "This tree is generated by the ClusterUI simulator.\n")

    # Per-layout cgroup paths ---------------------------------------------------------

    def _pod_slice(self, job: SimJob) -> str:
        pod = job.id.replace("-", "_")
        return f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod}.slice"

    def _job_cgroup_dirs(self, job: SimJob) -> dict[str, str]:
        """{kind: absolute dir} of the job's cgroup: "unified" or "cpu", "memory", "cpuset"."""
        root = self.cgroup_root
        if self.layout == "slurm-v2":
            scope = f"{self.name}_slurmstepd.scope" if self.seed % 2 else "slurmstepd.scope"
            return {"unified": os.path.join(root, "system.slice", scope, f"job_{job.id}")}
        if self.layout == "slurm-v1":
            rel = os.path.join("slurm", f"uid_{job.uid}", f"job_{job.id}")
            return {
                "cpu": os.path.join(root, "cpu,cpuacct", rel),
                "memory": os.path.join(root, "memory", rel),
                "cpuset": os.path.join(root, "cpuset", rel),
            }
        return {"unified": os.path.join(root, self._pod_slice(job))}

    def _cgroup_text(self, p: Placement, i: int) -> str:
        job = p.job
        if self.layout == "slurm-v2":
            scope = os.path.basename(os.path.dirname(self._job_cgroup_dirs(job)["unified"]))
            return f"0::/system.slice/{scope}/job_{job.id}/step_0/user/task_{i}\n"
        if self.layout == "slurm-v1":
            rel = f"/slurm/uid_{job.uid}/job_{job.id}/step_0/task_{i}"
            return (
                "".join(
                    f"{n}:{ctrl}:{rel}\n"
                    for n, ctrl in (
                        (12, "memory"),
                        (9, "devices"),
                        (6, "cpuset"),
                        (4, "cpu,cpuacct"),
                        (3, "freezer"),
                    )
                )
                + "1:name=systemd:/system.slice/slurmd.service\n"
            )
        cid = f"{mix(job.seed, 7):016x}" * 4
        return f"0::/{self._pod_slice(job)}/cri-containerd-{cid}.scope\n"

    def _environ(self, p: Placement, i: int) -> bytes:
        job = p.job
        if job.scheduler == "kubernetes":
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOSTNAME": f"{job.name}-{job.id[:5]}",
                "KUBERNETES_SERVICE_HOST": "10.96.0.1",
                "NVIDIA_VISIBLE_DEVICES": ",".join(self.uuid(g) for g in p.gpus),
            }
        else:
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": f"/home/{job.user}",
                "USER": job.user,
                "SLURM_JOB_ID": job.id,
                "SLURM_JOB_USER": job.user,
                "SLURM_JOB_UID": str(job.uid),
                "SLURM_JOB_NAME": job.name,
                "SLURM_JOB_ACCOUNT": job.account,
                "SLURM_JOB_PARTITION": job.partition,
                "SLURM_JOB_NODELIST": hostlist(job.nodes),
                "SLURM_JOB_NUM_NODES": str(len(job.nodes)),
                "SLURM_JOB_START_TIME": str(int(job.start)),
                "SLURM_CPUS_ON_NODE": str(job.cpus_per_node),
                # An srun step's task, as Slurm gives it (collectors/attribution/
                # slurm_env.py): its step's GPUs on this node, and SLURM_JOB_GPUS inherited
                # from the batch step (the batch node's list; this node's is written, which
                # the collector reads only where the job has one node).
                "SLURM_JOB_GPUS": ",".join(str(g) for g in p.gpus),
                "SLURM_STEP_GPUS": ",".join(str(g) for g in p.gpus),
                "SLURM_STEP_ID": "0",
                "SLURM_LOCALID": str(i),
                "SLURM_PROCID": str(p.node_rank * job.gpus_per_node + i),
                "CUDA_VISIBLE_DEVICES": ",".join(str(k) for k in range(len(p.gpus))),
            }
        return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())

    def _cpuset(self, p: Placement) -> str:
        first = p.gpus[0] * (p.job.cpus_per_node // max(1, len(p.gpus)))
        return f"{first}-{first + p.job.cpus_per_node - 1}\n"

    def _write_job(self, p: Placement) -> None:
        job = p.job
        for i, pid in enumerate(p.pids):
            pdir = self.path("proc", str(pid))
            _write(os.path.join(pdir, "cgroup"), self._cgroup_text(p, i))
            _write_bytes(os.path.join(pdir, "environ"), self._environ(p, i))
            _write(os.path.join(pdir, "comm"), "python\n")
            _write_bytes(os.path.join(pdir, "cmdline"), b"python\0train.py\0")
        dirs = self._job_cgroup_dirs(job)
        for d in dirs.values():
            os.makedirs(d, exist_ok=True)
        cpuset_dir = dirs.get("unified") or dirs["cpuset"]
        name = "cpuset.cpus.effective" if "unified" in dirs else "cpuset.cpus"
        _write(os.path.join(cpuset_dir, name), self._cpuset(p))
        procs_dir = dirs.get("unified") or dirs["cpu"]
        _write(os.path.join(procs_dir, "cgroup.procs"), "".join(f"{pid}\n" for pid in p.pids))
        if job.scheduler == "slurm" and self.layout != "k8s":
            text = (
                f"{job.id} {job.uid}\nuser={job.user}\nname={job.name}\naccount={job.account}\n"
                f"partition={job.partition}\nstart_time={int(job.start)}\n"
                f"cpus={job.cpus_per_node}\nnodes={len(job.nodes)}\n"
            )
            for g in p.gpus:
                _write(os.path.join(self.job_map_dir, str(g)), text)

    def _write_usage(self, p: Placement, t: float) -> None:
        dirs = self._job_cgroup_dirs(p.job)
        usec = int(p.cpu_seconds * 1e6)
        mem = self.host_mem_bytes(p, t)
        if "unified" in dirs:
            d = dirs["unified"]
            user = usec * 9 // 10
            _write(
                os.path.join(d, "cpu.stat"),
                f"usage_usec {usec}\nuser_usec {user}\nsystem_usec {usec - user}\n"
                "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
            )
            _write(os.path.join(d, "memory.current"), f"{mem}\n")
        else:
            _write(os.path.join(dirs["cpu"], "cpuacct.usage"), f"{usec * 1000}\n")
            _write(os.path.join(dirs["memory"], "memory.usage_in_bytes"), f"{mem}\n")

    def _remove_job(self, p: Placement) -> None:
        for pid in p.pids:
            shutil.rmtree(self.path("proc", str(pid)), ignore_errors=True)
        for d in self._job_cgroup_dirs(p.job).values():
            shutil.rmtree(d, ignore_errors=True)
        if self.layout != "k8s":
            for g in p.gpus:
                path = os.path.join(self.job_map_dir, str(g))
                try:
                    with open(path) as fh:
                        mine = fh.read().split(" ", 1)[0] == p.job.id
                    if mine:
                        os.unlink(path)
                except OSError:
                    pass


def _write(path: str, text: str) -> None:
    _write_bytes(path, text.encode())


def _write_bytes(path: str, data: bytes) -> None:
    try:
        fh = open(path, "wb")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fh = open(path, "wb")
    with fh:
        fh.write(data)


__all__ = ["SimNode", "SimJob", "Placement", "XidEvent", "GpuFault", "PENDING_REMAP",
           "REMAP_FAILURE", "ETH_BYTES_PER_S", "LAYOUTS"]
