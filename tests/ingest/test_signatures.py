"""Ingest authentication: each cluster has a key, each node signs with the key derived
from it for its own name, and a batch carries the HMAC of its envelope. Unsigned or wrongly
signed batches are refused and counted. (What a node key may write: ``test_identity.py``.)"""

import hashlib
import hmac
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from clusterui.ingest.auth import forget_keys
from clusterui.ingest.models import IngestBatch, IngestKey, RejectedBatch
from clusterui.ingest.tasks import ingest_envelope
from collectors import signing
from collectors.config import Config, ConfigError
from collectors.transport import RedisSender
from tests.factories import node_batch
from tests.services import wait_for

SECRET = "k3y-for-the-test-cluster-0123456789"
NODE = "gpu-t001"  # node_batch's default node


def node_key(secret: str = SECRET, node: str = NODE) -> str:
    return signing.derive_node_key(secret, "test", node)


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
    good = signing.sign(node_batch(seq=1), "test-1", node_key())
    wrong = signing.sign(node_batch(seq=2), "test-1", node_key("not-the-secret-at-all"))
    unsigned = node_batch(seq=3)
    unknown = signing.sign(node_batch(seq=4), "test-9", node_key())
    cluster_wide = signing.sign(node_batch(seq=5), "test-1", SECRET)

    assert ingest_envelope(good).gpu_samples == 24
    for batch in (wrong, unsigned, unknown, cluster_wide):
        assert ingest_envelope(batch) is None
    assert list(IngestBatch.objects.values_list("seq", flat=True)) == [1]
    assert sorted(RejectedBatch.objects.values_list("reason", flat=True)) == [
        "signature: does not match (node key of 'gpu-t001', key id 'test-1'): altered, or not "
        "signed with this node's own key",
        "signature: key id 'test-1' accepts only node keys (alg 'hmac-sha256-node'); its "
        "cluster-wide signatures are turned off",
        "signature: key id 'test-9' is not an active key of this cluster",
        "signature: missing (this cluster requires signed batches)",
    ]


@pytest.mark.django_db
def test_cluster_wide_signatures_are_accepted_only_while_the_key_allows_them():
    out = io.StringIO()
    call_command("ingest_key", "create", "test", "--key-id", "test-1", "--secret", SECRET,
                 "--allow-cluster-signatures", stdout=out, stderr=io.StringIO())
    assert ingest_envelope(signing.sign(node_batch(seq=1), "test-1", SECRET))
    assert ingest_envelope(signing.sign(node_batch(seq=2), "test-1", node_key()))
    # Every node has its own key now: the cluster secret alone no longer signs.
    call_command("ingest_key", "cluster-signatures", "test", "test-1", "off", stdout=out)
    forget_keys()  # workers re-read keys within 30 s; the test does not wait
    assert ingest_envelope(signing.sign(node_batch(seq=3), "test-1", SECRET)) is None
    assert ingest_envelope(signing.sign(node_batch(seq=4), "test-1", node_key()))
    call_command("ingest_key", "cluster-signatures", "test", "test-1", "on", stdout=out)
    forget_keys()
    assert ingest_envelope(signing.sign(node_batch(seq=5), "test-1", SECRET))
    assert sorted(IngestBatch.objects.values_list("seq", flat=True)) == [1, 2, 4, 5]
    with pytest.raises(CommandError, match="no active key 'test-9'"):
        call_command("ingest_key", "cluster-signatures", "test", "test-9", "off")


@pytest.mark.django_db
def test_ingest_key_derive_prints_the_node_key_the_server_checks():
    out = io.StringIO()
    call_command("ingest_key", "create", "test", stdout=out, stderr=io.StringIO())
    created = dict(line.split("=", 1) for line in out.getvalue().split())
    key = IngestKey.objects.get()
    assert (key.key_id, key.secret, key.allow_cluster_signatures) == (
        created["ingest_key_id"], created["ingest_key"], False)  # new keys: node keys only
    out = io.StringIO()
    call_command("ingest_key", "derive", "test", "gpu-t001", stdout=out)
    derived = dict(line.split("=", 1) for line in out.getvalue().split())
    assert derived == {"cluster": "test", "node": "gpu-t001", "ingest_key_id": "test-1",
                       "ingest_key": signing.derive_node_key(key.secret, "test", "gpu-t001")}
    assert ingest_envelope(signing.sign(node_batch(), derived["ingest_key_id"],
                                        derived["ingest_key"]))
    with pytest.raises(CommandError, match="no active key 'test-7'"):
        call_command("ingest_key", "derive", "test", "gpu-t001", "--key-id", "test-7")
    with pytest.raises(CommandError, match="must not start with 'cuin1.'"):
        call_command("ingest_key", "create", "test", "--secret", derived["ingest_key"])


def test_the_collector_config_takes_a_node_key(tmp_path):
    key = node_key()
    config = Config.load(None, {"CLUSTERUI_INGEST_KEY_ID": "test-1", "CLUSTERUI_INGEST_KEY": key,
                                "CLUSTERUI_NODE": NODE})
    assert config.signing_key() == ("test-1", key)
    batch = signing.sign(node_batch(), *config.signing_key())
    assert batch["signature"] == {"key_id": "test-1", "alg": "hmac-sha256-node", "node": NODE,
                                  "hmac": signing.digest(batch, key)}
    (tmp_path / "ingest.key").write_text(key[:-3] + "\n")  # cut short in a copy and paste
    cut = Config.load(None, {"CLUSTERUI_INGEST_KEY_ID": "test-1",
                             "CLUSTERUI_INGEST_KEY_FILE": str(tmp_path / "ingest.key")})
    with pytest.raises(ConfigError, match="ingest_key: not a whole node key"):
        cut.signing_key()


@pytest.mark.django_db
def test_rotating_a_key_accepts_both_until_the_old_one_is_revoked():
    old = IngestKey.objects.create(cluster="test", key_id="test-1", secret=SECRET)
    IngestKey.objects.create(cluster="test", key_id="test-2", secret=SECRET[::-1])
    assert ingest_envelope(signing.sign(node_batch(seq=1), "test-1", node_key()))
    assert ingest_envelope(signing.sign(node_batch(seq=2), "test-2", node_key(SECRET[::-1])))
    old.revoked_at = timezone.now()
    old.save()
    forget_keys()  # workers re-read keys within 30 s; the test does not wait
    assert ingest_envelope(signing.sign(node_batch(seq=3), "test-1", node_key())) is None
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
    signed = RedisSender(broker_url, signing_key=("test-1", node_key()))
    unsigned = RedisSender(broker_url)
    try:
        signed.send(node_batch(seq=1))
        unsigned.send(node_batch(seq=2))
        signed.send(node_batch(node="gpu-t002", cluster="other", seq=1))  # no key, required
        signed.send(node_batch(node="gpu-t002", seq=1))  # gpu-t001's key: not gpu-t002's
    finally:
        signed.close()
        unsigned.close()
    wait_for(lambda: RejectedBatch.objects.count() == 3, timeout=30, what="three refusals")
    wait_for(lambda: IngestBatch.objects.count() == 1, timeout=30, what="the signed batch")
    assert IngestBatch.objects.get().seq == 1


def test_the_simulator_signs_each_node_with_its_own_key(tmp_path):
    from collectors.sim.cluster import ClusterSim

    sim = ClusterSim(nodes=2, gpus_per_node=2, seed=3, start=1_790_000_000.0,
                     root_dir=str(tmp_path), cluster="test", interval=10)
    try:
        sim.step(1_790_000_000.0)
        batches = sim.flush()
    finally:
        sim.close()
    sign = signing.node_signer("test-1", SECRET)
    assert len({b["node"] for b in batches}) == 2
    for batch in batches:
        sealed = sign(batch)
        assert sealed["signature"]["node"] == batch["node"]
        assert signing.verify_sealed(sealed, {"test-1": SECRET}, cluster_wide=()) is None
        assert sealed["signature"]["hmac"] == hmac.new(
            node_key(node=batch["node"]).encode(), sealed["batch"].encode(),
            hashlib.sha256).hexdigest()
        assert json.loads(sealed["batch"]) == batch


@pytest.mark.django_db
@pytest.mark.parametrize("cluster", ["hpc\x00a", "hpc\ud800", "x" * 65])
def test_a_cluster_name_no_cluster_can_have_is_refused_with_its_reason(cluster):
    """Found by the fuzz test: the key lookup sent such a name to PostgreSQL, which raised
    (NUL in text, invalid UTF-8) before validation could refuse the batch."""
    batch = node_batch(seq=1)
    batch["cluster"] = cluster
    assert ingest_envelope(batch) is None
    assert RejectedBatch.objects.get().reason.startswith("cluster: ")


# --- version 2: the HMAC of the bytes sent (docs/protocol.md) -----------------------------

def _key_for_test_cluster():
    IngestKey.objects.create(cluster="test", key_id="test-1", secret=SECRET)


@pytest.mark.django_db
def test_a_sealed_batch_is_stored_and_names_its_key():
    _key_for_test_cluster()
    sealed = signing.seal(node_batch(seq=1), "test-1", node_key())
    assert signing.version_of(sealed) == 2 and "signature" not in json.loads(sealed["batch"])
    assert ingest_envelope(sealed)
    assert ingest_envelope(signing.sign(node_batch(seq=2), "test-1", node_key()))
    # The Celery task's path records the version too (the bulk consumer's:
    # test_signature_transition.py).
    assert list(IngestBatch.objects.order_by("seq").values_list("key_id", "signature_version")) \
        == [("test-1", 2), ("test-1", 1)]


@pytest.mark.django_db
def test_a_sealed_batch_is_checked_over_the_bytes_sent_not_a_re_serialisation():
    """Whitespace and key order that canonical JSON would change are what was signed, so
    they verify; one changed byte does not."""
    _key_for_test_cluster()
    text = json.dumps(node_batch(seq=1), indent=2)  # not the canonical form
    mac = hmac.new(node_key().encode(), text.encode(), hashlib.sha256).hexdigest()
    signature = {"v": 2, "key_id": "test-1", "alg": signing.NODE_ALGORITHM,
                 "cluster": "test", "node": NODE, "hmac": mac}
    assert ingest_envelope({"batch": text, "signature": signature})
    altered = text.replace('"seq": 1', '"seq": 2')
    assert altered != text
    assert ingest_envelope({"batch": altered, "signature": signature}) is None
    assert RejectedBatch.objects.get().reason == (
        "signature: does not match (node key of 'gpu-t001', key id 'test-1'): altered, or "
        "not signed with this node's own key")
    assert IngestBatch.objects.count() == 1


@pytest.mark.django_db
def test_a_node_key_cannot_seal_a_batch_that_names_another_node_or_cluster():
    _key_for_test_cluster()
    # gpu-t001's own key, a valid HMAC of the text, but the text says gpu-t002.
    other_node = signing.seal(node_batch(node="gpu-t002"), "test-1", node_key())
    other_node["signature"]["node"] = NODE
    assert ingest_envelope(other_node) is None
    # The signature names a cluster without keys; the batch inside names "test", which has.
    other_cluster = signing.seal(node_batch(seq=2), "x-1", "any secret")
    other_cluster["signature"]["cluster"] = "no-keys-here"
    assert ingest_envelope(other_cluster) is None
    assert list(RejectedBatch.objects.order_by("id").values_list("reason", flat=True)) == [
        "signature: made with the node key of 'gpu-t001', but the batch says node "
        "'gpu-t002': a node key signs only its own node",
        "signature: made for cluster 'no-keys-here', but the batch says cluster 'test'",
    ]
    assert IngestBatch.objects.count() == 0


@pytest.mark.django_db
def test_version_1_is_still_accepted_and_unknown_versions_are_refused():
    _key_for_test_cluster()
    assert ingest_envelope(signing.sign(node_batch(seq=1), "test-1", node_key()))
    sealed = signing.seal(node_batch(seq=2), "test-1", node_key())
    sealed["signature"]["v"] = 3
    assert ingest_envelope(sealed) is None
    no_text = signing.seal(node_batch(seq=3), "test-1", node_key())
    no_text["batch"] = json.loads(no_text["batch"])
    assert ingest_envelope(no_text) is None
    assert list(RejectedBatch.objects.order_by("id").values_list("reason", flat=True)) == [
        "signature: version 3 is not supported (this server accepts versions 1 and 2)",
        "signature: version 2 carries the batch as JSON text in 'batch', got dict",
    ]
    # Refused before the text was read: the refusal still names the node.
    assert set(RejectedBatch.objects.values_list("node", flat=True)) == {NODE}
    assert IngestBatch.objects.count() == 1
