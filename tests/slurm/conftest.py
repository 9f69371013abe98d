import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.slurm.cluster import SlurmCluster, SlurmDidNotStart

# The shipped prolog writes /run/clusterui-jobs, one per machine: two test runs at once
# (two checkouts) take turns rather than remove each other's files.
LOCK = "/run/clusterui-slurm-tests.lock"
LOCK_WAIT_S = 120


def _take_lock():
    fh = open(LOCK, "w")  # noqa: SIM115 (held until the cluster stops)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if time.monotonic() > deadline:
                fh.close()
                pytest.fail(f"another run holds {LOCK} for over {LOCK_WAIT_S} s", pytrace=False)
            time.sleep(0.5)


@pytest.fixture(scope="package")
def slurm():
    """A real slurmctld + slurmd (+ munged) of Debian's slurm-wlm, started once for all
    the tests in tests/slurm and stopped after them (not kept for the rest of the run).
    Fails, never skips, when Slurm is missing or does not come up."""
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(b)]
    if missing:
        pytest.fail(f"Slurm is not installed ({', '.join(missing)} missing): "
                    "run `python scripts/devstack.py slurm` (make test does)", pytrace=False)  # fmt: skip
    if os.geteuid() != 0:
        pytest.fail("the Slurm tests run slurmd, which must be root", pytrace=False)
    lock = _take_lock()
    # Not pytest's tmp_path: its parents are private to root, and jobs run as nobody.
    base = Path(tempfile.mkdtemp(prefix="clusterui-slurm-"))
    cluster = SlurmCluster(base)
    before = os.environ.get("SLURM_CONF")
    started = time.monotonic()
    try:
        cluster.start()
    except SlurmDidNotStart as exc:
        cluster.stop()
        lock.close()
        message = str(exc)
    else:
        message = None
    if message:
        pytest.fail(message, pytrace=False)
    cluster.startup_s = time.monotonic() - started
    os.environ["SLURM_CONF"] = str(cluster.conf)  # for the collector's own scontrol calls
    yield cluster
    cluster.stop()
    lock.close()
    shutil.rmtree(base, ignore_errors=True)
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before
