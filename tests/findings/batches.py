"""Contract-1 batches with hand-chosen samples, for tests that check numbers by hand.

``Gpu``/``Node`` describe the hardware; ``node_batch`` turns per-sample values into one
batch that ``ingest_envelope`` stores through the real validation and writer.
"""

from dataclasses import dataclass, field

GPU_FIELDS = ["ts", "gpu", "job", "util_pct", "mem_util_pct", "mem_used_mib", "power_w",
              "temp_c", "sm_clock_mhz", "sm_active_pct", "tensor_active_pct",
              "dram_active_pct", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s",
              "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "throttle_reasons", "energy_j"]


@dataclass
class Sample:
    util: float | None = 0.0
    sm: float | None = None
    mem: int = 1000
    clock: float = 1980.0
    throttle: int = 0
    energy: float | None = None
    nvl_tx: float | None = None
    nvl_rx: float | None = None


@dataclass
class Job:
    id: str
    gpus: list[int]
    started_at: float
    cpus: int = 16
    ended_at: float | None = None
    user: str = "alice"


@dataclass
class Node:
    name: str
    gpus: int = 2
    model: str = "NVIDIA A100-SXM4-80GB"
    memory_mib: int = 81920
    nvlink_bytes_per_s: float | None = 600e9
    nics: list[tuple[str, str, float]] = field(
        default_factory=lambda: [("mlx5_0:1", "infiniband", 50e9), ("eth0", "ethernet", 3.125e9)])


def node_batch(node: Node, *, seq: int, times: list[float], jobs: list[Job],
               gpu: dict[int, list[Sample]], owner: dict[int, str | None],
               nic: dict[int, list[tuple[float, float]]] | None = None,
               cores: dict[str, list[float]] | None = None, events: list[dict] = (),
               interval: float = 10.0, cluster: str = "hand") -> dict:
    """One batch: ``gpu[index][k]`` is GPU ``index``'s sample at ``times[k]``; ``owner`` maps
    a GPU to its job; ``nic[position][k]`` is (rx, tx) B/s; ``cores[job][k]`` CPU cores."""
    rows = []
    for k, ts in enumerate(times):
        for index, samples in sorted(gpu.items()):
            s = samples[k]
            rows.append([ts, index, owner.get(index), s.util, 10.0, s.mem, 300.0, 50.0, s.clock,
                         s.sm, None if s.sm is None else s.sm / 2, None, 1e8, 1e8, s.nvl_tx,
                         s.nvl_rx, s.throttle, s.energy])
    return {
        "schema": 1, "cluster": cluster, "node": node.name,
        "agent": {"version": "test", "boot_id": f"boot-{node.name}", "seq": seq},
        "sent_at": times[-1], "interval_s": interval,
        "gpus": [{"uuid": f"GPU-{cluster}-{node.name}-{i}", "index": i, "model": node.model,
                  "memory_total_mib": node.memory_mib, "power_limit_w": 400.0,
                  "pci_bus_id": f"00000000:{i + 16:02X}:00.0",
                  "nvlink_bytes_per_s": node.nvlink_bytes_per_s} for i in range(node.gpus)],
        "nics": [{"name": n, "kind": kind, "link_bytes_per_s": cap} for n, kind, cap in node.nics],
        "jobs": [{"id": j.id, "scheduler": "slurm", "user": j.user, "name": "train",
                  "account": "nlp", "partition": "gpu", "started_at": j.started_at,
                  "ended_at": j.ended_at, "gpus": j.gpus, "cpus": j.cpus} for j in jobs],
        "gpu_samples": {"fields": GPU_FIELDS, "rows": rows},
        "nic_samples": {"fields": ["ts", "nic", "rx_bytes_per_s", "tx_bytes_per_s"],
                        "rows": [[ts, pos, *values[k]] for pos, values in (nic or {}).items()
                                 for k, ts in enumerate(times)]},
        "job_samples": {"fields": ["ts", "job", "cpu_cores_used", "host_mem_used_bytes"],
                        "rows": [[ts, job_id, values[k], 10**10]
                                 for job_id, values in (cores or {}).items()
                                 for k, ts in enumerate(times)]},
        "events": list(events),
    }


def steady_batch(node: Node, *, seq: int, times: list[float], job: Job | None,
                 util: float | list[float], sm: float | None = None, throttle: int = 0,
                 clock: float = 1980.0, cores: float = 4.0, nic: tuple[float, float] = (1e8, 1e8),
                 events: list[dict] = (), interval: float = 10.0, cluster: str = "hand") -> dict:
    """Every GPU of ``node`` steady at ``util`` (or ``util[i]`` for GPU i), held by ``job``."""
    utils = util if isinstance(util, list) else [util] * node.gpus
    gpu = {i: [Sample(util=utils[i], sm=sm, clock=clock, throttle=throttle, nvl_tx=1e9,
                      nvl_rx=1e9) for _ in times] for i in range(node.gpus)}
    owner = {i: (job.id if job and i in job.gpus else None) for i in range(node.gpus)}
    return node_batch(node, seq=seq, times=times, jobs=[job] if job else [], gpu=gpu,
                      owner=owner, nic={p: [nic] * len(times) for p in range(len(node.nics))},
                      cores={job.id: [cores] * len(times)} if job else None, events=events,
                      interval=interval, cluster=cluster)


def span(start: float, seconds: float, interval: float = 10.0) -> list[float]:
    """Sample times in (start, start + seconds]."""
    n = round(seconds / interval)
    return [start + interval * (k + 1) for k in range(n)]
