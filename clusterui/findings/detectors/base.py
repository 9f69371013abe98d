"""What a detector returns, and the helpers every detector shares."""

from dataclasses import dataclass, field

from clusterui.findings.choices import Severity
from clusterui.findings.models import MEASURED_ENOUGH_PCT
from clusterui.findings.thresholds import Thresholds


@dataclass
class Decision:
    """A detector's verdict that the condition holds, with what the user needs to judge it:
    the numbers (``evidence``), a plain-language explanation naming them, and a suggestion."""

    kind: str
    severity: str
    title: str
    explanation: str
    suggestion: str
    evidence: dict = field(default_factory=dict)
    wasted_gpu_hours: float = 0.0
    gpu_id: int | None = None
    node_id: int | None = None  # the node it is about, where not one GPU's (a straggler)


def severity_from_waste(gpu_hours: float, t: Thresholds, measured_share: float = 1.0) -> str:
    """The severity of ``gpu_hours`` wasted. ``measured_share``: the share of the job's run
    its samples cover (``JobWindow.measured_share``) where ``gpu_hours`` counts the whole
    run: only the waste ClusterUI saw raises the severity, never the unmeasured time taken
    to be like it (a job measured for its last hour of 48 is not critical on that hour)."""
    gpu_hours *= measured_share
    if gpu_hours >= t.waste_critical_gpu_h:
        return Severity.CRITICAL
    if gpu_hours >= t.waste_warning_gpu_h:
        return Severity.WARNING
    return Severity.INFO


def pct(value: float | None) -> str:
    """A percentage as people read it: "7 %", "0.4 %"."""
    if value is None:
        return "n/a"
    return f"{value:.1f} %" if 0 < abs(value) < 1 else f"{value:.0f} %"


def duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes / 60:.1f} h"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def were(n: int) -> str:
    """The verb after ``plural(n, ...)``: "1 GPU was", "8 GPUs were"."""
    return "was" if n == 1 else "were"


def gpu_list(gpus) -> str:
    """ "gpu-a001 GPU 1, 2, 3; gpu-a002 GPU 0" """
    by_node: dict[str, list[int]] = {}
    for g in gpus:
        by_node.setdefault(g.node, []).append(g.index)
    return "; ".join(f"{node} GPU {', '.join(str(i) for i in sorted(idx))}"
                     for node, idx in sorted(by_node.items()))


def r2(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def measured_note(w, waste: float) -> str:
    """The sentence a whole-run waste figure's explanation ends with when the job was only
    partly measured: what the severity was judged on. Empty when measured (nearly)
    throughout."""
    if w.measured_share * 100 >= MEASURED_ENOUGH_PCT:
        return ""
    return (f" Its samples cover only {pct(100 * w.measured_share)} of its run: the severity "
            f"counts the {waste * w.measured_share:.1f} GPU-hours wasted while it was measured.")
