"""What the job page shows, gathered without a request: its allocation, the range, its
time series (a constant number of queries whatever its size) and its charts."""

import datetime as dt
from dataclasses import dataclass, field

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Exists, OuterRef
from django.utils import timezone

from clusterui.fabric import history
from clusterui.fabric.models import PortLink
from clusterui.inventory.models import Nic
from clusterui.jobs.choices import JobState
from clusterui.jobs.models import JobGpu
from clusterui.telemetry.series import gpu_series, job_host_series, nic_series, pick_step
from clusterui.web import derived, scheduler_facts, timerange
from clusterui.web.figures import evidence, nodestrip
from clusterui.web.figures import timeseries as ts_figs
from clusterui.web.figures.common import points_per_series

GPU_METRICS = ("util_pct", "mem_used_mib", "power_w", "temp_c", *evidence.METRICS)
# A little before the first and after the last sample, so the edges are visible.
PAD = dt.timedelta(seconds=30)


@dataclass
class JobView:
    job: object
    allocations: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    range: timerange.TimeRange | None = None
    range_error: str | None = None
    whole: bool = True
    figures: dict = field(default_factory=dict)
    step: int | None = None
    scheduler: list = field(default_factory=list)  # scheduler_facts.Fact
    scheduler_none: str | None = None  # why there are no facts (not a Slurm job)
    fabric_ports: bool = False  # the job's nodes have ports that report fabric counters

    @property
    def gpu_count(self) -> int:
        return len(self.allocations)

    @property
    def has_samples(self) -> bool:
        return any(f is not None for f in self.figures.values())


def job_bounds(job, now) -> tuple[dt.datetime, dt.datetime, bool]:
    """When the job ran, and whether it still runs."""
    running = job.state == JobState.RUNNING and job.ended_at is None
    start = job.started_at or job.first_seen
    end = now if running else (job.ended_at or job.last_seen)
    return start, max(end, start + dt.timedelta(seconds=1)), running


def job_range(job, params, now, data_from=None) -> tuple[timerange.TimeRange, str | None, bool]:
    """The whole job by default (from its first sample when monitoring began after it
    started); a preset is the last part of the job; a custom range is clipped to its life."""
    start, end, running = job_bounds(job, now)
    if data_from is not None and data_from > start:
        start = data_from
    if not any(params.get(k) for k in timerange.PARAMS):
        return timerange.TimeRange(start - PAD, min(end + PAD, now), None, running), None, True
    try:
        tr = timerange.parse(params, now=end if not running else now)
    except timerange.TimeRangeError as exc:
        return (timerange.TimeRange(start - PAD, min(end + PAD, now), None, running),
                str(exc), True)
    lo, hi = max(tr.start, start - PAD), min(tr.end, end + PAD, now)
    if hi <= lo:
        return (timerange.TimeRange(start - PAD, min(end + PAD, now), None, running),
                "that range does not overlap the job's run", True)
    return timerange.TimeRange(lo, hi, tr.preset, running and tr.live), None, False


def activity_band(gs, ids, start, end):
    """The lowest and highest sample of any of the job's GPUs in each bucket, of SM
    activity where the GPUs report it, else NVML utilization (two more reads of the same
    buckets, with ``agg="min"`` and ``"max"``)."""
    metric, what = (("sm_active_pct", "SM activity (GPM)")
                    if derived.has_metric(gs, ids, "sm_active_pct")
                    else ("util_pct", "GPU utilization (NVML)"))
    low = gpu_series(ids, [metric], start, end, step=gs.step, agg="min")
    high = gpu_series(ids, [metric], start, end, step=gs.step, agg="max")
    return (derived.extreme_over(low, ids, metric, min),
            derived.extreme_over(high, ids, metric, max), what)


def build(job, params, now: dt.datetime | None = None) -> JobView:
    now = now or timezone.now()
    view = JobView(job=job)
    view.allocations = list(
        JobGpu.objects.filter(job=job).select_related("gpu__node")
        .order_by("gpu__node__name", "gpu__index")
    )
    view.nodes = sorted({a.gpu.node for a in view.allocations}, key=lambda n: n.name)
    # When monitoring began: the first allocation seen, or the detectors' first sample
    # (whichever is earlier: a replayed spool can land after newer batches).
    firsts = [a.first_seen for a in view.allocations]
    try:
        firsts.append(job.efficiency.window_start)
    except ObjectDoesNotExist:
        pass
    data_from = min(firsts, default=None)
    view.range, view.range_error, view.whole = job_range(job, params, now, data_from)
    began, until, running = job_bounds(job, now)
    view.scheduler = scheduler_facts.facts(job, until - began, running)
    view.scheduler_none = scheduler_facts.none_because(job)
    gpus = [a.gpu for a in view.allocations]
    if not gpus:
        return view
    start, end = view.range.start, view.range.end
    minimum = max((n.sample_interval_s or 1) for n in view.nodes)
    labels = {g.id: (f"{g.node.name} · {g.label}" if len(view.nodes) > 1 else g.label)
              for g in gpus}
    step = pick_step(start, end, minimum=minimum, max_points=points_per_series(len(gpus)))
    gs = gpu_series(list(labels), GPU_METRICS, start, end, step=step)
    view.step = gs.step
    nics = derived.fabric_nics(
        Nic.objects.filter(node__in=view.nodes).order_by("name")
        # Whether the port reports fabric counters (its link row), in the same query.
        .annotate(reports_fabric=Exists(PortLink.objects.filter(nic=OuterRef("pk")))))
    ns = nic_series([n.id for n in nics], ("rx_bytes_per_s", "tx_bytes_per_s"), start, end,
                    step=gs.step)
    hs = job_host_series([job.id], ("cpu_cores_used",), start, end, step=gs.step)
    # Collectors report a job's CPUs on their node (SLURM_CPUS_ON_NODE), as the
    # detectors read them; the host series is the mean over the job's nodes.
    cpus_per_node = job.cpus
    ids = list(labels)
    view.figures = {
        "activity": ts_figs.activity_chart(
            gs, gpu_util=derived.mean_over(gs, ids, "util_pct"),
            gpu_sm=derived.mean_over(gs, ids, "sm_active_pct"),
            nic_pct=derived.nic_load_pct(ns, nics), nvlink_pct=derived.nvlink_load_pct(gs, gpus),
            band=activity_band(gs, ids, start, end)),
        "util": ts_figs.per_gpu_chart(gs, "util_pct", labels, y_title="GPU utilization (NVML) %",
                                      y_range=ts_figs.PCT_RANGE),
        "memory": ts_figs.per_gpu_chart(
            gs, "mem_used_mib", labels, y_title="GiB", scale=ts_figs.GIB_PER_MIB,
            capacities={g.id: g.memory_total_mib for g in gpus},
            capacity_label="capacity {:,.0f} GiB",
            hover_format=".1f"),
        "power": ts_figs.per_gpu_chart(
            gs, "power_w", labels, y_title="W", capacities={g.id: g.power_limit_w for g in gpus},
            capacity_label="power limit {:,.0f} W"),
        "temperature": ts_figs.per_gpu_chart(gs, "temp_c", labels, y_title="°C"),
        "cpu": ts_figs.host_cpu_chart(hs, job.id, cpus_per_node=cpus_per_node),
        **evidence.charts(gs, labels, gpus),
    }
    if len(view.nodes) > 1:
        view.figures.update(node_strips(view.nodes, gpus, gs, nics, ns))
    view.fabric_ports = any(n.reports_fabric for n in nics)
    if view.fabric_ports and ns.ts:
        view.figures["fabric_errors"] = fabric_errors_chart(view.nodes, nics, ns)
    return view


def fabric_errors_chart(nodes, nics, ns):
    """The error counters of the job's nodes' fabric ports over the page's range (as each
    node's page draws its own): a link that errs slows every node that waits on it."""
    names = {n.id: n.name for n in nodes}
    ports = [n for n in nics if n.reports_fabric]
    labels = {n.id: f"{names[n.node_id]} {n.name}" if len(nodes) > 1 else n.name
              for n in ports}
    buckets = history.error_buckets(list(labels), ns.ts[0], ns.step, len(ns.ts))
    return ts_figs.port_errors_chart(ns, buckets, labels)


def node_strips(nodes, gpus, gs, nics, ns) -> dict:
    """A multi-node job's nodes x time strips, from the series the page already read: each
    node's mean SM activity over its GPUs, or NVML utilization unless every node reports SM
    activity (rows of one quantity: a node without GPM is a row too, not left out), and its
    fabric traffic against capacity. The odd node is the odd row."""
    on = {n.id: [g.id for g in gpus if g.node_id == n.id] for n in nodes}
    metric, what = (("sm_active_pct", "SM activity (GPM)")
                    if all(derived.has_metric(gs, on[n.id], "sm_active_pct") for n in nodes)
                    else ("util_pct", "GPU utilization (NVML)"))
    busy = [(n.name, derived.mean_over(gs, on[n.id], metric)) for n in nodes]
    traffic = [(n.name, derived.nic_load_pct(ns, [c for c in nics if c.node_id == n.id]))
               for n in nodes]
    return {
        "nodes_busy": nodestrip.node_strip(gs, busy, quantity=what),
        "nodes_traffic": nodestrip.node_strip(ns, traffic,
                                              quantity="fabric traffic, % of link capacity"),
    }
