"""Each scenario's signature, seen through the real collector at 1 s and at 10 s."""

from __future__ import annotations

import statistics

import pytest

from collectors.sim.hardware import H100_SXM
from collectors.sim.scenarios import (
    EXPECTED_FINDINGS,
    FINDING_KINDS,
    STRAGGLERS,
    Scenario,
    behaviour,
    straggler_rank,
)

# (interval, duration): 1 s shows the bursts sample by sample; 10 s shows the means.
RATES = [pytest.param(1, 180, id="1s"), pytest.param(10, 1200, id="10s")]


def mean(xs):
    return sum(xs) / len(xs)


def test_every_scenario_has_expected_findings():
    assert set(EXPECTED_FINDINGS) == set(Scenario)
    for kinds in EXPECTED_FINDINGS.values():
        assert kinds <= set(FINDING_KINDS)
    for s in (Scenario.HEALTHY, Scenario.HEALTHY_MULTINODE, Scenario.MODERATE):
        assert EXPECTED_FINDINGS[s] == set()
    assert EXPECTED_FINDINGS[Scenario.IDLE] == {"low_utilization"}
    assert "idle_gpu" in EXPECTED_FINDINGS[Scenario.IDLE_GPUS]


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_healthy(run_job, interval, duration):
    run = run_job(Scenario.HEALTHY, interval, duration)
    assert mean(run.series("util_pct")) > 85
    assert mean(run.series("sm_active_pct")) > 60
    assert not any(r["throttle_reasons"] for r in run.gpu_rows if r["job"])


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_idle(run_job, interval, duration):
    run = run_job(Scenario.IDLE, interval, duration, gpus=2)
    assert max(run.series("util_pct")) < 2
    assert mean(run.series("mem_used_mib")) > 100  # allocated and holding memory


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_idle_gpus(run_job, interval, duration):
    run = run_job(Scenario.IDLE_GPUS, interval, duration)
    assert run.job_gpus() == list(range(8))
    assert mean(run.series("util_pct", [0])) > 85
    assert max(run.series("util_pct", range(1, 8))) < 2
    assert mean(run.series("util_pct")) < 20  # the job as a whole: low utilization


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_spiky_low(run_job, interval, duration):
    run = run_job(Scenario.SPIKY_LOW, interval, duration * 3)
    util = run.series("util_pct")
    assert 5 < mean(util) < 25
    assert max(util) > 60


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_input_bound(run_job, interval, duration):
    run = run_job(Scenario.INPUT_BOUND, interval, duration)
    assert mean(run.series("util_pct")) < 30
    cores = [r["cpu_cores_used"] for r in run.job_rows if r["cpu_cores_used"] is not None]
    assert mean(cores) > 0.9 * run.job.cpus_per_node  # host CPUs saturated
    assert mean(run.ib_fraction()) < 0.05  # the network is quiet


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_comm_bound_multinode(run_job, interval, duration):
    run = run_job(Scenario.COMM_BOUND_MULTINODE, interval, duration)
    util, ib = run.series("util_pct"), run.ib_fraction()
    assert len(util) == len(ib)
    assert mean(util) < 50
    assert mean(ib) > 0.6
    if interval == 1:
        assert sum(x >= 0.6 for x in ib) > 0.55 * len(ib)  # most of the window
        assert statistics.correlation(util, ib) < -0.8  # util dips when traffic peaks


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_comm_bound_nvlink(run_job, interval, duration):
    run = run_job(Scenario.COMM_BOUND_NVLINK, interval, duration)
    cap = run.batch["gpus"][0]["nvlink_bytes_per_s"]
    util = run.series("util_pct")
    nvl = [x / cap for x in run.series("nvlink_tx_bytes_per_s")]
    assert mean(util) < 50
    assert mean(nvl) > 0.6
    assert mean(run.ib_fraction()) < 0.05  # single node: not the network
    if interval == 1:
        assert sum(x >= 0.6 for x in nvl) > 0.55 * len(nvl)
        assert statistics.correlation(util, nvl) < -0.8


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_healthy_multinode(run_job, interval, duration):
    run = run_job(Scenario.HEALTHY_MULTINODE, interval, duration)
    assert mean(run.ib_fraction()) > 0.6
    assert mean(run.series("util_pct")) > 85
    assert min(run.series("util_pct")) > 80


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_busy_not_busy(run_job, interval, duration):
    run = run_job(Scenario.BUSY_NOT_BUSY, interval, duration, gpus=1)
    assert mean(run.series("util_pct")) > 90
    assert mean(run.series("sm_active_pct")) < 20


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_thermal_throttle(run_job, interval, duration):
    run = run_job(Scenario.THERMAL_THROTTLE, interval, duration, gpus=2)
    rows = [r for r in run.gpu_rows if r["job"]]
    assert mean([r["temp_c"] for r in rows]) > 85
    assert all(r["throttle_reasons"] & 0x60 for r in rows)
    assert max(r["sm_clock_mhz"] for r in rows) < 1500


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_power_throttle(run_job, interval, duration):
    run = run_job(Scenario.POWER_THROTTLE, interval, duration, gpus=4)
    rows = [r for r in run.gpu_rows if r["job"]]
    limit = run.batch["gpus"][0]["power_limit_w"]
    assert mean([r["power_w"] for r in rows]) > 0.97 * limit
    assert all(r["throttle_reasons"] & 0x4 for r in rows)
    assert max(r["sm_clock_mhz"] for r in rows) < 1700


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_xid(run_job, interval, duration):
    run = run_job(Scenario.XID, interval, max(duration, 600), gpus=4)
    events = [e for e in run.batch["events"] if e["kind"] == "xid"]
    assert events
    assert all(e["code"] in (92, 48, 94, 63, 31) and e["gpu"] in run.job_gpus() for e in events)
    assert mean(run.series("util_pct")) > 85


@pytest.mark.parametrize(("interval", "duration"), RATES)
def test_moderate(run_job, interval, duration):
    run = run_job(Scenario.MODERATE, interval, duration * 2, gpus=2)
    assert 40 < mean(run.series("util_pct")) < 80


@pytest.mark.parametrize("scenario", sorted(STRAGGLERS))
def test_a_straggler_job_has_one_slow_node_and_peers_in_lockstep(scenario):
    nodes, per_node, seed = 3, 8, 11
    slow = straggler_rank(seed, nodes)
    gpus = [behaviour(scenario, H100_SXM, seed, r, nodes * per_node, per_node)
            for r in range(nodes * per_node)]
    sm = [statistics.mean(g.sm.mean(0, 600) for g in gpus[n * per_node:(n + 1) * per_node])
          for n in range(nodes)]
    ib = [gpus[n * per_node].ib.mean(0, 600) for n in range(nodes)]
    peers = [n for n in range(nodes) if n != slow]
    if scenario == Scenario.STRAGGLER_SLOW_LINK:
        assert ib[slow] < 0.5 * min(ib[p] for p in peers)
        assert max(sm) - min(sm) < 1  # every node computes alike
    elif scenario == Scenario.STRAGGLER_ERRORING_PORT:
        # Retransmissions: below the error-traffic ratio (0.85), above the slow-link one.
        assert 0.5 * min(ib[p] for p in peers) < ib[slow] < 0.85 * min(ib[p] for p in peers)
        assert max(sm) - min(sm) < 1
    else:
        assert sm[slow] > max(sm[p] for p in peers) + 20
        assert max(ib) - min(ib) < 0.01
    # Lockstep: the peers' steps start and end at the same moments.
    for t in (0.3, 1.7, 2.9):
        assert len({gpus[p * per_node].util.value(t) for p in peers}) == 1
    throttled = gpus[slow * per_node].throttling
    assert throttled == ("thermal" if scenario == Scenario.STRAGGLER_THROTTLED else "")


def test_the_erroring_port_node_counts_errors_in_the_sysfs_files_the_collector_reads(tmp_path):
    from collectors.fabric import FabricCounters
    from collectors.sim.node import SimJob, SimNode
    from tests.collectors.sim.conftest import T0

    seed, names = 11, ("gpu-e001", "gpu-e002", "gpu-e003")
    job = SimJob(id="900002", scenario=Scenario.STRAGGLER_ERRORING_PORT, user="alice",
                 uid=61001, account="nlp", partition="gpu", name="llama-ft", start=T0 - 600.0,
                 end=T0 + 120.0, nodes=names, gpus_per_node=8, cpus_per_node=96, seed=seed)
    nodes = [SimNode(str(tmp_path / n), n, seed=7 + i) for i, n in enumerate(names)]
    readers = [FabricCounters(n.sysfs_root) for n in nodes]
    seen = []
    for t in (T0, T0 + 60.0, T0 + 180.0):  # the job ends at T0 + 120
        for rank, node in enumerate(nodes):
            if t == T0:
                node.place(job, range(8), node_rank=rank)
            node.advance(t)
        seen.append([r.sample() for r in readers])
    slow = straggler_rank(seed, len(names))
    # The straggler node's first port, a minute of the fault: 2 symbol errors a second, a
    # tenth of that dropped as receive errors, one link error recovery a minute.
    port = seen[1][slow]["mlx5_0:1"]
    assert (port["symbol_error"], port["port_rcv_errors"], port["link_error_recovery"]) == (
        120, 12, 1)
    # After the job ends its counters stop rising; its other ports and the peers stay clean.
    assert seen[2][slow]["mlx5_0:1"]["symbol_error"] == 120  # T0+60 .. T0+120 only
    for rank, ports in enumerate(seen[1]):
        for name, values in ports.items():
            if (rank, name) != (slow, "mlx5_0:1"):
                assert values["symbol_error"] == 0 and values["port_rcv_errors"] == 0, (rank,
                                                                                       name)
