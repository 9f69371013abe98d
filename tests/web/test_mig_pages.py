"""MIG instances on the node and GPU pages: each one listed right under its GPU with its
profile, and the jobs on a node named by the instance they hold. The node is the NVML
simulator's MIG-enabled H100 fed through the real collector and ingest
(``tests/ingest/test_mig_ingest.py``)."""

import pytest
from django.urls import reverse

from clusterui.inventory.models import Gpu
from tests.ingest.test_mig_ingest import _collect, _store

pytestmark = pytest.mark.django_db


@pytest.fixture
def mig_node(tmp_path, users):
    _, batch = _collect(tmp_path)
    for job in batch["jobs"]:
        job["user"] = "alice"  # one of the shared cast, so she may see it
    _store(batch)
    return Gpu.objects.get(node__name="mig-h001", parent=None).node


def test_node_page_lists_each_mig_instance_under_its_gpu_with_its_profile(client_for,
                                                                          mig_node):
    response = client_for("alice").get(reverse("node-detail", args=[mig_node.pk]),
                                       {"range": "24h"})
    assert response.status_code == 200
    listed = [g.label for g in response.context["gpus"]]
    assert listed == ["GPU 0"] + [f"GPU 0 · MIG 1g.10gb (GI {gi})" for gi in range(1, 8)]
    html = response.content.decode()
    assert html.count("MIG 1g.10gb (GI ") >= 7
    # the job's GPUs are the two instances it holds, not "0, 0"
    [job] = response.context["jobs"]
    assert job["gpus"] == "GPUs 0 · MIG 1g.10gb (GI 1), 0 · MIG 1g.10gb (GI 4)"
    timeline = response.context["charts"]["jobs"]
    assert timeline["layout"]["yaxis"]["categoryarray"] == [
        "GPU 0 · MIG 1g.10gb (GI 1)", "GPU 0 · MIG 1g.10gb (GI 4)"]  # a row each, not one
    memory = response.context["charts"]["memory"]["data"]
    assert {t["name"] for t in memory} >= {"GPU 0", "GPU 0 · MIG 1g.10gb (GI 1)"}


def test_gpu_page_of_an_instance_names_its_parent_and_shows_only_its_own_jobs(client_for,
                                                                              mig_node):
    instance = Gpu.objects.get(node=mig_node, mig_gi_id=1)
    idle = Gpu.objects.get(node=mig_node, mig_gi_id=2)
    client = client_for("alice")
    page = client.get(reverse("gpu-detail", args=[instance.pk]), {"range": "24h"})
    html = page.content.decode()
    assert "MIG instance" in html and "1g.10gb" in html
    assert reverse("gpu-detail", args=[instance.parent_id]) in html
    assert [j["label"] for j in page.context["jobs"]] == ["501"]
    # an idle instance shares the GPU's index, not its jobs
    other = client.get(reverse("gpu-detail", args=[idle.pk]), {"range": "24h"})
    assert other.context["jobs"] == []
