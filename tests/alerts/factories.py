"""Jobs, findings and efficiency rows as the detectors write them, for the alert tests
(until the detector pass can produce them from samples in a test)."""

import datetime as dt
import itertools

from django.contrib.auth import get_user_model
from django.utils import timezone

from clusterui.findings.models import Finding, JobEfficiency
from clusterui.inventory.models import Cluster, Node
from clusterui.jobs.models import Job

_ids = itertools.count(812345)


def make_user(username: str, *, email: str | None = None, staff: bool = False):
    email = f"{username}@example.org" if email is None else email
    return get_user_model().objects.create_user(username, email=email, password="pw",
                                                is_staff=staff)


def make_job(user: str = "alice", *, account: str = "nlp", name: str = "llama-ft",
             cluster: str = "test", minutes: int = 90) -> Job:
    now = timezone.now()
    return Job.objects.create(
        cluster=Cluster.objects.get_or_create(name=cluster)[0], scheduler="slurm",
        external_id=str(next(_ids)), user=user, name=name, account=account, partition="gpu",
        started_at=now - dt.timedelta(minutes=minutes), first_seen=now - dt.timedelta(minutes=minutes),
        last_seen=now, cpus=32)


def make_node(name: str = "gpu-a017", cluster: str = "test") -> Node:
    now = timezone.now()
    return Node.objects.create(cluster=Cluster.objects.get_or_create(name=cluster)[0], name=name,
                               first_seen=now, last_seen=now, sample_interval_s=10)


LOW_UTIL_EVIDENCE = {"mean_util_pct": 7.94, "p95_util_pct": 21.0, "gpus": 8,
                     "window_minutes": 60, "threshold_pct": 25}


def make_finding(job: Job | None = None, *, kind: str = "low_utilization",
                 severity: str = "warning", wasted: float = 12.46, node: Node | None = None,
                 evidence: dict | None = None, **extra) -> Finding:
    now = timezone.now()
    fields = dict(
        kind=kind, severity=severity, job=job, node=node,
        window_start=now - dt.timedelta(hours=1), window_end=now,
        first_seen=now - dt.timedelta(minutes=40), last_seen=now,
        evidence=LOW_UTIL_EVIDENCE if evidence is None else evidence,
        wasted_gpu_hours=wasted,
        title="The job's 8 GPUs averaged 7.9 % utilization over the last hour",
        explanation="Its GPUs were busy less than 25 % of the time over the window: most of "
                    "the GPU time allocated to it went unused.",
        suggestion="Check that the job really uses its GPUs (CUDA visible, the model on the "
                   "device), or ask for fewer GPUs next time.",
    )
    fields.update(extra)
    return Finding.objects.create(**fields)


def make_efficiency(job: Job, *, allocated: float, wasted: float, gpus: int = 8) -> JobEfficiency:
    now = timezone.now()
    return JobEfficiency.objects.create(
        job=job, computed_at=now, window_start=job.started_at, window_end=now, gpus=gpus,
        gpu_hours_allocated=allocated, gpu_hours_used=allocated - wasted,
        gpu_hours_wasted=wasted, util_source="nvml_util", util_mean_pct=100 * (1 - wasted / allocated))
