"""Run the matrix against a server and score it: precision and recall per finding kind,
per sampling rate and per delivery shape; findings on the run's nodes that no job holds;
findings whose times run backwards; straggler findings that name another node than the one
the case slowed down; node findings (a fabric link) missing from the node a case expects
them on, or raised on any other node."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field

from clusterui.findings.matrix.client import Server
from clusterui.findings.matrix.delivery import SHAPE_RUNNERS
from clusterui.findings.matrix.generate import Plan
from clusterui.findings.scenarios import KINDS, Confusion, ratio, tally


@dataclass
class Outcome:
    shape: str
    rate: int
    case: str
    expected: frozenset[str]
    raised: set[str]
    slow_node: str | None = None  # the node the case slowed down
    named: set[str] = field(default_factory=set)  # the nodes its straggler findings named

    @property
    def names_the_wrong_node(self) -> bool:
        return "straggler" in self.raised and self.named != {self.slow_node}

    @property
    def correct(self) -> bool:
        return self.raised == set(self.expected) and not self.names_the_wrong_node


@dataclass
class MatrixResult:
    plan: Plan
    outcomes: list[Outcome] = field(default_factory=list)
    node_findings: list[str] = field(default_factory=list)  # unexpected ones
    missing_node_findings: list[str] = field(default_factory=list)
    expected_node_findings: int = 0  # raised where a case expects them
    disordered: list[str] = field(default_factory=list)
    batches: int = 0
    seconds: float = 0.0

    def confusion(self, shape: str | None = None, rate: int | None = None
                  ) -> dict[str, Confusion]:
        return tally((o.expected, o.raised) for o in self.outcomes
                     if (not shape or o.shape == shape) and (not rate or o.rate == rate))

    def wrong(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.correct]

    def meets(self, floor: float = 0.95) -> bool:
        """Precision and recall at least ``floor`` for every kind in every (shape, rate),
        nothing raised on a negative, no node finding, no finding with its times disordered,
        no straggler finding naming another node than the slowed one."""
        if self.node_findings or self.missing_node_findings or self.disordered:
            return False
        if any(o.names_the_wrong_node for o in self.outcomes):
            return False
        if any(o.raised for o in self.outcomes if not o.expected):
            return False
        for shape in self.plan.feeds:
            for rate in {o.rate for o in self.outcomes}:
                for c in self.confusion(shape, rate).values():
                    if any(v is not None and v < floor for v in (c.precision, c.recall)):
                        return False
        return True


def _times(f: dict) -> list[str]:
    problems = []
    parse = dt.datetime.fromisoformat
    first, last = parse(f["first_seen"]), parse(f["last_seen"])
    if last < first:
        problems.append(f"last_seen {f['last_seen']} before first_seen {f['first_seen']}")
    if f["closed_at"] and parse(f["closed_at"]) < last:
        problems.append(f"closed_at {f['closed_at']} before last_seen {f['last_seen']}")
    if f["window_start"] and f["window_end"] and parse(f["window_end"]) < parse(
            f["window_start"]):
        problems.append("window ends before it starts")
    return problems


def run(server: Server, plan: Plan, *, timeout: float) -> MatrixResult:
    """Send every shape's batches as the shape says, wait until the server has ended and
    finalized every job, and read back what it found."""
    began = time.monotonic()
    server.account = plan.account
    for shape in plan.feeds:
        SHAPE_RUNNERS[shape](plan, server)
    server.wait_settled(len(plan.jobs), timeout)
    result = MatrixResult(plan, batches=server.sent)
    raised: dict[str, set[str]] = {}
    named: dict[str, set[str]] = {}
    for f in server.findings(plan.account):
        raised.setdefault(f["job"]["external_id"], set()).add(f["kind"])
        if f["kind"] == "straggler":
            named.setdefault(f["job"]["external_id"], set()).add(f["node"])
        for problem in _times(f):
            result.disordered.append(f"{f['job']['external_id']} {f['kind']}: {problem}")
    expected_on = {(job.nodes[job.case.slow_node], kind): job for job in plan.jobs
                   for kind in job.case.node_expected}
    seen = set()
    for f in server.node_findings(f"mx-{plan.run}-"):
        if (f["node"], f["kind"]) in expected_on:
            seen.add((f["node"], f["kind"]))
        else:
            result.node_findings.append(f"{f['node']}: {f['kind']} {f['title']}")
    result.expected_node_findings = len(seen)
    result.missing_node_findings = [f"{node}: {kind} ({job.case.name})" for (node, kind), job
                                    in sorted(expected_on.items()) if (node, kind) not in seen]
    for job in plan.jobs:
        slow = None if job.case.slow_node is None else job.nodes[job.case.slow_node]
        result.outcomes.append(Outcome(job.shape, job.rate, job.case.name, job.case.expected,
                                       raised.get(job.external_id, set()), slow,
                                       named.get(job.external_id, set())))
    result.seconds = time.monotonic() - began
    return result


def report(result: MatrixResult) -> str:
    shapes = list(result.plan.feeds)
    rates = sorted({o.rate for o in result.outcomes})
    cases = len({o.case for o in result.outcomes})
    lines = [
        f"Scenario matrix through the queue: {cases} cases x {len(rates)} sampling rates x "
        f"{len(shapes)} delivery shapes = {len(result.outcomes)} jobs, {result.batches} "
        f"batches, {result.seconds:.0f} s (simulated data, cluster {result.plan.cluster!r}, "
        f"account {result.plan.account!r}).",
        "",
        "All shapes and rates:",
        f"  {'kind':<16} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4}  precision  recall",
    ]
    for kind, c in result.confusion().items():
        lines.append(f"  {kind:<16} {c.tp:>4} {c.fp:>4} {c.fn:>4} {c.tn:>4}  "
                     f"{ratio(c.precision):>9}  {ratio(c.recall):>6}")
    lines += ["", "Precision/recall per kind, per delivery shape and sampling rate "
                  "('-': no case of that kind raised or expected):"]
    header = "  " + f"{'shape':<13} {'rate':>4}  " + "  ".join(f"{k[:12]:>12}" for k in KINDS)
    lines.append(header)
    for shape in shapes:
        for rate in rates:
            cells = []
            for c in result.confusion(shape, rate).values():
                cells.append(f"{ratio(c.precision).strip()}/{ratio(c.recall).strip()}")
            lines.append(f"  {shape:<13} {rate:>3}s  " + "  ".join(f"{x:>12}" for x in cells))
    wrong = result.wrong()
    lines += ["", f"{len(result.outcomes) - len(wrong)} of {len(result.outcomes)} jobs "
                  "classified correctly."]
    for o in wrong:
        lines.append(f"  WRONG {o.shape:<13} {o.rate:>2} s  {o.case:<22} expected "
                     f"{', '.join(sorted(o.expected)) or 'nothing'}; raised "
                     f"{', '.join(sorted(o.raised)) or 'nothing'}"
                     + (f" (named {', '.join(sorted(o.named))} for slow node {o.slow_node})"
                        if o.names_the_wrong_node else ""))
    expected_nodes = result.expected_node_findings + len(result.missing_node_findings)
    if expected_nodes:
        lines.append(f"{result.expected_node_findings} of {expected_nodes} expected node "
                     "findings raised on the node expected.")
    for line in result.node_findings:
        lines.append(f"  NODE FINDING (no job) {line}")
    for line in result.missing_node_findings:
        lines.append(f"  MISSING NODE FINDING {line}")
    for line in result.disordered:
        lines.append(f"  TIMES OUT OF ORDER {line}")
    return "\n".join(lines)
