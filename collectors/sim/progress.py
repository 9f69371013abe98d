"""Where a simulated cluster has got to, kept in a file so that a restarted simulator
continues its own history (``clusterui-simcluster --state-file``).

Each flush rewrites the file (atomically: a new file renamed over the old) with the time of
the newest sample sent and the next Slurm job id. A simulator started with the file goes on
from there as it would from ``--after`` and ``--first-job-id`` (whichever is later): no
sample at or before one already sent, no job id used twice. ``make demo`` asks the database
instead (``manage.py sim_resume``); the Compose demo's simulator has no database access, so
its state file lives on a volume of its own.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

VERSION = 1


class ProgressError(ValueError):
    """The file exists but is not a state this simulator wrote."""


@dataclass(frozen=True)
class Progress:
    after: float  # Unix time of the newest sample sent
    next_job_id: int


def read(path: str) -> Progress | None:
    """The state in ``path``; None when there is no file yet (a first start)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise ProgressError(f"version {data.get('version')!r}, expected {VERSION}")
        after, job_id = data["after"], data["next_job_id"]
        if (not isinstance(after, int | float) or isinstance(after, bool)
                or not math.isfinite(after) or not isinstance(job_id, int)
                or isinstance(job_id, bool) or job_id < 1):
            raise ProgressError("after must be a finite time and next_job_id an id >= 1")
        return Progress(float(after), job_id)
    except (json.JSONDecodeError, AttributeError, KeyError, ProgressError) as exc:
        raise ProgressError(f"{path}: not a state clusterui-simcluster wrote ({exc}); "
                            "remove it to start afresh") from exc


def write(path: str, progress: Progress) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"version": VERSION, "after": progress.after,
                   "next_job_id": progress.next_job_id}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def later(progress: Progress | None, after: float | None,
          first_job_id: int | None) -> tuple[float | None, int | None]:
    """``--after`` and ``--first-job-id`` moved on to the state's, where it is ahead."""
    if progress is None:
        return after, first_job_id
    return (progress.after if after is None else max(after, progress.after),
            progress.next_job_id if first_job_id is None
            else max(first_job_id, progress.next_job_id))
