"""Thermal or power throttling: the GPUs' clocks are held down for a large share of samples.

A sample is throttled when it carries a reason that holds the clocks back (software power
cap 0x4, hardware slowdown 0x8, software thermal 0x20, hardware thermal 0x40, hardware power
brake 0x80). Sync boost (0x10) is not counted: it only says the GPU follows the slowest of
its sync-boost group, which reports its own reason. A GPU is flagged when at least
``throttle_share`` of its samples are throttled and its SM clock in those samples averages
at most ``throttle_clock_pct`` of the reference: the highest SM clock that GPUs of the same
model reached busy and unthrottled (in this job or anywhere on the cluster in this pass).
Without a reference the reasons alone decide, and the evidence says so.

Severity: hardware slowdown or power brake (a failing supply, an overheating board):
critical; thermal: warning; the software power cap alone (the GPU at its power limit, which
heavy work reaches): info.
"""

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.detectors.base import Decision, duration, gpu_list, pct, plural, r2
from clusterui.findings.thresholds import (
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    SW_THERMAL,
    THROTTLE_NAMES,
    Thresholds,
)
from clusterui.findings.window import JobWindow

KIND = FindingKind.THROTTLING


def _names(bits: int) -> str:
    return ", ".join(name for bit, name in THROTTLE_NAMES.items() if bits & bit)


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    flagged = []
    for g in w.gpus:
        if g.throttled_share < t.throttle_share:
            continue
        refs = [r for r in (w.reference_clock_mhz.get(g.model), g.free_clock_max_mhz) if r]
        ref = max(refs) if refs else None
        ratio = (100 * g.throttled_clock_mhz / ref
                 if ref and g.throttled_clock_mhz is not None else None)
        if ratio is not None and ratio > t.throttle_clock_pct:
            continue
        flagged.append((g, ref, ratio))
    if not flagged:
        return None
    gpus = [g for g, _, _ in flagged]
    bits = 0
    for g in gpus:
        bits |= g.throttle_bits
    weight = sum(g.samples for g in gpus)
    share = sum(g.throttled_share * g.samples for g in gpus) / weight
    clocks = [(g.throttled_clock_mhz, g.samples) for g in gpus if g.throttled_clock_mhz]
    clock = sum(c * n for c, n in clocks) / sum(n for _, n in clocks) if clocks else None
    refs = [ref for _, ref, _ in flagged if ref]
    ref = max(refs) if refs else None
    model = gpus[0].model
    if bits & (HW_SLOWDOWN | HW_POWER_BRAKE):
        severity, cause = Severity.CRITICAL, "hardware"
    elif bits & (SW_THERMAL | HW_THERMAL):
        severity, cause = Severity.WARNING, "thermal"
    else:
        severity, cause = Severity.INFO, "power"
    explanation = (
        f"Over the last {duration(w.span_s)}, {len(gpus)} of the job's "
        f"{plural(len(w.gpus), 'GPU')} ({gpu_list(gpus)}) were held back by {_names(bits)} "
        f"in {pct(100 * share)} of the samples"
    )
    if clock is not None and ref:
        explanation += (f"; their SM clock averaged {clock:.0f} MHz against {ref:.0f} MHz "
                        f"reached by unthrottled {model} GPUs ({pct(100 * clock / ref)}).")
    elif clock is not None:
        explanation += (f"; their SM clock averaged {clock:.0f} MHz (no unthrottled {model} "
                        "was seen to compare with).")
    else:
        explanation += "."
    explanation += " The job runs slower than the hardware allows."
    suggestion = {
        "hardware": ("The board's hardware slowdown or power brake engaged: usually a failing "
                     "power supply or an overheating board. Report the node to the "
                     "administrators; resubmit excluding it if the job is slow."),
        "thermal": ("A cooling problem, not the job's: check the node's fans, inlet "
                    "temperature and airflow, and ask the administrators to drain the node if "
                    "it persists; resubmit excluding it (--exclude) meanwhile."),
        "power": ("The GPUs run at their power limit: expected under heavy load. If the limit "
                  "is below the board's default (nvidia-smi -q -d POWER), ask the "
                  "administrators whether it was lowered on purpose."),
    }[cause]
    return Decision(
        kind=KIND,
        severity=severity,
        title=f"Throttling ({_names(bits)}) on {plural(len(gpus), 'GPU')}",
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "gpus": [{"node": g.node, "index": g.index,
                      "throttled_share_pct": r2(100 * g.throttled_share),
                      "clock_mhz": r2(g.throttled_clock_mhz, 0),
                      "clock_pct_of_reference": r2(ratio)} for g, _, ratio in flagged],
            "reasons": _names(bits),
            "reason_bits": bits,
            "throttled_share_pct": r2(100 * share),
            "clock_mhz": r2(clock, 0),
            "reference_clock_mhz": r2(ref, 0),
            "share_threshold_pct": 100 * t.throttle_share,
            "clock_threshold_pct": t.throttle_clock_pct,
        },
        gpu_id=gpus[0].gpu_id if len(gpus) == 1 else None,
    )
