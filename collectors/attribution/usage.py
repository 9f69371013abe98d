"""A job's host CPU and memory use, from its cgroup (v2 or v1)."""

from __future__ import annotations

import os


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def cpu_seconds(dirs) -> float | None:
    """Cumulative CPU time in seconds: v2 ``cpu.stat`` usage_usec, or v1 ``cpuacct.usage``."""
    for d in dirs:
        text = _read(os.path.join(d, "cpu.stat"))
        if text:
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    try:
                        return int(value) / 1e6
                    except ValueError:
                        break
        text = _read(os.path.join(d, "cpuacct.usage"))
        if text:
            try:
                return int(text.strip()) / 1e9
            except ValueError:
                pass
    return None


def memory_bytes(dirs) -> int | None:
    """Current memory use: v2 ``memory.current`` or v1 ``memory.usage_in_bytes``."""
    for d in dirs:
        for name in ("memory.current", "memory.usage_in_bytes"):
            text = _read(os.path.join(d, name))
            if text:
                try:
                    return int(text.strip())
                except ValueError:
                    pass
    return None


def cpu_count(dirs) -> int | None:
    """CPUs in the job's cpuset (v2 ``cpuset.cpus.effective``, v1 ``cpuset.cpus``)."""
    for d in dirs:
        for name in ("cpuset.cpus.effective", "cpuset.cpus"):
            text = _read(os.path.join(d, name))
            if text and text.strip():
                return parse_cpu_list(text.strip())
    return None


def parse_cpu_list(text: str) -> int | None:
    """'0-3,8,10-11' -> 7."""
    total = 0
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            total += (int(high) - int(low) + 1) if high else 1
    except ValueError:
        return None
    return total
