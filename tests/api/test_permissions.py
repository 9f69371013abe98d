"""The API shows a user exactly what the UI shows them (``visible_to``): bob cannot read
alice's job by id, find it in a list, read its metrics, or see or acknowledge its
findings. Another user's object is a 404 (its existence is not revealed), never a 403."""

import pytest

from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices(users):
    node = factories.node("gpu-p001", gpus=2)
    job = factories.job("alice", gpus=list(node.gpus.all()),
                        efficiency={"allocated": 4.0, "used": 1.0})
    return {"node": node, "job": job, "finding": factories.finding(job)}


def test_another_users_job_is_not_found_by_id(api, alices):
    response = api("bob").get(f"/api/v1/jobs/{alices['job'].id}/")
    assert response.status_code == 404
    assert response.json() == {"error": "No Job matches the given query."}
    # Same answer as for an id that does not exist: nothing to learn from it.
    missing = api("bob").get(f"/api/v1/jobs/{alices['job'].id + 1000}/")
    assert missing.status_code == 404


def test_another_users_job_is_absent_from_every_list(api, alices):
    bob = api("bob")
    assert bob.get("/api/v1/jobs/").json()["count"] == 0
    assert bob.get("/api/v1/jobs/", {"user": "alice"}).json()["count"] == 0
    assert bob.get("/api/v1/jobs/", {"q": alices["job"].external_id}).json()["count"] == 0
    assert bob.get("/api/v1/usage/").json()["results"] == []


def test_another_users_job_metrics_are_not_found(api, alices):
    response = api("bob").get(f"/api/v1/jobs/{alices['job'].id}/metrics/",
                              {"metrics": "util_pct"})
    assert response.status_code == 404
    assert "error" in response.json()


def test_another_users_findings_are_invisible_and_cannot_be_acknowledged(api, alices):
    bob, finding = api("bob"), alices["finding"]
    assert bob.get("/api/v1/findings/").json()["count"] == 0
    assert bob.get(f"/api/v1/findings/{finding.id}/").status_code == 404
    assert bob.post(f"/api/v1/findings/{finding.id}/acknowledge/").status_code == 404
    finding.refresh_from_db()
    assert finding.acknowledged_at is None


def test_the_gpu_list_does_not_name_another_users_job(api, alices):
    gpu = alices["node"].gpus.first()
    theirs = api("bob").get(f"/api/v1/gpus/{gpu.id}/").json()["latest"]
    assert theirs["allocated"] is True and theirs["job"] is None
    mine = api("alice").get(f"/api/v1/gpus/{gpu.id}/").json()["latest"]
    assert mine["job"] == alices["job"].id


def test_the_owner_and_staff_see_it(api, alices):
    job_id = alices["job"].id
    for who in ("alice", "staff"):
        client = api(who)
        assert client.get(f"/api/v1/jobs/{job_id}/").status_code == 200
        assert [j["id"] for j in client.get("/api/v1/jobs/").json()["results"]] == [job_id]
        assert client.get(f"/api/v1/findings/{alices['finding'].id}/").status_code == 200


def test_node_level_findings_are_for_staff(api, alices):
    finding = factories.finding(None, "gpu_errors", node=alices["node"])
    assert api("alice").get(f"/api/v1/findings/{finding.id}/").status_code == 404
    assert api("staff").get(f"/api/v1/findings/{finding.id}/").status_code == 200
