"""GET /api/v1/nodes/ and /api/v1/nodes/<id>/: every node with its GPUs and NICs and their
latest values, as on the cluster page."""

import datetime as dt

import pytest
from django.utils import timezone

from clusterui.inventory.models import Node
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
    # names (jobs/visibility.py), visible jobs on those GPUs, the nodes' GPU health
    with django_assert_num_queries(8):
        assert client.get("/api/v1/nodes/").status_code == 200
    for i in range(4):
        factories.job("alice", gpus=list(factories.node(f"gpu-x{i}", gpus=2).gpus.all()))
    with django_assert_num_queries(8):
        assert client.get("/api/v1/nodes/").json()["count"] == 7


def test_gpu_health_as_the_drain_list_reads_it(api, users):
    """Health counters sent by collectors (the contract's gpu_health section, through the
    real ingest) reach each node's answer read as the drain list reads them, and
    ``?gpu_health=`` selects nodes by it: what a site's drain script polls for."""
    import time

    from clusterui.gpuhealth.drain import drain_lines
    from clusterui.ingest.tasks import ingest_envelope
    from tests.factories import node_batch
    from tests.ingest.test_gpu_health_ingest import health_row, with_health

    ts = time.time() - 60
    ingest_envelope(with_health(node_batch("gpu-h001", gpus=2), [
        health_row(ts, 0), health_row(ts, 1, remap_pending=True, ecc_uncorrected_volatile=2)]))
    ingest_envelope(with_health(node_batch("gpu-h002", gpus=2), [
        health_row(ts, 0, pcie_replays=40), health_row(ts, 1)]))
    ingest_envelope(with_health(node_batch("gpu-h003", gpus=1), [health_row(ts, 0)]))
    ingest_envelope(node_batch("gpu-h004", gpus=1))  # a collector that sends no health
    client = api("bob")
    by_name = {n["name"]: n["gpu_health"] for n in client.get("/api/v1/nodes/").json()["results"]}

    drain = by_name["gpu-h001"]
    assert (drain["state"], drain["label"]) == ("drain", "Drain suggested")
    gpu0, gpu1 = drain["gpus"]
    assert (gpu0["index"], gpu0["action"], gpu0["reasons"], gpu0["warnings"]) == (0, None, [], [])
    assert (gpu1["index"], gpu1["action"]) == (1, "reset")
    assert [r["text"] for r in gpu1["reasons"]] == [
        "row remap pending", "2 uncorrectable ECC errors since reset"]
    assert all(r["source"].startswith("https://docs.nvidia.com/") for r in gpu1["reasons"])
    # The reason Slurm would be given is the drain list's, word for word.
    (line,) = drain_lines()
    assert (line.node, drain["drain_reason"]) == ("gpu-h001", line.reason)
    assert drain["drain_reason"].startswith("GPU health: GPU 1: row remap pending")

    degraded = by_name["gpu-h002"]
    assert (degraded["state"], degraded["drain_reason"]) == ("degraded", None)
    assert degraded["reason"] == "GPU 0: 40 PCIe replays"
    assert by_name["gpu-h003"]["state"] == "healthy" and by_name["gpu-h003"]["reason"] == ""
    assert by_name["gpu-h004"] is None

    def names(value):
        response = client.get("/api/v1/nodes/", {"gpu_health": value})
        assert response.status_code == 200, response.json()
        return [n["name"] for n in response.json()["results"]]

    assert names("drain") == ["gpu-h001"]
    assert names("degraded") == ["gpu-h002"]
    assert names("healthy") == ["gpu-h003"]
    assert names("none") == ["gpu-h004"]
    one = client.get(f"/api/v1/nodes/{Node.objects.get(name='gpu-h001').id}/").json()
    assert one["gpu_health"] == drain
    response = client.get("/api/v1/nodes/", {"gpu_health": "sick"})
    assert response.status_code == 400 and "gpu_health" in response.json()["error"]


def test_unknown_node_is_404(api, nodes):
    response = api("bob").get("/api/v1/nodes/999999/")
    assert response.status_code == 404 and response.json() == {
        "error": "No Node matches the given query."}
