"""Busy or idle now: the larger of NVML utilization and SM activity, on every surface.

NVML's utilization covers its last sample period (1/6 s to 1 s), GPM's SM activity the
whole sampling interval (``../shared/TELEMETRY.md`` 1 and 2). A spiky job can read NVML 4 %
in its last second while its SMs were 42 % active over the interval (the demo's simulated
spiky GPUs did): it is working, and calling it "allocated but idle" sends an admin after a
job that is fine. The overview, the nodes list, the API and /metrics must agree on it.
"""

import pytest
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from clusterui.api.tokens import create_token
from tests import rows as f

pytestmark = pytest.mark.django_db
TOKEN = "metrics-access-token-0123456789"

# (NVML utilization, SM activity) of four GPUs of one node, all held by one job.
GPUS = [
    (4.0, 42.0),  # spiky: a quiet last second, a busy interval -> busy
    (3.0, 2.0),  # nothing much on either -> idle
    (100.0, 0.0),  # copies only (tests/data/real-h200/): NVML busy -> busy
    (5.0, None),  # no GPM (an A100): NVML alone decides -> idle
]


@pytest.fixture
def node(users):
    n = f.node("gpu-a004", gpus=len(GPUS), latest_values=lambda i: {
        "util_pct": GPUS[i][0], "sm_active_pct": GPUS[i][1], "power_w": 300.0,
        "mem_used_mib": 1000, "temp_c": 60.0})
    f.job("alice", gpus=n.gpus.all())
    spiky = f.node("gpu-a005", gpus=1, latest_values=lambda i: {
        "util_pct": 4.0, "sm_active_pct": 42.0, "power_w": 300.0, "mem_used_mib": 1000,
        "temp_c": 60.0})
    f.job("bob", gpus=spiky.gpus.all())
    return n


def test_overview_counts_a_spiky_gpu_busy(client_for, node):
    snap = client_for("staff").get(reverse("home")).context["snap"]
    assert (snap.allocated, snap.busy, snap.idle_allocated) == (5, 3, 2)


def test_nodes_list_agrees(client_for, node):
    rows = {r.name: r for r in client_for("staff").get(reverse("nodes")).context["rows"]}
    assert (rows["gpu-a004"].allocated, rows["gpu-a004"].idle_allocated) == (4, 2)
    assert (rows["gpu-a005"].allocated, rows["gpu-a005"].idle_allocated) == (1, 0)
    idle_only = client_for("staff").get(reverse("nodes"), {"health": "idle"}).context["rows"]
    assert [r.name for r in idle_only] == ["gpu-a004"]  # not the spiky one


def test_api_agrees(users, node):
    _, key = create_token(users["staff"], "tests")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    nodes = {n["name"]: n for n in api.get("/api/v1/nodes/").json()["results"]}
    assert (nodes["gpu-a004"]["gpus_allocated"], nodes["gpu-a004"]["gpus_idle_allocated"]) \
        == (4, 2)
    assert nodes["gpu-a005"]["gpus_idle_allocated"] == 0


def test_metrics_agree(client, settings, node):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    values = {(s.name, s.labels.get("node")): s.value for family in
              text_string_to_metric_families(response.content.decode())
              for s in family.samples}
    assert values[("clusterui_node_gpus_busy", "gpu-a004")] == 2
    assert values[("clusterui_node_gpus_idle_allocated", "gpu-a004")] == 2
    assert values[("clusterui_node_gpus_busy", "gpu-a005")] == 1
    assert values[("clusterui_node_gpus_idle_allocated", "gpu-a005")] == 0
