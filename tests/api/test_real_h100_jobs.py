"""Jobs the collector found on a real NVIDIA H100 from their processes alone, as their
owners see them through the API.

The fixtures (``tests/data/real-h100-cgroup`` and ``real-h100-mps``, a README in each) are
batches the collector's own code built with the real NVML and a real kernel's cgroup v2,
with no prolog mapping file: a PyTorch job in the cgroup slurmstepd gives a task
(``system.slice/slurmstepd.scope/job_4243/step_0/user/task_0``) with a Slurm step's
environment, and the batch after it exited and its cgroup was removed; and two jobs sharing
the GPU through CUDA MPS. Only timestamps are moved.
"""

import datetime as dt
import time

import pytest
from django.db import connection

from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from tests import real_batches

pytestmark = pytest.mark.django_db(transaction=True)

FOLDER = "real-h100-cgroup"


def ingest_now(folder: str, name: str) -> dict:
    batch = real_batches.real_batch(folder, name, time.time() - 60)
    ingest_envelope(batch)
    return batch


@pytest.fixture
def stored(users, clean_samples):
    during = real_batches.load(FOLDER, "cgroup10")
    after = real_batches.load(FOLDER, "after4")
    shift = time.time() - 60 - real_batches.newest_sample(after)  # one shift: the GPU's spacing
    for batch in (during, after):
        ingest_envelope(real_batches.shifted(batch, shift))
    return {"during": during, "after": after, "job": Job.objects.get(external_id="4243")}


def attributed(batch):
    fields = batch["gpu_samples"]["fields"]
    return [dict(zip(fields, row, strict=True))["job"] for row in batch["gpu_samples"]["rows"]]


def test_the_job_is_bobs_from_its_processes_and_ends_when_its_cgroup_goes(stored):
    job = stored["job"]
    # Who and what, from the job step's environment (no mapping file, no scontrol).
    assert (job.scheduler, job.user, job.name, job.account, job.partition, job.cpus) == (
        "slurm", "bob", "train-resnet", "vision", "gpu", 4)
    # Its GPU rows: from the tick its CUDA context appeared in NVML's process list, not
    # before (PyTorch was still starting), and none once it had gone.
    assert attributed(stored["during"]) == [None, None] + ["4243"] * 8
    assert attributed(stored["after"]) == [None] * 4
    with connection.cursor() as cur:
        cur.execute("SELECT j.external_id, count(*) FROM telemetry_gpusample s "
                    "LEFT JOIN jobs_job j ON j.id = s.job_id GROUP BY 1 ORDER BY 1")
        assert cur.fetchall() == [("4243", 8), (None, 6)]
    # Ended: the collector saw the cgroup removed and said when.
    ended = stored["after"]["jobs"][0]["ended_at"]
    assert job.state == "ended" and job.ended_at is not None
    assert abs(job.ended_at.timestamp() - ended) < 1e-3


def test_its_owner_reads_the_cgroups_cpu_and_memory_beside_the_gpu(api, stored):
    job = stored["job"]
    assert api("alice").get(f"/api/v1/jobs/{job.id}/").status_code == 404  # not hers
    body = api("bob").get(f"/api/v1/jobs/{job.id}/metrics/", {
        "metrics": "cpu_cores_used,host_mem_used_bytes,sm_active_pct,power_w"}).json()
    series = {s["metric"]: [v for v in s["values"] if v is not None] for s in body["series"]}
    # The job held CPUs 0-3 (its cpuset) and kept them busy: 3 loader threads and the
    # thread launching the products. Its cgroup's memory: the 1 GiB host tensor, PyTorch
    # and CUDA's libraries and their page cache (memory.current counts them all).
    assert series["cpu_cores_used"] and all(3.8 < v <= 4.0 for v in series["cpu_cores_used"])
    assert all(2.3e9 < v < 2.6e9 for v in series["host_mem_used_bytes"])
    # The GPU meanwhile: bf16 products at the power cap.
    assert max(series["sm_active_pct"]) > 90 and max(series["power_w"]) > 690
    assert dt.datetime.fromisoformat(body["to"]).timestamp() <= job.ended_at.timestamp() + 1


def test_two_jobs_sharing_the_gpu_through_mps_it_goes_to_the_one_with_more_clients(
        api, clean_samples):
    batch = ingest_now("real-h100-mps", "mps6")
    # The compute list held the MPS server (in no job's cgroup) and the three clients: two
    # of carol's job 4244, one of dave's 4245. A GPU row carries one job: the majority's.
    assert attributed(batch) == ["4244"] * 6
    [job] = Job.objects.all()
    assert (job.external_id, job.user, job.name, job.partition) == (
        "4244", "carol", "mps-4244", "shared")
    body = api("carol").get(f"/api/v1/jobs/{job.id}/metrics/", {
        "metrics": "cpu_cores_used,sm_active_pct"}).json()
    series = {s["metric"]: [v for v in s["values"] if v is not None] for s in body["series"]}
    # Two processes of about 4 busy cores each; three clients' kernels side by side.
    assert series["cpu_cores_used"] and all(7.5 < v < 8.5 for v in series["cpu_cores_used"])
    assert series["sm_active_pct"] and min(series["sm_active_pct"]) > 99.9
