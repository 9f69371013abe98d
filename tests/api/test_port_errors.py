"""GET /api/v1/nics/<id>/errors/: a fabric port's error counters over time, read from what the
real ingest path stored, on the axis of the port's rate series."""

import datetime as dt
import math
import time

import pytest

from clusterui.fabric.metrics import ERROR_FIELDS
from clusterui.ingest.tasks import ingest_envelope
from clusterui.inventory.models import Nic
from tests.fabric_factories import fabric_batch, port
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)

INTERVAL = 10.0


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def stored(users, clean_samples):
    """gpu-t001's two InfiniBand ports, sampled every 10 s: six samples, a minute with none
    (the collector away), then six more. Port 0 gains 40 symbol errors and a link-down in
    the second sample and 3 receive errors in the tenth; port 1 stays clean."""
    start = math.floor(time.time() / 60) * 60 - 1200
    first = [[port(), port()] for _ in range(6)]
    first[1][0] = port(symbol_error=40, link_downed=1)
    second = [[port(), port()] for _ in range(6)]
    second[3][0] = port(port_rcv_errors=3)
    ingest_envelope(fabric_batch(ports=first, start=start, interval=INTERVAL, gpus=1))
    ingest_envelope(fabric_batch(ports=second, start=start + 120, interval=INTERVAL, gpus=1,
                                 seq=2))
    nics = {n.name: n for n in Nic.objects.filter(node__name="gpu-t001")}
    return {"start": start, "erring": nics["mlx5_0:1"], "clean": nics["mlx5_1:1"]}


def test_each_counter_rises_in_its_bucket_and_a_silent_minute_is_unknown(api, stored):
    start = stored["start"]
    response = api("bob").get(f"/api/v1/nics/{stored['erring'].id}/errors/",
                              {"from": iso(start), "to": iso(start + 180), "step": 10})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["step_s"] == 10 and body["ts"] == [iso(start + 10 * k) for k in range(18)]
    # Samples at 0-50 s and 120-170 s; none from 60 to 110 s.
    assert body["reported"] == [True] * 6 + [False] * 6 + [True] * 6
    counters = {c["counter"]: c for c in body["counters"]}
    assert list(counters) == list(ERROR_FIELDS)  # every counter, in the documented order
    unknown = [None] * 6
    assert counters["symbol_error"]["values"] == [0, 40, 0, 0, 0, 0] + unknown + [0] * 6
    assert counters["link_downed"]["values"] == [0, 1, 0, 0, 0, 0] + unknown + [0] * 6
    assert counters["port_rcv_errors"]["values"] == [0] * 6 + unknown + [0, 0, 0, 3, 0, 0]
    assert counters["symbol_error"]["total"] == 40 and counters["port_rcv_errors"]["total"] == 3
    assert counters["port_xmit_discards"]["values"] == [0] * 6 + unknown + [0] * 6
    assert counters["symbol_error"]["label"] == "symbol error"


def test_a_wider_step_sums_the_increases(api, stored):
    start = stored["start"]
    body = api("bob").get(f"/api/v1/nics/{stored['erring'].id}/errors/",
                          {"from": iso(start), "to": iso(start + 180), "step": 60}).json()
    assert body["reported"] == [True, False, True]
    counters = {c["counter"]: c["values"] for c in body["counters"]}
    assert counters["symbol_error"] == [40, None, 0]
    assert counters["port_rcv_errors"] == [0, None, 3]


def test_a_clean_port_answers_zeros_where_it_reported(api, stored):
    start = stored["start"]
    body = api("bob").get(f"/api/v1/nics/{stored['clean'].id}/errors/",
                          {"from": iso(start), "to": iso(start + 180), "step": 60}).json()
    assert all(c["values"] == [0, None, 0] and c["total"] == 0 for c in body["counters"])


def test_an_interface_without_fabric_counters_is_a_404_that_says_why(api, users,
                                                                     clean_samples):
    ingest_envelope(node_batch("gpu-e001", gpus=1, samples=2))  # no fabric fields
    nic = Nic.objects.get(node__name="gpu-e001")
    response = api("bob").get(f"/api/v1/nics/{nic.id}/errors/")
    assert response.status_code == 404
    assert response.json() == {"error": f"NIC gpu-e001/{nic.name} reports no fabric counters "
                                        "(Ethernet, or a collector without fabric support)"}


@pytest.mark.parametrize("params, error", [
    ({"step": "0"}, "step: Ensure this value is greater than or equal to 1."),
    ({"from": "yesterday"}, "from: expected an ISO 8601 time (2026-03-02T14:00:00Z) or Unix "
                            "seconds, got 'yesterday'"),
    ({"from": "1767225600", "to": "1767225000"}, "to: must be after from"),
    ({"step": "1", "from": "1767225600", "to": "1767312000"},
     "86400 buckets of 1 s is more than 6000: ask for a shorter range or a larger step"),
])
def test_bad_parameters_are_a_400_naming_them(api, stored, params, error):
    response = api("bob").get(f"/api/v1/nics/{stored['erring'].id}/errors/", params)
    assert response.status_code == 400
    assert response.json() == {"error": error}


def test_signed_out_is_a_401(client, stored):
    assert client.get(f"/api/v1/nics/{stored['erring'].id}/errors/").status_code == 401
