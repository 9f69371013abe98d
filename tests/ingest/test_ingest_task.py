"""The ``clusterui.ingest`` task end to end: a message on the real Redis queue, a real Celery
worker, rows in the real PostgreSQL."""

import time

import pytest
from django.db import connection

from clusterui.celery import app
from clusterui.ingest.models import IngestBatch, RejectedBatch
from clusterui.inventory.models import Gpu, Nic, Node
from clusterui.jobs.models import Job
from clusterui.telemetry.metrics import GPU_METRIC_NAMES
from clusterui.telemetry.models import GpuEvent, GpuLatest
from tests.factories import example_batch, node_batch
from tests.services import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def send(envelope) -> None:
    app.send_task("clusterui.ingest", args=[envelope], queue="ingest")


def stored_gpu_rows():
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT extract(epoch FROM s.ts), g.index, j.external_id, {', '.join(GPU_METRIC_NAMES)} "
            "FROM telemetry_gpusample s JOIN inventory_gpu g ON g.id = s.gpu_id "
            "LEFT JOIN jobs_job j ON j.id = s.job_id ORDER BY s.ts, g.index"
        )
        return cur.fetchall()


def count(table: str) -> int:
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return cur.fetchone()[0]


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))


def test_the_contract_example_lands_with_every_value(make_worker):
    # The example is dated 2025-11-22: a site keeping raw samples long enough to hold it
    # (samples older than RAW_RETENTION_DAYS are refused) stores it exactly as it is.
    make_worker(extra_env={"RAW_RETENTION_DAYS": "3650"})
    envelope = example_batch()
    send(envelope)
    wait_for(lambda: IngestBatch.objects.exists(), timeout=30, what="the batch to be stored")

    # Every sample value, in the contract's own order, nulls included.
    fields = envelope["gpu_samples"]["fields"]
    expected = sorted(envelope["gpu_samples"]["rows"], key=lambda r: (r[0], r[1]))
    got = stored_gpu_rows()
    assert len(got) == len(expected) == 4
    for want, have in zip(expected, got, strict=True):
        want_by_field = dict(zip(fields, want, strict=True))
        assert close(have[0], want_by_field["ts"]) and have[1] == want_by_field["gpu"]
        assert have[2] == want_by_field["job"]
        for name, value in zip(GPU_METRIC_NAMES, have[3:], strict=True):
            assert close(value, want_by_field[name]), (name, value, want_by_field[name])

    with connection.cursor() as cur:
        cur.execute("SELECT extract(epoch FROM ts), n.name, rx_bytes_per_s, tx_bytes_per_s "
                    "FROM telemetry_nicsample s JOIN inventory_nic n ON n.id = s.nic_id "
                    "ORDER BY ts, n.name")
        nic_rows = cur.fetchall()
        cur.execute("SELECT extract(epoch FROM ts), cpu_cores_used, host_mem_used_bytes "
                    "FROM telemetry_jobsample ORDER BY ts")
        job_rows = cur.fetchall()
    names = [n["name"] for n in envelope["nics"]]
    want_nics = sorted(([r[0], names[r[1]], r[2], r[3]] for r in envelope["nic_samples"]["rows"]),
                       key=lambda r: (r[0], r[1]))
    assert len(nic_rows) == 4
    for want, have in zip(want_nics, nic_rows, strict=True):
        assert close(have[0], want[0]) and have[1] == want[1]
        assert close(have[2], want[2]) and close(have[3], want[3])
    assert [(round(float(t), 1), round(c, 4), m) for t, c, m in job_rows] == [
        (r[0], r[2], r[3]) for r in envelope["job_samples"]["rows"]
    ]

    # Inventory, job and event.
    node = Node.objects.get()
    assert (node.cluster.name, node.name, node.agent_version) == ("example", "gpu-a017", "0.1.0")
    assert node.sample_interval_s == 10
    gpus = {g.index: g for g in Gpu.objects.all()}
    for entry in envelope["gpus"]:
        g = gpus[entry["index"]]
        assert (g.uuid, g.model, g.memory_total_mib, g.power_limit_w, g.pci_bus_id,
                g.nvlink_bytes_per_s) == (entry["uuid"], entry["model"], entry["memory_total_mib"],
                                          entry["power_limit_w"], entry["pci_bus_id"],
                                          entry["nvlink_bytes_per_s"])
    nics = {n.name: n for n in Nic.objects.all()}
    assert {(n["name"], n["kind"], n["link_bytes_per_s"]) for n in envelope["nics"]} == {
        (n.name, n.kind, n.link_bytes_per_s) for n in nics.values()}
    job = Job.objects.get()
    want_job = envelope["jobs"][0]
    assert (job.external_id, job.scheduler, job.user, job.name, job.account, job.partition,
            job.cpus, job.state) == (want_job["id"], "slurm", "alice", "llama-ft", "nlp", "gpu",
                                     16, "running")
    assert job.started_at.timestamp() == want_job["started_at"]
    assert sorted(job.gpus.values_list("index", flat=True)) == [0, 1]
    event = GpuEvent.objects.get()
    assert (event.gpu.index, event.kind, event.code, event.message) == (
        1, "xid", 79, "GPU has fallen off the bus")
    # The "now" table holds each GPU's newest sample.
    latest = {x.gpu.index: x for x in GpuLatest.objects.select_related("gpu")}
    assert latest[0].util_pct == 96.0 and latest[1].util_pct is None
    assert latest[1].mem_used_mib == 60115


def test_a_batch_sent_twice_is_stored_once(worker):
    envelope = node_batch(samples=5)
    send(envelope)
    send(envelope)
    send(node_batch(seq=2, samples=5, start=envelope["sent_at"]))
    wait_for(lambda: IngestBatch.objects.count() == 2, timeout=30, what="two distinct batches")
    # The redelivery is skipped as a whole: give it time to be processed, then count.
    wait_for(lambda: "already stored, skipped" in worker.log(), timeout=30,
             what="the duplicate to be seen")
    assert count("telemetry_gpusample") == 2 * 5 * 8
    assert count("telemetry_nicsample") == 2 * 5
    assert count("telemetry_jobsample") == 2 * 5


def test_one_malformed_sample_is_refused_and_the_rest_stored(worker):
    envelope = node_batch(samples=3)
    envelope["gpu_samples"]["rows"][4][3] = "not-a-number"
    send(envelope)
    batch = wait_for(lambda: IngestBatch.objects.first(), timeout=30, what="the batch")
    assert count("telemetry_gpusample") == 3 * 8 - 1
    assert batch.gpu_samples == 23 and batch.rejected == 1
    assert batch.rejected_reasons == {"gpu_samples: util_pct must be a number or null, got str": 1}
    assert batch.rejected_examples[
        "gpu_samples: util_pct must be a number or null, got str"].startswith("row 4")


def test_an_unknown_schema_version_is_refused_with_its_reason(worker):
    envelope = node_batch()
    envelope["schema"] = 7
    send(envelope)
    send(node_batch(node="gpu-t002"))  # a good batch right behind it still lands
    wait_for(lambda: IngestBatch.objects.exists(), timeout=30, what="the good batch")
    refused = wait_for(lambda: RejectedBatch.objects.first(), timeout=30, what="the refusal")
    assert refused.reason == "schema: version 7 is not supported (this server speaks 1)"
    assert (refused.cluster, refused.node) == ("test", "gpu-t001")
    assert refused.excerpt.startswith('{"schema": 7, "cluster": "test"')  # for diagnosis
    assert list(Node.objects.values_list("name", flat=True)) == ["gpu-t002"]


def test_seq_gaps_are_visible_from_the_ingest_log(worker):
    start = time.time() - 600
    for seq in (1, 2, 5):
        send(node_batch(seq=seq, samples=1, start=start + seq * 10))
    wait_for(lambda: IngestBatch.objects.count() == 3, timeout=30, what="three batches")
    from clusterui.ingest.health import gaps_by_node

    assert gaps_by_node() == [{"node": "gpu-t001", "cluster": "test", "missing": 2}]
