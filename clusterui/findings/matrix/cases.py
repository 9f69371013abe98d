"""The scenario matrix's cases: jobs with a known truth, written from the definitions in
``docs/detectors.md`` (not from the demo simulator), each with the findings a correct
detector raises for it.

A case describes what its GPUs, links and host CPUs do second by second (``NodeSignal``),
with noise and a training-step ripple; ``generate`` turns that into what a collector samples
at 1 to 60 s. Near-threshold negatives sit a few points on the right side of each threshold
(mean activity 31 % against 25 %, an idle GPU at 8 % against 5 %, busy 56 % against 50 %
with saturated links, 75 % of the cores against 85 %), and busy jobs with heavy NVLink or
fabric traffic must raise nothing. Multi-node jobs with one slow node (``slow_node``, its
rank) must raise a straggler finding that names it; lockstep jobs whose nodes run alike, or
differ by less than the thresholds, must not. A node whose fabric port counts errors must
raise the node finding ``fabric_link`` (``node_expected``), and a straggler finding only
where its traffic falls behind its peers'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Gpu:
    model: str
    memory_mib: int
    power_limit_w: float
    max_clock_mhz: float
    gpm: bool  # reports SM activity (GPM: Hopper and later)
    nvlink_bytes_per_s: float | None


H100 = Gpu("NVIDIA H100 80GB HBM3", 81559, 700.0, 1980.0, True, 450e9)
A100 = Gpu("NVIDIA A100-PCIE-40GB", 40960, 250.0, 1410.0, False, None)
IB_BYTES_PER_S = 50e9  # one 400 Gb/s InfiniBand port
ETH_BYTES_PER_S = 3.125e9
CPUS_PER_GPU = 8
STEP_S = 4  # the training step the ripple follows


@dataclass
class NodeSignal:
    """One node's share of a job, second by second: per GPU (rows) and per node."""

    sm: np.ndarray  # SM activity %, what the GPU really did
    util: np.ndarray  # NVML utilization %
    clock: np.ndarray  # SM clock, MHz
    throttle: np.ndarray  # clock-event reasons (bit mask)
    nvlink: np.ndarray  # NVLink traffic, share of the GPU's capacity
    fabric: np.ndarray  # InfiniBand traffic, share of the port (per node)
    cpu: np.ndarray  # host cores used, share of the cores allocated (per node)
    # Symbol errors counted by the node's InfiniBand port each second (per node); its
    # receive errors and link error recoveries follow them (``generate``).
    port_errors: np.ndarray | None = None


# (rng, seconds, GPUs per node, the case, the node's rank in the job) -> the node's signal
Signal = Callable[..., NodeSignal]


@dataclass(frozen=True)
class Case:
    name: str
    expected: frozenset[str]
    signal: Signal
    gpu: Gpu = H100
    gpus: int = 2  # per node
    nodes: int = 1
    minutes: float | None = None  # shorter than the run: it ends when the others do
    xid_after_s: float | None = None  # an Xid 79 on GPU 0 this long after the start
    slow_node: int | None = None  # the rank of the node that holds the others back
    # Node findings (no job) that must be raised on the ``slow_node`` (fabric_link for a
    # port whose errors rise), and none on any other node of the run.
    node_expected: frozenset[str] = frozenset()

    @property
    def negative(self) -> bool:
        return not self.expected


def _noisy(rng, shape, mean, sd, lo=0.0, hi=100.0):
    return np.clip(rng.normal(mean, sd, shape), lo, hi)


def _ripple(seconds: int, amplitude: float) -> np.ndarray:
    """A training step: busier for the first half of every STEP_S seconds."""
    phase = (np.arange(seconds) % STEP_S) < STEP_S // 2
    return np.where(phase, amplitude, -amplitude)


def steady(sm, util=None, *, sd=4.0, nvlink=0.02, fabric=0.01, cpu=0.15, clock=None,
           throttle=0, per_gpu_sm=None, per_gpu_util=None, port_errors=0.0) -> Signal:
    """GPUs at ``sm`` % SM activity (``util`` % NVML, default a little above it), with noise
    and a step ripple; links and host CPUs at the given shares; the fabric port counting
    ``port_errors`` symbol errors a second (Poisson)."""

    def make(rng: np.random.Generator, seconds: int, gpus: int, case: Case,
             rank: int = 0) -> NodeSignal:
        shape = (gpus, seconds)
        sms = per_gpu_sm or [sm] * gpus
        utils = per_gpu_util or [util] * gpus
        # NVML reads a little above SM activity on a working GPU; a GPU without GPM still
        # does something, which its power and clocks follow.
        utils = [u if u is not None else min(100.0, s * 1.25 + 3)
                 for s, u in zip(sms, utils, strict=True)]
        sms = [s if s is not None else u * 0.8 for s, u in zip(sms, utils, strict=True)]
        ripple = _ripple(seconds, 3.0)
        active = np.stack([_noisy(rng, seconds, s, sd) for s in sms])
        active = np.clip(active + np.where(np.array(sms)[:, None] > 10, ripple, 0), 0, 100)
        nvml = np.stack([_noisy(rng, seconds, u, sd / 2) for u in utils])
        top = case.gpu.max_clock_mhz
        clocks = np.full(shape, float(clock or top)) + rng.normal(0, 8, shape)
        return NodeSignal(
            sm=active, util=np.rint(nvml), clock=np.minimum(clocks, top),
            throttle=np.full(shape, throttle, dtype=np.int64),
            nvlink=_noisy(rng, shape, nvlink, 0.03, 0, 1),
            fabric=_noisy(rng, seconds, fabric, 0.03, 0, 1),
            cpu=_noisy(rng, seconds, cpu, 0.02, 0, 1),
            # Drawn only where there are errors: the other cases keep their noise.
            port_errors=rng.poisson(port_errors, seconds) if port_errors else None,
        )

    return make


def throttled(sm, *, reasons: int, clock_share: float, share: float = 1.0,
              util=None, every_gpu: bool = False, **kw) -> Signal:
    """GPU 0 (``every_gpu``: each GPU) held at ``clock_share`` of its model's top clock by
    ``reasons`` for ``share`` of the time (in bursts of a minute or so); the other GPUs run
    free at the top clock."""
    base = steady(sm, util, **kw)

    def make(rng, seconds, gpus, case, rank=0):
        s = base(rng, seconds, gpus, case)
        period = 100
        held = (np.arange(seconds) % period) < round(share * period)
        for i in range(gpus if every_gpu else 1):
            s.throttle[i] = np.where(held, reasons, 0)
            s.clock[i] = np.where(held, case.gpu.max_clock_mhz * clock_share + rng.normal(
                0, 10, seconds), s.clock[i])
        return s

    return make


def one_node(slow: Signal, peers: Signal) -> Signal:
    """The case's ``slow_node`` does ``slow``; every other node does ``peers``. The step
    ripple is the same on every node: they run in lockstep."""

    def make(rng, seconds, gpus, case, rank=0):
        return (slow if rank == case.slow_node else peers)(rng, seconds, gpus, case, rank)

    return make


def fake_busy(sm, util) -> Signal:
    """NVML reads ``util`` while the SMs are ``sm`` % active: a stream of tiny kernels."""
    return steady(sm, util, sd=2.0)


F = frozenset
LOW, IDLE, COMM, INPUT, THROTTLE, ERRORS, STRAGGLER = (
    "low_utilization", "idle_gpu", "comm_bound", "input_bound", "throttling", "gpu_errors",
    "straggler")
FABRIC_LINK = "fabric_link"

CASES: tuple[Case, ...] = (
    # Waste, on SM activity (H100) and on NVML utilization (A100, no GPM).
    Case("low-util", F({LOW}), steady(9, 20, sd=5)),
    Case("idle", F({LOW}), steady(0.3, 0, sd=0.2)),
    Case("fake-busy", F({LOW}), fake_busy(7, 98)),
    Case("low-util-a100", F({LOW}), steady(None, 12, sd=6), gpu=A100),
    Case("idle-gpus", F({IDLE}), steady(None, per_gpu_sm=[72, 72, 0.5, 0.5],
                                        per_gpu_util=[95, 95, 0, 0]), gpus=4),
    Case("idle-gpus-fake-busy", F({IDLE}), steady(None, per_gpu_sm=[72, 72, 2, 2],
                                                  per_gpu_util=[95, 95, 97, 97]), gpus=4),
    Case("idle-gpus-a100", F({IDLE}), steady(None, per_gpu_sm=[None] * 4,
                                             per_gpu_util=[85, 85, 0.5, 0.5]),
         gpu=A100, gpus=4),
    # Communication-bound: NVLink inside a node, InfiniBand across nodes.
    Case("comm-nvlink", F({COMM}), steady(35, nvlink=0.78, cpu=0.3), gpus=4),
    Case("comm-fabric", F({COMM}), steady(35, fabric=0.8, nvlink=0.1, cpu=0.3), nodes=2),
    Case("comm-fabric-a100", F({COMM}), steady(None, 38, fabric=0.8, cpu=0.3),
         gpu=A100, nodes=2),
    Case("input-bound", F({INPUT}), steady(32, cpu=0.95)),
    Case("thermal-throttle", F({THROTTLE}), throttled(70, reasons=0x20 | 0x40,
                                                      clock_share=0.66)),
    Case("power-cap-a100", F({THROTTLE}), throttled(None, reasons=0x4, clock_share=0.78,
                                                    util=90), gpu=A100),
    Case("xid", F({ERRORS}), steady(72), xid_after_s=900.0),
    # Stragglers: one node of a multi-node job holds the others back.
    Case("straggler-slow-rank", F({STRAGGLER}), one_node(steady(80), steady(48)),
         nodes=3, slow_node=2),
    # The others with one GPU a node: the matrix's data stays small.
    Case("straggler-throttled", F({STRAGGLER, THROTTLE}),
         one_node(throttled(80, reasons=0x20 | 0x40, clock_share=0.66, every_gpu=True),
                  steady(52)), gpus=1, nodes=3, slow_node=1),
    Case("straggler-power-cap-a100", F({STRAGGLER, THROTTLE}),
         one_node(throttled(None, reasons=0x4, clock_share=0.75, util=94, every_gpu=True),
                  steady(None, 62)), gpu=A100, gpus=1, nodes=2, slow_node=0),
    Case("straggler-slow-link", F({STRAGGLER}),
         one_node(steady(62, fabric=0.08, cpu=0.3), steady(62, fabric=0.45, cpu=0.3)),
         gpus=1, nodes=3, slow_node=2),
    # A marginal port: 2 symbol errors a second, and retransmissions leave the node 0.71 of
    # its peers' traffic (above the slow-link ratio, 0.5; below the error one, 0.85).
    Case("straggler-erroring-port", F({STRAGGLER}),
         one_node(steady(62, fabric=0.32, cpu=0.3, port_errors=2.0),
                  steady(62, fabric=0.45, cpu=0.3)),
         gpus=1, nodes=3, slow_node=1, node_expected=F({FABRIC_LINK})),
    # Negatives.
    Case("healthy", F(), steady(72, 96, sd=8), gpus=4),
    Case("healthy-a100", F(), steady(None, 90), gpu=A100),
    Case("near-low-util", F(), steady(31, 55, sd=5)),
    Case("near-idle-gpu", F(), steady(None, per_gpu_sm=[70, 70, 8, 8], sd=1.5), gpus=4),
    Case("busy-high-fabric", F(), steady(74, fabric=0.85, nvlink=0.5, cpu=0.3), nodes=2),
    Case("busy-high-nvlink", F(), steady(70, nvlink=0.85, cpu=0.3), gpus=4),
    Case("near-comm", F(), steady(56, nvlink=0.8, cpu=0.3), gpus=4),
    Case("near-input", F(), steady(33, cpu=0.75)),
    Case("rare-throttle", F(), throttled(70, reasons=0x20, clock_share=0.66, share=0.15)),
    Case("sync-boost", F(), throttled(70, reasons=0x10, clock_share=0.86)),
    Case("idle-in-grace", F(), steady(0.3, 0, sd=0.2), minutes=8),
    Case("lockstep-4-nodes", F(), steady(70, fabric=0.5, nvlink=0.3, cpu=0.3), gpus=1,
         nodes=4),
    Case("near-straggler", F(), one_node(steady(60), steady(50)), gpus=1, nodes=3,
         slow_node=0),
    Case("near-slow-link", F(), one_node(steady(62, fabric=0.3, cpu=0.3),
                                         steady(62, fabric=0.45, cpu=0.3)),
         gpus=1, nodes=2, slow_node=1),
    # Port errors on a node whose link keeps up with its peers': the node finding only.
    Case("port-errors-keeps-up", F(), one_node(steady(62, fabric=0.45, cpu=0.3, port_errors=2.0),
                                               steady(62, fabric=0.45, cpu=0.3)),
         gpus=1, nodes=2, slow_node=0, node_expected=F({FABRIC_LINK})),
)
