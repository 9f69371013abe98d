"""The hourly usage sums (``usage_rollup``) give the direct sum over the jobs' efficiency
rows for any range that ends now: random jobs, figures updated, jobs ending, reopened by
late data, measured from later or earlier, back-filled, renamed and deleted, before and
after the detector pass folds the changes in."""

import datetime as dt
import random

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from clusterui.findings import usage_rollup
from clusterui.findings.models import JobEfficiency, UsageDirty
from clusterui.findings.runner import run_pass
from clusterui.jobs.models import Job
from clusterui.jobs.usage import usage_summary
from tests import rows

pytestmark = pytest.mark.django_db

USERS = ["alice", "bob", "carol", "dave", ""]
ACCOUNTS = ["nlp", "vision", ""]


def _make_job(rnd: random.Random, now: dt.datetime) -> Job:
    started = now - dt.timedelta(minutes=rnd.randint(1, 60 * 60))
    ended = None
    if rnd.random() < 0.7:
        ended = min(now, started + dt.timedelta(minutes=rnd.randint(0, 30 * 60)))
    j = rows.job(rnd.choice(USERS), account=rnd.choice(ACCOUNTS), started_at=started,
                 ended_at=ended, state="ended" if ended else "running")
    if rnd.random() < 0.1:
        Job.objects.filter(pk=j.pk).update(started_at=None)
    if rnd.random() < 0.03:  # not started yet by the range's end (clock skew)
        Job.objects.filter(pk=j.pk).update(started_at=now + dt.timedelta(minutes=5))
    if rnd.random() < 0.8:
        _set_figures(rnd, j.pk, now)
    return j


def _set_figures(rnd: random.Random, job_id: int, now: dt.datetime) -> None:
    allocated = rnd.uniform(0, 50)
    used = rnd.uniform(0, allocated)
    JobEfficiency.objects.update_or_create(job_id=job_id, defaults=dict(
        computed_at=now, window_start=now - dt.timedelta(hours=1), window_end=now,
        gpus=1, gpu_hours_allocated=allocated, gpu_hours_used=used,
        gpu_hours_wasted=allocated - used, util_source="sm_active",
        measured_from=_measured_from(rnd, now)))


def _measured_from(rnd: random.Random, now: dt.datetime) -> dt.datetime | None:
    """Unknown (computed before ClusterUI kept it), from the window's start, or later:
    ClusterUI came after the job started."""
    what = rnd.random()
    if what < 0.2:
        return None
    if what < 0.5:
        return now - dt.timedelta(hours=1)
    return now - dt.timedelta(minutes=rnd.uniform(0, 60))


def _change(rnd: random.Random, now: dt.datetime) -> None:
    ids = list(Job.objects.values_list("id", flat=True))
    for job_id in rnd.sample(ids, min(len(ids), 25)):
        what = rnd.random()
        if what < 0.3:  # the pass updates the figures
            _set_figures(rnd, job_id, now)
        elif what < 0.45:  # the job ends (close_stale_jobs, or the scheduler says so)
            Job.objects.filter(pk=job_id, ended_at__isnull=True).update(
                state="ended", ended_at=now - dt.timedelta(minutes=rnd.randint(0, 40 * 60)))
        elif what < 0.55:  # late data reopens an ended job
            Job.objects.filter(pk=job_id).update(state="running", ended_at=None)
        elif what < 0.65:  # its end moves (a later report)
            Job.objects.filter(pk=job_id).update(
                ended_at=now - dt.timedelta(minutes=rnd.randint(0, 30 * 60)))
        elif what < 0.72:
            Job.objects.filter(pk=job_id).update(user=rnd.choice(USERS),
                                                 account=rnd.choice(ACCOUNTS))
        elif what < 0.76:  # late data earlier than its first sample: only the share moves
            JobEfficiency.objects.filter(job_id=job_id).update(
                measured_from=_measured_from(rnd, now))
        elif what < 0.8:
            JobEfficiency.objects.filter(job_id=job_id).delete()
        elif what < 0.85:
            Job.objects.filter(pk=job_id).delete()
    for _ in range(rnd.randint(0, 10)):  # new jobs, some back-filled long after they ended
        _make_job(rnd, now)


def _assert_same(now: dt.datetime, rnd: random.Random) -> None:
    User = get_user_model()
    staff = User.objects.get_or_create(username="root", defaults={"is_staff": True})[0]
    alice = User.objects.get_or_create(username="alice")[0]
    starts = [now - dt.timedelta(hours=24), now - dt.timedelta(hours=1),
              now - dt.timedelta(hours=7, minutes=rnd.randint(0, 59), seconds=rnd.random()),
              now.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=30)]
    for start in starts:
        for viewer in (staff, alice):
            jobs = Job.objects.visible_to(viewer)
            for group in ("user", "account"):
                direct = usage_summary(jobs, group, start, now)
                summed = usage_summary(jobs, group, start, now, viewer=viewer, now=now)
                assert [r["name"] for r in summed] == [r["name"] for r in direct]
                for a, b in zip(summed, direct, strict=True):
                    assert a["jobs"] == b["jobs"]
                    for key in ("gpu_hours", "used_gpu_hours", "wasted_gpu_hours",
                                "measured_pct"):
                        assert a[key] == (None if b[key] is None else pytest.approx(
                            b[key], rel=1e-9, abs=1e-9)), key


def _rollup_is_ledger_sum() -> None:
    with connection.cursor() as cur:
        cur.execute("""
            SELECT count(*) FROM (
                SELECT "user", account, hour, count(*) AS n FROM findings_usagejob
                GROUP BY 1, 2, 3) l
            FULL JOIN findings_usagehour h USING ("user", account, hour)
            WHERE l.n IS DISTINCT FROM h.jobs""")
        assert cur.fetchone()[0] == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hourly_sums_equal_the_direct_sum(seed):
    rnd = random.Random(seed)
    now = timezone.now()
    for _ in range(120):
        _make_job(rnd, now)
    _assert_same(now, rnd)  # nothing folded yet: the marks carry every job
    usage_rollup.fold()
    assert not UsageDirty.objects.exists()
    _assert_same(now, rnd)
    for round_ in range(6):
        _change(rnd, now)
        _assert_same(now, rnd)  # changes marked, not folded
        if round_ % 2:
            usage_rollup.fold()
            _rollup_is_ledger_sum()
            _assert_same(now, rnd)
    usage_rollup.fold()
    usage_rollup.fold()  # nothing left: a no-op
    _rollup_is_ledger_sum()
    _assert_same(now, rnd)


def test_detector_pass_folds_the_marks():
    rnd = random.Random(7)
    now = timezone.now()
    for _ in range(20):
        _make_job(rnd, now)
    assert UsageDirty.objects.exists()
    run_pass(now)
    assert not UsageDirty.objects.exists()
    _rollup_is_ledger_sum()
    _assert_same(now, rnd)


def test_ingest_upsert_without_change_marks_nothing():
    j = rows.job("alice", efficiency={"allocated": 4.0, "used": 1.0})
    usage_rollup.fold()
    Job.objects.filter(pk=j.pk).update(last_seen=timezone.now(), state="running")
    JobEfficiency.objects.filter(job_id=j.pk).update(computed_at=timezone.now())
    assert not UsageDirty.objects.exists()


def test_a_range_in_the_past_reads_the_jobs():
    now = timezone.now()
    assert usage_rollup.usable(now - dt.timedelta(hours=24), now, now)
    assert not usage_rollup.usable(now - dt.timedelta(days=3), now - dt.timedelta(days=2), now)
