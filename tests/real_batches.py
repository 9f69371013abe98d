"""Batches real GPUs gave the collector (``tests/data/real-*``, a README in each folder),
loaded for a test.

Nothing in them is edited but their timestamps, moved by one amount per test so the spacing
is the GPU's, since the server refuses samples older than its raw retention.
"""

import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
SECTIONS = ("gpu_samples", "nic_samples", "job_samples", "gpu_health")


def load(folder: str, name: str) -> dict:
    return json.loads((DATA / folder / f"{name}.json").read_text())


def newest_sample(batch: dict) -> float:
    return max(row[0] for row in batch["gpu_samples"]["rows"])


def shifted(batch: dict, shift: float) -> dict:
    """``batch`` with every timestamp it holds moved by ``shift`` seconds."""
    for section in SECTIONS:
        for row in batch[section]["rows"]:
            row[0] += shift
    for event in batch["events"]:
        event["ts"] += shift
    for job in batch["jobs"]:
        for key in ("started_at", "ended_at"):
            if job.get(key) is not None:
                job[key] += shift
    batch["sent_at"] += shift
    return batch


def real_batch(folder: str, name: str, newest: float) -> dict:
    """One batch, moved so that its newest GPU sample is at ``newest``."""
    batch = load(folder, name)
    return shifted(batch, newest - newest_sample(batch))
