"""GET /api/v1/gpus/ and /api/v1/gpus/<id>/."""

import pytest

from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpus(users):
    a = factories.node("gpu-g001", gpus=2)
    b = factories.node("gpu-g002", gpus=2, cluster_name="other")
    job = factories.job("alice", gpus=list(a.gpus.all()))
    return {"a": a, "b": b, "job": job}


def test_list_in_node_and_index_order_with_latest(api, gpus):
    body = api("alice").get("/api/v1/gpus/").json()
    assert body["count"] == 4
    assert [(g["node"], g["index"]) for g in body["results"]] == [
        ("gpu-g001", 0), ("gpu-g001", 1), ("gpu-g002", 0), ("gpu-g002", 1)]
    first = body["results"][0]
    assert first["uuid"] == "GPU-gpu-g001-0" and first["model"] == "NVIDIA H100 80GB HBM3"
    assert first["memory_total_mib"] == 81559 and first["power_limit_w"] == 700.0
    assert first["latest"]["util_pct"] == 10.0 and first["latest"]["job"] == gpus["job"].id


def test_filters(api, gpus):
    client = api("alice")
    assert client.get("/api/v1/gpus/", {"node": "gpu-g002"}).json()["count"] == 2
    assert client.get("/api/v1/gpus/", {"cluster": "other"}).json()["count"] == 2
    assert client.get("/api/v1/gpus/", {"model": "h100"}).json()["count"] == 4
    assert client.get("/api/v1/gpus/", {"uuid": "GPU-gpu-g001-1"}).json()["results"][0][
        "index"] == 1


def test_detail(api, gpus):
    gpu = gpus["b"].gpus.get(index=1)
    body = api("bob").get(f"/api/v1/gpus/{gpu.id}/").json()
    assert body["id"] == gpu.id and body["node"] == "gpu-g002" and body["node_id"] == gpus["b"].id
    assert body["latest"]["allocated"] is False and body["latest"]["power_w"] == 301.0


def test_list_query_count_does_not_grow_with_gpus(api, gpus, django_assert_num_queries):
    client = api("alice")
    client.get("/api/v1/gpus/")
    # token, count, GPUs with node and latest, the viewer's per-cluster names
    # (jobs/visibility.py), visible jobs on them
    with django_assert_num_queries(5):
        client.get("/api/v1/gpus/")
    factories.job("alice", gpus=list(factories.node("gpu-g003", gpus=4).gpus.all()))
    with django_assert_num_queries(5):
        assert client.get("/api/v1/gpus/").json()["count"] == 8
