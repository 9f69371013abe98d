"""What the collector can read of a job's processes with the privileges its systemd unit
gives it, on this machine's real kernel: an unprivileged user (``DynamicUser``; here
``nobody``) holding the unit's ``AmbientCapabilities``, reading a running process of another
user (root here) through the collector's own code.

On a real GPU node (NVIDIA H100, 2026-11-26) ``/proc/<pid>/environ`` of a job's process
opened only with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH together: the file is its owner's
alone (mode 0400) and reading it is a ptrace access. The unit granted CAP_SYS_PTRACE alone,
so jobs found by their processes had no user or name. ``setpriv`` (util-linux) drops to the
unit's user and capabilities as systemd would.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.collectors.test_packaging import unit_settings

REPO = Path(__file__).resolve().parents[2]
READ = ("import logging, sys; sys.path.insert(0, '.'); "
        "logging.basicConfig(level=logging.WARNING); "
        "from collectors.attribution.metadata import meta_from_environ; "
        "print(sorted(meta_from_environ('/proc', int(sys.argv[1])).items()))")


@pytest.fixture(scope="module")
def collector_copy():
    """The collectors package where the unit's user can read it (a checkout may sit in a
    directory only root may enter), run by the system's Python (the virtual environment
    lives in the checkout too): the code read below needs the standard library only."""
    top = tempfile.mkdtemp(prefix="collector-as-unit-user-")
    shutil.copytree(REPO / "collectors", Path(top) / "collectors",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for root, _dirs, files in os.walk(top):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    yield top
    shutil.rmtree(top)


@pytest.fixture
def job_process():
    """A process with a Slurm step's environment, owned by root (this test's user)."""
    assert os.geteuid() == 0, "this test drops from root to the unit's user: run it as root"
    env = {**os.environ, "SLURM_JOB_ID": "4249", "SLURM_JOB_USER": "erin",
           "SLURM_JOB_NAME": "priv-check", "SLURM_CPUS_ON_NODE": "8"}
    proc = subprocess.Popen(["sleep", "60"], env=env)
    yield proc.pid
    proc.kill()
    proc.wait()


def read_as_unit_user(top: str, pid: int, caps: list[str]) -> subprocess.CompletedProcess:
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to drop to the unit's user"
    spec = ",".join(f"+{c.removeprefix('CAP_').lower()}" for c in caps) or "-all"
    cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", f"--inh-caps={spec}"]
    if caps:
        cmd.append(f"--ambient-caps={spec}")
    # The system's Python where there is one (a home directory may be closed to others).
    python = shutil.which("python3", path="/usr/bin") or os.path.realpath(sys._base_executable)
    return subprocess.run([*cmd, python, "-I", "-c", READ, str(pid)], capture_output=True,
                          text=True, timeout=60, cwd=top, env={})


def test_the_units_capabilities_read_a_jobs_environment(collector_copy, job_process):
    caps = unit_settings()["AmbientCapabilities"][0].split()
    assert unit_settings()["CapabilityBoundingSet"][0].split() == caps
    done = read_as_unit_user(collector_copy, job_process, caps)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted({"cpus": "8", "name": "priv-check",
                                              "user": "erin"}.items()))
    assert done.stderr == ""


@pytest.mark.parametrize("caps", [["CAP_SYS_PTRACE"], ["CAP_DAC_READ_SEARCH"], []],
                         ids=["ptrace only (the unit before)", "dac_read_search only", "none"])
def test_less_reads_nothing_and_says_what_it_takes(collector_copy, job_process, caps):
    done = read_as_unit_user(collector_copy, job_process, caps)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "permission denied" in done.stderr
    assert "CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH together" in done.stderr
