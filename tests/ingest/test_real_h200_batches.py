"""Batches a real NVIDIA H200 gave the collector, through validation and the writer.

The fixtures (``tests/data/real-h200``, README there) were built by the collector's own code
on a real GPU with the real NVML: no simulator and no hand-written value. Only their
timestamps are moved (every one by the same amount, so the spacing is the GPU's) to a
minute ago, as the server refuses samples older than its raw retention.
"""

import json
import time

import pytest
from django.db import connection

from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.inventory.models import Gpu
from clusterui.jobs.models import Job
from clusterui.telemetry.metrics import GPU_METRIC_NAMES
from clusterui.telemetry.models import GpuLatest
from tests import real_batches

pytestmark = pytest.mark.django_db(transaction=True)

DATA = real_batches.DATA / "real-h200"
NAMES = ("idle10", "copy10", "matmul10")


def real_batch(name: str, newest: float) -> dict:
    return real_batches.real_batch("real-h200", name, newest)


def stored_rows():
    with connection.cursor() as cur:
        cur.execute(f"SELECT extract(epoch FROM s.ts), j.external_id, {', '.join(GPU_METRIC_NAMES)} "
                    "FROM telemetry_gpusample s LEFT JOIN jobs_job j ON j.id = s.job_id "
                    "ORDER BY s.ts")
        return cur.fetchall()


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))


@pytest.mark.parametrize("name", NAMES)
def test_the_server_accepts_every_row_of_a_real_batch(name):
    batch = validate_batch(real_batch(name, time.time() - 60))
    assert not batch.rejected, batch.examples
    assert len(batch.gpu_rows) == len(json.loads((DATA / f"{name}.json").read_text())
                                      ["gpu_samples"]["rows"])


def test_every_value_a_real_h200_sent_is_stored_and_the_job_is_alices():
    now = time.time()
    sent = []
    for seq, name in enumerate(NAMES, start=1):  # in the order the GPU gave them
        batch = real_batch(name, now - 120 + 40 * seq)
        batch["agent"]["seq"] = seq  # three runs of the collector: one boot, in order
        batch["agent"]["boot_id"] = "h200-fixture"
        ingest_envelope(batch)
        fields = batch["gpu_samples"]["fields"]
        sent += [dict(zip(fields, row, strict=True)) for row in batch["gpu_samples"]["rows"]]

    got = stored_rows()
    assert len(got) == len(sent) == 24
    for want, have in zip(sorted(sent, key=lambda r: r["ts"]), got, strict=True):
        assert close(have[0], want["ts"]) and have[1] == want["job"]
        for metric, value in zip(GPU_METRIC_NAMES, have[2:], strict=True):
            assert close(value, want[metric]), (metric, value, want[metric])

    gpu = Gpu.objects.get()
    assert (gpu.model, gpu.memory_total_mib, gpu.power_limit_w) == ("NVIDIA H200", 143771, 700.0)
    assert gpu.nvlink_bytes_per_s is None  # no NVLink on this board: no capacity, no rates
    job = Job.objects.get()
    assert (job.external_id, job.user, job.partition) == ("4242", "alice", "gpu")

    # What the copy showed: the GPU "100 % utilised" with no SM busy, and GPM's PCIe rates
    # a little above the 27.5 GB/s of data each way the copy loop timed (GPM counts the link).
    copy = [r for r in sent if r["job"] == "4242" and r["sm_active_pct"] == 0.0
            and (r["util_pct"] or 0) >= 99]
    assert len(copy) == 5
    assert all(29e9 < r["pcie_tx_bytes_per_s"] < 33e9 for r in copy[1:])
    # The newest row is the matrix products': SM and tensor activity, the power cap.
    latest = GpuLatest.objects.get(gpu=gpu)
    assert 70 < latest.sm_active_pct < 72 and 68 < latest.tensor_active_pct < 70
    assert latest.throttle_reasons == 4 and 640 < latest.power_w < 660
