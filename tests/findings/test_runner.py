"""The detector pass over stored samples: findings open, update, escalate and close; one open
finding per job and kind; the grace period; the end of a job; any sampling interval."""

import datetime as dt
import time
from dataclasses import replace

import psycopg
import pytest
from django.db import connection

from clusterui.findings.choices import FindingKind, FindingState, Severity
from clusterui.findings.models import Finding, GpuSlice, JobEfficiency
from clusterui.findings.runner import LOCK_KEY, run_pass
from clusterui.findings.thresholds import Thresholds
from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job as JobRow
from tests.findings.batches import Job, Node, span, steady_batch

T = Thresholds()
BASE = (time.time() // 60 - 240) * 60  # a minute boundary, four hours ago


def at(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


class Feed:
    """Stores steady minutes for one node's job and runs passes as beat would."""

    def __init__(self, node=None, job=None, interval=10.0, start=BASE):
        self.node = node or Node("r001")
        self.job = job or Job("501", gpus=list(range(self.node.gpus)), started_at=start - 3600)
        self.interval = interval
        self.t = start
        self.seq = 0

    def minutes(self, n, util, thresholds=T, **kw):
        """Store ``n`` minutes at ``util``, running a pass after each minute."""
        result = None
        for _ in range(n):
            self.seq += 1
            times = span(self.t, 60, self.interval)
            ingest_envelope(steady_batch(self.node, seq=self.seq, times=times, job=self.job,
                                         util=util, interval=self.interval, **kw))
            self.t = times[-1]
            result = run_pass(now=at(self.t + thresholds.settle_s), thresholds=thresholds)
        return result


def findings(kind=None):
    qs = Finding.objects.order_by("id")
    return list(qs.filter(kind=kind) if kind else qs)


@pytest.mark.django_db
def test_a_finding_opens_updates_escalates_and_closes():
    # Allocated from the job's start, an hour before its first sample: 2 GPUs x 66 min,
    # 98 % wasted, is 2.16 GPU-hours after 6 minutes, 2.35 after 12. The severity counts the
    # part measured: 2 GPUs x 6 min x 98 %, 0.20 GPU-hours, then 0.39 after 12.
    t = replace(T, window_s=600, waste_warning_gpu_h=0.3)
    feed = Feed()
    feed.minutes(6, util=2.0, thresholds=t)
    [first] = findings(FindingKind.LOW_UTILIZATION)
    assert first.state == FindingState.OPEN and first.severity == Severity.INFO
    opened_at = first.last_seen

    feed.minutes(6, util=2.0, thresholds=t)  # the condition lasts: the same finding, updated
    [again] = findings(FindingKind.LOW_UTILIZATION)
    assert again.pk == first.pk and again.first_seen == first.first_seen
    assert again.last_seen > opened_at and again.window_end == again.last_seen
    assert again.severity == Severity.WARNING  # 2 GPUs x 12 min measured: past 0.3 GPU-hours
    assert again.evidence["gpu_hours_wasted"] > first.evidence["gpu_hours_wasted"]

    # Busy for 6 minutes: the 10-minute window's mean passes 25 % after 3, but a finding
    # closes only once its condition has been gone for 10 minutes: no flapping.
    feed.minutes(6, util=90.0, thresholds=t)
    [still] = findings(FindingKind.LOW_UTILIZATION)
    assert still.state == FindingState.OPEN and still.last_seen < at(feed.t)

    feed.minutes(9, util=90.0, thresholds=t)  # gone for 10 minutes now: closed
    [closed] = findings(FindingKind.LOW_UTILIZATION)
    assert closed.state == FindingState.CLOSED
    assert (closed.closed_at - closed.last_seen).total_seconds() >= t.close_after_s
    assert closed.severity == Severity.WARNING

    feed.minutes(11, util=2.0, thresholds=t)  # idle again: a new finding, the old one kept
    lows = findings(FindingKind.LOW_UTILIZATION)
    assert [f.state for f in lows] == [FindingState.CLOSED, FindingState.OPEN]


@pytest.mark.django_db
def test_one_open_finding_per_job_and_kind_over_many_passes():
    feed = Feed()
    for _ in range(4):
        feed.minutes(5, util=1.0)
        run_pass(now=at(feed.t + 30))  # a second pass over the same data changes nothing
    assert Finding.objects.filter(kind=FindingKind.LOW_UTILIZATION).count() == 1
    assert Finding.objects.open().count() == 1


@pytest.mark.django_db
def test_nothing_is_flagged_inside_the_grace_period():
    feed = Feed(job=Job("502", gpus=[0, 1], started_at=BASE))
    feed.minutes(9, util=0.0)  # 9 idle minutes, grace is 10
    assert findings() == []
    eff = JobEfficiency.objects.get(job__external_id="502")
    assert eff.gpu_hours_wasted == pytest.approx(2 * 9 / 60)  # efficiency counts from the start
    assert eff.judged_at is None  # the job page says it has not been judged yet
    feed.minutes(6, util=0.0)  # 5 minutes past the grace period: judged
    assert [f.kind for f in findings()] == [FindingKind.LOW_UTILIZATION]
    assert JobEfficiency.objects.get(job__external_id="502").judged_at == at(feed.t)
    assert findings()[0].window_start == at(BASE + 600)


@pytest.mark.django_db
@pytest.mark.parametrize("interval", [1.0, 10.0, 60.0])
def test_detectors_work_at_every_sampling_interval(interval):
    feed = Feed(interval=interval)
    result = feed.minutes(11, util=[95.0, 0.0])  # 10 samples at 60 s need 10 minutes
    assert result.judged == 1
    assert {f.kind for f in findings()} == {FindingKind.IDLE_GPU}
    [idle] = findings()
    assert idle.evidence["idle_gpus"][0]["index"] == 1
    assert idle.evidence["window_min"] == 11.0


@pytest.mark.django_db
def test_too_few_samples_are_not_judged():
    feed = Feed(interval=60.0)
    feed.minutes(6, util=0.0)  # 6 samples at 60 s: fewer than the 10 required
    assert findings() == []


@pytest.mark.django_db
def test_a_job_that_ends_is_finalized_and_its_findings_closed():
    feed = Feed()
    feed.minutes(7, util=0.0)
    assert Finding.objects.open().count() == 1
    end = feed.t
    JobRow.objects.filter(external_id="501").update(state="ended", ended_at=at(end))
    result = run_pass(now=at(end + 60))
    assert result.finalized == 1
    [f] = findings()
    assert f.state == FindingState.CLOSED and f.closed_at == at(end)
    eff = JobEfficiency.objects.get(job__external_id="501")
    assert eff.finalized_at is not None and eff.window_end == at(end)
    assert not GpuSlice.objects.filter(job__external_id="501").exists()
    assert run_pass(now=at(end + 120)).jobs == 0  # its books are closed


@pytest.mark.django_db
def test_ended_job_waits_for_its_slowest_node():
    a, b = Node("m001"), Node("m002")
    job = Job("503", gpus=[0, 1], started_at=BASE - 3600)
    times = span(BASE, 600)
    ingest_envelope(steady_batch(a, seq=1, times=times, job=job, util=0.0))
    ingest_envelope(steady_batch(b, seq=1, times=times[:30], job=job, util=0.0))
    JobRow.objects.filter(external_id="503").update(state="ended", ended_at=at(times[-1]))
    # Node b is still reporting (not silent) but only up to minute 5: wait for it.
    result = run_pass(now=at(times[29] + 60), thresholds=T)
    assert result.finalized == 0
    assert JobEfficiency.objects.get(job__external_id="503").through == at(times[29])
    ingest_envelope(steady_batch(b, seq=2, times=times[30:], job=job, util=0.0))
    assert run_pass(now=at(times[-1] + 60)).finalized == 1
    eff = JobEfficiency.objects.get(job__external_id="503")
    # From the job's start, an hour before its first sample, to its end.
    assert eff.gpus == 4 and eff.gpu_hours_allocated == pytest.approx(4 * 4200 / 3600)


@pytest.mark.django_db
def test_a_long_backlog_is_caught_up_over_passes_before_judging():
    feed = Feed()
    times = span(BASE, 2 * 3600)
    ingest_envelope(steady_batch(feed.node, seq=1, times=times, job=feed.job, util=0.0))
    now = at(times[-1] + 30)
    first = run_pass(now=now)
    assert first.behind == 1 and first.judged == 0 and findings() == []
    second = run_pass(now=now)
    assert second.behind == 0 and second.judged == 1
    eff = JobEfficiency.objects.get(job__external_id="501")
    assert eff.gpu_hours_allocated == pytest.approx(2 * 3.0)  # from its start, 1 h earlier
    assert [f.kind for f in findings()] == [FindingKind.LOW_UTILIZATION]


@pytest.mark.django_db
def test_allocated_gpu_hours_count_from_the_schedulers_start_not_the_first_sample():
    # 2 h 56 min on 4 GPUs; our samples cover only its last 10 minutes.
    ran_s = 2 * 3600 + 56 * 60
    feed = Feed(node=Node("r010", gpus=4),
                job=Job("510", gpus=[0, 1, 2, 3], started_at=BASE + 600 - ran_s))
    feed.minutes(10, util=95.0)
    JobRow.objects.filter(external_id="510").update(state="ended", ended_at=at(feed.t))
    run_pass(now=at(feed.t + 60))
    eff = JobEfficiency.objects.get(job__external_id="510")
    assert eff.finalized_at is not None
    assert eff.window_start == at(BASE + 600 - ran_s)
    assert eff.gpu_hours_allocated == pytest.approx(4 * ran_s / 3600)  # 11.73, not 0.67


@pytest.mark.django_db
@pytest.mark.parametrize("bits, flagged", [(0x10, False), (0x1, False), (0x20, True),
                                           (0x4, True)])
def test_only_real_throttle_reasons_count(bits, flagged):
    feed = Feed()
    feed.minutes(7, util=95.0, sm=75.0, throttle=bits, clock=1300.0)
    assert bool(findings(FindingKind.THROTTLING)) is flagged


@pytest.mark.django_db
def test_xid_on_a_jobs_gpu_and_on_a_free_gpu():
    node = Node("x001", gpus=2)
    job = Job("504", gpus=[0], started_at=BASE - 3600)
    times = span(BASE, 420)
    ingest_envelope(steady_batch(node, seq=1, times=times, job=job, util=[95.0, 0.0], events=[
        {"ts": times[3], "gpu": 0, "kind": "xid", "code": 79,
         "message": "GPU has fallen off the bus"},
        {"ts": times[5], "gpu": 1, "kind": "xid", "code": 48, "message": "Double Bit ECC Error"},
    ]))
    run_pass(now=at(times[-1] + 30))
    [on_job] = Finding.objects.filter(job__external_id="504")
    assert on_job.kind == FindingKind.GPU_ERRORS and on_job.severity == Severity.CRITICAL
    assert on_job.gpu.index == 0 and on_job.node.name == "x001"
    [on_node] = Finding.objects.filter(job__isnull=True)
    assert on_node.node.name == "x001" and on_node.gpu.index == 1
    assert "Xid 48" in on_node.explanation and "unallocated GPUs of x001" in on_node.explanation
    # An hour later with no new error: both close.
    later = span(times[-1], 3600)
    ingest_envelope(steady_batch(node, seq=2, times=later, job=job, util=[95.0, 0.0]))
    run_pass(now=at(later[-1] + 30))
    assert Finding.objects.open().count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_second_pass_while_one_runs_returns_at_once(clean_samples):
    settings = connection.settings_dict
    dsn = (f"host={settings['HOST']} port={settings['PORT'] or 5432} "
           f"user={settings['USER']} dbname={settings['NAME']}")
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        assert run_pass().locked_out is True
        other.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    assert run_pass().locked_out is False


@pytest.mark.django_db
def test_samples_are_counted_once_across_passes_to_the_microsecond():
    # Collectors stamp samples with fractions of a second: where one pass stops and the
    # next begins must not drop or repeat the sample on the boundary.
    feed = Feed(start=BASE + 0.654321)
    feed.minutes(3, util=50.0)
    eff = JobEfficiency.objects.get(job__external_id="501")
    assert eff.through == at(feed.t)
    assert [g["samples"] for g in eff.per_gpu.values()] == [18, 18]


@pytest.mark.django_db
def test_thresholds_come_from_the_settings(settings):
    settings.DETECTOR_LOW_UTIL_PCT = 30.0
    settings.DETECTOR_GRACE_S = 0
    assert Thresholds.from_settings().low_util_pct == 30.0
    feed = Feed(job=Job("505", gpus=[0, 1], started_at=BASE))
    feed.minutes(6, util=27.0, thresholds=Thresholds.from_settings())
    assert [f.kind for f in findings()] == [FindingKind.LOW_UTILIZATION]


@pytest.mark.django_db
def test_a_findings_times_are_ordered_when_the_scheduler_reports_an_earlier_end():
    feed = Feed()
    feed.minutes(7, util=0.0)
    [f] = findings()
    assert f.state == FindingState.OPEN
    # The scheduler's end precedes the last data already judged (the epilog ran late).
    JobRow.objects.filter(external_id="501").update(state="ended", ended_at=at(feed.t - 180))
    assert run_pass(now=at(feed.t + 60)).finalized == 1
    for f in findings():
        assert f.state == FindingState.CLOSED
        assert f.first_seen <= f.last_seen <= f.closed_at, (f.first_seen, f.last_seen,
                                                           f.closed_at)
