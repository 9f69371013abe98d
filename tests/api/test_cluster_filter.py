"""``?cluster=NAME`` on jobs, findings and usage: one cluster's rows; a name no cluster has
is a 400 that names it, not an empty list that would read as an idle cluster."""

import pytest

from tests import rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters():
    a = rows.job("alice", cluster_name="gpu-a", account="nlp", external_id="7",
                 efficiency={"allocated": 4, "used": 1})
    b = rows.job("alice", cluster_name="gpu-b", account="nlp", external_id="7",
                 efficiency={"allocated": 2, "used": 2})
    node_b = rows.node("gpu-b001", cluster_name="gpu-b", gpus=1)
    return {"a": a, "b": b, "fa": rows.finding(a), "fb": rows.finding(b),
            "node_b": rows.finding(None, "gpu_errors", node=node_b)}


@pytest.mark.parametrize("who", ["alice", "staff"])
def test_one_clusters_jobs_findings_and_usage(api, two_clusters, who):
    client, t = api(who), two_clusters
    jobs = client.get("/api/v1/jobs/?cluster=gpu-b").json()["results"]
    assert [j["id"] for j in jobs] == [t["b"].pk]
    both = client.get("/api/v1/jobs/").json()["results"]
    assert {j["id"] for j in both} == {t["a"].pk, t["b"].pk}
    findings = client.get("/api/v1/findings/?cluster=gpu-b").json()["results"]
    # A node's finding is its node's cluster's (and for staff only).
    expected = {t["fb"].pk, t["node_b"].pk} if who == "staff" else {t["fb"].pk}
    assert {f["id"] for f in findings} == expected
    usage = client.get("/api/v1/usage/?group=account&cluster=gpu-a").json()["results"]
    assert [(r["name"], r["gpu_hours"]) for r in usage] == [("nlp", 4.0)]
    usage = client.get("/api/v1/usage/?group=account").json()["results"]
    assert [(r["name"], r["gpu_hours"]) for r in usage] == [("nlp", 6.0)]


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/findings/", "/api/v1/usage/"])
def test_an_unknown_cluster_is_a_400_naming_it(api, two_clusters, path):
    response = api("alice").get(path, {"cluster": "gpu-z"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith("cluster: ") and "gpu-z" in error, error


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/findings/", "/api/v1/usage/"])
def test_a_nul_character_is_a_400_not_a_server_error(api, two_clusters, path):
    response = api("alice").get(path, {"cluster": "gpu\x00a"})
    assert response.status_code == 400
    assert response.json()["error"] == "cluster: Null characters are not allowed."
