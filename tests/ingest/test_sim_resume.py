"""A restarted ``make demo`` continues its stored history (``manage.py sim_resume``): the
simulator back-fills only after the newest stored sample and numbers its jobs after the
stored ones, so no GPU is sampled twice and no job "starts" on two timelines. Real
PostgreSQL, the real collector code on the NVML simulator, the real ingest."""

import io
import json
import math
import time

import pytest
from django.core.management import call_command
from django.db.models import Max

from clusterui.ingest.simulate import feed
from clusterui.jobs.models import Job
from clusterui.telemetry.models import GpuLatest
from collectors.sim.cluster import ClusterSim

pytestmark = pytest.mark.django_db(transaction=True)


def resume(cluster="demo") -> dict:
    out = io.StringIO()
    call_command("sim_resume", "--cluster", cluster, stdout=out)
    return json.loads(out.getvalue())


def run(tmp_path, name, start, seconds, **kwargs) -> set[str]:
    """A simulated run from ``start`` for ``seconds``, stored; the job ids its batches
    named."""
    sent: set[str] = set()
    sim = ClusterSim(nodes=8, seed=1, start=start, root_dir=str(tmp_path / name), **kwargs)
    try:
        feed(sim, start + seconds, flush=60.0,
             on_batch=lambda b: sent.update(j["id"] for j in b["jobs"]))
    finally:
        sim.close()
    return sent


def test_a_second_run_continues_the_stored_history_under_new_job_ids(clean_samples, tmp_path):
    assert resume() == {"after": None, "first_job_id": None}  # nothing stored yet

    start = math.floor(time.time() / 10) * 10 - 3600
    first = run(tmp_path, "first", start, 600)
    stored = resume()
    newest = GpuLatest.objects.aggregate(newest=Max("ts"))["newest"]
    assert stored["after"] == newest.timestamp() == start + 600
    slurm = [int(j) for j in Job.objects.filter(scheduler="slurm")
             .values_list("external_id", flat=True)]
    assert stored["first_job_id"] == max(slurm) + 1
    assert Job.objects.filter(scheduler="kubernetes").exists()  # UUIDs, not counted

    # As clusterui-simcluster --after/--first-job-id starts the second run.
    again = (math.floor(stored["after"] / 10) + 1) * 10
    second = run(tmp_path, "second", again, 300, first_job_id=stored["first_job_id"],
                 earliest_start=stored["after"])
    assert first and second and not first & second
    assert min(int(j) for j in second if j.isdigit()) >= stored["first_job_id"]
    for job in Job.objects.filter(external_id__in=first):  # the first run's jobs end there
        assert job.last_seen.timestamp() <= start + 600, job
    for job in Job.objects.filter(external_id__in=second):  # ... and the second's begin
        assert job.started_at.timestamp() > start + 600, job
    assert resume("no-such-cluster") == {"after": None, "first_job_id": None}
