"""The queue messages a real node sent: the collector's wheel on a real NVIDIA H100, through
the real queue and the bulk consumer, signatures required.

``tests/data/real-h100-queue/messages.jsonl`` (README there) holds the three messages the
``clusterui-collector`` console script, installed from the wheel ``make dist`` builds, pushed
to a real Redis on the GPU node (one per 10 s flush and the final one at SIGTERM), signed
with its node key and byte for byte as they were: a Slurm job's prolog and epilog ran
around a PyTorch job. They are pushed here as the collector pushed them (LPUSH on the
``ingest`` list) and consumed by the real consumer. Their signatures cover their bytes, so
their times cannot be moved: the raw retention is widened to reach back to their day.
"""

import base64
import json
import time

import pytest
from django.db import connection

from clusterui.ingest.auth import forget_keys
from clusterui.ingest.consumer import Consumer
from clusterui.ingest.messages import envelope_of
from clusterui.ingest.models import IngestBatch, IngestKey, RejectedBatch
from clusterui.ingest.queue import ReliableQueue
from clusterui.inventory.models import Gpu
from clusterui.jobs.models import Job
from tests.real_batches import DATA

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = DATA / "real-h100-queue" / "messages.jsonl"
# A key for these fixtures only (README): the node's key is derived from it.
SECRET = "real-gpu-fixture-secret-not-for-production"


def raw_messages() -> list[bytes]:
    return MESSAGES.read_bytes().splitlines()


def batch_of(raw: bytes) -> dict:
    """The batch a queue message carries, read as the consumer reads it."""
    return json.loads(envelope_of(raw)["batch"])


@pytest.fixture
def node_queue(broker, clean_samples, settings):
    oldest = min(batch_of(raw)["sent_at"] for raw in raw_messages())
    settings.RAW_RETENTION_DAYS = int((time.time() - oldest) / 86400) + 14
    settings.INGEST_REQUIRE_SIGNATURE = True
    IngestKey.objects.create(cluster="device", key_id="device-1", secret=SECRET)
    forget_keys()
    yield broker
    forget_keys()


def consume(broker) -> Consumer:
    c = Consumer(queue=ReliableQueue(broker, "ingest", ttl_s=60))
    while c.step(block_s=0):
        pass
    return c


def test_what_a_real_node_queued_is_stored_whole_and_its_job_ends_at_the_epilog(node_queue):
    for raw in raw_messages():
        node_queue.lpush("ingest", raw)
    c = consume(node_queue)
    assert (c.totals.stored, c.totals.refused, c.totals.dead_lettered) == (3, 0, 0)
    assert list(IngestBatch.objects.order_by("seq").values_list("node__name", "seq", "key_id")) \
        == [("h100-devnode", 1, "device-1"), ("h100-devnode", 2, "device-1"),
            ("h100-devnode", 3, "device-1")]

    sent = [batch_of(raw) for raw in raw_messages()]
    jobs = [[r[2] for r in b["gpu_samples"]["rows"]] for b in sent]
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(job_id) FROM telemetry_gpusample")
        assert cur.fetchone() == (sum(map(len, jobs)), sum(j == "4246" for b in jobs for j in b))
    gpu = Gpu.objects.get()
    assert (gpu.node.name, gpu.model, gpu.memory_total_mib) == (
        "h100-devnode", "NVIDIA H100 80GB HBM3", 81559)
    # The prolog's mapping file named the job (alice's, partition gpu) from the tick after
    # it ran; the epilog removed it and the next batch said the job had ended.
    job = Job.objects.get()
    assert (job.external_id, job.user, job.partition, job.state) == (
        "4246", "alice", "gpu", "ended")
    assert abs(job.ended_at.timestamp() - sent[2]["jobs"][0]["ended_at"]) < 1e-3


def test_one_altered_byte_in_a_real_message_refuses_that_batch_alone(node_queue):
    raws = raw_messages()
    message = json.loads(raws[1])
    body = json.loads(base64.b64decode(message["body"]))
    body[0][0]["batch"] = body[0][0]["batch"].replace('"user":"alice"', '"user":"alicf"')
    assert '"alicf"' in body[0][0]["batch"]
    message["body"] = base64.b64encode(json.dumps(body).encode()).decode()
    for raw in (raws[0], json.dumps(message).encode(), raws[2]):
        node_queue.lpush("ingest", raw)
    c = consume(node_queue)
    assert (c.totals.stored, c.totals.refused) == (2, 1)
    assert list(IngestBatch.objects.order_by("seq").values_list("seq", flat=True)) == [1, 3]
    [refused] = RejectedBatch.objects.all()
    assert "signature" in refused.reason and refused.node == "h100-devnode"
    assert Job.objects.get().user == "alice"
