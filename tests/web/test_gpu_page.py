"""The GPU page (issue 20): node → GPU opens one GPU's activity (NVML beside GPM), memory,
power, temperature, clock and link traffic, the jobs that held it (the viewer's only), its
events and its inventory."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.telemetry.models import GpuEvent
from tests import rows as f
from tests.web.plotly_data import present

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu_with_history():
    now = timezone.now()
    n = f.node("gpu-a001", gpus=2)
    gpus = list(n.gpus.order_by("index"))
    started = now - dt.timedelta(minutes=30)
    mine = f.job("alice", gpus=gpus[:1], started_at=started, external_id="900001")
    f.job("bob", gpus=gpus[1:], started_at=started, external_id="900002")
    f.gpu_samples(gpus, started, now, job=mine, util=lambda g, k: 80.0, nvlink=100e9)
    GpuEvent.objects.create(gpu=gpus[0], ts=now - dt.timedelta(minutes=5), kind="xid",
                            code=79, message="GPU has fallen off the bus")
    return gpus


def test_the_node_page_links_each_gpu_to_its_page(client_for, gpu_with_history):
    gpu = gpu_with_history[0]
    page = client_for("alice").get(reverse("node-detail", args=[gpu.node_id]))
    assert f'href="{reverse("gpu-detail", args=[gpu.pk])}"' in page.content.decode()


def test_a_gpu_page_shows_its_telemetry_jobs_events_and_inventory(client_for,
                                                                  gpu_with_history):
    gpu = gpu_with_history[0]
    response = client_for("alice").get(reverse("gpu-detail", args=[gpu.pk]))
    assert response.status_code == 200
    text = response.content.decode()
    assert "gpu-a001 · GPU 0" in text and gpu.uuid in text
    assert "Xid 79" in text and "GPU has fallen off the bus" in text
    assert ">900001</a>" in text
    # When the job was first seen on this GPU, not its start (which the job page says).
    assert "Seen here from</th>" in text
    figures = response.context["charts"]
    activity = {t["name"]: t for t in figures["activity"]["data"]}
    assert max(present(activity["GPU utilization (NVML)"]["y"])) == pytest.approx(80.0)
    assert max(present(activity["SM activity (GPM)"]["y"])) == pytest.approx(64.0)
    for name in ("memory", "power", "temperature", "traffic", "jobs"):
        assert figures[name] is not None, name
    # No clock was sampled here: the card says so instead of drawing an empty chart.
    assert figures["clock"] is None and "No clock samples in this range." in text


def test_another_users_job_on_the_gpu_is_not_listed(client_for, gpu_with_history):
    other = gpu_with_history[1]
    text = client_for("alice").get(reverse("gpu-detail", args=[other.pk])).content.decode()
    assert "900002" not in text
    assert "900002" in client_for("staff").get(
        reverse("gpu-detail", args=[other.pk])).content.decode()


def test_a_missing_gpu_is_not_found(client_for):
    assert client_for("alice").get("/gpus/999999/").status_code == 404


def test_a_training_step_pattern_keeps_its_dips_at_a_coarse_range(client_for):
    """A 4 s training step sampled every second (busy three seconds, idle one): over 24 h
    the page reads 5-minute buckets, whose mean is a flat 75 %; the band from each bucket's
    lowest to its highest sample still shows the GPU touching 0 % and 100 %."""
    from clusterui.inventory.models import Node

    now = timezone.now()
    n = f.node("gpu-step", gpus=1, latest=False)
    Node.objects.filter(pk=n.pk).update(sample_interval_s=1.0)
    gpu = n.gpus.get()
    start = now - dt.timedelta(hours=2)
    job = f.job("alice", gpus=[gpu], started_at=start)
    f.gpu_samples([gpu], start, now, every_s=1, job=job,
                  util=lambda g, k: 0.0 if k % 4 == 3 else 100.0)
    response = client_for("alice").get(reverse("gpu-detail", args=[gpu.pk]), {"range": "24h"})
    activity = {t["name"]: t for t in response.context["charts"]["activity"]["data"]}
    mean = present(activity["GPU utilization (NVML)"]["y"])
    assert mean and all(v == pytest.approx(75.0, abs=1.0) for v in mean[1:-1])
    low = present(activity["GPU utilization (NVML), lowest to highest sample"]["y"])
    high = present(activity["GPU utilization (NVML), highest sample"]["y"])
    # The first and last buckets are partial (a few seconds may hold no idle sample).
    assert set(low[1:-1]) == {0.0} and set(high[1:-1]) == {100.0}
    # The band is filled to the trace before it (the highest sample), behind the mean.
    names = list(activity)
    assert activity["GPU utilization (NVML), lowest to highest sample"]["fill"] == "tonexty"
    assert names.index("GPU utilization (NVML), highest sample") < names.index(
        "GPU utilization (NVML)")
    # The clock did not vary (none sampled): no band is drawn for it.
    assert response.context["charts"]["clock"] is None
