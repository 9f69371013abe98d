"""What the node page shows, gathered without a request: its GPUs' and NICs' series over
the range, the jobs on it (scoped to what the viewer may see) and its charts."""

from django.db.models import Q

from clusterui.fabric import history
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
                    "mig_profile": None if parent is None else profile,
                    "start": first,
                    "end": end if running else last, "running": running})
    return out


def gpus_held(allocs) -> str:
    """The GPUs of one job's allocations here, in index order, as the jobs table says them:
    "GPU 0", "GPUs 1, 2", "GPUs 0–7" (a run of three or more, as Slurm's GPU index lists
    write it); MIG instances under their GPU by profile and GPU instance, runs likewise:
    "GPU 0 · MIG 1g.10gb (GI 1–7); GPU 1 · MIG 1g.10gb (GI 1)"."""
    whole = sorted({a["gpu_index"] for a in allocs if a.get("mig_profile") is None})
    migs: dict[tuple, set] = {}
    for a in allocs:
        if a.get("mig_profile") is not None:
            migs.setdefault((a["gpu_index"], a["mig_profile"]), set()).add(a["mig_gi"])
    if not migs:
        return ("GPU " if len(whole) == 1 else "GPUs ") + _runs(whole)
    parts = [(index, "", f"GPU {index}") for index in whole]
    for (index, profile), gis in migs.items():
        # GPU instances by id (0 is one), an instance whose id was not reported as "?"
        said = ", ".join(filter(None, [_runs(sorted(gi for gi in gis if gi is not None)),
                                       "?" if None in gis else ""]))
        parts.append((index, profile, f"GPU {index} · MIG {profile or '?'} (GI {said})"))
    return "; ".join(text for _, _, text in sorted(parts))


def _runs(numbers: list[int]) -> str:
    """0, 1, 2, 3, 7 -> "0–3, 7": a run of three or more as its ends."""
    said, run = [], []
    for n in [*numbers, None]:
        if run and n is not None and n == run[-1] + 1:
            run.append(n)
            continue
        said += [f"{run[0]}–{run[-1]}"] if len(run) >= 3 else map(str, run)
        run = [n]
    return ", ".join(said)


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
        "fabric_errors": ts_figs.port_errors_chart(
            ns, history.error_buckets([n.id for n in nics], ns.ts[0], ns.step, len(ns.ts))
            if ns.ts else {}, {n.id: n.name for n in nics}),
        "jobs": ts_figs.jobs_timeline(allocs, start, end),
    }, gs.step
