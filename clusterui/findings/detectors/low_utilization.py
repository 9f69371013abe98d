"""Low GPU utilization: the job's GPUs are mostly idle over the window.

Judged on NVML utilization, the signal jobstats (note below 25 %) and OpenPAI (below 30 %
for an hour) set their thresholds on; GPM SM activity reads lower on healthy jobs and is
shown alongside. A job whose NVML utilization is high while SM activity is low is the
``busy_not_busy`` detector's case. Severity scales with the GPU-hours wasted so far.
"""

from clusterui.findings.choices import FindingKind
from clusterui.findings.detectors.base import (
    Decision,
    duration,
    pct,
    plural,
    r2,
    severity_from_waste,
)
from clusterui.findings.thresholds import Thresholds
from clusterui.findings.window import JobWindow

KIND = FindingKind.LOW_UTILIZATION


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    util = w.util_mean
    if util is None or util >= t.low_util_pct:
        return None
    sm = w.sm_mean
    n = len(w.gpus)
    waste = w.gpu_hours_wasted
    sm_text = f" (SM activity {pct(sm)})" if sm is not None else ""
    explanation = (
        f"Over the last {duration(w.span_s)} the job's {plural(n, 'GPU')} averaged "
        f"{pct(util)} utilization{sm_text}, below the {t.low_util_pct:g} % threshold. "
        f"Since it started it has used {w.gpu_hours_used:.1f} of its "
        f"{w.gpu_hours_allocated:.1f} allocated GPU-hours: {waste:.1f} GPU-hours wasted."
    )
    if util < 1:
        explanation += " The GPUs did (almost) nothing: the job may not be using them at all."
        suggestion = (
            "Check that the code runs on the GPU (the framework sees the devices and the model "
            "and data are moved to them). If the session is interactive or the work is "
            "CPU-only, end it or run it on a CPU partition: the GPUs are held for nothing."
        )
    else:
        suggestion = (
            "Request fewer GPUs, or give each one more work: a larger batch size, more "
            "data-loader workers, or several experiments per GPU (MPS or MIG). Release GPUs "
            "held by interactive sessions while they are idle."
        )
    return Decision(
        kind=KIND,
        severity=severity_from_waste(waste, t),
        title=f"Low GPU utilization: {pct(util)} on {plural(n, 'GPU')}",
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "gpus": n,
            "util_mean_pct": r2(util),
            "sm_active_mean_pct": r2(sm),
            "threshold_pct": t.low_util_pct,
            "gpu_hours_allocated": r2(w.gpu_hours_allocated, 2),
            "gpu_hours_used": r2(w.gpu_hours_used, 2),
            "gpu_hours_wasted": r2(waste, 2),
        },
        wasted_gpu_hours=waste,
    )
