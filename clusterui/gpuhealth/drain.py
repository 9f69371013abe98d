"""The drain list: ``scontrol`` lines, ready to copy, for the nodes where drain is
suggested. Node names come from collectors and reasons are ours: both are quoted for a
POSIX shell (``shlex.quote``), so a hostile name cannot run anything when pasted; the page
escapes them again for HTML. A name that is not printable (controls, bidirectional overrides,
zero-width characters: none is a name Slurm accepts) gets no command: shown, the line would
read otherwise than it runs."""

import shlex
from dataclasses import dataclass

from clusterui.gpuhealth.classify import DRAIN, node_health

REASON_MAX = 120  # Slurm shows the reason in sinfo -R; keep it one short line


@dataclass
class DrainLine:
    node_id: int
    cluster: str
    node: str
    reason: str
    command: str  # "" where the node's name is not printable


def short_reason(health) -> str:
    reason = " ".join(("GPU health: " + health.reason).split())  # one line, no control chars
    reason = "".join(c for c in reason if c.isprintable())
    return reason if len(reason) <= REASON_MAX else reason[:REASON_MAX - 1] + "…"


def scontrol_line(node: str, reason: str) -> str:
    return (f"scontrol update nodename={shlex.quote(node)} state=drain "
            f"reason={shlex.quote(reason)}")


def drain_lines(cluster: str = "") -> list[DrainLine]:
    """The nodes to drain (of every cluster, or the one named ``cluster``), by cluster and
    name."""
    from clusterui.inventory.models import Node

    health = {n: h for n, h in node_health().items() if h.state == DRAIN}
    nodes = Node.objects.filter(id__in=health)
    if cluster:
        nodes = nodes.filter(cluster__name=cluster)
    nodes = nodes.values_list("id", "cluster__name", "name")
    lines = []
    for node_id, cluster, name in sorted(nodes, key=lambda r: (r[1], r[2])):
        reason = short_reason(health[node_id])
        command = scontrol_line(name, reason) if name.isprintable() else ""
        lines.append(DrainLine(node_id, cluster, name, reason, command))
    return lines
