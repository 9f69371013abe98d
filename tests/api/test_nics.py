"""GET /api/v1/nics/ and /api/v1/nics/<id>/."""

import datetime as dt

import pytest
from django.utils import timezone

from clusterui.fabric.models import PortErrors, PortLink
from clusterui.inventory.models import Nic
from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def nics(users):
    node = factories.node("gpu-c001", gpus=0, nics=2)
    eth = Nic.objects.create(node=node, name="eno1", kind="ethernet", link_bytes_per_s=1.25e9,
                             first_seen=node.first_seen, last_seen=node.last_seen)
    return {"node": node, "eth": eth}


def test_list_with_latest_rates(api, nics):
    body = api("bob").get("/api/v1/nics/").json()
    assert [n["name"] for n in body["results"]] == ["eno1", "mlx5_0:1", "mlx5_1:1"]
    eno, ib0, _ = body["results"]
    assert eno["latest"] is None and eno["link_bytes_per_s"] == 1.25e9
    assert ib0["kind"] == "infiniband" and ib0["node"] == "gpu-c001"
    assert ib0["latest"]["rx_bytes_per_s"] == 1e9 and ib0["latest"]["tx_bytes_per_s"] == 2e9


def test_filter_by_kind_and_node(api, nics):
    client = api("bob")
    assert [n["name"] for n in client.get("/api/v1/nics/", {"kind": "ethernet"}).json()[
        "results"]] == ["eno1"]
    assert client.get("/api/v1/nics/", {"node": "gpu-zzz"}).json()["count"] == 0
    bad = client.get("/api/v1/nics/", {"kind": "token-ring"})
    assert bad.status_code == 400
    assert bad.json()["error"] == ("kind: Select a valid choice. token-ring is not one of the "
                                   "available choices.")


def test_detail(api, nics):
    body = api("bob").get(f"/api/v1/nics/{nics['eth'].id}/").json()
    assert body["name"] == "eno1" and body["node_id"] == nics["node"].id


def test_list_query_count(api, nics, django_assert_num_queries):
    client = api("bob")
    client.get("/api/v1/nics/")
    # token, count, NICs with node and latest, their ports' fabric health
    with django_assert_num_queries(4):
        client.get("/api/v1/nics/")


@pytest.fixture
def fabric(nics):
    """gpu-c001's two InfiniBand ports up at 400 Gb/s (4X), the second with 7 symbol errors
    and a link that went down and came back (below the error threshold of 10, an error all
    the same), and gpu-c002's port down after having been up."""
    now = timezone.now()
    up = {"ts": now, "link_state": 4, "phys_state": 5, "link_width": 4, "link_gbps": 400.0,
          "nominal_gbps": 400.0, "nominal_width": 4, "counters_saturated": 0,
          "active_seen": now}
    ib0, ib1 = nics["node"].nics.filter(kind="infiniband").order_by("name")
    for nic in (ib0, ib1):
        PortLink.objects.create(nic=nic, **up)
    PortErrors.objects.create(nic=ib1, ts=now - dt.timedelta(minutes=5), symbol_error=7,
                              link_downed=1)
    other = factories.node("gpu-c002", gpus=0, nics=1)
    down = other.nics.get()
    PortLink.objects.create(nic=down, **{**up, "link_state": 1, "phys_state": 3,
                                         "link_gbps": None, "link_width": None,
                                         "active_seen": now - dt.timedelta(hours=2)})
    return {"ib0": ib0, "ib1": ib1, "down": down}


def test_each_port_carries_its_fabric_health(api, fabric):
    body = api("bob").get("/api/v1/nics/").json()
    by_name = {(n["node"], n["name"]): n["fabric"] for n in body["results"]}
    assert by_name[("gpu-c001", "eno1")] is None  # Ethernet: no fabric health
    healthy = by_name[("gpu-c001", "mlx5_0:1")]
    assert (healthy["state"], healthy["phys_state"], healthy["rate_gbps"], healthy["width"],
            healthy["nominal_gbps"], healthy["rate_pct"], healthy["verdict"]) == (
        "ACTIVE", "LinkUp", 400.0, 4, 400.0, 100.0, "healthy")
    # The link's time to the microsecond, as stored; no RoCE counter: an empty object.
    stored = PortLink.objects.get(nic=fabric["ib0"]).ts
    assert dt.datetime.fromisoformat(healthy["ts"].replace("Z", "+00:00")) == stored
    assert healthy["congestion"] == {}
    erroring = by_name[("gpu-c001", "mlx5_1:1")]
    assert erroring["verdict"] == "erroring" and erroring["window_s"] == 3600
    assert {k: v for k, v in erroring["errors"].items() if v} == {"symbol_error": 7,
                                                                  "link_downed": 1}
    down = by_name[("gpu-c002", "mlx5_0:1")]
    assert (down["state"], down["phys_state"], down["rate_gbps"], down["verdict"]) == (
        "DOWN", "Disabled", None, "down")
    detail = api("bob").get(f"/api/v1/nics/{fabric['ib1'].id}/").json()
    assert detail["fabric"]["verdict"] == "erroring"


def test_ports_are_found_by_their_fabric_verdict(api, fabric):
    client = api("bob")

    def names(value):
        response = client.get("/api/v1/nics/", {"fabric": value})
        assert response.status_code == 200, response.content
        return [(n["node"], n["name"]) for n in response.json()["results"]]

    assert names("unhealthy") == [("gpu-c001", "mlx5_1:1"), ("gpu-c002", "mlx5_0:1")]
    assert names("down") == [("gpu-c002", "mlx5_0:1")]
    assert names("healthy") == [("gpu-c001", "mlx5_0:1")]  # Ethernet has no verdict
    assert names("degraded") == []
    bad = client.get("/api/v1/nics/", {"fabric": "flaky"})
    assert bad.status_code == 400
    assert bad.json()["error"] == ("fabric: Select a valid choice. flaky is not one of the "
                                   "available choices.")
