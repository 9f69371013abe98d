"""The prolog mapping directory: one file per GPU, named by its index or its UUID.

File format (see docs/collector.md)::

    <jobid> <uid>
    user=alice
    name=llama-ft
    account=nlp
    partition=gpu
    start_time=1763790000
    cpus=16
    nodes=2
    sluid=s5K1KKYAYG5D00

The first line is the jobstats / dcgm-exporter convention (the uid may be absent); the
``key=value`` lines are optional metadata the prolog knows. Unknown keys are ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

META_KEYS = ("user", "name", "account", "partition", "start_time", "cpus", "nodes", "sluid")


@dataclass(frozen=True)
class MapEntry:
    job_id: str
    uid: int | None = None
    meta: dict[str, str] = field(default_factory=dict)


def parse_map_file(text: str) -> MapEntry | None:
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        return None
    first = lines[0].split()
    if "=" in first[0]:
        return None
    uid = None
    if len(first) > 1:
        try:
            uid = int(first[1])
        except ValueError:
            uid = None
    meta = {}
    for line in lines[1:]:
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if sep and key in META_KEYS and value:
            meta[key] = value
    return MapEntry(first[0], uid, meta)


def read_job_map(
    directory: str, gpus: list[tuple[int, str]], slurm_index: dict[str, int] | None = None
) -> dict[int, MapEntry]:
    """{gpu index: entry} for the GPUs (NVML index, uuid) that have a mapping file, named
    by the UUID or by Slurm's index of the GPU (``slurm_index``, {uuid: index}; a GPU
    missing there is taken to have the same index in Slurm as in NVML)."""
    slurm_index = slurm_index or {}
    try:
        names = set(os.listdir(directory))
    except OSError:
        return {}
    out = {}
    for index, uuid in gpus:
        for name in (uuid, str(slurm_index.get(uuid, index))):
            if name not in names:
                continue
            try:
                with open(os.path.join(directory, name)) as fh:
                    entry = parse_map_file(fh.read())
            except (OSError, UnicodeDecodeError):
                entry = None
            if entry is not None:
                out[index] = entry
                break
    return out
