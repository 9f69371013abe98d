"""The cluster history heatmap: nodes x time from the same tiers as every chart, each cell
its node's mean over its GPUs (or its NICs' summed traffic), labels that never overlap."""

import datetime as dt

import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.telemetry import compaction
from clusterui.web.figures.history import LABEL_PX, row_px
from tests import rows as f
from tests.web.plotly_data import matrix

pytestmark = pytest.mark.django_db


def _hour(t):
    return t.replace(minute=0, second=0, microsecond=0)


@pytest.fixture
def cluster():
    """Three nodes over the last 6 hours: a001's two GPUs at 20 % and 60 % (mean 40 %),
    a002 at 90 % for the first three hours only, a003 never reporting; part of it rolled
    up by compaction, the rest still hot."""
    now = timezone.now()
    start = _hour(now) - dt.timedelta(hours=6)
    a1 = f.node("hist-a001", gpus=2, latest=False)
    a2 = f.node("hist-a002", gpus=2, latest=False)
    f.node("hist-a003", gpus=2, latest=False)
    g1 = list(a1.gpus.order_by("index"))
    f.gpu_samples(g1, start, now, every_s=60, util=lambda g, k: 20.0 if g.index == 0 else 60.0)
    f.gpu_samples(list(a2.gpus.all()), start, start + dt.timedelta(hours=3), every_s=60,
                  util=lambda g, k: 90.0)
    # a001's one NIC receives 1 GB/s and sends 0.5 GB/s for the first two hours.
    f.nic_samples(list(a1.nics.all()), start, start + dt.timedelta(hours=2), every_s=60,
                  rate=1e9)
    compaction.compact(now)
    return start


def grid(array) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in matrix(array)])


def figure(response):
    return response.context["charts"]["history"]


def test_each_row_is_its_nodes_mean_over_time(client_for, cluster):
    response = client_for("staff").get(reverse("node-history"), {"range": "6h"})
    assert response.status_code == 200
    trace = figure(response)["data"][0]
    assert trace["y"] == ["hist-a001", "hist-a002", "hist-a003"]
    z = grid(trace["z"])
    assert response.context["step"] == "5 min"  # never narrower than the node rollups
    cols = z.shape[1]
    assert cols <= 200
    a1, a2, a3 = z
    # Every column up to where compaction rolled the samples up holds a001's mean, none
    # after it (the hot samples are the node page's).
    xs = [dt.datetime.fromisoformat(x) for x in trace["x"]]
    rolled = timezone.localtime(response.context["rolled_up_to"]).replace(tzinfo=None)
    done = np.array([x + dt.timedelta(minutes=5) <= rolled for x in xs])
    assert done.sum() >= cols // 2 and np.isnan(a1[~done]).all()
    assert np.allclose(a1[done][1:], 40.0, atol=0.05)  # mean of 20 % and 60 %
    # a002 reported for the first three hours: every bucket before their end holds 90 %,
    # none after.
    stop = timezone.localtime(cluster + dt.timedelta(hours=3)).replace(tzinfo=None)
    before = np.array([x < stop for x in xs])
    assert np.allclose(a2[before], 90.0, atol=0.05) and np.isnan(a2[~before]).all()
    assert np.isnan(a3).all()  # never reported: grey, not 0
    # A click on a row opens that node.
    ids = matrix(trace["customdata"])
    assert [set(row) for row in ids] == [{_node_id(n)} for n in trace["y"]]
    assert response.context["node_url"] == "/nodes/0/"


def _node_id(name):
    from clusterui.inventory.models import Node
    return Node.objects.get(name=name).id


def test_power_and_network_metrics(client_for, cluster):
    power = client_for("staff").get(reverse("node-history"), {"range": "6h", "metric": "power"})
    z = grid(figure(power)["data"][0]["z"])
    assert np.nanmax(z[1]) == pytest.approx(250 + 90 * 4, abs=0.1)  # rows.gpu_samples' power
    net = client_for("staff").get(reverse("node-history"), {"range": "7d", "metric": "nic"})
    assert net.status_code == 200
    z = grid(figure(net)["data"][0]["z"])
    seen = z[0][~np.isnan(z[0])]
    assert len(seen) == 2 and np.allclose(seen, 1.5)  # two hours of 1 + 0.5 GB/s
    assert np.isnan(z[1:]).all()  # the other nodes' NICs reported nothing


def test_a_week_of_a_large_cluster_labels_never_overlap():
    from clusterui.web.figures.history import y_labels
    names = [f"n{i:04d}" for i in range(1000)]
    px = row_px(len(names))
    labels = y_labels(names, px)
    assert len(labels) * LABEL_PX <= px * len(names) + LABEL_PX
    assert labels[0] == "n0000" and len(labels) > 10


def test_bad_metric_and_cluster_are_named(client_for, cluster):
    response = client_for("staff").get(reverse("node-history"),
                                       {"metric": "fan", "cluster": "nope"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "metric must be one of util, sm, power, nic" in page
    assert "no cluster named &#x27;nope&#x27;" in page


def test_before_anything_is_rolled_up_the_page_says_so(client_for):
    """A fresh install (or the demo's first minutes): samples, but no hour packed yet."""
    now = timezone.now()
    n = f.node("hist-new", gpus=1, latest=False)
    f.gpu_samples(list(n.gpus.all()), now - dt.timedelta(minutes=20), now, every_s=60)
    response = client_for("staff").get(reverse("node-history"))
    assert response.status_code == 200 and response.context["rolled_up_to"] is None
    page = response.content.decode()
    assert "Nothing is rolled up yet" in page and "No node reported in this range." in page
