"""MIG instances on the node and GPU pages: each one listed right under its GPU with its
profile, and the jobs on a node named by the instance they hold. The node is the NVML
simulator's MIG-enabled H100 fed through the real collector and ingest
(``tests/ingest/test_mig_ingest.py``)."""

import pytest
from django.urls import reverse

from clusterui.inventory.models import Gpu
from clusterui.web import nodepage
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
    # the job's GPUs are the two instances it holds, under their GPU, not "0, 0"
    [job] = response.context["jobs"]
    assert job["gpus"] == "GPU 0 · MIG 1g.10gb (GI 1, 4)"
    timeline = response.context["charts"]["jobs"]
    assert timeline["layout"]["yaxis"]["categoryarray"] == [
        "GPU 0 · MIG 1g.10gb (GI 1)", "GPU 0 · MIG 1g.10gb (GI 4)"]  # a row each, not one
    # rows named that long get the margin they need instead of being cut at the left
    assert timeline["layout"]["yaxis"]["automargin"] is True
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


def test_a_jobs_mig_instances_are_said_under_their_gpu_in_runs():
    def held(index, gi, profile="1g.10gb"):
        return {"gpu_index": index, "mig_gi": gi, "mig_profile": profile}

    # a job holding seven instances of GPU 0 and one of GPU 1 (make demo's gpu-a001)
    allocs = [held(0, gi) for gi in (3, 1, 2, 7, 4, 6, 5)] + [held(1, 1)]
    assert nodepage.gpus_held(allocs) == "GPU 0 · MIG 1g.10gb (GI 1–7); GPU 1 · MIG 1g.10gb (GI 1)"
    # GI 0 is an instance id like any other; a whole GPU beside them keeps its own entry
    mixed = [held(2, 0, "3g.40gb"), held(2, 1, "3g.40gb"), {**held(3, None), "mig_profile": None}]
    assert nodepage.gpus_held(mixed) == "GPU 2 · MIG 3g.40gb (GI 0, 1); GPU 3"
