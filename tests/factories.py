"""Batches for tests, shaped like contract 1 (``../shared/contract1-example.json``)."""

import copy
import json
import time
from pathlib import Path

EXAMPLE_PATH = Path(__file__).resolve().parents[2] / "shared" / "contract1-example.json"
if not EXAMPLE_PATH.exists():  # the repo's own copy, for checkouts without shared/
    EXAMPLE_PATH = Path(__file__).resolve().parent / "data" / "contract1-example.json"


def example_batch() -> dict:
    return json.loads(EXAMPLE_PATH.read_text())


def node_batch(node: str = "gpu-t001", *, seq: int = 1, boot_id: str = "boot-1",
               gpus: int = 8, samples: int = 3, start: float | None = None,
               cluster: str = "test", job: str | None = "4242", interval: float = 10.0,
               job_started: float | None = None, nics: int = 1) -> dict:
    """A realistic node-sized batch: ``gpus`` GPUs, ``samples`` rows each, one NIC, one job."""
    base = example_batch()
    start = time.time() - samples * interval if start is None else start
    fields = base["gpu_samples"]["fields"]
    template = base["gpu_samples"]["rows"][0]
    rows = []
    for k in range(samples):
        for g in range(gpus):
            row = copy.copy(template)
            row[0] = start + k * interval
            row[1] = g
            row[2] = job
            row[3] = float((g * 7 + k) % 100)
            rows.append(row)
    return {
        "schema": 1,
        "cluster": cluster,
        "node": node,
        "agent": {"version": "test", "boot_id": boot_id, "seq": seq},
        "sent_at": start + samples * interval,
        "interval_s": interval,
        "gpus": [
            {"uuid": f"GPU-{node}-{g}", "index": g, "model": "NVIDIA H100 80GB HBM3",
             "memory_total_mib": 81559, "power_limit_w": 700.0,
             "pci_bus_id": f"00000000:{g + 16:02X}:00.0", "nvlink_bytes_per_s": 450e9}
            for g in range(gpus)
        ],
        "nics": [{"name": f"mlx5_{n}:1", "kind": "infiniband", "link_bytes_per_s": 50e9}
                 for n in range(nics)],
        "jobs": [] if job is None else [
            {"id": job, "scheduler": "slurm", "user": "alice", "name": "train", "account": "nlp",
             "partition": "gpu",
             "started_at": start - 60 if job_started is None else job_started, "ended_at": None,
             "gpus": list(range(gpus)), "cpus": 32}
        ],
        "gpu_samples": {"fields": fields, "rows": rows},
        "nic_samples": {"fields": ["ts", "nic", "rx_bytes_per_s", "tx_bytes_per_s"],
                        "rows": [[start + k * interval, n, 1e9, 2e9]
                                 for k in range(samples) for n in range(nics)]},
        "job_samples": {"fields": ["ts", "job", "cpu_cores_used", "host_mem_used_bytes"],
                        "rows": [] if job is None else
                        [[start + k * interval, job, 12.0, 10**11] for k in range(samples)]},
        "events": [],
    }


def recent_start(hours_ago: int = 3) -> float:
    """A start time on an hour boundary ``hours_ago`` hours before now: inside the raw
    retention that ingest enforces, for tests whose samples go through the real path."""
    return float(int(time.time()) // 3600 * 3600 - hours_ago * 3600)
