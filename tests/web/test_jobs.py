"""The jobs list: scoping, search, filters, sorting by efficiency or waste, pages."""

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.jobs.models import Job
from tests import rows as f

pytestmark = pytest.mark.django_db

# session + user, then: count, the page of jobs (efficiency, GPU count), their open findings.
# session + user, the viewer's per-cluster scheduler names (jobs/visibility.py), the
# navigation's cluster list (web/cluster_choice.py), then the page's three.
LIST_QUERIES = 2 + 1 + 1 + 3


def listed(response) -> list[str]:
    return [j.external_id for j in response.context["jobs"]]


@pytest.fixture
def jobs(db):
    now = timezone.now()
    n = f.node("gpu-a001", gpus=8)
    gpus = list(n.gpus.all())
    made = {
        "wasteful": f.job("alice", gpus=gpus[:4], external_id="100", name="llama-ft",
                          efficiency={"allocated": 10, "used": 1},
                          started_at=now - dt.timedelta(hours=3)),
        "good": f.job("alice", gpus=gpus[4:6], external_id="101", name="resnet",
                      account="vision", efficiency={"allocated": 10, "used": 9},
                      started_at=now - dt.timedelta(hours=2)),
        "old": f.job("alice", external_id="102", name="old-eval", state="ended",
                     started_at=now - dt.timedelta(days=3), ended_at=now - dt.timedelta(days=2)),
        "bobs": f.job("bob", gpus=gpus[6:], external_id="200", name="bob-train",
                      efficiency={"allocated": 4, "used": 2},
                      started_at=now - dt.timedelta(hours=1)),
    }
    f.finding(made["wasteful"], kind="low_utilization", severity="critical")
    f.finding(made["wasteful"], kind="idle_gpu", state="closed")
    return made


def get(client, **params):
    return client.get(reverse("jobs"), params)


def test_researchers_see_their_own_jobs_staff_see_all(client_for, jobs):
    assert listed(get(client_for("alice"))) == ["101", "100", "102"]  # newest first
    assert listed(get(client_for("bob"))) == ["200"]
    assert listed(get(client_for("staff"))) == ["200", "101", "100", "102"]


def test_rows_show_efficiency_waste_and_open_findings(client_for, jobs):
    response = get(client_for("alice"))
    row = {j.external_id: j for j in response.context["jobs"]}["100"]
    assert (row.gpu_count, row.allocated_gpu_hours, row.wasted_gpu_hours) == (4, 10, 9)
    assert row.efficiency_ratio == pytest.approx(0.1)
    assert [x.kind for x in row.open_findings] == ["low_utilization"]  # closed one left out
    html = response.content.decode()
    assert "Low GPU utilization" in html and "10 %" in html
    assert "not computed yet" in html  # job 102 has no efficiency row


def test_search_and_filters(client_for, jobs):
    alice = client_for("alice")
    assert listed(get(alice, q="llama")) == ["100"]
    assert listed(get(alice, q="101")) == ["101"]
    assert listed(get(alice, account="vision")) == ["101"]
    assert listed(get(alice, state="ended")) == ["102"]
    assert listed(get(alice, finding="idle_gpu")) == ["100"]
    assert listed(get(alice, user="bob")) == []  # filters narrow, never widen, the scope
    since = (timezone.localtime() - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert listed(get(alice, active_from=since)) == ["101", "100"]


def test_sorting_by_waste_and_efficiency(client_for, jobs):
    staff = client_for("staff")
    assert listed(get(staff, ordering="-wasted")) == ["100", "200", "101", "102"]
    assert listed(get(staff, ordering="efficiency")) == ["100", "200", "101", "102"]
    assert listed(get(staff, ordering="-efficiency")) == ["101", "200", "100", "102"]


def test_bad_filter_input_is_a_form_error_not_a_500(client_for, jobs):
    response = get(client_for("alice"), active_from="next tuesday", state="paused")
    assert response.status_code == 400
    html = response.content.decode()
    assert "Fix the filters above" in html
    assert "Enter a valid date/time." in html
    assert "Select a valid choice. paused is not one of the available choices." in html


def test_pages_of_fifty_and_a_pinned_query_count(client_for, django_assert_num_queries):
    n = f.node("gpu-a001", gpus=2)
    for i in range(120):
        j = f.job("alice", gpus=n.gpus.all(), external_id=str(3000 + i),
                  efficiency={"allocated": 2, "used": 1})
        f.finding(j)
    client = client_for("alice")
    with django_assert_num_queries(LIST_QUERIES):
        first = get(client)
    with django_assert_num_queries(LIST_QUERIES):
        last = get(client, page=3)
    assert len(first.context["jobs"]) == 50 and len(last.context["jobs"]) == 20
    assert b"Page 1 of 3" in first.content
    assert get(client, page="zzz").status_code == 200  # a bad page number shows page 1


def test_empty_states(client_for, jobs):
    assert b"No jobs match these filters" in get(client_for("alice"), q="nothing").content
    Job.objects.all().delete()
    assert b"No jobs yet" in get(client_for("staff")).content


def test_the_column_headers_sort_and_a_second_click_reverses(client_for, jobs):
    """Tables could not be sorted by their headers (issue 20): each figure's header is a
    link that sorts by it, largest first, and the current one reverses."""
    import re
    from html import unescape

    staff = client_for("staff")

    def header(response, label):
        m = re.search(r'<a class="sort-link" href="([^"]*)">' + re.escape(label),
                      response.content.decode())
        assert m, label
        return unescape(m.group(1))

    first = get(staff, state="running")
    wasted = staff.get(reverse("jobs") + header(first, "Wasted GPU-h"))
    assert listed(wasted) == ["100", "200", "101"]
    assert 'aria-sort="descending"' in wasted.content.decode()
    assert "state=running" in wasted.request["QUERY_STRING"]  # the filters are kept
    back = staff.get(reverse("jobs") + header(wasted, "Wasted GPU-h"))
    assert listed(back) == ["101", "200", "100"]
    assert 'aria-sort="ascending"' in back.content.decode()
    by_user = staff.get(reverse("jobs") + header(first, "User"))
    assert [j.user for j in by_user.context["jobs"]] == ["alice", "alice", "bob"]
    # The form's "Sort by" shows the header's sort, so Apply keeps it.
    assert '<option value="wasted" selected>' in back.content.decode()


def test_a_partly_measured_jobs_waste_is_marked_as_partly_estimated(client_for, jobs):
    """Job 100 was sampled only for the last half hour of its three: its waste is marked
    "≈", with how much of its run was measured; job 101, measured throughout, is not. The
    overview's most-wasteful list marks it the same way."""
    eff = jobs["wasteful"].efficiency
    eff.measured_from = eff.window_end - dt.timedelta(minutes=30)
    eff.save()
    good = jobs["good"].efficiency
    good.measured_from = good.window_start
    good.save()
    html = client_for("staff").get(reverse("jobs")).content.decode()
    rows = {m.group(1): m.group(0) for m in re.finditer(
        r'<tr[^>]*>\s*<td[^>]*>.*?>(\d{3})</a>.*?</tr>', html, re.S)}
    assert 'title="Measured for 17 % of its run' in rows["100"]  # 0.5 h of 3
    assert "partly-measured" not in rows["101"]
    overview = client_for("staff").get(reverse("home")).content.decode()
    assert 'class="partly-measured" title="Measured for 17 % of its run' in overview
