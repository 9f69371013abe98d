"""A degraded or erroring fabric link on a node: a node finding, for the administrators.

A port (InfiniBand or RoCE) is **down** when it is not ACTIVE / LinkUp after having been
ACTIVE (critical: the node's jobs lose that rail or fail), **degraded** when it is up at a
lower rate than its nominal one, the highest it has run at (fewer lanes, "4X" trained as
"1X", or a lower speed: a bad cable or transceiver; warning), and **erroring** when its
error counters rose by ``DETECTOR_FABRIC_ERRORS`` or more over the window, or it downed its
link (warning). A RoCE port's pause storm (its mlx5 ``tx_pause_storm_*_events`` rose in
the newest interval) is told in the finding of a port already unhealthy, as evidence; it
does not open one by itself. Judged on every pass for every node that reports fabric fields; closed
once no port of the node is any of these for ``DETECTOR_CLOSE_AFTER_S``.
"""

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.detectors.base import Decision, plural

KIND = FindingKind.FABRIC_LINK


def _describe(p) -> str:
    parts = []
    if p.down:
        parts.append(f"link {p.state_text} / {p.phys_text} (was up at {p.nominal_gbps:g} Gb/s)")
    elif p.degraded:
        parts.append(f"running at {p.link_gbps:g} Gb/s ({p.link_width}X) instead of "
                     f"{p.nominal_gbps:g} Gb/s ({p.nominal_width}X)")
    if p.error_total:
        counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(p.errors.items())
                           if v)
        parts.append(f"error counters rose: {counts}")
    if p.counters_saturated:
        parts.append(f"{plural(p.counters_saturated, 'error counter')} at its maximum "
                     "(later errors are not counted)")
    if p.pause_storm:
        parts.append("pause storm in the last interval ("
                     + ", ".join(f"{v} {k}" for k, v in p.pause_storm.items()) + ")")
    return f"{p.name}: " + "; ".join(parts)


def detect(node: str, ports: list, threshold: int, window_start) -> Decision | None:
    """``ports``: the node's ``fabric.health.PortHealth`` rows."""
    bad = [p for p in ports if p.down or p.degraded or p.erroring(threshold)]
    if not bad:
        return None
    severity = Severity.CRITICAL if any(p.down for p in bad) else Severity.WARNING
    what = ("down" if any(p.down for p in bad)
            else "degraded" if any(p.degraded for p in bad) else "erroring")
    explanation = (
        f"Since {window_start:%H:%M} UTC {plural(len(bad), 'fabric port')} of {node} "
        f"{'is' if len(bad) == 1 else 'are'} unhealthy: "
        + "; ".join(_describe(p) for p in bad) + "."
    )
    suggestion = (
        f"Check the cable and transceiver of {', '.join(p.name for p in bad)} on {node} and "
        "the switch port at the other end (ibstat, perfquery, mlxlink). Multi-node jobs on "
        "this node run at the speed of its slowest rail: drain the node until it is fixed "
        f"(scontrol update nodename={node} state=drain reason=fabric)."
    )
    return Decision(
        kind=KIND, severity=severity, title=f"Fabric link {what} on {node}",
        explanation=explanation, suggestion=suggestion,
        evidence={"ports": [{
            "name": p.name, "kind": p.kind, "state": p.link_state, "phys_state": p.phys_state,
            "width": p.link_width, "gbps": p.link_gbps, "nominal_gbps": p.nominal_gbps,
            "nominal_width": p.nominal_width, "errors": p.errors,
            "counters_saturated": p.counters_saturated, "down": p.down,
            "degraded": p.degraded, "pause_storm": p.pause_storm} for p in bad],
            "error_threshold": threshold},
    )
