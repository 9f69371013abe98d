"""Idle allocated GPU: some GPUs of a job do (almost) nothing while others work.

The "asked for 8, used 1" case: at least one GPU averages below ``idle_gpu_pct`` while at
least one other averages ``working_gpu_pct`` or more, judged on what the GPU did: GPM SM
activity where it reports it, NVML utilization only where GPM is missing
(``GpuWindow.activity``; a GPU running a trickle of tiny kernels reads busy on NVML). A job
whose GPUs are all idle is ``low_utilization``'s, not this. Severity scales with the GPU-hours the
idle GPUs have wasted since the job started.
"""

from clusterui.findings.choices import FindingKind
from clusterui.findings.detectors.base import (
    Decision,
    duration,
    gpu_list,
    measured_note,
    pct,
    plural,
    r2,
    severity_from_waste,
)
from clusterui.findings.thresholds import Thresholds
from clusterui.findings.window import JobWindow

KIND = FindingKind.IDLE_GPU


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    gpus = [g for g in w.gpus if g.activity is not None]
    if len(gpus) < 2:
        return None
    idle = [g for g in gpus if g.activity < t.idle_gpu_pct]
    working = [g for g in gpus if g.activity >= t.working_gpu_pct]
    if not idle or not working:
        return None
    waste = sum(g.wasted_gpu_hours for g in idle)
    idle_mean = sum(g.activity for g in idle) / len(idle)
    work_mean = sum(g.activity for g in working) / len(working)
    n_alloc = w.gpus_allocated or len(gpus)
    keep = n_alloc - len(idle)
    if all(g.sm_mean is not None for g in gpus):
        measure = "SM activity"
    elif all(g.sm_mean is None for g in gpus):
        measure = "utilization"
    else:
        measure = "activity (SM activity (GPM) where reported, GPU utilization (NVML) otherwise)"
    explanation = (
        f"Over the last {duration(w.span_s)}, {len(idle)} of the job's {plural(n_alloc, 'GPU')} "
        f"averaged {pct(idle_mean)} {measure} ({gpu_list(idle)}) while "
        f"{plural(len(working), 'GPU')} worked at {pct(work_mean)} ({gpu_list(working)})."
    )
    fake = [g for g in idle if g.sm_mean is not None and g.util_mean is not None
            and g.util_mean >= t.working_gpu_pct]
    if fake:
        nvml = sum(g.util_mean for g in fake) / len(fake)
        explanation += (
            f" NVML reported {'that GPU' if len(fake) == 1 else 'those GPUs'} busy "
            f"{pct(nvml)} of the time ({gpu_list(fake)}), but that figure is misleading: it "
            "counts the time any kernel was running, however few SMs it occupied."
        )
    explanation += (f" The idle GPUs have wasted {waste:.1f} GPU-hours since the job started."
                    + measured_note(w, waste))
    suggestion = (
        f"Request {plural(keep, 'GPU')} instead of {n_alloc}, or make the program use all of "
        "them: start one process per GPU (torchrun --nproc_per_node, DistributedDataParallel, "
        "srun with --gpus-per-task) rather than a single process that sees only one device."
    )
    return Decision(
        kind=KIND,
        severity=severity_from_waste(waste, t, w.measured_share),
        title=f"{len(idle)} of {n_alloc} allocated GPUs idle",
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "measured_pct": r2(100 * w.measured_share),
            "gpus": n_alloc,
            "idle_gpus": [{"node": g.node, "index": g.index, "activity_pct": r2(g.activity),
                           "util_mean_pct": r2(g.util_mean),
                           "sm_active_mean_pct": r2(g.sm_mean)} for g in idle],
            "working_gpus": [{"node": g.node, "index": g.index, "activity_pct": r2(g.activity),
                              "util_mean_pct": r2(g.util_mean),
                              "sm_active_mean_pct": r2(g.sm_mean)} for g in working],
            "idle_threshold_pct": t.idle_gpu_pct,
            "idle_gpu_hours_wasted": r2(waste, 2),
        },
        wasted_gpu_hours=waste,
        gpu_id=idle[0].gpu_id if len(idle) == 1 else None,
    )
