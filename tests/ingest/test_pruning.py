"""Bounded bookkeeping: the ingest log is pruned after INGEST_LOG_RETENTION_DAYS without
touching telemetry, and the health page reads a recent window only (no phantom gaps, nodes
with a wrong clock shown with their evidence). Real PostgreSQL, the real writer."""

import datetime as dt
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from clusterui.celery import app
from clusterui.ingest import health
from clusterui.ingest.models import IngestBatch, IngestRun, RejectedBatch
from clusterui.ingest.pruning import prune_ingest_log
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.telemetry.models import GpuEvent
from tests.factories import node_batch

pytestmark = pytest.mark.django_db



@pytest.fixture
def staff_client(client):
    user = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    client.force_login(user)
    return client


def count(table: str) -> int:
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return cur.fetchone()[0]


def store_seqs(seqs, *, node="gpu-t001", boot_id="b", start=None):
    start = time.time() - 3600 if start is None else start
    for seq in seqs:
        envelope = node_batch(node=node, boot_id=boot_id, seq=seq, samples=1,
                              start=start + seq * 10)
        if seq == 1:
            envelope["events"] = [{"ts": start + 10, "gpu": 0, "kind": "xid", "code": 79,
                                   "message": "GPU has fallen off the bus"}]
        store_batch(validate_batch(envelope))


def age(seqs, days: float, boot_id="b") -> None:
    IngestBatch.objects.filter(boot_id=boot_id, seq__in=seqs).update(
        received_at=timezone.now() - dt.timedelta(days=days))


def test_the_beat_schedule_prunes_the_log():
    entry = app.conf.beat_schedule["prune-ingest-log"]
    assert entry["task"] == "clusterui.ingest.prune_ingest_log"
    assert "clusterui.ingest.prune_ingest_log" in app.tasks


def test_pruning_deletes_old_log_rows_only_and_keeps_the_telemetry(settings):
    settings.INGEST_LOG_RETENTION_DAYS = 7
    store_seqs(range(1, 7))
    age([1, 2, 3], days=8)
    store_seqs([1, 2], boot_id="gone")  # a run that ended long ago
    age([1, 2], days=8, boot_id="gone")
    IngestRun.objects.filter(boot_id="gone").update(
        last_received=timezone.now() - dt.timedelta(days=8))
    RejectedBatch.objects.create(node="gpu-x", reason="old refusal")
    RejectedBatch.objects.create(node="gpu-x", reason="new refusal")
    RejectedBatch.objects.filter(reason="old refusal").update(
        received_at=timezone.now() - dt.timedelta(days=9))
    samples = (count("telemetry_gpusample"), count("telemetry_nicsample"),
               count("telemetry_jobsample"))
    event = GpuEvent.objects.get(batch__boot_id="b")
    assert event.batch_id == IngestBatch.objects.get(boot_id="b", seq=1).id

    result = prune_ingest_log(rows=2)  # two rows per transaction: several transactions

    assert sorted(IngestBatch.objects.values_list("seq", flat=True)) == [4, 5, 6]
    assert (result.batches, result.refusals, result.runs, result.events_detached) == (
        5, 1, 1, 2)
    assert list(IngestRun.objects.values_list("boot_id", flat=True)) == ["b"]
    assert result.transactions >= 3 and not result.unfinished
    assert list(RejectedBatch.objects.values_list("reason", flat=True)) == ["new refusal"]
    event.refresh_from_db()  # the events stay, without their (pruned) batches
    assert event.batch_id is None and event.code == 79
    assert GpuEvent.objects.filter(batch__isnull=True).count() == 2
    assert (count("telemetry_gpusample"), count("telemetry_nicsample"),
            count("telemetry_jobsample")) == samples
    assert prune_ingest_log().batches == 0  # nothing more to do


def test_gaps_are_counted_in_the_window_so_pruning_makes_no_phantom_gaps(settings):
    settings.INGEST_LOG_RETENTION_DAYS = 7
    store_seqs([s for s in range(1, 11) if s != 7])  # batch 7 was lost
    store_seqs([3, 4, 5], boot_id="other")  # a run whose batches 1-2 came before the window
    age([1, 2, 3, 4], days=8)
    assert health.gaps_by_node() == [{"cluster": "test", "node": "gpu-t001", "missing": 1}]
    prune_ingest_log()
    assert IngestBatch.objects.filter(boot_id="b").count() == 5
    # Only the real gap: not the four pruned batches, not the other run's first two.
    assert health.gaps_by_node() == [{"cluster": "test", "node": "gpu-t001", "missing": 1}]
    store_seqs([7])  # the lost batch arrives late: the gap closes itself
    assert health.gaps_by_node() == []


def test_a_node_with_its_clock_off_is_shown_with_the_evidence(staff_client, settings):
    settings.INGEST_CLOCK_TOLERANCE_S = 60
    now = time.time()
    # Clock ahead by four minutes: its batches say they were sent after they arrived.
    ahead = node_batch(node="gpu-ahead", samples=1, start=now - 30)
    ahead["sent_at"] = now + 240
    store_batch(validate_batch(ahead, now=now))
    # Clock ahead by an hour: its sent_at is past belief (INGEST_MAX_FUTURE_S) and dropped.
    far = node_batch(node="gpu-far-ahead", samples=1, start=now - 30)
    far["sent_at"] = now + 3600
    store_batch(validate_batch(far, now=now))
    # Clock far ahead: its samples are in the future and refused for their time.
    future = node_batch(node="gpu-future", samples=2, start=now - 10)
    future["gpu_samples"]["rows"][-1][0] = now + 3600
    future["sent_at"] = now
    store_batch(validate_batch(future, now=now))
    store_batch(validate_batch(node_batch(node="gpu-fine", samples=1, start=now - 20),
                               now=now))

    response = staff_client.get("/ingest/health/")
    assert response.status_code == 200
    clocks = {c["node"]: c for c in response.context["clock_off"]}
    assert set(clocks) == {"gpu-ahead", "gpu-far-ahead", "gpu-future"}
    assert clocks["gpu-ahead"]["ahead_s"] == pytest.approx(240 - 10, abs=15)
    (far_reason,) = clocks["gpu-far-ahead"]["reasons"]
    assert far_reason["reason"].startswith("sent_at:") and "clock" in far_reason["reason"]
    assert clocks["gpu-ahead"]["refused"] == 0
    (reason,) = clocks["gpu-future"]["reasons"]
    assert "in the future" in reason["reason"] and reason["count"] == 1
    assert clocks["gpu-future"]["refused"] == 1 and clocks["gpu-future"]["ahead_s"] is None
    page = response.content.decode()
    section = page[page.index('id="clocks"'):page.index('id="rejected"')]
    assert "gpu-ahead" in section and "gpu-future" in section and "gpu-fine" not in section
    assert "in the future" in section


def test_the_page_shows_duplicates_not_stored(staff_client):
    start = time.time() - 600
    store_batch(validate_batch(node_batch(boot_id="a", samples=2, start=start)))
    store_batch(validate_batch(node_batch(boot_id="b", samples=2, start=start)))
    response = staff_client.get("/ingest/health/")
    dups = {d["reason"]: d["count"] for d in response.context["duplicates"]}
    assert dups["gpu_samples: duplicate of a stored sample (gpu, ts)"] == 16
    page = response.content.decode()
    assert "gpu_samples: duplicate of a stored sample (gpu, ts)" in page
