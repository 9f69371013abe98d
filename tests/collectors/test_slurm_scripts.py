"""The prolog without a real Slurm: only the case where it must do nothing. Everything
else runs against real slurmctld and slurmd in tests/slurm/ (the environment a Prolog
really gets is recorded there, not invented here)."""

import os
import subprocess

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "..", "collectors", "scripts")


def test_prolog_of_a_job_without_gpus_writes_nothing(tmp_path):
    subprocess.run([os.path.join(SCRIPTS, "slurm-prolog.sh"), str(tmp_path)],
                   env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "1", "SLURM_JOB_UID": "0"},
                   check=True, timeout=10)  # fmt: skip
    assert os.listdir(tmp_path) == []
