"""GPU-hours and energy per user, account, partition, cluster or Kubernetes namespace (the
jobs that have one: a Slurm job has none, as on the users page), day by day, week by week
or month by month, from the hourly job rollups (``telemetry_jobrollup1h``, kept
``ROLLUP_1H_RETENTION_DAYS``).

Per (job, hour) the rollup holds the GPU-seconds its GPUs reported (``gpu_s``), their mean
busy level (SM activity where reported, else NVML utilization: ``busy_pct``) and the sum of
their mean power (``power_w``). So, per row:

- GPU-hours: ``gpu_s / 3600``, the GPUs' measured time, not the allocation's wall time;
- used GPU-hours: ``gpu_s * busy_pct / 100 / 3600`` (the efficiency definition's);
- energy: ``power_w * gpu_s / gpus`` joules (mean power times the hour's mean GPU time),
  an estimate from mean power, not the GPUs' energy counters.

An hour is rolled up when compaction packs it (``RAW_HOT_MINUTES`` after it closed): the
hour in progress is not counted yet.
"""

import datetime as dt
from dataclasses import dataclass, field

from django.db import connection
from django.utils import timezone

from clusterui.jobs import visibility
from clusterui.jobs.usage import NOT_REPORTED

GROUPS = {"user": "User", "account": "Account", "partition": "Partition",
          "cluster": "Cluster", "namespace": "Namespace"}
# period key: (label, date_trunc unit, how many buckets)
PERIODS = {"30d": ("30 days, by day", "day", 30),
           "12w": ("12 weeks, by week", "week", 12),
           "12m": ("12 months, by month", "month", 12)}
METRICS = {"gpu_hours": "GPU-hours", "used_gpu_hours": "GPU-hours used",
           "energy_kwh": "Energy (kWh)"}
TOP = 8  # groups drawn in the chart; the rest are summed as "others"
_GROUP_SQL = {"user": "j.user", "account": "j.account", "partition": "j.partition",
              "cluster": "c.name", "namespace": "j.namespace"}

_SQL = """
SELECT date_trunc(%(unit)s, r.bucket AT TIME ZONE %(tz)s) AS period,
       {group} AS name,
       sum(r.gpu_s) / 3600.0,
       sum(r.gpu_s * r.busy_pct / 100.0) / 3600.0,
       sum(r.gpu_s) FILTER (WHERE r.busy_pct IS NOT NULL) / 3600.0,
       sum(r.power_w * r.gpu_s / r.gpus) / 3.6e6
FROM telemetry_jobrollup1h r
JOIN jobs_job j ON j.id = r.job_id
JOIN inventory_cluster c ON c.id = j.cluster_id
WHERE r.bucket >= %(start)s AND r.bucket < %(end)s {visible}
GROUP BY 1, 2
"""


@dataclass
class Group:
    name: str
    gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0
    measured_gpu_hours: float = 0.0  # GPU-hours whose busy level was reported
    energy_kwh: float = 0.0
    by_period: dict = field(default_factory=dict)  # period start -> {metric: value}

    @property
    def efficiency_pct(self) -> float | None:
        if not self.measured_gpu_hours:
            return None
        return 100.0 * self.used_gpu_hours / self.measured_gpu_hours


@dataclass
class Trends:
    group: str
    period: str
    periods: list[dt.datetime]  # each bucket's start, local time
    groups: list[Group]  # largest GPU-hours first
    start: dt.datetime
    end: dt.datetime

    @property
    def unit(self) -> str:
        return PERIODS[self.period][1]

    def label(self, start: dt.datetime) -> str:
        """A bucket's name on the chart and in the table."""
        return start.strftime({"day": "%b %d", "week": "%b %d", "month": "%Y-%m"}[self.unit])

    def total(self, metric: str) -> float:
        return sum(getattr(g, metric) for g in self.groups)


def bucket_starts(period: str, now: dt.datetime) -> list[dt.datetime]:
    """The local start of each bucket of ``period`` ending with the one ``now`` is in."""
    _label, unit, count = PERIODS[period]
    local = timezone.localtime(now)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    if unit == "day":
        first = day - dt.timedelta(days=count - 1)
        return [first + dt.timedelta(days=i) for i in range(count)]
    if unit == "week":  # ISO weeks, as PostgreSQL's date_trunc('week'): Monday
        monday = day - dt.timedelta(days=day.weekday())
        first = monday - dt.timedelta(weeks=count - 1)
        return [first + dt.timedelta(weeks=i) for i in range(count)]
    months, out = day.year * 12 + day.month - 1 - (count - 1), []
    for i in range(count):
        y, m = divmod(months + i, 12)
        out.append(dt.datetime(y, m + 1, 1))
    return out


def trends(viewer, group: str, period: str, now: dt.datetime | None = None, *,
           cluster: str = "") -> Trends:
    """The viewer's visible jobs' figures per ``group`` and bucket of ``period``;
    ``cluster``: that cluster's jobs only ("": every cluster's)."""
    if group not in GROUPS:
        raise ValueError(f"by must be one of {', '.join(GROUPS)}")
    if period not in PERIODS:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}")
    now = now or timezone.now()
    tz = timezone.get_current_timezone()
    starts = bucket_starts(period, now)
    start = timezone.make_aware(starts[0], tz)
    params = {"unit": PERIODS[period][1], "tz": timezone.get_current_timezone_name(),
              "start": start, "end": now}
    visible = ""
    rule = visibility.rule_for(viewer)
    if rule is not None:
        condition, rule_params = rule.sql("j")
        visible = f"AND {condition}"
        params.update(rule_params)
    if cluster:
        visible += " AND c.name = %(cluster)s"
        params["cluster"] = cluster
    if group == "namespace":  # Kubernetes jobs only: a Slurm job has no namespace
        visible += " AND j.namespace <> ''"
    with connection.cursor() as cur:
        cur.execute(_SQL.format(group=_GROUP_SQL[group], visible=visible), params)
        rows = cur.fetchall()
    groups: dict[str, Group] = {}
    for period_start, name, hours, used, measured, kwh in rows:
        g = groups.setdefault(name or NOT_REPORTED, Group(name or NOT_REPORTED))
        g.gpu_hours += hours or 0.0
        g.used_gpu_hours += used or 0.0
        g.measured_gpu_hours += measured or 0.0
        g.energy_kwh += kwh or 0.0
        cell = g.by_period.setdefault(period_start, dict.fromkeys(METRICS, 0.0))
        cell["gpu_hours"] += hours or 0.0
        cell["used_gpu_hours"] += used or 0.0
        cell["energy_kwh"] += kwh or 0.0
    ordered = sorted(groups.values(), key=lambda g: (-g.gpu_hours, g.name))
    return Trends(group=group, period=period, periods=starts, groups=ordered, start=start,
                  end=now)
