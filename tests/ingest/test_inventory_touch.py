"""A flush moves the last_seen of the GPUs, NICs and allocations whose data moved on by a
minute with one UPDATE per table (``writer._Touch``), and each of those updates stays on
its row's page (fillfactor, migrations inventory 0006 and jobs 0008): no index entry. So do
the updates every flush makes to each node's row and to its collector run's row in the
ingest log (ingest 0008: no index on a column they change, room on the page)."""

import time

import pytest
from django.db import connection

from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)
TABLES = ("inventory_gpu", "inventory_nic", "jobs_jobgpu", "inventory_node", "ingest_ingestrun")


def counters() -> dict[str, tuple[int, int]]:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cur:  # a new transaction: the flushed counters
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                    "WHERE relname = ANY(%s)", [list(TABLES)])
        return {name: (updated, hot) for name, updated, hot in cur.fetchall()}


def test_touching_last_seen_leaves_the_indexes_alone(clean_samples):
    start = float(int(time.time()) - 3600)  # whole seconds: compared exactly below

    def stored(seq, at):
        store_batches([validate_batch(node_batch(node=f"gpu-h{i:02d}", seq=seq, gpus=8,
                                                 samples=1, start=at, job=f"j{i}", nics=2,
                                                 job_started=start - 600))
                       for i in range(40)])

    stored(1, start)  # 320 GPUs, 80 NICs, 320 allocations, 40 nodes and their runs
    before = counters()
    stored(2, start + 120)  # the same inventory, two minutes of data later: touched
    after = counters()
    expected = {"inventory_gpu": 320, "inventory_nic": 80, "jobs_jobgpu": 320,
                "inventory_node": 40, "ingest_ingestrun": 40}
    for table, rows in expected.items():
        updated = after[table][0] - before[table][0]
        hot = after[table][1] - before[table][1]
        assert (updated, hot) == (rows, rows), table
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM inventory_gpu "
                    "WHERE last_seen = to_timestamp(%s)", [start + 120])
        assert cur.fetchone()[0] == 320
