"""The whole pipeline: the real collector code (on the simulated NVML backend) -> Celery
over the real Redis -> a real worker -> PostgreSQL."""

import pytest
from django.db import connection

from clusterui.ingest.health import gaps_by_node
from clusterui.ingest.models import IngestBatch
from clusterui.inventory.models import Gpu, Node
from clusterui.jobs.models import Job
from collectors.sim.cluster import ClusterSim
from collectors.transport import RedisSender, Shipper, Spool
from tests.factories import recent_start
from tests.services import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# An hour-aligned start a few hours ago (inside raw retention): the run is deterministic.
START = recent_start()


def stored(table: str) -> int:
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return cur.fetchone()[0]


def test_simulated_collectors_feed_the_database_through_a_real_worker(worker, broker_url,
                                                                      tmp_path):
    sim = ClusterSim(nodes=2, gpus_per_node=8, seed=3, start=START, root_dir=str(tmp_path / "sim"),
                     cluster="e2e", interval=10)
    sender = RedisSender(broker_url)
    shipper = Shipper(sender, Spool(str(tmp_path / "spool"), 50_000_000))
    produced = {"gpu": 0, "nic": 0, "job": 0, "batches": 0}
    try:
        for tick in range(1, 31):  # five minutes at 10 s, one batch per node per minute
            sim.step(START + tick * 10)
            if tick % 6 == 0:
                for batch in sim.flush():
                    produced["gpu"] += len(batch["gpu_samples"]["rows"])
                    produced["nic"] += len(batch["nic_samples"]["rows"])
                    produced["job"] += len(batch["job_samples"]["rows"])
                    produced["batches"] += 1
                    assert shipper.ship(batch)
    finally:
        sender.close()
        sim.close()

    wait_for(lambda: IngestBatch.objects.count() == produced["batches"], timeout=60,
             what=f"{produced['batches']} batches")
    assert produced["gpu"] == 2 * 8 * 30
    assert stored("telemetry_gpusample") == produced["gpu"]
    assert stored("telemetry_nicsample") == produced["nic"] > 0
    assert stored("telemetry_jobsample") == produced["job"] > 0
    assert sum(IngestBatch.objects.values_list("rejected", flat=True)) == 0
    assert gaps_by_node() == []

    nodes = Node.objects.order_by("name")
    assert [n.name for n in nodes] == [n.name for n in sim.nodes]
    assert all(n.simulated for n in nodes)  # labelled as simulated end to end
    assert Gpu.objects.count() == 16
    # Every job the simulator ran on these nodes is attributed, with its owner.
    truth = {str(j["id"]): j for j in sim.job_table() if j["start"] < START + 300}
    stored_jobs = {j.external_id: j for j in Job.objects.all()}
    assert stored_jobs and set(stored_jobs) <= set(truth)
    for ext, job in stored_jobs.items():
        assert job.user == truth[ext]["user"]
        assert job.account == truth[ext]["account"]
