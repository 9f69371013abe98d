"""Straggler (fail-slow node): one node of a multi-node job holds the others back.

A synchronous multi-node job (data-parallel training, most MPI codes) runs at the pace of
its slowest rank: every step the others finish, then wait for it at the next collective.
From outside the job this shows as one node that stands out from its peers over the window,
while the peers look alike (they wait in lockstep). The nodes are compared with each other,
never with a cluster-wide figure, so a job that is uniformly slow is not a straggler:

- **slow rank**: the node's GPUs are busier (GPM SM activity where reported, NVML
  utilization otherwise) than the median of its peers by at least
  ``straggler_busy_gap_pct`` points, while the peers, node by node and GPU by GPU, lie
  within half that gap of each other (a peer with an idle GPU is not waiting in lockstep);
- **throttled**: the node's GPUs are held back by a throttle reason (the ``throttling``
  detector's reasons: power cap, thermal, hardware slowdown, power brake) in at least
  ``throttle_share`` of their samples at a clock at most ``throttle_clock_pct`` of what its
  peers' GPUs reach unthrottled, while the peers are not (median share below a third of
  it), and the peers wait for it: they are at least ``straggler_wait_gap_pct`` points less
  busy;
- **slow link**: the node's fabric NICs (InfiniBand/RoCE, else Ethernet) carry at most
  ``straggler_fabric_ratio`` of the median traffic of its peers' (in % of each node's link
  capacity), where the peers run at least ``straggler_fabric_min_pct`` of capacity, and no
  other node is that low;
- **erroring port**: the error counters of the node's fabric ports (symbol errors, link
  error recoveries, receive errors, ...: ``fabric_porterrors``) rose by at least
  ``fabric_errors`` (``DETECTOR_FABRIC_ERRORS``, the ``fabric_link`` finding's threshold)
  over the window while no peer's did, and the node's fabric traffic is at most
  ``straggler_error_traffic_ratio`` of its peers' median (retransmissions and link
  recoveries cost it throughput; the peers run at least ``straggler_fabric_min_pct``). The
  errors alone say the link is bad (the node finding ``fabric_link``); the traffic says the
  job pays for it.

The GPU-hours the job loses to the node over the window (an estimate, its basis in the
evidence): where the peers wait for a busier node, each peer GPU's waiting share
``1 - busy(peer GPU) / busy(node)`` times the window; for a slow link alone, the time every
GPU of the job was not busy times ``1 - traffic(node) / traffic(peers)``: the share of the
communication time that a link as fast as the peers' would save, if that time is spent
moving data (likewise for an erroring port, whose link is slowed by its retransmissions).
Published straggler studies work from step timings inside the job; these are
the counters' view of the same effect, for every job, from outside it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.detectors.base import (
    Decision,
    duration,
    pct,
    plural,
    r2,
    severity_from_waste,
)
from clusterui.findings.thresholds import THROTTLE_NAMES, Thresholds
from clusterui.findings.window import GpuWindow, JobWindow

KIND = FindingKind.STRAGGLER
PER_NODE_MAX = 32  # the evidence lists every node up to this many, else the odd one and a summary


@dataclass
class NodeWindow:
    name: str
    node_id: int | None
    gpus: list[GpuWindow] = field(default_factory=list)
    fabric_pct: float | None = None
    port_errors: dict[str, int] = field(default_factory=dict)  # counter -> increase

    @property
    def error_total(self) -> int:
        return sum(self.port_errors.values())

    def _mean(self, attr: str) -> float | None:
        values = [(getattr(g, attr), g.samples) for g in self.gpus
                  if getattr(g, attr) is not None]
        weight = sum(n for _, n in values)
        return sum(v * n for v, n in values) / weight if weight else None

    @property
    def busy(self) -> float | None:
        return self._mean("busy_mean")

    @property
    def throttled_share(self) -> float:
        return self._mean("throttled_share") or 0.0

    @property
    def throttled_clock_mhz(self) -> float | None:
        return self._mean("throttled_clock_mhz")

    @property
    def free_clock_mhz(self) -> float | None:
        return max((g.free_clock_max_mhz for g in self.gpus if g.free_clock_max_mhz),
                   default=None)

    @property
    def throttle_bits(self) -> int:
        bits = 0
        for g in self.gpus:
            bits |= g.throttle_bits
        return bits


def nodes_of(w: JobWindow) -> list[NodeWindow]:
    by_name: dict[str, NodeWindow] = {}
    for g in w.gpus:
        by_name.setdefault(g.node, NodeWindow(g.node, g.node_id)).gpus.append(g)
    for name, fabric in w.node_fabric.items():
        if name in by_name:
            by_name[name].fabric_pct = fabric
    for name, errors in w.node_port_errors.items():
        if name in by_name:
            by_name[name].port_errors = dict(errors)
    return sorted(by_name.values(), key=lambda n: n.name)


def _slow_rank(nodes: list[NodeWindow], t: Thresholds):
    busy = [n for n in nodes if n.busy is not None]
    if len(busy) < 2:
        return None
    odd = max(busy, key=lambda n: n.busy)
    peers = [n.busy for n in busy if n is not odd]
    gap = odd.busy - statistics.median(peers)
    # Lockstep is every peer GPU alike, not only the peer nodes' means: a peer node whose
    # mean is low because one of its GPUs is idle (the idle_gpu finding's subject) is not
    # waiting for the odd node.
    peer_gpus = [g.busy_mean for n in busy if n is not odd for g in n.gpus
                 if g.busy_mean is not None]
    if (gap >= t.straggler_busy_gap_pct and max(peers) - min(peers) <= gap / 2
            and max(peer_gpus) - min(peer_gpus) <= gap / 2):
        return odd
    return None


def _throttled(nodes: list[NodeWindow], w: JobWindow, t: Thresholds):
    held = []
    for n in nodes:
        if n.throttled_share < t.throttle_share:
            continue
        refs = [p.free_clock_mhz for p in nodes if p is not n and p.free_clock_mhz]
        refs += [w.reference_clock_mhz.get(g.model) for g in n.gpus
                 if w.reference_clock_mhz.get(g.model)]
        ref = max(refs) if refs else None
        clock = n.throttled_clock_mhz
        if ref and clock is not None and 100 * clock / ref > t.throttle_clock_pct:
            continue
        held.append((n, ref))
    if len(held) != 1:
        return None  # none, or several nodes held back: not one node holding the job
    odd, ref = held[0]
    peers = [n for n in nodes if n is not odd]
    if statistics.median(n.throttled_share for n in peers) >= t.throttle_share / 3:
        return None
    peer_busy = [n.busy for n in peers if n.busy is not None]
    if odd.busy is None or not peer_busy:
        return None
    if odd.busy - statistics.median(peer_busy) < t.straggler_wait_gap_pct:
        return None  # the others do not wait for it
    return odd, ref


def _slow_link(nodes: list[NodeWindow], t: Thresholds):
    measured = [n for n in nodes if n.fabric_pct is not None]
    if len(measured) < 2:
        return None
    odd = min(measured, key=lambda n: n.fabric_pct)
    peers = statistics.median(n.fabric_pct for n in measured if n is not odd)
    if peers < t.straggler_fabric_min_pct:
        return None
    limit = t.straggler_fabric_ratio * peers
    if sum(1 for n in measured if n.fabric_pct <= limit) != 1:
        return None  # no node that low, or several: not one node's link
    return odd, peers


def _erroring_port(nodes: list[NodeWindow], t: Thresholds):
    erroring = [n for n in nodes if n.error_total >= t.fabric_errors]
    if len(erroring) != 1:
        return None  # none, or several nodes' ports: not one node's link (or a switch)
    odd = erroring[0]
    peers = [n.fabric_pct for n in nodes if n is not odd and n.fabric_pct is not None]
    if odd.fabric_pct is None or not peers:
        return None
    median = statistics.median(peers)
    if median < t.straggler_fabric_min_pct:
        return None  # a quiet network: the ratio of small numbers means nothing
    if odd.fabric_pct > t.straggler_error_traffic_ratio * median:
        return None  # errors, but the link keeps up: the fabric_link finding's business
    return odd, median


def _reasons(bits: int) -> str:
    return ", ".join(name for bit, name in THROTTLE_NAMES.items() if bits & bit)


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    if w.nodes < 2:
        return None
    nodes = nodes_of(w)
    if len(nodes) < 2:
        return None
    found: dict[str, list[str]] = {}
    slow = _slow_rank(nodes, t)
    if slow is not None:
        found.setdefault(slow.name, []).append("busy")
    throttled = _throttled(nodes, w, t)
    if throttled is not None:
        found.setdefault(throttled[0].name, []).append("throttled")
    link = _slow_link(nodes, t)
    if link is not None:
        found.setdefault(link[0].name, []).append("fabric")
    erroring = _erroring_port(nodes, t)
    if erroring is not None:
        found.setdefault(erroring[0].name, []).append("errors")
    if not found:
        return None
    # The node with the most evidence; a cause (throttling, port errors) before a symptom.
    order = {"throttled": 0, "busy": 1, "errors": 2, "fabric": 3}
    name = min(found, key=lambda k: (-len(found[k]), min(order[r] for r in found[k])))
    reasons = sorted(found[name], key=order.get)
    odd = next(n for n in nodes if n.name == name)
    peers = [n for n in nodes if n is not odd]
    peers_fabric = (link[1] if link and "fabric" in reasons
                    else erroring[1] if erroring and "errors" in reasons else None)
    return _decision(w, t, odd, peers, reasons,
                     throttled[1] if throttled and "throttled" in reasons else None,
                     peers_fabric)


def _lost(w: JobWindow, odd: NodeWindow, peers: list[NodeWindow], reasons: list[str],
          peers_fabric: float | None) -> tuple[float, str]:
    hours = w.span_s / 3600
    if ("busy" in reasons or "throttled" in reasons) and odd.busy:
        lost = sum(max(0.0, 1 - g.busy_mean / odd.busy) for p in peers for g in p.gpus
                   if g.busy_mean is not None) * hours
        return lost, "the peers' GPUs waiting for the node: sum of 1 - busy(GPU) / busy(node)"
    share = 1 - odd.fabric_pct / peers_fabric
    idle = sum(max(0.0, 1 - g.busy_mean / 100) for n in [odd, *peers] for g in n.gpus
               if g.busy_mean is not None)
    return (idle * share * hours,
            "the job's GPUs' time not busy x (1 - the node's traffic / its peers')")


def _decision(w: JobWindow, t: Thresholds, odd: NodeWindow, peers: list[NodeWindow],
              reasons: list[str], ref_clock: float | None, peers_fabric: float | None
              ) -> Decision:
    peer_busy = [p.busy for p in peers if p.busy is not None]
    peers_busy = statistics.median(peer_busy) if peer_busy else None
    lost, basis = _lost(w, odd, peers, reasons, peers_fabric)
    source = w.busy_source
    said = []
    if "throttled" in reasons:
        clock = odd.throttled_clock_mhz
        text = (f"its GPUs were held back by {_reasons(odd.throttle_bits)} in "
                f"{pct(100 * odd.throttled_share)} of the samples")
        if clock is not None and ref_clock:
            text += (f", at {clock:.0f} MHz against {ref_clock:.0f} MHz on unthrottled GPUs "
                     f"({pct(100 * clock / ref_clock)})")
        said.append(text + ", while its peers' were not")
    if "busy" in reasons or "throttled" in reasons:
        said.append(f"its GPUs were busy {pct(odd.busy)} ({source}) while the other "
                    f"{plural(len(peers), 'node')} waited in lockstep at {pct(peers_busy)} (median)")
    if "errors" in reasons:
        counts = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in
                           sorted(odd.port_errors.items(), key=lambda kv: -kv[1]))
        peer_errors = max((p.error_total for p in peers), default=0)
        said.append(f"its fabric ports' error counters rose by {odd.error_total:,} ({counts}) "
                    f"while no peer's rose by more than {peer_errors:,}, and its links carried "
                    f"{pct(odd.fabric_pct)} of capacity against {pct(peers_fabric)} on its "
                    f"peers (median): retransmissions and link recoveries slow it down")
    elif "fabric" in reasons:
        said.append(f"its fabric links carried {pct(odd.fabric_pct)} of capacity against "
                    f"{pct(peers_fabric)} on its peers (median)")
    explanation = (f"Over the last {duration(w.span_s)}, node {odd.name} stood out from the "
                   f"job's other {plural(len(peers), 'node')}: " + "; ".join(said) + ". "
                   f"A synchronous job runs at its slowest node's pace: about "
                   f"{lost:.1f} GPU-hours were lost to it in this window ({basis}).")
    drain_reason = {"throttled": "GPU throttling", "busy": "slow GPUs",
                    "errors": "erroring fabric port", "fabric": "slow fabric link"}[reasons[0]]
    exclude = f"sbatch --exclude={odd.name} ..."
    drain = (f'scontrol update nodename={odd.name} state=drain '
             f'reason="straggler: {drain_reason} (ClusterUI)"')
    check = []
    if "throttled" in reasons:
        check.append("its cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER)")
    if "busy" in reasons and "throttled" not in reasons:
        check.append("its GPUs' clocks and health (nvidia-smi -q -d CLOCK,PERFORMANCE: "
                     "application clocks locked low, a degraded GPU)")
    if "errors" in reasons:
        check.append("its fabric port's cable, transceiver and the switch port at the other "
                     "end (perfquery, ibqueryerrors: symbol and receive errors; mlxlink: "
                     "the link's bit error rate)")
    elif "fabric" in reasons:
        check.append("its fabric port (ibstat: link width and speed; port error counters)")
    suggestion = (f"Resubmit excluding the node ({exclude}) or restart from the last "
                  f"checkpoint without it. Administrators: check {' and '.join(check)}, and "
                  f"drain it meanwhile: {drain}")
    evidence = {
        "window_min": round(w.span_s / 60, 1),
        "node": odd.name,
        "nodes": len(peers) + 1,
        "reasons": reasons,
        "busy_source": source,
        "node_busy_pct": r2(odd.busy),
        "peers_busy_pct": r2(peers_busy),
        "busy_gap_pct": r2(odd.busy - peers_busy if odd.busy is not None
                           and peers_busy is not None else None),
        "node_throttled_share_pct": r2(100 * odd.throttled_share),
        "node_throttle_reasons": _reasons(odd.throttle_bits),
        "node_throttled_clock_mhz": r2(odd.throttled_clock_mhz, 0),
        "reference_clock_mhz": r2(ref_clock, 0),
        "node_fabric_pct": r2(odd.fabric_pct),
        "node_port_errors": dict(sorted(odd.port_errors.items())),
        "node_port_errors_total": odd.error_total,
        "peers_port_errors_max": max((p.error_total for p in peers), default=0),
        "peers_fabric_pct": r2(peers_fabric if peers_fabric is not None else _median_fabric(peers)),
        "lost_gpu_hours": r2(lost, 2),
        "lost_basis": basis,
        "exclude": exclude,
        "drain": drain,
        "busy_gap_threshold_pct": t.straggler_busy_gap_pct,
        "wait_gap_threshold_pct": t.straggler_wait_gap_pct,
        "fabric_ratio_threshold": t.straggler_fabric_ratio,
        "port_errors_threshold": t.fabric_errors,
        "error_traffic_ratio_threshold": t.straggler_error_traffic_ratio,
    }
    if len(peers) + 1 <= PER_NODE_MAX:
        evidence["per_node"] = [
            {"node": n.name, "gpus": len(n.gpus), "busy_pct": r2(n.busy),
             "throttled_share_pct": r2(100 * n.throttled_share),
             "fabric_pct": r2(n.fabric_pct), "port_errors": n.error_total}
            for n in sorted([odd, *peers], key=lambda n: n.name)]
    severity = severity_from_waste(lost, t)
    if Severity(severity).rank < Severity.WARNING.rank:
        severity = Severity.WARNING  # every step of the whole job waits for one node
    what = {"throttled": "throttled GPUs", "busy": "busy while its peers wait",
            "errors": "erroring fabric port", "fabric": "slow fabric link"}[reasons[0]]
    return Decision(
        kind=KIND,
        severity=severity,
        title=f"Straggler: node {odd.name} holds back the job ({what})",
        explanation=explanation,
        suggestion=suggestion,
        evidence=evidence,
        wasted_gpu_hours=lost,
        node_id=odd.node_id,
    )


def _median_fabric(nodes: list[NodeWindow]) -> float | None:
    values = [n.fabric_pct for n in nodes if n.fabric_pct is not None]
    return statistics.median(values) if values else None
