"""The overview (``home``): KPIs, the node x GPU heatmap, open findings and waste."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.jobs.models import Job
from clusterui.web.waste import start_of_today, wasted_gpu_hours_since
from tests import rows as f
from tests.web.plotly_data import matrix

pytestmark = pytest.mark.django_db

# session + user, then: GPUs with their latest sample and its job, waste since midnight,
# findings by severity, the top findings, the most wasteful jobs and users.
OVERVIEW_QUERIES = 2 + 7 + 1  # + the GPU health states (issue 19), the navigation's
# cluster list (web/cluster_choice.py)


def heatmap(response) -> dict:
    return response.context["charts"]["heatmap"]


def test_kpis_count_allocated_busy_and_idle_gpus(client_for):
    busy = f.node("gpu-a001", gpus=4, util=90.0)
    idle = f.node("gpu-a002", gpus=4, util=0.0)
    f.job("alice", gpus=busy.gpus.all())
    f.job("alice", gpus=list(idle.gpus.all())[:2])

    response = client_for("staff").get(reverse("home"))

    assert response.status_code == 200
    snap = response.context["snap"]
    assert (snap.gpus, snap.nodes, snap.allocated, snap.busy) == (8, 2, 6, 4)
    assert snap.idle_allocated == 2  # allocated, below the busy threshold
    assert snap.mean_util == pytest.approx(45.0)
    assert b"allocated but idle now" in response.content


def test_silent_nodes_show_no_current_sample(client_for, settings):
    settings.NODE_SILENT_AFTER_S = 120
    f.node("gpu-a001", gpus=2, util=80.0)
    f.node("gpu-a002", gpus=2, util=80.0, last_seen=timezone.now() - dt.timedelta(minutes=10))

    response = client_for("staff").get(reverse("home"))

    snap = response.context["snap"]
    assert snap.silent_nodes == 1
    assert [c.util for c in snap.cells] == [80.0, 80.0, None, None]
    assert b"1 silent" in response.content


def test_heatmap_cells_open_their_node(client_for):
    a = f.node("gpu-a001", gpus=2)
    b = f.node("gpu-a002", gpus=2)

    fig = heatmap(client_for("alice").get(reverse("home")))

    util = fig["data"][1]
    assert matrix(util["customdata"]) == [[a.pk, b.pk], [a.pk, b.pk]]
    assert util["hovertext"][1][1] == "gpu-a002 GPU 1, free"
    assert util["colorscale"][0][1] == "#440154"  # viridis: colour-blind safe
    assert fig["layout"]["xaxis"]["ticktext"] == ["gpu-a001", "gpu-a002"]


def test_a_researcher_sees_whose_job_only_for_their_own(client_for):
    n = f.node("gpu-a001", gpus=2)
    gpus = list(n.gpus.all())
    mine = f.job("alice", gpus=gpus[:1], external_id="777001")
    f.job("bob", gpus=gpus[1:], external_id="777002")

    cells = client_for("alice").get(reverse("home")).context["snap"].cells

    assert [(c.job_id, c.job_label, c.allocated) for c in cells] == [
        (mine.pk, "777001", True), (None, "", True)]


def test_query_count_does_not_grow_with_the_cluster(client_for, django_assert_num_queries):
    client = client_for("staff")
    for i in range(3):
        n = f.node(f"gpu-a{i:03d}", gpus=8)
        j = f.job("alice", gpus=n.gpus.all(), efficiency={"allocated": 8, "used": 2})
        f.finding(j)
    with django_assert_num_queries(OVERVIEW_QUERIES):
        client.get(reverse("home"))
    for i in range(3, 40):
        n = f.node(f"gpu-a{i:03d}", gpus=8)
        j = f.job("bob", gpus=n.gpus.all(), efficiency={"allocated": 8, "used": 6})
        f.finding(j, severity="critical")
    with django_assert_num_queries(OVERVIEW_QUERIES):
        response = client.get(reverse("home"))
    assert response.context["snap"].gpus == 320


def test_a_large_cluster_wraps_into_bands(client_for):
    for i in range(120):
        f.node(f"gpu-b{i:03d}", gpus=2, latest=False)

    fig = heatmap(client_for("staff").get(reverse("home")))

    rows = matrix(fig["data"][1]["z"])
    assert len(rows[0]) == 100  # nodes per band
    assert len(rows) == 2 + 1 + 2  # two bands of 2 GPUs and a blank row between
    assert fig["layout"]["yaxis"]["ticktext"][1].startswith("gpu-b100")


def test_open_findings_by_severity_are_scoped(client_for):
    n = f.node("gpu-a001", gpus=2)
    mine = f.job("alice", gpus=n.gpus.all())
    theirs = f.job("bob")
    f.finding(mine, severity="critical", title="Alice's GPUs idle")
    f.finding(theirs, severity="warning", title="Bob's GPUs idle")
    f.finding(theirs, kind="comm_bound", severity="warning", state="closed")

    alice = client_for("alice").get(reverse("home"))
    staff = client_for("staff").get(reverse("home"))

    assert dict((s.value, n) for s, n in alice.context["severities"]) == {
        "critical": 1, "warning": 0, "info": 0}
    assert b"Alice&#x27;s GPUs idle" in alice.content
    assert b"Bob" not in alice.content
    assert dict((s.value, n) for s, n in staff.context["severities"]) == {
        "critical": 1, "warning": 1, "info": 0}


def test_most_wasteful_jobs_and_users_in_the_range(client_for):
    now = timezone.now()
    f.job("alice", efficiency={"allocated": 10, "used": 2}, external_id="1")
    f.job("bob", efficiency={"allocated": 10, "used": 9}, external_id="2")
    f.job("bob", efficiency={"allocated": 5, "used": 0}, external_id="3",
          started_at=now - dt.timedelta(days=3), ended_at=now - dt.timedelta(days=2),
          state="ended")

    ctx = client_for("staff").get(reverse("home")).context

    assert [j.external_id for j in ctx["wasteful_jobs"]] == ["1", "2"]  # job 3 ended 2 days ago
    assert [(r["name"], r["wasted_gpu_hours"]) for r in ctx["wasteful_users"]] == [
        ("alice", 8.0), ("bob", 1.0)]
    week = client_for("staff").get(reverse("home"), {"range": "7d"}).context
    assert [j.external_id for j in week["wasteful_jobs"]] == ["1", "3", "2"]


def test_the_wasteful_users_say_when_their_waste_was_partly_measured(client_for):
    """Staff read the users from the hourly sums: alice's one job was measured for its last
    2 hours of 10, so 20 % of her GPU-hours were, and her row is marked; bob's job was
    measured from its start, and his is not."""
    f.node("gpu-a001", gpus=1)  # (an empty cluster's overview says how to start instead)
    now = timezone.now()
    late = f.job("alice", efficiency={"allocated": 10, "used": 2},
                 started_at=now - dt.timedelta(hours=10))
    late.efficiency.measured_from = now - dt.timedelta(hours=2)
    late.efficiency.save()
    whole = f.job("bob", efficiency={"allocated": 10, "used": 9})
    whole.efficiency.measured_from = whole.efficiency.window_start
    whole.efficiency.save()
    response = client_for("staff").get(reverse("home"))
    assert {r["name"]: round(r["measured_pct"]) for r in response.context["wasteful_users"]} \
        == {"alice": 20, "bob": 100}
    page = response.content.decode()
    rows_html = {row.split("</a>")[0].rsplit(">", 1)[-1]: row for row in
                 page.split("<tr><td>")[1:]}
    assert 'title="20 % of these GPU-hours were measured' in rows_html["alice"]
    assert "partly-measured" not in rows_html["bob"]


def test_wasted_today_counts_the_part_of_each_job_since_midnight(users):
    now = timezone.now()
    since = now - dt.timedelta(hours=5)
    # 10 GPU-hours wasted over 10 h, half of them after ``since``.
    f.job("alice", efficiency={"allocated": 20, "used": 10}, started_at=now - dt.timedelta(
        hours=10))
    # Wasted entirely before ``since``: not counted.
    f.job("alice", efficiency={"allocated": 4, "used": 0}, state="ended",
          started_at=now - dt.timedelta(hours=9), ended_at=now - dt.timedelta(hours=6))
    # Someone else's job: not the viewer's waste.
    f.job("bob", efficiency={"allocated": 50, "used": 0})

    jobs = Job.objects.visible_to(users["alice"])

    assert wasted_gpu_hours_since(jobs, since, now).hours == pytest.approx(5.0)


def test_wasted_today_says_how_much_of_it_was_measured(users):
    """A job sampled only for its last 2 h of 10 (ClusterUI came after it started): of its
    5 GPU-hours wasted in the last 5 h, 2 are measured; a job measured throughout adds 3
    measured of 3; one measured since before the period, 5 of 5."""
    now = timezone.now()
    since = now - dt.timedelta(hours=5)
    late = f.job("alice", efficiency={"allocated": 20, "used": 10},
                 started_at=now - dt.timedelta(hours=10))
    late.efficiency.measured_from = now - dt.timedelta(hours=2)
    late.efficiency.save()
    whole = f.job("alice", efficiency={"allocated": 4, "used": 1}, state="ended",
                  started_at=now - dt.timedelta(hours=3), ended_at=now - dt.timedelta(hours=1))
    whole.efficiency.measured_from = whole.efficiency.window_start
    whole.efficiency.save()
    # Measured from before ``since``: all of today's share is measured.
    early = f.job("alice", efficiency={"allocated": 8, "used": 0},
                  started_at=now - dt.timedelta(hours=8))
    early.efficiency.measured_from = now - dt.timedelta(hours=6)
    early.efficiency.save()

    waste = wasted_gpu_hours_since(Job.objects.visible_to(users["alice"]), since, now)
    assert waste.hours == pytest.approx(5.0 + 3.0 + 5.0)
    assert waste.measured_hours == pytest.approx(2.0 + 3.0 + 5.0)



def test_the_wasted_today_kpi_says_how_much_was_measured(client_for):
    """A job running since before midnight, measured only for the second half of today:
    half of today's waste is measured, whatever the time of day the test runs at."""
    f.node("gpu-a001", gpus=1)  # (an empty cluster's overview says how to start instead)
    now = timezone.now()
    midnight = start_of_today(now)
    job = f.job("alice", efficiency={"allocated": 20, "used": 10},
                started_at=midnight - dt.timedelta(hours=4))
    job.efficiency.window_end = now
    job.efficiency.measured_from = midnight + (now - midnight) / 2
    job.efficiency.save()
    html = client_for("alice").get(reverse("home")).content.decode()
    assert '<span class="warn-text" id="waste-measured"' in html
    assert "· 50 % measured</span>" in html
    job.efficiency.measured_from = job.efficiency.window_start
    job.efficiency.save()
    assert "% measured</span>" not in client_for("alice").get(reverse("home")).content.decode()


def test_empty_cluster_says_how_to_start(client_for):
    response = client_for("staff").get(reverse("home"))
    assert response.status_code == 200
    assert b"No nodes have reported yet" in response.content


@pytest.mark.parametrize("query, message", [
    ({"range": "3w"}, b"range must be one of 1h, 6h, 24h, 7d"),
    ({"metric": "power"}, b"metric must be one of util, sm (got &#x27;power&#x27;)"),
])
def test_a_bad_parameter_is_a_visible_error(client_for, query, message):
    f.node("gpu-a001", gpus=1)
    response = client_for("staff").get(reverse("home"), query)
    assert response.status_code == 400
    assert message in response.content


def test_plotly_comes_from_our_own_static_files(client_for):
    f.node("gpu-a001", gpus=1)
    html = client_for("staff").get(reverse("home")).content.decode()
    assert '/static/plotly/plotly.min.js' in html
    assert "cdn" not in html.lower()


def test_requires_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_wasted_today_counts_a_window_inside_the_day_whole(users):
    now = timezone.now()
    since = now - dt.timedelta(hours=5)
    f.job("alice", efficiency={"allocated": 4, "used": 1}, state="ended",
          started_at=now - dt.timedelta(hours=3), ended_at=now - dt.timedelta(hours=1))
    # A window of no length (one sample) inside the day counts whole too, as before.
    j = f.job("alice", efficiency={"allocated": 2, "used": 0}, state="ended",
              started_at=now - dt.timedelta(hours=2), ended_at=now - dt.timedelta(hours=2))
    assert j.efficiency.window_start == j.efficiency.window_end
    # Straddling ``now`` (a window ending after it): its share before now.
    f.job("alice", efficiency={"allocated": 6, "used": 0}, started_at=now - dt.timedelta(
        hours=1), ended_at=now + dt.timedelta(hours=1), state="ended")

    jobs = Job.objects.visible_to(users["alice"])

    assert wasted_gpu_hours_since(jobs, since, now).hours == pytest.approx(3.0 + 2.0 + 3.0)


def test_the_overview_says_whose_figures_each_part_shows(client_for):
    """A researcher's overview mixed cluster-wide KPIs with her own waste, and the waste
    card's whole-job figures looked like the range's: each part now says which it is."""
    from tests import rows as f

    n = f.node("gpu-a001", gpus=2)
    f.job("alice", gpus=list(n.gpus.all()), efficiency={"allocated": 2.0, "used": 0.5})
    mine = client_for("alice").get("/?range=1h").content.decode()
    assert "Whole cluster, now · the GPU-hours wasted today are your jobs'" in mine
    assert "GPU-hours wasted today by your jobs" in mine
    assert "Your jobs active in the range (last 1 h), each with its whole-job GPU-hours" in mine
    staff = client_for("staff").get("/?range=1h").content.decode()
    assert "Whole cluster, now</p>" in staff and "by your jobs" not in staff
    assert "All jobs active in the range (last 1 h)" in staff


def test_the_heatmap_can_show_sm_activity_where_utilization_misleads(client_for):
    """A GPU busy with copies alone reads 100 % utilization with no SM busy (as a real H200
    did: tests/data/real-h200/copy10.json); coloured by SM activity it reads 0. A GPU
    without GPM has no SM activity to show, and says so."""
    copying = f.node("gpu-a001", gpus=1, latest_values=lambda i: {
        "util_pct": 100.0, "sm_active_pct": 0.0})
    f.job("alice", gpus=copying.gpus.all())
    f.node("gpu-b001", gpus=1, model="NVIDIA A100-PCIE-40GB", latest_values=lambda i: {
        "util_pct": 70.0, "sm_active_pct": None})
    staff = client_for("staff")

    by_util = staff.get(reverse("home"))
    assert matrix(heatmap(by_util)["data"][1]["z"]) == [[100.0, 70.0]]
    assert b"GPU utilization (NVML) now" in by_util.content

    by_sm = staff.get(reverse("home"), {"metric": "sm"})
    assert by_sm.status_code == 200
    fig = heatmap(by_sm)
    z, missing = matrix(fig["data"][1]["z"]), matrix(fig["data"][0]["z"])
    assert z[0][0] == 0.0 and missing[0][1] == 1  # the A100: grey, not a made-up 0
    assert fig["data"][0]["hovertext"][0][1] == "gpu-b001 GPU 0: no SM activity (no GPM on " \
                                                "this GPU)"
    assert b"SM activity (GPM) now" in by_sm.content
    assert b'href="/nodes/history/?metric=sm"' in by_sm.content


def test_jobs_without_a_user_are_one_row_that_links_nowhere(client_for):
    """A pod has no user: its waste is the "(not reported)" row, which linked to
    /jobs/?user=(unknown), a list that finds nothing."""
    f.node("gpu-a001", gpus=1)
    f.job("alice", efficiency={"allocated": 10, "used": 2})
    pod = f.job("", efficiency={"allocated": 10, "used": 1})
    Job.objects.filter(pk=pod.pk).update(scheduler="kubernetes", namespace="vision")
    response = client_for("staff").get(reverse("home"))
    assert [(r["name"], r["wasted_gpu_hours"]) for r in response.context["wasteful_users"]] \
        == [("(not reported)", 9.0), ("alice", 8.0)]
    page = response.content.decode()
    assert "?user=alice&amp;ordering=-wasted" in page
    assert "(not reported)</span>" in page and "?user=%28" not in page and "?user=&" not in page


@pytest.mark.django_db(transaction=True)
def test_staff_see_the_nodes_whose_fabric_links_the_detectors_flagged(client_for, settings):
    """Ports reported by collectors (through the real ingest) and judged by the detector pass:
    the overview's fabric tile counts the nodes with an open fabric-link finding, says how
    many have a port down, and leads to those findings and the fabric page; a researcher,
    who sees no node findings, gets no such tile."""
    import time

    from clusterui.findings.runner import run_pass
    from clusterui.ingest.tasks import ingest_envelope
    from tests.fabric_factories import fabric_batch, port

    settings.DETECTOR_FABRIC_ERRORS = 50
    start = time.time() - 300
    down = [[port(), port()], [port(), port()], [port(), port(link_state=1, phys_state=2)]]
    erroring = [[port()], [port(symbol_error=40)], [port(symbol_error=30)]]
    healthy = [[port()], [port()], [port()]]
    for name, ports in (("gpu-k001", down), ("gpu-k002", erroring), ("gpu-k003", healthy)):
        ingest_envelope(fabric_batch(name, ports=ports, start=start, job=None, gpus=1))
    run_pass()

    page = client_for("staff").get(reverse("home"))
    text = " ".join(page.content.decode().split())
    assert page.context["fabric"] == {"nodes": 2, "down": 1}
    assert ('<div class="kpi-value">2</div><div class="kpi-label" title="Nodes with an open '
            'fabric-link finding') in text
    assert "nodes with a fabric link down, degraded or erroring · " in text
    assert '<span class="warn-text">1 with a port down</span>' in text
    assert f'href="{reverse("findings")}?kind=fabric_link"' in text
    assert f'href="{reverse("fabric")}"' in text
    findings = client_for("staff").get(reverse("findings"), {"kind": "fabric_link"})
    assert {f.node.name for f in findings.context["findings"]} == {"gpu-k001", "gpu-k002"}

    researcher = client_for("alice").get(reverse("home")).content.decode()
    assert 'id="kpi-fabric"' not in researcher
