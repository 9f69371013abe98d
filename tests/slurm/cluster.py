"""A private, real Slurm on this machine: munged, slurmctld and slurmd as child processes.

Debian's ``slurm-wlm`` (``scripts/devstack.py slurm`` installs it). Everything lives in one
temporary directory: the munge key and socket, slurm.conf, gres.conf, the state and spool
directories, logs, and two character devices standing in for GPUs (``mknod``; Slurm only
needs ``File=`` to exist). The ClusterUI prolog and epilog are installed the way
``docs/collector.md`` tells a site: copied into ``prolog.d/`` and ``epilog.d/`` with
``Prolog=``/``Epilog=`` globs, and ``PrologFlags=Alloc``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "collectors" / "scripts"
STARTUP_S = 30.0
GPU_MAJOR = 195  # the NVIDIA character-device major number, for realism only
# /dev/nvidia4 and 5: minor numbers that are not Slurm's indexes (0 and 1), as on a node
# whose device files do not start at 0 or are not in PCI bus order.
GPU_MINORS = (4, 5)
EPILOG_HOLD_S = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmDidNotStart(RuntimeError):
    pass


@dataclass
class SlurmCluster:
    base: Path
    node: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    # The shipped prolog's default directory: slurmd gives a Prolog none of its own
    # environment, so a site (and this test) uses the default or edits the script.
    map_dir: Path = Path("/run/clusterui-jobs")

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def path(self, *parts: str) -> Path:
        return self.base.joinpath(*parts)

    # --- set-up ---------------------------------------------------------------------

    def write_files(self) -> None:
        os.chmod(self.base, 0o755)  # the job user must reach the spool
        for d in ("etc/prolog.d", "etc/epilog.d", "state", "spool", "log", "munge", "dev",
                  "jobs"):  # fmt: skip
            self.path(d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.path("jobs"), 0o1777)  # job output of the unprivileged test user
        key = self.path("munge", "munge.key")
        key.write_bytes(os.urandom(128))
        os.chmod(key, 0o600)
        os.chmod(self.path("munge"), 0o755)  # clients run as the job user (salloc --uid)
        for minor in GPU_MINORS:
            dev = self.path("dev", f"nvidia{minor}")
            os.mknod(dev, 0o666 | 0o020000, os.makedev(GPU_MAJOR, minor))  # S_IFCHR
        # The site install of docs/collector.md: the shipped scripts copied into prolog.d/.
        for kind in ("prolog", "epilog"):
            dest = self.path("etc", f"{kind}.d", f"clusterui-{kind}.sh")
            shutil.copy(SCRIPTS / f"slurm-{kind}.sh", dest)
            os.chmod(dest, 0o755)
        # A second prolog beside ours keeps each job's prolog environment, so the tests
        # know what Slurm really gave (and that a Prolog= glob runs every script).
        self.path("prolog-env").mkdir()
        env_dump = self.path("etc", "prolog.d", "00-record-env.sh")
        env_dump.write_text(f'#!/bin/sh\nenv > {self.path("prolog-env")}/"$SLURM_JOB_ID"\n')
        os.chmod(env_dump, 0o755)
        # A site's slower epilog after ours (a glob runs in reverse alphabetical order):
        # while the file hold-epilog exists it takes EPILOG_HOLD_S, and slurmctld says
        # COMPLETING that long after the mapping files are gone.
        hold = self.path("etc", "epilog.d", "00-hold.sh")
        hold.write_text(f'#!/bin/sh\n[ -e {self.path("hold-epilog")} ] && sleep {EPILOG_HOLD_S}\n'
                        "exit 0\n")  # fmt: skip
        os.chmod(hold, 0o755)
        # MinJobAge counts from a job's end ("since completion", slurmctld.h), not from its
        # epilogs' end: at 2 s, a job held COMPLETING 3 s can be purged as soon as it
        # completes, and the collector's end query once in six runs never saw its final
        # state. 30 s (Slurm's default is 300) is still quick to clear.
        ctld_port, slurmd_port = free_port(), free_port()
        self.conf.write_text(f"""\
ClusterName=cuitest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.path("munge", "munge.socket")}
CredType=cred/munge
StateSaveLocation={self.path("state")}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("log", "slurmctld.log")}
SlurmdLogFile={self.path("log", "slurmd.log")}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
GresTypes=gpu
PrologFlags=Alloc
Prolog={self.path("etc", "prolog.d")}/*
Epilog={self.path("etc", "epilog.d")}/*
MinJobAge=30
InactiveLimit=0
KillWait=2
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} Gres=gpu:2 State=UNKNOWN
PartitionName=gpu Nodes={self.node} Default=YES MaxTime=10 State=UP
PartitionName=nolimit Nodes={self.node} MaxTime=UNLIMITED State=UP
""")
        self.path("etc", "gres.conf").write_text(
            f"NodeName={self.node} Name=gpu File={self.path('dev')}/nvidia[4-5]\n"
        )

    def start(self) -> None:
        if self.map_dir.is_dir() and any(self.map_dir.iterdir()):
            raise SlurmDidNotStart(f"{self.map_dir} already holds mapping files: is a real "
                                   "Slurm prolog writing there? Not touching them.")  # fmt: skip
        self.write_files()
        munge = self.path("munge")
        self._spawn("munged", ["munged", "-F", "-f", f"--key-file={munge}/munge.key",
                               f"--socket={munge}/munge.socket", f"--pid-file={munge}/munged.pid",
                               f"--log-file={munge}/munged.log", f"--seed-file={munge}/seed"])  # fmt: skip
        self._wait(lambda: self.path("munge", "munge.socket").exists(), "munged")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        self._wait(self._node_idle, "slurmctld and slurmd (node idle in sinfo)")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = open(self.path("log", f"{name}.out"), "wb")  # noqa: SIM115 (kept for the life of the process)
        self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                           env=self.env, start_new_session=True))  # fmt: skip

    def _node_idle(self) -> bool:
        try:
            done = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env,
                                  capture_output=True, text=True, timeout=3, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            return False  # slurmctld not answering yet
        states = set(done.stdout.split())  # one line per partition the node is in
        return done.returncode == 0 and states == {"idle"}

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + STARTUP_S
        while not ready():
            dead = [p for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = (f"{dead[0].args[0]} exited {dead[0].returncode}" if dead
                       else f"not within {STARTUP_S:.0f} s")  # fmt: skip
                raise SlurmDidNotStart(f"{what} did not come up: {why}\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        out = []
        for f in sorted(self.path("log").glob("*")) + [self.path("munge", "munged.log")]:
            if f.exists():
                out.append(f"--- {f.name}\n" + "\n".join(f.read_text(errors="replace")
                                                         .splitlines()[-25:]))  # fmt: skip
        return "\n".join(out)

    def stop(self) -> None:
        if self.procs and all(p.poll() is None for p in self.procs):
            # Jobs first, while slurmctld and slurmd can still end them and run epilogs:
            # a slurmstepd outlives its slurmd otherwise.
            try:
                for partition in ("gpu", "nolimit"):
                    self.cmd("scancel", "--full", f"--partition={partition}", timeout=5,
                             check=False)  # fmt: skip
                deadline = time.monotonic() + 15
                while (self.cmd("squeue", "-h", timeout=5, check=False).strip()
                       and time.monotonic() < deadline):  # fmt: skip
                    time.sleep(0.2)
            except subprocess.TimeoutExpired:
                pass  # slurmctld is not answering: stop the daemons regardless
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        if self.map_dir.is_dir():
            shutil.rmtree(self.map_dir, ignore_errors=True)

    # --- commands -------------------------------------------------------------------

    def prolog_env(self, job_id: str, timeout: float = 10) -> dict[str, str]:
        path = self.path("prolog-env", job_id)
        deadline = time.monotonic() + timeout
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the prolog.d scripts may run side by side
        time.sleep(0.1)
        text = path.read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def sbatch(self, *args: str) -> str:
        """Submit as the unprivileged user nobody; the job id."""
        out = self.cmd("sbatch", "--parsable", "--uid=nobody", f"--chdir={self.path('jobs')}",
                       "-o", "/dev/null", *args)  # fmt: skip
        return out.strip().split(";")[0]

    def wait_files(self, names: list[str], timeout: float = 20) -> dict[str, str]:
        """{name: text} once every named mapping file exists."""
        deadline = time.monotonic() + timeout
        while True:
            found = {n: (self.map_dir / n) for n in names if (self.map_dir / n).exists()}
            if len(found) == len(names):
                return {n: p.read_text() for n, p in found.items()}
            if time.monotonic() > deadline:
                raise AssertionError(f"mapping files {names} not all written within "
                                     f"{timeout:.0f} s; have {self.map_files()}\n{self.logs()}")  # fmt: skip
            time.sleep(0.1)

    def map_files(self) -> list[str]:
        return sorted(os.listdir(self.map_dir)) if self.map_dir.is_dir() else []

    def wait_gone(self, job_ids: list[str], timeout: float = 20) -> None:
        """Until no job of these is known to slurmctld as running and the epilog ran."""
        deadline = time.monotonic() + timeout
        while True:
            owners = set()
            for name in self.map_files():
                try:
                    owners.add((self.map_dir / name).read_text().split()[0])
                except (OSError, IndexError):
                    pass  # removed (or being replaced) as we looked
            queued = self.cmd("squeue", "-h", "-o", "%A").split()
            if not owners & set(job_ids) and not set(queued) & set(job_ids):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs {job_ids} still own mapping files or are queued "
                                     f"after {timeout:.0f} s: {self.map_files()}\n{self.logs()}")  # fmt: skip
            time.sleep(0.1)

    def cmd(self, *args: str, timeout: float = 20, check: bool = True) -> str:
        done = subprocess.run(list(args), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {done.returncode}: {done.stderr}"
                                 f"\n{self.logs()}")  # fmt: skip
        return done.stdout
