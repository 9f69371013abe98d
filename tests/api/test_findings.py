"""GET /api/v1/findings/, /api/v1/findings/<id>/ and POST .../acknowledge/."""

import pytest

from clusterui.findings.models import Finding
from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def findings(users):
    node = factories.node("gpu-h001", gpus=2)
    job = factories.job("alice", gpus=list(node.gpus.all()), external_id="900")
    other = factories.job("alice", account="vision", external_id="901")
    return {
        "low": factories.finding(job, "low_utilization", severity="critical", wasted=12.0),
        "idle": factories.finding(job, "idle_gpu", severity="warning"),
        "closed": factories.finding(other, "comm_bound", state="closed"),
        "bobs": factories.finding(factories.job("bob"), "input_bound"),
        "node": factories.finding(None, "gpu_errors", node=node),
    }


def kinds(response):
    assert response.status_code == 200, response.content
    return sorted(f["kind"] for f in response.json()["results"])


def test_list_shows_the_users_findings_with_evidence(api, findings):
    body = api("alice").get("/api/v1/findings/", {"kind": "low_utilization"}).json()
    (low,) = body["results"]
    assert low["severity"] == "critical" and low["state"] == "open"
    assert low["kind_label"] == "Low GPU utilization"
    assert low["job"]["external_id"] == "900" and low["job"]["user"] == "alice"
    assert low["evidence"] == {"mean_util_pct": 7.9} and low["wasted_gpu_hours"] == 12.0
    assert low["explanation"] and low["suggestion"] and low["acknowledged_at"] is None


@pytest.mark.parametrize(("params", "expected"), [
    ({}, ["comm_bound", "idle_gpu", "low_utilization"]),
    ({"state": "open"}, ["idle_gpu", "low_utilization"]),
    ({"severity": "critical"}, ["low_utilization"]),
    ({"account": "vision"}, ["comm_bound"]),
    ({"node": "gpu-h001"}, []),  # the node finding is for staff
])
def test_filters(api, findings, params, expected):
    assert kinds(api("alice").get("/api/v1/findings/", params)) == expected


def test_staff_see_everything_including_node_findings(api, findings):
    assert kinds(api("staff").get("/api/v1/findings/", {"node": "gpu-h001"})) == ["gpu_errors"]
    assert api("staff").get("/api/v1/findings/").json()["count"] == 5


def test_acknowledge_records_who_and_when_once(api, findings):
    client = api("alice")
    finding = findings["idle"]
    response = client.post(f"/api/v1/findings/{finding.id}/acknowledge/")
    assert response.status_code == 200
    body = response.json()
    assert body["acknowledged_by"] == "alice" and body["acknowledged_at"]
    first = Finding.objects.get(pk=finding.pk).acknowledged_at
    again = api("staff").post(f"/api/v1/findings/{finding.id}/acknowledge/").json()
    assert again["acknowledged_by"] == "alice"
    assert Finding.objects.get(pk=finding.pk).acknowledged_at == first
    assert kinds(client.get("/api/v1/findings/", {"acknowledged": "true"})) == ["idle_gpu"]
    assert "idle_gpu" not in kinds(client.get("/api/v1/findings/", {"acknowledged": "false"}))


def test_acknowledge_is_a_post(api, findings):
    response = api("alice").get(f"/api/v1/findings/{findings['idle'].id}/acknowledge/")
    assert response.status_code == 405
    assert response.json() == {"error": 'Method "GET" not allowed.'}


def test_acknowledge_with_a_session_needs_the_csrf_token(users, findings, client):
    from rest_framework.test import APIClient

    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(users["alice"])
    refused = browser.post(f"/api/v1/findings/{findings['idle'].id}/acknowledge/")
    assert refused.status_code == 403
    assert refused.json()["error"].startswith("CSRF Failed")


def test_list_query_count(api, findings, django_assert_num_queries):
    client = api("alice")
    client.get("/api/v1/findings/")
    # token, the viewer's per-cluster names (jobs/visibility.py), count, findings (job,
    # node, gpu, acknowledged_by joined)
    with django_assert_num_queries(4):
        client.get("/api/v1/findings/")
