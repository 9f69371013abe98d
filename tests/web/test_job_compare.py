"""Two jobs side by side (issue 20): tick two jobs in the list, see their figures, findings
and GPU activity from each one's start on one chart; a job you may not see is not found."""

import datetime as dt

import pytest
from django.utils import timezone

from tests import rows as f
from tests.web.plotly_data import present, values

pytestmark = pytest.mark.django_db


@pytest.fixture
def before_and_after():
    now = timezone.now()
    n = f.node("gpu-a001", gpus=4)
    gpus = list(n.gpus.order_by("index"))
    before = f.job("alice", gpus=gpus[:2], external_id="700001", name="train-v1",
                   started_at=now - dt.timedelta(hours=3), ended_at=now - dt.timedelta(hours=2),
                   state="ended", efficiency={"allocated": 2.0, "used": 0.6})
    after = f.job("alice", gpus=gpus[2:], external_id="700002", name="train-v2",
                  started_at=now - dt.timedelta(minutes=30),
                  efficiency={"allocated": 1.0, "used": 0.9})
    f.gpu_samples(gpus[:2], before.started_at, before.ended_at, job=before,
                  util=lambda g, k: 30.0)
    f.gpu_samples(gpus[2:], after.started_at, now, job=after, util=lambda g, k: 90.0)
    f.finding(before, title="Low GPU utilization: 24 % on 2 GPUs")
    return before, after


def test_the_jobs_list_ticks_two_jobs_into_a_comparison(client_for, before_and_after):
    text = client_for("alice").get("/jobs/").content.decode()
    assert 'form id="compare-form"' in text and 'action="/jobs/compare/"' in text
    for job in before_and_after:
        assert f'name="job" value="{job.pk}" form="compare-form"' in text


def test_two_jobs_side_by_side(client_for, before_and_after):
    before, after = before_and_after
    response = client_for("alice").get("/jobs/compare/", {"job": [before.pk, after.pk]})
    assert response.status_code == 200
    text = response.content.decode()
    assert "Job 700001 and job 700002" in text
    assert "<td class=\"num-left\">30 %</td><td class=\"num-left\">90 %</td>" in text
    assert "Low GPU utilization: 24 % on 2 GPUs" in text
    traces = {t["name"]: t for t in response.context["charts"]["activity"]["data"]}
    sm_before = traces["job 700001: SM activity (GPM)"]
    sm_after = traces["job 700002: SM activity (GPM)"]  # the fixture's SM is 0.8 x NVML
    assert present(sm_before["y"]) == pytest.approx([24.0] * len(present(sm_before["y"])))
    assert present(sm_after["y"]) == pytest.approx([72.0] * len(present(sm_after["y"])))
    # Both from their own start, in minutes: the hour-long run and the half-hour one.
    assert present(sm_before["x"])[0] == 0 and 55 <= max(sm_before["x"]) <= 60
    # The running job's curve reaches the request's now, a moment after the fixture's: an
    # empty bucket may start past 30 min, its samples do not.
    sampled = [x for x, y in zip(values(sm_after["x"]), values(sm_after["y"]), strict=True)
               if y is not None]
    assert 29.5 <= max(sampled) <= 30


def test_the_share_of_each_run_measured_is_compared(client_for, before_and_after):
    """train-v2 was sampled for its last 15 minutes of 30, train-v1 from its start: their
    wasted GPU-hours are not equally measured, and the comparison says so."""
    before, after = before_and_after
    for job, share in ((before, 1.0), (after, 0.5)):
        eff = job.efficiency
        eff.measured_from = eff.window_end - (eff.window_end - eff.window_start) * share
        eff.save()
    response = client_for("alice").get("/jobs/compare/", {"job": [before.pk, after.pk]})
    row = next(r for r in response.context["rows"] if r["label"] == "Share of the run measured")
    assert row["values"] == [pytest.approx(100.0), pytest.approx(50.0)]
    assert ('<th scope="row">Share of the run measured</th><td class="num-left">100 %</td>'
            '<td class="num-left">50 %</td>') in response.content.decode()


def test_a_bad_choice_is_explained(client_for, before_and_after):
    before, _ = before_and_after
    client = client_for("alice")
    one = client.get("/jobs/compare/", {"job": [before.pk]})
    assert one.status_code == 400 and "Choose two jobs" in one.content.decode()
    same = client.get("/jobs/compare/", {"job": [before.pk, before.pk]})
    assert same.status_code == 400 and "the same job twice" in same.content.decode()


def test_another_users_job_cannot_be_compared(client_for, before_and_after):
    before, _ = before_and_after
    bobs = f.job("bob", external_id="700009")
    response = client_for("alice").get("/jobs/compare/", {"job": [before.pk, bobs.pk]})
    assert response.status_code == 404


def test_a_job_whose_start_was_not_reported_says_so(client_for, before_and_after):
    """A pod's start may not be reported: the table says so beside when it was first seen,
    and its curve says it counts from then, not from a start nobody knows."""
    before, after = before_and_after
    type(after).objects.filter(pk=after.pk).update(started_at=None, user="", account="",
                                                   namespace="ml-team", scheduler="kubernetes")
    response = client_for("staff").get("/jobs/compare/", {"job": [before.pk, after.pk]})
    text = " ".join(response.content.decode().split())
    first_seen = timezone.localtime(after.first_seen).strftime("%Y-%m-%d %H:%M")
    assert f'<span class="muted">not reported</span> · first seen {first_seen}</td>' in text
    assert "<td>alice · nlp</td><td>ml-team</td>" in text
    names = {t["name"] for t in response.context["charts"]["activity"]["data"]}
    assert "job 700002 (from first seen): SM activity (GPM)" in names
    assert "job 700001: SM activity (GPM)" in names
