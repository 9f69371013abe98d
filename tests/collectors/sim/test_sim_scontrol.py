"""The simulated ``scontrol`` (collectors/sim/scontrol.py) against what a real one printed:
the captures of Debian's Slurm 22.05 in tests/data/scontrol-22.05. The collector's own
scontrol code reads it unchanged, and the simulated cluster's batches carry each job's
requested walltime, submit time and, once it ended, how."""

from __future__ import annotations

import re
from pathlib import Path

from collectors.attribution.metadata import parse_scontrol_text
from collectors.sim.cluster import ClusterSim
from collectors.sim.node import SimJob
from collectors.sim.scenarios import Scenario
from collectors.sim.scontrol import MIN_JOB_AGE_S, SimScontrol, facts_of, hostlist, show_job

REAL = Path(__file__).resolve().parents[2] / "data" / "scontrol-22.05"
T0 = 1_763_800_000.0
KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


def job(**kw) -> SimJob:
    base = dict(id="813042", scenario=Scenario.HEALTHY, user="alice", uid=1001,
                account="nlp", partition="gpu", name="llama ft", start=T0, end=T0 + 5400,
                nodes=("gpu-a003", "gpu-a004"), gpus_per_node=8, cpus_per_node=96, seed=7)
    return SimJob(**{**base, **kw})


def test_the_line_has_the_real_scontrols_fields_in_its_order():
    real = (REAL / "running.txt").read_text()
    ours = show_job(job(), T0 + 60)
    assert KEY.findall(ours) == KEY.findall(real)
    assert ours.endswith(" \n") and real.endswith(" \n")


def test_the_collectors_parser_reads_the_jobs_facts():
    j = job()
    facts = facts_of(j)
    running = parse_scontrol_text(show_job(j, T0 + 60))
    assert running["user"] == "alice" and running["uid"] == "1001"
    assert running["name"] == "llama ft"  # a name with a space, as the real one's
    assert running["account"] == "nlp" and running["partition"] == "gpu"
    assert running["nodes"] == "2" and "cpus" not in running  # whole job's CPUs: 2 nodes
    assert int(running["start_time"]) == T0
    assert int(running["submit_time"]) == int(facts.submit) <= T0
    assert int(running["time_limit_s"]) == facts.limit_s >= 5400
    assert running["state"] == "RUNNING"
    ended = parse_scontrol_text(show_job(j, T0 + 5400 + 10))
    assert ended["state"] == facts.state
    assert f"{ended['exit_code']}:{ended['exit_signal']}" == facts.exit_code


def test_jobs_end_in_every_way_slurm_says_and_timeouts_at_their_limit():
    outcomes = {}
    for seed in range(400):
        j = job(seed=seed)
        f = facts_of(j)
        outcomes.setdefault(f.state, f)
        if f.state == "TIMEOUT":
            assert f.exit_code == "0:15" and f.limit_s % 60 == 0
            assert 0 <= f.limit_s - (j.end - j.start) < 60
        else:
            assert f.limit_s > j.end - j.start
    assert set(outcomes) == {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
    # as the real captures show them
    assert "JobState=FAILED" in (REAL / "failed.txt").read_text()
    assert "ExitCode=0:15" in (REAL / "timeout.txt").read_text()


def test_slurm_forgets_an_ended_job_after_min_job_age():
    j = job()
    answers = SimScontrol(lambda: [j], lambda: T0 + 5400 + MIN_JOB_AGE_S + 1)
    assert answers.at_end(j.id) == {}  # "Invalid job id specified"
    assert SimScontrol(lambda: [j], lambda: T0 + 5400 + 5).at_end(j.id) is not None
    assert answers.lookup("999") == {}


def test_node_names_are_compressed_as_slurm_writes_them():
    assert hostlist(("gpu-a003", "gpu-a004", "gpu-a005", "gpu-a009")) == "gpu-a[003-005,009]"
    assert hostlist(("gpu-a003",)) == "gpu-a003"


def test_the_simulated_clusters_jobs_carry_scheduler_facts_and_their_end(tmp_path):
    sim = ClusterSim(nodes=4, seed=1, start=T0, root_dir=str(tmp_path), interval=10)
    assert all(isinstance(a.jobs.scontrol, SimScontrol) for a in sim.agents)
    seen, ended = {}, {}
    try:
        for k in range(1500):  # 4 h 10 min
            sim.step(T0 + k * 10)
            for batch in sim.flush():
                for entry in batch["jobs"]:
                    seen.setdefault(entry["id"], entry)
                    if "exit_state" in entry:
                        ended[entry["id"]] = entry
    finally:
        sim.close()
    truth = {j.id: j for j in sim.jobs}
    slurm = [i for i in seen if truth[i].scheduler == "slurm"]
    assert slurm
    for i in slurm:
        f = facts_of(truth[i])
        assert seen[i]["time_limit_s"] == f.limit_s
        assert seen[i]["submitted_at"] == int(f.submit)
    assert ended, "jobs ended in 4 hours, and their exit states were asked"
    for i, entry in ended.items():
        f = facts_of(truth[i])
        assert entry["exit_state"] == f.state.lower()
        assert f"{entry['exit_code']}:{entry['exit_signal']}" == f.exit_code
