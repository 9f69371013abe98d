"""Issue 19 end to end: the simulator's GPU faults (a pending row remap with rising
uncorrectable ECC errors; a remap failure) read by the real collector code, stored by the
real writer, judged by the detector pass into a node finding naming the GPU and the
vendor's action, emailed to the admins over SMTP, and closed once the GPU is reset."""

import datetime as dt
import time

import pytest

from clusterui.alerts.tasks import send_alerts
from clusterui.findings.models import Finding
from clusterui.findings.runner import run_pass
from clusterui.gpuhealth.models import GpuHealth
from clusterui.ingest.tasks import ingest_envelope
from collectors.agent import Agent
from collectors.sim.node import PENDING_REMAP, REMAP_FAILURE, GpuFault, SimNode
from collectors.sim.nvml import SimNVML

pytestmark = pytest.mark.django_db


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def at(t):
    return dt.datetime.fromtimestamp(t, dt.UTC)


def run(node, agent, clock, times):
    for t in times:
        clock.t = t
        node.advance(t)
        agent.sample()
    ingest_envelope(agent.build_batch())


def test_faulty_gpus_reach_the_admins_and_the_finding_closes_after_a_reset(
        tmp_path, smtp, settings):
    settings.ADMINS = [("Ops", "ops@example.org")]
    t0 = float(int(time.time()) - 3600)
    reset_node = SimNode(str(tmp_path / "a"), "gpu-h001", gpus=2,
                         faults=[GpuFault(1, PENDING_REMAP, t0 + 30)])
    rma_node = SimNode(str(tmp_path / "b"), "gpu-h002", gpus=2,
                       faults=[GpuFault(0, REMAP_FAILURE, t0 + 30)])
    clocks = {n.name: Clock() for n in (reset_node, rma_node)}
    agents = {}
    for n in (reset_node, rma_node):
        n.advance(t0)
        agents[n.name] = Agent(n.collector_config(cluster="sim"), nvml=SimNVML(n),
                               clock=clocks[n.name])
    times = [t0 + 10 * k for k in range(1, 31)]  # 5 minutes
    for n in (reset_node, rma_node):
        run(n, agents[n.name], clocks[n.name], times)

    pending = GpuHealth.objects.get(gpu__node__name="gpu-h001", gpu__index=1)
    assert pending.remap_pending is True and pending.ecc_uncorrected_volatile >= 2
    assert pending.retired_pages_sbe is None  # NotSupported on the simulated H100: null
    assert GpuHealth.objects.get(gpu__node__name="gpu-h002", gpu__index=0).remap_failure

    run_pass(now=at(times[-1] + 60))
    reset_f = Finding.objects.get(kind="gpu_health", node__name="gpu-h001")
    rma_f = Finding.objects.get(kind="gpu_health", node__name="gpu-h002")
    assert reset_f.job is None and reset_f.severity == "warning"
    assert "GPU 1: row remap pending" in reset_f.explanation
    assert "reset the GPU (nvidia-smi -r" in reset_f.explanation
    assert "docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt" in reset_f.explanation
    assert rma_f.severity == "critical" and "GPU 0: row remapping failed" in rma_f.explanation
    assert "replace the GPU (RMA)" in rma_f.explanation

    send_alerts()
    subjects = sorted(m.subject for m in smtp.received)
    assert {tuple(m.envelope_to) for m in smtp.received} == {("ops@example.org",)}
    assert subjects == [
        "[ClusterUI] Critical: GPU needs reset or replacement on node gpu-h002",
        "[ClusterUI] Warning: GPU needs reset or replacement on node gpu-h001",
    ]

    # The admins reset GPU 1: the pending remap is applied, the volatile count is 0 again.
    reset_node.reset_gpu(1)
    later = [times[-1] + 10 * k for k in range(1, 8)]
    run(reset_node, agents["gpu-h001"], clocks["gpu-h001"], later)
    run(rma_node, agents["gpu-h002"], clocks["gpu-h002"], later)
    pending.refresh_from_db()
    assert (pending.remap_pending, pending.ecc_uncorrected_volatile) == (False, 0)
    assert pending.remapped_uncorrectable == 1
    run_pass(now=at(later[-1] + 60 + settings.DETECTOR_CLOSE_AFTER_S))
    reset_f.refresh_from_db()
    rma_f.refresh_from_db()
    assert reset_f.state == "closed" and rma_f.state == "open"
    for agent in agents.values():
        agent.close()
