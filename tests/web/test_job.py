"""The job page: header, efficiency, findings with their explanation, and the charts."""

import datetime as dt
import html

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.findings.models import Finding
from clusterui.telemetry.models import GpuEvent
from clusterui.telemetry.series import MAX_POINTS
from tests import rows as f
from tests.web.plotly_data import matrix, present, values

pytestmark = pytest.mark.django_db

# session + user, then: the job (with cluster and efficiency), its allocations, its nodes'
# NICs, GPU series, NIC series, host series, findings, GPU events.
JOB_QUERIES = 2 + 1 + 8 + 2 + 1  # + the activity band's lowest and highest samples
# (the first 1: a non-staff viewer's per-cluster scheduler names, jobs/visibility.py; the
# last: the navigation's cluster list, web/cluster_choice.py)


@pytest.fixture
def running_job(db):
    """alice's 4-GPU job, 30 min old, with samples: GPU 3 idle while the others work."""
    now = timezone.now()
    n = f.node("gpu-a001", gpus=4, nics=2)
    gpus = list(n.gpus.order_by("index"))
    started = now - dt.timedelta(minutes=30)
    j = f.job("alice", gpus=gpus, started_at=started, external_id="812345", name="llama-ft",
              efficiency={"allocated": 2.0, "used": 1.4})
    f.gpu_samples(gpus, started, now, job=j, util=lambda g, k: 0.0 if g.index == 3 else 90.0,
                  nvlink=300e9)
    f.nic_samples(list(n.nics.all()), started, now, rate=40e9)
    return j


def page(client, job, **params):
    return client.get(reverse("job-detail", args=[job.pk]), params)


def test_header_and_efficiency(client_for, running_job):
    response = page(client_for("alice"), running_job)

    assert response.status_code == 200
    html = response.content.decode()
    for text in ("Job 812345", "llama-ft", "alice", "nlp", "gpu-a001", "running",
                 "GPU-hours allocated", "2.00", "1.40", "0.60", "70 %", "SM activity (GPM)",
                 "59.8 GiB of 79.6 GiB", "11.5 cores used of 32 allocated", "2.00"):
        assert text in html, text
    assert 'href="/nodes/' in html


def test_one_utilization_trace_per_gpu_and_the_idle_one_shows(client_for, running_job):
    charts = page(client_for("alice"), running_job).context["charts"]

    util = charts["util"]["data"]
    assert [t["name"] for t in util] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    assert set(present(util[3]["y"])) == {0.0}
    assert max(present(util[0]["y"])) == pytest.approx(90.0)


def test_network_and_gpu_activity_share_one_time_axis(client_for, running_job):
    activity = page(client_for("alice"), running_job).context["charts"]["activity"]

    traces = {t["name"]: t for t in activity["data"]}
    gpu = traces["GPU utilization (NVML), mean over GPUs"]
    nic = traces["NIC traffic, % of link capacity"]
    nvlink = traces["NVLink traffic, % of capacity"]
    axis = (gpu["x0"], gpu["dx"])
    assert (nic["x0"], nic["dx"]) == (nvlink["x0"], nvlink["dx"]) == axis
    assert len(values(gpu["y"])) == len(values(nic["y"])) == len(values(nvlink["y"]))
    # Two 50 GB/s links, each receiving 40 GB/s: 80 % of capacity.
    assert max(present(nic["y"])) == pytest.approx(80.0)
    assert max(present(nvlink["y"])) == pytest.approx(300 / 450 * 100, 0.01)
    assert max(present(gpu["y"])) == pytest.approx(67.5)  # (3 x 90 + 0) / 4


def test_memory_and_power_charts_show_capacity_lines(client_for, running_job):
    charts = page(client_for("alice"), running_job).context["charts"]

    memory_lines = [s["y0"] for s in charts["memory"]["layout"]["shapes"]]
    power_lines = [s["y0"] for s in charts["power"]["layout"]["shapes"]]
    assert memory_lines == [pytest.approx(81559 / 1024)]
    assert power_lines == [700.0]


def test_findings_explain_themselves(client_for, running_job):
    f.finding(running_job, kind="idle_gpu", severity="critical",
              title="1 of 4 allocated GPUs idle",
              evidence={"idle_gpus": [{"node": "gpu-a001", "index": 3, "util_mean_pct": 0.0}],
                        "window_min": 30.0, "idle_gpu_hours_wasted": 0.5})
    f.finding(running_job, kind="throttling", state="closed", title="Throttled earlier")

    response = page(client_for("alice"), running_job)

    html = response.content.decode()
    assert "1 of 4 allocated GPUs idle" in html
    assert "Over the last 30 min the job" in html  # the explanation
    assert "What to do:" in html and "Request fewer GPUs." in html
    assert "gpu-a001 · GPU 3: 0.0 %" in html  # evidence, formatted
    assert "0.50 GPU-h" in html
    assert 'href="#chart-util"' in html  # where to see it
    assert "sev-critical" in html and "Critical" in html  # colour and text
    assert "1 open finding" in html
    assert [x.state for x in response.context["findings"]] == ["open", "closed"]


def test_acknowledge_button_posts_with_csrf(client_for, running_job):
    finding = f.finding(running_job)
    html = page(client_for("alice"), running_job).content.decode()
    assert f'action="/findings/{finding.pk}/ack/"' in html
    assert "csrfmiddlewaretoken" in html


def test_another_users_job_is_not_found(client_for, running_job):
    assert page(client_for("bob"), running_job).status_code == 404
    assert page(client_for("staff"), running_job).status_code == 200


def test_a_week_long_job_is_read_at_a_coarser_step(client_for):
    now = timezone.now()
    n = f.node("gpu-a001", gpus=2)
    gpus = list(n.gpus.all())
    j = f.job("alice", gpus=gpus, started_at=now - dt.timedelta(days=7))
    f.gpu_samples(gpus, now - dt.timedelta(days=7), now, every_s=300, job=j)

    response = page(client_for("alice"), j)

    assert response.context["view"].step == 1800
    for trace in response.context["charts"]["util"]["data"]:
        assert len(values(trace["y"])) <= MAX_POINTS


def test_a_preset_is_the_last_part_of_the_job(client_for, running_job):
    view = page(client_for("alice"), running_job, range="1h").context["view"]
    # The job is 30 min old: the last hour of it starts (just before) it started.
    assert view.range.start >= running_job.started_at - dt.timedelta(seconds=31)
    assert view.range.live and not view.whole


def test_query_count_is_pinned_whatever_the_job_size(client_for, django_assert_num_queries):
    now = timezone.now()
    nodes = [f.node(f"gpu-a{i:03d}", gpus=8, nics=4) for i in range(4)]
    gpus = [g for n in nodes for g in n.gpus.all()]
    j = f.job("alice", gpus=gpus, efficiency={"allocated": 32, "used": 10})
    f.gpu_samples(gpus, now - dt.timedelta(minutes=20), now, job=j)
    for kind in ("low_utilization", "idle_gpu", "comm_bound"):
        f.finding(j, kind=kind)
    GpuEvent.objects.create(gpu=gpus[5], ts=now - dt.timedelta(minutes=5), kind="xid", code=79,
                            message="GPU has fallen off the bus")
    client = client_for("alice")
    with django_assert_num_queries(JOB_QUERIES):
        response = page(client, j)
    assert len(response.context["charts"]["util"]["data"]) == 32
    assert b"GPU has fallen off the bus" in response.content


def test_a_job_without_samples_says_so(client_for):
    n = f.node("gpu-a001", gpus=1)
    j = f.job("alice", gpus=n.gpus.all(), started_at=timezone.now() - dt.timedelta(minutes=2))

    response = page(client_for("alice"), j)

    assert response.status_code == 200
    assert b"No samples in this range" in response.content
    assert b"Not computed yet" in response.content
    assert b"Not judged yet" in response.content and b"Nothing found" not in response.content


def test_a_bad_custom_range_is_a_visible_error(client_for, running_job):
    response = page(client_for("alice"), running_job, **{"from": "yesterday-ish"})
    assert response.status_code == 400
    assert b"from is not a date and time" in response.content
    assert response.context["view"].whole  # the page still shows the whole job


def test_ended_jobs_are_not_live(client_for):
    now = timezone.now()
    n = f.node("gpu-a001", gpus=1)
    j = f.job("alice", gpus=n.gpus.all(), state="ended", started_at=now - dt.timedelta(hours=3),
              ended_at=now - dt.timedelta(hours=1))

    response = page(client_for("alice"), j)

    assert response.context["refresh_s"] is None
    assert b"data-refresh" not in response.content
    assert response.context["view"].range.end <= j.ended_at + dt.timedelta(seconds=30)


def test_finding_rows_stay_scoped(client_for, running_job, users):
    # A node-level finding (no job) on the same node is for staff, not on alice's job page.
    Finding.objects.create(
        kind="gpu_errors", severity="critical", node=running_job.allocations.first().gpu.node,
        window_start=timezone.now(), window_end=timezone.now(), first_seen=timezone.now(),
        last_seen=timezone.now(), title="Xid 79 on a free GPU", explanation="x", suggestion="y")
    html = page(client_for("alice"), running_job).content.decode()
    assert "Xid 79 on a free GPU" not in html


def test_the_whole_job_starts_where_monitoring_began(client_for):
    now = timezone.now()
    n = f.node("gpu-a001", gpus=1)
    # Scheduled 5 h ago, first seen by a collector 1 h ago; the detectors' first sample
    # (a spool replayed late) is 2 h old.
    j = f.job("alice", gpus=n.gpus.all(), started_at=now - dt.timedelta(hours=5),
              efficiency={"allocated": 2, "used": 1})
    j.allocations.update(first_seen=now - dt.timedelta(hours=1))
    j.efficiency.window_start = now - dt.timedelta(hours=2)
    j.efficiency.save()

    view = page(client_for("alice"), j).context["view"]

    assert view.whole
    assert abs((view.range.start - (now - dt.timedelta(hours=2))).total_seconds()) <= 31


def _unjudged(j, efficiency_judged_at=None):
    from clusterui.findings.models import JobEfficiency

    JobEfficiency.objects.filter(job=j).update(judged_at=efficiency_judged_at)


def test_a_job_inside_its_grace_period_says_when_it_will_be_judged(client_for):
    n = f.node("gpu-a001", gpus=1)
    started = timezone.now() - dt.timedelta(minutes=3)
    j = f.job("alice", gpus=n.gpus.all(), started_at=started,
              efficiency={"allocated": 0.05, "used": 0.05})
    _unjudged(j)
    body = html.unescape(page(client_for("alice"), j).content.decode())
    assert "Nothing found" not in body
    ready = (started + dt.timedelta(minutes=15)).astimezone(dt.UTC)
    assert (f"Not judged yet: the detectors leave a job's first 10 minutes alone (loading, "
            f"warming up) and then need 5 minutes of its data. They will judge this job from "
            f"about {ready:%H:%M} UTC.") in body


def test_a_job_that_ended_too_early_says_it_was_not_judged(client_for):
    n = f.node("gpu-a001", gpus=1)
    started = timezone.now() - dt.timedelta(hours=1)
    j = f.job("alice", gpus=n.gpus.all(), started_at=started, state="ended",
              ended_at=started + dt.timedelta(minutes=8),
              efficiency={"allocated": 0.13, "used": 0.1})
    _unjudged(j)
    body = html.unescape(page(client_for("alice"), j).content.decode())
    assert "Nothing found" not in body
    assert "Not judged: the job ran 8 minutes, too short to judge" in body


def test_a_judged_job_without_findings_says_nothing_was_found(client_for):
    n = f.node("gpu-a001", gpus=1)
    j = f.job("alice", gpus=n.gpus.all(), efficiency={"allocated": 2.0, "used": 1.8})
    _unjudged(j, timezone.now())
    body = html.unescape(page(client_for("alice"), j).content.decode())
    assert "Nothing found." in body and "Not judged" not in body


def test_a_fake_busy_job_names_both_figures_with_their_source(client_for):
    """A job whose kernels keep NVML at 99 % while its SMs do 6 %: the page called the 6 %
    "Mean GPU utilization" beside an NVML 99 % elsewhere. Each figure says what it is."""
    n = f.node("gpu-a001", gpus=2)
    job = f.job("alice", gpus=list(n.gpus.all()), efficiency={"allocated": 2.0, "used": 0.12})
    eff = job.efficiency
    eff.util_mean_pct = 6.0
    eff.per_gpu = {g.uuid: {"mean": 6.0, "nvml_mean": 99.0, "source": "sm_active"}
                   for g in n.gpus.all()}
    eff.save()
    text = html.unescape(page(client_for("alice"), job).content.decode())
    assert "<dt>Mean SM activity (GPM)</dt><dd>6 %</dd>" in text
    assert "<dt>Mean GPU utilization (NVML)</dt>" in text and ">99 %</dd>" in text
    assert "Mean GPU utilization</dt>" not in text
    assert 'title="Efficiency: GPU-hours used ÷ GPU-hours allocated.' in text


def test_a_four_second_step_pattern_keeps_its_dips_at_whole_job_range(client_for):
    """A training step of 4 s (3 s computing at 90 %, 1 s waiting on the network at 5 %)
    over two hours, read at whole-job range (buckets of several steps): the mean alone
    is a flat 69 %; the band shows every bucket still reaching down to 5 % and up to 90 %."""
    now = timezone.now()
    n = f.node("gpu-a001", gpus=2)
    n.sample_interval_s = 1
    n.save()
    gpus = list(n.gpus.all())
    started = now - dt.timedelta(hours=2)
    j = f.job("alice", gpus=gpus, started_at=started)
    f.gpu_samples(gpus, started, now, every_s=1, job=j,
                  util=lambda g, k: 5.0 if k % 4 == 3 else 90.0)
    activity = page(client_for("alice"), j).context["charts"]["activity"]
    traces = {t["name"]: t for t in activity["data"]}
    mean = present(traces["SM activity (GPM), mean over GPUs"]["y"])
    low = present(traces["SM activity (GPM), lowest to highest sample"]["y"])
    high = present(traces["SM activity (GPM), highest sample"]["y"])
    assert activity["data"][0]["x0"] == traces["SM activity (GPM), mean over GPUs"]["x0"]
    step_s = traces["SM activity (GPM), mean over GPUs"]["dx"] / 1000
    assert step_s >= 3 * 4  # whole-job range: each bucket averages three steps or more
    inner = slice(1, -1)  # whole buckets only
    assert min(mean[inner]) > 0.8 * 60  # the mean hides the dips: never below 48 % ...
    assert low[inner] == pytest.approx([4.0] * len(low[inner]))  # ... the band shows them
    assert high[inner] == pytest.approx([72.0] * len(high[inner]))  # (the SM is 0.8 x NVML)


def test_a_multi_node_job_shows_each_node_over_time_and_the_straggler_stands_out(client_for):
    now = timezone.now()
    nodes = [f.node(f"gpu-b{i:03d}", gpus=2, nics=1) for i in range(3)]
    gpus = [g for n in nodes for g in n.gpus.order_by("index")]
    started = now - dt.timedelta(minutes=20)
    j = f.job("alice", gpus=gpus, started_at=started, efficiency={"allocated": 6, "used": 4})
    slow = nodes[1].id
    f.gpu_samples(gpus, started, now, job=j,
                  util=lambda g, k: 95.0 if g.node_id == slow else 60.0)
    for n in nodes:
        f.nic_samples(list(n.nics.all()), started, now, rate=5e9 if n.id == slow else 20e9)
    f.finding(j, kind="straggler", title="Straggler: node gpu-b001 holds back the job")
    response = page(client_for("alice"), j)
    charts = response.context["charts"]

    busy = charts["nodes_busy"]["data"][0]
    assert busy["y"] == ["gpu-b000", "gpu-b001", "gpu-b002"]
    rows = [present(row) for row in matrix(busy["z"])]
    # SM activity (0.8 x utilization here), the mean of each node's GPUs.
    assert {round(v) for v in rows[0] + rows[2]} == {48}
    assert {round(v) for v in rows[1]} == {76}
    assert "SM activity (GPM)" in busy["hovertemplate"]
    traffic = [present(row) for row in matrix(charts["nodes_traffic"]["data"][0]["z"])]
    assert {round(v) for v in traffic[1]} == {10} and {round(v) for v in traffic[0]} == {40}
    # The strips share the other charts' time axis.
    activity = charts["activity"]["data"][-1]
    assert (busy["x0"], busy["dx"]) == (activity["x0"], activity["dx"])
    html = response.content.decode()
    assert "Nodes over time: GPU activity" in html and 'id="chart-nodes_busy"' in html
    assert 'href="#chart-nodes_busy"' in html  # the finding points at its evidence


def test_a_single_node_job_has_no_node_strips(client_for, running_job):
    response = page(client_for("alice"), running_job)
    assert "nodes_busy" not in response.context["charts"]
    assert "Nodes over time" not in response.content.decode()
