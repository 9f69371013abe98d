"""The node page: inventory, per-GPU charts, NIC throughput against capacity, the jobs on
it over time (scoped) and its GPU events."""

import datetime as dt

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from clusterui.telemetry.models import GpuEvent
from tests import rows as f
from tests.web.plotly_data import present

pytestmark = pytest.mark.django_db

# session + user, then: node, GPUs (+ latest), NICs (+ latest), allocations, GPU series,
# NIC series, the ports' error counters over the range, events, event count, open findings
# on the node, fabric ports.
NODE_QUERIES = 2 + 11 + 1  # + the navigation's cluster list (web/cluster_choice.py)


@pytest.fixture
def busy_node(db):
    now = timezone.now()
    n = f.node("gpu-a007", gpus=4, nics=2)
    gpus = list(n.gpus.order_by("index"))
    mine = f.job("alice", gpus=gpus[:2], external_id="900001", started_at=now - dt.timedelta(
        minutes=40))
    f.job("bob", gpus=gpus[2:], external_id="900002", started_at=now - dt.timedelta(
        minutes=40))
    f.gpu_samples(gpus, now - dt.timedelta(minutes=40), now, job=mine)
    f.nic_samples(list(n.nics.all()), now - dt.timedelta(minutes=40), now, rate=25e9)
    GpuEvent.objects.create(gpu=gpus[1], ts=now - dt.timedelta(minutes=3), kind="xid", code=79,
                            message="GPU has fallen off the bus")
    return n


def page(client, node, **params):
    return client.get(reverse("node-detail", args=[node.pk]), params)


def test_every_signed_in_user_sees_the_hardware(client_for, busy_node):
    response = page(client_for("bob"), busy_node)

    assert response.status_code == 200
    charts = response.context["charts"]
    for name in ("util", "sm", "memory", "power", "temperature", "network"):
        assert charts[name] is not None, name
    assert [t["name"] for t in charts["util"]["data"]] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    html = response.content.decode()
    assert "NVIDIA H100 80GB HBM3" in html and "00000000" not in html  # no PCI id in factory
    assert "400 Gb/s" in html  # a 50 GB/s link's capacity, in bits
    assert "GPU has fallen off the bus" in html


def test_nic_throughput_is_drawn_against_capacity(client_for, busy_node):
    network = page(client_for("alice"), busy_node).context["charts"]["network"]

    names = [t["name"] for t in network["data"]]
    assert names == ["mlx5_0:1 rx", "mlx5_0:1 tx", "mlx5_1:1 rx", "mlx5_1:1 tx"]
    assert max(present(network["data"][0]["y"])) == pytest.approx(200.0)  # 25 GB/s = 200 Gb/s
    assert [s["y0"] for s in network["layout"]["shapes"]] == [pytest.approx(400.0)]


def test_the_jobs_timeline_shows_only_jobs_the_viewer_may_see(client_for, busy_node):
    alice = page(client_for("alice"), busy_node)
    staff = page(client_for("staff"), busy_node)

    def bars(response):
        return sorted((t["name"], tuple(t["y"])) for t in response.context["charts"]["jobs"]["data"])

    assert bars(alice) == [("job 900001", ("GPU 0", "GPU 1"))]
    assert bars(staff) == [("job 900001", ("GPU 0", "GPU 1")), ("job 900002", ("GPU 2", "GPU 3"))]
    assert b"900002" not in alice.content
    job_bar = alice.context["charts"]["jobs"]["data"][0]
    assert job_bar["customdata"][0] == alice.context["jobs"][0]["job_id"]  # click -> job page


def test_the_jobs_table_names_the_gpus_each_job_holds_here(client_for):
    """GPU indexes, said as GPUs: GPU 0 held alone read "0" under "GPUs here" (zero GPUs)."""
    n = f.node("gpu-a008", gpus=3)
    gpus = list(n.gpus.order_by("index"))
    f.job("alice", gpus=gpus[:1], external_id="900011")
    f.job("bob", gpus=gpus[1:], external_id="900012")
    html = " ".join(page(client_for("staff"), n).content.decode().split())
    assert ">900011</a></td><td>alice</td><td>train</td> <td>GPU 0</td>" in html
    assert ">900012</a></td><td>bob</td><td>train</td> <td>GPUs 1, 2</td>" in html
    assert "Seen here from</th>" in html


def test_the_jobs_table_lists_a_jobs_gpus_in_index_order(client_for):
    """Allocations first seen at the same moment came back in any order ("GPUs 6, 2, 3, 4,
    0, 1, 5, 7" for a whole node); a run of three or more reads as Slurm writes it."""
    n = f.node("gpu-a009", gpus=8)
    gpus = {g.index: g for g in n.gpus.all()}
    f.job("alice", gpus=[gpus[i] for i in (6, 2, 3, 4, 0, 1, 5, 7)], external_id="900021")
    m = f.node("gpu-a010", gpus=8)
    others = {g.index: g for g in m.gpus.all()}
    f.job("bob", gpus=[others[i] for i in (7, 1, 0, 3, 2)], external_id="900022")
    whole = " ".join(page(client_for("staff"), n).content.decode().split())
    assert ">900021</a></td><td>alice</td><td>train</td> <td>GPUs 0–7</td>" in whole
    some = " ".join(page(client_for("staff"), m).content.decode().split())
    assert ">900022</a></td><td>bob</td><td>train</td> <td>GPUs 0–3, 7</td>" in some


def test_query_count_is_pinned(client_for, busy_node, django_assert_num_queries):
    client = client_for("staff")
    with django_assert_num_queries(NODE_QUERIES):
        page(client, busy_node)
    f.job("alice", gpus=busy_node.gpus.all())  # more jobs and events: same number of queries
    GpuEvent.objects.create(gpu=busy_node.gpus.first(), ts=timezone.now(), kind="xid", code=48)
    with django_assert_num_queries(NODE_QUERIES):
        page(client, busy_node)


def test_gpus_without_gpm_say_so(client_for):
    n = f.node("gpu-c001", gpus=2, model="NVIDIA A100-PCIE-40GB")
    now = timezone.now()
    f.gpu_samples(list(n.gpus.all()), now - dt.timedelta(minutes=10), now)
    with connection.cursor() as cur:
        cur.execute("UPDATE telemetry_gpusample SET sm_active_pct = NULL")

    response = page(client_for("alice"), n)

    assert response.context["charts"]["sm"] is None
    assert b"these GPUs have no GPM counters" in response.content


def test_a_silent_node_is_labelled(client_for, settings):
    settings.NODE_SILENT_AFTER_S = 60
    n = f.node("gpu-a009", gpus=1, last_seen=timezone.now() - dt.timedelta(minutes=5),
               simulated=True)
    html = page(client_for("alice"), n).content.decode()
    assert "silent" in html and "no current sample" in html
    assert "Simulated data" in html


def test_ranges(client_for, busy_node):
    client = client_for("alice")
    assert page(client, busy_node, range="24h").context["step"] == 300
    week = page(client, busy_node, range="7d")
    assert week.context["step"] == 1800
    assert b"data-refresh" in week.content  # still ends now: live
    start = timezone.localtime() - dt.timedelta(hours=2)
    fixed = page(client, busy_node, **{"from": start.strftime("%Y-%m-%dT%H:%M"),
                                       "to": (start + dt.timedelta(hours=1)).strftime(
                                           "%Y-%m-%dT%H:%M")})
    assert fixed.status_code == 200 and b"data-refresh" not in fixed.content
    bad = page(client, busy_node, **{"from": "2026-01-02T10:00", "to": "2026-01-01T10:00"})
    assert bad.status_code == 400
    assert b"the range must end after it starts" in bad.content


def test_unknown_node_is_404(client_for):
    assert client_for("alice").get(reverse("node-detail", args=[999999])).status_code == 404


def test_a_training_step_pattern_keeps_its_dips_at_a_coarse_range(client_for):
    """Two GPUs on a 4 s training step sampled every second (busy three seconds, idle one):
    over 24 h each GPU's 5-minute mean is a flat 75 %, and the band from the lowest to the
    highest sample of any GPU shows them touching 0 % and 100 %."""
    from clusterui.inventory.models import Node

    now = timezone.now()
    n = f.node("gpu-step", gpus=2, latest=False)
    Node.objects.filter(pk=n.pk).update(sample_interval_s=1.0)
    gpus = list(n.gpus.order_by("index"))
    start = now - dt.timedelta(hours=2)
    job = f.job("alice", gpus=gpus, started_at=start)
    f.gpu_samples(gpus, start, now, every_s=1, job=job,
                  util=lambda g, k: 0.0 if k % 4 == 3 else 100.0)
    response = client_for("alice").get(reverse("node-detail", args=[n.pk]), {"range": "24h"})
    util = {t["name"]: t for t in response.context["charts"]["util"]["data"]}
    for name in ("GPU 0", "GPU 1"):
        assert all(v == pytest.approx(75.0, abs=1.0) for v in present(util[name]["y"])[1:-1])
    # The first and last buckets are partial (a few seconds may hold no idle sample).
    assert set(present(util["any GPU, lowest to highest sample"]["y"])[1:-1]) == {0.0}
    assert set(present(util["any GPU, highest sample"]["y"])[1:-1]) == {100.0}
    sm = {t["name"] for t in response.context["charts"]["sm"]["data"]}
    assert "any GPU, lowest to highest sample" in sm  # SM activity is 0.8 x utilization


def test_a_nodes_own_finding_is_explained_on_its_page_and_linked_to_there(client_for):
    """A fabric link's or a GPU's health finding has no job page: the node's page is where
    its explanation, what to do and its evidence are read and it is acknowledged, and the
    findings list and the overview link its title there. A job's finding on the node stays
    one line, linked to the job's page."""
    from clusterui.fabric.models import PortLink

    n = f.node("gpu-a009", gpus=2, nics=1)
    gpus = list(n.gpus.order_by("index"))
    now = timezone.now()
    PortLink.objects.create(nic=n.nics.get(), ts=now, link_state=4, phys_state=5, link_width=1,
                            link_gbps=100.0, nominal_gbps=400.0, nominal_width=4,
                            counters_saturated=0, active_seen=now)
    own = f.finding(None, kind="fabric_link", node=n, title="Fabric link degraded on gpu-a009",
                    evidence={"port": "mlx5_0:1", "rate_pct": 25.0})
    Finding = type(own)
    Finding.objects.filter(pk=own.pk).update(
        explanation="Port mlx5_0:1 runs at 100 Gb/s (1X) of the 400 Gb/s it ran at.",
        suggestion="Reseat or replace the cable.")
    job = f.job("alice", gpus=gpus, external_id="900021")
    f.finding(job, node=n, title="Low GPU utilization on gpu-a009")
    client = client_for("staff")

    html = " ".join(page(client, n).content.decode().split())
    card = html.split(f'id="finding-{own.pk}"', 1)[1].split("</article>", 1)[0]
    assert "<h3>Fabric link degraded on gpu-a009</h3>" in card
    assert "Port mlx5_0:1 runs at 100 Gb/s (1X) of the 400 Gb/s it ran at." in card
    assert "<strong>What to do:</strong> Reseat or replace the cable." in card
    assert '<a href="#fabric-links">See it in the fabric links table ↓</a>' in card
    assert f'name="next" value="/nodes/{n.pk}/#finding-{own.pk}"' in card  # acknowledge
    assert f'<a href="/jobs/{job.pk}/#finding-' in html and "job 900021 · alice · nlp" in html

    assert '<h3 id="fabric-links">Fabric links</h3>' in html
    PortLink.objects.all().delete()  # no ports table shown: no link to one
    assert "See it in" not in " ".join(page(client, n).content.decode().split())

    anchor = f'href="/nodes/{n.pk}/#finding-{own.pk}">Fabric link degraded on gpu-a009</a>'
    assert anchor in client.get(reverse("findings")).content.decode()
    assert anchor in client.get(reverse("home")).content.decode()
