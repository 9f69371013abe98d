"""Communication-bound: a multi-GPU job whose GPUs wait while its links are busy.

From counters alone (TELEMETRY.md section 6), the job:

- holds several GPUs (NVLink is judged) or several nodes (their fabric NICs are judged);
- keeps its GPUs busy less than ``busy_pct`` on average (GPM SM activity where the GPU
  reports it, NVML utilization otherwise): a busy job with high traffic is healthy;
- and either its traffic is at or above ``comm_traffic_pct`` of link capacity in at least
  ``comm_traffic_share`` of the samples (sustained), or its busy level falls each time its
  traffic peaks: a lag-0 correlation at or below ``comm_correlation`` over at least
  ``MIN_CORRELATION_POINTS`` paired samples, with traffic reaching the threshold in at
  least a tenth of them. The second form needs samples shorter than the training step
  (1-2 s); at 10-60 s the averages hide the dips and the sustained form decides.
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
)
from clusterui.findings.thresholds import MIN_CORRELATION_POINTS, Thresholds
from clusterui.findings.window import JobWindow, Traffic

KIND = FindingKind.COMM_BOUND
PEAK_SHARE = 0.1  # the traffic must reach the threshold in at least this share of samples


def _judge(traffic: Traffic, t: Thresholds) -> tuple[bool, bool, float | None]:
    if not traffic.samples or traffic.high_share is None:
        return False, False, None
    corr = traffic.corr.r(MIN_CORRELATION_POINTS)
    sustained = traffic.high_share >= t.comm_traffic_share
    anti = corr is not None and corr <= t.comm_correlation and traffic.high_share >= PEAK_SHARE
    return sustained, anti, corr


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    busy = w.busy_mean
    if busy is None or busy >= t.busy_pct:
        return None
    links = []
    if w.nodes > 1:
        links.append(("fabric NIC", "the fabric (InfiniBand/RoCE) links", w.nic))
    if w.gpus_allocated > 1:
        links.append(("NVLink", "NVLink", w.nvlink))
    best = None
    for name, phrase, traffic in links:
        sustained, anti, corr = _judge(traffic, t)
        if sustained or anti:
            key = (sustained, traffic.high_share or 0.0)
            if best is None or key > best[0]:
                best = (key, name, phrase, traffic, sustained, anti, corr)
    if best is None:
        return None
    _, name, phrase, traffic, sustained, anti, corr = best
    n = len(w.gpus)
    where = f"{plural(n, 'GPU')} on {plural(w.nodes, 'node')}" if w.nodes > 1 else plural(n, "GPU")
    explanation = (
        f"Over the last {duration(w.span_s)} the job's {where} were busy only {pct(busy)} "
        f"({w.busy_source}) while {phrase} ran at or above {t.comm_traffic_pct:g} % of "
        f"capacity in {pct(100 * traffic.high_share)} of the samples (mean {pct(traffic.mean)}, "
        f"peak {pct(traffic.peak)})."
    )
    if corr is not None and corr <= t.comm_correlation:
        explanation += (f" Utilization fell each time traffic peaked (correlation "
                        f"{corr:.2f} sample by sample).")
    explanation += " The GPUs spend much of their time waiting for communication."
    explanation += measured_note(w, w.gpu_hours_wasted)
    if name == "NVLink":
        suggestion = (
            "Check that the GPUs talk over NVLink (nvidia-smi topo -m; NCCL_DEBUG=INFO shows "
            "the transport). Communicate less often or overlap it with compute: gradient "
            "accumulation or a larger batch per GPU, DDP bucket size, FSDP prefetching; or run "
            "on fewer GPUs."
        )
    else:
        suggestion = (
            "Check the fabric and the placement: nodes on the same leaf switch, NCCL using "
            "InfiniBand with GPUDirect RDMA (NCCL_DEBUG=INFO), no degraded links. Communicate "
            "less often or overlap it with compute: gradient accumulation or a larger batch, "
            "DDP bucket size, FSDP prefetching; or run on fewer nodes."
        )
    waste = w.gpu_hours_wasted
    return Decision(
        kind=KIND,
        severity=severity_from_waste(waste, t, w.measured_share),
        title=f"Communication-bound: GPUs {pct(busy)} busy, {name} "
              f"{pct(traffic.mean)} of capacity",
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "measured_pct": r2(100 * w.measured_share),
            "gpus": n,
            "nodes": w.nodes,
            "link": name,
            "busy_mean_pct": r2(busy),
            "busy_source": w.busy_source,
            "traffic_mean_pct": r2(traffic.mean),
            "traffic_peak_pct": r2(traffic.peak),
            "traffic_high_share_pct": r2(100 * traffic.high_share),
            "traffic_threshold_pct": t.comm_traffic_pct,
            "busy_traffic_correlation": r2(corr, 2),
            "correlation_points": traffic.corr.n,
            "sustained": sustained,
            "dips_with_traffic": anti,
            "gpu_hours_wasted": r2(waste, 2),
        },
        wasted_gpu_hours=waste,
    )
