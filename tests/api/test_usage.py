"""GET /api/v1/usage/: GPU-hours and waste per user or account over a period."""

import datetime as dt

import pytest
from django.utils import timezone

from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def usage(users):
    now = timezone.now()
    factories.job("alice", account="nlp", efficiency={"allocated": 10.0, "used": 8.0})
    factories.job("alice", account="vision", efficiency={"allocated": 6.0, "used": 0.0})
    factories.job("bob", account="nlp", efficiency={"allocated": 40.0, "used": 10.0})
    factories.job("bob", account="nlp", state="ended", started_at=now - dt.timedelta(days=30),
                  ended_at=now - dt.timedelta(days=29), efficiency={"allocated": 500.0, "used": 0.0})


def test_staff_see_every_user_most_wasted_first(api, usage):
    body = api("staff").get("/api/v1/usage/", {"group": "user"}).json()
    assert body["group"] == "user" and body["count"] == 2
    bob, alice = body["results"]
    assert bob == {"name": "bob", "jobs": 1, "gpu_hours": 40.0, "used_gpu_hours": 10.0,
                   "wasted_gpu_hours": 30.0, "efficiency_pct": 25.0, "measured_pct": 100.0}
    assert alice["name"] == "alice" and alice["jobs"] == 2 and alice["wasted_gpu_hours"] == 8.0


def test_per_account(api, usage):
    rows = api("staff").get("/api/v1/usage/", {"group": "account"}).json()["results"]
    assert [(r["name"], r["gpu_hours"]) for r in rows] == [("nlp", 50.0), ("vision", 6.0)]


def test_a_user_sees_only_their_own_usage(api, usage):
    rows = api("alice").get("/api/v1/usage/", {"group": "account"}).json()["results"]
    assert [(r["name"], r["gpu_hours"]) for r in rows] == [("vision", 6.0), ("nlp", 10.0)]


def test_the_period_defaults_to_the_last_7_days_and_can_be_chosen(api, usage):
    client = api("staff")
    body = client.get("/api/v1/usage/").json()
    start, end = (dt.datetime.fromisoformat(body[k]) for k in ("from", "to"))
    assert end - start == dt.timedelta(days=7)
    assert abs(end - timezone.now()) < dt.timedelta(minutes=1)
    month = {"from": (timezone.now() - dt.timedelta(days=31)).isoformat()}
    rows = client.get("/api/v1/usage/", month).json()["results"]
    assert rows[0]["name"] == "bob" and rows[0]["gpu_hours"] == 540.0


def test_to_must_follow_from(api, usage):
    future = {"from": (timezone.now() + dt.timedelta(days=1)).isoformat()}
    response = api("staff").get("/api/v1/usage/", future)
    assert response.status_code == 400
    assert response.json() == {"error": "to: must be after from (to defaults to now)"}


def test_bad_group_is_400(api, usage):
    response = api("staff").get("/api/v1/usage/", {"group": "partition"})
    assert response.status_code == 400
    assert response.json() == {"error": 'group: "partition" is not a valid choice.'}


def test_paginated(api, usage):
    body = api("staff").get("/api/v1/usage/", {"limit": 1}).json()
    assert body["count"] == 2 and len(body["results"]) == 1 and body["next"]


def test_the_share_measured_counts_each_jobs_run_since_its_first_sample(api, usage):
    """A job ClusterUI began sampling 30 min into its 2 h run is a quarter measured: its
    allocated GPU-hours weigh in at that share (10 x 25 %), beside a job measured
    throughout (6): 8.5 of alice's 16 GPU-hours."""
    from clusterui.findings.models import JobEfficiency

    late = JobEfficiency.objects.get(job__user="alice", job__account="nlp")
    late.measured_from = late.window_end - (late.window_end - late.window_start) / 4
    late.save()
    whole = JobEfficiency.objects.get(job__user="alice", job__account="vision")
    whole.measured_from = whole.window_start
    whole.save()
    rows = {r["name"]: r for r in api("staff").get("/api/v1/usage/").json()["results"]}
    assert rows["alice"]["measured_pct"] == pytest.approx(100 * 8.5 / 16)
    by_account = api("staff").get("/api/v1/usage/", {"group": "account"}).json()["results"]
    measured = {r["name"]: r["measured_pct"] for r in by_account}
    assert measured["nlp"] == pytest.approx(100 * (2.5 + 40) / 50)  # bob's: not recorded
    assert measured["vision"] == pytest.approx(100.0)
