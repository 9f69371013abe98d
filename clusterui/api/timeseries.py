"""The metrics of a node, a GPU, a NIC or a job, as one aligned answer for the API.

Which devices a request covers is decided here; the reading itself is
``clusterui.telemetry.series`` (one bucketed query per device kind). Every series in an
answer shares one time axis, so a client can plot or compare them index by index.

- a GPU: its own GPU metrics;
- a NIC: its own receive and transmit rates;
- a node: each of its GPUs, and each of its NICs for NIC metrics;
- a job: each GPU allocated to it, the NICs of the nodes those GPUs are on, and the job's
  own host metrics (CPU cores, host memory). A job's series never reach outside the time
  it ran, so they never show another job's use of the same GPUs.
"""

import datetime as dt
import math
from dataclasses import dataclass, field

from django.utils import timezone

from clusterui.inventory.models import Nic
from clusterui.telemetry.metrics import GPU_METRICS, JOB_METRICS, NIC_METRICS
from clusterui.telemetry.series import (
    MAX_POINTS,
    SeriesError,
    gpu_series,
    job_host_series,
    nic_series,
    pick_step,
)

METRICS_BY_SOURCE = {"gpu": GPU_METRICS, "nic": NIC_METRICS, "job": JOB_METRICS}
_READERS = {"gpu": gpu_series, "nic": nic_series, "job": job_host_series}
MAX_BUCKETS = 10 * MAX_POINTS
DEFAULT_SPAN = dt.timedelta(hours=1)


@dataclass
class Subject:
    """What one request may read: devices by source, each as ``(id, label, node name)``."""

    what: str  # "GPU", "NIC", "node" or "job", for messages
    devices: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    # The sampling interval of the nodes involved: buckets are never finer.
    minimum: float = 1.0
    # The job's lifetime, which bounds a job's series; None for nodes and GPUs.
    window: tuple[dt.datetime, dt.datetime] | None = None

    def known(self) -> list[str]:
        return [m.name for source in self.devices for m in METRICS_BY_SOURCE[source]]


def _gpu(g) -> tuple[int, str, str]:
    return g.id, f"{g.node.name}/gpu{g.index}", g.node.name


def _nic(n) -> tuple[int, str, str]:
    return n.id, f"{n.node.name}/{n.name}", n.node.name


def _minimum(nodes) -> float:
    return max([n.sample_interval_s or 1.0 for n in nodes] or [1.0])


def for_gpu(gpu) -> Subject:
    return Subject("GPU", {"gpu": [_gpu(gpu)]}, minimum=_minimum([gpu.node]))


def for_nic(nic) -> Subject:
    return Subject("NIC", {"nic": [_nic(nic)]}, minimum=_minimum([nic.node]))


def for_node(node) -> Subject:
    gpus = sorted(node.gpus.all(), key=lambda g: g.index)
    nics = sorted(node.nics.all(), key=lambda n: n.name)
    for g in gpus + nics:
        g.node = node
    return Subject("node", {"gpu": [_gpu(g) for g in gpus], "nic": [_nic(n) for n in nics]},
                   minimum=_minimum([node]))


def job_window(job, now: dt.datetime | None = None) -> tuple[dt.datetime, dt.datetime]:
    """From the job's start to its end (now while it runs)."""
    start = job.started_at or job.first_seen
    end = job.ended_at or (job.last_seen if job.state == "ended" else now or timezone.now())
    return start, max(end, start + dt.timedelta(seconds=1))


def for_job(job) -> Subject:
    gpus = sorted((a.gpu for a in job.allocations.select_related("gpu__node")),
                  key=lambda g: (g.node.name, g.index))
    nodes = {g.node_id: g.node for g in gpus}
    nics = Nic.objects.select_related("node").filter(node_id__in=nodes).order_by(
        "node__name", "name")
    return Subject(
        "job",
        {"gpu": [_gpu(g) for g in gpus], "nic": [_nic(n) for n in nics],
         "job": [(job.id, f"job {job.external_id}", "")]},
        minimum=_minimum(nodes.values()),
        window=job_window(job),
    )


def resolve_range(subject: Subject, start, end, now=None) -> tuple[dt.datetime, dt.datetime]:
    """The range to read: what was asked, defaulted (a job's lifetime; else ``to`` is now
    and ``from`` an hour before it) and, for a job, kept within its lifetime."""
    now = now or timezone.now()
    if subject.window is None:
        end = end or now
        start = start or end - DEFAULT_SPAN
        if end <= start:
            raise SeriesError("to must be after from (to defaults to now)")
        return start, end
    lo, hi = subject.window
    start, end = max(start or lo, lo), min(end or hi, hi)
    if end <= start:
        raise SeriesError(f"the job ran from {lo.isoformat()} to {hi.isoformat()}: "
                          "the range asked for is outside it")
    return start, end


def split(subject: Subject, metrics: list[str]) -> dict[str, list[str]]:
    """The asked-for metrics by source, or a SeriesError naming the unknown ones."""
    source_of = {m.name: s for s in subject.devices for m in METRICS_BY_SOURCE[s]}
    unknown = [m for m in metrics if m not in source_of]
    if unknown:
        raise SeriesError(f"unknown metric(s) for a {subject.what}: {', '.join(unknown)}; "
                          f"known: {', '.join(subject.known())}")
    by_source: dict[str, list[str]] = {}
    for m in metrics:
        by_source.setdefault(source_of[m], []).append(m)
    return by_source


def read(subject: Subject, metrics: list[str], start, end, *, step=None,
         agg="avg") -> dict:
    """``{"from", "to", "step_s", "agg", "ts": [...], "series": [{"metric", "unit", "label",
    "source", "id", "name", "node", "values": [...]}]}``, series in the order the
    metrics were asked for, then by device."""
    by_source = split(subject, metrics)
    start, end = resolve_range(subject, start, end)
    step = step or pick_step(start, end, minimum=subject.minimum)
    buckets = math.ceil((end - start).total_seconds() / step)
    if buckets > MAX_BUCKETS:
        raise SeriesError(f"{buckets} buckets of {step} s is more than {MAX_BUCKETS}: ask for a "
                          "shorter range or a larger step")
    meta = {m.name: m for ms in METRICS_BY_SOURCE.values() for m in ms}
    read_back, axis = {}, None
    for source, names in by_source.items():
        devices = subject.devices[source]
        series = _READERS[source]([d[0] for d in devices], names, start, end, step=step,
                                  agg=agg, minimum=subject.minimum)
        axis = series.ts
        for device_id, label, node in devices:
            for name in names:
                read_back.setdefault(name, []).append({
                    "metric": name, "unit": meta[name].unit, "label": meta[name].label,
                    "source": source, "id": device_id, "name": label, "node": node,
                    "values": series.values[device_id][name],
                })
    return {
        "from": start, "to": end, "step_s": step, "agg": agg,
        "ts": axis or [],
        "series": [s for name in metrics for s in read_back.get(name, [])],
    }
