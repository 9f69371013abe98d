"""Findings wait for the data: a job whose history arrives as a backlog is judged on all of
it, whether the backlog comes while the job still runs or after it fell silent.

Batches go through the real validation and writer with the arrival time the scenario says;
the beat tasks (``close_stale_jobs``, the detector pass, silent nodes) run at the times they
would. Arrival is what ends a job and silences a node, never data time.
"""

import datetime as dt
import time

import pytest

from clusterui.findings.choices import FindingKind, FindingState
from clusterui.findings.models import Finding, JobEfficiency
from clusterui.findings.runner import run_pass
from clusterui.ingest import inventory_cache
from clusterui.ingest.silence import silent_nodes
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.jobs.choices import JobState
from clusterui.jobs.models import Job as JobRow
from clusterui.jobs.tasks import close_stale_jobs
from tests.findings.batches import Job, Node, span, steady_batch

pytestmark = pytest.mark.django_db
NOW = (time.time() // 60) * 60
BASE = NOW - 6 * 3600  # the job's history starts six hours ago


def at(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def deliver(node, job, seq, times, *, arrived: float, util=2.0):
    """One minute of the job's samples, as it reaches the server at ``arrived``."""
    envelope = steady_batch(node, seq=seq, times=times, job=job, util=util, sm=util)
    store_batch(validate_batch(envelope, now=arrived), received_at=at(arrived))


def passes_until_caught_up(now: float) -> None:
    for _ in range(20):
        if run_pass(now=at(now)).behind == 0:
            return
    raise AssertionError("the detector pass never caught up")


def per_gpu_samples(job_id: str) -> set[int]:
    eff = JobEfficiency.objects.get(job__external_id=job_id)
    return {entry["samples"] for entry in eff.per_gpu.values()}


def test_a_backlog_arriving_at_once_is_judged_on_all_of_it():
    """40 minutes of a running job's history arrive in a burst (a back-fill): the job is
    not ended while it arrives, and it is judged on every sample, not the first ten."""
    node, job = Node("late-a"), Job("701", gpus=[0, 1], started_at=BASE - 60)
    times = span(BASE, 40 * 60)
    for k in range(40):
        deliver(node, job, k + 1, times[k * 6:(k + 1) * 6], arrived=NOW)
    assert close_stale_jobs(now=at(NOW + 60)) == 0
    assert not silent_nodes(at(NOW + 60)).filter(name="late-a").exists()
    passes_until_caught_up(NOW + 60)

    row = JobRow.objects.get(external_id="701")
    assert row.state == JobState.RUNNING
    assert per_gpu_samples("701") == {240}  # every sample of both GPUs
    low = Finding.objects.get(job=row, kind=FindingKind.LOW_UTILIZATION)
    assert low.state == FindingState.OPEN and low.window_end == at(times[-1])

    # The burst is over and nothing more arrives: the job ends at its newest sample, and
    # its end is judged.
    assert close_stale_jobs(now=at(NOW + 400)) == 1
    row.refresh_from_db()
    assert row.ended_at == at(times[-1])
    assert run_pass(now=at(NOW + 460)).finalized == 1
    assert (row.ended_at - row.started_at) == dt.timedelta(minutes=41)


def test_a_backlog_after_the_job_fell_silent_reopens_it_and_is_judged():
    """The node is cut off from the broker after 10 minutes; its collector spools; the job
    is ended for silence and finalized. An hour later the spool replays 40 more minutes: the
    job runs again, is judged on all 50 minutes, keeps one finding, and ends at its real end.
    """
    node, job = Node("late-b"), Job("702", gpus=[0, 1], started_at=BASE - 60)
    live = span(BASE, 10 * 60)
    for k in range(10):
        chunk = live[k * 6:(k + 1) * 6]
        deliver(node, job, k + 1, chunk, arrived=chunk[-1] + 2)
        run_pass(now=at(chunk[-1] + 30))
    cut = live[-1]
    assert close_stale_jobs(now=at(cut + 400)) == 1
    assert run_pass(now=at(cut + 460)).finalized == 1
    row = JobRow.objects.get(external_id="702")
    assert row.state == JobState.ENDED and row.ended_at == at(cut)
    assert silent_nodes(at(cut + 400)).filter(name="late-b").exists()

    replay = span(cut, 40 * 60)
    arrived = cut + 3600
    inventory_cache.forget()  # an hour passed: the writer refreshes what it remembered
    for k in range(40):
        deliver(node, job, 11 + k, replay[k * 6:(k + 1) * 6], arrived=arrived)
    row.refresh_from_db()
    assert row.state == JobState.RUNNING  # its data goes on past the inferred end
    assert not silent_nodes(at(arrived + 30)).filter(name="late-b").exists()
    passes_until_caught_up(arrived + 60)
    assert per_gpu_samples("702") == {300}  # 10 live minutes and 40 replayed, both GPUs

    assert close_stale_jobs(now=at(arrived + 400)) == 1
    assert run_pass(now=at(arrived + 460)).finalized == 1
    row.refresh_from_db()
    assert row.ended_at == at(replay[-1])
    lows = list(Finding.objects.filter(job=row, kind=FindingKind.LOW_UTILIZATION))
    assert len(lows) == 1, [(f.state, f.first_seen, f.closed_at) for f in lows]
    low = lows[0]
    assert low.state == FindingState.CLOSED
    assert low.first_seen <= low.last_seen <= low.closed_at
    assert low.closed_at >= at(replay[-1])


@pytest.mark.django_db(transaction=True)  # ingest remembers what it wrote on commit
def test_a_job_ends_at_its_newest_sample_though_ingest_writes_its_time_every_minute(
        clean_samples):
    """Ingest refreshes a job's data time every minute of data (writing it on every flush
    cost a tenth of ingest); the end comes from the samples themselves."""
    node, job = Node("late-c"), Job("703", gpus=[0, 1], started_at=BASE - 60)
    times = span(BASE, 120)  # 12 samples, one batch each, 10 s apart
    for k, ts in enumerate(times):
        deliver(node, job, k + 1, [ts], arrived=NOW)
    row = JobRow.objects.get(external_id="703")
    assert row.last_seen < at(times[-1])  # the last batches moved it less than a minute
    assert close_stale_jobs(now=at(NOW + 400)) == 1
    row.refresh_from_db()
    assert row.ended_at == row.last_seen == at(times[-1])


def deliver_minutes(node, job, minutes, *, start, arrived, util=2.0, seq_base=1):
    """Whole minutes of the job's samples (10 s apart), one batch per minute."""
    for m in minutes:
        times = span(start + 60 * m, 60)
        deliver(node, job, seq_base + m, times, arrived=arrived, util=util)


def late_spans() -> int:
    from clusterui.findings.models import LateSpan
    return LateSpan.objects.count()


def test_batches_out_of_order_are_all_counted():
    """Minutes 10-14 of a running job come after minutes 15-19 and after a pass moved past
    them: the next pass adds them, and the job is judged on every sample."""
    node, job = Node("late-d"), Job("704", gpus=[0, 1], started_at=BASE - 60)
    deliver_minutes(node, job, [*range(10), *range(15, 20)], start=BASE, arrived=NOW)
    passes_until_caught_up(NOW + 60)
    assert per_gpu_samples("704") == {90}
    assert late_spans() == 0  # in order: nothing to catch up on

    deliver_minutes(node, job, range(10, 15), start=BASE, arrived=NOW + 90)
    assert late_spans() == 5
    run_pass(now=at(NOW + 120))
    assert late_spans() == 0
    assert per_gpu_samples("704") == {120}
    eff = JobEfficiency.objects.get(job__external_id="704")
    gpus = list(eff.accum["gpus"].values())
    assert {dt.datetime.fromisoformat(a["last_ts"]) for a in gpus} == {at(BASE + 20 * 60)}
    assert {dt.datetime.fromisoformat(a["first_ts"]) for a in gpus} == {at(BASE + 10)}
    run_pass(now=at(NOW + 180))
    assert per_gpu_samples("704") == {120}  # counted once


def test_late_data_of_a_finalized_job_is_judged_and_says_so():
    """A busy job's first and last minutes came live; its idle middle came an hour after it
    was finalized (say, from a second spool). It is judged again on all of it: low
    utilization, raised from late data and saying so, closed at the job's end."""
    node, job = Node("late-e"), Job("705", gpus=[0, 1], started_at=BASE - 700)
    for m in (0, 1, 28, 29):
        times = span(BASE + 60 * m, 60)
        deliver(node, job, 1 + m, times, arrived=times[-1] + 2, util=90.0)
        run_pass(now=at(times[-1] + 31))
    end = BASE + 30 * 60
    assert close_stale_jobs(now=at(end + 400)) == 1
    assert run_pass(now=at(end + 460)).finalized == 1
    assert not Finding.objects.filter(job__external_id="705").exists()

    inventory_cache.forget()
    deliver_minutes(node, job, range(2, 28), start=BASE, arrived=end + 3600, util=2.0)
    result = run_pass(now=at(end + 3630))
    assert result.late == 26 and result.finalized == 1  # one span per late batch
    assert per_gpu_samples("705") == {180}
    row = JobRow.objects.get(external_id="705")
    assert row.state == JobState.ENDED and row.ended_at == at(end)
    low = Finding.objects.get(job=row, kind=FindingKind.LOW_UTILIZATION)
    assert low.state == FindingState.CLOSED and low.closed_at == at(end)
    assert "reached ClusterUI late" in low.explanation and low.evidence["late_data"] is True
    eff = JobEfficiency.objects.get(job=row)
    assert eff.finalized_at == at(end + 3630)
    assert eff.gpu_hours_used < 0.2 * eff.gpu_hours_allocated


def test_late_data_older_than_the_window_raises_its_own_finding(settings):
    """A running job's idle minutes 5-14 arrive after the pass's ten-minute window has moved
    on to its busy minutes: the window those minutes end is judged; the finding says it
    came from late data, and the live judgement is not disturbed."""
    settings.DETECTOR_WINDOW_S = 600
    node, job = Node("late-f"), Job("706", gpus=[0, 1], started_at=BASE - 700)
    deliver_minutes(node, job, [*range(5), *range(15, 30)], start=BASE, arrived=NOW,
                    util=90.0)
    passes_until_caught_up(NOW + 60)
    assert not Finding.objects.filter(job__external_id="706").exists()

    deliver_minutes(node, job, range(5, 15), start=BASE, arrived=NOW + 90, util=2.0)
    run_pass(now=at(NOW + 120))
    low = Finding.objects.get(job__external_id="706", kind=FindingKind.LOW_UTILIZATION)
    assert low.state == FindingState.OPEN
    assert low.window_end == at(BASE + 15 * 60)
    assert low.first_seen <= low.last_seen
    assert "reached ClusterUI late" in low.explanation
    assert per_gpu_samples("706") == {180}


def test_late_batches_of_one_sample_each_are_counted_and_judged():
    """At 60 s sampling every batch holds one sample: a late one spans a single instant.
    Forty minutes of them in a shuffled order, passes in between, are all counted (the
    scenario matrix found that such spans were skipped: 9 to 31 of 40 samples counted and
    the job's low utilization never raised)."""
    import random

    from clusterui.findings.matrix import generate
    from clusterui.findings.matrix.cases import CASES

    case = next(c for c in CASES if c.name == "low-util")
    plan = generate.build(run="t", cluster="late", end=NOW, shapes=("out-of-order",),
                          rates=(60,), cases=(case,))
    batches = list(plan.feeds["out-of-order"][0].batches)
    random.Random(3).shuffle(batches)
    arrived = NOW + 5
    for i in range(0, len(batches), 5):
        for envelope in batches[i:i + 5]:
            store_batch(validate_batch(envelope, now=arrived), received_at=at(arrived))
        run_pass(now=at(arrived))
        arrived += 2
    close_stale_jobs(now=at(arrived + 600))
    run_pass(now=at(arrived + 600))
    eff = JobEfficiency.objects.get()
    assert eff.finalized_at is not None
    assert {g["samples"] for g in eff.per_gpu.values()} == {generate.RUN_S // 60}
    assert set(Finding.objects.values_list("kind", flat=True)) == {FindingKind.LOW_UTILIZATION}


def test_batches_taken_before_a_pass_gave_their_node_up_are_read_when_they_commit(settings):
    """A two-node job's history arrives as a backlog, node after node (the scenario matrix
    failed on this in CI: 1,050 of a node's 1,200 samples counted). The second node's last
    batches are taken by the consumer 9 s after its previous ones (not silent then) but
    commit only after a pass a minute later, which gave the node up as silent and moved the
    job past their time. Those samples are not lost: ingest sees that the pass passed them
    and the next pass reads them, however long the flush took."""
    settings.NODE_SILENT_AFTER_S = 10
    first, second = Node("late-h0"), Node("late-h1")
    job = Job("708", gpus=[0, 1], started_at=BASE - 60)
    deliver_minutes(first, job, range(40), start=BASE, arrived=NOW)
    deliver_minutes(second, job, range(35), start=BASE, arrived=NOW)
    passes_until_caught_up(NOW + 60)  # both nodes last heard a minute ago: given up
    eff = JobEfficiency.objects.get(job__external_id="708")
    assert eff.through == at(BASE + 40 * 60)  # past the second node's minutes 35-39
    deliver_minutes(second, job, range(35, 40), start=BASE, arrived=NOW + 9, seq_base=1)
    assert late_spans() == 5
    passes_until_caught_up(NOW + 70)
    assert per_gpu_samples("708") == {240}  # every sample of all four GPUs


def test_a_node_first_heard_after_a_pass_read_its_job_on_another_is_counted():
    """A backlog node after node, a pass between them: the job's second node is new to the
    server when its history arrives, after the pass read the job to the end of the first
    node's data (the scenario matrix counted none of such a node's 240 samples). Its
    samples are counted, and the job is judged on all four GPUs."""
    first, second = Node("late-i0"), Node("late-i1")
    job = Job("709", gpus=[0, 1], started_at=BASE - 60)
    deliver_minutes(first, job, range(40), start=BASE, arrived=NOW)
    passes_until_caught_up(NOW + 5)
    assert per_gpu_samples("709") == {240}
    deliver_minutes(second, job, range(40), start=BASE, arrived=NOW + 6)
    assert late_spans() == 40
    passes_until_caught_up(NOW + 10)
    eff = JobEfficiency.objects.get(job__external_id="709")
    assert len(eff.per_gpu) == 4
    assert per_gpu_samples("709") == {240}


def test_a_pass_gives_up_rather_than_stall_ingest_behind_a_flush_held_up(monkeypatch):
    """A flush holds the late-span lock (shared) and is held up (here: a transaction that
    never ends). The pass waits for it at most LATE_LOCK_TIMEOUT, since flushes that start
    meanwhile queue behind a waiting pass: it gives up, writes nothing, and the next pass,
    once the flush is done, reads the job as usual."""
    import psycopg
    from django.db import connection as django_connection

    from clusterui.findings import late

    monkeypatch.setattr(late, "LATE_LOCK_TIMEOUT", "200ms")
    with django_connection.cursor() as cur:  # a pass that waited for ever fails, not hangs
        cur.execute("SET statement_timeout = '20s'")
    node, job = Node("late-j"), Job("710", gpus=[0, 1], started_at=BASE - 60)
    deliver_minutes(node, job, range(5), start=BASE, arrived=NOW)
    params = django_connection.get_connection_params()
    with psycopg.connect(host=params.get("host"), port=params.get("port"),
                         user=params.get("user"), dbname=params["dbname"]) as flush:
        flush.execute("SELECT pg_advisory_xact_lock_shared(%s)", [late.LATE_LOCK_KEY])
        result = run_pass(now=at(NOW + 60))
        assert result.locked_out and result.judged == 0
        assert not JobEfficiency.objects.filter(job__external_id="710").exists()
        flush.rollback()
    assert not run_pass(now=at(NOW + 60)).locked_out
    assert per_gpu_samples("710") == {30}
