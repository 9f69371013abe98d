"""The users page: GPU-hours and waste per user and per account over a period."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.jobs.models import Job
from tests import rows as f

pytestmark = pytest.mark.django_db

# session + user, then the usage summary (one grouped query).
USERS_QUERIES = 2 + 1 + 1  # + the navigation's cluster list (web/cluster_choice.py)


@pytest.fixture
def usage(db):
    now = timezone.now()
    f.job("alice", account="nlp", efficiency={"allocated": 10, "used": 2})
    f.job("alice", account="vision", efficiency={"allocated": 4, "used": 4})
    f.job("bob", account="nlp", efficiency={"allocated": 6, "used": 3})
    f.job("bob", account="nlp", efficiency={"allocated": 100, "used": 0}, state="ended",
          started_at=now - dt.timedelta(days=20), ended_at=now - dt.timedelta(days=19))


def rows(response):
    return [(r["name"], r["jobs"], r["gpu_hours"], r["wasted_gpu_hours"])
            for r in response.context["rows"]]


def test_per_user_over_the_last_week(client_for, usage):
    response = client_for("staff").get(reverse("users"))
    assert response.status_code == 200
    assert rows(response) == [("alice", 2, 14.0, 8.0), ("bob", 1, 6.0, 3.0)]
    assert response.context["totals"]["efficiency_pct"] == pytest.approx(45.0)
    chart = response.context["charts"]["usage"]
    assert [t["name"] for t in chart["data"]] == ["used", "wasted"]
    assert list(chart["data"][1]["x"]) == [8.0, 3.0]


def test_per_account(client_for, usage):
    response = client_for("staff").get(reverse("users"), {"by": "account"})
    assert rows(response) == [("nlp", 2, 16.0, 11.0), ("vision", 1, 4.0, 0.0)]


def test_a_longer_custom_period_reaches_older_jobs(client_for, usage):
    start = (timezone.localtime() - dt.timedelta(days=25)).strftime("%Y-%m-%dT%H:%M")
    response = client_for("staff").get(reverse("users"), {"from": start})
    assert ("bob", 2, 106.0, 103.0) in rows(response)


def test_a_researcher_sees_only_their_own_usage(client_for, usage):
    response = client_for("bob").get(reverse("users"))
    assert rows(response) == [("bob", 1, 6.0, 3.0)]
    assert b"alice" not in response.content


def test_bad_grouping_is_a_visible_error(client_for, usage):
    response = client_for("staff").get(reverse("users"), {"by": "team"})
    assert response.status_code == 400
    assert b"by must be one of user, account" in response.content


def test_query_count_is_pinned(client_for, usage, django_assert_num_queries):
    for i in range(30):
        f.job(f"user{i}", efficiency={"allocated": 1, "used": 0.5})
    client = client_for("staff")
    with django_assert_num_queries(USERS_QUERIES):
        response = client.get(reverse("users"))
    assert len(response.context["rows"]) == 32


def test_empty_period(client_for):
    response = client_for("alice").get(reverse("users"), {"range": "1h"})
    assert b"You ran no GPU job in this range." in response.content


def test_a_partly_measured_period_says_how_much_was_measured(client_for, usage):
    """alice's first job was sampled only for its last half hour of two: the page says
    what share of its GPU-hours were measured, per row and above the table."""
    from clusterui.findings.models import JobEfficiency

    late = JobEfficiency.objects.get(job__user="alice", job__account="nlp")
    late.measured_from = late.window_end - dt.timedelta(minutes=30)
    late.save()
    response = client_for("staff").get(reverse("users"))
    measured = {r["name"]: r["measured_pct"] for r in response.context["rows"]}
    assert measured["alice"] == pytest.approx(100 * (2.5 + 4) / 14)  # 46 %
    assert measured["bob"] == pytest.approx(100.0)
    html = " ".join(response.content.decode().split())
    assert "63 % of these GPU-hours were measured." in html  # (6.5 + 6) / 20, 62.5
    assert '<td class="num warn-text">46 %</td>' in html
    fine = client_for("staff").get(reverse("users"), {"by": "account"})
    assert "of these GPU-hours were measured" in fine.content.decode()  # nlp: 8.5 of 16
    late.measured_from = late.window_start
    late.save()
    assert "were measured" not in client_for("staff").get(reverse("users")).content.decode()


def test_jobs_without_a_user_are_summed_under_not_reported_without_a_jobs_link(client_for,
                                                                              usage):
    pod = f.job("", account="", efficiency={"allocated": 3, "used": 1})
    Job.objects.filter(pk=pod.pk).update(scheduler="kubernetes", namespace="vision")
    response = client_for("staff").get(reverse("users"))
    assert rows(response)[-1] == ("(not reported)", 1, 3.0, 2.0)
    page = response.content.decode()
    assert page.count("jobs →") == 2  # alice's and bob's
