"""What the node page shows, gathered without a request: its GPUs' and NICs' series over
the range, the jobs on it (scoped to what the viewer may see) and its charts."""

from django.db.models import Q

from clusterui.inventory.models import gpu_label
from clusterui.jobs.choices import JobState
from clusterui.jobs.models import Job, JobGpu
from clusterui.telemetry.series import gpu_series, nic_series, pick_step
from clusterui.web import derived
from clusterui.web.figures import evidence
from clusterui.web.figures import timeseries as ts_figs
from clusterui.web.figures.common import points_per_series

GPU_METRICS = ("util_pct", "mem_used_mib", "power_w", "temp_c", *evidence.METRICS)


def allocations(node, user, start, end) -> list[dict]:
    """The allocations of this node's GPUs to jobs ``user`` may see, active in the range."""
    visible = Job.objects.visible_to(user)
    rows = (
        JobGpu.objects.filter(gpu__node=node, job__in=visible, first_seen__lt=end)
        .filter(Q(last_seen__gte=start) | Q(job__state=JobState.RUNNING))
        .values_list("job_id", "job__external_id", "job__user", "job__name", "job__state",
                     "job__ended_at", "gpu__index", "first_seen", "last_seen", "gpu_id",
                     "gpu__parent_id", "gpu__mig_profile", "gpu__mig_gi_id")
        .order_by("first_seen", "gpu__index", "gpu__mig_gi_id", "gpu_id")
    )
    out = []
    for (job_id, ext, user_name, name, state, ended_at, index, first, last, gpu_id, parent,
         profile, gi) in rows:
        running = state == JobState.RUNNING and ended_at is None
        # A MIG instance shares its GPU's index: it is named by its profile too.
        gpu = str(index) if parent is None else gpu_label(index, parent, profile, gi)[4:]
        out.append({"job_id": job_id, "label": ext, "user": user_name, "name": name,
                    "gpu_index": index, "mig_gi": gi, "gpu_id": gpu_id, "gpu_label": gpu,
                    "start": first,
                    "end": end if running else last, "running": running})
    return out


def gpus_held(allocs) -> str:
    """The GPUs of one job's allocations here, in index order, as the jobs table says them:
    "GPU 0", "GPUs 1, 2", "GPUs 0–7" (a run of three or more, as Slurm's GPU index lists
    write it), MIG instances by their labels."""
    order = {(a["gpu_index"], a["gpu_label"]):
             (a["gpu_index"], -1 if a["mig_gi"] is None else a["mig_gi"], a["gpu_label"])
             for a in allocs}  # a GPU, then its MIG instances by GPU instance (GI 0 too)
    labels = sorted(order, key=order.get)
    if all(label == str(index) for index, label in labels):
        said, run = [], []
        for index, _ in labels + [(None, None)]:
            if run and index == run[-1] + 1:
                run.append(index)
                continue
            if len(run) >= 3:
                said.append(f"{run[0]}–{run[-1]}")
            else:
                said += map(str, run)
            run = [index]
    else:
        said = [label for _, label in labels]
    return ("GPU " if len(labels) == 1 else "GPUs ") + ", ".join(said)


# Charts drawn with the band from the lowest to the highest sample of any GPU.
BANDED = ("util_pct", "sm_active_pct")


def figures(node, gpus, nics, allocs, start, end) -> tuple[dict, int]:
    """The node's charts and the bucket width they were read at."""
    labels = {g.id: g.label for g in gpus}
    minimum = node.sample_interval_s or 1
    step = pick_step(start, end, minimum=minimum, max_points=points_per_series(len(gpus)))
    gs = gpu_series(list(labels), GPU_METRICS, start, end, step=step)
    ns = nic_series([n.id for n in nics], ("rx_bytes_per_s", "tx_bytes_per_s"), start, end,
                    step=gs.step)
    # Where a bucket holds several samples, the lowest and highest of any GPU in it: the
    # dips each GPU's bucket mean hides (a training step's pause) stay visible.
    bands = {}
    if gs.step > minimum:
        ids = list(labels)
        low = gpu_series(ids, BANDED, start, end, step=gs.step, agg="min")
        high = gpu_series(ids, BANDED, start, end, step=gs.step, agg="max")
        bands = {m: (derived.extreme_over(low, ids, m, min),
                     derived.extreme_over(high, ids, m, max)) for m in BANDED}
    return {
        "util": ts_figs.per_gpu_chart(gs, "util_pct", labels, y_title="GPU utilization (NVML) %",
                                      y_range=ts_figs.PCT_RANGE, band=bands.get("util_pct")),
        **evidence.charts(gs, labels, gpus, sm_band=bands.get("sm_active_pct")),
        "memory": ts_figs.per_gpu_chart(
            gs, "mem_used_mib", labels, y_title="GiB", scale=ts_figs.GIB_PER_MIB,
            capacities={g.id: g.memory_total_mib for g in gpus},
            capacity_label="capacity {:,.0f} GiB",
            hover_format=".1f"),
        "power": ts_figs.per_gpu_chart(
            gs, "power_w", labels, y_title="W", capacities={g.id: g.power_limit_w for g in gpus},
            capacity_label="power limit {:,.0f} W"),
        "temperature": ts_figs.per_gpu_chart(gs, "temp_c", labels, y_title="°C"),
        "network": ts_figs.nic_throughput_chart(ns, nics),
        "jobs": ts_figs.jobs_timeline(allocs, start, end),
    }, gs.step
