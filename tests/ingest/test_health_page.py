"""The ingest health page (staff) and the silent-node email."""

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from clusterui.celery import app
from clusterui.ingest.models import IngestBatch, RejectedBatch
from clusterui.ingest.queue import ReliableQueue
from clusterui.ingest.silence import alert_silent_nodes
from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.inventory.models import Node
from tests.factories import node_batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    client.force_login(user)
    return client


def test_the_page_shows_throughput_gaps_refusals_and_drops(staff_client, broker):
    now = timezone.now().timestamp()
    for seq in (1, 2, 5):
        batch = node_batch(seq=seq, samples=1, start=now - 100 + seq)
        if seq == 5:
            batch["agent"]["spool_dropped"] = 2
            batch["gpu_samples"]["rows"][0][3] = 140.0
        ingest_envelope(batch)
    ingest_envelope({"schema": 3, "cluster": "test", "node": "gpu-x"})
    for seq in (7, 8, 9):  # queued, with no worker to take them
        app.send_task("clusterui.ingest", args=[node_batch(seq=seq)], queue="ingest")
    # A bulk consumer (alive) has taken the oldest one and not yet committed it.
    consumer = ReliableQueue(broker, "ingest", consumer_id="c1")
    consumer.heartbeat()
    assert len(consumer.take(1, block_s=0)) == 1

    response = staff_client.get("/ingest/health/")
    assert response.status_code == 200
    page = response.content.decode()
    assert IngestBatch.objects.count() == 3
    gaps = response.context["gaps"]
    assert gaps == [{"cluster": "test", "node": "gpu-t001", "missing": 2}]
    assert response.context["queue"]["queued"] == 2
    assert response.context["queue"]["reserved"] == 1
    assert "2 batches queued · 1 being stored · 1 bulk consumer alive" in " ".join(
        re.sub(r"<[^>]+>", " ", page).split())
    assert response.context["spool_drops"] == [{"node": "gpu-t001", "dropped": 2}]
    reasons = {r["reason"]: (r["count"], r["scope"]) for r in response.context["rejected"]}
    assert reasons == {
        "gpu_samples: util_pct out of range [0, 100]": (1, "item"),
        "schema: version 3 is not supported (this server speaks 1)": (1, "batch"),
    }
    assert response.context["rates"]["batches_per_s_1m"] == pytest.approx(3 / 60)
    assert "gpu_samples: util_pct out of range [0, 100]" in page
    assert '<a href="/ingest/health/" class="active">Ingest</a>' in page
    assert page.count('id="keys"') == 1
    assert RejectedBatch.objects.count() == 1


def test_with_a_cluster_chosen_the_page_is_that_clusters(staff_client, broker, settings):
    """Two clusters, each with a lost batch, a refused sample, a spool drop, a refused
    batch, a clock ahead and a silent node: choosing one in the navigation shows its own
    alone, on every list and figure but the queue's, which the clusters share."""
    settings.NODE_SILENT_AFTER_S = 300
    settings.INGEST_CLOCK_TOLERANCE_S = 60
    now = timezone.now().timestamp()
    for cluster, node, drops in (("gpu-a", "a001", 2), ("gpu-b", "b001", 5)):
        for seq in (1, 3):
            batch = node_batch(node, seq=seq, samples=1, start=now - 100 + seq, cluster=cluster)
            batch["agent"]["spool_dropped"] = drops if seq == 3 else 0
            batch["gpu_samples"]["rows"][0][3] = 140.0  # one refused sample
            batch["sent_at"] = now + 200  # the node's clock is ahead
            ingest_envelope(batch)
        ingest_envelope({"schema": 3, "cluster": cluster, "node": node})
        old = node_batch(f"{node}-silent", samples=1, start=now - 3600, cluster=cluster)
        old["sent_at"] = now - 3600
        ingest_envelope(old)
    Node.objects.filter(name__endswith="-silent").update(
        reported_at=timezone.now() - dt.timedelta(hours=1))

    everything = staff_client.get("/ingest/health/?cluster=").context
    assert {g["cluster"] for g in everything["gaps"]} == {"gpu-a", "gpu-b"}
    assert everything["rates"]["batches_per_s_5m"] == pytest.approx(6 / 300)

    response = staff_client.get("/ingest/health/?cluster=gpu-b")
    page, ctx = response.content.decode(), response.context
    assert ctx["gaps"] == [{"cluster": "gpu-b", "node": "b001", "missing": 1}]
    assert ctx["spool_drops"] == [{"node": "b001", "dropped": 5}]
    assert {(r["reason"], r["count"]) for r in ctx["rejected"]} == {
        ("gpu_samples: util_pct out of range [0, 100]", 2),
        ("schema: version 3 is not supported (this server speaks 1)", 1)}
    assert [(c["cluster"], c["node"]) for c in ctx["clock_off"]] == [("gpu-b", "b001")]
    assert [s["node"].name for s in ctx["silent"]] == ["b001-silent"]
    assert [r.node for r in ctx["recent_refusals"]] == ["b001"]
    assert [(k["cluster"], k["nodes"]) for k in ctx["keys"]] == [("gpu-b", 2)]
    assert ctx["rates"]["batches_per_s_5m"] == pytest.approx(3 / 300)
    assert "a001" not in page and "gpu-a</td>" not in page
    assert "cluster gpu-b only, but for the queue, which every cluster shares" in page


def test_researchers_may_not_see_it(client):
    user = get_user_model().objects.create_user("alice", "alice@example.org", "pw")
    client.force_login(user)
    assert client.get("/ingest/health/").status_code == 403


def test_admins_are_emailed_once_when_a_node_goes_silent(settings):
    settings.ADMINS = [("Ops", "ops@example.org")]
    settings.NODE_SILENT_AFTER_S = 120
    now = timezone.now()

    def arrives(envelope, at: dt.datetime):
        store_batch(validate_batch(envelope, now=at.timestamp()), received_at=at)

    # Silence is judged on when batches arrive: gpu-quiet's last one came 10 minutes ago;
    # gpu-backfill's data is an hour old but its batches are arriving now (it is
    # back-filling), so it is not silent.
    arrives(node_batch(node="gpu-quiet", samples=1, start=now.timestamp() - 600),
            now - dt.timedelta(seconds=590))
    arrives(node_batch(node="gpu-live", samples=1, start=now.timestamp() - 20),
            now - dt.timedelta(seconds=10))
    arrives(node_batch(node="gpu-backfill", samples=1, start=now.timestamp() - 3600), now)

    assert alert_silent_nodes(now) == ["gpu-quiet"]
    assert alert_silent_nodes(now + dt.timedelta(minutes=1)) == []  # once per silence
    (message,) = mail.outbox
    assert message.to == ["ops@example.org"]
    assert message.subject == "Node gpu-quiet has gone silent — ClusterUI"
    assert "gpu-quiet (cluster test)" in message.body
    assert message.alternatives[0][1] == "text/html"

    # gpu-quiet reports again, then both fall silent: one new email names both.
    arrives(node_batch(node="gpu-quiet", seq=2, samples=1, start=now.timestamp() + 10),
            now + dt.timedelta(seconds=20))
    later = now + dt.timedelta(minutes=5)
    assert alert_silent_nodes(later) == ["gpu-backfill", "gpu-live", "gpu-quiet"]
    assert mail.outbox[1].subject == "3 nodes have gone silent — ClusterUI"
    assert Node.objects.get(name="gpu-quiet").silent_alerted_at == later
