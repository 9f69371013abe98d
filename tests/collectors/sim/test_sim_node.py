"""The generated trees have the kernel's shapes, and the real readers parse them."""

from __future__ import annotations

import os

import pytest

from collectors.attribution.cgroup import job_of_pid
from collectors.attribution.jobmap import read_job_map
from collectors.attribution.usage import cpu_seconds, memory_bytes
from collectors.nic import read_ethernet, read_ib_ports
from collectors.sim.node import SimJob, SimNode
from collectors.sim.scenarios import Scenario

T0 = 1_763_800_000.0


def _job(scenario=Scenario.INPUT_BOUND, job_id="4711", scheduler="slurm", end=None):
    return SimJob(job_id, scenario, "carol", 61003, "rl", "gpu", "ppo-atari", T0 - 60, end,
                  ("gpu-n001",), 4, 48, 99, scheduler=scheduler)  # fmt: skip


@pytest.mark.parametrize("layout", ["slurm-v2", "slurm-v1", "k8s"])
def test_trees_parse_with_the_collectors_readers(tmp_path, layout):
    k8s = layout == "k8s"
    job_id = "0b6f3a52-8d1e-4c7a-9f00-2a4b6c8d0e1f" if k8s else "4711"
    node = SimNode(str(tmp_path), "gpu-n001", seed=5, layout=layout, roce=k8s)
    job = _job(job_id=job_id, scheduler="kubernetes" if k8s else "slurm")
    node.place(job, (2, 3, 4, 5))
    node.advance(T0)

    ports = read_ib_ports(node.sysfs_root)
    assert [p.nic.name for p in ports] == [f"mlx5_{i}:1" for i in range(4)]
    assert all(p.nic.link_bytes_per_s == 50_000_000_000 for p in ports)
    assert all(p.state == "4: ACTIVE" for p in ports)
    assert all(p.nic.kind == ("roce" if k8s else "infiniband") for p in ports)
    text = (tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data").read_text()
    assert int(text) * 4 == pytest.approx(ports[0].tx_bytes)  # octets / 4
    assert (tmp_path / "sys/class/infiniband/mlx5_0/ports/1/rate").read_text().strip() == (
        "400 Gb/sec (4X NDR)"
    )
    eth = read_ethernet(node.sysfs_root)
    assert [e.nic.name for e in eth] == ["eth0"]  # lo has no device link: skipped
    assert eth[0].nic.link_bytes_per_s == 25000 * 125_000

    pid, _ = node.processes(3)[0]
    found = job_of_pid(node.procfs_root, node.cgroup_root, pid)
    assert found is not None and found.job.id == job_id
    assert found.job.scheduler == ("kubernetes" if k8s else "slurm")
    cpu0 = cpu_seconds(found.cgroup_dirs)
    assert memory_bytes(found.cgroup_dirs) > 1e9
    environ = (tmp_path / "proc" / str(pid) / "environ").read_bytes()
    assert environ.endswith(b"\0")
    if not k8s:
        assert b"SLURM_JOB_ID=4711\0" in environ
    node.advance(T0 + 10)
    assert cpu_seconds(found.cgroup_dirs) - cpu0 == pytest.approx(0.965 * 48 * 10, rel=0.05)

    mapping = read_job_map(node.job_map_dir, [(g, node.uuid(g)) for g in range(8)])
    if k8s:
        assert mapping == {}
    else:
        assert sorted(mapping) == [2, 3, 4, 5]
        entry = mapping[2]
        assert (entry.job_id, entry.uid) == ("4711", 61003)
        assert entry.meta["user"] == "carol" and entry.meta["cpus"] == "48"


def test_a_multi_node_jobs_environment_names_its_nodes_as_slurm_compresses_them(tmp_path):
    # Slurm gives SLURM_JOB_NODELIST as a hostlist expression, the form `scontrol show
    # hostlist` prints and `scontrol show hostnames` expands (scontrol(1)), not comma-joined.
    node = SimNode(str(tmp_path), "gpu-n002", seed=5)
    job = SimJob("4712", Scenario.HEALTHY_MULTINODE, "carol", 61003, "rl", "gpu", "ddp", T0 - 60,
                 None, ("gpu-n001", "gpu-n002", "gpu-n003", "gpu-n007"), 4, 48, 99)  # fmt: skip
    node.place(job, (0, 1, 2, 3))
    node.advance(T0)
    pid, _ = node.processes(0)[0]
    environ = dict(
        item.split(b"=", 1)
        for item in (tmp_path / "proc" / str(pid) / "environ").read_bytes().split(b"\0")
        if item
    )
    assert environ[b"SLURM_JOB_NODELIST"] == b"gpu-n[001-003,007]"
    assert environ[b"SLURM_JOB_NUM_NODES"] == b"4"


def test_job_end_removes_its_files(tmp_path):
    node = SimNode(str(tmp_path), "gpu-n001", seed=5)
    node.place(_job(end=T0 + 5), (0, 1, 2, 3))
    node.advance(T0)
    pid = node.processes(0)[0][0]
    assert (tmp_path / "proc" / str(pid)).exists()
    assert (tmp_path / "run/clusterui-jobs/0").exists()
    node.advance(T0 + 10)
    assert node.processes(0) == []
    assert not (tmp_path / "proc" / str(pid)).exists()
    assert not (tmp_path / "run/clusterui-jobs/0").exists()
    assert not os.listdir(tmp_path / "sys/fs/cgroup/system.slice/gpu-n001_slurmstepd.scope")


def test_counters_do_not_depend_on_the_step(tmp_path):
    a = SimNode(str(tmp_path / "a"), "gpu-n001", seed=5)
    b = SimNode(str(tmp_path / "b"), "gpu-n001", seed=5)
    for node in (a, b):
        node.place(_job(Scenario.COMM_BOUND_MULTINODE), (0, 1, 2, 3))
        node.advance(T0)
    for k in range(1, 31):
        a.advance(T0 + k)
    b.advance(T0 + 30)
    for ca, cb in zip(a.counters, b.counters, strict=True):
        assert ca.energy_j == pytest.approx(cb.energy_j, rel=1e-9)
        assert ca.nvlink_tx == pytest.approx(cb.nvlink_tx, rel=1e-9)
        assert ca.sm == pytest.approx(cb.sm, rel=1e-9)
    assert [p.tx for p in a.ports] == pytest.approx([p.tx for p in b.ports], rel=1e-9)
    assert a.gauges == b.gauges


def test_time_goes_forward_only(tmp_path):
    node = SimNode(str(tmp_path), "gpu-n001")
    node.advance(T0)
    with pytest.raises(ValueError):
        node.advance(T0 - 1)


def test_collector_config_points_at_the_trees(tmp_path):
    node = SimNode(str(tmp_path), "gpu-n001")
    config = node.collector_config(cluster="demo", interval=1, flush=5)
    assert config.nvml == "sim" and config.node == "gpu-n001" and config.cluster == "demo"
    assert config.sysfs_root == str(tmp_path / "sys")
    assert config.procfs_root == str(tmp_path / "proc")
    assert config.cgroup_root == str(tmp_path / "sys/fs/cgroup")
    assert config.job_map_dir == str(tmp_path / "run/clusterui-jobs")


def test_a_degraded_link_carries_no_more_than_its_rate(tmp_path):
    """A port retrained at 1X (100 Gb/s) shows at most 100 Gb/s of traffic in its counters,
    as a real one would; its healthy twin under the same job carries more than that."""
    from collectors.sim.fabric import LinkFault

    node = SimNode(str(tmp_path), "gpu-n001", seed=5)
    job = SimJob("4712", Scenario.COMM_BOUND_MULTINODE, "dave", 61004, "nlp", "gpu", "allreduce",
                 T0 - 600, None, ("gpu-n001", "gpu-n002"), 8, 64, 7)
    node.place(job, tuple(range(8)))
    node.link_faults.append(LinkFault(port=0, start=T0, kind="width"))
    node.advance(T0)
    before = {p.nic.name: p for p in read_ib_ports(node.sysfs_root)}
    node.advance(T0 + 60)
    after = {p.nic.name: p for p in read_ib_ports(node.sysfs_root)}

    def gbps(name, attr):
        return (getattr(after[name], attr) - getattr(before[name], attr)) * 8 / 60 / 1e9

    assert after["mlx5_0:1"].nic.link_bytes_per_s == 12_500_000_000  # 1X NDR: 100 Gb/s
    for attr in ("tx_bytes", "rx_bytes"):
        assert 0 < gbps("mlx5_0:1", attr) <= 100
        assert gbps("mlx5_1:1", attr) > 100
