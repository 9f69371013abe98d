"""Ingest authentication: each cluster has a key and a batch carries the HMAC of its
envelope. Unsigned or wrongly signed batches are refused and counted."""

import pytest
from django.test import override_settings
from django.utils import timezone

from clusterui.ingest.auth import forget_keys
from clusterui.ingest.models import IngestBatch, IngestKey, RejectedBatch
from clusterui.ingest.tasks import ingest_envelope
from collectors import signing
from collectors.transport import CelerySender
from tests.factories import node_batch
from tests.services import wait_for

SECRET = "k3y-for-the-test-cluster-0123456789"


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    forget_keys()
    yield
    forget_keys()


def test_a_signature_covers_every_value_of_the_envelope():
    batch = signing.sign(node_batch(), "test-1", SECRET)
    assert signing.verify(batch, {"test-1": SECRET}) is None
    batch["gpu_samples"]["rows"][0][3] = 99.0
    assert signing.verify(batch, {"test-1": SECRET}) == (
        "signature: does not match (key id 'test-1'): altered or wrong key")


@pytest.mark.django_db
def test_a_cluster_with_a_key_accepts_only_batches_signed_with_it():
    IngestKey.objects.create(cluster="test", key_id="test-1", secret=SECRET)
    good = signing.sign(node_batch(seq=1), "test-1", SECRET)
    wrong = signing.sign(node_batch(seq=2), "test-1", "not-the-secret-at-all")
    unsigned = node_batch(seq=3)
    unknown = signing.sign(node_batch(seq=4), "test-9", SECRET)

    assert ingest_envelope(good).gpu_samples == 24
    for batch in (wrong, unsigned, unknown):
        assert ingest_envelope(batch) is None
    assert list(IngestBatch.objects.values_list("seq", flat=True)) == [1]
    assert sorted(RejectedBatch.objects.values_list("reason", flat=True)) == [
        "signature: does not match (key id 'test-1'): altered or wrong key",
        "signature: key id 'test-9' is not an active key of this cluster",
        "signature: missing (this cluster requires signed batches)",
    ]


@pytest.mark.django_db
def test_rotating_a_key_accepts_both_until_the_old_one_is_revoked():
    old = IngestKey.objects.create(cluster="test", key_id="test-1", secret=SECRET)
    IngestKey.objects.create(cluster="test", key_id="test-2", secret=SECRET[::-1])
    assert ingest_envelope(signing.sign(node_batch(seq=1), "test-1", SECRET))
    assert ingest_envelope(signing.sign(node_batch(seq=2), "test-2", SECRET[::-1]))
    old.revoked_at = timezone.now()
    old.save()
    forget_keys()  # workers re-read keys within 30 s; the test does not wait
    assert ingest_envelope(signing.sign(node_batch(seq=3), "test-1", SECRET)) is None
    assert sorted(IngestBatch.objects.values_list("seq", "key_id")) == [(1, "test-1"),
                                                                         (2, "test-2")]


@pytest.mark.django_db
@override_settings(INGEST_REQUIRE_SIGNATURE=True)
def test_unsigned_batches_from_a_cluster_without_a_key_are_refused_when_required():
    assert ingest_envelope(node_batch()) is None
    assert RejectedBatch.objects.get().reason.startswith(
        "signature: cluster 'test' has no active ingest key and unsigned batches are refused")


@pytest.mark.django_db(transaction=True)
def test_the_collector_signs_and_a_real_worker_verifies(make_worker, broker_url):
    IngestKey.objects.create(cluster="test", key_id="test-1", secret=SECRET)
    make_worker(extra_env={"INGEST_REQUIRE_SIGNATURE": "1"})
    signed = CelerySender(broker_url, signing_key=("test-1", SECRET))
    unsigned = CelerySender(broker_url)
    try:
        signed.send(node_batch(seq=1))
        unsigned.send(node_batch(seq=2))
        signed.send(node_batch(node="gpu-t002", cluster="other", seq=1))  # no key, required
    finally:
        signed.close()
        unsigned.close()
    wait_for(lambda: RejectedBatch.objects.count() == 2, timeout=30, what="two refusals")
    wait_for(lambda: IngestBatch.objects.count() == 1, timeout=30, what="the signed batch")
    assert IngestBatch.objects.get().seq == 1
