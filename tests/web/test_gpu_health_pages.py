"""Issue 19 in the UI: each node's GPU health summary on the nodes list and the overview,
and the staff drain list whose scontrol lines stay safe to paste whatever a collector
called its node."""

import shlex
from html import unescape

import pytest
from django.utils import timezone

from clusterui.gpuhealth.drain import scontrol_line
from clusterui.gpuhealth.models import GpuHealth
from clusterui.inventory.models import Gpu, Node
from tests import rows as f

pytestmark = pytest.mark.django_db

HOSTILE = "gpu-x'; rm -rf / #$(reboot)`id`\"<b>"


def health(gpu, **values):
    now = timezone.now()
    return GpuHealth.objects.create(gpu=gpu, ts=now, changed_at=now, **values)


@pytest.fixture
def nodes():
    ok = f.node("gpu-a001", gpus=2)
    for g in ok.gpus.all():
        health(g, remap_pending=False, remap_failure=False, ecc_uncorrected_volatile=0)
    worn = f.node("gpu-a002", gpus=1)
    health(worn.gpus.get(), remap_pending=False, remap_failure=False, pcie_replays=4)
    bad = f.node(HOSTILE, gpus=2)
    health(bad.gpus.get(index=1), remap_pending=True, ecc_uncorrected_volatile=3,
           remap_failure=False)
    f.node("gpu-a004", gpus=1)  # no health reading yet
    return ok, worn, bad


def test_the_nodes_list_shows_each_nodes_summary(client_for, nodes):
    html = unescape(client_for("alice").get("/nodes/").content.decode())
    assert "GPU health" in html
    rows = {name: html.split(f">{name}</a>")[1].split("</tr>")[0]
            for name in ("gpu-a001", "gpu-a002", "gpu-a004")}
    assert "Healthy" in rows["gpu-a001"]
    assert "Degraded" in rows["gpu-a002"] and "GPU 0: 4 PCIe replays" in rows["gpu-a002"]
    assert "Healthy" not in rows["gpu-a004"] and "Degraded" not in rows["gpu-a004"]
    assert "Drain suggested" in html and "GPU 1: row remap pending" in html
    # The filter keeps only the nodes to drain; the hostile name is escaped in HTML.
    raw = client_for("alice").get("/nodes/?health=drain").content.decode()
    assert "gpu-a001" not in raw and "<b>" not in raw.split("<tbody>")[1]


def test_the_overview_counts_nodes_by_health(client_for, nodes):
    html = unescape(client_for("alice").get("/").content.decode())
    assert "1 healthy" in html and "1 degraded" in html and "1 drain suggested" in html
    assert "/nodes/drain/" not in html  # staff only
    # Each count opens the nodes it counts: "1 healthy" is gpu-a001 alone (not gpu-a004,
    # which has no health reading yet, nor the whole list).
    link = html.split('data-health="healthy"')[0].rsplit('href="', 1)[1].split('"')[0]
    assert link == "/nodes/?health=healthy"
    listed = unescape(client_for("alice").get(link).content.decode()).split("<tbody>")[1]
    assert ">gpu-a001</a>" in listed
    assert ">gpu-a002</a>" not in listed and ">gpu-a004</a>" not in listed
    assert "/nodes/drain/" in client_for("staff").get("/").content.decode()


def test_the_drain_list_is_for_staff_and_quotes_names_and_reasons(client_for, nodes):
    assert client_for("alice").get("/nodes/drain/").status_code == 403
    response = client_for("staff").get("/nodes/drain/")
    assert response.status_code == 200
    raw = response.content.decode()
    assert "Simulated data" not in raw  # measured nodes
    nodes[2].__class__.objects.filter(pk=nodes[2].pk).update(simulated=True)
    assert "Simulated data" in client_for("staff").get("/nodes/drain/").content.decode()
    assert "<b>" not in raw.split("drain-commands")[1]  # HTML-escaped
    script = unescape(raw.split('id="drain-commands">')[1].split("</pre>")[0])
    [line] = script.splitlines()
    # Pasted into a shell, the line is exactly one scontrol call with these arguments.
    assert shlex.split(line) == [
        "scontrol", "update", f"nodename={HOSTILE}", "state=drain",
        "reason=GPU health: GPU 1: row remap pending, 3 uncorrectable ECC errors since "
        "reset (reset)"]
    assert "gpu-a001" not in raw and "gpu-a002" not in raw


def test_a_node_whose_name_is_not_printable_gets_no_command(client_for, nodes):
    """A name with a right-to-left override would show a command that reads otherwise than
    it runs (no Slurm node has such a name): the row says so, and the cluster's block of
    commands holds only the printable names'."""
    now = timezone.now()
    spoof = Node.objects.create(cluster=f.cluster("test"), name="gpu-a009\u202e1000a-upg",
                                first_seen=now, last_seen=now)
    gpu = Gpu.objects.create(node=spoof, uuid="GPU-spoof-0", index=0, first_seen=now,
                             last_seen=now)
    health(gpu, remap_pending=False, remap_failure=True)
    raw = client_for("staff").get("/nodes/drain/").content.decode()
    assert "\u202e" not in raw
    script = unescape(raw.split('id="drain-commands">')[1].split("</pre>")[0])
    assert [shlex.split(x)[2] for x in script.splitlines()] == [f"nodename={HOSTILE}"]
    row = raw.split(">gpu-a009 1000a-upg</a>")[1].split("</tr>")[0]
    assert "<code>" not in row and "no Slurm node name has" in row


def test_a_reason_is_one_printable_line_and_a_plain_name_stays_plain():
    line = scontrol_line("gpu-a001", "GPU 0: row remapping failed (replace)")
    assert line == ("scontrol update nodename=gpu-a001 state=drain "
                    "reason='GPU 0: row remapping failed (replace)'")
    assert shlex.split(scontrol_line("a\nb", "x"))[2] == "nodename=a\nb"


def test_the_drain_list_keeps_to_the_chosen_cluster_and_gives_each_cluster_its_commands(
        client_for, nodes):
    """Two clusters with a node of the same name: each cluster's commands come in a block
    of their own (run on that cluster's controller), and choosing a cluster in the
    navigation keeps the page to it."""
    now = timezone.now()
    other = Node.objects.create(cluster=f.cluster("other"), name="gpu-a002", first_seen=now,
                                last_seen=now)
    gpu = Gpu.objects.create(node=other, uuid="GPU-other-a002-0", index=0, first_seen=now,
                             last_seen=now)
    health(gpu, remap_pending=False, remap_failure=True)
    client = client_for("staff")
    raw = client.get("/nodes/drain/?cluster=").content.decode()  # all clusters
    blocks = {b.split('"')[0]: unescape(b.split('">', 1)[1].split("</pre>")[0])
              for b in raw.split('data-cluster="')[1:]}
    assert set(blocks) == {"test", "other"}
    assert [shlex.split(x)[2] for x in blocks["other"].splitlines()] == ["nodename=gpu-a002"]
    assert [shlex.split(x)[2] for x in blocks["test"].splitlines()] == [
        f"nodename={HOSTILE}"]
    assert "Run them on cluster other's Slurm controller" in unescape(raw)
    raw = client.get("/nodes/drain/?cluster=other").content.decode()
    assert 'data-cluster="test"' not in raw and "rm -rf" not in unescape(raw)
    assert 'data-cluster="other"' in raw
    # The choice stays in the session, as on the other pages.
    assert 'data-cluster="test"' not in client.get("/nodes/drain/").content.decode()
    raw = client.get("/nodes/drain/?cluster=test").content.decode()
    assert 'data-cluster="other"' not in raw and 'data-cluster="test"' in raw
