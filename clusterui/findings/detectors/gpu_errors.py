"""GPU errors: Xid events and lost GPUs reported by the driver within the window.

Not subject to the grace period: a hardware fault in a job's first minutes is as real as
later. Severity by the worst event: hardware and memory faults (a GPU fallen off the bus,
double-bit and uncontained ECC errors, NVLink errors, a lost GPU) are critical; errors that
are usually the program's own (illegal memory access, a killed context) are info; the rest
(row remapping events, other Xids) are warnings. The collectors report ECC counts and
remapped rows through their Xids (48, 63, 64, 94, 95).
"""

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.detectors.base import Decision, plural
from clusterui.findings.thresholds import Thresholds

KIND = FindingKind.GPU_ERRORS
# NVIDIA's Xid catalogue: hardware or memory faults that make the GPU unreliable.
CRITICAL_XIDS = {48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120, 140}
# Usually raised by the application itself (bad pointer, killed process, engine exception).
APPLICATION_XIDS = {13, 31, 43, 45, 68, 69}


def _rank(event) -> str:
    if event.kind == "gpu_lost" or event.code in CRITICAL_XIDS:
        return Severity.CRITICAL
    if event.kind == "xid" and event.code in APPLICATION_XIDS:
        return Severity.INFO
    return Severity.WARNING


def _describe(event) -> str:
    what = f"Xid {event.code}" if event.kind == "xid" else event.kind.replace("_", " ")
    message = f" ({event.message})" if event.message else ""
    return f"{what}{message} on {event.node} GPU {event.index} at {event.ts:%H:%M:%S} UTC"


def detect(events: list, subject: str, t: Thresholds, window_start) -> Decision | None:
    """``events``: ``GpuEventRow``s in the window; ``subject``: "the job's GPUs", ..."""
    events = [e for e in events if e.kind in ("xid", "gpu_lost")]
    if not events:
        return None
    severity = max((_rank(e) for e in events), key=lambda s: Severity(s).rank)
    shown = events[-5:]
    more = f" (and {len(events) - len(shown)} earlier)" if len(events) > len(shown) else ""
    explanation = (
        f"Since {window_start:%H:%M} UTC the driver reported {plural(len(events), 'error')} on "
        f"{subject}: " + "; ".join(_describe(e) for e in shown) + more + "."
    )
    nodes = sorted({e.node for e in events})
    if severity == Severity.CRITICAL:
        suggestion = (
            "A hardware or memory fault: results computed on this GPU may be wrong, and the "
            "job may crash. Resubmit excluding the node (--exclude=" + ",".join(nodes) + ") "
            "and report it to the administrators so they can drain and test it."
        )
    elif severity == Severity.INFO:
        suggestion = (
            "These errors are usually the program's own (an illegal memory access, a killed "
            "process): check the job's output for CUDA errors. If they repeat with other "
            "programs on the same GPU, report the node."
        )
    else:
        suggestion = (
            "Watch the GPU: if these errors repeat, report the node to the administrators "
            "(the GPU may need a reset or replacement)."
        )
    codes = sorted({e.code for e in events if e.code is not None})
    return Decision(
        kind=KIND,
        severity=severity,
        title=f"GPU errors: {', '.join(f'Xid {c}' for c in codes) or 'GPU lost'}"
              + (" and GPU lost" if codes and any(e.kind == "gpu_lost" for e in events) else ""),
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "events": [{"ts": e.ts.isoformat(), "node": e.node, "index": e.index,
                        "kind": e.kind, "code": e.code, "message": e.message}
                       for e in events[-20:]],
            "count": len(events),
            "xid_codes": codes,
        },
        gpu_id=events[0].gpu_id if len({e.gpu_id for e in events}) == 1 else None,
    )
