"""Each detector as a plain function of a window's numbers: fires where it must, stays quiet
where it must not, and names the numbers in its explanation."""

import datetime as dt

import numpy as np
import pytest

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.detectors import (
    comm_bound,
    gpu_errors,
    idle_gpu,
    input_bound,
    low_utilization,
    throttling,
)
from clusterui.findings.thresholds import HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, Thresholds
from clusterui.findings.window import Correlation, GpuEventRow, GpuWindow, JobWindow, Traffic

T = Thresholds()
END = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
H100 = "NVIDIA H100 80GB HBM3"


def gpu(index=0, node="n1", util=90.0, sm=70.0, samples=360, **kw) -> GpuWindow:
    busy = sm if sm is not None else util
    return GpuWindow(gpu_id=100 + index + 10 * int(node[-1]), uuid=f"GPU-{node}-{index}",
                     index=index, node=node, model=H100, samples=samples, util_mean=util,
                     sm_mean=sm, busy_mean=busy, **kw)


def window(gpus, *, nodes=1, minutes=60, wasted=0.0, **kw) -> JobWindow:
    return JobWindow(job_id=1, start=END - dt.timedelta(minutes=minutes), end=END,
                     gpus_allocated=len(gpus), nodes=nodes, interval_s=10.0, gpus=gpus,
                     gpu_hours_allocated=len(gpus) * 2.0, gpu_hours_used=len(gpus) * 2.0 - wasted,
                     gpu_hours_wasted=wasted, **kw)


def traffic(mean, share, corr=None, peak=None, samples=360) -> Traffic:
    return Traffic(samples=samples, mean=mean, peak=peak if peak is not None else mean,
                   high_share=share, corr=corr or Correlation())


def anti_correlated(n=300) -> Correlation:
    """Busy high exactly when traffic is low, sample by sample."""
    x = np.where(np.arange(n) % 3 == 0, 90.0, 10.0)
    y = np.where(np.arange(n) % 3 == 0, 5.0, 92.0)
    return Correlation(n, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum())


# -- low utilization ------------------------------------------------------------------


def test_low_utilization_fires_below_the_threshold_and_names_the_numbers():
    w = window([gpu(i, util=7.0, sm=4.0) for i in range(8)], wasted=7.4)
    d = low_utilization.detect(w, T)
    assert d.kind == FindingKind.LOW_UTILIZATION
    assert "8 GPUs were active 4 % on average (SM activity (GPM))" in d.explanation
    assert "GPU utilization (NVML) was 7 %" in d.explanation
    assert "Over the last 60 min" in d.explanation and "7.4 GPU-hours wasted" in d.explanation
    assert d.evidence["activity_mean_pct"] == 4.0 and d.evidence["util_mean_pct"] == 7.0
    assert d.wasted_gpu_hours == 7.4
    assert "fewer GPUs" in d.suggestion


def test_a_fake_busy_job_is_low_utilization_with_waste_based_severity():
    # NVML 99 %, SM activity 6 %: a stream of tiny kernels. Judged on what the SMs did.
    w = window([gpu(i, util=99.0, sm=6.0) for i in range(4)], wasted=7.5)
    d = low_utilization.detect(w, T)
    assert d.kind == FindingKind.LOW_UTILIZATION
    assert d.severity == Severity.WARNING  # 7.5 GPU-hours wasted: the same rule as any job
    assert "were active 6 % on average (SM activity (GPM))" in d.explanation
    assert "NVML reported them busy 99 % of the time, but that figure is misleading" in (
        d.explanation)
    assert "tiny kernels" in d.explanation and "CUDA graphs" in d.suggestion
    assert d.title == "Low GPU utilization: SM activity 6 % on 4 GPUs (NVML reads 99 %)"
    assert d.evidence["nvml_misleading"] is True
    assert (d.evidence["util_mean_pct"], d.evidence["sm_active_mean_pct"]) == (99.0, 6.0)
    big = low_utilization.detect(window([gpu(util=99.0, sm=6.0)], wasted=60.0), T)
    assert big.severity == Severity.CRITICAL
    assert "the job's 1 GPU was active 6 %" in big.explanation
    assert "NVML reported it busy 99 % of the time" in big.explanation


def test_a_truly_busy_job_is_not_low_utilization():
    assert low_utilization.detect(window([gpu(i, util=99.0, sm=80.0) for i in range(4)],
                                         wasted=0.8), T) is None


def test_low_utilization_is_judged_on_sm_activity_where_known_nvml_otherwise():
    assert low_utilization.detect(window([gpu(util=30.0, sm=25.0)]), T) is None
    assert low_utilization.detect(window([gpu(util=30.0, sm=24.9)]), T) is not None
    # A GPU without GPM (A100) is still judged, on NVML utilization.
    assert low_utilization.detect(window([gpu(util=25.0, sm=None)]), T) is None
    d = low_utilization.detect(window([gpu(util=24.9, sm=None)], wasted=3.0), T)
    assert d is not None and d.severity == Severity.WARNING
    assert "(GPU utilization (NVML): no GPM on these GPUs)" in d.explanation
    assert "misleading" not in d.explanation


@pytest.mark.parametrize("wasted, severity", [(0.5, Severity.INFO), (2.0, Severity.WARNING),
                                               (49.0, Severity.WARNING),
                                               (50.0, Severity.CRITICAL)])
def test_low_utilization_severity_scales_with_wasted_gpu_hours(wasted, severity):
    assert low_utilization.detect(window([gpu(util=3.0, sm=2.0)], wasted=wasted),
                                  T).severity == severity


def test_low_utilization_at_zero_says_the_gpus_are_unused():
    d = low_utilization.detect(window([gpu(util=0.0, sm=0.0)]), T)
    assert "did (almost) nothing" in d.explanation
    assert "runs on the GPU" in d.suggestion


# -- idle allocated GPU ---------------------------------------------------------------


def test_idle_gpu_asked_for_eight_used_one():
    gpus = [gpu(0, util=95.0, sm=75.0)] + [gpu(i, util=0.0, sm=0.0, wasted_gpu_hours=2.0)
                                           for i in range(1, 8)]
    d = idle_gpu.detect(window(gpus), T)
    assert d.kind == FindingKind.IDLE_GPU
    assert d.wasted_gpu_hours == 14.0 and d.severity == Severity.WARNING
    assert "7 of the job's 8 GPUs averaged 0 % SM activity (n1 GPU 1, 2, 3, 4, 5, 6, 7)" in (
        d.explanation)
    assert "Request 1 GPU instead of 8" in d.suggestion
    assert d.gpu_id is None  # several idle GPUs: they are listed in the evidence
    assert len(d.evidence["idle_gpus"]) == 7


def test_idle_gpu_judges_a_fake_busy_gpu_on_its_sm_activity():
    gpus = [gpu(0, util=97.0, sm=70.0),
            gpu(1, util=99.0, sm=2.0, wasted_gpu_hours=2.5)]  # NVML says busy; SMs idle
    d = idle_gpu.detect(window(gpus), T)
    assert d is not None and d.severity == Severity.WARNING and d.wasted_gpu_hours == 2.5
    assert "1 of the job's 2 GPUs averaged 2 % SM activity (n1 GPU 1)" in d.explanation
    assert "NVML reported that GPU busy 99 % of the time (n1 GPU 1), but that figure is " \
        "misleading" in d.explanation
    assert d.evidence["idle_gpus"][0]["util_mean_pct"] == 99.0


def test_idle_gpu_without_gpm_is_judged_on_nvml():
    gpus = [gpu(0, util=90.0, sm=None), gpu(1, util=1.0, sm=None)]
    d = idle_gpu.detect(window(gpus), T)
    assert d is not None and "averaged 1 % utilization (n1 GPU 1)" in d.explanation


def test_idle_gpu_threshold_is_strictly_below():
    # Exactly at DETECTOR_IDLE_GPU_PCT (5 %) is not idle; just below is.
    def at(v):
        return idle_gpu.detect(window([gpu(0, util=90.0, sm=70.0),
                                       gpu(1, util=v, sm=None)]), T)

    assert at(T.idle_gpu_pct) is None
    assert at(T.idle_gpu_pct - 0.01) is not None


@pytest.mark.parametrize("utils", [[0.0] * 4, [90.0] * 4, [12.0, 14.0, 13.0, 11.0], [50.0]],
                         ids=["all idle", "all busy", "all low alike", "one GPU"])
def test_idle_gpu_needs_idle_gpus_next_to_working_ones(utils):
    assert idle_gpu.detect(window([gpu(i, util=u, sm=None) for i, u in enumerate(utils)]),
                           T) is None


# -- communication-bound --------------------------------------------------------------


def test_comm_bound_multinode_with_sustained_fabric_traffic():
    gpus = [gpu(i, node=f"n{n}", util=35.0, sm=26.0) for n in (1, 2) for i in range(8)]
    w = window(gpus, nodes=2, nic=traffic(65.0, 0.9, peak=94.0), wasted=3.0)
    d = comm_bound.detect(w, T)
    assert d.kind == FindingKind.COMM_BOUND and d.evidence["link"] == "fabric NIC"
    assert d.evidence["sustained"] is True
    assert "16 GPUs on 2 nodes were busy only 26 % (SM activity)" in d.explanation
    assert "at or above 60 % of capacity in 90 % of the samples (mean 65 %, peak 94 %)" in (
        d.explanation)
    assert "placement" in d.suggestion


def test_a_busy_job_with_high_traffic_is_healthy():
    gpus = [gpu(i, node=f"n{n}", util=95.0, sm=75.0) for n in (1, 2) for i in range(8)]
    w = window(gpus, nodes=2, nic=traffic(71.0, 1.0, corr=anti_correlated()))
    assert comm_bound.detect(w, T) is None


def test_comm_bound_by_utilization_dipping_at_each_traffic_peak():
    # Traffic is high in only a quarter of the samples, but busy falls exactly then.
    gpus = [gpu(i, util=35.0, sm=30.0, nvlink=traffic(30.0, 0.25, corr=anti_correlated()))
            for i in range(8)]
    d = comm_bound.detect(window(gpus), T)
    assert d.evidence["link"] == "NVLink" and d.evidence["sustained"] is False
    assert d.evidence["dips_with_traffic"] is True
    assert d.evidence["busy_traffic_correlation"] == -1.0
    assert "fell each time traffic peaked (correlation -1.00" in d.explanation


@pytest.mark.parametrize("case", ["quiet links", "one GPU on one node",
                                  "too few points to correlate", "peaks below the threshold"])
def test_comm_bound_stays_quiet(case):
    corr = anti_correlated()
    if case == "quiet links":
        gpus = [gpu(i, util=30.0, nvlink=traffic(10.0, 0.0)) for i in range(4)]
    elif case == "one GPU on one node":
        gpus = [gpu(0, util=30.0, nvlink=traffic(80.0, 1.0))]
    elif case == "too few points to correlate":
        gpus = [gpu(i, util=30.0, nvlink=traffic(30.0, 0.25, corr=anti_correlated(20)))
                for i in range(4)]
    else:
        gpus = [gpu(i, util=30.0, nvlink=traffic(30.0, 0.05, corr=corr)) for i in range(4)]
    assert comm_bound.detect(window(gpus), T) is None


# -- input-bound ----------------------------------------------------------------------


def test_input_bound_with_saturated_host_cpus_and_a_quiet_network():
    gpus = [gpu(i, util=18.0, sm=13.0, nvlink=traffic(0.0, 0.0)) for i in range(2)]
    d = input_bound.detect(window(gpus, cpu_frac_mean=0.965, cpus_per_node=24), T)
    assert d.kind == FindingKind.INPUT_BOUND
    assert "busy only 13 % (SM activity; GPU utilization (NVML) 18 %)" in d.explanation
    assert "used 96 % of the 24 cores allocated" in d.explanation
    assert "num_workers" in d.suggestion


@pytest.mark.parametrize("cpu, nvlink, util", [(0.6, 0.0, 18.0), (0.97, 40.0, 18.0),
                                               (0.97, 0.0, 60.0)],
                         ids=["cpus not saturated", "network busy", "gpus busy"])
def test_input_bound_stays_quiet(cpu, nvlink, util):
    gpus = [gpu(i, util=util, sm=None, nvlink=traffic(nvlink, 0.0)) for i in range(2)]
    assert input_bound.detect(window(gpus, cpu_frac_mean=cpu, cpus_per_node=24), T) is None


def test_input_bound_on_several_nodes_needs_quiet_fabric_too():
    gpus = [gpu(i, node=f"n{n}", util=15.0, sm=None) for n in (1, 2) for i in range(2)]
    busy_fabric = window(gpus, nodes=2, cpu_frac_mean=0.95, nic=traffic(45.0, 0.1))
    quiet_fabric = window(gpus, nodes=2, cpu_frac_mean=0.95, nic=traffic(2.0, 0.0))
    assert input_bound.detect(busy_fabric, T) is None
    assert input_bound.detect(quiet_fabric, T) is not None


# -- throttling -----------------------------------------------------------------------


def throttled(bits, clock, share=1.0, **kw):
    return gpu(throttled_share=share, throttle_bits=bits, throttled_clock_mhz=clock, **kw)


def test_thermal_throttling_against_the_models_unthrottled_clock():
    w = window([throttled(0x20 | HW_THERMAL, 1320.0)], reference_clock_mhz={H100: 1980.0})
    d = throttling.detect(w, T)
    assert d.severity == Severity.WARNING
    assert "software thermal slowdown, hardware thermal slowdown in 100 % of the samples" in (
        d.explanation)
    assert "averaged 1320 MHz against 1980 MHz reached by unthrottled" in d.explanation
    assert d.evidence["gpus"][0]["clock_pct_of_reference"] == 66.7
    assert "cooling" in d.suggestion


@pytest.mark.parametrize("bits, severity", [(SW_POWER_CAP, Severity.INFO),
                                            (HW_SLOWDOWN, Severity.CRITICAL),
                                            (SW_POWER_CAP | 0x80, Severity.CRITICAL)])
def test_throttling_severity_by_cause(bits, severity):
    w = window([throttled(bits, 1600.0)], reference_clock_mhz={H100: 1980.0})
    assert throttling.detect(w, T).severity == severity


@pytest.mark.parametrize("share, clock", [(0.1, 1320.0), (1.0, 1900.0)],
                         ids=["rarely throttled", "clocks barely down"])
def test_throttling_stays_quiet(share, clock):
    w = window([throttled(0x20, clock, share=share)], reference_clock_mhz={H100: 1980.0})
    assert throttling.detect(w, T) is None


def test_throttling_without_a_reference_clock_says_so():
    d = throttling.detect(window([throttled(0x20, 1320.0)]), T)
    assert "no unthrottled" in d.explanation and d.evidence["reference_clock_mhz"] is None


# -- GPU errors -----------------------------------------------------------------------


def event(code=79, kind="xid", minute=5):
    return GpuEventRow(END - dt.timedelta(minutes=minute), 7, "n1", 2, kind, code,
                       "GPU has fallen off the bus" if code == 79 else "")


@pytest.mark.parametrize("events, severity", [([event(79)], Severity.CRITICAL),
                                              ([event(13)], Severity.INFO),
                                              ([event(63)], Severity.WARNING),
                                              ([event(13), event(48)], Severity.CRITICAL),
                                              ([event(None, "gpu_lost")], Severity.CRITICAL)])
def test_gpu_errors_severity_by_the_worst_event(events, severity):
    d = gpu_errors.detect(events, "the job's GPUs", T, END - dt.timedelta(hours=1))
    assert d.kind == FindingKind.GPU_ERRORS and d.severity == severity


def test_gpu_errors_names_each_event():
    d = gpu_errors.detect([event(79)], "the job's GPUs", T, END - dt.timedelta(hours=1))
    assert "Xid 79 (GPU has fallen off the bus) on n1 GPU 2 at 11:55:00 UTC" in d.explanation
    assert "--exclude=n1" in d.suggestion and d.gpu_id == 7
    assert gpu_errors.detect([], "the job's GPUs", T, END) is None


# -- the correlation ------------------------------------------------------------------


def test_correlation_from_sums_matches_numpy():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 100, 500)
    y = 80 - 0.6 * x + rng.normal(0, 10, 500)
    halves = [Correlation(250, a.sum(), b.sum(), (a * a).sum(), (b * b).sum(), (a * b).sum())
              for a, b in ((x[:250], y[:250]), (x[250:], y[250:]))]
    total = Correlation()
    for h in halves:
        total.add(h)
    assert total.r(30) == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert Correlation(500, 5000.0, 100.0, 50000.0, 20.0, 1000.0).r(30) is None  # y flat



@pytest.mark.parametrize("others", [[], [90.0]], ids=["all MIG", "beside a working GPU"])
def test_a_mig_instance_with_null_utilization_is_not_idle(others):
    # A MIG instance without GPM has no busy figure at all (NVML: no utilization on MIG):
    # an hour of nulls must not read as an idle GPU or a low-utilization job.
    working = [gpu(5 + i, util=u, sm=u) for i, u in enumerate(others)]
    w = window([gpu(i, util=None, sm=None) for i in range(2)] + working)
    assert idle_gpu.detect(w, T) is None
    assert low_utilization.detect(w, T) is None
    # The control: the same two reading 0 % are flagged.
    zero = window([gpu(i, util=0.0, sm=0.0) for i in range(2)] + working)
    flagged = idle_gpu.detect(zero, T) if others else low_utilization.detect(zero, T)
    assert flagged is not None
