"""The bulk consumer: many queued batches in one transaction, each stored exactly once, bad
messages set aside with their reason and the good ones around them stored.

Real Redis (the test broker database), real PostgreSQL, messages published through Celery
exactly as a collector publishes them.
"""

import gc
import sys

import pytest
from django.db import connection

from clusterui.celery import app
from clusterui.ingest import deadletter
from clusterui.ingest.auth import forget_keys
from clusterui.ingest.consumer import Consumer
from clusterui.ingest.messages import envelope_of
from clusterui.ingest.models import IngestBatch, IngestKey, RejectedBatch
from clusterui.ingest.queue import ReliableQueue
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from collectors import signing
from tests.factories import node_batch, recent_start
from tests.services import publish

pytestmark = pytest.mark.django_db(transaction=True)

START = recent_start()


def gpu_rows() -> tuple[int, int]:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), count(DISTINCT (gpu_id, ts)) FROM telemetry_gpusample")
        return cur.fetchone()


def consumer(broker, **kwargs) -> Consumer:
    return Consumer(queue=ReliableQueue(broker, "ingest", ttl_s=kwargs.pop("ttl_s", 60)),
                    **kwargs)


def drain(c: Consumer) -> None:
    while c.step(block_s=0):
        pass


def backends() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cur.fetchone()[0]


# A flush larger than max_rows is stored as several transactions, by a storing thread while
# the next group is validated: the same outcome is asked of both ways. A node batch of two
# samples is 20 rows (16 GPU, 2 NIC, 2 job rows): 60 makes groups of three batches.
GROUPS = pytest.mark.parametrize("max_rows", [50_000, 60],
                                 ids=["one transaction", "groups stored by a thread"])


@GROUPS
def test_a_flush_stores_many_batches_once_each_in_order(broker, clean_samples, max_rows):
    batches = [node_batch(node=f"gpu-b{n:02d}", seq=s, samples=2, start=START + s * 20)
               for s in range(1, 6) for n in range(8)]
    publish(*batches)
    publish(*batches[:5])  # redelivered copies, in the same flush
    c = consumer(broker, max_messages=500, max_rows=max_rows)
    items = c.queue.take(500, block_s=0)
    assert len(items) == 45
    before, interval = backends(), sys.getswitchinterval()
    result = c.flush(items)
    c.queue.ack()
    assert (result.stored, result.duplicates, result.refused) == (40, 5, 0)
    assert result.gpu_samples == 40 * 16
    assert gpu_rows() == (40 * 16, 40 * 16)
    assert backends() == before  # the storing thread's connection is closed with the flush
    # One transaction per group: the 40 new batches in groups of three are 14.
    with connection.cursor() as cur:
        cur.execute("SELECT count(DISTINCT xmin::text) FROM ingest_ingestbatch")
        assert cur.fetchone()[0] == (1 if max_rows == 50_000 else 14)
    assert gc.isenabled()  # held off only while the flush decodes
    assert sys.getswitchinterval() == interval  # shortened only while the storing thread runs
    assert broker.llen("ingest") == 0 and c.queue.inflight() == 0
    # Each node's batches got ascending ids in sequence order: the queue's order is kept.
    for n in range(8):
        seqs = list(IngestBatch.objects.filter(node__name=f"gpu-b{n:02d}")
                    .order_by("id").values_list("seq", flat=True))
        assert seqs == [1, 2, 3, 4, 5]


def test_bulk_and_single_stores_agree(broker, clean_samples):
    """The same batch stored by the Celery task's path and by a flush gives the same rows."""
    one = node_batch(node="gpu-single", samples=3, start=START)
    two = node_batch(node="gpu-bulk", samples=3, start=START)
    store_batch(validate_batch(one, now=START + 60))
    publish(two)
    drain(consumer(broker))
    with connection.cursor() as cur:
        cur.execute("""
            SELECT n.name, s.ts, g.index, s.util_pct, s.power_w, s.temp_c, s.mem_used_mib,
                   s.throttle_reasons, s.energy_j, j.external_id
            FROM telemetry_gpusample s JOIN inventory_gpu g ON g.id = s.gpu_id
            JOIN inventory_node n ON n.id = g.node_id LEFT JOIN jobs_job j ON j.id = s.job_id
            ORDER BY s.ts, g.index, n.name""")
        rows = cur.fetchall()
    single = [r[1:] for r in rows if r[0] == "gpu-single"]
    bulk = [r[1:] for r in rows if r[0] == "gpu-bulk"]
    assert len(single) == 24 and single == bulk
    latest = {name: (ts, util) for name, ts, util in connection.cursor().execute(
        "SELECT n.name, max(l.ts), max(l.util_pct) FROM telemetry_gpulatest l "
        "JOIN inventory_gpu g ON g.id = l.gpu_id JOIN inventory_node n ON n.id = g.node_id "
        "GROUP BY n.name").fetchall()}
    assert latest["gpu-single"] == latest["gpu-bulk"]


def test_bad_messages_are_set_aside_and_the_good_ones_around_them_land(broker, clean_samples):
    good = [node_batch(node=f"gpu-g{n}", samples=2, start=START) for n in range(4)]
    publish(good[0])
    broker.lpush("ingest", b"\x00 not a message at all")  # raw bytes, not even JSON
    publish({"schema": 1, "cluster": "test"})  # a batch validation refuses
    publish(good[1])
    app.send_task("clusterui.not_ingest", args=[1], queue="ingest")  # a stray task
    publish(good[2])
    publish(good[3])
    c = consumer(broker)
    drain(c)
    assert IngestBatch.objects.count() == 4
    assert gpu_rows() == (64, 64)
    assert list(RejectedBatch.objects.values_list("reason", flat=True)) == ["node: missing"]
    reasons = sorted(e["reason"] for e in deadletter.entries())
    assert reasons[0].startswith("not a Celery message: not JSON")
    assert reasons[1] == ("task 'clusterui.not_ingest' on the ingest queue; only "
                          "clusterui.ingest belongs there")
    assert c.totals.dead_lettered == 2 and c.totals.refused == 1
    assert broker.llen("ingest") == 0 and c.queue.inflight() == 0


def test_sealed_batches_are_verified_over_their_bytes_and_a_forged_one_alone_is_refused(
        broker, clean_samples):
    """Signature version 2 (the collector's) next to version 1 (still accepted) in one
    flush; a sealed batch whose text was altered is refused with its reason."""
    secret = "bulk-consumer-test-secret-0123456789"
    IngestKey.objects.create(cluster="test", key_id="k1", secret=secret)
    forget_keys()

    def key(node):
        return signing.derive_node_key(secret, "test", node)

    sealed = [signing.seal(node_batch(node=f"gpu-s{n}", samples=2, start=START), "k1",
                           key(f"gpu-s{n}")) for n in range(3)]
    forged = signing.seal(node_batch(node="gpu-s9", samples=2, start=START), "k1",
                          key("gpu-s9"))
    forged["batch"] = forged["batch"].replace('"seq":1', '"seq":7')
    old = signing.sign(node_batch(node="gpu-s4", samples=2, start=START), "k1", key("gpu-s4"))
    publish(sealed[0], forged, sealed[1], old, sealed[2])
    c = consumer(broker)
    try:
        drain(c)
    finally:
        forget_keys()
    assert sorted(IngestBatch.objects.values_list("node__name", "key_id")) == [
        ("gpu-s0", "k1"), ("gpu-s1", "k1"), ("gpu-s2", "k1"), ("gpu-s4", "k1")]
    assert gpu_rows() == (64, 64)
    assert list(RejectedBatch.objects.values_list("node", "reason")) == [(
        "gpu-s9", "signature: does not match (node key of 'gpu-s9', key id 'k1'): altered, "
        "or not signed with this node's own key")]
    assert c.totals.refused == 1 and c.totals.dead_lettered == 0


@GROUPS
def test_a_batch_the_database_refuses_is_dead_lettered_alone(broker, clean_samples, max_rows):
    """A batch that passes validation but that PostgreSQL refuses (here a trigger stands for
    any constraint) fails its flush; the flush is retried batch by batch, so only it is set
    aside."""
    with connection.cursor() as cur:
        cur.execute("""
            CREATE FUNCTION refuse_poison() RETURNS trigger AS $$
            BEGIN
              IF NEW.name = 'gpu-poison' THEN RAISE EXCEPTION 'node name refused'; END IF;
              RETURN NEW;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_poison BEFORE INSERT ON inventory_node
            FOR EACH ROW EXECUTE FUNCTION refuse_poison();
        """)
    try:
        publish(*[node_batch(node=name, samples=2, start=START)
                  for name in ("gpu-p1", "gpu-poison", "gpu-p2", "gpu-p3")])
        c = consumer(broker, max_rows=max_rows)
        drain(c)
    finally:
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER refuse_poison ON inventory_node; "
                        "DROP FUNCTION refuse_poison()")
    assert sorted(IngestBatch.objects.values_list("node__name", flat=True)) == [
        "gpu-p1", "gpu-p2", "gpu-p3"]
    (entry,) = deadletter.entries()
    assert "node name refused" in entry["reason"]
    assert entry["args"][0]["node"] == "gpu-poison"  # the envelope, to be re-queued later
    assert c.totals.stored == 3 and c.totals.dead_lettered == 1


def test_a_dead_consumers_messages_come_back_and_are_stored_once(broker, clean_samples):
    batches = [node_batch(node="gpu-d", seq=s, samples=1, start=START + s * 10)
               for s in range(1, 21)]
    publish(*batches)
    # A consumer takes ten messages, stores them, and dies before acknowledging.
    dying = consumer(broker, ttl_s=1)
    dying.queue.heartbeat()
    taken = dying.queue.take(10, block_s=0)
    dying.flush(taken)
    assert broker.llen("ingest") == 10 and dying.queue.inflight() == 10
    # Another consumer: while the first one's liveness key lives, its messages stay put.
    survivor = consumer(broker)
    assert survivor.queue.sweep() == 0
    broker.delete(dying.queue.alive_key)  # what expiry does after ttl_s
    assert survivor.queue.sweep() == 10
    # They come back as suspects, each with one death counted, and are taken one at a time.
    assert survivor.queue.suspects() == 10 and broker.hlen(survivor.queue.deliveries_key) == 10
    assert survivor.step(block_s=0) and survivor.totals.messages == 1
    drain(survivor)
    assert survivor.totals.stored == 10 and survivor.totals.duplicates == 10
    assert IngestBatch.objects.count() == 20
    assert gpu_rows() == (160, 160)
    assert broker.llen("ingest") == 0 and survivor.queue.inflight() == 0
    assert broker.hlen(survivor.queue.deliveries_key) == 0  # counts go once they are stored


def test_items_in_flight_are_visible_and_given_back_on_a_clean_stop(broker, clean_samples):
    publish(*[node_batch(node="gpu-s", seq=s, samples=1, start=START + s * 10)
              for s in range(1, 4)])
    c = consumer(broker)
    c.queue.heartbeat()
    taken = c.queue.take(10, block_s=0)
    assert [envelope_of(m)["agent"]["seq"] for m in taken] == [1, 2, 3]  # oldest first
    assert c.queue.consumers() == 1 and c.queue.inflight() == 3
    assert c.queue.release() == 3
    assert broker.llen("ingest") == 3 and c.queue.inflight() == 0 and c.queue.consumers() == 0


def test_a_take_is_bounded_by_size_as_well_as_count(broker, clean_samples):
    publish(*[node_batch(node="gpu-z", seq=s, samples=1, start=START + s * 10)
              for s in range(1, 6)])
    sizes = {len(m) for m in broker.lrange("ingest", 0, -1)}
    assert len(sizes) == 1  # five messages of one size
    one = sizes.pop()
    # The message that crosses the budget is the last one taken.
    q = ReliableQueue(broker, "ingest", max_bytes=2 * one + 1)
    taken = []
    for _ in range(2):
        taken.append([envelope_of(m)["agent"]["seq"] for m in q.take(100, block_s=0)])
        q.ack()
    assert taken == [[1, 2, 3], [4, 5]]
    publish(node_batch(node="gpu-z", seq=6, samples=1, start=START + 60))
    publish(node_batch(node="gpu-z", seq=7, samples=1, start=START + 70))
    tiny = ReliableQueue(broker, "ingest", max_bytes=1)  # always at least one message
    assert len(tiny.take(100, block_s=0)) == 1


@GROUPS
def test_any_exception_while_storing_sets_aside_that_batch_alone(broker, clean_samples,
                                                                 monkeypatch, max_rows):
    """Not only database errors: a value the writer cannot encode (the tester's
    throttle_reasons = 2**63 made COPY raise OverflowError) fails its flush inside the
    transaction; the flush is retried batch by batch and only that batch is dead-lettered."""
    from clusterui.ingest import writer

    real = writer._insert_events

    def _insert_events(cur, batch, gpu_ids, batch_id):
        if batch.node == "gpu-overflow":
            raise OverflowError("int too big to convert")
        return real(cur, batch, gpu_ids, batch_id)

    monkeypatch.setattr(writer, "_insert_events", _insert_events)
    publish(*[node_batch(node=name, samples=2, start=START)
              for name in ("gpu-o1", "gpu-o2", "gpu-overflow", "gpu-o3")])
    c = consumer(broker, max_rows=max_rows)
    interval = sys.getswitchinterval()
    drain(c)
    assert sys.getswitchinterval() == interval  # Python's again, though the flush failed
    assert sorted(IngestBatch.objects.values_list("node__name", flat=True)) == [
        "gpu-o1", "gpu-o2", "gpu-o3"]
    (entry,) = deadletter.entries()
    assert entry["reason"] == "OverflowError: int too big to convert"
    assert entry["args"][0]["node"] == "gpu-overflow"  # the envelope, to be re-queued later
    assert (c.totals.stored, c.totals.dead_lettered) == (3, 1)
    assert broker.llen("ingest") == 0 and c.queue.inflight() == 0
    # The consumer goes on: the next flush stores normally.
    publish(node_batch(node="gpu-o4", samples=2, start=START))
    drain(c)
    assert c.totals.stored == 4 and gpu_rows() == (64, 64)


def test_any_exception_while_validating_sets_aside_that_message_alone(broker, clean_samples,
                                                                      monkeypatch):
    from clusterui.ingest import consumer as consumer_module

    real = consumer_module.validate_batch

    def validate(envelope, **kwargs):
        if envelope.get("node") == "gpu-bug":
            raise KeyError("a bug in validation")
        return real(envelope, **kwargs)

    monkeypatch.setattr(consumer_module, "validate_batch", validate)
    publish(*[node_batch(node=name, samples=2, start=START)
              for name in ("gpu-v1", "gpu-bug", "gpu-v2")])
    c = consumer(broker)
    drain(c)
    assert sorted(IngestBatch.objects.values_list("node__name", flat=True)) == [
        "gpu-v1", "gpu-v2"]
    (entry,) = deadletter.entries()
    assert entry["reason"] == "KeyError: 'a bug in validation'"
    assert entry["args"][0]["node"] == "gpu-bug"
    assert broker.llen("ingest") == 0 and c.queue.inflight() == 0


def test_a_message_that_took_down_max_deliveries_consumers_is_dead_lettered(broker,
                                                                            clean_samples):
    """Deaths are counted per message only when a dead consumer's in-flight list is swept;
    a clean release counts nothing."""
    publish(node_batch(node="gpu-x", seq=1, samples=1, start=START),
            node_batch(node="gpu-x", seq=2, samples=1, start=START + 10))
    sweeper = consumer(broker)
    # A clean stop: the messages go back to the queue, uncounted.
    polite = consumer(broker)
    polite.queue.heartbeat()
    assert len(polite.queue.take(10, block_s=0)) == 2
    assert polite.queue.release() == 2
    assert broker.llen("ingest") == 2 and broker.hlen(sweeper.queue.deliveries_key) == 0
    # The first consumer to die holds both: both become suspects with one death.
    doomed = consumer(broker, max_deliveries=3)
    doomed.queue.heartbeat()
    poison, good = doomed.queue.take(10, block_s=0)
    broker.delete(doomed.queue.alive_key)
    assert sweeper.queue.sweep() == 2 and sweeper.queue.suspects() == 2
    for deaths in (1, 2):
        # Taken one at a time: the next consumer holds the poison alone when it dies.
        doomed = consumer(broker, max_deliveries=3)
        doomed.queue.heartbeat()
        taken = doomed.queue.take_suspect()
        assert taken == (poison, deaths)
        if deaths == 2:
            # A clean release of a suspect keeps it a suspect, with its count unchanged.
            assert doomed.queue.release() == 1
            assert doomed.queue.take_suspect() == (poison, 2)
        broker.delete(doomed.queue.alive_key)
        assert sweeper.queue.sweep() == 1
    # Three deaths: the next consumer sets it aside instead of storing it; the good one,
    # which was in flight with it once, is stored.
    survivor = consumer(broker, max_deliveries=3)
    drain(survivor)
    (entry,) = deadletter.entries()
    assert entry["reason"] == "took down a consumer 3 times"
    assert entry["args"][0]["agent"]["seq"] == envelope_of(poison)["agent"]["seq"] == 1
    assert list(IngestBatch.objects.values_list("seq", flat=True)) == [2]
    assert envelope_of(good)["agent"]["seq"] == 2
    assert survivor.queue.suspects() == 0 and survivor.queue.inflight() == 0
    assert broker.hlen(survivor.queue.deliveries_key) == 0


def test_given_back_messages_keep_their_order(broker, clean_samples):
    """A release or a sweep puts messages back oldest next out, as they were queued."""
    publish(*[node_batch(node="gpu-o", seq=s, samples=1, start=START + s * 10)
              for s in range(1, 5)])
    q = ReliableQueue(broker, "ingest")
    q.heartbeat()
    assert len(q.take(10, block_s=0)) == 4
    q.release()
    q.heartbeat()
    assert [envelope_of(m)["agent"]["seq"] for m in q.take(10, block_s=0)] == [1, 2, 3, 4]
    broker.delete(q.alive_key)
    assert ReliableQueue(broker, "ingest").sweep() == 4
    seqs = []
    while taken := q.take_suspect():
        seqs.append(envelope_of(taken[0])["agent"]["seq"])
        q.ack()
    assert seqs == [1, 2, 3, 4]
