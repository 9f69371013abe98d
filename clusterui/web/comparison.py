"""Two jobs side by side (the same training before and after a change): their figures in
one table, their findings, and their GPU activity against time since each started, on one
chart, read at the same resolution."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import plotly.graph_objects as go
from django.core.exceptions import ObjectDoesNotExist

from clusterui.jobs.models import JobGpu
from clusterui.telemetry.series import gpu_series, pick_step
from clusterui.web import derived
from clusterui.web.figures import timeseries as ts_figs
from clusterui.web.figures.common import color, layout
from clusterui.web.jobpage import job_bounds

MAX_POINTS = 600


@dataclass
class Curve:
    label: str
    minutes: list[float]
    util: list[float | None]  # GPU utilization (NVML), mean over the job's GPUs
    sm: list[float | None]  # SM activity (GPM), mean over the job's GPUs


def efficiency(job):
    try:
        return job.efficiency
    except ObjectDoesNotExist:
        return None


def curves(jobs, now: dt.datetime) -> tuple[list[Curve], int]:
    """Each job's mean activity over its whole run, x in minutes since it started, both at
    one resolution: the longer run's, so neither is smoothed more than the other."""
    runs = []
    for job in jobs:
        start, end, _ = job_bounds(job, now)
        allocations = list(JobGpu.objects.filter(job=job).select_related("gpu__node"))
        minimum = max((a.gpu.node.sample_interval_s or 1 for a in allocations), default=1)
        runs.append((job, start, end, [a.gpu_id for a in allocations],
                     pick_step(start, end, minimum=minimum, max_points=MAX_POINTS)))
    step = max(r[4] for r in runs)
    out = []
    for job, start, end, ids, _ in runs:
        if not ids:
            continue
        s = gpu_series(ids, ("util_pct", "sm_active_pct"), start, end, step=step)
        # Buckets are aligned on the clock: the first starts up to a step before the job
        # did, and holds only samples from after its start.
        minutes = [max(0.0, (t - start).total_seconds() / 60) for t in s.ts]
        # A start the collector did not report: the curve counts from the first sight.
        label = job.external_id if job.started_at else f"{job.external_id} (from first seen)"
        out.append(Curve(label=label, minutes=minutes,
                         util=derived.mean_over(s, ids, "util_pct"),
                         sm=derived.mean_over(s, ids, "sm_active_pct")))
    return out, step


def chart(curves: list[Curve]):
    """Each job's SM activity (solid) and NVML utilization (dotted) against minutes since
    its start."""
    traces = []
    for i, c in enumerate(curves):
        colour = color(i)
        for values, what, dash in ((c.sm, "SM activity (GPM)", "solid"),
                                   (c.util, "GPU utilization (NVML)", "dot")):
            if any(v is not None for v in values):
                traces.append({"type": "scatter", "mode": "lines", "x": c.minutes,
                               "y": values, "name": f"job {c.label}: {what}",
                               "line": {"color": colour, "dash": dash, "width": 1.8},
                               "hovertemplate": "%{y:.0f} %"})
    if not traces:
        return None
    base = layout(height=320, y_title="%, mean over the job's GPUs", y_range=ts_figs.PCT_RANGE)
    base["xaxis"] = {**base["xaxis"], "type": "linear",
                     "title": {"text": "minutes since the job started", "font": {"size": 11}}}
    return go.Figure(data=traces, layout=base)


ROWS = (
    ("Efficiency", lambda e: e.efficiency_pct, "pct"),
    ("GPU-hours allocated", lambda e: e.gpu_hours_allocated, "hours"),
    ("GPU-hours used", lambda e: e.gpu_hours_used, "hours"),
    ("GPU-hours wasted", lambda e: e.gpu_hours_wasted, "hours"),
    # Below 95 %, the GPU-hours take the time before the first sample to be like the rest.
    ("Share of the run measured", lambda e: e.measured_pct, "pct"),
    ("Mean busy (SM activity where reported, else NVML)", lambda e: e.util_mean_pct, "pct"),
    ("GPU memory high-water (MiB)", lambda e: e.mem_peak_mib, "int"),
    ("Energy (kWh)", lambda e: None if e.energy_j is None else e.energy_j / 3.6e6, "num"),
    ("Host CPU cores used", lambda e: e.cpu_cores_mean, "num"),
    ("NIC traffic, mean % of capacity", lambda e: e.nic_util_mean_pct, "pct"),
    ("NVLink traffic, mean % of capacity", lambda e: e.nvlink_util_mean_pct, "pct"),
)


def figure_rows(jobs) -> list[dict]:
    effs = [efficiency(j) for j in jobs]
    out = []
    for label, get, kind in ROWS:
        values = [None if e is None else get(e) for e in effs]
        out.append({"label": label, "values": values, "kind": kind})
    return out
