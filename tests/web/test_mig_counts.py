"""A MIG-enabled GPU is one GPU on every page that counts GPUs, and its allocation is the
share of it its instances' jobs hold.

Two nodes through the real collector and ingest: ``mig-h001``, the NVML simulator's
MIG-enabled H100 split into seven 1g.10gb instances (``tests/ingest/test_mig_ingest.py``),
with a training job on two instances and an idle job on a third; and ``h100-001``, two
whole H100s, one held by a training job. A user expects 3 GPUs (1 + 2), not 10; the MIG GPU
3/7 allocated (each 1g.10gb instance is 1/7 of the H100: NVIDIA MIG user guide, "Supported
MIG Profiles", as ``collectors/sim/sharing.py`` models it), 1/7 of it allocated but idle.
"""

import pytest
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from clusterui.api.tokens import create_token
from clusterui.ingest.tasks import ingest_envelope
from clusterui.inventory.models import Gpu
from collectors.sim.nvml import SimNVML
from collectors.sim.scenarios import Scenario
from collectors.sim.sharing import SimMigNVML
from tests.mig_batches import collect_node

pytestmark = pytest.mark.django_db
TICKS = 12  # 2 minutes at 10 s
TOKEN = "metrics-access-token-0123456789"
SEVENTH = 1 / 7


def _batch(tmp_path, name, gpus, placements, nvml_class):
    """Two minutes of ``name`` sampled by the real collector."""
    return collect_node(tmp_path, name, gpus, placements, nvml_class, TICKS)[1]


@pytest.fixture
def cluster(tmp_path, users):
    mig = _batch(tmp_path, "mig-h001", 7,
                 [("501", Scenario.HEALTHY, (0, 3)), ("502", Scenario.IDLE, (5,))],
                 SimMigNVML)
    whole = _batch(tmp_path, "h100-001", 2, [("601", Scenario.HEALTHY, (0,))], SimNVML)
    for batch in (mig, whole):
        assert ingest_envelope(batch).rejected == 0
    # the inventory holds the MIG GPU and its 7 instances as rows of their own
    assert Gpu.objects.filter(node__name="mig-h001").count() == 8
    assert Gpu.objects.count() == 10
    return {"mig": Gpu.objects.get(node__name="mig-h001", parent=None).node,
            "whole": Gpu.objects.filter(node__name="h100-001").first().node}


def test_nodes_list_counts_physical_gpus_and_a_mig_gpus_allocated_share(client_for,
                                                                        cluster):
    response = client_for("alice").get(reverse("nodes"))
    rows = {r.name: r for r in response.context["rows"]}
    mig, whole = rows["mig-h001"], rows["h100-001"]
    assert (mig.gpus, whole.gpus) == (1, 2)  # not 8 and 2
    assert mig.allocated == pytest.approx(3 * SEVENTH, abs=1e-4)  # 3 of 7 slices
    assert mig.idle_allocated == pytest.approx(SEVENTH, abs=1e-4)  # the idle job's one
    assert (whole.allocated, whole.idle_allocated) == (1, 0)
    assert mig.jobs == 2
    html = response.content.decode()
    assert "(0.43 allocated)" in html and "(1 allocated)" in html
    # sorting by GPUs sorts by physical GPUs
    by_gpus = client_for("alice").get(reverse("nodes"), {"ordering": "-gpus"})
    assert [r.name for r in by_gpus.context["rows"]] == ["h100-001", "mig-h001"]


def test_overview_kpis_and_grid_count_the_mig_gpu_once(client_for, cluster):
    response = client_for("alice").get(reverse("home"))
    snap = response.context["snap"]
    assert (snap.gpus, snap.nodes) == (3, 2)  # not 10 GPUs
    assert snap.allocated == pytest.approx(1 + 3 * SEVENTH, abs=1e-4)
    assert snap.idle_allocated == pytest.approx(SEVENTH, abs=1e-4)
    assert snap.busy == pytest.approx(1 + 2 * SEVENTH, abs=1e-4)  # 501's two by SM activity
    html = response.content.decode()
    assert '<div class="kpi-value">1.43</div>' in html  # allocated
    assert '<div class="kpi-value">0.14</div>' in html  # allocated but idle now
    assert "a MIG instance by its SM activity" in html
    # the fractions are explained once, beside the KPIs
    assert "GPU counts take a MIG instance as its share of its GPU" in html
    # the grid: a cell per physical GPU, the MIG GPU's saying what of it is held
    cells = [(c.node, c.index) for c in snap.cells]
    assert cells == [("h100-001", 0), ("h100-001", 1), ("mig-h001", 0)]
    [mig_cell] = [c for c in snap.cells if c.mig]
    assert mig_cell.allocated and mig_cell.allocated_share == pytest.approx(3 * SEVENTH)
    heatmap = response.context["charts"]["heatmap"]
    hovers = [h for trace in heatmap["data"] for row in trace["hovertext"] for h in row if h]
    assert "mig-h001 GPU 0: MIG, 43% allocated to jobs" in hovers


def test_metrics_count_physical_gpus_and_shares(client, settings, cluster):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    values = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            if sample.name.startswith("clusterui_node_gpus"):
                values[(sample.name, sample.labels["node"])] = sample.value
    assert values[("clusterui_node_gpus", "mig-h001")] == 1  # not 8
    assert values[("clusterui_node_gpus", "h100-001")] == 2
    assert values[("clusterui_node_gpus_reporting", "mig-h001")] == 1
    assert values[("clusterui_node_gpus_allocated", "mig-h001")] == pytest.approx(
        3 * SEVENTH, abs=1e-4)
    assert values[("clusterui_node_gpus_idle_allocated", "mig-h001")] == pytest.approx(
        SEVENTH, abs=1e-4)
    assert values[("clusterui_node_gpus_busy", "mig-h001")] == pytest.approx(
        2 * SEVENTH, abs=1e-4)
    assert values[("clusterui_node_gpus_allocated", "h100-001")] == 1
    assert values[("clusterui_node_gpus_idle_allocated", "h100-001")] == 0


def test_api_nodes_give_physical_gpus_and_allocated_shares(users, cluster):
    _, key = create_token(users["bob"], "tests")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    body = api.get("/api/v1/nodes/").json()
    nodes = {n["name"]: n for n in body["results"]}
    mig = nodes["mig-h001"]
    assert (mig["gpu_count"], nodes["h100-001"]["gpu_count"]) == (1, 2)
    assert mig["gpus_allocated"] == pytest.approx(3 * SEVENTH, abs=1e-4)
    assert mig["gpus_idle_allocated"] == pytest.approx(SEVENTH, abs=1e-4)
    assert (nodes["h100-001"]["gpus_allocated"], nodes["h100-001"]["gpus_idle_allocated"]) \
        == (1, 0)
    # the instances are still listed, each with its parent, so a script can tell them apart
    instances = [g for g in mig["gpus"] if g["parent_id"] is not None]
    assert len(instances) == 7 and {g["mig_profile"] for g in instances} == {"1g.10gb"}
    # one filter gives a script the physical GPUs
    gpus = api.get("/api/v1/gpus/", {"node": "mig-h001", "physical": "true"}).json()
    assert [g["uuid"][:4] for g in gpus["results"]] == ["GPU-"]
    instances = api.get("/api/v1/gpus/", {"node": "mig-h001", "physical": "false"}).json()
    assert len(instances["results"]) == 7
    bad = api.get("/api/v1/gpus/", {"physical": "maybe"})
    assert bad.status_code == 400 and bad.json()["error"].startswith("physical: ")
