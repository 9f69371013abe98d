"""When the signature transition can end: every stored batch records the signature version
it used, and the ingest health page and ``/metrics`` name the nodes still on version 1.

Real Redis (the test broker database), real PostgreSQL, the real bulk consumer; batches
signed as collectors sign them (``collectors/signing.py``: ``seal`` is version 2, ``sign``
version 1).
"""

import pytest
from django.contrib.auth import get_user_model

from clusterui.ingest.auth import forget_keys
from clusterui.ingest.consumer import Consumer
from clusterui.ingest.models import IngestBatch, IngestKey
from clusterui.ingest.queue import ReliableQueue
from collectors import signing
from tests.factories import node_batch, recent_start
from tests.services import publish

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "transition-test-secret-0123456789"
TOKEN = "metrics-test-token-0123456789"
START = recent_start()


def key(node: str) -> str:
    return signing.derive_node_key(SECRET, "test", node)


@pytest.fixture
def signed_batches_stored(broker, clean_samples):
    """gpu-v2 seals (version 2) two batches, gpu-v1 signs one the old way (version 1);
    gpu-un sends one unsigned batch to a cluster without a key."""
    IngestKey.objects.create(cluster="test", key_id="k1", secret=SECRET)
    forget_keys()
    publish(
        signing.seal(node_batch(node="gpu-v2", seq=1, samples=2, start=START), "k1",
                     key("gpu-v2")),
        signing.sign(node_batch(node="gpu-v1", seq=1, samples=2, start=START), "k1",
                     key("gpu-v1")),
        signing.seal(node_batch(node="gpu-v2", seq=2, samples=2, start=START + 20), "k1",
                     key("gpu-v2")),
        node_batch(node="gpu-un", cluster="open", seq=1, samples=2, start=START),
    )
    consumer = Consumer(queue=ReliableQueue(broker, "ingest", ttl_s=60))
    try:
        while consumer.step(block_s=0):
            pass
    finally:
        forget_keys()
    assert consumer.totals.stored == 4 and consumer.totals.refused == 0


def test_each_batch_records_its_signature_version(signed_batches_stored):
    assert sorted(IngestBatch.objects.values_list("node__name", "seq", "signature_version")) \
        == [("gpu-un", 1, 0), ("gpu-v1", 1, 1), ("gpu-v2", 1, 2), ("gpu-v2", 2, 2)]


def test_the_health_page_names_the_nodes_still_on_version_1(signed_batches_stored, client):
    staff = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    client.force_login(staff)
    response = client.get("/ingest/health/")
    assert response.status_code == 200
    signatures = response.context["signatures"]
    assert signatures["versions"] == [
        {"version": "1", "batches": 1, "nodes": 1},
        {"version": "2", "batches": 2, "nodes": 1},
        {"version": "unsigned", "batches": 1, "nodes": 1},
    ]
    assert [(n["cluster"], n["node"], n["batches"]) for n in signatures["v1_nodes"]] == [
        ("test", "gpu-v1", 1)]
    page = response.content.decode()
    v1_table = page[page.index('id="v1-nodes"'):]
    v1_table = v1_table[:v1_table.index("</table>")]
    assert "gpu-v1" in v1_table and "gpu-v2" not in v1_table


def test_metrics_count_version_1_batches_per_node(signed_batches_stored, client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    lines = {line for line in text.splitlines() if "signature" in line
             and not line.startswith("#")}
    assert lines == {
        'clusterui_ingest_batches_by_signature_version_1h{version="1"} 1.0',
        'clusterui_ingest_batches_by_signature_version_1h{version="2"} 2.0',
        'clusterui_ingest_batches_by_signature_version_1h{version="unsigned"} 1.0',
        'clusterui_ingest_node_signature_v1_batches_1h{cluster="test",node="gpu-v1"} 1.0',
    }


def test_once_every_node_seals_no_node_is_listed(broker, clean_samples, client, settings):
    IngestKey.objects.create(cluster="test", key_id="k1", secret=SECRET)
    forget_keys()
    publish(signing.seal(node_batch(node="gpu-v2", seq=1, samples=2, start=START), "k1",
                         key("gpu-v2")))
    consumer = Consumer(queue=ReliableQueue(broker, "ingest", ttl_s=60))
    try:
        while consumer.step(block_s=0):
            pass
    finally:
        forget_keys()
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert "clusterui_ingest_node_signature_v1_batches_1h{" not in text
    assert 'clusterui_ingest_batches_by_signature_version_1h{version="2"} 1.0' in text
