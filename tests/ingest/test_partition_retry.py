"""The writer's retry when a partition it believed in is gone (another process's retention
dropped it mid-flush): the retried flush must not trust what the rolled-back one remembered.
Real PostgreSQL, the real writer."""

import datetime as dt
import time

import pytest
from django.db import connection

from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.inventory.models import Gpu
from clusterui.telemetry import partitions
from tests.factories import node_batch

pytestmark = pytest.mark.django_db


def test_a_new_board_stored_on_the_retry_exists_with_its_samples():
    now = time.time()
    store_batches([validate_batch(node_batch(seq=1, samples=1, start=now - 120))])
    # Retention in another process drops today's partition: this process still believes
    # in it, so the next flush's COPY fails and the writer retries once.
    day = dt.datetime.fromtimestamp(now - 60, dt.UTC).date()
    with connection.cursor() as cur:
        cur.execute(f'DROP TABLE {partitions.partition_name("telemetry_gpusample", day)}')
    replaced = node_batch(seq=2, samples=1, start=now - 60)
    replaced["gpus"][7]["uuid"] = "GPU-new-board"
    [result] = store_batches([validate_batch(replaced)])
    assert not result.duplicate and result.gpu_samples == 8
    board = Gpu.objects.get(uuid="GPU-new-board")  # the rolled-back insert happened again
    assert abs(board.last_seen.timestamp() - (now - 60)) < 1
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM telemetry_gpusample s "
                    "LEFT JOIN inventory_gpu g ON g.id = s.gpu_id WHERE g.id IS NULL")
        assert cur.fetchone()[0] == 0  # no sample of a GPU that does not exist
        cur.execute("SELECT count(*) FROM telemetry_gpusample WHERE gpu_id = %s", [board.id])
        assert cur.fetchone()[0] == 1
