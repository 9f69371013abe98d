"""The nodes list (/nodes/, issue 20): every node with its state, GPUs, jobs, utilization,
idle allocated GPUs, open findings and GPU events now; filters; every column sorts from its
header, and a second click reverses it."""

import datetime as dt
import re
from html import unescape

import pytest
from django.utils import timezone

from clusterui.inventory.models import Node
from clusterui.telemetry.models import GpuEvent, GpuLatest
from tests import rows as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster_now():
    """a001: 4 GPUs, a job on two (one idle), 55 % mean; a002: silent; a003: 2 free GPUs
    with an open node finding and an Xid."""
    busy = f.node("gpu-a001", gpus=4)
    gpus = list(busy.gpus.order_by("index"))
    f.job("alice", gpus=gpus[:2])
    for g, util in zip(gpus, (90.0, 2.0, 64.0, 64.0), strict=True):
        GpuLatest.objects.filter(gpu=g).update(util_pct=util, sm_active_pct=util / 2)
    silent = f.node("gpu-a002", gpus=2)
    Node.objects.filter(pk=silent.pk).update(
        reported_at=timezone.now() - dt.timedelta(hours=2))
    sick = f.node("gpu-a003", gpus=2)
    GpuLatest.objects.filter(gpu__node=sick).update(util_pct=0.0, sm_active_pct=0.0,
                                                    job=None)
    f.finding(None, "gpu_errors", node=sick, title="Xid 79 on GPU 0")
    GpuEvent.objects.create(gpu=sick.gpus.first(), ts=timezone.now(), kind="xid", code=79)
    return busy, silent, sick


def table(response) -> list[list[str]]:
    body = response.content.decode().split("<tbody>")[1].split("</tbody>")[0]
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        rows.append([" ".join(unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in cells])
    return rows


def header_link(response, label: str) -> str:
    m = re.search(r'<a class="sort-link" href="([^"]*)">' + re.escape(label),
                  response.content.decode())
    assert m, label
    return unescape(m.group(1))


def test_every_node_with_what_it_is_doing_now(client_for, cluster_now):
    response = client_for("alice").get("/nodes/")
    assert response.status_code == 200
    rows = {r[0]: r for r in table(response)}
    assert rows["gpu-a001"][1:9] == ["reporting", "4 (2 allocated)", "1", "55 %", "28 %",
                                     "1", "0", "0"]
    assert rows["gpu-a002"][1:6] == ["silent", "2", "0", "–", "–"]  # no stale "now"
    assert rows["gpu-a003"][7:9] == ["0", "1"]  # node findings are for staff; an Xid
    staff = {r[0]: r for r in table(client_for("staff").get("/nodes/"))}
    assert staff["gpu-a003"][7:9] == ["1", "1"]  # an open finding, an Xid in 24 h


def test_filters_narrow_the_list(client_for, cluster_now):
    client = client_for("staff")
    names = lambda **q: [r[0] for r in table(client.get("/nodes/", q))]  # noqa: E731
    assert names(state="silent") == ["gpu-a002"]
    assert names(health="findings") == ["gpu-a003"]
    assert names(health="events") == ["gpu-a003"]
    assert names(health="idle") == ["gpu-a001"]
    assert names(q="a00") == ["gpu-a001", "gpu-a002", "gpu-a003"]
    bad = client.get("/nodes/", {"state": "asleep"})
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()


def test_every_column_sorts_from_its_header_and_reverses_on_a_second_click(client_for,
                                                                        cluster_now):
    client = client_for("staff")
    first = client.get("/nodes/")
    link = header_link(first, "GPU utilization (NVML)")
    by_util = client.get("/nodes/" + link)
    assert [r[0] for r in table(by_util)] == ["gpu-a001", "gpu-a003", "gpu-a002"]  # silent last
    assert 'aria-sort="descending"' in by_util.content.decode()
    again = client.get("/nodes/" + header_link(by_util, "GPU utilization (NVML)"))
    assert [r[0] for r in table(again)] == ["gpu-a003", "gpu-a001", "gpu-a002"]
    assert 'aria-sort="ascending"' in again.content.decode()
    for label in ("Node", "State", "GPUs", "Jobs", "SM activity (GPM)", "Allocated, idle",
                  "Open findings", "GPU events (24 h)", "Last heard"):
        response = client.get("/nodes/" + header_link(first, label))
        assert response.status_code == 200 and len(table(response)) == 3, label
    assert [r[0] for r in table(client.get("/nodes/?ordering=-findings"))][0] == "gpu-a003"
