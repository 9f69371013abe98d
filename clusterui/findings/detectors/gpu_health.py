"""GPU health: a node finding when one of its GPUs needs a reset or replacement.

Judged on each GPU's latest health counters (``clusterui.gpuhealth``), not on a window:
the counters say what the GPU needs now. One finding per node, naming each GPU, what it
needs and the vendor's page saying so; critical when a GPU must be replaced, a warning
when a reset will do. It goes to the admins (a node finding has no owner) and closes once
no GPU of the node needs anything (after ``DETECTOR_CLOSE_AFTER_S``, like the others).
"""

import datetime as dt

from clusterui.findings import record
from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.detectors.base import Decision
from clusterui.gpuhealth.classify import ACTIONS, DRAIN, REPLACE, node_health

KIND = FindingKind.GPU_HEALTH


def decide(node_name: str, health) -> Decision | None:
    gpus = [g for g in health.gpus if g.action]
    if health.state != DRAIN or not gpus:
        return None
    replace = [g for g in gpus if g.action == REPLACE]
    lines = [f"GPU {g.index}: {', '.join(r for r, _ in g.reasons)}: {ACTIONS[g.action]} "
             f"(source: {', '.join(sorted({s for _, s in g.reasons}))})" for g in gpus]
    return Decision(
        kind=KIND,
        severity=Severity.CRITICAL if replace else Severity.WARNING,
        title=f"GPU {'replacement' if replace else 'reset'} needed on {node_name}: "
              + ", ".join(f"GPU {g.index}" for g in gpus),
        explanation=f"The GPU health counters of {node_name} show: " + "; ".join(lines) + ".",
        suggestion=(f"Drain {node_name} (scontrol update nodename={node_name} state=drain), "
                    "wait for its jobs to end, then "
                    + ("open an RMA for the GPUs to replace" if replace else "reset the GPUs")
                    + ". The drain list page has the command ready to copy."),
        evidence={"gpus": [{"index": g.index, "action": g.action,
                            "reasons": [r for r, _ in g.reasons],
                            "sources": sorted({s for _, s in g.reasons})} for g in gpus]},
    )


def node_verdicts(end: dt.datetime) -> list[record.Verdict]:
    """A verdict for every node whose GPUs need something, and every node with this kind
    of finding open (closed when its GPUs are fine again)."""
    from clusterui.findings.models import Finding
    from clusterui.inventory.models import Node

    health = node_health()
    open_nodes = set(Finding.objects.filter(state=FindingState.OPEN, job__isnull=True,
                                            kind=KIND).values_list("node_id", flat=True))
    wanted = {n for n, h in health.items() if h.state == DRAIN} | open_nodes
    names = dict(Node.objects.filter(id__in=wanted).values_list("id", "name"))
    verdicts = []
    for node_id in sorted(wanted):
        v = record.Verdict(job_id=None, node_id=node_id, kinds={KIND}, end=end)
        h = health.get(node_id)
        decision = decide(names.get(node_id, "?"), h) if h is not None else None
        if decision is not None:
            v.decisions[KIND] = (decision, end)
        verdicts.append(v)
    return verdicts
