"""MIG instances and MPS clients, through the real collector agent on the NVML simulator.

The simulator answers NVML's own calls (``collectors/sim/sharing.py``): a MIG-enabled H100
with 1g.10gb instances, utilization NOT_SUPPORTED on MIG, processes per MIG handle, MPS
clients in ``nvmlDeviceGetMPSComputeRunningProcesses`` and the MPS server and its clients in
the compute list (as a real H100's driver listed them). What is checked is what a user sees: each instance is a GPU of its own under its
parent, with its memory and profile, no made-up utilization, and the job that runs on it.
"""

from __future__ import annotations

import os

import pytest

from collectors.attribution.mig import gres_positions
from collectors.attribution.slurm_gpus import parse_slurmd_gres
from collectors.gpu.mig import profile_of
from collectors.sim.node import SimNode
from collectors.sim.nvml import SimNVML
from collectors.sim.sharing import MPS_SERVER_PID, SimMigNVML, SimMpsNVML
from tests.collectors.sim_agent import T0, run_agent


def _job_uuids(batch, job_id="77"):
    [job] = [j for j in batch["jobs"] if j["id"] == job_id]
    return {batch["gpus"][i]["uuid"] for i in job["gpus"]}


def test_each_mig_instance_is_a_gpu_under_its_parent_with_profile_and_memory(tmp_path):
    _, nvml, batch, rows = run_agent(tmp_path, SimMigNVML)
    parents = [g for g in batch["gpus"] if "parent_uuid" not in g]
    instances = [g for g in batch["gpus"] if "parent_uuid" in g]
    assert len(parents) == 1 and parents[0]["mig_enabled"] is True
    assert len(instances) == 7
    for g in instances:
        assert g["uuid"].startswith("MIG-")
        assert g["parent_uuid"] == parents[0]["uuid"]
        assert g["index"] == parents[0]["index"]
        assert g["mig_profile"] == "1g.10gb"
        assert (g["mig_slices"], g["mig_slices_total"]) == (1, 7)
        assert g["memory_total_mib"] == nvml.instance_mib  # the instance's, not the GPU's
    assert sorted(g["mig_gi_id"] for g in instances) == [1, 2, 3, 4, 5, 6, 7]
    assert {g["mig_ci_id"] for g in instances} == {0}


def test_mig_rows_send_null_utilization_and_their_own_memory_and_sm_activity(tmp_path):
    _, nvml, batch, rows = run_agent(tmp_path, SimMigNVML)
    pos = {g["uuid"]: i for i, g in enumerate(batch["gpus"])}
    busy = _job_uuids(batch)
    for uuid, i in pos.items():
        mine = [r for r in rows if r["gpu"] == i]
        assert len(mine) == 3
        # NVML says NOT_SUPPORTED for utilization on MIG: null, never a made-up value.
        assert all(r["util_pct"] is None and r["mem_util_pct"] is None for r in mine)
        if uuid in busy:
            assert all(r["mem_used_mib"] > 0 for r in mine)
            # GPM per GPU instance (nvmlGpmMigSampleGet) from the second sample on
            assert all(r["sm_active_pct"] > 50 for r in mine[1:])
    parent_rows = [r for r in rows if "parent_uuid" not in batch["gpus"][r["gpu"]]]
    assert all(r["power_w"] > 0 for r in parent_rows)  # the parent carries the power
    instance_rows = [r for r in rows if "parent_uuid" in batch["gpus"][r["gpu"]]]
    assert all(r["power_w"] is None for r in instance_rows)


def test_a_job_on_mig_instances_is_attributed_to_those_instances_by_their_processes(tmp_path):
    _, _, batch, rows = run_agent(tmp_path, SimMigNVML, job_gpus=(2, 5), mapping=False)
    uuids = _job_uuids(batch)
    assert len(uuids) == 2
    slots = sorted(g["mig_gi_id"] for g in batch["gpus"] if g["uuid"] in uuids)
    assert slots == [3, 6]  # node GPUs 2 and 5 are slots 2 and 5 (GI ids slot + 1)
    parent = [i for i, g in enumerate(batch["gpus"]) if "parent_uuid" not in g]
    # the MIG-enabled GPU lists every instance's processes: it must not take the job too
    assert all(r["job"] is None for r in rows if r["gpu"] in parent)


def test_slurm_mapping_files_name_mig_instances_by_their_gres_position(tmp_path):
    class NoProcesses(SimMigNVML):
        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            return []

    # The simulated prolog writes files named by Slurm's GPU index: node GPUs 8 and 9 are
    # positions 8 and 9, slots 1 and 2 of the second GPU (7 instances a GPU; GI id slot + 1).
    _, _, batch, _ = run_agent(tmp_path, NoProcesses, gpus=14, job_gpus=(8, 9))
    parents = [g for g in batch["gpus"] if "parent_uuid" not in g]
    second = max(parents, key=lambda g: g["index"])
    got = [g for g in batch["gpus"] if g["uuid"] in _job_uuids(batch)]
    assert {g["parent_uuid"] for g in got} == {second["uuid"]}
    assert sorted(g["mig_gi_id"] for g in got) == [2, 3]


def test_gres_positions_follow_slurm_nvml_plugin_order():
    from collectors.gpu.inventory import GpuInfo

    def gpu(uuid, index, mig=False):
        return GpuInfo(uuid, index, None, None, None, None, None, mig)

    def inst(uuid, parent):
        return GpuInfo(uuid, parent.index, None, None, None, None, None, None,
                       parent_uuid=parent.uuid)  # fmt: skip

    g0, g1, g2 = gpu("GPU-a", 0), gpu("GPU-b", 1, mig=True), gpu("GPU-c", 2)
    inventory = [g0, g1, inst("MIG-x", g1), inst("MIG-y", g1), g2]
    assert gres_positions(inventory) == {"GPU-a": 0, "MIG-x": 1, "MIG-y": 2, "GPU-c": 3}
    assert gres_positions([g0, g2]) is None  # no MIG instance: NVML's indexes as before


def test_slurmd_gres_mig_line_is_one_gpu():
    # A MIG GRES line as `slurmd -G` prints GRES (the format of the Debian 22.05.8 lines in
    # test_job_attribution.py), with the File list gpu_nvml.c's _handle_mig builds for a MIG
    # device: the GPU's file then its GI and CI capability files (SchedMD/slurm
    # src/plugins/gpu/nvml/gpu_nvml.c @ 00a99eb2ecb1cb4f2ee0ff9690ef1194322def86).
    text = ("n1: Gres Name=gpu Type=a100_3g.20gb Count=1 Index=0 ID=7696487 "
            "File=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22 "
            "(null)\n"
            "n1: Gres Name=gpu Type=a100_3g.20gb Count=1 Index=0 ID=7696487 "
            "File=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30,/dev/nvidia-caps/nvidia-cap31 "
            "(null)\n"
            "n1: Gres Name=gpu Type=a100 Count=1 Index=1 ID=7696487 File=/dev/nvidia1 (null)\n")
    assert parse_slurmd_gres(text) == ["/dev/nvidia0", "/dev/nvidia0", "/dev/nvidia1"]


def test_profile_from_name_else_built_as_slurm_names_it():
    assert profile_of("NVIDIA H100 80GB HBM3 MIG 2g.20gb", 2, 20000) == "2g.20gb"
    # gpu_nvml.c: "%ug.%lugb" of gpuInstanceSliceCount and round(memorySizeMB / 1024)
    assert profile_of("NVIDIA H100 80GB HBM3", 1, 10194) == "1g.10gb"
    assert profile_of(None, None, None) is None


def test_mps_clients_attribute_the_job_not_the_mps_server(tmp_path):
    node, nvml, batch, rows = run_agent(tmp_path, SimMpsNVML, gpus=2, job_gpus=(1,), mapping=False)
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(1)
    clients = [pid for pid, _ in node.processes(1)]
    # As a real H100 listed them: the server (in no job's cgroup) and then every client.
    assert [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)] == [
        MPS_SERVER_PID, *clients]
    assert [p.pid for p in nvml.nvmlDeviceGetMPSComputeRunningProcesses(h)] == clients
    assert _job_uuids(batch) == {nvml.nvmlDeviceGetUUID(h)}
    assert any(r["job"] == "77" for r in rows)


class ServerOnly(SimMpsNVML):
    """A compute list holding the MPS server alone: what this project assumed before a real
    driver was seen (it listed the clients too); the MPS list must then find the job."""

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        procs = super().nvmlDeviceGetComputeRunningProcesses(handle)
        return procs[:1]

    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses


def test_a_compute_list_of_the_server_alone_still_finds_the_job_through_the_mps_list(tmp_path):
    _, _, batch, rows = run_agent(tmp_path, ServerOnly, gpus=2, job_gpus=(1,), mapping=False)
    assert [j["id"] for j in batch["jobs"]] == ["77"] and any(r["job"] == "77" for r in rows)


def test_without_the_mps_list_only_the_server_is_seen_and_no_job(tmp_path):
    class NoMpsList(ServerOnly):
        def nvmlDeviceGetMPSComputeRunningProcesses(self, handle):
            return SimNVML.nvmlDeviceGetMPSComputeRunningProcesses(self, handle)

        nvmlDeviceGetMPSComputeRunningProcesses_v3 = nvmlDeviceGetMPSComputeRunningProcesses

    # The control for the test above: the MPS server's pid leads to no job.
    _, _, batch, rows = run_agent(tmp_path, NoMpsList, gpus=2, job_gpus=(1,), mapping=False)
    assert batch["jobs"] == [] and all(r["job"] is None for r in rows)


def test_mps_clients_on_a_mig_instance(tmp_path):
    _, _, batch, _ = run_agent(tmp_path, SimMigNVML, job_gpus=(4,), mapping=False, mps=True)
    [got] = [g for g in batch["gpus"] if g["uuid"] in _job_uuids(batch)]
    assert got["mig_gi_id"] == 5


@pytest.mark.parametrize("profile, per_gpu", [("1g.10gb", 7), ("2g.20gb", 3)])
def test_profiles(tmp_path, profile, per_gpu):
    _, nvml, batch, _ = run_agent(tmp_path, SimMigNVML, gpus=6, job_gpus=(0,), profile=profile)
    instances = [g for g in batch["gpus"] if "parent_uuid" in g]
    assert len(instances) == 6 and {g["mig_profile"] for g in instances} == {profile}
    assert len(batch["gpus"]) - 6 == -(-6 // per_gpu)  # the physical GPUs
    assert os.path.isdir(tmp_path / "n")


def test_instances_destroyed_or_created_are_seen_at_the_next_listing(tmp_path):
    from collectors.gpu.source import MIG_REFRESH_S, GpuSource

    node = SimNode(str(tmp_path / "n"), "mig-n0", gpus=7, seed=3)
    node.advance(T0)
    nvml = SimMigNVML(node)
    now = [T0]
    source = GpuSource(nvml, lambda: now[0])
    try:
        assert len([g for g in source.inventory if g.parent_uuid]) == 7
        gone = nvml._migs[0].pop()  # an administrator destroys the last instance
        now[0] = T0 + 10
        node.advance(now[0])
        source.sample(now[0])
        assert len([g for g in source.inventory if g.parent_uuid]) == 7  # not listed yet
        now[0] = T0 + MIG_REFRESH_S + 10
        node.advance(now[0])
        readings = source.sample(now[0])
        uuids = {g.uuid for g in source.inventory if g.parent_uuid}
        assert len(uuids) == 6 and nvml.nvmlDeviceGetUUID(gone) not in uuids
        assert {r.uuid for r in readings} == uuids | {g.uuid for g in source.inventory
                                                      if not g.parent_uuid}
        # the instances kept their GPM state: SM activity right after the new listing
        assert all("sm_active_pct" in r.values for r in readings if r.uuid in uuids)
    finally:
        source.close()


def test_a_mig_gpu_whose_instances_cannot_be_listed_keeps_its_own_processes(tmp_path):
    import pynvml

    class CannotList(SimMigNVML):
        def nvmlDeviceGetMaxMigDeviceCount(self, handle):
            raise pynvml.NVMLError_NotSupported()

    _, nvml, batch, _ = run_agent(tmp_path, CannotList, job_gpus=(2,), mapping=False)
    assert not any("parent_uuid" in g for g in batch["gpus"])
    [gpu] = batch["gpus"]
    assert gpu["mig_enabled"] is True and _job_uuids(batch) == {gpu["uuid"]}
