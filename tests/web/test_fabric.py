"""The fabric page (worst ports across the cluster) and the node page's fabric table."""

import datetime as dt

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from clusterui.fabric.models import PortErrors, PortLink
from clusterui.telemetry.models import NicLatest
from tests import rows as f
from tests.web.plotly_data import present, values

pytestmark = pytest.mark.django_db

# session + user, then the ports with their window's errors (one query), whether any of
# their nodes is simulated (one).
FABRIC_QUERIES = 2 + 1 + 1 + 1  # + the navigation's cluster list (web/cluster_choice.py)


@pytest.fixture
def fabric(db):
    now = timezone.now()
    healthy = f.node("gpu-a001", gpus=1, nics=2)
    sick = f.node("gpu-a002", gpus=1, nics=2)
    noisy = f.node("gpu-a003", gpus=1, nics=1)
    for node in (healthy, sick, noisy):
        for nic in node.nics.all():
            PortLink.objects.create(nic=nic, ts=now, link_state=4, phys_state=5, link_width=4,
                                    link_gbps=400.0, nominal_gbps=400.0, nominal_width=4,
                                    counters_saturated=0, active_seen=now)
    degraded = sick.nics.order_by("name")[1]
    PortLink.objects.filter(nic=degraded).update(link_width=1, link_gbps=100.0)
    erroring = noisy.nics.get()
    PortErrors.objects.create(nic=erroring, ts=now - dt.timedelta(minutes=5), symbol_error=900,
                              link_error_recovery=2)
    return {"degraded": degraded, "erroring": erroring, "sick": sick, "healthy": healthy}


def test_the_degraded_port_is_listed_first(client_for, fabric, django_assert_num_queries):
    client = client_for("bob")
    with django_assert_num_queries(FABRIC_QUERIES):
        response = client.get(reverse("fabric"))
    assert response.status_code == 200
    ports = response.context["ports"]
    assert (ports[0].node, ports[0].name) == ("gpu-a002", fabric["degraded"].name)
    assert ports[0].degraded and ports[0].rate_pct == 25.0
    assert (ports[1].node, ports[1].error_total) == ("gpu-a003", 902)
    assert response.context["unhealthy"] == 2 and response.context["total"] == 5
    html = response.content.decode()
    assert html.index(fabric["degraded"].name) < html.index("symbol_error 900")
    assert "100 Gb/s (1X)" in html and "degraded" in html
    assert 'href="/fabric/"' in html  # in the nav
    assert "Simulated data" not in html  # measured nodes


def test_each_unhealthy_port_says_why_and_healthy_ones_follow_in_node_order(client_for,
                                                                           fabric):
    """The page counts a port with errors at the threshold as unhealthy: its row says so as
    a degraded one's does. The healthy ports follow by node and port, not backwards."""
    response = client_for("bob").get(reverse("fabric"))
    ports = response.context["ports"]
    assert [(p.node, p.name) for p in ports[2:]] == sorted((p.node, p.name) for p in ports[2:])
    rows = " ".join(response.content.decode().split()).split("<tr")[2:]
    state = [row.split("</td>")[3] for row in rows]  # node, port, kind, state
    assert "<strong>degraded</strong>" in state[0] and "<strong>erroring</strong>" in state[1]
    assert not any("<strong>" in s for s in state[2:])


def test_simulated_ports_are_labelled_as_such(client_for, fabric):
    fabric["sick"].__class__.objects.filter(pk=fabric["sick"].pk).update(simulated=True)
    html = client_for("bob").get(reverse("fabric")).content.decode()
    assert '<span class="badge sim"' in html and "Simulated data" in html


def test_sorted_by_errors(client_for, fabric):
    response = client_for("bob").get(reverse("fabric"), {"sort": "errors"})
    ports = response.context["ports"]
    assert ports[0].name == fabric["erroring"].name and ports[0].error_total == 902
    assert ports[1].name == fabric["degraded"].name


def test_the_node_page_shows_its_ports_degraded_first(client_for, fabric):
    response = client_for("bob").get(reverse("node-detail", args=[fabric["sick"].pk]))
    assert response.status_code == 200
    ports = response.context["fabric_ports"]
    assert [p.name for p in ports][0] == fabric["degraded"].name and len(ports) == 2
    html = response.content.decode()
    assert "Fabric links" in html and "100 Gb/s (1X)" in html and "400 Gb/s (4X), 25 %" in html


def test_roce_counters_that_rose_are_shown_on_the_fabric_and_node_pages(client_for, fabric):
    roce, quiet = fabric["sick"].nics.order_by("name")
    PortLink.objects.filter(nic=roce).update(congestion={
        "np_cnp_sent": 120, "rp_cnp_handled": 0, "out_of_sequence": 0, "packet_seq_err": 3})
    PortLink.objects.filter(nic=quiet).update(congestion={"np_cnp_sent": 0})
    client = client_for("bob")
    for url in (reverse("fabric"), reverse("node-detail", args=[fabric["sick"].pk])):
        html = client.get(url).content.decode()
        assert "RoCE np_cnp_sent 120, packet_seq_err 3 in the last interval" in html, url
        assert "RoCE counters: none rose in the last interval" in html, url
    # An InfiniBand port (no hw_counters) says nothing about RoCE.
    html = client.get(reverse("node-detail", args=[fabric["erroring"].node_id])).content.decode()
    assert "RoCE" not in html


def test_pause_frames_and_a_pause_storm_are_shown_on_the_fabric_and_node_pages(client_for,
                                                                              fabric):
    roce, _ = fabric["sick"].nics.order_by("name")
    PortLink.objects.filter(nic=roce).update(congestion={
        "np_cnp_sent": 0, "rx_prio_pause": 40, "rx_prio_pause_duration": 800,
        "tx_pause_ctrl_phy": 0, "tx_pause_storm_warning_events": 1,
        "tx_pause_storm_error_events": 0})
    client = client_for("bob")
    for url in (reverse("fabric"), reverse("node-detail", args=[fabric["sick"].pk])):
        html = client.get(url).content.decode()
        assert ("RoCE rx_prio_pause_duration 800, rx_prio_pause 40, "
                "tx_pause_storm_warning_events 1 in the last interval") in html, url
        assert ">pause storm</strong>" in html, url
    # No storm counter rose elsewhere: no storm shown for the InfiniBand node.
    html = client.get(reverse("node-detail", args=[fabric["erroring"].node_id])).content.decode()
    assert "pause storm" not in html


def test_the_page_keeps_to_the_cluster_chosen_in_the_navigation(client_for, fabric):
    now = timezone.now()
    elsewhere = f.node("gpu-b001", gpus=1, nics=1, cluster_name="other")
    PortLink.objects.create(nic=elsewhere.nics.get(), ts=now, link_state=1, phys_state=3,
                            link_width=4, link_gbps=None, nominal_gbps=400.0,
                            nominal_width=4, counters_saturated=0,
                            active_seen=now - dt.timedelta(hours=1))  # down
    client = client_for("bob")
    every = client.get(reverse("fabric") + "?cluster=").context
    assert every["total"] == 6 and every["ports"][0].node == "gpu-b001"
    other = client.get(reverse("fabric") + "?cluster=other")
    assert [p.node for p in other.context["ports"]] == ["gpu-b001"]
    assert other.context["unhealthy"] == 1
    assert "reporting in cluster <strong>other</strong>" in other.content.decode()
    test = client.get(reverse("fabric") + "?cluster=test").context
    assert test["total"] == 5 and "gpu-b001" not in {p.node for p in test["ports"]}
    assert client.get(reverse("fabric")).context["total"] == 5  # kept in the session


def test_each_port_shows_its_traffic_now_against_its_link(client_for, fabric):
    """The NIC's newest rates (tests/rows.py: 1 GB/s in, 2 GB/s out) in bits, and the busier
    direction's share of the link's current rate: 16 Gb/s of the degraded port's 100 is
    16 %, of a healthy port's 400, 4 %. A port whose newest sample is older than
    NODE_SILENT_AFTER_S has no traffic "now"."""
    quiet = fabric["sick"].nics.order_by("name")[0]
    NicLatest.objects.filter(nic=quiet).update(
        ts=timezone.now() - dt.timedelta(seconds=settings.NODE_SILENT_AFTER_S + 5))
    response = client_for("bob").get(reverse("fabric"))
    by_name = {(p.node, p.name): p for p in response.context["ports"]}
    degraded = by_name[("gpu-a002", fabric["degraded"].name)]
    assert (degraded.rx_bytes_per_s, degraded.tx_bytes_per_s) == (1e9, 2e9)
    assert degraded.load_pct == pytest.approx(16.0)
    assert by_name[("gpu-a001", "mlx5_0:1")].load_pct == pytest.approx(4.0)
    stale = by_name[("gpu-a002", quiet.name)]
    assert stale.rx_bytes_per_s is None and stale.load_pct is None
    rows = " ".join(response.content.decode().split()).split("<tr")[2:]
    assert "rx 8 Gb/s · tx 16 Gb/s" in rows[0] and "(16 %)" in rows[0]
    assert "no current sample" in next(r for r in rows if f">{quiet.name}<" in r
                                       and "gpu-a002" in r)


def test_ports_are_found_by_node_kind_and_health(client_for, fabric):
    client = client_for("bob")

    def shown(**params):
        response = client.get(reverse("fabric"), params)
        assert response.status_code == 200
        return [(p.node, p.name) for p in response.context["ports"]]

    assert shown(q="A003") == [("gpu-a003", fabric["erroring"].name)]
    assert shown(show="unhealthy") == [("gpu-a002", fabric["degraded"].name),
                                      ("gpu-a003", fabric["erroring"].name)]
    assert shown(show="unhealthy", sort="errors")[0] == ("gpu-a003", fabric["erroring"].name)
    assert len(shown(kind="infiniband")) == 5
    response = client.get(reverse("fabric"), {"kind": "roce"})
    assert response.context["total"] == 5 and response.context["unhealthy"] == 2  # of all
    assert "No port matches these filters" in response.content.decode()


def test_a_bad_filter_is_a_400_naming_it(client_for, fabric):
    for params, message in (({"kind": "fddi"}, "fddi is not one of the available choices"),
                            ({"sort": "newest"}, "newest is not one of the available choices"),
                            ({"show": "healthy"}, "healthy is not one of the available")):
        response = client_for("bob").get(reverse("fabric"), params)
        assert response.status_code == 400, params
        html = response.content.decode()
        assert message in html and "Fix the filters above" in html


def test_a_large_fabric_is_paged_and_says_how_many_ports_there_are(client_for, fabric):
    """Every port is reachable, the worst on the first page: none is silently dropped."""
    now = timezone.now()
    big = f.node("gpu-b001", gpus=1, nics=120)
    PortLink.objects.bulk_create(
        PortLink(nic=nic, ts=now, link_state=4, phys_state=5, link_width=4, link_gbps=400.0,
                 nominal_gbps=400.0, nominal_width=4, counters_saturated=0, active_seen=now)
        for nic in big.nics.all())
    client = client_for("bob")
    first = client.get(reverse("fabric"))
    assert first.context["total"] == 125 and len(first.context["ports"]) == 100
    assert first.context["ports"][0].name == fabric["degraded"].name
    assert "Page 1 of 2 · 125 ports" in first.content.decode()
    second = client.get(reverse("fabric"), {"page": 2})
    assert len(second.context["ports"]) == 25
    seen = {(p.node, p.name) for p in first.context["ports"]} | {
        (p.node, p.name) for p in second.context["ports"]}
    assert len(seen) == 125


def test_a_link_that_went_down_and_came_back_is_erroring_below_the_threshold(client_for,
                                                                             fabric):
    """One link_downed (under the threshold of 10 increases) counts the port unhealthy, and
    its row says why, as the count above the table does."""
    quiet = fabric["sick"].nics.order_by("name")[0]
    PortErrors.objects.create(nic=quiet, ts=timezone.now() - dt.timedelta(minutes=2),
                              link_downed=1)
    response = client_for("bob").get(reverse("fabric"), {"show": "unhealthy"})
    assert response.context["unhealthy"] == 3
    rows = " ".join(response.content.decode().split()).split("<tr")[2:]
    mine = next(r for r in rows if f">{quiet.name}<" in r and "gpu-a002" in r)
    assert "<strong>erroring</strong>" in mine and "link_downed 1" in mine


def test_the_node_page_charts_when_its_ports_began_to_err(client_for, fabric):
    """The erroring port's counters as stacked bars per bucket of the page's range: the
    900 symbol errors and 2 link recoveries stored 5 minutes ago fall in one bucket. Only
    rises are stored: a bucket without one is 0 where the port has a sample (the last
    half hour here), a gap where it has none. A node whose ports reported no error says
    so instead of drawing zeros."""
    now = timezone.now()
    f.nic_samples([fabric["erroring"]], now - dt.timedelta(minutes=30), now)
    client = client_for("bob")
    noisy = client.get(reverse("node-detail", args=[fabric["erroring"].node_id]))
    chart = noisy.context["charts"]["fabric_errors"]
    traces = {t["name"]: values(t["y"]) for t in chart["data"]}
    name = fabric["erroring"].name
    assert set(traces) == {f"{name} symbol_error", f"{name} link_error_recovery"}
    symbols = traces[f"{name} symbol_error"]
    assert present(symbols).count(900) == 1 and sum(present(symbols)) == 900
    assert traces[f"{name} link_error_recovery"].index(2) == symbols.index(900)
    step = noisy.context["step"]
    reporting = round(30 * 60 / step)  # the buckets of the last half hour
    assert symbols[:-reporting - 1] == [None] * (len(symbols) - reporting - 1)
    assert set(symbols[-reporting + 1:-1]) <= {0, 900}  # the bucket now has no sample yet
    # The time no port reported is shaded and says so: a blank there is not "no error".
    shaded = [(s["x0"], s["x1"]) for s in chart["layout"]["shapes"] if s["type"] == "rect"]
    assert len(shaded) == 2  # before the samples, and the bucket now
    assert shaded[0][0] == chart["data"][0]["x0"]  # from the range's first bucket
    assert [a["text"] for a in chart["layout"]["annotations"]] == ["no sample"]
    assert all(t["type"] == "bar" for t in chart["data"]) and chart["layout"]["barmode"] == "stack"
    html = client.get(reverse("node-detail", args=[fabric["sick"].pk])).content.decode()
    assert "Fabric errors" in html and "No fabric error counter rose in this range." in html


def test_a_multi_node_jobs_page_charts_its_nodes_port_errors(client_for, fabric):
    """A job on gpu-a001 (clean ports) and gpu-a003 (the erroring port): its page draws the
    erroring port's counters, named by node and port, as the node page does. A job on the
    clean node alone says no counter rose; one on nodes whose ports report no fabric
    counters has no fabric-errors card at all."""
    now = timezone.now()
    clean, noisy = fabric["healthy"], fabric["erroring"].node
    gpus = [*clean.gpus.all(), *noisy.gpus.all()]
    f.gpu_samples(gpus, now - dt.timedelta(minutes=30), now)
    f.nic_samples([*clean.nics.all(), *noisy.nics.all()], now - dt.timedelta(minutes=30), now)
    started = now - dt.timedelta(minutes=30)
    both = f.job("bob", gpus=gpus, started_at=started)
    client = client_for("bob")
    response = client.get(reverse("job-detail", args=[both.pk]))
    chart = response.context["charts"]["fabric_errors"]
    traces = {t["name"]: values(t["y"]) for t in chart["data"]}
    name = f"gpu-a003 {fabric['erroring'].name}"
    assert set(traces) == {f"{name} symbol_error", f"{name} link_error_recovery"}
    assert sum(present(traces[f"{name} symbol_error"])) == 900
    html = " ".join(response.content.decode().split())
    assert "<h2>Fabric errors</h2>" in html and "ports of the job's nodes" in html

    alone = f.job("bob", gpus=list(clean.gpus.all()), started_at=started)
    html = client.get(reverse("job-detail", args=[alone.pk])).content.decode()
    assert "No fabric error counter rose on these ports in this range." in html

    plain = f.node("gpu-e001", gpus=1, nics=1)  # ports without fabric counters
    f.gpu_samples(list(plain.gpus.all()), now - dt.timedelta(minutes=30), now)
    other = f.job("bob", gpus=list(plain.gpus.all()), started_at=started)
    response = client.get(reverse("job-detail", args=[other.pk]))
    assert "fabric_errors" not in response.context["charts"]
    assert "Fabric errors" not in response.content.decode()
