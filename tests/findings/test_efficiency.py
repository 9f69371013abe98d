"""Job efficiency and a finding's numbers against a hand computation from known samples.

Two GPUs of one job on one node, 40 samples 10 s apart (400 s of wall time), stored through
the real ingest path:

- GPU 0: NVML util 2k %, SM activity k % (k = 0..39), memory 1000 + 10k MiB, the energy
  counter rising 2000 J per sample and reset to 1500 J at k = 20, NVLink tx 60 GB/s (10 % of
  600 GB/s);
- GPU 1: util 0 %, SM 0 %, 500 MiB, no energy counter, NVLink idle;
- the node's InfiniBand port (50 GB/s) at rx 5 GB/s, tx 10 GB/s, its Ethernet port at 1 MB/s;
- the job's cgroup at 4 of its 16 cores.
"""

import datetime as dt
import html
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from clusterui.findings.choices import FindingKind, Severity, UtilSource
from clusterui.findings.models import Finding, JobEfficiency
from clusterui.findings.runner import run_pass
from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job as JobRow
from tests.findings.batches import Job, Node, Sample, node_batch

N = 40
T0 = (time.time() // 60 - 60) * 60  # a minute boundary, an hour ago
TIMES = [T0 + 10 * (k + 1) for k in range(N)]
END = TIMES[-1]


def _energy(k: int) -> float:
    return 5000 + 2000 * k if k < 20 else 1500 + 2000 * (k - 20)


def _batches(split: int | None):
    node = Node("h001")
    job = Job("77", gpus=[0, 1], started_at=T0 - 3600, cpus=16)
    gpu = {
        0: [Sample(util=2 * k, sm=k, mem=1000 + 10 * k, energy=_energy(k), nvl_tx=60e9,
                   nvl_rx=30e9) for k in range(N)],
        1: [Sample(util=0, sm=0, mem=500, nvl_tx=0.0, nvl_rx=0.0) for _ in range(N)],
    }
    nic = {0: [(5e9, 10e9)] * N, 1: [(1e6, 1e6)] * N}
    cores = {"77": [4.0] * N}
    parts = [(0, N)] if split is None else [(0, split), (split, N)]
    for seq, (a, b) in enumerate(parts, start=1):
        yield node_batch(node, seq=seq, times=TIMES[a:b], jobs=[job],
                         gpu={i: s[a:b] for i, s in gpu.items()}, owner={0: "77", 1: "77"},
                         nic={p: v[a:b] for p, v in nic.items()},
                         cores={j: v[a:b] for j, v in cores.items()})


def _store_and_pass(split):
    for batch in _batches(split):
        assert ingest_envelope(batch).rejected == 0
        last = batch["gpu_samples"]["rows"][-1][0]
        run_pass(now=dt.datetime.fromtimestamp(last + 30, dt.UTC))


# Hand computation.
# From the job's start (an hour before our first sample: the GPUs were held all along) to
# the last sample; the samples' means stand for the whole run.
WALL_H = (3600 + 400) / 3600
ALLOCATED = 2 * WALL_H
USED = 0.195 * WALL_H  # GPU 0's SM activity averages 19.5 %, GPU 1's 0 %
WASTED = ALLOCATED - USED
ENERGY = 19 * 2000 + 1500 + 19 * 2000  # rises before and after the reset, and the reset
NET_BYTES = (5e9 + 10e9) * 10 * N  # the InfiniBand port only: Ethernet is not the fabric


@pytest.mark.django_db
@pytest.mark.parametrize("split", [None, 20], ids=["one pass", "two passes across the reset"])
def test_efficiency_matches_a_hand_computation(split):
    _store_and_pass(split)
    eff = JobEfficiency.objects.get(job__external_id="77")
    assert eff.window_start == dt.datetime.fromtimestamp(T0 - 3600, dt.UTC)
    assert eff.window_end == dt.datetime.fromtimestamp(END, dt.UTC)
    assert eff.gpus == 2
    assert eff.gpu_hours_allocated == pytest.approx(ALLOCATED)
    assert eff.gpu_hours_used == pytest.approx(USED)
    assert eff.gpu_hours_wasted == pytest.approx(WASTED)
    assert eff.util_source == UtilSource.SM_ACTIVE
    assert eff.util_mean_pct == pytest.approx(9.75)
    gpu0 = eff.per_gpu["GPU-hand-h001-0"]
    # percentile_cont over 0..39: p10 at rank 3.9, p90 at rank 35.1.
    assert (gpu0["mean"], gpu0["p10"], gpu0["p90"]) == (19.5, pytest.approx(3.9),
                                                       pytest.approx(35.1))
    assert gpu0["nvml_mean"] == 39.0 and gpu0["samples"] == N
    gpu1 = eff.per_gpu["GPU-hand-h001-1"]
    assert (gpu1["mean"], gpu1["p10"], gpu1["p90"]) == (0.0, 0.0, 0.0)
    assert gpu1["wasted_gpu_hours"] == pytest.approx(WALL_H)
    assert (eff.mem_peak_mib, eff.mem_capacity_mib) == (1390, 81920)
    assert eff.energy_j == pytest.approx(ENERGY)
    assert eff.net_bytes == pytest.approx(NET_BYTES)
    assert (eff.nic_util_mean_pct, eff.nic_util_peak_pct) == (pytest.approx(20.0),
                                                             pytest.approx(20.0))
    assert (eff.nvlink_util_mean_pct, eff.nvlink_util_peak_pct) == (pytest.approx(5.0),
                                                                   pytest.approx(10.0))
    assert (eff.cpu_cores_mean, eff.cpus_allocated) == (pytest.approx(4.0), 16)
    assert eff.efficiency_pct == pytest.approx(100 * USED / ALLOCATED)
    # Measured from the first sample less one interval: 400 s of the 4,000 s window.
    assert eff.measured_from == dt.datetime.fromtimestamp(T0, dt.UTC)
    assert eff.measured_pct == pytest.approx(10.0) and eff.partly_measured


@pytest.mark.django_db
def test_the_job_page_and_the_api_say_how_much_of_the_run_was_measured():
    _store_and_pass(None)
    staff = get_user_model().objects.create_user("admin", "a@example.org", "pw", is_staff=True)
    job = JobRow.objects.get(external_id="77")
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    start, first = (dt.datetime.fromtimestamp(t, dt.UTC) for t in (T0 - 3600, T0))
    assert (f"Measured from {first:%H:%M} only: the samples cover 10 % of the time since "
            f"the job started at {start:%H:%M}. For the 1 hour before") in text

    api = APIClient()
    api.force_authenticate(staff)
    eff = api.get(f"/api/v1/jobs/{job.pk}/").json()["efficiency"]
    assert eff["measured_pct"] == pytest.approx(10.0) and eff["partly_measured"] is True
    assert dt.datetime.fromisoformat(eff["measured_from"]) == first


@pytest.mark.django_db
def test_a_job_measured_from_its_start_has_no_such_note():
    node = Node("h001")
    job = Job("78", gpus=[0], started_at=T0)  # our first sample 10 s after its start
    batch = node_batch(node, seq=1, times=TIMES, jobs=[job], gpu={0: [Sample(util=50, sm=40)] * N},
                       owner={0: "78"})
    assert ingest_envelope(batch).rejected == 0
    run_pass(now=dt.datetime.fromtimestamp(END + 30, dt.UTC))
    eff = JobEfficiency.objects.get(job__external_id="78")
    assert eff.measured_pct == pytest.approx(100.0) and not eff.partly_measured
    staff = get_user_model().objects.create_user("admin", "a@example.org", "pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("job-detail", args=[eff.job_id])).content.decode()
    assert "of the allocated GPU time was used" in page and "Measured from" not in page


@pytest.mark.django_db
def test_low_utilization_finding_carries_the_hand_computed_numbers():
    _store_and_pass(None)
    findings = {f.kind: f for f in Finding.objects.filter(job__external_id="77")}
    # GPU 0's SMs are 19.5 % active (NVML 39 %): below the 25 % a working GPU needs, so
    # this is low utilization, not one idle GPU beside a working one.
    assert set(findings) == {FindingKind.LOW_UTILIZATION}

    low = findings[FindingKind.LOW_UTILIZATION]
    # Judged on SM activity: (19.5 % + 0 %) / 2; NVML utilization (39 % + 0 %) / 2 beside it.
    assert low.evidence["activity_mean_pct"] == 9.8
    assert low.evidence["util_mean_pct"] == 19.5
    assert low.evidence["sm_active_mean_pct"] == 9.8
    assert low.evidence["gpu_hours_allocated"] == round(ALLOCATED, 2)
    assert low.evidence["gpu_hours_used"] == round(USED, 2)
    assert low.evidence["gpu_hours_wasted"] == round(WASTED, 2)
    assert low.wasted_gpu_hours == pytest.approx(WASTED)
    # 2.0 GPU-hours over the whole run would be the 2 GPU-hour warning, but the samples
    # cover the last 400 s of its 4,000: the severity counts the 0.2 wasted while measured.
    assert low.evidence["measured_pct"] == 10.0
    assert low.severity == Severity.INFO
    assert (low.window_start, low.window_end) == (dt.datetime.fromtimestamp(T0, dt.UTC),
                                                  dt.datetime.fromtimestamp(END, dt.UTC))
    assert "7 min" in low.explanation and "2.0 GPU-hours wasted" in low.explanation
    assert ("Its samples cover only 10 % of its run: the severity counts the 0.2 GPU-hours "
            "wasted while it was measured.") in low.explanation
    assert low.suggestion


@pytest.mark.django_db
def test_a_finding_severity_counts_the_waste_measured_not_the_run_taken_to_be_like_it():
    """Installing ClusterUI on a running cluster: a job that started 50 hours before its
    first sample, idle on 8 GPUs since, has wasted some 400 GPU-hours if it ran as it does
    now, but ClusterUI saw 22 minutes of it. Its finding says both, and its severity (the
    email's) is that of the 2.9 GPU-hours measured: warning, as for the same job started
    when measuring did, not critical (50 GPU-hours). It rises as the measured waste does."""
    times = [END - 10 * k for k in range(129, -1, -1)]
    for ext, started in (("late", END - 50 * 3600), ("whole", times[0] - 10)):
        job = Job(ext, gpus=list(range(8)), started_at=started)
        batch = node_batch(Node(f"n-{ext}", gpus=8), seq=1, times=times, jobs=[job],
                           gpu={i: [Sample(util=0, sm=0)] * len(times) for i in range(8)},
                           owner={i: ext for i in range(8)})
        assert ingest_envelope(batch).rejected == 0
    run_pass(now=dt.datetime.fromtimestamp(END + 30, dt.UTC))
    found = {f.job.external_id: f for f in Finding.objects.filter(
        kind=FindingKind.LOW_UTILIZATION).select_related("job")}
    late, whole = found["late"], found["whole"]
    measured = 8 * 1300 / 3600  # 8 idle GPUs over 130 samples, each standing for 10 s
    assert late.wasted_gpu_hours == pytest.approx(8 * 50, rel=1e-2)
    assert whole.wasted_gpu_hours == pytest.approx(measured, rel=1e-3)
    assert late.severity == whole.severity == Severity.WARNING
    assert (f"the severity counts the {measured:.1f} GPU-hours wasted while it was "
            "measured") in late.explanation
    assert whole.evidence["measured_pct"] == 100.0 and "severity counts" not in whole.explanation


def _jumping(k: int) -> float:
    """A counter 2,000 J a sample that twice becomes another counter: back to 500 MJ (more
    than any GPU uses in 10 s after a driver reload), then up to 9 GJ (more than any GPU uses
    in 10 s at all), as when a simulated node is restarted with its history re-made."""
    if k < 10:
        return 1e9 + 2000 * k
    if k < 20:
        return 5e8 + 2000 * (k - 10)
    return 9e9 + 2000 * (k - 20)


@pytest.mark.django_db
@pytest.mark.parametrize("split", [None, 15], ids=["one pass", "two passes"])
def test_an_energy_counter_replaced_by_another_counts_the_power_reading_for_that_step(split):
    node = Node("h001")
    job = Job("79", gpus=[0], started_at=T0)
    times = TIMES[:30]
    parts = [(0, 30)] if split is None else [(0, split), (split, 30)]
    for seq, (a, b) in enumerate(parts, start=1):
        batch = node_batch(node, seq=seq, times=times[a:b], jobs=[job], owner={0: "79"},
                           gpu={0: [Sample(util=50, sm=40, energy=_jumping(k))
                                    for k in range(a, b)]})
        assert ingest_envelope(batch).rejected == 0
        run_pass(now=dt.datetime.fromtimestamp(times[b - 1] + 30, dt.UTC))
    eff = JobEfficiency.objects.get(job__external_id="79")
    # 27 steps of the counter's own 2,000 J; the two jumps as 300 W (the power reading the
    # batches carry) x 10 s. Counted as a reset to zero they would add 500 MJ and 8.5 GJ.
    assert eff.energy_j == pytest.approx(27 * 2000 + 2 * 300 * 10)


@pytest.mark.django_db
def test_a_gpu_whose_samples_lag_its_jobs_other_gpu_keeps_its_energy_step_across_passes():
    """Two GPUs of one job; GPU 1's samples stop 60 s before GPU 0's in the first pass and
    resume in the next. Its first step then spans 70 s of 300 W: 21 kJ, more than 2,000 W
    over the 10 s since the pass's start would allow, and still the counter's own step."""
    node = Node("h001")
    job = Job("80", gpus=[0, 1], started_at=T0)
    first, second = TIMES[:20], TIMES[20:30]

    def energy(k):
        return 1e6 + 300 * 10 * k  # 300 W, a sample every 10 s

    gpu0 = [Sample(util=50, sm=40, energy=energy(k)) for k in range(30)]
    gpu1 = [Sample(util=50, sm=40, energy=energy(k)) for k in range(30)]
    batch = node_batch(node, seq=1, times=first, jobs=[job], owner={0: "80", 1: "80"},
                       gpu={0: gpu0[:20], 1: gpu1[:20]})
    batch["gpu_samples"]["rows"] = [r for r in batch["gpu_samples"]["rows"]  # GPU 1 stops
                                    if r[1] == 0 or r[0] <= first[13]]
    assert ingest_envelope(batch).rejected == 0
    run_pass(now=dt.datetime.fromtimestamp(first[-1] + 30, dt.UTC))
    later = node_batch(node, seq=2, times=second, jobs=[job], owner={0: "80", 1: "80"},
                       gpu={0: gpu0[20:], 1: gpu1[20:]})
    assert ingest_envelope(later).rejected == 0
    run_pass(now=dt.datetime.fromtimestamp(second[-1] + 30, dt.UTC))
    eff = JobEfficiency.objects.get(job__external_id="80")
    # GPU 0: 29 steps of 3 kJ; GPU 1: 13 steps, then one of 7 x 3 kJ (k 13 -> 20), then 9.
    assert eff.energy_j == pytest.approx(29 * 3000 + (13 + 7 + 9) * 3000)
