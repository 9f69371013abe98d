"""The simulator's RoCE pause counters reach the collector through its replaceable ethtool
reader (``collectors.sim.fabric.SimEthtool``), as the kernel's would through SIOCETHTOOL."""

from __future__ import annotations

from collectors.fabric import FabricCounters
from collectors.roce_pause import PAUSE_COUNTERS
from collectors.sim.fabric import SimEthtool
from collectors.sim.node import SimJob, SimNode
from collectors.sim.scenarios import Scenario

T0 = 1_763_800_000.0


def _job():
    return SimJob("4711", Scenario.INPUT_BOUND, "carol", 61003, "rl", "gpu", "ppo-atari",
                  T0 - 60, None, ("gpu-n001",), 8, 48, 99)  # fmt: skip


def test_roce_ports_report_pause_frames_that_follow_their_traffic(tmp_path):
    node = SimNode(str(tmp_path), "gpu-n001", seed=5, roce=True)
    node.place(_job(), range(8))
    reader = FabricCounters(node.sysfs_root, SimEthtool(node))
    node.advance(T0)
    reader.sample()
    sent_before = [p.tx for p in node.ports]
    node.advance(T0 + 600)
    ports = reader.sample()
    assert sorted(ports) == [f"mlx5_{i}:1" for i in range(4)]
    for i, port in enumerate(node.ports):
        values = ports[f"mlx5_{i}:1"]
        gb_sent = int(port.tx // 1e9) - int(sent_before[i] // 1e9)
        assert gb_sent > 0  # the job's traffic crossed the port
        assert values["rx_prio_pause"] == gb_sent  # one pause received per GB sent
        assert values["rx_prio_pause_duration"] == 20 * gb_sent
        assert values["tx_pause_storm_error_events"] == 0  # no storm simulated
        assert values["rx_pause_ctrl_phy"] == 0  # PFC, not global pause


def test_infiniband_ports_have_no_pause_counters(tmp_path):
    node = SimNode(str(tmp_path), "gpu-n002", seed=5, roce=False)
    asked = []
    reader = FabricCounters(node.sysfs_root, lambda name: asked.append(name) or {})
    for t in (T0, T0 + 60):
        node.advance(t)
        ports = reader.sample()
    assert asked == []
    assert all(v[f] is None for v in ports.values() for f in PAUSE_COUNTERS)


def test_the_simulated_cluster_agents_send_pause_fields_for_roce_nodes_only(tmp_path):
    from collectors.sim.cluster import ClusterSim

    sim = ClusterSim(nodes=2, seed=1, start=T0, root_dir=str(tmp_path), interval=10,
                     k8s_nodes=1)  # the second node is a Kubernetes node: RoCE
    try:
        for k in range(4):
            sim.step(T0 + k * 10)
        batches = {b["node"]: b for b in sim.flush()}
    finally:
        sim.close()

    def pause_values(batch):
        section = batch["nic_samples"]
        at = section["fields"].index("rx_prio_pause")
        storm = section["fields"].index("tx_pause_storm_error_events")
        kinds = [n["kind"] for n in batch["nics"]]  # a row names its NIC by position
        return [(r[at], r[storm]) for r in section["rows"]
                if kinds[r[1]] in ("roce", "infiniband")]

    roce, ib = pause_values(batches["gpu-a002"]), pause_values(batches["gpu-a001"])
    assert roce and all(v is not None and s == 0 for v, s in roce)  # increases, no storm
    assert ib and all(v is None and s is None for v, s in ib)  # InfiniBand: not reported
