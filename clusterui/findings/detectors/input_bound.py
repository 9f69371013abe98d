"""Input / data-loader bound: the GPUs wait while the job's host CPUs are saturated.

The job's GPUs are busy less than ``busy_pct`` on average, its network is quiet (NVLink,
and for a multi-node job its fabric NICs, below ``quiet_net_pct`` of capacity: otherwise it
would be communication, not input), and its cgroups use at least ``input_cpu_pct`` of the
cores allocated on each node. A node's NIC also carries other jobs' traffic, so for a job
on one node only its own NVLink counts.
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

KIND = FindingKind.INPUT_BOUND


def detect(w: JobWindow, t: Thresholds) -> Decision | None:
    busy = w.busy_mean
    if busy is None or busy >= t.busy_pct:
        return None
    if w.cpu_frac_mean is None or 100 * w.cpu_frac_mean < t.input_cpu_pct:
        return None
    nvlink = w.nvlink
    if nvlink.mean is not None and nvlink.mean >= t.quiet_net_pct:
        return None
    if w.nodes > 1 and w.nic.mean is not None and w.nic.mean >= t.quiet_net_pct:
        return None
    n = len(w.gpus)
    cpu = 100 * w.cpu_frac_mean
    cores = f" of the {w.cpus_per_node} cores allocated" if w.cpus_per_node else ""
    per_node = " on each node" if w.nodes > 1 else ""
    net = []
    if nvlink.mean is not None:
        net.append(f"NVLink {pct(nvlink.mean)}")
    if w.nodes > 1 and w.nic.mean is not None:
        net.append(f"fabric NICs {pct(w.nic.mean)}")
    net_text = f" and the network was quiet ({', '.join(net)} of capacity)" if net else ""
    util = w.util_mean
    nvml = f"; GPU utilization (NVML) {pct(util)}" if w.sm_mean is not None and util is not None else ""
    explanation = (
        f"Over the last {duration(w.span_s)} the job's {plural(n, 'GPU')} {were(n)} busy only "
        f"{pct(busy)} ({w.busy_source}{nvml}) while its processes used {pct(cpu)}{cores}"
        f"{per_node}{net_text}. The GPUs wait for data that the CPUs cannot prepare fast "
        "enough."
    ) + measured_note(w, w.gpu_hours_wasted)
    suggestion = (
        "Give the data loader more workers and the job more CPU cores (DataLoader num_workers, "
        "--cpus-per-task), move decoding and augmentation to the GPU (NVIDIA DALI, torchvision "
        "v2 on GPU), pre-process the data set once, or read it in a faster format (WebDataset "
        "shards, memory-mapped arrays)."
    )
    waste = w.gpu_hours_wasted
    return Decision(
        kind=KIND,
        severity=severity_from_waste(waste, t, w.measured_share),
        title=f"Input-bound: GPUs {pct(busy)} busy, host CPUs {pct(cpu)} of allocation",
        explanation=explanation,
        suggestion=suggestion,
        evidence={
            "window_min": round(w.span_s / 60, 1),
            "measured_pct": r2(100 * w.measured_share),
            "gpus": n,
            "nodes": w.nodes,
            "busy_mean_pct": r2(busy),
            "busy_source": w.busy_source,
            "util_mean_pct": r2(util),
            "cpu_used_pct_of_allocated": r2(cpu),
            "cpus_per_node": w.cpus_per_node,
            "nvlink_mean_pct": r2(nvlink.mean),
            "nic_mean_pct": r2(w.nic.mean) if w.nodes > 1 else None,
            "gpu_hours_wasted": r2(waste, 2),
        },
        wasted_gpu_hours=waste,
    )
