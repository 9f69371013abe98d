"""The "now" tables (GpuLatest, NicLatest) that every overview reads: each device's newest
sample wins, whatever order batches and rows arrive in; a late batch never moves "now"
back. Through the real bulk consumer (Redis, PostgreSQL) and the single-batch writer.
"""

import pytest
from django.db import transaction

from clusterui.ingest.consumer import Consumer
from clusterui.ingest.queue import ReliableQueue
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.telemetry.models import GpuLatest, NicLatest
from tests.factories import node_batch, recent_start
from tests.services import publish

START = recent_start()


def batch(seq: int, offset: int, *, node: str = "gpu-l1", reverse: bool = False) -> dict:
    """Two GPUs and a NIC, three samples 10 s apart from START + offset; each value says
    its time: GPU util = seconds after START / 10 + GPU index (an int, as JSON may carry
    it), NIC receive rate = seconds after START."""
    b = node_batch(node=node, seq=seq, samples=3, gpus=2, nics=1, start=START + offset)
    for row in b["gpu_samples"]["rows"]:
        row[3] = int(row[0] - START) // 10 + row[1]
    for row in b["nic_samples"]["rows"]:
        row[2] = float(row[0] - START)
    if reverse:
        b["gpu_samples"]["rows"].reverse()
        b["nic_samples"]["rows"].reverse()
    return b


def now_tables(node: str = "gpu-l1") -> tuple[dict, dict]:
    gpus = {g.gpu.index: (g.ts.timestamp() - START, g.util_pct)
            for g in GpuLatest.objects.filter(gpu__node__name=node).select_related("gpu")}
    nics = {n.nic.name: (n.ts.timestamp() - START, n.rx_bytes_per_s)
            for n in NicLatest.objects.filter(nic__node__name=node).select_related("nic")}
    return gpus, nics


def flush(broker, *batches) -> None:
    publish(*batches)
    c = Consumer(queue=ReliableQueue(broker, "ingest", ttl_s=60))
    while c.step(block_s=0):
        pass
    assert c.totals.stored == c.totals.messages == len(batches)


@pytest.mark.django_db(transaction=True)
def test_the_newest_sample_wins_and_a_late_batch_never_moves_now_back(broker, clean_samples):
    # One flush, the newer batch first and its rows newest first.
    flush(broker, batch(2, 100, reverse=True), batch(1, 0))
    assert now_tables() == ({0: (120, 12.0), 1: (120, 13.0)}, {"mlx5_0:1": (120, 120.0)})
    flush(broker, batch(3, 50))  # late: older than what "now" shows
    assert now_tables() == ({0: (120, 12.0), 1: (120, 13.0)}, {"mlx5_0:1": (120, 120.0)})
    flush(broker, batch(4, 200), batch(1, 0, node="gpu-l2"))  # newer, and another node
    assert now_tables() == ({0: (220, 22.0), 1: (220, 23.0)}, {"mlx5_0:1": (220, 220.0)})
    assert now_tables("gpu-l2") == ({0: (20, 2.0), 1: (20, 3.0)}, {"mlx5_0:1": (20, 20.0)})


@pytest.mark.django_db(transaction=True)
def test_several_stores_in_one_transaction_each_update_now(clean_samples):
    """A caller's transaction around several stores (no commit between them)."""
    with transaction.atomic():
        store_batch(validate_batch(batch(1, 0)))
        assert now_tables()[0] == {0: (20, 2.0), 1: (20, 3.0)}
        store_batch(validate_batch(batch(2, 100)))
        store_batch(validate_batch(batch(3, 50)))
    assert now_tables() == ({0: (120, 12.0), 1: (120, 13.0)}, {"mlx5_0:1": (120, 120.0)})


@pytest.mark.django_db(transaction=True)
def test_updating_now_leaves_the_indexes_alone(clean_samples):
    """Each flush rewrites every reporting GPU's "now" row: with room left on its page
    (fillfactor, migration telemetry 0012) PostgreSQL updates it in place as a heap-only
    tuple, adding no index entry, however many GPUs fill the table's pages."""
    from django.db import connection

    from clusterui.ingest.writer import store_batches

    def stored(seq):
        store_batches([validate_batch(node_batch(node=f"gpu-h{i:02d}", seq=seq, gpus=8,
                                                 samples=1, start=START + 10 * seq))
                       for i in range(40)])

    def counters():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_stat_force_next_flush()")
        with connection.cursor() as cur:  # a new transaction: the flushed counters
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                        "WHERE relname = 'telemetry_gpulatest'")
            return cur.fetchone()

    stored(1)  # 320 rows: several full pages at the default fillfactor
    with connection.cursor() as cur:
        cur.execute("SELECT pg_relation_size('telemetry_gpulatest') / 8192")
        assert cur.fetchone()[0] >= 3
    updated, hot = counters()
    stored(2)
    updated_after, hot_after = counters()
    assert updated_after - updated == 320
    assert hot_after - hot == 320  # every one of them in place
