"""A simulated cluster: many `SimNode`s, a deterministic scheduler, and the real collector.

`ClusterSim` builds the nodes and one real `collectors.agent.Agent` per node (with a
`SimNVML` and the simulation's clock), starts and ends jobs of every scenario under several
users and accounts, and samples every agent at each `step(t)`. `flush()` returns one
contract-1 batch per node. `main()` is the ``clusterui-simcluster`` command, which ships
the batches through the collector's real `Shipper`.

The scheduler acts at fixed ticks (every `SCHED_TICK` s), each with its own seeded random
generator, so the jobs do not depend on how often `step` is called: the same seed gives
the same jobs, counters and batches at 1 s or at 10 s sampling.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import signal
import sys
import tempfile
import threading
import time
import uuid as uuidlib

from collectors import signing
from collectors.sim import progress
from collectors.sim.fabric import SimEthtool
from collectors.sim.hardware import A100_PCIE, H100_SXM
from collectors.sim.node import SimJob, SimNode
from collectors.sim.nvml import SimNVML
from collectors.sim.scenarios import (
    MULTINODE,
    NEEDS_FULL_NODE,
    NEEDS_HOPPER,
    XID_PERIOD,
    Scenario,
)
from collectors.sim.sharing import SimMigNVML
from collectors.sim.signals import mix

log = logging.getLogger(__name__)

SCHED_TICK = 60.0
TARGET_BUSY = 0.85  # share of GPUs the scheduler keeps allocated
CPUS_PER_GPU = 12

USERS = (
    ("alice", 61001, "nlp"),
    ("bob", 61002, "vision"),
    ("carol", 61003, "rl"),
    ("dave", 61004, "genomics"),
    ("erin", 61005, "nlp"),
    ("frank", 61006, "vision"),
)
JOB_NAMES = {
    "nlp": ("llama-ft", "gpt-neox-pretrain", "bert-large-mlm", "mistral-sft", "t5-xl-eval"),
    "vision": ("resnet50-train", "vit-l16", "sd-xl-finetune", "yolo-v8-train", "clip-b32"),
    "rl": ("ppo-atari", "dreamer-v3", "muzero-go", "sac-mujoco"),
    "genomics": ("alphafold-infer", "esm2-embed", "enformer-train", "dnabert-ft"),
}
IDLE_NAMES = ("jupyter", "interactive", "vscode-tunnel")

# Job sizes (GPUs on one node) per scenario; multi-node jobs take whole nodes.
SIZES = {
    Scenario.HEALTHY: (1, 2, 4, 8),
    Scenario.IDLE: (1, 2, 4),
    Scenario.SPIKY_LOW: (1, 2),
    Scenario.INPUT_BOUND: (1, 2, 4),
    Scenario.BUSY_NOT_BUSY: (1, 2),
    Scenario.THERMAL_THROTTLE: (1, 2),
    Scenario.POWER_THROTTLE: (2, 4, 8),
    Scenario.XID: (1, 2, 4),
    Scenario.MODERATE: (1, 2, 4),
}
# The mix of jobs arriving after the start: mostly healthy, every problem now and then.
ARRIVAL_WEIGHTS = {
    Scenario.HEALTHY: 10,
    Scenario.MODERATE: 4,
    Scenario.IDLE: 2,
    Scenario.SPIKY_LOW: 2,
    Scenario.INPUT_BOUND: 2,
    Scenario.IDLE_GPUS: 1,
    Scenario.BUSY_NOT_BUSY: 1,
    Scenario.COMM_BOUND_NVLINK: 1,
    Scenario.COMM_BOUND_MULTINODE: 1,
    Scenario.HEALTHY_MULTINODE: 1,
    Scenario.THERMAL_THROTTLE: 1,
    Scenario.POWER_THROTTLE: 1,
    Scenario.XID: 1,
    Scenario.STRAGGLER_SLOW_NODE: 1,
    Scenario.STRAGGLER_THROTTLED: 1,
    Scenario.STRAGGLER_SLOW_LINK: 1,
    Scenario.STRAGGLER_ERRORING_PORT: 1,
}
# At the start every scenario runs once, the rarest allocations first.
INITIAL_ORDER = (
    Scenario.COMM_BOUND_MULTINODE,
    Scenario.HEALTHY_MULTINODE,
    Scenario.STRAGGLER_SLOW_NODE,
    Scenario.STRAGGLER_THROTTLED,
    Scenario.STRAGGLER_SLOW_LINK,
    Scenario.STRAGGLER_ERRORING_PORT,
    Scenario.COMM_BOUND_NVLINK,
    Scenario.IDLE_GPUS,
    Scenario.BUSY_NOT_BUSY,
    Scenario.HEALTHY,
    Scenario.POWER_THROTTLE,
    Scenario.INPUT_BOUND,
    Scenario.IDLE,
    Scenario.SPIKY_LOW,
    Scenario.THERMAL_THROTTLE,
    Scenario.XID,
    Scenario.MODERATE,
)
# The first job of each single-node scenario is small (every size still shows), so that all
# of them fit beside the multi-node ones on the default 16 nodes; later jobs draw from SIZES.
INITIAL_SIZES = {Scenario.HEALTHY: 4, Scenario.POWER_THROTTLE: 2}


def node_name(i: int) -> str:
    return f"gpu-a{i + 1:03d}"


class ClusterSim:
    """Nodes, jobs and one real collector agent per node, on a simulated clock."""

    def __init__(
        self,
        nodes: int = 16,
        gpus_per_node: int = 8,
        seed: int = 1,
        start: float | None = None,
        root_dir: str | None = None,
        cluster: str = "demo",
        interval: float = 10,
        flush: float | None = None,
        a100_nodes: int | None = None,
        k8s_nodes: int | None = None,
        mig_nodes: int = 0,
        first_job_id: int | None = None,
        earliest_start: float | None = None,
    ) -> None:
        from collectors.agent import Agent
        from collectors.sim.kubelet import SimKubelet
        from collectors.sim.scontrol import SimScontrol

        self.seed = seed
        self.cluster = cluster
        self.interval = interval
        self.gpus_per_node = gpus_per_node
        self.start = float(math.floor(time.time()) if start is None else start)
        self.root_dir = root_dir or tempfile.mkdtemp(prefix="clusterui-simcluster-")
        k8s = nodes // 8 if k8s_nodes is None else k8s_nodes
        a100 = nodes // 8 if a100_nodes is None else a100_nodes
        self.nodes: list[SimNode] = []
        for i in range(nodes):
            name = node_name(i)
            is_k8s = i >= nodes - k8s
            is_a100 = not is_k8s and i >= nodes - k8s - a100
            layout = "k8s" if is_k8s else ("slurm-v1" if i % 4 == 3 else "slurm-v2")
            self.nodes.append(
                SimNode(
                    os.path.join(self.root_dir, name),
                    name,
                    gpus=gpus_per_node,
                    model=(A100_PCIE if is_a100 else H100_SXM).name,
                    seed=mix(seed, i) % 2**31,
                    layout=layout,
                    roce=is_k8s,
                )
            )
        self.jobs: list[SimJob] = []
        # Slurm job ids count up from here; pod UUIDs are drawn from the seed, and salted by
        # a given first id too, so a run that continues a stored history (``--first-job-id``)
        # names no job as an earlier run did.
        self._next_id = (812000 + seed % 1000 * 1000 if first_job_id is None
                         else first_job_id - 1)
        self._pod_salt = 0 if first_job_id is None else (  # all 128 bits: names show the top
            mix(first_job_id, 0x90D) << 64 | mix(first_job_id, 0x90E))
        # No job running at the start began at or before this: a run continuing a stored
        # history (``--after``) finds the GPUs held by the earlier run's jobs until then.
        self._earliest_start = earliest_start
        self._tick = 0
        self.now = self.start
        self._initial_jobs()
        for node in self.nodes:
            node.advance(self.start)
        # The first ``mig_nodes`` nodes (H100, Slurm) show their GPUs as 1g.10gb MIG
        # instances of a MIG-enabled H100 (collectors/sim/sharing.py); none by default.
        self.nvmls = [SimMigNVML(node) if i < mig_nodes and node.model is H100_SXM
                      else SimNVML(node) for i, node in enumerate(self.nodes)]
        self.agents = [
            Agent(
                node.collector_config(
                    cluster=cluster, interval=interval, flush=max(interval, flush or interval)
                ),
                nvml=nvml,
                clock=self._clock,
                ethtool=SimEthtool(node),
            )
            for node, nvml in zip(self.nodes, self.nvmls, strict=True)
        ]
        for node, agent in zip(self.nodes, self.agents, strict=True):
            if node.layout == "k8s":  # its kubelet: each GPU's pod (simulated, kubelet.py)
                agent.pods = SimKubelet(node)
            else:  # its scontrol: the jobs' scheduler facts (simulated, scontrol.py)
                agent.jobs.scontrol = SimScontrol(lambda: self.jobs, self._clock)

    def add_fabric_faults(self, at: float) -> list[str]:
        """Degrade two links, for the demo: node 1's second port retrains at 1X from ``at``
        + 60 s, node 2's third port counts symbol errors from ``at`` + 120 s (both
        simulated; ``sim/fabric.py``). Returns what was done, for the log."""
        from collectors.sim.fabric import LinkFault

        done = []
        for i, port, kind, delay in ((1, 1, "width", 60.0), (2, 2, "errors", 120.0)):
            if i < len(self.nodes) and port < self.nodes[i].ib_ports:
                self.nodes[i].link_faults.append(LinkFault(port, at + delay, kind, per_s=2.0))
                done.append(f"{self.nodes[i].name} mlx5_{port}:1 {kind} at +{delay:g} s")
        return done

    def _clock(self) -> float:
        return self.now

    # -- public -----------------------------------------------------------------------

    def step(self, t: float) -> None:
        """Advance every node to `t` (scheduling at the ticks passed) and sample each agent."""
        t = float(t)
        if t < self.now:
            raise ValueError(f"time goes forward only ({t} < {self.now})")
        while self.start + (self._tick + 1) * SCHED_TICK <= t:
            self._tick += 1
            tick_t = self.start + self._tick * SCHED_TICK
            if tick_t < t:
                self._advance(tick_t, write=False)
            self._schedule(tick_t)
        self._advance(t)
        for nvml in self.nvmls:
            nvml.settle_events()
        for agent in self.agents:
            agent.sample()

    def flush(self) -> list[dict]:
        """One contract-1 batch per node (what was sampled since the last flush)."""
        return [agent.build_batch() for agent in self.agents]

    @property
    def next_job_id(self) -> int:
        """The Slurm id the next job will get."""
        return self._next_id + 1

    def running_jobs(self, t: float | None = None) -> list[SimJob]:
        t = self.now if t is None else t
        return [j for j in self.jobs if j.active(t)]

    def job_table(self) -> list[dict]:
        """The ground truth: every job with its scenario, allocation and times."""
        return [j.as_dict() for j in self.jobs]

    def close(self) -> None:
        for agent in self.agents:
            agent.close()

    # -- scheduling -------------------------------------------------------------------

    def _advance(self, t: float, write: bool = True) -> None:
        if t < self.now:
            return
        self.now = t
        for node in self.nodes:
            node.advance(t, write=write)

    def _free(self, t: float) -> dict[int, list[int]]:
        return {
            i: [g for g in range(n.gpu_count) if g not in n.busy_gpus(t)]
            for i, n in enumerate(self.nodes)
        }

    def _fits(self, scenario: Scenario, i: int) -> bool:
        node = self.nodes[i]
        if scenario in NEEDS_HOPPER and not node.model.gpm:
            return False
        if scenario in MULTINODE and node.layout == "k8s":
            return False
        return True

    def _initial_jobs(self) -> None:
        rng = random.Random(mix(self.seed, 0xC1))
        for scenario in INITIAL_ORDER:
            if scenario in NEEDS_FULL_NODE and len(self.nodes) < 4:
                continue  # on a tiny cluster whole-node jobs would crowd out the rest
            self._start_job(rng, scenario, self.start, initial=True, first=True)
        total = len(self.nodes) * self.gpus_per_node
        for _ in range(4 * total):
            busy = total - sum(len(v) for v in self._free(self.start).values())
            if busy >= TARGET_BUSY * total:
                break
            self._start_job(rng, self._pick(rng), self.start, initial=True)

    def _schedule(self, t: float) -> None:
        rng = random.Random(mix(self.seed, 0x5C, self._tick))
        total = len(self.nodes) * self.gpus_per_node
        for _ in range(3):
            busy = total - sum(len(v) for v in self._free(t).values())
            if busy >= TARGET_BUSY * total or rng.random() < 0.35:
                break
            self._start_job(rng, self._pick(rng), t, initial=False)

    @staticmethod
    def _pick(rng: random.Random) -> Scenario:
        kinds = list(ARRIVAL_WEIGHTS)
        return rng.choices(kinds, weights=[ARRIVAL_WEIGHTS[k] for k in kinds])[0]

    def _start_job(
        self, rng: random.Random, scenario: Scenario, t: float, initial: bool,
        first: bool = False,
    ) -> SimJob | None:
        free = self._free(t)
        order = list(range(len(self.nodes)))
        rng.shuffle(order)
        gpn = self.gpus_per_node
        if scenario in MULTINODE:
            # At the start two nodes each, so every multi-node scenario fits a small cluster.
            want = 2 if initial else rng.choice((2, 2, 3, 4))
            full = [i for i in order if len(free[i]) == gpn and self._fits(scenario, i)]
            if len(full) < 2:
                return None
            chosen = sorted(full[: min(want, len(full))])
            alloc = [(i, tuple(range(gpn))) for i in chosen]
        else:
            if scenario in NEEDS_FULL_NODE:
                size = gpn
            elif initial and first:
                size = min(gpn, INITIAL_SIZES.get(scenario, 1))
            else:
                size = min(gpn, rng.choice(SIZES[scenario]))
            fits = [i for i in order if len(free[i]) >= size and self._fits(scenario, i)]
            if not fits:
                return None
            # Mostly best fit (the partly used node with the fewest free GPUs, which keeps
            # whole nodes free for multi-node jobs), sometimes any node that fits.
            partial = [k for k in fits if len(free[k]) < gpn]
            if partial and rng.random() < 0.7:
                i = min(partial, key=lambda k: len(free[k]))
            else:
                i = fits[0]
            alloc = [(i, tuple(free[i][:size]))]
        k8s = self.nodes[alloc[0][0]].layout == "k8s"
        user, uid, account = rng.choice(USERS)
        if scenario is Scenario.IDLE:
            name = rng.choice(IDLE_NAMES)
        else:
            name = rng.choice(JOB_NAMES[account])
        if k8s:
            job_id = str(uuidlib.UUID(int=rng.getrandbits(128) ^ self._pod_salt, version=4))
        else:
            self._next_id += 1
            job_id = str(self._next_id)
        if initial:
            start = t - rng.uniform(300, 4 * 3600)
            if scenario is Scenario.XID:  # an Xid event ~40 s after the simulation starts
                start = t - XID_PERIOD * rng.randint(1, 8)
            if self._earliest_start is not None:
                start = max(start, min(t, math.floor(self._earliest_start) + 1))
            end = t + rng.uniform(1.5 * 3600, 8 * 3600)
        else:
            start = t
            end = t + rng.uniform(0.5 * 3600, (12 if scenario in MULTINODE else 6) * 3600)
        size = len(alloc[0][1])
        job = SimJob(
            id=job_id,
            scenario=scenario,
            user=user,
            uid=uid,
            account=account,
            partition="gpu-long"
            if scenario in MULTINODE
            else ("interactive" if scenario is Scenario.IDLE else "gpu"),
            name=name,
            start=round(start),
            end=round(end),
            nodes=tuple(self.nodes[i].name for i, _ in alloc),
            gpus_per_node=size,
            cpus_per_node=size * CPUS_PER_GPU,
            seed=rng.getrandbits(31),
            scheduler="kubernetes" if k8s else "slurm",
            gpus=tuple((self.nodes[i].name, g) for i, g in alloc),
        )
        for rank, (i, gpus) in enumerate(alloc):
            self.nodes[i].place(job, gpus, node_rank=rank)
        self.jobs.append(job)
        return job


# -- the command ----------------------------------------------------------------------


def _parse_args(argv):
    p = argparse.ArgumentParser(
        prog="clusterui-simcluster",
        description="Run a SIMULATED GPU cluster through the real ClusterUI collector code.",
    )
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--flush", type=float, default=10.0, help="seconds between batches")
    p.add_argument("--broker-url", default=os.environ.get("CELERY_BROKER_URL",
                   "redis://127.0.0.1:6379/0"))  # fmt: skip
    p.add_argument("--queue", default="ingest")
    p.add_argument("--cluster", default="demo")
    p.add_argument("--root", default=None, help="where the simulated sysfs/procfs trees go")
    p.add_argument("--spool-dir", default=None, help="spool directory (one folder per node)")
    p.add_argument("--spool-max-bytes", type=int, default=64 * 1024 * 1024)
    p.add_argument("--backfill", type=float, default=0.0,
                   help="first generate this many seconds of history, as fast as possible")  # fmt: skip
    p.add_argument("--backfill-flush", type=float, default=None,
                   help="seconds between batches while back-filling (default: --flush); "
                        "larger batches load history faster")  # fmt: skip
    p.add_argument("--after", type=float, default=None,
                   help="Unix time the stored history ends at: the back-fill starts after it "
                        "and the jobs running at the start began after it (a restarted demo "
                        "continues its history instead of writing over it)")
    p.add_argument("--first-job-id", type=int, default=None,
                   help="the first Slurm job id (default: from the seed); pod UUIDs change "
                        "with it too")
    p.add_argument("--state-file", default=None,
                   help="keep where the simulation has got to in this file, and continue "
                        "from it at the next start (collectors/sim/progress.py)")
    p.add_argument("--duration", type=float, default=0.0,
                   help="seconds to run in real time after the backfill (0: forever)")  # fmt: skip
    p.add_argument("--ingest-key-id", default=os.environ.get("CLUSTERUI_INGEST_KEY_ID", ""),
                   help="sign batches with this cluster ingest key (id)")  # fmt: skip
    p.add_argument("--ingest-key", default=os.environ.get("CLUSTERUI_INGEST_KEY", ""),
                   help="the cluster secret of that key (or CLUSTERUI_INGEST_KEY): each "
                        "simulated node signs with its own key derived from it")  # fmt: skip
    p.add_argument("--stdout", action="store_true", help="print batches as JSON lines")
    p.add_argument("--report", default=None,
                   help="at exit, write what was produced per node to this JSON file")
    p.add_argument("--mig-nodes", type=int, default=0,
                   help="nodes whose GPUs are MIG instances (1g.10gb) of MIG-enabled H100s")
    p.add_argument("--no-fabric-faults", action="store_true",
                   help="do not degrade two simulated fabric links (on by default)")
    p.add_argument("--log-level", default="WARNING")
    args = p.parse_args(argv)
    if args.nodes < 1 or args.gpus < 1 or args.interval <= 0 or args.flush < args.interval:
        p.error("need --nodes >= 1, --gpus >= 1, --interval > 0 and --flush >= --interval")
    return args


class _Output:
    """Where batches go: stdout, or one real `Shipper` (and spool) per node."""

    def __init__(self, args, node_names: list[str]) -> None:
        self.stdout = args.stdout
        self.shipped = self.spooled = 0
        self.produced: dict[str, dict] = {}
        self.shippers = {}
        if self.stdout:
            return
        from collectors.transport import RedisSender, Shipper, Spool

        spool_root = args.spool_dir or os.path.join(tempfile.gettempdir(), "clusterui-sim-spool")
        # The simulator plays every node, so it holds the cluster secret; each node's batches
        # are still signed with that node's own derived key, as a real node's would be.
        key = (signing.node_signer(args.ingest_key_id, args.ingest_key)
               if args.ingest_key_id else None)
        self.sender = RedisSender(args.broker_url, args.queue, key)
        for name in node_names:
            spool = Spool(os.path.join(spool_root, name), args.spool_max_bytes)
            self.shippers[name] = Shipper(self.sender, spool)

    def send(self, batches: list[dict]) -> None:
        for batch in batches:  # what the collectors produced, whatever becomes of it
            made = self.produced.setdefault(batch["node"], {"batches": 0, "gpu_samples": 0,
                                                            "last_seq": 0})
            made["batches"] += 1
            made["gpu_samples"] += len(batch["gpu_samples"]["rows"])
            made["last_seq"] = batch["agent"]["seq"]
        if self.stdout:
            for batch in batches:
                sys.stdout.write(json.dumps(batch, separators=(",", ":")) + "\n")
            sys.stdout.flush()
            self.shipped += len(batches)
            return
        broker_down = False
        for batch in batches:
            shipper = self.shippers[batch["node"]]
            if broker_down:  # don't wait for a connect timeout once per node
                shipper.spool.put(batch)
                self.spooled += 1
                continue
            if shipper.ship(batch):
                self.shipped += 1
            else:
                self.spooled += 1
                broker_down = True

    def close(self) -> None:
        if not self.stdout:
            self.sender.close()


def main(argv=None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if args.state_file:
        try:
            resumed = progress.read(args.state_file)
        except (OSError, progress.ProgressError) as exc:
            print(f"clusterui-simcluster: --state-file {exc}", file=sys.stderr)
            return 2
        args.after, args.first_job_id = progress.later(resumed, args.after, args.first_job_id)
    launched = time.time()
    first = math.floor((launched - args.backfill) / args.interval) * args.interval
    if args.after is not None:  # nothing at or before what is already stored
        first = max(first, (math.floor(args.after / args.interval) + 1) * args.interval)
    backfill = max(0.0, launched - first)
    sim = ClusterSim(
        nodes=args.nodes,
        gpus_per_node=args.gpus,
        seed=args.seed,
        start=first,
        root_dir=args.root,
        cluster=args.cluster,
        interval=args.interval,
        flush=args.flush,
        mig_nodes=args.mig_nodes,
        first_job_id=args.first_job_id,
        earliest_start=args.after,
    )
    faults = [] if args.no_fabric_faults else sim.add_fabric_faults(launched)
    out = _Output(args, [n.name for n in sim.nodes])
    stop_at = launched + args.duration if args.duration > 0 else math.inf
    print(
        f"clusterui-simcluster: SIMULATED cluster {args.cluster!r}: {args.nodes} nodes x "
        f"{args.gpus} GPUs, {len(sim.running_jobs())} jobs running, backfilling "
        f"{backfill:.0f} s, trees under {sim.root_dir}"
        + (f"; SIMULATED fabric faults: {', '.join(faults)}" if faults else ""),
        file=sys.stderr,
    )
    t = first
    stepped = None  # the newest sample time generated (None: none yet)
    backfill_flush = max(args.flush, args.backfill_flush or args.flush)

    def flush_period(t: float) -> float:
        return backfill_flush if t < launched - args.interval else args.flush

    next_flush = first + flush_period(first)

    def send() -> None:
        out.send(sim.flush())
        if args.state_file and stepped is not None:  # not before its first tick
            progress.write(args.state_file, progress.Progress(stepped, sim.next_job_id))
    next_report = time.monotonic() + 60
    try:
        while not stop.is_set() and t <= stop_at:
            wait = t - time.time()
            if wait > 0 and stop.wait(wait):
                break
            sim.step(t)
            stepped = t
            # Flush when due, and at once when back-fill ends (its longer period no longer applies).
            if t >= next_flush or next_flush - t > flush_period(t):
                send()
                next_flush = t + flush_period(t)
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + 60
                _report(sim, out, t)
            t += args.interval
        send()
    finally:
        _report(sim, out, sim.now)
        out.close()
        sim.close()
        if args.report:
            with open(args.report, "w") as fh:
                json.dump({"nodes": out.produced}, fh)
    return 0


def _report(sim: ClusterSim, out: _Output, t: float) -> None:
    lag = max(0.0, time.time() - t)
    print(
        f"clusterui-simcluster: sim time {time.strftime('%H:%M:%S', time.localtime(t))}"
        f"{f' ({lag:.0f} s behind, backfilling)' if lag > 2 * sim.interval else ''}: "
        f"{len(sim.running_jobs())} jobs running, {out.shipped} batches sent, "
        f"{out.spooled} spooled",
        file=sys.stderr,
    )


__all__ = ["ClusterSim", "main"]

if __name__ == "__main__":
    sys.exit(main())
