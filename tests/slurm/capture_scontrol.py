"""Capture what a real Slurm's ``scontrol show job -o`` and slurmd Epilog give, as the
fixtures in ``tests/data/scontrol-22.05/`` (the collector's parser is tested on them).

Run as root where ``scripts/devstack.py slurm`` installed Slurm:
``python -m tests.slurm.capture_scontrol``. It starts the private cluster of
``tests/slurm/cluster.py`` and writes, for jobs that end in each way, the text scontrol
printed at each stage, and the environment the Epilog was given.
"""

import os
import tempfile
import time
from pathlib import Path

from tests.slurm.cluster import SlurmCluster

OUT = Path(__file__).resolve().parents[1] / "data" / "scontrol-22.05"


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="clusterui-slurm-"))
    cluster = SlurmCluster(base)
    write_files = cluster.write_files

    def with_epilog_dump() -> None:
        write_files()
        cluster.path("epilog-env").mkdir()
        dump = cluster.path("etc", "epilog.d", "00-record-env.sh")
        dump.write_text(f'#!/bin/sh\nenv | sort > {cluster.path("epilog-env")}/"$SLURM_JOB_ID"\n'
                        f'scontrol show job -o "$SLURM_JOB_ID" > '
                        f'{cluster.path("epilog-env")}/"$SLURM_JOB_ID".scontrol\n')  # fmt: skip
        os.chmod(dump, 0o755)

    cluster.write_files = with_epilog_dump
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        cluster.start()

        def show(job: str) -> str:
            return cluster.cmd("scontrol", "show", "job", "-o", job, check=False)

        def until(job: str, word: str, timeout: float = 120) -> str:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                text = show(job)
                if f"JobState={word} " in text:
                    return text
                time.sleep(0.1)
            raise AssertionError(f"job {job} never {word}")

        failed = cluster.sbatch("-J", "walltime test", "--time=4:00", "--gres=gpu:1",
                                "--wrap", "sleep 4; exit 3")  # fmt: skip
        (OUT / "running.txt").write_text(until(failed, "RUNNING"))
        (OUT / "failed.txt").write_text(until(failed, "FAILED"))
        long = cluster.sbatch("-J", "days", "-p", "nolimit", "--time=1-02:03:04",
                              "--gres=gpu:1", "--wrap", "sleep 300")  # fmt: skip
        unlimited = cluster.sbatch("-J", "no limit", "-p", "nolimit", "--gres=gpu:1",
                                   "--wrap", "sleep 300")  # fmt: skip
        queued = cluster.sbatch("-J", "queued", "--gres=gpu:2", "--wrap", "sleep 1")
        (OUT / "days.txt").write_text(until(long, "RUNNING"))
        (OUT / "unlimited.txt").write_text(until(unlimited, "RUNNING"))
        (OUT / "pending.txt").write_text(until(queued, "PENDING"))
        cluster.cmd("scancel", long)
        (OUT / "cancelled.txt").write_text(until(long, "CANCELLED"))
        cluster.cmd("scancel", unlimited, queued)
        timeout = cluster.sbatch("-J", "too long", "--time=1", "--gres=gpu:1", "--wrap",
                                 "sleep 300")  # fmt: skip
        (OUT / "timeout.txt").write_text(until(timeout, "TIMEOUT"))
        for job, name in ((failed, "failed"), (long, "cancelled"), (timeout, "timeout")):
            (OUT / f"epilog-env-{name}.txt").write_text(
                cluster.path("epilog-env", job).read_text())
            (OUT / f"completing-{name}.txt").write_text(
                cluster.path("epilog-env", f"{job}.scontrol").read_text())
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
