"""A GPU its node stops reporting while the node goes on (replaced after an RMA: the new
board has a new UUID; a MIG instance destroyed) is gone: the pages count the GPUs the node
has, not every GPU it ever had, and never show a gone GPU's last values as "now"."""

import re
import time

import pytest

from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.inventory.models import Gpu, Nic
from clusterui.jobs.models import Job, JobGpu
from tests.factories import node_batch

pytestmark = pytest.mark.django_db
TOKEN = "gone-gpus-metrics-token-0123456789"


@pytest.fixture
def replaced(settings):
    """gpu-t001's GPU 3 replaced 20 minutes ago: the old board reported until then (at
    100 % busy and held by the job), its successor since; the node reports every GPU now."""
    settings.GPU_GONE_AFTER_S = 600
    now = time.time()
    before = node_batch(seq=1, samples=3, start=now - 1500)
    for row in before["gpu_samples"]["rows"]:
        row[3] = 100.0 if row[1] == 3 else row[3]
    ingest_envelope(before)
    after = node_batch(seq=2, samples=3, start=now - 60)
    after["gpus"][3]["uuid"] = "GPU-replacement-board"
    for row in after["gpu_samples"]["rows"]:
        row[3] = 5.0 if row[1] == 3 else row[3]
    ingest_envelope(after)
    assert Gpu.objects.filter(node__name="gpu-t001").count() == 9
    return Gpu.objects.get(uuid="GPU-gpu-t001-3")


def test_the_overview_and_the_nodes_list_count_the_gpus_the_node_has(replaced, client_for):
    staff = client_for("staff")
    home = staff.get("/")
    snapshot = home.context["snap"]
    assert snapshot.gpus == 8
    cells = {c.index: c for c in snapshot.cells}
    assert len(cells) == 8 and cells[3].util == 5.0  # the new board's, not the old 100 %
    row = next(r for r in staff.get("/nodes/").context["rows"] if r.name == "gpu-t001")
    assert row.gpus == 8 and row.allocated == 8


def test_the_node_page_says_the_old_board_is_gone(replaced, client_for):
    page = client_for("staff").get(f"/nodes/{replaced.node_id}/").content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert text.count("gone: not reported since") == 1
    assert "GPU-replacement-board" not in text  # the page names GPUs by index
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    [old_row] = [r for r in rows if f'href="/gpus/{replaced.pk}/"' in r]
    assert "gone: not reported since" in old_row


def test_devices_gone_for_over_a_week_are_counted_not_listed(settings, client_for):
    """A board replaced eight days ago and a port renamed then are history: the node page
    says how many such devices it leaves out instead of listing them forever (MIG instances
    of every earlier layout would pile up); one gone for a day is still listed."""
    settings.GPU_GONE_AFTER_S = 600
    now = time.time()
    old = node_batch(seq=1, samples=1, start=now - 8 * 86400)
    old["gpus"][5]["uuid"] = "GPU-removed-last-week"
    old["nics"][0]["name"] = "mlx5_9:1"
    ingest_envelope(old)
    recent = node_batch(seq=2, samples=1, start=now - 86400)
    recent["gpus"][6]["uuid"] = "GPU-removed-yesterday"
    ingest_envelope(recent)
    ingest_envelope(node_batch(seq=3, samples=1, start=now - 60))
    node_id = Gpu.objects.get(uuid="GPU-removed-last-week").node_id
    page = client_for("staff").get(f"/nodes/{node_id}/")
    html = page.content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "2 devices this node has not reported for over 7 days" in text
    assert "mlx5_9:1" not in text and "mlx5_0:1" in text
    assert text.count("gone: not reported since") == 1  # yesterday's board
    listed = {g.uuid for g in page.context["gpus"]}
    assert "GPU-removed-yesterday" in listed and "GPU-removed-last-week" not in listed
    assert len(listed) == 9


def test_a_renamed_nic_is_gone_on_the_node_page(settings, client_for):
    """A port renamed (a firmware update renumbers the mlx5 devices) leaves its old name
    behind: the old one says since when, the new one shows its rates."""
    settings.GPU_GONE_AFTER_S = 600
    now = time.time()
    ingest_envelope(node_batch(seq=1, samples=1, start=now - 1500))
    later = node_batch(seq=2, samples=1, start=now - 30)
    later["nics"][0]["name"] = "mlx5_4:1"
    ingest_envelope(later)
    node_id = Gpu.objects.first().node_id
    page = client_for("staff").get(f"/nodes/{node_id}/").content.decode()
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    [old] = [r for r in rows if "<td>mlx5_0:1</td>" in r]
    [new] = [r for r in rows if "<td>mlx5_4:1</td>" in r]
    assert "gone: not reported since" in old
    assert "gone" not in new and "8 Gb/s" in new  # its 1 GB/s received


def test_the_gpu_page_says_it_is_gone_rather_than_its_last_utilization(replaced, client_for):
    page = client_for("staff").get(f"/gpus/{replaced.pk}/").content.decode()
    assert "gone: not reported since" in page
    assert 'title="GPU utilization (NVML) now"' not in page


def test_the_api_counts_the_gpus_the_node_has_and_marks_the_gone_one(replaced, client_for):
    [node] = client_for("staff").get("/api/v1/nodes/").json()["results"]
    assert (node["gpu_count"], node["gpus_allocated"]) == (8, 8)
    gone = {g["uuid"]: g["gone"] for g in node["gpus"]}
    assert gone.pop("GPU-gpu-t001-3") is True and not any(gone.values()) and len(gone) == 8
    gpu = client_for("staff").get(f"/api/v1/gpus/{replaced.pk}/").json()
    assert gpu["gone"] is True and gpu["latest"]["util_pct"] == 100.0  # its last, said so


def test_metrics_count_the_gpus_the_node_has(replaced, client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    body = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert re.search(r'^clusterui_node_gpus\{cluster="test",node="gpu-t001"\} 8(\.0)?$', body,
                     re.M), body[:2000]
    assert re.search(r'^clusterui_node_gpus_allocated\{cluster="test",node="gpu-t001"\} '
                     r'8(\.0)?$', body, re.M)


def test_a_node_sending_an_hour_of_history_at_once_keeps_its_gpus(settings, client_for):
    """A back-fill or a spool replay: an hour of data time in a second of wall time, the
    inventory unchanged. Its GPUs' and its job's last_seen keep up with the node's (the
    writer's inventory cache refreshes by data time too), so nothing looks gone or stale."""
    settings.GPU_GONE_AFTER_S = 600
    now = time.time()
    for seq in range(1, 8):  # ten minutes of data per batch
        ingest_envelope(node_batch(seq=seq, samples=1, start=now - 3600 + (seq - 1) * 600))
    staff = client_for("staff")
    assert staff.get("/").context["snap"].gpus == 8
    [row] = staff.get("/nodes/").context["rows"]
    assert row.gpus == 8
    node = Gpu.objects.select_related("node").first().node
    job = Job.objects.get()
    assert (node.last_seen - job.last_seen).total_seconds() < 60
    assert all((node.last_seen - g.last_seen).total_seconds() < 60 for g in node.gpus.all())
    assert all((node.last_seen - n.last_seen).total_seconds() < 60 for n in Nic.objects.all())
    allocations = JobGpu.objects.all()
    assert len(allocations) == 8
    assert all((node.last_seen - a.last_seen).total_seconds() < 60 for a in allocations)


def test_a_replayed_hour_in_one_flush_keeps_every_device_current():
    """The bulk consumer stores a spool replay's batches in one transaction: the GPUs',
    NICs' and allocations' last_seen end at the newest batch's data, whatever the order."""
    now = time.time()
    store_batches([validate_batch(node_batch(seq=1, samples=1, start=now - 3600))])
    # Newest first, then older ones: last_seen never goes back.
    store_batches([validate_batch(node_batch(seq=seq, samples=1, start=now - 3600 + seq * 600))
                   for seq in (6, 2, 3, 5, 4)])
    node = Gpu.objects.select_related("node").first().node
    newest = node.last_seen
    assert abs(newest.timestamp() - (now - 3600 + 6 * 600)) < 30
    for rows in (Gpu.objects.all(), Nic.objects.all(), JobGpu.objects.all()):
        assert rows and {r.last_seen for r in rows} == {newest}, rows.model.__name__
