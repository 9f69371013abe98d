"""A GPU's MIG mode, from the collector's NVML reading to the stored GPU: the real collector
agent (on the simulated NVML backend) -> Redis -> a real Celery worker -> PostgreSQL.

The collector sends it as ``mig_enabled``; the server once read ``mig_mode`` instead, so every
GPU's MIG mode was stored as unknown (null)."""

import pynvml
import pytest

from clusterui.ingest.models import IngestBatch
from clusterui.inventory.models import Gpu
from collectors.agent import Agent
from collectors.sim.node import SimNode
from collectors.sim.nvml import SimNVML
from collectors.transport import RedisSender
from tests.factories import recent_start
from tests.services import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class MigOnGpu1(SimNVML):
    """The simulated node, with MIG mode enabled on GPU 1 (current and pending)."""

    def nvmlDeviceGetMigMode(self, handle):
        modes = super().nvmlDeviceGetMigMode(handle)
        if handle is self._handles[1]:
            return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]
        return modes


def test_the_mig_mode_the_collector_reads_is_stored_on_the_gpu(worker, broker_url, tmp_path):
    start = recent_start()
    node = SimNode(str(tmp_path / "n"), "mig-node-0", gpus=2)
    nvml = MigOnGpu1(node)
    now = [start]
    agent = Agent(node.collector_config(cluster="mig", interval=10, flush=60), nvml=nvml,
                  clock=lambda: now[0])
    sender = RedisSender(broker_url)
    try:
        node.advance(start)
        for tick in range(1, 4):
            now[0] = start + 10 * tick
            node.advance(now[0])
            agent.sample()
        batch = agent.build_batch()
        assert [g["mig_enabled"] for g in batch["gpus"]] == [False, True]
        sender.send(batch)
    finally:
        sender.close()
        agent.close()
    wait_for(lambda: IngestBatch.objects.exists(), timeout=30, what="the batch to be stored")
    assert IngestBatch.objects.get().rejected == 0
    stored = dict(Gpu.objects.filter(node__name="mig-node-0").values_list("index", "mig_mode"))
    assert stored == {0: False, 1: True}
