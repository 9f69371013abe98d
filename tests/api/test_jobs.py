"""GET /api/v1/jobs/ and /api/v1/jobs/<id>/."""

import datetime as dt

import pytest
from django.utils import timezone

from clusterui.jobs.models import Job
from tests.api import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster_jobs(users):
    """Alice's jobs: big waste, small waste, no figures yet, an old ended one; bob's one."""
    now = timezone.now()
    node = factories.node("gpu-j001", gpus=4)
    gpus = list(node.gpus.all())
    jobs = {
        "wasteful": factories.job("alice", gpus=gpus[:2], name="sweep",
                                  efficiency={"allocated": 20.0, "used": 4.0}),
        "efficient": factories.job("alice", gpus=gpus[2:3], name="train",
                                   efficiency={"allocated": 10.0, "used": 9.0}),
        "new": factories.job("alice", gpus=gpus[3:], name="fresh",
                             started_at=now - dt.timedelta(minutes=5)),
        "old": factories.job("alice", account="vision", state="ended", name="old",
                             started_at=now - dt.timedelta(days=20),
                             ended_at=now - dt.timedelta(days=19),
                             efficiency={"allocated": 50.0, "used": 10.0}),
        "bobs": factories.job("bob", efficiency={"allocated": 99.0, "used": 0.0}),
    }
    factories.finding(jobs["wasteful"], "low_utilization")
    factories.finding(jobs["old"], "idle_gpu", state="closed")
    return jobs


def ids(response):
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_list_shows_efficiency_figures(api, cluster_jobs):
    body = api("alice").get("/api/v1/jobs/", {"ordering": "-wasted"}).json()
    assert body["count"] == 4
    first = body["results"][0]
    assert first["id"] == cluster_jobs["old"].id
    assert first["gpu_hours"] == 50.0
    assert first["wasted_gpu_hours"] == 40.0
    assert first["efficiency_pct"] == pytest.approx(20.0)
    assert first["user"] == "alice" and first["account"] == "vision"
    assert first["state"] == "ended" and first["cluster"] == "test"


def test_list_says_how_much_of_each_run_was_measured(api, cluster_jobs):
    """The sweep was sampled for the last 30 minutes of its two hours; the training job
    from its start; the fresh job has no figures yet."""
    eff = cluster_jobs["wasteful"].efficiency
    eff.measured_from = eff.window_end - dt.timedelta(minutes=30)
    eff.save()
    eff = cluster_jobs["efficient"].efficiency
    eff.measured_from = eff.window_start
    eff.save()
    rows = {r["name"]: r for r in api("alice").get("/api/v1/jobs/").json()["results"]}
    assert rows["sweep"]["measured_pct"] == pytest.approx(25.0)
    assert rows["train"]["measured_pct"] == pytest.approx(100.0)
    assert rows["fresh"]["measured_pct"] is None


def test_most_wasted_first_puts_jobs_without_figures_last(api, cluster_jobs):
    got = ids(api("alice").get("/api/v1/jobs/", {"ordering": "-wasted"}))
    assert got == [cluster_jobs[k].id for k in ("old", "wasteful", "efficient", "new")]
    got = ids(api("alice").get("/api/v1/jobs/", {"ordering": "wasted"}))
    assert got[-1] == cluster_jobs["new"].id


def test_time_range_filter(api, cluster_jobs):
    week_ago = (timezone.now() - dt.timedelta(days=7)).isoformat()
    got = ids(api("alice").get("/api/v1/jobs/", {"active_from": week_ago}))
    assert set(got) == {cluster_jobs[k].id for k in ("wasteful", "efficient", "new")}
    before = (timezone.now() - dt.timedelta(days=10)).isoformat()
    assert ids(api("alice").get("/api/v1/jobs/", {"active_to": before})) == [
        cluster_jobs["old"].id]


@pytest.mark.parametrize(("params", "expected"), [
    ({"state": "ended"}, ["old"]),
    ({"account": "vision"}, ["old"]),
    ({"finding": "low_utilization"}, ["wasteful"]),
    ({"finding": "idle_gpu"}, ["old"]),
    ({"q": "swe"}, ["wasteful"]),
    ({"account": "nlp", "ordering": "-efficiency"}, ["efficient", "wasteful", "new"]),
    ({"finding": "low_utilization", "ordering": "-wasted"}, ["wasteful"]),  # with DISTINCT
])
def test_filters(api, cluster_jobs, params, expected):
    got = ids(api("alice").get("/api/v1/jobs/", params))
    assert got == [cluster_jobs[k].id for k in expected]


def test_filter_by_scheduler_id_and_cluster(api, cluster_jobs):
    """``clusterui jobstats`` finds a job by the scheduler's id, exactly, on a cluster."""
    job = cluster_jobs["wasteful"]
    other = factories.job("alice", external_id="other")
    other.cluster, other.external_id = factories.cluster("east"), job.external_id
    other.save()
    both = ids(api("alice").get("/api/v1/jobs/", {"external_id": job.external_id}))
    assert set(both) == {job.id, other.id}
    assert ids(api("alice").get("/api/v1/jobs/", {"external_id": job.external_id,
                                                  "cluster": "east"})) == [other.id]
    assert ids(api("alice").get("/api/v1/jobs/", {"external_id": job.external_id[:-1]})) == []
    assert ids(api("bob").get("/api/v1/jobs/", {"external_id": job.external_id})) == []


def test_staff_filter_by_user(api, cluster_jobs):
    got = ids(api("staff").get("/api/v1/jobs/", {"user": "bob"}))
    assert got == [cluster_jobs["bobs"].id]
    assert api("staff").get("/api/v1/jobs/").json()["count"] == 5


def test_pagination(api, cluster_jobs):
    client = api("alice")
    page = client.get("/api/v1/jobs/", {"ordering": "-wasted", "limit": 2}).json()
    assert page["count"] == 4 and len(page["results"]) == 2
    assert page["previous"] is None and "offset=2" in page["next"]
    rest = client.get(page["next"]).json()
    assert [r["id"] for r in rest["results"]] == [cluster_jobs["efficient"].id,
                                                   cluster_jobs["new"].id]
    assert rest["next"] is None


def test_list_query_count_does_not_grow_with_jobs(api, cluster_jobs, django_assert_num_queries):
    client = api("alice")
    client.get("/api/v1/jobs/")  # first use of the token records last_used_at
    # token lookup, the viewer's per-cluster names (jobs/visibility.py), count, page
    # (efficiency and cluster joined)
    with django_assert_num_queries(4):
        assert client.get("/api/v1/jobs/").status_code == 200
    for _ in range(5):
        factories.job("alice", efficiency={"allocated": 1.0, "used": 1.0})
    with django_assert_num_queries(4):
        assert client.get("/api/v1/jobs/").json()["count"] == 9


def test_detail_has_efficiency_gpus_and_findings(api, cluster_jobs, django_assert_num_queries):
    job = cluster_jobs["wasteful"]
    client = api("alice")
    client.get("/api/v1/jobs/")
    # token, the viewer's per-cluster names, job (efficiency, cluster), allocations with
    # GPUs and nodes, findings
    with django_assert_num_queries(5):
        body = client.get(f"/api/v1/jobs/{job.id}/").json()
    assert body["external_id"] == job.external_id and body["name"] == "sweep"
    eff = body["efficiency"]
    assert eff["gpu_hours_allocated"] == 20.0 and eff["gpu_hours_wasted"] == 16.0
    assert eff["efficiency_pct"] == pytest.approx(20.0)
    assert "accum" not in eff and eff["finalized_at"] is None  # still running
    assert [(g["node"], g["index"]) for g in body["gpus"]] == [("gpu-j001", 0), ("gpu-j001", 1)]
    assert [f["kind"] for f in body["findings"]] == ["low_utilization"]
    assert body["findings"][0]["suggestion"] == "Request fewer GPUs."  # what to do


def test_detail_without_efficiency_yet(api, cluster_jobs):
    body = api("alice").get(f"/api/v1/jobs/{cluster_jobs['new'].id}/").json()
    assert body["efficiency"] is None
    assert body["gpu_hours"] is None and body["efficiency_pct"] is None


def test_read_only(api, cluster_jobs):
    client = api("alice")
    response = client.delete(f"/api/v1/jobs/{cluster_jobs['new'].id}/")
    assert response.status_code == 405
    assert response.json() == {"error": 'Method "DELETE" not allowed.'}


def test_scheduler_facts_with_queue_wait(api, cluster_jobs):
    job = cluster_jobs["old"]
    Job.objects.filter(pk=job.pk).update(
        submitted_at=job.started_at - dt.timedelta(minutes=12), time_limit_s=4 * 3600,
        exit_state="timeout", exit_code=0, exit_signal=15)
    body = api("alice").get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["queue_wait_s"], body["time_limit_s"]) == (720.0, 14400)
    assert (body["exit_state"], body["exit_code"], body["exit_signal"]) == ("timeout", 0, 15)
    assert body["submitted_at"].startswith(
        (job.started_at - dt.timedelta(minutes=12)).strftime("%Y-%m-%dT%H:%M"))
    listed = {r["id"]: r for r in api("alice").get("/api/v1/jobs/").json()["results"]}
    assert listed[job.pk]["queue_wait_s"] == 720.0
    new = listed[cluster_jobs["new"].id]  # nothing reported: null, never invented
    assert (new["submitted_at"], new["queue_wait_s"], new["time_limit_s"], new["exit_state"],
            new["exit_code"]) == (None, None, None, "", None)
