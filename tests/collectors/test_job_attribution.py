import os

import pytest

from collectors.attribution import JobAttributor
from collectors.attribution.cgroup import job_from_path, job_of_cgroup_text
from collectors.attribution.jobmap import parse_map_file
from collectors.attribution.metadata import Scontrol, parse_scontrol_json
from collectors.attribution.slurm_gpus import SlurmGpuIndex, expand_files, parse_slurmd_gres
from tests.collectors.sysfs_trees import add_process, write

UUID0 = "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd"
UUID1 = "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"

SLURM_V1 = """12:pids:/slurm/uid_1000/job_812345/step_0/task_0
9:memory:/slurm/uid_1000/job_812345/step_0/task_0
4:cpu,cpuacct:/slurm/uid_1000/job_812345/step_0/task_0
1:name=systemd:/system.slice/slurmd.service
"""
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_812345/step_0/user/task_0\n"
SLURM_V2_NODE = "0::/system.slice/gpu-a017_slurmstepd.scope/job_812345/step_batch/user/task_0\n"
K8S_CGROUPFS = (
    "0::/kubepods/burstable/pod6b1f3c2e-0d4b-4e8f-9a6c-1b2d3e4f5a60/"
    "0123456789abcdef0123456789abcdef\n"
)
K8S_SYSTEMD = (
    "0::/kubepods.slice/kubepods-besteffort.slice/"
    "kubepods-besteffort-pod6b1f3c2e_0d4b_4e8f_9a6c_1b2d3e4f5a60.slice/"
    "cri-containerd-0123456789abcdef.scope\n"
)
POD = "6b1f3c2e-0d4b-4e8f-9a6c-1b2d3e4f5a60"


@pytest.mark.parametrize(
    ("text", "scheduler", "job_id", "uid", "job_dir"),
    [
        (SLURM_V1, "slurm", "812345", 1000, "memory/slurm/uid_1000/job_812345"),
        (SLURM_V2, "slurm", "812345", None, "system.slice/slurmstepd.scope/job_812345"),
        (SLURM_V2_NODE, "slurm", "812345", None,
         "system.slice/gpu-a017_slurmstepd.scope/job_812345"),
        (K8S_CGROUPFS, "kubernetes", POD, None, f"kubepods/burstable/pod{POD}"),
        (K8S_SYSTEMD, "kubernetes", POD, None,
         "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
         "6b1f3c2e_0d4b_4e8f_9a6c_1b2d3e4f5a60.slice"),
    ],
)  # fmt: skip
def test_cgroup_layouts(text, scheduler, job_id, uid, job_dir):
    hit = job_of_cgroup_text(text, "/cg")
    assert (hit.job.scheduler, hit.job.id, hit.job.uid) == (scheduler, job_id, uid)
    assert os.path.join("/cg", job_dir) in hit.cgroup_dirs


def test_guaranteed_pod_and_unrelated_paths():
    assert job_from_path(f"/kubepods/pod{POD}/abc")[0].id == POD
    assert job_from_path("/user.slice/user-1000.slice/session-3.scope") is None
    assert job_of_cgroup_text("0::/system.slice/sshd.service\n", "/cg") is None


def test_map_file_format():
    entry = parse_map_file("812345 1000\nuser=alice\nname=llama ft\ncpus=16\nbogus=1\n")
    assert (entry.job_id, entry.uid) == ("812345", 1000)
    assert entry.meta == {"user": "alice", "name": "llama ft", "cpus": "16"}
    assert parse_map_file("812345\n").uid is None
    assert parse_map_file("") is None


def test_scontrol_json_both_number_styles():
    new = ('{"jobs": [{"job_id": 7, "user_name": "bob", "name": "x", "account": "a",'
           ' "partition": "gpu", "start_time": {"set": true, "infinite": false,'
           ' "number": 1763790000}, "node_count": {"set": true, "number": 1},'
           ' "cpus": {"set": true, "number": 32}, "user_id": 1001}]}')  # fmt: skip
    assert parse_scontrol_json(new) == {
        "user": "bob", "name": "x", "account": "a", "partition": "gpu",
        "start_time": "1763790000", "nodes": "1", "cpus": "32", "uid": "1001",
    }  # fmt: skip
    old = '{"jobs": [{"user_name": "bob", "start_time": 1763790000, "node_count": 2, "cpus": 64}]}'
    assert parse_scontrol_json(old) == {"user": "bob", "start_time": "1763790000", "nodes": "2"}


def test_scontrol_json_scheduler_facts():
    """Slurm's OpenAPI shapes (23.11+: job_state a list, uint32_no_val numbers); Debian's
    22.05 has no --json, so these are written from the schema, not captured."""
    job = ('{"jobs": [{"job_state": ["TIMEOUT"], "time_limit": {"set": true, "infinite": false,'
           ' "number": 240}, "submit_time": {"set": true, "number": 1763789000},'
           ' "exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "number": 0},'
           ' "signal": {"id": {"set": true, "number": 15}, "name": "TERM"}}}]}')  # fmt: skip
    assert parse_scontrol_json(job) == {
        "state": "TIMEOUT", "time_limit_s": "14400", "submit_time": "1763789000",
        "exit_code": "0", "exit_signal": "15",
    }  # fmt: skip
    unlimited = '{"jobs": [{"time_limit": {"set": true, "infinite": true, "number": 0}}]}'
    assert parse_scontrol_json(unlimited) == {}


def make_attributor(roots):
    return JobAttributor(roots["proc"], roots["cgroup"], roots["jobmap"], Scontrol(executable=""),
                         SlurmGpuIndex(executable=""))  # fmt: skip


def test_job_from_process_with_environment_and_v2_usage(roots):
    add_process(roots["proc"], 4242, SLURM_V2, {
        "SLURM_JOB_ID": "812345", "SLURM_JOB_USER": "alice", "SLURM_JOB_NAME": "llama-ft",
        "SLURM_JOB_ACCOUNT": "nlp", "SLURM_JOB_PARTITION": "gpu", "SLURM_CPUS_ON_NODE": "16",
    })  # fmt: skip
    jdir = os.path.join(roots["cgroup"], "system.slice/slurmstepd.scope/job_812345")
    write(os.path.join(jdir, "cpu.stat"), "usage_usec 1000000\nuser_usec 800000\n")
    write(os.path.join(jdir, "memory.current"), "182000000000")
    att = make_attributor(roots)
    owners, ended = att.attribute(10.0, [(0, UUID0, [4242]), (1, UUID1, [])])
    job = owners[UUID0]
    assert owners[UUID1] is None and ended == []
    # No scheduler facts (no scontrol here): absent, which is "not reported".
    assert job.as_dict([0]) == {
        "id": "812345", "scheduler": "slurm", "user": "alice", "name": "llama-ft",
        "account": "nlp", "partition": "gpu", "started_at": None, "ended_at": None,
        "gpus": [0], "cpus": 16,
    }  # fmt: skip
    assert att.usage(10.0) == [("812345", None, 182000000000)]
    write(os.path.join(jdir, "cpu.stat"), "usage_usec 117000000\n")
    assert att.usage(20.0) == [("812345", 11.6, 182000000000)]


def test_v1_usage_in_nanoseconds(roots):
    add_process(roots["proc"], 77, SLURM_V1)
    base = "slurm/uid_1000/job_812345"
    write(os.path.join(roots["cgroup"], "cpu,cpuacct", base, "cpuacct.usage"), "0")
    write(os.path.join(roots["cgroup"], "memory", base, "memory.usage_in_bytes"), "4096")
    att = make_attributor(roots)
    att.attribute(0.0, [(0, UUID0, [77])])
    att.usage(0.0)
    write(os.path.join(roots["cgroup"], "cpu,cpuacct", base, "cpuacct.usage"), "20000000000")
    assert att.usage(10.0) == [("812345", 2.0, 4096)]


@pytest.mark.parametrize("name", ["0", UUID0])
def test_mapping_file_by_index_or_uuid(roots, name):
    write(os.path.join(roots["jobmap"], name),
          "900 1000\nuser=carol\naccount=ml\npartition=a100\nstart_time=1763790000\n")  # fmt: skip
    att = make_attributor(roots)
    owners, _ = att.attribute(5.0, [(0, UUID0, []), (1, UUID1, [])])
    d = owners[UUID0].as_dict([0])
    assert (d["id"], d["user"], d["account"], d["partition"]) == ("900", "carol", "ml", "a100")
    assert d["started_at"] == 1763790000.0 and d["name"] is None  # missing stays missing
    assert owners[UUID1] is None


def test_mapping_job_finds_its_v2_cgroup(roots):
    write(os.path.join(roots["jobmap"], "0"), "900 1000\n")
    jdir = os.path.join(roots["cgroup"], "system.slice/node1_slurmstepd.scope/job_900")
    write(os.path.join(jdir, "memory.current"), "1234")
    att = make_attributor(roots)
    att.attribute(5.0, [(0, UUID0, [])])
    assert att.usage(5.0) == [("900", None, 1234)]


def test_job_end_is_reported_once(roots):
    write(os.path.join(roots["jobmap"], "0"), "900 1000\n")
    att = make_attributor(roots)
    att.attribute(5.0, [(0, UUID0, [])])
    os.remove(os.path.join(roots["jobmap"], "0"))
    owners, ended = att.attribute(15.0, [(0, UUID0, [])])
    assert owners[UUID0] is None
    assert [(j.ref.id, j.ended_at) for j in ended] == [("900", 15.0)]
    assert att.attribute(25.0, [(0, UUID0, [])])[1] == []


def test_kubernetes_pod(roots):
    add_process(roots["proc"], 9, K8S_SYSTEMD)
    att = make_attributor(roots)
    owners, _ = att.attribute(1.0, [(0, UUID0, [9]), (1, UUID1, [12345])])  # 12345: gone
    assert owners[UUID0].as_dict([0])["scheduler"] == "kubernetes"
    assert owners[UUID0].ref.id == POD
    assert owners[UUID1] is None


# Slurm >= 26.05 names a job's cgroup v2 directory by its SLUID unless cgroup.conf has
# CgroupJobIdPaths=yes. The layout is SchedMD's own example in doc/html/cgroup_v2.shtml
# ("Hierarchy overview", `systemctl status slurmstepd.scope`): job 3385's step 0 runs
# `/usr/bin/sleep 123` in slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0.
SLUID = "s5K1KKYAYG5D00"
SLURM_V2_SLUID = f"0::/system.slice/slurmstepd.scope/{SLUID}/step_0/user/task_0\n"


def test_sluid_cgroup_path_is_recognised():
    hit = job_of_cgroup_text(SLURM_V2_SLUID, "/cg")
    assert (hit.job.scheduler, hit.job.id, hit.job.sluid) == ("slurm", "", SLUID)
    assert hit.cgroup_dirs == (f"/cg/system.slice/slurmstepd.scope/{SLUID}",)
    # Not a SLUID: wrong length, or a letter Crockford base32 leaves out (I, L, O, U).
    assert job_from_path("/system.slice/slurmstepd.scope/s5K1KKYAYG5D0/step_0") is None
    assert job_from_path("/system.slice/slurmstepd.scope/s5K1KKYAYG5DO0/step_0") is None
    assert job_from_path("/system.slice/slurmstepd.scope/system") is None


def test_sluid_job_resolved_through_the_prolog_file(roots):
    add_process(roots["proc"], 113635, SLURM_V2_SLUID)  # no environment readable
    write(os.path.join(roots["jobmap"], "0"), f"3385 1000\nuser=lipi\nsluid={SLUID}\n")
    jdir = os.path.join(roots["cgroup"], "system.slice/slurmstepd.scope", SLUID)
    write(os.path.join(jdir, "memory.current"), "2048")
    att = make_attributor(roots)
    owners, _ = att.attribute(1.0, [(0, UUID0, [113635]), (1, UUID1, [])])
    assert owners[UUID0].as_dict([0])["id"] == "3385"
    assert owners[UUID0].as_dict([0])["user"] == "lipi"
    assert att.usage(1.0) == [("3385", None, 2048)]


def test_sluid_job_resolved_through_the_process_environment(roots):
    add_process(roots["proc"], 113635, SLURM_V2_SLUID, {"SLURM_JOB_ID": "3385"})
    owners, _ = make_attributor(roots).attribute(1.0, [(0, UUID0, [113635])])
    assert owners[UUID0].ref.id == "3385"


def test_unresolvable_sluid_is_no_job_rather_than_a_wrong_one(roots):
    add_process(roots["proc"], 113635, SLURM_V2_SLUID)
    owners, _ = make_attributor(roots).attribute(1.0, [(0, UUID0, [113635])])
    assert owners[UUID0] is None


def test_mapping_only_job_finds_its_sluid_cgroup(roots):
    write(os.path.join(roots["jobmap"], "0"), f"3385 1000\nsluid={SLUID}\n")
    write(os.path.join(roots["cgroup"], "system.slice/slurmstepd.scope", SLUID,
                       "memory.current"), "4096")  # fmt: skip
    att = make_attributor(roots)
    att.attribute(1.0, [(0, UUID0, [])])
    assert att.usage(1.0) == [("3385", None, 4096)]


def test_slurmd_gres_lines_give_device_files_in_index_order():
    # Printed by `slurmd -G` of Debian's slurm-wlm 22.05.8 (tests/slurm runs it for real).
    text = ("slurmd-vm: Gres Name=gpu Type=(null) Count=2 Index=0 ID=7696487 "
            "File=/dev/nvidia[4-5] (null)\n"
            "slurmd-vm: Gres Name=gpu Type=a100 Count=3 Index=2 ID=7696487 "
            "File=/dev/nvidia[0,2-3] (null)\n"
            "slurmd-vm: Gres Name=shard Type=(null) Count=8 Index=0 ID=1 File=(null) (null)\n")  # fmt: skip
    assert parse_slurmd_gres(text) == ["/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia0",
                                       "/dev/nvidia2", "/dev/nvidia3"]  # fmt: skip
    assert expand_files("/dev/nvidia[08-10]") == ["/dev/nvidia08", "/dev/nvidia09",
                                                  "/dev/nvidia10"]  # fmt: skip
    assert parse_slurmd_gres("") == []


def test_a_gpu_shared_by_two_jobs_goes_to_the_one_with_more_processes_and_the_log_says_so(
        roots, caplog):
    """As on a real H100 under MPS (tests/data/real-h100-mps): two processes of one job and
    one of another on the same GPU. The row carries one job; the log names the other, once."""
    other = SLURM_V2.replace("812345", "812346")
    for pid, text in ((10, SLURM_V2), (11, SLURM_V2), (12, other)):
        add_process(roots["proc"], pid, text)
    att = make_attributor(roots)
    with caplog.at_level("WARNING", logger="collectors.attribution.attributor"):
        for ts in (10.0, 20.0):
            owners, _ = att.attribute(ts, [(0, UUID0, [10, 11, 12])])
            assert owners[UUID0].ref.id == "812345"
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"GPU {UUID0} runs processes of 2 jobs: its samples go to job 812345 (2 "
                    "processes); not reported on it: 812346 (1)"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="collectors.attribution.attributor"):
        att.attribute(30.0, [(0, UUID0, [10])])  # alone again: nothing to say
        att.attribute(40.0, [(0, UUID0, [10, 12])])  # shared again: said again
    assert len(caplog.records) == 1 and "812346 (1)" in caplog.records[0].getMessage()
