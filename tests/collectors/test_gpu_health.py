"""The GPU health counters (``collectors.gpu.health``) read through the NVML simulator:
values as NVML gives them, null (absent) where the GPU cannot report one, read once a
minute, and into the agent's ``gpu_health`` section."""

import pynvml

from collectors.agent import HEALTH_FIELDS, Agent
from collectors.gpu.health import FIELDS, HEALTH_EVERY_S
from collectors.gpu.source import GpuSource
from collectors.sim.node import PENDING_REMAP, REMAP_FAILURE, GpuFault, SimNode
from collectors.sim.nvml import SimNVML

T0 = 1_000_000.0


class Clock:
    def __init__(self, t=T0):
        self.t = t

    def __call__(self):
        return self.t


def faulty_node(tmp_path, **kw):
    faults = [GpuFault(1, PENDING_REMAP, T0 + 100), GpuFault(2, REMAP_FAILURE, T0 + 100)]
    node = SimNode(str(tmp_path / "n"), "gpu-h001", gpus=3, faults=faults, **kw)
    node.advance(T0)
    return node


def sample(node, src, clock, t):
    clock.t = t
    node.advance(t)
    return src.sample(t)


def test_a_healthy_gpu_and_the_two_faults(tmp_path):
    node, clock = faulty_node(tmp_path), Clock()
    src = GpuSource(SimNVML(node), clock)
    first = sample(node, src, clock, T0)
    healthy = first[0].health
    assert healthy["ecc_uncorrected_volatile"] == 0 and healthy["remap_pending"] is False
    assert healthy["ecc_corrected_aggregate"] == node.counters[0].ecc_corrected_lifetime
    assert healthy["nvlink_replay_errors"] == 0 and healthy["pcie_replays"] == 0
    # Ampere and later retire no pages: NotSupported, so absent (null), never 0.
    assert not {"retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"} & set(healthy)
    assert set(healthy) == set(FIELDS) - {"retired_pages_sbe", "retired_pages_dbe",
                                          "retired_pages_pending"}
    # Not due again before a minute has passed.
    assert [r.health for r in sample(node, src, clock, T0 + 10)] == [None] * 3
    later = sample(node, src, clock, T0 + 100 + 2 * 120 + HEALTH_EVERY_S)
    pending, failed = later[1].health, later[2].health
    assert pending["remap_pending"] is True and pending["remap_failure"] is False
    assert pending["ecc_uncorrected_volatile"] == 3  # rising: one every 120 s
    assert pending["ecc_uncorrected_aggregate"] == 3
    assert failed["remap_failure"] is True and failed["remap_pending"] is False
    # A reset applies the pending remap and zeroes the volatile counts.
    node.reset_gpu(1)
    after = sample(node, src, clock, clock.t + HEALTH_EVERY_S)[1].health
    assert (after["remap_pending"], after["ecc_uncorrected_volatile"]) == (False, 0)
    assert after["remapped_uncorrectable"] == 1 and after["ecc_uncorrected_aggregate"] == 3
    src.close()


def test_a_pcie_board_reports_no_nvlink_errors(tmp_path):
    node = SimNode(str(tmp_path / "a"), "gpu-p001", gpus=1, model="NVIDIA A100-PCIE-40GB")
    node.advance(T0)
    nvml = SimNVML(node)
    src = GpuSource(nvml, Clock())
    [r] = src.sample(T0)
    assert not any(k.startswith("nvlink_") for k in r.health)
    assert r.health["remapped_correctable"] == 0
    src.close()


def test_not_supported_everywhere_means_an_empty_reading(tmp_path):
    node = SimNode(str(tmp_path / "n"), "gpu-x", gpus=1)
    node.advance(T0)

    class NoHealth(SimNVML):
        def __getattribute__(self, name):
            if name in ("nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRemappedRows",
                        "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetNvLinkState"):
                def refuse(*a, **k):
                    raise pynvml.NVMLError_NotSupported()
                return refuse
            return super().__getattribute__(name)

    src = GpuSource(NoHealth(node), Clock())
    [r] = src.sample(T0)
    assert r.health == {}
    assert r.values  # the rest of the sample is unaffected
    src.close()


def test_the_agent_sends_a_gpu_health_section(tmp_path):
    node, clock = faulty_node(tmp_path), Clock()
    agent = Agent(node.collector_config(), nvml=SimNVML(node), clock=clock)
    for t in (T0, T0 + 10, T0 + 400):
        clock.t = t
        node.advance(t)
        agent.sample()
    batch = agent.build_batch()
    section = batch["gpu_health"]
    assert section["fields"] == HEALTH_FIELDS
    rows = [dict(zip(section["fields"], row, strict=True)) for row in section["rows"]]
    assert [(r["ts"], r["gpu"]) for r in rows] == [(T0, 0), (T0, 1), (T0, 2),
                                                    (T0 + 400, 0), (T0 + 400, 1), (T0 + 400, 2)]
    assert rows[4]["remap_pending"] is True and rows[4]["ecc_uncorrected_volatile"] == 3
    assert rows[5]["remap_failure"] is True
    assert rows[0]["retired_pages_sbe"] is None  # not supported: null
    agent.close()
