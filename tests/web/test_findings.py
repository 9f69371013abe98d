"""The findings list and acknowledging a finding."""

import datetime as dt
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from clusterui.findings.models import Finding
from tests import rows as f

pytestmark = pytest.mark.django_db

# session + user, then: count, the page (with job, node, acknowledged_by).
LIST_QUERIES = 2 + 2 + 1  # + the navigation's cluster list (web/cluster_choice.py)


@pytest.fixture
def findings(db):
    n = f.node("gpu-a004", gpus=2)
    mine = f.job("alice", gpus=n.gpus.all(), external_id="4001")
    theirs = f.job("bob", external_id="4002", account="vision")
    return {
        "critical": f.finding(mine, kind="gpu_errors", severity="critical", node=n,
                              title="Xid 79 on GPU 1"),
        "warning": f.finding(mine, kind="low_utilization", title="12 % busy"),
        "closed": f.finding(mine, kind="idle_gpu", state="closed", title="Idle earlier"),
        "bobs": f.finding(theirs, kind="comm_bound", severity="info", title="Bob's comm"),
        "node": f.finding(None, kind="gpu_errors", node=n, severity="critical",
                          title="Xid 48 on a free GPU"),
    }


def titles(response):
    return [x.title for x in response.context["findings"]]


def test_open_findings_most_severe_first_and_scoped(client_for, findings):
    assert titles(client_for("alice").get(reverse("findings"))) == ["Xid 79 on GPU 1",
                                                                    "12 % busy"]
    # Critical before warning before info; within a severity, the most recently seen first.
    assert titles(client_for("staff").get(reverse("findings"))) == [
        "Xid 48 on a free GPU", "Xid 79 on GPU 1", "12 % busy", "Bob's comm"]


def test_filters(client_for, findings):
    client = client_for("staff")
    assert titles(client.get(reverse("findings"), {"state": "closed"})) == ["Idle earlier"]
    assert len(titles(client.get(reverse("findings"), {"state": ""}))) == 5
    assert titles(client.get(reverse("findings"), {"kind": "comm_bound"})) == ["Bob's comm"]
    assert titles(client.get(reverse("findings"), {"account": "vision"})) == ["Bob's comm"]
    assert titles(client.get(reverse("findings"), {"severity": "info"})) == ["Bob's comm"]
    assert sorted(titles(client.get(reverse("findings"), {"node": "gpu-a004"}))) == [
        "Xid 48 on a free GPU", "Xid 79 on GPU 1"]
    bad = client.get(reverse("findings"), {"severity": "urgent"})
    assert bad.status_code == 400 and b"Fix the filters above" in bad.content


def test_acknowledge(client_for, findings, users):
    target = findings["warning"]
    response = client_for("alice").post(reverse("finding-ack", args=[target.pk]),
                                        {"next": "/findings/?kind=low_utilization"})
    assert response.status_code == 302
    assert response["Location"] == "/findings/?kind=low_utilization"
    target.refresh_from_db()
    assert target.acknowledged_by == users["alice"] and target.acknowledged_at is not None
    first = target.acknowledged_at

    # Twice: the first acknowledgement stands. Staff may acknowledge anyone's.
    client_for("staff").post(reverse("finding-ack", args=[target.pk]))
    target.refresh_from_db()
    assert (target.acknowledged_by, target.acknowledged_at) == (users["alice"], first)

    listed = client_for("alice").get(reverse("findings"), {"acknowledged": "true"})
    assert titles(listed) == ["12 % busy"]
    assert b"Acknowledged by alice" not in listed.content  # the list says it shorter
    assert "✓ alice" in listed.content.decode()


def test_acknowledge_is_post_only_scoped_and_redirects_safely(client_for, findings):
    bobs = findings["bobs"]
    alice = client_for("alice")
    assert alice.get(reverse("finding-ack", args=[bobs.pk])).status_code == 405
    assert alice.post(reverse("finding-ack", args=[bobs.pk])).status_code == 404
    assert not Finding.objects.get(pk=bobs.pk).acknowledged_at
    away = client_for("bob").post(reverse("finding-ack", args=[bobs.pk]),
                                  {"next": "https://evil.example/"})
    assert away["Location"] == reverse("job-detail", args=[bobs.job_id])


def test_acknowledge_needs_a_csrf_token(users, findings):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["alice"])
    response = client.post(reverse("finding-ack", args=[findings["warning"].pk]))
    assert response.status_code == 403


def test_query_count_is_pinned(client_for, django_assert_num_queries):
    n = f.node("gpu-a001", gpus=1)
    for _ in range(80):
        f.finding(f.job("alice", gpus=n.gpus.all()), node=n)
    client = client_for("staff")
    with django_assert_num_queries(LIST_QUERIES):
        response = client.get(reverse("findings"))
    assert len(response.context["findings"]) == 50


def test_a_whole_run_waste_of_a_partly_measured_job_is_marked_as_partly_estimated(client_for):
    """Alice's job was sampled for the last 30 minutes of its 2 hours: its low-utilization
    finding's waste (the job's since it started) is marked "≈" with how much was measured.
    A straggler's lost GPU-hours are its window's own, measured: never marked. Bob's job,
    measured throughout, is not marked either."""
    n = f.node("gpu-a001", gpus=2)
    late = f.job("alice", gpus=n.gpus.all(), efficiency={"allocated": 4, "used": 1})
    late.efficiency.measured_from = late.efficiency.window_end - dt.timedelta(minutes=30)
    late.efficiency.save()
    whole = f.job("bob", efficiency={"allocated": 4, "used": 1})
    whole.efficiency.measured_from = whole.efficiency.window_start
    whole.efficiency.save()
    f.finding(late, kind="low_utilization", title="Alice low", wasted=3.0)
    f.finding(late, kind="straggler", title="Alice straggler", wasted=0.4)
    f.finding(whole, kind="low_utilization", title="Bob low", wasted=3.0)
    html = client_for("staff").get(reverse("findings")).content.decode()
    rows = {re.search(r"(Alice|Bob) \w+", r).group(0): r
            for r in html.split("<tr")[2:]}
    assert 'title="Measured for 25 % of its run' in rows["Alice low"]
    assert "partly-measured" not in rows["Alice straggler"]
    assert "partly-measured" not in rows["Bob low"]


def test_the_list_reads_no_job_accumulators(client_for, findings):
    """The "≈" needs each job's efficiency window only: its per-GPU figures and detector
    accumulators (kilobytes a job) are read by neither the page nor the CSV."""
    client = client_for("staff")
    for params in ({}, {"format": "csv"}):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse("findings"), params)
            assert response.status_code == 200
            if params:  # the CSV streams: its queries run as it is read
                b"".join(response.streaming_content)
        sql = " ".join(q["sql"] for q in queries.captured_queries)
        assert "findings_jobefficiency" in sql
        assert '"findings_jobefficiency"."accum"' not in sql
        assert '"findings_jobefficiency"."per_gpu"' not in sql


def test_no_open_findings(client_for):
    response = client_for("alice").get(reverse("findings"))
    assert b"No open findings" in response.content
