"""The detector pass's part for the fabric: one node verdict per node with fabric ports
(or with an open fabric finding, so that it closes), like ``runner._node_errors``."""

import datetime as dt

from clusterui.fabric import health
from clusterui.findings import record
from clusterui.findings.choices import FindingKind
from clusterui.findings.detectors import fabric_link
from clusterui.findings.models import Finding


def node_verdicts(now: dt.datetime, window_s: float, settle_s: float) -> list[record.Verdict]:
    end = now - dt.timedelta(seconds=settle_s)
    start = end - dt.timedelta(seconds=window_s)
    by_node: dict[int, list[health.PortHealth]] = {}
    for port in health.ports(start, end):
        by_node.setdefault(port.node_id, []).append(port)
    open_nodes = set(Finding.objects.open().filter(job__isnull=True, kind=FindingKind.FABRIC_LINK)
                     .values_list("node_id", flat=True))
    threshold = health.error_threshold()
    verdicts = []
    for node_id in set(by_node) | open_nodes:
        v = record.Verdict(job_id=None, node_id=node_id, kinds={FindingKind.FABRIC_LINK},
                           end=end)
        ports = by_node.get(node_id, [])
        if ports:
            decision = fabric_link.detect(ports[0].node, ports, threshold, start)
            if decision is not None:
                v.decisions[decision.kind] = (decision, start)
        verdicts.append(v)
    health.prune(now)
    return verdicts
