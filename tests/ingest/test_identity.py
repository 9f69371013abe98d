"""A node writes only as itself (issue 14): with one node's key a batch cannot speak for
another node, take another cluster's GPUs, or hand a job to another user.

Every batch here is a real signed envelope, stored through the path the consumers use:
``check_signature``, ``validate_batch``, ``store_batches``; the last test goes through a
real bulk consumer process.
"""

import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count

from clusterui.ingest.auth import check_signature, forget_keys
from clusterui.ingest.models import IngestBatch, IngestKey, RejectedBatch
from clusterui.ingest.prepare import prepare
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.inventory.models import Gpu, Node
from clusterui.jobs.models import Job, JobMetadataChange
from clusterui.telemetry.models import GpuEvent
from collectors import signing
from collectors.transport import RedisSender
from tests.factories import node_batch
from tests.services import wait_for

SECRETS = {"test": "the-test-cluster-secret-0123456789", "other": "other-cluster-secret-987654321"}
KEY_IDS = {"test": "test-1", "other": "other-1"}
START = time.time() - 600


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    forget_keys()
    yield
    forget_keys()


@pytest.fixture
def keys(db):
    for cluster, secret in SECRETS.items():
        IngestKey.objects.create(cluster=cluster, key_id=KEY_IDS[cluster], secret=secret)


def node_key(cluster: str, node: str) -> str:
    return signing.derive_node_key(SECRETS[cluster], cluster, node)


def signed(envelope: dict, *, as_node: str | None = None) -> dict:
    """Signed with the node key of ``as_node`` (default: the node the envelope names)."""
    cluster = envelope["cluster"]
    return signing.sign(envelope, KEY_IDS[cluster], node_key(cluster, as_node or envelope["node"]))


def ingest(envelope: dict):
    """What a consumer does with one message: the signature, validation, the writer."""
    refusal = check_signature(envelope)
    if refusal:
        RejectedBatch.objects.create(cluster=envelope["cluster"], node=envelope["node"],
                                     reason=refusal)
        return refusal
    batch = validate_batch(envelope, max_rows=settings.INGEST_MAX_ROWS,
                           max_future_s=settings.INGEST_MAX_FUTURE_S)
    prepare(batch)  # as the consumer does: the writer must notice the refused GPUs' rows
    batch.key_id = envelope["signature"]["key_id"]
    return store_batches([batch])[0]


def with_job(envelope: dict, **fields) -> dict:
    envelope["jobs"][0].update(fields)
    return envelope


def sample_counts() -> dict[str, int]:
    from django.db import connection
    with connection.cursor() as cur:
        cur.execute("SELECT g.uuid, count(*) FROM telemetry_gpusample s "
                    "JOIN inventory_gpu g ON g.id = s.gpu_id GROUP BY g.uuid")
        return dict(cur.fetchall())


# --- the node name ---------------------------------------------------------------------

def test_a_node_key_is_accepted_for_its_own_node(keys):
    result = ingest(signed(node_batch("gpu-t001", start=START)))
    assert result.gpu_samples == 24 and result.rejected == 0
    assert IngestBatch.objects.get().key_id == "test-1"
    assert signed(node_batch("gpu-t001"))["signature"]["alg"] == "hmac-sha256-node"


def test_a_batch_naming_another_node_is_refused_whole(keys):
    # Signed with gpu-t001's key while naming gpu-t002: the signature says gpu-t002 (what
    # signing.sign writes), but only gpu-t002's own key makes that signature.
    forged = signed(node_batch("gpu-t002", start=START), as_node="gpu-t001")
    assert ingest(forged) == ("signature: does not match (node key of 'gpu-t002', key id "
                              "'test-1'): altered, or not signed with this node's own key")
    # gpu-t001's genuine signature, with the node name changed afterwards.
    relabelled = signed(node_batch("gpu-t001", start=START))
    relabelled["node"] = "gpu-t002"
    assert ingest(relabelled) == (
        "signature: made with the node key of 'gpu-t001', but the batch says node 'gpu-t002': "
        "a node key signs only its own node")
    # ... and its signature relabelled too: the HMAC no longer matches.
    relabelled["signature"]["node"] = "gpu-t002"
    assert ingest(relabelled).startswith("signature: does not match (node key of 'gpu-t002'")
    assert not Node.objects.exists() and not IngestBatch.objects.exists()
    assert RejectedBatch.objects.count() == 3


def test_node_keys_differ_per_node_and_cluster():
    a = signing.derive_node_key(SECRETS["test"], "test", "gpu-t001")
    assert a == signing.derive_node_key(SECRETS["test"], "test", "gpu-t001")
    assert signing.well_formed_node_key(a)
    others = {signing.derive_node_key(SECRETS["test"], "test", "gpu-t002"),
              signing.derive_node_key(SECRETS["test"], "other", "gpu-t001"),
              signing.derive_node_key(SECRETS["other"], "test", "gpu-t001"),
              # the length prefixes keep (cluster, node) pairs apart however they split
              signing.derive_node_key(SECRETS["test"], "testg", "pu-t001")}
    assert a not in others and len(others) == 4


def test_hkdf_is_rfc5869():
    # RFC 5869, Appendix A.1 (test case 1) and A.3 (test case 3: no salt, no info).
    ikm = bytes.fromhex("0b" * 22)
    okm = signing.hkdf_sha256(ikm, bytes.fromhex("000102030405060708090a0b0c"),
                              bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"), 42)
    assert okm.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                         "34007208d5b887185865")
    assert signing.hkdf_sha256(ikm, b"", b"", 42).hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
        "9d201395faa4b61a96c8")


# --- GPUs ------------------------------------------------------------------------------

def test_a_gpu_of_another_cluster_is_refused_with_its_rows_and_events(keys):
    assert ingest(signed(node_batch("gpu-t001", start=START))).rejected == 0
    before = sample_counts()
    owner = Gpu.objects.get(uuid="GPU-gpu-t001-0").node_id

    def forged(seq: int) -> dict:
        envelope = node_batch("gpu-o001", cluster="other", seq=seq, start=START + seq * 30)
        envelope["gpus"][0]["uuid"] = "GPU-gpu-t001-0"
        envelope["gpus"][1]["uuid"] = "GPU-gpu-t001-1"
        envelope["events"] = [
            {"ts": START + seq * 30, "gpu": 0, "kind": "xid", "code": 79, "message": "forged"},
            {"ts": START + seq * 30, "gpu": 2, "kind": "xid", "code": 13, "message": "own"}]
        return signed(envelope)

    # The second batch has the same inventory: the writer's cache answers, and refuses too.
    for seq in (1, 2):
        result = ingest(forged(seq))
        assert (result.gpu_samples, result.rejected) == (18, 2 + 6 + 1)
        log = IngestBatch.objects.get(node__name="gpu-o001", seq=seq)
        assert (log.gpu_samples, log.events, log.rejected) == (18, 1, 9)
        assert log.rejected_reasons == {
            "gpus: uuid GPU-gpu-t001-0 belongs to cluster test; refused": 1,
            "gpus: uuid GPU-gpu-t001-1 belongs to cluster test; refused": 1,
            "gpu_samples: gpu refused (its uuid belongs to another cluster)": 6,
            "events: gpu refused (its uuid belongs to another cluster)": 1,
        }
        assert log.rejected_examples["gpus: uuid GPU-gpu-t001-0 belongs to cluster test; "
                                     "refused"] == "gpus[0]"

    assert Gpu.objects.get(uuid="GPU-gpu-t001-0").node_id == owner
    assert Gpu.objects.get(uuid="GPU-gpu-t001-1").node_id == owner
    after = sample_counts()
    assert after["GPU-gpu-t001-0"] == before["GPU-gpu-t001-0"] == 3
    assert after["GPU-gpu-o001-2"] == 6  # the batch's own GPUs landed
    assert set(GpuEvent.objects.values_list("gpu__uuid", "message")) == {
        ("GPU-gpu-o001-2", "own")}


def test_a_gpu_moving_within_its_cluster_moves_and_says_so(keys, client):
    ingest(signed(node_batch("gpu-t001", start=START)))
    moved = node_batch("gpu-t002", start=START + 60, gpus=2)
    moved["gpus"][1]["uuid"] = "GPU-gpu-t001-5"
    result = ingest(signed(moved))
    assert result.rejected == 0
    gpu = Gpu.objects.get(uuid="GPU-gpu-t001-5")
    assert gpu.node.name == "gpu-t002"
    event = GpuEvent.objects.get(kind="moved")
    assert (event.gpu_id, event.message) == (gpu.id, "moved from node gpu-t001 to node gpu-t002")
    assert event.batch_id == result.batch_id
    assert sample_counts()["GPU-gpu-t001-5"] == 6  # its history went with it
    # Shown with the GPU's other events on its new node's page.
    client.force_login(get_user_model().objects.create_user("ops", is_staff=True))
    page = client.get(f"/nodes/{gpu.node_id}/?range=24h")
    assert page.status_code == 200
    assert "moved from node gpu-t001 to node gpu-t002" in page.content.decode()


# --- job owners ------------------------------------------------------------------------

def test_a_foreign_node_cannot_change_a_jobs_owner_but_its_origin_node_can(keys, client):
    ingest(signed(with_job(node_batch("gpu-t001", start=START), user="bob")))
    job = Job.objects.get()
    assert (job.user, job.origin_node.name) == ("bob", "gpu-t001")

    # gpu-t002, with its own valid key, re-reports bob's job as alice's.
    forged = with_job(node_batch("gpu-t002", start=START + 30), user="alice",
                      account="evil", name="mine")
    assert ingest(signed(forged)).rejected == 0  # the batch itself is fine
    job.refresh_from_db()
    assert (job.user, job.account, job.name) == ("bob", "nlp", "train")
    assert set(JobMetadataChange.objects.values_list(
        "job_id", "node__name", "field", "old", "new", "accepted")) == {
        (job.id, "gpu-t002", "user", "bob", "alice", False),
        (job.id, "gpu-t002", "account", "nlp", "evil", False),
        (job.id, "gpu-t002", "name", "train", "mine", False),
    }
    alice = get_user_model().objects.create_user("alice")
    assert not Job.objects.visible_to(alice).exists()
    client.force_login(alice)
    assert client.get(f"/jobs/{job.id}/").status_code == 404
    assert client.get(f"/api/v1/jobs/{job.id}/").status_code == 404

    # The node that reported the job first may change it (the scheduler renamed it).
    ingest(signed(with_job(node_batch("gpu-t001", seq=2, start=START + 60), user="bob",
                           name="train-v2")))
    job.refresh_from_db()
    assert job.name == "train-v2"
    assert JobMetadataChange.objects.filter(accepted=True).values_list(
        "node__name", "field", "old", "new").get() == ("gpu-t001", "name", "train", "train-v2")


def test_an_empty_owner_field_may_be_filled_in_by_any_node_that_reports_the_job(keys):
    ingest(signed(with_job(node_batch("gpu-t001", start=START), user="bob", account="")))
    ingest(signed(with_job(node_batch("gpu-t002", start=START + 30), user="bob",
                           account="nlp")))
    job = Job.objects.get()
    assert (job.user, job.account) == ("bob", "nlp")
    change = JobMetadataChange.objects.get()
    assert (change.node.name, change.field, change.old, change.new, change.accepted) == (
        "gpu-t002", "account", "", "nlp", True)
    # Once filled, it is the origin's to change, not the filler's.
    ingest(signed(with_job(node_batch("gpu-t002", seq=2, start=START + 60), user="bob",
                           account="vision")))
    job.refresh_from_db()
    assert job.account == "nlp"
    assert JobMetadataChange.objects.filter(accepted=False).count() == 1


# --- through a real bulk consumer --------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_real_bulk_consumer_enforces_node_identity(make_worker, broker_url):
    for cluster, secret in SECRETS.items():
        IngestKey.objects.create(cluster=cluster, key_id=KEY_IDS[cluster], secret=secret)
    make_worker(kind="bulk", extra_env={"INGEST_REQUIRE_SIGNATURE": "1"})
    senders = {node: RedisSender(broker_url, signing_key=(KEY_IDS["test"],
                                                             node_key("test", node)))
               for node in ("gpu-t001", "gpu-t002")}
    simulator = RedisSender(broker_url, signing_key=signing.node_signer(KEY_IDS["other"],
                                                                         SECRETS["other"]))
    try:
        senders["gpu-t001"].send(with_job(node_batch("gpu-t001", start=START), user="bob"))
        wait_for(lambda: Job.objects.exists(), timeout=30, what="bob's job")
        # gpu-t002's collector, broken into: writes as gpu-t001, then claims bob's job.
        senders["gpu-t002"].send(node_batch("gpu-t001", seq=2, start=START + 30))
        senders["gpu-t002"].send(with_job(node_batch("gpu-t002", start=START + 30),
                                          user="alice"))
        other = node_batch("gpu-o001", cluster="other", start=START + 30, gpus=2)
        other["gpus"][0]["uuid"] = "GPU-gpu-t001-0"
        simulator.send(other)
    finally:
        for sender in (*senders.values(), simulator):
            sender.close()
    wait_for(lambda: RejectedBatch.objects.exists(), timeout=30, what="the forged node")
    wait_for(lambda: IngestBatch.objects.count() == 3, timeout=30, what="the other batches")
    assert RejectedBatch.objects.get().reason.startswith(
        "signature: does not match (node key of 'gpu-t001'")
    assert not IngestBatch.objects.filter(node__name="gpu-t001", seq=2).exists()
    assert Job.objects.get(cluster__name="test").user == "bob"
    assert JobMetadataChange.objects.values_list("field", "new", "accepted").get() == (
        "user", "alice", False)
    assert Gpu.objects.get(uuid="GPU-gpu-t001-0").node.name == "gpu-t001"
    assert IngestBatch.objects.get(node__name="gpu-o001").rejected_reasons == {
        "gpus: uuid GPU-gpu-t001-0 belongs to cluster test; refused": 1,
        "gpu_samples: gpu refused (its uuid belongs to another cluster)": 3,
    }
    assert dict(Gpu.objects.values_list("node__name").annotate(n=Count("id"))) == {
        "gpu-t001": 8, "gpu-t002": 8, "gpu-o001": 1}
