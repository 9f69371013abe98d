"""Low GPU utilization: the job's GPUs did little over the window.

Judged on what the GPUs did: GPM SM activity where the GPU reports it, NVML utilization
only where GPM is missing (``GpuWindow.activity``). NVML's utilization is the share of time
*a* kernel ran, however few SMs it used, so a stream of tiny kernels reads 99 % while the
SMs idle: such a job wastes its GPUs as much as an idle one, and gets the same finding and
the same waste-scaled severity. Its explanation gives both figures and says why NVML's is
misleading; where NVML reads at least ``bnb_util_pct`` and SM activity at most
``bnb_sm_pct`` ("looks busy but is not", formerly its own ``busy_not_busy`` finding) the
suggestion is about kernel launch overhead. Severity scales with the GPU-hours wasted so
far (the job's efficiency, which uses the same activity figure).
"""

from clusterui.findings.choices import FindingKind
from clusterui.findings.detectors.base import (
    Decision,
    duration,
    measured_note,
    pct,
    plural,
    r2,
    severity_from_waste,
    were,
)
from clusterui.findings.thresholds import Thresholds
from clusterui.findings.window import JobWindow

KIND = FindingKind.LOW_UTILIZATION

UNUSED = (
    "Check that the code runs on the GPU (the framework sees the devices and the model "
    "and data are moved to them). If the session is interactive or the work is "
    "CPU-only, end it or run it on a CPU partition: the GPUs are held for nothing."
)
TINY_KERNELS = (
    "Profile a few steps (Nsight Systems, torch.profiler): use a larger batch, fuse small "
    "operations (torch.compile), capture CUDA graphs to cut launch overhead, and avoid "
    "per-step host synchronisation (.item(), .cpu())."
)
FEWER = (
    "Request fewer GPUs, or give each one more work: a larger batch size, more "
    "data-loader workers, or several experiments per GPU (MPS or MIG). Release GPUs "
    "held by interactive sessions while they are idle."
)


def _source(w: JobWindow) -> str:
    with_sm = sum(1 for g in w.gpus if g.sm_mean is not None)
    if with_sm == len(w.gpus):
        return "SM activity (GPM)"
    if with_sm == 0:
        return "GPU utilization (NVML): no GPM on these GPUs"
    return "SM activity (GPM) where reported, GPU utilization (NVML) on the GPUs without GPM"


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    activity = w.activity_mean
    if activity is None or activity >= t.low_util_pct:
        return None
    util, sm = w.util_mean, w.sm_mean
    n = len(w.gpus)
    waste = w.gpu_hours_wasted
    # NVML says busy where the SMs are not: its figure alone would not have flagged the job.
    nvml_misleads = sm is not None and util is not None and util >= t.low_util_pct
    looks_busy = nvml_misleads and util >= t.bnb_util_pct and activity <= t.bnb_sm_pct
    explanation = (
        f"Over the last {duration(w.span_s)} the job's {plural(n, 'GPU')} {were(n)} active "
        f"{pct(activity)} on average ({_source(w)}), below the {t.low_util_pct:g} % "
        "threshold."
    )
    if nvml_misleads:
        explanation += (
            f" NVML reported {'it' if n == 1 else 'them'} busy {pct(util)} of the time, "
            "but that figure is misleading: it counts the time any kernel was running, "
            "however few of the GPU's SMs it occupied."
        )
        if looks_busy:
            explanation += (" A kernel was almost always running, yet it kept few SMs busy: "
                            "typically a stream of tiny kernels, kernel-launch overhead or "
                            "synchronisation.")
    elif sm is not None and util is not None:
        explanation += f" GPU utilization (NVML) was {pct(util)}."
    explanation += (
        f" Since it started it has used {w.gpu_hours_used:.1f} of its "
        f"{w.gpu_hours_allocated:.1f} allocated GPU-hours: {waste:.1f} GPU-hours wasted."
    ) + measured_note(w, waste)
    if activity < 1 and not nvml_misleads:
        explanation += " The GPUs did (almost) nothing: the job may not be using them at all."
        suggestion = UNUSED
    elif looks_busy:
        suggestion = TINY_KERNELS
    else:
        suggestion = FEWER
    title = f"Low GPU utilization: {pct(activity)} on {plural(n, 'GPU')}"
    if nvml_misleads:
        title = (f"Low GPU utilization: SM activity {pct(activity)} on {plural(n, 'GPU')} "
                 f"(NVML reads {pct(util)})")
    return Decision(
        kind=KIND,
        severity=severity_from_waste(waste, t, w.measured_share),
        title=title,
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "measured_pct": r2(100 * w.measured_share),
            "gpus": n,
            "activity_mean_pct": r2(activity),
            "judged_on": _source(w),
            "util_mean_pct": r2(util),
            "sm_active_mean_pct": r2(sm),
            "nvml_misleading": nvml_misleads,
            "threshold_pct": t.low_util_pct,
            "gpu_hours_allocated": r2(w.gpu_hours_allocated, 2),
            "gpu_hours_used": r2(w.gpu_hours_used, 2),
            "gpu_hours_wasted": r2(waste, 2),
        },
        wasted_gpu_hours=waste,
    )
