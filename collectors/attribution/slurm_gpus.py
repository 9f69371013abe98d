"""Which NVML GPU a Slurm GPU index names.

``SLURM_JOB_GPUS`` (and the prolog's file names) count the node's GPUs in the order of
its GRES device files, while NVML numbers GPUs by PCI bus id; Slurm documents that the
two are not guaranteed to agree (gres.html, "GPU Management"; gres.conf(5) under
``Links``). The device file is what ties them: ``slurmd -G`` prints this node's GRES
``File=`` list (Slurm's index is the position in it), the file's minor number is the X
of ``/dev/nvidiaX``, and NVML gives each GPU's minor number
(``nvmlDeviceGetMinorNumber``). Where ``slurmd`` is absent or prints no GPU files (e.g.
``AutoDetect=nvml``, which numbers by PCI bus id as NVML does), the indexes are taken to
agree.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess

log = logging.getLogger(__name__)

SLURMD_TIMEOUT_S = 5.0
_GRES_LINE = re.compile(r"\bGres Name=gpu\b.*?\bCount=(\d+)\b.*?\bFile=(\S+)")
_BRACKET = re.compile(r"^(.*?)\[([^\]]+)\](.*)$")


def expand_files(spec: str) -> list[str]:
    """Slurm's file list: '/dev/nvidia[0-1,3]' -> ['/dev/nvidia0', '/dev/nvidia1',
    '/dev/nvidia3']; a comma list of such names is accepted too."""
    out: list[str] = []
    for part in re.split(r",(?![^\[]*\])", spec):
        match = _BRACKET.match(part)
        if not match:
            out.append(part)
            continue
        head, ranges, tail = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            width = len(low)
            for n in range(int(low), int(high or low) + 1):
                out.append(f"{head}{n:0{width}d}{tail}")
    return out


def parse_slurmd_gres(text: str) -> list[str]:
    """The GPU device files of ``slurmd -G`` output, in Slurm's index order."""
    files: list[str] = []
    for line in text.splitlines():
        match = _GRES_LINE.search(line)
        if match and match.group(2) != "(null)":
            try:
                line_files = expand_files(match.group(2))
            except ValueError:
                return []  # a shape we do not know: claim nothing
            if any("/nvidia-caps/" in f for f in line_files):
                # A MIG device: its GPU's file and its two capability files, one Slurm GPU
                # (gpu_nvml.c, ``_handle_mig``); named by position, see attribution/mig.py
                line_files = line_files[:1]
            files.extend(line_files)
    return files


def device_minor(path: str) -> int | None:
    try:
        return os.minor(os.stat(path).st_rdev)
    except OSError:
        return None


class SlurmGpuIndex:
    """{NVML uuid: Slurm index} from the GPUs' minor numbers, ``slurmd -G`` asked once."""

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable if executable is not None else shutil.which("slurmd")
        self._minors: list[int | None] | None = None

    def minors(self) -> list[int | None]:
        """The minor number of each Slurm GPU index, [] when unknown."""
        if self._minors is None:
            self._minors = [device_minor(f) for f in parse_slurmd_gres(self._slurmd_g())]
        return self._minors

    def _slurmd_g(self) -> str:
        if not self.executable:
            return ""
        try:
            done = subprocess.run([self.executable, "-G"], capture_output=True, text=True,
                                  timeout=SLURMD_TIMEOUT_S, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.info("slurmd -G failed: %s", exc)
            return ""
        return done.stdout + done.stderr  # slurmd logs the GRES lines to stderr

    def of(self, nvml_minors: dict[str, int | None]) -> dict[str, int]:
        """{uuid: Slurm index} for the GPUs whose minor number Slurm lists."""
        by_minor = {m: i for i, m in enumerate(self.minors()) if m is not None}
        return {uuid: by_minor[m] for uuid, m in nvml_minors.items() if m in by_minor}
