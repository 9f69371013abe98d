"""Looks busy but is not: NVML utilization high while GPM SM activity is low.

NVML's utilization is the share of time *a* kernel ran, however few SMs it used; GPM's SM
activity is the share of SM cycles in use. High (``bnb_util_pct``) against low
(``bnb_sm_pct``) is a stream of tiny kernels, launch overhead or synchronisation. Needs
GPM (Hopper and later): GPUs without it are not judged.
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

KIND = FindingKind.BUSY_NOT_BUSY


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    gpm = [g for g in w.gpus if g.sm_mean is not None and g.util_mean is not None]
    if not gpm:
        return None
    weight = sum(g.samples for g in gpm)
    util = sum(g.util_mean * g.samples for g in gpm) / weight
    sm = sum(g.sm_mean * g.samples for g in gpm) / weight
    if util < t.bnb_util_pct or sm > t.bnb_sm_pct:
        return None
    waste = w.gpu_hours_wasted
    n = len(gpm)
    explanation = (
        f"Over the last {duration(w.span_s)} NVML reported the job's {plural(n, 'GPU')} busy "
        f"{pct(util)} of the time, but their SMs were active only {pct(sm)} (GPM): a kernel "
        "was almost always running, yet it occupied few of the GPU's SMs. This is typically "
        "a stream of tiny kernels, kernel-launch overhead or synchronisation. Weighted by SM "
        f"activity the job has wasted {waste:.1f} GPU-hours since it started."
    )
    suggestion = (
        "Profile a few steps (Nsight Systems, torch.profiler): use a larger batch, fuse small "
        "operations (torch.compile), capture CUDA graphs to cut launch overhead, and avoid "
        "per-step host synchronisation (.item(), .cpu())."
    )
    return Decision(
        kind=KIND,
        severity=severity_from_waste(waste, t),
        title=f"Looks busy but is not: NVML {pct(util)}, SM activity {pct(sm)}",
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "gpus": n,
            "util_mean_pct": r2(util),
            "sm_active_mean_pct": r2(sm),
            "util_threshold_pct": t.bnb_util_pct,
            "sm_threshold_pct": t.bnb_sm_pct,
            "gpu_hours_wasted": r2(waste, 2),
        },
        wasted_gpu_hours=waste,
    )
