"""GET /api/v1/{gpus,nics,nodes,jobs}/<id>/metrics/: aligned series read from the real sample
tables, written by the real ingest path."""

import datetime as dt
import math
import time

import pytest

from clusterui.ingest.tasks import ingest_envelope
from clusterui.inventory.models import Gpu, Node
from clusterui.jobs.models import Job
from tests.api import factories
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)

GPUS, SAMPLES, INTERVAL = 2, 6, 10.0


@pytest.fixture
def stored(users, clean_samples):
    """Six samples 10 s apart on two GPUs of gpu-t001, for alice's job 4242; GPU g's
    util_pct at sample k is (7g + k) % 100 (tests/factories.py)."""
    start = math.floor(time.time() / 60) * 60 - 600
    ingest_envelope(node_batch("gpu-t001", gpus=GPUS, samples=SAMPLES, start=start,
                               interval=INTERVAL))
    node = Node.objects.get(name="gpu-t001")
    return {
        "start": start,
        "node": node,
        "gpus": list(Gpu.objects.filter(node=node).order_by("index")),
        "job": Job.objects.get(external_id="4242"),
    }


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat().replace("+00:00", "Z")


def window(stored, seconds=SAMPLES * INTERVAL):
    return {"from": iso(stored["start"]), "to": iso(stored["start"] + seconds)}


def test_gpu_series_are_the_stored_samples_on_one_axis(api, stored):
    gpu = stored["gpus"][1]
    response = api("alice").get(f"/api/v1/gpus/{gpu.id}/metrics/",
                                {"metrics": "util_pct,power_w", "step": 10, **window(stored)})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["step_s"] == 10 and body["agg"] == "avg"
    assert body["ts"] == [iso(stored["start"] + 10 * k) for k in range(SAMPLES)]
    util, power = body["series"]
    assert (util["metric"], util["unit"], util["source"]) == ("util_pct", "%", "gpu")
    assert util["id"] == gpu.id and util["name"] == "gpu-t001/gpu1" and util["node"] == "gpu-t001"
    assert util["values"] == [float((7 + k) % 100) for k in range(SAMPLES)]
    assert power["metric"] == "power_w" and len(power["values"]) == SAMPLES


def test_a_wider_step_averages_and_agg_picks_the_extreme(api, stored):
    gpu = stored["gpus"][0]
    client = api("alice")
    url = f"/api/v1/gpus/{gpu.id}/metrics/"
    avg = client.get(url, {"step": 30, **window(stored)}).json()
    assert avg["series"][0]["values"] == [1.0, 4.0]  # mean of 0,1,2 and of 3,4,5
    peak = client.get(url, {"step": 30, "agg": "max", **window(stored)}).json()
    assert peak["series"][0]["values"] == [2.0, 5.0]


def test_an_extreme_kept_only_with_the_raw_samples_is_refused_for_an_older_range(api, stored):
    """The rollups keep the min and max of the banded gauges only: the max temperature of a
    range older than the raw samples is a 400 that says what to ask instead, not a blank."""
    gpu = stored["gpus"][0]
    client = api("alice")
    url = f"/api/v1/gpus/{gpu.id}/metrics/"
    old = stored["start"] - 20 * 86400
    response = client.get(url, {"metrics": "temp_c", "agg": "max", "from": iso(old),
                                "to": iso(old + 3600)})
    assert response.status_code == 400
    assert response.json()["error"].startswith(
        "the max of temp_c is kept with the raw samples, 14 days, and this range starts "
        "earlier: ask for its mean (agg=avg)")
    for params in ({"metrics": "util_pct", "agg": "max"}, {"metrics": "temp_c"}):
        response = client.get(url, {**params, "from": iso(old), "to": iso(old + 3600)})
        assert response.status_code == 200, (params, response.content)
    recent = client.get(url, {"metrics": "temp_c", "agg": "max", "step": 30, **window(stored)})
    assert recent.status_code == 200 and None not in recent.json()["series"][0]["values"]


def test_buckets_without_samples_are_null(api, stored):
    gpu = stored["gpus"][0]
    body = api("alice").get(f"/api/v1/gpus/{gpu.id}/metrics/",
                            {"step": 10, **window(stored, 120)}).json()
    values = body["series"][0]["values"]
    assert len(values) == 12 and values[:6] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert values[6:] == [None] * 6


def test_automatic_step_is_never_finer_than_the_sampling_interval(api, stored):
    gpu = stored["gpus"][0]
    body = api("alice").get(f"/api/v1/gpus/{gpu.id}/metrics/", window(stored)).json()
    assert body["step_s"] == 10  # a 60 s range would get 1 s buckets otherwise
    assert body["series"][0]["metric"] == "util_pct"  # the default metric
    hour = api("alice").get(f"/api/v1/gpus/{gpu.id}/metrics/").json()
    assert hour["step_s"] == 10 and len(hour["ts"]) in (360, 361)  # the last hour


def test_node_series_cover_each_gpu_and_each_nic(api, stored):
    node = stored["node"]
    body = api("alice").get(f"/api/v1/nodes/{node.id}/metrics/",
                            {"metrics": "util_pct,rx_bytes_per_s", "step": 10,
                             **window(stored)}).json()
    names = [(s["metric"], s["name"]) for s in body["series"]]
    assert names == [("util_pct", "gpu-t001/gpu0"), ("util_pct", "gpu-t001/gpu1"),
                     ("rx_bytes_per_s", "gpu-t001/mlx5_0:1")]
    assert all(len(s["values"]) == len(body["ts"]) == SAMPLES for s in body["series"])
    assert body["series"][2]["values"] == [1e9] * SAMPLES


def test_a_nics_series_are_its_own_rates_by_default(api, stored):
    """Found through the NIC list as a script would (by node), read without naming metrics:
    its receive and transmit rates, what the factory sent (1e9 and 2e9 B/s)."""
    client = api("alice")
    listed = client.get("/api/v1/nics/", {"node": "gpu-t001"}).json()["results"]
    assert [n["name"] for n in listed] == ["mlx5_0:1"]
    body = client.get(f"/api/v1/nics/{listed[0]['id']}/metrics/",
                      {"step": 10, **window(stored)}).json()
    assert body["ts"] == [iso(stored["start"] + 10 * k) for k in range(SAMPLES)]
    assert [(s["source"], s["metric"], s["unit"], s["name"]) for s in body["series"]] == [
        ("nic", "rx_bytes_per_s", "B/s", "gpu-t001/mlx5_0:1"),
        ("nic", "tx_bytes_per_s", "B/s", "gpu-t001/mlx5_0:1")]
    assert body["series"][0]["values"] == [1e9] * SAMPLES
    assert body["series"][1]["values"] == [2e9] * SAMPLES
    peak = client.get(f"/api/v1/nics/{listed[0]['id']}/metrics/",
                      {"metrics": "tx_bytes_per_s", "step": 60, "agg": "max",
                       **window(stored)}).json()
    assert [s["metric"] for s in peak["series"]] == ["tx_bytes_per_s"]
    assert 2e9 in peak["series"][0]["values"]


def test_job_series_cover_its_gpus_its_host_and_its_nodes_nics(api, stored):
    job = stored["job"]
    body = api("alice").get(f"/api/v1/jobs/{job.id}/metrics/",
                            {"metrics": "util_pct,cpu_cores_used,tx_bytes_per_s", "step": 10,
                             **window(stored)}).json()
    assert [(s["source"], s["metric"]) for s in body["series"]] == [
        ("gpu", "util_pct"), ("gpu", "util_pct"), ("job", "cpu_cores_used"),
        ("nic", "tx_bytes_per_s")]
    assert body["series"][2]["name"] == "job 4242"
    assert body["series"][2]["values"] == [12.0] * SAMPLES
    assert body["series"][3]["values"] == [2e9] * SAMPLES


def test_job_series_stay_within_the_jobs_life(api, stored):
    job = stored["job"]  # started 60 s before the first sample, still running
    client = api("alice")
    body = client.get(f"/api/v1/jobs/{job.id}/metrics/",
                      {"from": iso(stored["start"] - 3600), "step": 10,
                       "to": iso(stored["start"] + 60)}).json()
    assert body["from"] == iso(stored["start"] - 60)
    by_default = client.get(f"/api/v1/jobs/{job.id}/metrics/").json()
    assert by_default["from"] == iso(stored["start"] - 60)
    assert sum(v is not None for v in by_default["series"][0]["values"]) >= 1
    before = client.get(f"/api/v1/jobs/{job.id}/metrics/",
                        {"from": iso(stored["start"] - 7200), "to": iso(stored["start"] - 3600)})
    assert before.status_code == 400
    assert "the range asked for is outside it" in before.json()["error"]


def test_the_path_without_trailing_slash_works(api, stored):
    response = api("alice").get(f"/api/v1/jobs/{stored['job'].id}/metrics",
                                {"metrics": "util_pct,power_w"})
    assert response.status_code == 200
    assert {s["metric"] for s in response.json()["series"]} == {"util_pct", "power_w"}


@pytest.mark.parametrize(("path", "params", "message"), [
    ("gpus", {"metrics": "util_pct,bogus"},
     "unknown metric(s) for a GPU: bogus; known: util_pct,"),
    ("gpus", {"metrics": "cpu_cores_used"}, "unknown metric(s) for a GPU: cpu_cores_used"),
    ("nics", {"metrics": "util_pct"},
     "unknown metric(s) for a NIC: util_pct; known: rx_bytes_per_s, tx_bytes_per_s"),
    ("nodes", {"metrics": ","}, "metrics: name at least one metric"),
    ("gpus", {"from": "yesterday"},
     "from: expected an ISO 8601 time (2026-03-02T14:00:00Z) or Unix seconds, got 'yesterday'"),
    ("gpus", {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
     "to: must be after from"),
    ("gpus", {"from": "1999-12-31"}, "from: '1999-12-31' is outside 2000-01-01 to 2100-01-01"),
    ("gpus", {"step": "0"}, "step: Ensure this value is greater than or equal to 1."),
    ("gpus", {"step": "ten"}, "step: A valid integer is required."),
    ("gpus", {"agg": "median"}, 'agg: "median" is not a valid choice.'),
    ("gpus", {"from": "2026-01-01T00:00:00Z", "to": "2026-01-08T00:00:00Z", "step": "60"},
     "10080 buckets of 60 s is more than 6000: ask for a shorter range or a larger step"),
])
@pytest.mark.django_db  # no samples needed: no transaction either
def test_bad_requests_are_400_with_the_reason(api, path, params, message):
    node = factories.node("gpu-e001", gpus=1)
    obj = {"gpus": node.gpus.first, "nics": node.nics.first}.get(path, lambda: node)()
    response = api("alice").get(f"/api/v1/{path}/{obj.id}/metrics/", params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


def test_unix_seconds_and_naive_times_are_accepted(api, stored):
    gpu = stored["gpus"][0]
    client = api("alice")
    by_seconds = client.get(f"/api/v1/gpus/{gpu.id}/metrics/",
                            {"from": str(stored["start"]), "to": str(stored["start"] + 60),
                             "step": 10}).json()
    naive = dt.datetime.fromtimestamp(stored["start"], dt.UTC).replace(tzinfo=None)
    by_naive = client.get(f"/api/v1/gpus/{gpu.id}/metrics/",
                          {"from": naive.isoformat(), "to": str(stored["start"] + 60),
                           "step": 10}).json()
    assert by_seconds["ts"] == by_naive["ts"] == [iso(stored["start"] + 10 * k)
                                                  for k in range(6)]
    assert by_seconds["series"][0]["values"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
