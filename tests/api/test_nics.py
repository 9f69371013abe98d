"""GET /api/v1/nics/ and /api/v1/nics/<id>/."""

import pytest

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
    with django_assert_num_queries(3):  # token, count, NICs with node and latest
        client.get("/api/v1/nics/")
