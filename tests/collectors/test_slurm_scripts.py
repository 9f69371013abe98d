import os
import subprocess

from collectors.attribution.jobmap import parse_map_file

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "..", "collectors", "scripts")


def run(script, env, *args):
    subprocess.run([os.path.join(SCRIPTS, script), *args], env={"PATH": "/usr/bin:/bin", **env},
                   check=True, timeout=10)  # fmt: skip


def test_prolog_writes_and_epilog_removes(tmp_path):
    env = {
        "SLURM_JOB_ID": "812345", "SLURM_JOB_UID": "1000", "SLURM_JOB_USER": "alice",
        "SLURM_JOB_GPUS": "0,2-3", "SLURM_JOB_NAME": "llama-ft", "SLURM_JOB_ACCOUNT": "nlp",
        "SLURM_JOB_PARTITION": "gpu", "SLURM_JOB_START_TIME": "1763796380",
        "SLURM_JOB_CPUS_PER_NODE": "16(x2)",
    }  # fmt: skip
    run("slurm-prolog.sh", {**env, "CLUSTERUI_JOB_MAP_DIR": str(tmp_path)})
    assert sorted(os.listdir(tmp_path)) == ["0", "2", "3"]
    entry = parse_map_file((tmp_path / "2").read_text())
    assert (entry.job_id, entry.uid) == ("812345", 1000)
    assert entry.meta == {"user": "alice", "name": "llama-ft", "account": "nlp",
                          "partition": "gpu", "start_time": "1763796380", "cpus": "16"}  # fmt: skip
    (tmp_path / "5").write_text("999 1001\n")  # another job's GPU
    run("slurm-epilog.sh", {"SLURM_JOB_ID": "812345"}, str(tmp_path))
    assert os.listdir(tmp_path) == ["5"]


def test_prolog_without_gpus_writes_nothing(tmp_path):
    run("slurm-prolog.sh", {"SLURM_JOB_ID": "1"}, str(tmp_path))
    assert os.listdir(tmp_path) == []
