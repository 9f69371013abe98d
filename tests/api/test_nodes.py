"""GET /api/v1/nodes/ and /api/v1/nodes/<id>/: every node with its GPUs and NICs and their
latest values, as on the cluster page."""

import datetime as dt

import pytest
from django.utils import timezone

from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(users):
    live = factories.node("gpu-n001", gpus=2, nics=1)
    silent = factories.node("gpu-n002", gpus=1, nics=0, cluster_name="other",
                            last_seen=timezone.now() - dt.timedelta(hours=1))
    new = factories.node("gpu-n003", gpus=1, nics=0, latest=False)
    factories.job("alice", gpus=list(live.gpus.all())[:1])
    return {"live": live, "silent": silent, "new": new}


def test_list_has_gpus_and_nics_with_latest_values(api, nodes):
    body = api("bob").get("/api/v1/nodes/").json()
    assert [n["name"] for n in body["results"]] == ["gpu-n002", "gpu-n001", "gpu-n003"]
    live = body["results"][1]  # by cluster ("other" < "test"), then name
    assert live["name"] == "gpu-n001" and live["cluster"] == "test"
    assert live["silent"] is False and live["sample_interval_s"] == 10.0
    gpu0, gpu1 = live["gpus"]
    assert (gpu0["index"], gpu0["latest"]["util_pct"], gpu0["latest"]["power_w"]) == (0, 10.0, 300.0)
    assert gpu1["latest"]["util_pct"] == 20.0 and gpu1["latest"]["mem_used_mib"] == 2000
    # bob sees that GPU 0 is allocated, not to whom
    assert gpu0["latest"]["allocated"] is True and gpu0["latest"]["job"] is None
    assert gpu1["latest"]["allocated"] is False
    (nic,) = live["nics"]
    assert nic["name"] == "mlx5_0:1" and nic["kind"] == "infiniband"
    assert nic["latest"]["rx_bytes_per_s"] == 1e9 and nic["latest"]["tx_bytes_per_s"] == 2e9


def test_a_node_that_stopped_reporting_is_marked_silent(api, nodes):
    body = api("bob").get(f"/api/v1/nodes/{nodes['silent'].id}/").json()
    assert body["silent"] is True
    assert body["gpus"][0]["latest"]["util_pct"] == 10.0  # the last value, and its ts


def test_a_gpu_that_never_reported_has_no_latest(api, nodes):
    body = api("bob").get(f"/api/v1/nodes/{nodes['new'].id}/").json()
    assert body["gpus"][0]["latest"] is None


def test_filters(api, nodes):
    client = api("bob")
    assert [n["name"] for n in client.get("/api/v1/nodes/", {"cluster": "other"}).json()[
        "results"]] == ["gpu-n002"]
    assert client.get("/api/v1/nodes/", {"name": "n00"}).json()["count"] == 3
    assert client.get("/api/v1/nodes/", {"simulated": "true"}).json()["count"] == 0


def test_list_query_count_does_not_grow_with_nodes(api, nodes, django_assert_num_queries):
    client = api("alice")
    client.get("/api/v1/nodes/")
    # token, count, nodes, GPUs with latest, NICs with latest, the viewer's per-cluster
    # names (jobs/visibility.py), visible jobs on those GPUs
    with django_assert_num_queries(7):
        assert client.get("/api/v1/nodes/").status_code == 200
    for i in range(4):
        factories.job("alice", gpus=list(factories.node(f"gpu-x{i}", gpus=2).gpus.all()))
    with django_assert_num_queries(7):
        assert client.get("/api/v1/nodes/").json()["count"] == 7


def test_unknown_node_is_404(api, nodes):
    response = api("bob").get("/api/v1/nodes/999999/")
    assert response.status_code == 404 and response.json() == {
        "error": "No Node matches the given query."}
