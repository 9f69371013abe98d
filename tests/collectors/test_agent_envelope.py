import json
import logging
import os

import pytest

from collectors.agent import Agent
from collectors.config import Config
from tests.collectors.collector_fakes import FakeGpu, FakeNVML
from tests.collectors.sysfs_trees import (
    add_ib_port,
    add_netdev,
    set_ib_counters,
    set_netdev_counters,
    write,
)

EXAMPLE = "/work/shared/contract1-example.json"


@pytest.fixture
def example():
    path = os.environ.get("CLUSTERUI_CONTRACT1_EXAMPLE", EXAMPLE)
    if not os.path.exists(path):
        path = os.path.join(os.path.dirname(__file__), "contract1-example.json")
    with open(path) as fh:
        return json.load(fh)


class Clock:
    t = 1763799980.0

    def __call__(self):
        return self.t


def make_agent(roots, nvml):
    config = Config(cluster="example", node="gpu-a017", sysfs_root=roots["sys"],
                    procfs_root=roots["proc"], cgroup_root=roots["cgroup"],
                    job_map_dir=roots["jobmap"], interval=10, flush=10)  # fmt: skip
    clock = Clock()
    return Agent(config, nvml=nvml, clock=clock), clock


def test_envelope_matches_contract_1(roots, example):
    sysfs = roots["sys"]
    add_ib_port(sysfs, "mlx5_0", 1, xmit=0, rcv=0)
    add_netdev(sysfs, "eth0", rx=0, tx=0, speed="25000")
    nvml = FakeNVML([FakeGpu(0), FakeGpu(1)])
    nvml.gpus[1].errors["nvmlDeviceGetPowerUsage"] = nvml.NVMLError_NotSupported()
    for i in (0, 1):
        write(os.path.join(roots["jobmap"], str(i)),
              "812345 1000\nuser=alice\nname=llama-ft\naccount=nlp\npartition=gpu\n"
              "start_time=1763796380\ncpus=16\n")  # fmt: skip
    agent, clock = make_agent(roots, nvml)
    agent.sample()
    clock.t += 10
    set_ib_counters(sysfs, "mlx5_0", 1, xmit=5_000_000, rcv=5_000_000)
    set_netdev_counters(sysfs, "eth0", rx=1000, tx=1000)
    agent.sample()
    nvml.xid_queue.append((1, 79))
    batch = agent.build_batch()
    agent.close()
    json.dumps(batch, allow_nan=False)

    assert set(example) <= set(batch)
    assert batch["schema"] == 1 and batch["cluster"] == "example" and batch["node"] == "gpu-a017"
    assert set(example["agent"]) | {"spool_dropped", "simulated"} == set(batch["agent"])
    assert batch["agent"]["seq"] == 1 and batch["agent"]["simulated"] is False
    assert batch["interval_s"] == 10
    assert set(example["gpus"][0]) <= set(batch["gpus"][0])
    assert set(example["nics"][0]) == set(batch["nics"][0])
    assert set(example["jobs"][0]) == set(batch["jobs"][0])
    for table in ("gpu_samples", "nic_samples", "job_samples"):
        # Optional fields added since the example was written come after its own.
        fields = example[table]["fields"]
        assert batch[table]["fields"][:len(fields)] == fields, table
        for row in batch[table]["rows"]:
            assert len(row) == len(batch[table]["fields"])

    assert [g["index"] for g in batch["gpus"]] == [0, 1]
    assert batch["jobs"] == [example["jobs"][0]]
    rows = batch["gpu_samples"]["rows"]
    assert len(rows) == 4 and {r[2] for r in rows} == {"812345"}
    power = batch["gpu_samples"]["fields"].index("power_w")
    assert [r[power] for r in rows if r[1] == 1] == [None, None]  # cannot report -> null
    nic_names = [n["name"] for n in batch["nics"]]
    assert nic_names == ["mlx5_0:1", "eth0"]
    ib_rows = [r for r in batch["nic_samples"]["rows"] if r[1] == 0]
    # Link state from rate/state/phys_state; no error or congestion counter files: null.
    assert ib_rows == [[clock.t, 0, 2_000_000.0, 2_000_000.0, 4, 5, 4, 400.0,
                        *[None] * 25]]  # saturated, 8 error, 9 RoCE, 7 pause counters

    second = agent.build_batch()
    assert second["agent"]["seq"] == 2 and second["gpu_samples"]["rows"] == []


def test_events_use_gpu_indexes(roots):
    nvml = FakeNVML([FakeGpu(0), FakeGpu(1)])
    nvml.gpus[1].errors["nvmlDeviceGetUtilizationRates"] = nvml.NVMLError_GpuIsLost()
    agent, clock = make_agent(roots, nvml)
    agent.sample()
    batch = agent.build_batch()
    agent.close()
    assert [(e["gpu"], e["kind"]) for e in batch["events"]] == [(1, "gpu_lost")]


def test_simulated_flag_and_no_nvml_notice(roots):
    nvml = FakeNVML([FakeGpu(0)])
    nvml.SIMULATED = True
    agent, _ = make_agent(roots, nvml)
    assert agent.build_batch()["agent"]["simulated"] is True
    agent.close()
    # A handler on the agent's own logger: what other tests did to the root logger's
    # configuration (Celery, Django) must not decide whether the notice is seen.
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    agent_log = logging.getLogger("collectors.agent")
    agent_log.addHandler(handler)
    try:
        agent, _ = make_agent(roots, None)
    finally:
        agent_log.removeHandler(handler)
    text = " ".join(r.getMessage() for r in records)
    assert "NVML not available" in text and "NIC samples only" in text
    agent.sample()
    assert agent.build_batch()["gpus"] == []


def test_non_finite_readings_are_sent_as_null(roots):
    """NVML's GPM can hand back NaN or infinity (an SM-activity ratio over a zero-length
    interval): the server would refuse the row, so the collector sends no value instead."""
    nvml = FakeNVML([FakeGpu(0, gpm={2: 10.0, 5: 20.0, 10: 30.0})])
    agent, clock = make_agent(roots, nvml)
    agent.sample()
    nvml.gpus[0].values["gpm"] = {2: float("nan"), 5: float("inf"), 10: 55.0}
    clock.t += 10
    agent.sample()
    batch = agent.build_batch()
    agent.close()
    json.dumps(batch, allow_nan=False)  # no NaN or Infinity anywhere in the batch
    fields = batch["gpu_samples"]["fields"]
    last = batch["gpu_samples"]["rows"][-1]
    assert last[fields.index("sm_active_pct")] is None
    assert last[fields.index("tensor_active_pct")] is None
    assert last[fields.index("dram_active_pct")] == 55.0
