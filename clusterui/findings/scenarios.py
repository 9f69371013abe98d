"""The labelled scenario suite: every simulator behaviour, and negative cases, run through
the real collector, ingest and detector pass, and scored against the findings expected.

``run_suite(interval)`` builds simulated nodes (``collectors.sim``) holding one job per
case, samples them with the real ``collectors.agent.Agent`` every ``interval`` seconds,
stores each batch with ``ingest_envelope``, runs one detector pass at the end and compares
the kinds raised for each job with the case's expected set: for the simulator's scenarios
``collectors.sim.scenarios.EXPECTED_FINDINGS``, and for the negative cases nothing. A
straggler finding must also name the node the scenario slowed down
(``collectors.sim.scenarios.straggler_rank``).

Jobs start well before the data (past the grace period), except the grace cases, which
start minutes before the end and must raise nothing. It writes to the configured database:
``manage.py scenario_report`` runs it inside a transaction it rolls back.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from clusterui.findings.choices import FindingKind
from clusterui.findings.detectors import RETIRED_KINDS
from clusterui.findings.models import Finding
from clusterui.findings.runner import run_pass
from clusterui.findings.thresholds import Thresholds
from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from collectors.sim.hardware import A100_PCIE, H100_SXM
from collectors.sim.node import SimJob, SimNode
from collectors.sim.scenarios import (
    EXPECTED_FINDINGS,
    EXPECTED_NODE_FINDINGS,
    STRAGGLERS,
    Scenario,
    straggler_rank,
)
from collectors.sim.signals import mix

# The kinds the pass raises (a retired kind is only on findings stored before it was).
KINDS = tuple(k.value for k in FindingKind if k not in RETIRED_KINDS)
# Judged from a node's health state, not from a job's samples: no job scenario raises them
# (a false one is still counted); their faults have end-to-end tests of their own
# (tests/alerts/test_gpu_health_mail.py, tests/findings/test_fabric_link.py).
NODE_HEALTH_KINDS = (FindingKind.GPU_HEALTH.value, FindingKind.FABRIC_LINK.value)
# The node kinds scored per case: those a scenario expects on its nodes (fabric_link on an
# erroring port's node). gpu_health is not: the XID scenario's uncorrectable ECC events
# rightly ask for a reset of its node, which other cases share (its own tests cover it).
NODE_SCORED_KINDS = sorted({k for kinds in EXPECTED_NODE_FINDINGS.values() for k in kinds})
GPUS_PER_NODE = 8
CPUS_PER_GPU = 12
FLUSH_S = 60.0
# Data per run: enough past the minute boundary for the minimum span and samples.
DURATION_S = {1: 420.0, 10: 720.0}


@dataclass(frozen=True)
class Case:
    name: str
    scenario: Scenario
    gpus: int = 2  # per node
    nodes: int = 1
    model: str = H100_SXM.name
    started_before_s: float = 1800.0  # before the data starts; negative: after
    negative: bool = False  # a negative case: nothing may be raised

    @property
    def expected(self) -> set[str]:
        return set() if self.negative else set(EXPECTED_FINDINGS[self.scenario])

    @property
    def expected_node(self) -> set[str]:
        """Node findings (no job) expected on the straggler node of the case's job."""
        return set() if self.negative else set(EXPECTED_NODE_FINDINGS.get(self.scenario, ()))


S = Scenario
CASES: tuple[Case, ...] = (
    # Every behaviour of the simulator.
    Case("healthy", S.HEALTHY, gpus=4),
    Case("idle_gpus", S.IDLE_GPUS, gpus=8),
    Case("idle", S.IDLE),
    Case("spiky_low", S.SPIKY_LOW),
    Case("input_bound", S.INPUT_BOUND),
    Case("comm_bound_multinode", S.COMM_BOUND_MULTINODE, gpus=8, nodes=2),
    Case("comm_bound_nvlink", S.COMM_BOUND_NVLINK, gpus=8),
    Case("healthy_multinode", S.HEALTHY_MULTINODE, gpus=8, nodes=2),
    Case("busy_not_busy", S.BUSY_NOT_BUSY),
    Case("thermal_throttle", S.THERMAL_THROTTLE),
    Case("power_throttle", S.POWER_THROTTLE, gpus=4),
    Case("xid", S.XID, started_before_s=960.0),  # an Xid ~40 s into the data
    Case("moderate", S.MODERATE, gpus=4),
    # The same on A100 PCIe boards: NVML utilization only (no GPM), no NVLink.
    Case("comm_bound_multinode_a100", S.COMM_BOUND_MULTINODE, gpus=8, nodes=2,
         model=A100_PCIE.name),
    Case("input_bound_a100", S.INPUT_BOUND, model=A100_PCIE.name),
    Case("thermal_throttle_a100", S.THERMAL_THROTTLE, model=A100_PCIE.name),
    # Multi-node jobs in lockstep with one slow node: busy while the others wait, thermally
    # throttled, or on a degraded fabric link.
    Case("straggler_slow_node", S.STRAGGLER_SLOW_NODE, gpus=8, nodes=3),
    Case("straggler_throttled", S.STRAGGLER_THROTTLED, gpus=8, nodes=3),
    Case("straggler_slow_link", S.STRAGGLER_SLOW_LINK, gpus=8, nodes=3),
    Case("straggler_erroring_port", S.STRAGGLER_ERRORING_PORT, gpus=8, nodes=3),
    Case("straggler_slow_node_a100", S.STRAGGLER_SLOW_NODE, gpus=8, nodes=2,
         model=A100_PCIE.name),
    Case("comm_bound_4nodes", S.COMM_BOUND_MULTINODE, gpus=8, nodes=4),
    # Negatives: healthy multi-node jobs with high traffic, moderately busy jobs, and jobs
    # inside their grace period.
    Case("healthy_multinode_a100", S.HEALTHY_MULTINODE, gpus=8, nodes=2,
         model=A100_PCIE.name, negative=True),
    Case("moderate_a100", S.MODERATE, gpus=4, model=A100_PCIE.name, negative=True),
    # Healthy lockstep multi-node jobs: nodes that wait for each other alike, no straggler.
    Case("healthy_lockstep_4nodes", S.HEALTHY_MULTINODE, gpus=8, nodes=4, negative=True),
    Case("moderate_lockstep_3nodes", S.MODERATE, gpus=8, nodes=3, negative=True),
    Case("idle_in_grace", S.IDLE, started_before_s=-240.0, negative=True),
    Case("idle_gpus_in_grace", S.IDLE_GPUS, gpus=8, started_before_s=-240.0, negative=True),
    Case("comm_bound_in_grace", S.COMM_BOUND_NVLINK, gpus=8, started_before_s=-240.0,
         negative=True),
)


@dataclass
class CaseResult:
    case: Case
    interval: float
    job_id: str
    raised: set[str]
    straggler_node: str | None = None  # the node the scenario slowed down
    named_node: str | None = None  # the node a straggler finding named
    # Node findings (no job) of NODE_SCORED_KINDS on the case's nodes: {node: kinds}.
    node_raised: dict[str, set[str]] = field(default_factory=dict)

    @property
    def node_correct(self) -> bool:
        """The node findings expected on the straggler node, and none elsewhere."""
        expected = ({self.straggler_node: self.case.expected_node}
                    if self.case.expected_node else {})
        return {n: k for n, k in self.node_raised.items() if k} == expected

    @property
    def correct(self) -> bool:
        if "straggler" in self.raised and self.named_node != self.straggler_node:
            return False
        return self.raised == self.case.expected and self.node_correct


@dataclass
class SuiteResult:
    interval: float
    results: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0
    gpu_samples: int = 0

    def wrong(self) -> list[CaseResult]:
        return [r for r in self.results if not r.correct]


class _Cluster:
    """Simulated nodes, each sampled by a real collector agent, on a virtual clock."""

    def __init__(self, prefix: str, models: list[str], seed: int, interval: float,
                 start: float, root: str, cluster: str) -> None:
        from collectors.agent import Agent
        from collectors.sim.nvml import SimNVML

        self.now = start
        self.nodes = [
            SimNode(f"{root}/{prefix}{i:03d}", f"{prefix}{i:03d}", gpus=GPUS_PER_NODE,
                    model=model, seed=mix(seed, i) % 2**31)
            for i, model in enumerate(models)
        ]
        self.nvmls = [SimNVML(n) for n in self.nodes]
        self.agents = [
            Agent(n.collector_config(cluster=cluster, interval=interval, flush=FLUSH_S),
                  nvml=nvml, clock=lambda: self.now)
            for n, nvml in zip(self.nodes, self.nvmls, strict=True)
        ]

    def start(self) -> None:
        for node in self.nodes:
            node.advance(self.now)

    def step(self, t: float) -> None:
        self.now = t
        for node in self.nodes:
            node.advance(t)
        for nvml in self.nvmls:
            nvml.settle_events()
        for agent in self.agents:
            agent.sample()

    def flush(self) -> list[dict]:
        return [agent.build_batch() for agent in self.agents]

    def close(self) -> None:
        # Each agent joins its Xid watcher thread (up to its wait timeout): all at once.
        with ThreadPoolExecutor(max_workers=len(self.agents) or 1) as pool:
            list(pool.map(lambda agent: agent.close(), self.agents))


def _fast_tmp() -> str | None:
    """The simulated nodes rewrite thousands of small files a minute: RAM when we can."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _layout(cases) -> tuple[list[str], dict[str, list[tuple[int, tuple[int, ...]]]]]:
    """Nodes (their models) and each case's allocation [(node, gpus)], first fit."""
    models: list[str] = []
    free: list[int] = []
    alloc: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
    for case in cases:
        if case.nodes > 1 or case.gpus == GPUS_PER_NODE:
            chosen = []
            for _ in range(case.nodes):
                models.append(case.model)
                free.append(0)
                chosen.append((len(models) - 1, tuple(range(case.gpus))))
            alloc[case.name] = chosen
            continue
        for i, model in enumerate(models):
            if model == case.model and free[i] >= case.gpus:
                break
        else:
            models.append(case.model)
            free.append(GPUS_PER_NODE)
            i = len(models) - 1
        first = GPUS_PER_NODE - free[i]
        alloc[case.name] = [(i, tuple(range(first, first + case.gpus)))]
        free[i] -= case.gpus
    return models, alloc


def run_suite(interval: float, *, end: float | None = None, seed: int = 7,
              cases: tuple[Case, ...] = CASES, thresholds: Thresholds | None = None
              ) -> SuiteResult:
    """Simulate every case at ``interval`` s sampling up to ``end``, store it, run one
    detector pass and score it."""
    began = time.perf_counter()
    interval = float(interval)
    duration = DURATION_S.get(int(interval), max(720.0, 80 * interval))
    end = math.floor((end or time.time()) / interval) * interval
    start = end - math.ceil(duration / interval) * interval
    tag = f"s{int(interval)}"
    cluster = f"scenarios-{tag}"
    models, alloc = _layout(cases)
    result = SuiteResult(interval=interval)
    with tempfile.TemporaryDirectory(prefix="clusterui-scenarios-", dir=_fast_tmp()) as root:
        sim = _Cluster(f"{tag}-n", models, seed, interval, start, root, cluster)
        jobs = {}
        for k, case in enumerate(cases):
            job_seed = mix(seed, zlib.crc32(case.name.encode())) % 2**31
            job_start = (start - case.started_before_s if case.started_before_s > 0
                         else end + case.started_before_s)
            placed = alloc[case.name]
            job = SimJob(
                id=f"{tag}-{k:02d}-{case.name}", scenario=case.scenario, user="alice",
                uid=61001, account="nlp", partition="gpu", name=case.name,
                start=float(round(job_start)), end=None,
                nodes=tuple(sim.nodes[i].name for i, _ in placed), gpus_per_node=case.gpus,
                cpus_per_node=case.gpus * CPUS_PER_GPU, seed=job_seed,
                gpus=tuple((sim.nodes[i].name, g) for i, g in placed),
            )
            for rank, (i, gpus) in enumerate(placed):
                sim.nodes[i].place(job, gpus, node_rank=rank)
            jobs[case.name] = job
        try:
            sim.start()
            t, next_flush = start, start + FLUSH_S
            while t < end:
                t = min(end, t + interval)
                sim.step(t)
                if t >= next_flush or t >= end:
                    for batch in sim.flush():
                        stored = ingest_envelope(batch)
                        if stored is not None:
                            result.gpu_samples += stored.gpu_samples
                    next_flush = t + FLUSH_S
        finally:
            sim.close()
    t = thresholds or Thresholds.from_settings()
    now = dt.datetime.fromtimestamp(end + t.settle_s, dt.UTC)
    # As beat would: passes until no job has a backlog left (at 1 s, 7 min of data is
    # more than one pass takes in).
    for _ in range(20):
        if not run_pass(now=now, thresholds=t).behind:
            break
    raised: dict[str, set[str]] = {}
    named: dict[str, str] = {}
    for external_id, kind, node in Finding.objects.filter(
            job__cluster__name=cluster).values_list("job__external_id", "kind", "node__name"):
        raised.setdefault(external_id, set()).add(kind)
        if kind == FindingKind.STRAGGLER:
            named[external_id] = node
    on_node: dict[str, set[str]] = {}
    for kind, node in Finding.objects.filter(
            job__isnull=True, node__cluster__name=cluster, kind__in=NODE_SCORED_KINDS
    ).values_list("kind", "node__name"):
        on_node.setdefault(node, set()).add(kind)
    known = set(Job.objects.filter(cluster__name=cluster).values_list("external_id", flat=True))
    for case in cases:
        job = jobs[case.name]
        if job.id not in known:
            raise RuntimeError(f"scenario job {job.id} was not stored")
        slow = (job.nodes[straggler_rank(job.seed, len(job.nodes))]
                if case.scenario in STRAGGLERS else None)
        # A node shared by single-node cases: its node findings count against each of them.
        node_raised = {n: on_node[n] for n in job.nodes if n in on_node}
        result.results.append(CaseResult(case, interval, job.id, raised.get(job.id, set()),
                                         slow, named.get(job.id), node_raised))
    result.seconds = time.perf_counter() - began
    return result


@dataclass
class Confusion:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def tally(outcomes) -> dict[str, Confusion]:
    """Per kind, the confusion of ``outcomes``: (kinds expected, kinds raised) pairs."""
    out = {k: Confusion() for k in KINDS}
    for expected, raised in outcomes:
        for kind, c in out.items():
            if kind in expected and kind in raised:
                c.tp += 1
            elif kind in expected:
                c.fn += 1
            elif kind in raised:
                c.fp += 1
            else:
                c.tn += 1
    return out


def confusion(results: list[CaseResult]) -> dict[str, Confusion]:
    return tally((r.case.expected, r.raised) for r in results)


def ratio(value: float | None) -> str:
    return "   -" if value is None else f"{value:.2f}"


def report(suites: list[SuiteResult]) -> str:
    """The confusion matrix per kind (one per interval, and all together) and the errors."""
    lines = []
    groups = [(f"{s.interval:g} s sampling ({len(s.results)} cases, {s.seconds:.0f} s)",
               s.results) for s in suites]
    if len(suites) > 1:
        groups.append(("all intervals", [r for s in suites for r in s.results]))
    for title, results in groups:
        lines.append(f"Confusion matrix per kind, {title}:")
        lines.append(f"  {'kind':<16} {'TP':>3} {'FP':>3} {'FN':>3} {'TN':>3}  precision  recall")
        for kind, c in confusion(results).items():
            lines.append(f"  {kind:<16} {c.tp:>3} {c.fp:>3} {c.fn:>3} {c.tn:>3}  "
                         f"{ratio(c.precision):>9}  {ratio(c.recall):>6}")
        lines.append("")
    wrong = [r for s in suites for r in s.wrong()]
    lines.append("Cases:")
    for s in suites:
        for r in s.results:
            expected = ", ".join(sorted(r.case.expected)) or "nothing"
            raised = ", ".join(sorted(r.raised)) or "nothing"
            mark = "ok   " if r.correct else "WRONG"
            node = ""
            if r.straggler_node or r.named_node:
                node = (f" (slow node {r.straggler_node or 'none'}, named "
                        f"{r.named_node or 'none'})")
            for name, kinds in sorted(r.node_raised.items()):
                node += f"; node finding on {name}: {', '.join(sorted(kinds))}"
            if r.case.expected_node:
                node += f"; expected on the slow node: {', '.join(sorted(r.case.expected_node))}"
            lines.append(f"  {mark} {s.interval:>3g} s  {r.case.name:<27} expected {expected}; "
                         f"raised {raised}{node}")
    lines.append("")
    lines.append(f"{sum(len(s.results) for s in suites) - len(wrong)} of "
                 f"{sum(len(s.results) for s in suites)} cases classified correctly.")
    return "\n".join(lines)
