"""A simulated node's jobs exist in the simulator only: on a host with Slurm installed (a
demo on a login node, this project's own test machine), the simulated collector must not
ask the host's scontrol or slurmd about them. A real node's collector still does."""

import os
import stat

import pytest

from collectors.agent import Agent
from collectors.attribution.metadata import Scontrol
from collectors.config import Config
from collectors.sim.nvml import SimNVML
from tests.collectors.sim_agent import run_agent


@pytest.fixture
def host_slurm(tmp_path, monkeypatch):
    """``scontrol`` and ``slurmd`` first on the PATH, each noting every call in a log."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name in ("scontrol", "slurmd"):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexit 1\n')
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir, log


@pytest.mark.parametrize("mapping", [True, False])
def test_a_simulated_node_asks_the_hosts_slurm_nothing(tmp_path, host_slurm, mapping):
    _bin, log = host_slurm
    _node, _nvml, batch, rows = run_agent(tmp_path, SimNVML, mapping=mapping)
    assert {r["job"] for r in rows} >= {"77"}, "the simulated job was attributed"
    assert not log.exists(), log.read_text()


def test_a_real_nodes_collector_asks_the_scontrol_on_its_path(tmp_path, host_slurm):
    bin_dir, log = host_slurm
    agent = Agent(Config(cluster="c", procfs_root=str(tmp_path), cgroup_root=str(tmp_path),
                         job_map_dir=str(tmp_path), sysfs_root=str(tmp_path),
                         spool_dir=str(tmp_path / "spool")), nvml=None)
    try:
        assert agent.jobs.scontrol.lookup("4242") == {}  # it answered "exit 1"
    finally:
        agent.close()
    assert "scontrol show job 4242" in log.read_text()


def test_an_empty_executable_means_no_scontrol(host_slurm):
    _bin, log = host_slurm
    scontrol = Scontrol(executable="")
    assert scontrol.lookup("4242") == {} and scontrol.at_end("4242") == {}
    assert not log.exists()
