"""Job behaviours of the simulated cluster, and the findings each must raise.

Each `Scenario` is a function of (job seed, GPU rank, time since the job started) giving a
`Behaviour` per GPU: NVML utilization, GPM SM / tensor / DRAM activity, power, memory,
PCIe, NVLink and InfiniBand traffic, and the job's host CPU use. Rates are `Wave`s with
exact integrals, so the counters the collector differences agree with the gauges.

Training-step behaviours use a step period of 2.5-3.5 s: at 1 s sampling the bursts
(and, for communication-bound jobs, utilization dipping exactly while traffic peaks) are
visible sample by sample; at 10 s sampling the means over a window still tell the story.

Expected findings (`EXPECTED_FINDINGS`), judged over a window of a few minutes with the
usual thresholds (TELEMETRY.md section 6): the set is what a correct detector raises, and a
kind outside the set is one it must not raise.

- HEALTHY (util ~95 %, SM ~77 %), HEALTHY_MULTINODE (util ~95 % while IB runs at ~70 % of
  the link: traffic is high but the GPUs are busy, so not communication-bound) and
  MODERATE (util ~60 %, SM ~40 %: above every low-utilization threshold): nothing.
- IDLE (allocated, every GPU at 0 %): low_utilization. Not idle_gpu, which means "some GPUs
  idle while others work"; here none works.
- IDLE_GPUS (asked for 8, used 1): idle_gpu, and low_utilization too since the job's mean
  is ~12 %.
- SPIKY_LOW (short bursts, job mean ~14 %, p95 high): low_utilization.
- INPUT_BOUND (GPU mean ~18 %, network quiet, host CPUs saturated at ~97 % of the
  allocated cores): input_bound, and low_utilization since the mean is far below 25 %.
- COMM_BOUND_MULTINODE (2-4 nodes; util ~38 % mean, IB at ~92 % of capacity during 70 % of
  each step, util dipping when traffic peaks) and COMM_BOUND_NVLINK (one node, 8 GPUs,
  NVLink the same way): comm_bound. Their mean util (~38 %) stays above the 25-30 %
  low-utilization thresholds, so not low_utilization.
- BUSY_NOT_BUSY (NVML util ~98 % while GPM SM activity is ~8 %: a stream of tiny
  kernels): low_utilization, which is judged on SM activity where the GPU reports it and
  explains that NVML's figure misleads (there is no separate busy_not_busy finding).
- THERMAL_THROTTLE (~88 C, SwThermal + HwThermal bits, SM clock ~1320 MHz on an H100:
  2/3 of the model's max) and POWER_THROTTLE (power at the limit, SwPowerCap bit, SM
  clock ~1600 MHz on an H100: 81 % of the max): throttling.
  Both otherwise busy (util ~92 %).
- XID (healthy, plus an Xid event every few minutes: 92, 48, 94, ...): gpu_errors. Only
  codes a GPU can report and go on computing: not 79 (fallen off the bus: NVML then
  answers GpuIsLost for that GPU, it reports nothing more until a reset).
- Stragglers: multi-node jobs in lockstep where one node (`straggler_rank`) holds the
  others back. STRAGGLER_SLOW_NODE: its GPUs compute slower (clocks locked low, no throttle
  reason) and are busy all step (SM ~78 %) while the peers compute ~60 % of each step and
  wait the rest, all at the same moments (SM ~48 %): straggler. STRAGGLER_THROTTLED: the
  same, its GPUs thermally throttled (SwThermal + HwThermal, 2/3 of the max clock): straggler
  and throttling. STRAGGLER_SLOW_LINK: every GPU computes ~75 % of each step and
  communicates the rest; the node's fabric port carries ~30 % of what its peers' do (a
  degraded link): straggler. STRAGGLER_ERRORING_PORT: as the slow link, but the node's
  first fabric port is marginal (``sim/fabric.py``, a ``LinkFault`` of kind "errors" for
  the job's life: symbol errors, receive errors and link error recoveries rise in its sysfs
  counters) and its retransmissions leave it ~70 % of its peers' traffic (above the
  slow-link ratio: the rising errors are what names it): straggler, and on that node the
  node finding fabric_link (erroring; not a job finding, so not in the job's expected set:
  ``EXPECTED_NODE_FINDINGS``). All stay busier than the communication-bound and
  low-utilization thresholds.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from collectors.sim.hardware import IB_BYTES_PER_S, GpuModel
from collectors.sim.signals import Lin, Wave, noise, unit


class Scenario(enum.StrEnum):
    HEALTHY = "healthy"
    IDLE_GPUS = "idle_gpus"
    IDLE = "idle"
    SPIKY_LOW = "spiky_low"
    INPUT_BOUND = "input_bound"
    COMM_BOUND_MULTINODE = "comm_bound_multinode"
    COMM_BOUND_NVLINK = "comm_bound_nvlink"
    HEALTHY_MULTINODE = "healthy_multinode"
    BUSY_NOT_BUSY = "busy_not_busy"
    THERMAL_THROTTLE = "thermal_throttle"
    POWER_THROTTLE = "power_throttle"
    XID = "xid"
    MODERATE = "moderate"
    STRAGGLER_SLOW_NODE = "straggler_slow_node"
    STRAGGLER_THROTTLED = "straggler_throttled"
    STRAGGLER_SLOW_LINK = "straggler_slow_link"
    STRAGGLER_ERRORING_PORT = "straggler_erroring_port"


FINDING_KINDS = (
    "low_utilization",
    "idle_gpu",
    "comm_bound",
    "input_bound",
    "throttling",
    "gpu_errors",
    "straggler",
)

EXPECTED_FINDINGS: dict[Scenario, set[str]] = {
    Scenario.HEALTHY: set(),
    Scenario.IDLE_GPUS: {"idle_gpu", "low_utilization"},
    Scenario.IDLE: {"low_utilization"},
    Scenario.SPIKY_LOW: {"low_utilization"},
    Scenario.INPUT_BOUND: {"input_bound", "low_utilization"},
    Scenario.COMM_BOUND_MULTINODE: {"comm_bound"},
    Scenario.COMM_BOUND_NVLINK: {"comm_bound"},
    Scenario.HEALTHY_MULTINODE: set(),
    Scenario.BUSY_NOT_BUSY: {"low_utilization"},
    Scenario.THERMAL_THROTTLE: {"throttling"},
    Scenario.POWER_THROTTLE: {"throttling"},
    Scenario.XID: {"gpu_errors"},
    Scenario.MODERATE: set(),
    Scenario.STRAGGLER_SLOW_NODE: {"straggler"},
    Scenario.STRAGGLER_THROTTLED: {"straggler", "throttling"},
    Scenario.STRAGGLER_SLOW_LINK: {"straggler"},
    Scenario.STRAGGLER_ERRORING_PORT: {"straggler"},
}
# Node findings (no job) a scenario raises on its straggler node, beside the job's.
EXPECTED_NODE_FINDINGS: dict[Scenario, set[str]] = {
    Scenario.STRAGGLER_ERRORING_PORT: {"fabric_link"},
}

# What a scenario needs from its allocation (the scheduler respects it).
STRAGGLERS = {Scenario.STRAGGLER_SLOW_NODE, Scenario.STRAGGLER_THROTTLED,
              Scenario.STRAGGLER_SLOW_LINK, Scenario.STRAGGLER_ERRORING_PORT}
# The straggler node's fabric port counts errors while the job runs (``node.SimNode.place``).
ERRORING_PORT = {Scenario.STRAGGLER_ERRORING_PORT}
# Symbol errors a second on that port (receive errors and recoveries follow: sim/fabric.py).
ERRORING_PORT_SYMBOLS_PER_S = 2.0
MULTINODE = {Scenario.COMM_BOUND_MULTINODE, Scenario.HEALTHY_MULTINODE} | STRAGGLERS
NEEDS_FULL_NODE = MULTINODE | {Scenario.COMM_BOUND_NVLINK, Scenario.IDLE_GPUS}
NEEDS_HOPPER = {Scenario.COMM_BOUND_NVLINK, Scenario.BUSY_NOT_BUSY}

# Xid events of the XID scenario: one every XID_PERIOD s of the job's life, the first
# XID_FIRST s after it starts, on a GPU and with a code chosen by the job's seed.
XID_PERIOD = 240.0
XID_FIRST = 40.0
XID_CODES = (92, 48, 94, 63, 31)

THROTTLE_SW_POWER = 0x4
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
THROTTLE_IDLE = 0x1


@dataclass(frozen=True)
class Gauges:
    """Instantaneous readings of one GPU."""

    util_pct: float
    mem_util_pct: float
    mem_used_mib: float
    power_w: float
    temp_c: float
    sm_clock_mhz: int
    throttle: int


@dataclass(frozen=True)
class Behaviour:
    """One GPU of one job (or a free GPU). Times are seconds since the job started.

    `util` is NVML's busy-time % (read as the mean over the last second, as NVML does);
    `sm`, `tensor`, `dram` are GPM activity %; `power` is W; `nvlink` and `ib` are
    fractions of link capacity (`ib` per GPU: the GPUs sharing a port add up); `pcie_tx`
    and `pcie_rx` are bytes/s on top of the GPU's share of IB traffic (GPUDirect RDMA goes
    through PCIe).
    """

    util: Wave
    sm: Wave
    tensor: Lin
    dram: Lin
    power: Lin | Wave
    nvlink: Wave
    ib: Wave
    pcie_tx: Wave
    pcie_rx: Wave
    mem_used_mib: float
    throttling: str = ""  # "", "thermal" or "power"
    key: int = 0  # noise key (job seed and rank)

    def gauges(self, t: float, model: GpuModel) -> Gauges:
        util = _clamp(self.util.mean(t - 1.0, t) + 1.2 * noise(self.key, 1, t), 0, 100)
        if self.util.high == 0 and self.util.low == 0:
            util = 0.0
        sm = max(0.0, self.sm.mean(t - 1.0, t))
        power = self.power.mean(t - 1.0, t) + 0.01 * model.power_limit_w * noise(self.key, 2, t)
        power = _clamp(power, model.idle_power_w * 0.9, model.power_limit_w)
        span = max(1.0, model.power_limit_w - model.idle_power_w)
        load = (power - model.idle_power_w) / span
        temp = model.idle_temp_c + (model.busy_temp_c - model.idle_temp_c) * load
        temp += 0.6 * noise(self.key, 3, t, 5.0)
        throttle = 0
        clock = model.max_sm_clock_mhz
        if self.throttling == "thermal":
            temp = 88.0 + 1.5 * noise(self.key, 4, t, 3.0)
            throttle = THROTTLE_SW_THERMAL
            if noise(self.key, 5, t) > -0.3:
                throttle |= THROTTLE_HW_THERMAL
            # 1320 MHz on an H100 (1980 max): the same share of any model's max clock.
            clock = int(model.max_sm_clock_mhz * 2 / 3 + 60 * noise(self.key, 6, t))
        elif self.throttling == "power":
            throttle = THROTTLE_SW_POWER
            # 1600 MHz on an H100; a throttled GPU never runs above its own max clock.
            clock = int(model.max_sm_clock_mhz * 80 / 99 + 50 * noise(self.key, 6, t))
        elif util < 1.0:
            throttle = THROTTLE_IDLE
            clock = model.idle_sm_clock_mhz
        mem_util = _clamp(self.dram.mean(t - 1.0, t) * 0.9 + 0.1 * sm, 0, 100)
        mem_used = min(
            model.memory_total_mib - model.memory_reserved_mib,
            self.mem_used_mib * (1.0 + 0.002 * noise(self.key, 7, t, 30.0)),
        )
        return Gauges(
            util_pct=round(util),
            mem_util_pct=round(mem_util),
            mem_used_mib=round(mem_used),
            power_w=power,
            temp_c=round(temp),
            sm_clock_mhz=int(clock),
            throttle=throttle,
        )


@dataclass(frozen=True)
class HostUse:
    """The job's host side on one node: CPU as a fraction of its cores, memory in bytes."""

    cpu: Wave
    mem_bytes: float


def _clamp(v: float, lo: float, hi: float) -> float:
    return lo if v < lo else hi if v > hi else v


def _r(seed: int, k: int, lo: float, hi: float) -> float:
    return lo + (hi - lo) * unit(seed, k)


def idle_behaviour(model: GpuModel, key: int = 0) -> Behaviour:
    """A GPU no job holds: 0 %, idle power, nothing on its links."""
    zero = Wave(0.0)
    return Behaviour(
        util=zero,
        sm=zero,
        tensor=Lin(0.0),
        dram=Lin(0.0),
        power=Wave(model.idle_power_w),
        nvlink=zero,
        ib=zero,
        pcie_tx=Wave(2e5),
        pcie_rx=Wave(2e5),
        mem_used_mib=0.0,
        key=key,
    )


def _power(model: GpuModel, util: Wave, sm: Wave) -> Lin:
    span = model.power_limit_w - model.idle_power_w
    return Lin(model.idle_power_w, ((0.22 * span / 100, util), (0.7 * span / 100, sm)))


def straggler_rank(seed: int, nodes: int) -> int:
    """Which node (its rank in the job) holds a straggler scenario's job back."""
    return int(unit(seed, 38) * nodes)


def behaviour(scenario: Scenario, model: GpuModel, seed: int, rank: int, nranks: int,
              gpus_per_node: int | None = None) -> Behaviour:
    """The behaviour of GPU `rank` (0..nranks-1, across nodes, `gpus_per_node` on each) of
    a job with `seed`."""
    s = Scenario(scenario)
    key = seed * 1000 + rank
    period = _r(seed, 1, 2.5, 3.5)  # training step, s
    phase = unit(seed, 2)
    wob = dict(wobble_period=_r(seed, 3, 60, 180), wobble_phase=_r(seed, 4, 0, 6.28))
    mem = model.memory_total_mib - model.memory_reserved_mib
    multi_gpu = nranks > 1

    def steady(level: float, jitter: float) -> Wave:
        return Wave(level, wobble=jitter, **wob)

    def stepped(high: float, low: float, duty: float, w: float = 0.0) -> Wave:
        return Wave(high, low, period, duty, phase, wobble=w, **wob)

    nvlink = Wave(0.0)
    ib = Wave(_r(seed, 5, 0.001, 0.004))  # reading data from the parallel file system
    pcie_rx = Wave(_r(seed, 6, 1.0e9, 3.0e9), wobble=2e8, **wob)
    pcie_tx = Wave(_r(seed, 7, 0.2e9, 0.6e9), wobble=5e7, **wob)
    mem_used = mem * _r(seed, 8, 0.55, 0.9)
    throttling = ""
    tensor_ratio, dram_ratio = 0.55, 0.65

    if s in (Scenario.HEALTHY, Scenario.XID, Scenario.THERMAL_THROTTLE, Scenario.POWER_THROTTLE):
        level = 95.5 if s in (Scenario.HEALTHY, Scenario.XID) else 92.0
        util = steady(level + _r(seed, 9, -1.5, 1.5), 1.5)
        sm = steady(_r(seed, 10, 74, 80) - (95.5 - level), 2.0)
        if multi_gpu:
            nvlink = stepped(0.35, 0.08, 0.4, 0.02)
        throttling = {Scenario.THERMAL_THROTTLE: "thermal", Scenario.POWER_THROTTLE: "power"}.get(
            s, ""
        )
    elif s is Scenario.MODERATE:
        util = Wave(72, 48, _r(seed, 11, 20, 40), 0.5, phase, wobble=3, **wob)
        sm = Wave(50, 30, util.period, 0.5, phase, wobble=2, **wob)
        if multi_gpu:
            nvlink = stepped(0.2, 0.05, 0.4, 0.02)
    elif s is Scenario.IDLE:
        util = Wave(0.0)
        sm = Wave(0.0)
        mem_used = mem * _r(seed, 12, 0.02, 0.3)
        pcie_rx, pcie_tx = Wave(3e5), Wave(2e5)
        ib = Wave(0.0)
    elif s is Scenario.IDLE_GPUS:
        if rank == 0:
            util = steady(95.0, 1.5)
            sm = steady(_r(seed, 10, 70, 78), 2.0)
        else:
            util, sm = Wave(0.0), Wave(0.0)
            mem_used = 512.0 + 128 * (rank % 3)  # a CUDA context, nothing more
            pcie_rx, pcie_tx = Wave(2e5), Wave(2e5)
    elif s is Scenario.SPIKY_LOW:
        spike_period = _r(seed, 13, 30, 50)
        util = Wave(85, 1.5, spike_period, 0.15, phase, wobble=1.0, **wob)
        sm = Wave(62, 0.5, spike_period, 0.15, phase, wobble=0.4, **wob)
        pcie_rx = Wave(2.5e9, 1e7, spike_period, 0.15, phase)
    elif s is Scenario.INPUT_BOUND:
        util = stepped(62, 3.5, 0.25, 1.0)
        sm = stepped(48, 1.0, 0.25, 0.5)
        pcie_rx = stepped(3.0e9, 5e7, 0.25)
        ib = Wave(0.0015)
    elif s is Scenario.BUSY_NOT_BUSY:
        util = steady(98.0, 0.8)
        sm = steady(_r(seed, 14, 6.5, 9.5), 0.8)
        tensor_ratio, dram_ratio = 0.1, 0.5
        mem_used = mem * _r(seed, 8, 0.1, 0.3)
    elif s in (Scenario.COMM_BOUND_MULTINODE, Scenario.COMM_BOUND_NVLINK):
        # Communication during the first 70 % of each step, compute in the rest.
        util = stepped(11.0, 91.0, 0.7, 1.0)
        sm = stepped(7.0, 72.0, 0.7, 1.0)
        if s is Scenario.COMM_BOUND_MULTINODE:
            ib = stepped(0.92, 0.03, 0.7, 0.02)
            nvlink = stepped(0.30, 0.02, 0.7, 0.01)
        else:
            nvlink = stepped(0.90, 0.04, 0.7, 0.02)
    elif s is Scenario.HEALTHY_MULTINODE:
        # Communication overlapped with compute: busy GPUs and a busy network.
        util = steady(95.0 + _r(seed, 9, -1.5, 1.5), 1.5)
        sm = steady(_r(seed, 10, 72, 78), 2.0)
        ib = stepped(0.86, 0.56, 0.5, 0.02)
        nvlink = stepped(0.40, 0.15, 0.5, 0.02)
    elif s in STRAGGLERS:
        per_node = gpus_per_node or nranks
        odd = rank // per_node == straggler_rank(seed, max(1, nranks // per_node))
        # Lockstep: every node's step has the same period and phase; a peer computes the
        # first `duty` of the step and waits for the others (or communicates) the rest.
        duty = {Scenario.STRAGGLER_SLOW_NODE: 0.6, Scenario.STRAGGLER_THROTTLED: 0.64,
                Scenario.STRAGGLER_SLOW_LINK: 0.75, Scenario.STRAGGLER_ERRORING_PORT: 0.75}[s]
        fabric_bound = s in (Scenario.STRAGGLER_SLOW_LINK, Scenario.STRAGGLER_ERRORING_PORT)
        if odd and not fabric_bound:
            util = steady(96.0, 1.0)  # computes the whole step: the others wait for it
            sm = steady(_r(seed, 10, 76, 80), 1.5)
            throttling = "thermal" if s is Scenario.STRAGGLER_THROTTLED else ""
        else:
            util = stepped(96.0, 4.0, duty, 1.0)
            sm = stepped(_r(seed, 10, 76, 80), 2.0, duty, 1.0)
        # Gradients move in the part of the step a peer does not compute; the degraded
        # link of the slow-link node carries 30 % of what its peers' do.
        ib = stepped(0.05, 0.7, duty, 0.01)
        if odd and s is Scenario.STRAGGLER_SLOW_LINK:
            ib = stepped(0.015, 0.21, duty, 0.005)
        elif odd and s is Scenario.STRAGGLER_ERRORING_PORT:
            # Retransmitted packets and link recoveries: ~70 % of the peers' goodput.
            ib = stepped(0.035, 0.49, duty, 0.005)
        nvlink = stepped(0.05, 0.3, duty, 0.01)
    else:  # pragma: no cover - every member is handled above
        raise ValueError(s)

    if model.nvlink_links == 0:
        nvlink = Wave(0.0)
    tensor = Lin(0.0, ((tensor_ratio, sm),))
    dram = Lin(2.0 if sm.high or sm.low else 0.0, ((dram_ratio, sm),))
    power: Lin | Wave = _power(model, util, sm)
    if throttling == "power":
        power = Wave(model.power_limit_w * 0.994, wobble=model.power_limit_w * 0.004, **wob)
    return Behaviour(
        util=util,
        sm=sm,
        tensor=tensor,
        dram=dram,
        power=power,
        nvlink=nvlink,
        ib=ib,
        pcie_tx=pcie_tx,
        pcie_rx=pcie_rx,
        mem_used_mib=mem_used,
        throttling=throttling,
        key=key,
    )


def host_use(scenario: Scenario, seed: int, cpus: int) -> HostUse:
    """The job's host CPU (fraction of its `cpus` on this node) and memory."""
    s = Scenario(scenario)
    wob = dict(wobble_period=_r(seed, 20, 40, 90), wobble_phase=_r(seed, 21, 0, 6.28))
    if s is Scenario.INPUT_BOUND:
        cpu = Wave(0.965, wobble=0.02, **wob)  # the data loader saturates every core
    elif s is Scenario.IDLE:
        cpu = Wave(0.015, wobble=0.005, **wob)
    elif s is Scenario.IDLE_GPUS:
        cpu = Wave(0.08, wobble=0.01, **wob)
    elif s is Scenario.SPIKY_LOW:
        cpu = Wave(0.12, wobble=0.03, **wob)
    else:
        cpu = Wave(_r(seed, 22, 0.2, 0.4), wobble=0.03, **wob)
    mem = cpus * _r(seed, 23, 3.0e9, 8.0e9)
    return HostUse(cpu=cpu, mem_bytes=mem)


def xid_events(
    scenario: Scenario, seed: int, nranks: int, a: float, b: float
) -> list[tuple[float, int, int]]:
    """Xid events in job time (a, b]: (time since start, rank, code)."""
    if Scenario(scenario) is not Scenario.XID or b <= a:
        return []
    out = []
    k = max(0, math.floor((a - XID_FIRST - 5.0) / XID_PERIOD))
    while True:
        t = XID_FIRST + k * XID_PERIOD + _r(seed, 100 + k, 0.0, 5.0)
        if t > b:
            return out
        if t > a:
            rank = int(unit(seed, 200 + k) * nranks)
            code = XID_CODES[int(unit(seed, 300 + k) * len(XID_CODES))]
            out.append((t, rank, code))
        k += 1


def ib_bytes_per_gpu(b: Behaviour, gpus_per_port: int) -> Lin:
    """This GPU's share of its IB port's traffic, bytes/s."""
    return Lin(0.0, ((IB_BYTES_PER_S / gpus_per_port, b.ib),))
