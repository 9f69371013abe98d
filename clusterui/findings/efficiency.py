"""How well a job used what it held: ``JobEfficiency`` from its accumulated samples.

Each detector pass adds the job's new samples (``slices.add_gpu_samples`` /
``add_job_samples``) to running totals kept in ``JobEfficiency.accum``; the figures are then
recomputed from those totals, so a pass costs the new samples, not the job's whole history.

- Window: from the job's start as the scheduler reported it (``Job.started_at``), or, when
  that is unknown, its first sample (less one sampling interval: a sample stands for the
  interval before it), to its newest sample.
- MIG: a MIG instance counts as its share of a GPU (``Gpu.mig_share``: its GPU-instance
  slices over the GPU's) in allocated, used and wasted GPU-hours; one that reported no busy
  figure (NVML has no utilization on MIG, and GPM may be missing) is counted allocated but
  neither used nor wasted (``docs/detectors.md``).
- GPU-hours allocated: allocated GPUs x the window's wall time, from the job's start even
  when our first sample came later (the GPUs were held all along). Used: each GPU's mean
  "busy" over its samples x the wall time (the samples stand for the whole run; how much of
  it they cover is ``measured_from``, which the pages and the report show when it is less
  than 95 %), where busy is GPM SM activity where the GPU reports it and NVML
  utilization otherwise (``util_source`` says which). Wasted: allocated - used. A GPU that
  sent no sample in the window counts as allocated and not used.
- Per GPU: mean, p10 and p90 of busy (percentile_cont over a 1 %-bin histogram: exact for
  NVML's integer percentages, within half a percent for GPM's), NVML utilization's mean.
- Memory: the highest memory used by any of its GPUs, against that GPU's capacity.
- Energy: the sum of the energy counter's increases (a counter that went backwards was
  reset: the new reading is the energy since the reset).
- Network: NIC bytes on the job's nodes (fabric NICs: InfiniBand/RoCE where the node has
  them, Ethernet otherwise), mean and peak of max(rx, tx) against link capacity; NVLink
  the same per GPU.
- Host CPU: the mean of the cores its cgroups used (all nodes together) against the cores
  allocated (the collectors report the allocation per node: x the number of nodes).
"""

import datetime as dt

from clusterui.findings.choices import UtilSource


def _ts(value) -> str | None:
    return None if value is None else value.isoformat()


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _parse(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


def add_gpu_totals(accum: dict, gpu_id: int, totals: dict) -> None:
    """Add one (job, GPU)'s new totals to the job's accumulators (``accum`` is mutated)."""
    gpus = accum.setdefault("gpus", {})
    a = gpus.setdefault(str(gpu_id), {
        "n": 0, "util_sum": 0.0, "util_n": 0, "sm_sum": 0.0, "sm_n": 0, "busy_sum": 0.0,
        "busy_n": 0, "hist": {}, "mem_max": None, "energy_j": None, "energy_last": None,
        "nvl_sum": 0.0, "nvl_n": 0, "nvl_max": None, "first_ts": None, "last_ts": None,
    })
    for key in ("n", "util_sum", "util_n", "sm_sum", "sm_n", "busy_sum", "busy_n", "nvl_sum",
                "nvl_n"):
        a[key] += totals[key] or 0
    a["mem_max"] = _max(a["mem_max"], totals["mem_max"])
    a["nvl_max"] = _max(a["nvl_max"], totals["nvl_max"])
    if totals["energy"] is not None:
        a["energy_j"] = (a["energy_j"] or 0.0) + totals["energy"]
    if totals["energy_last"] is not None:
        a["energy_last"] = totals["energy_last"]
    for b, count in (totals["hist"] or {}).items():
        a["hist"][str(b)] = a["hist"].get(str(b), 0) + count
    # Late samples (``late``) can come before the totals already kept: the earliest and
    # latest, not the first and last added.
    a["first_ts"] = _ts(_min(_parse(a["first_ts"]), totals["first_ts"]))
    a["last_ts"] = _ts(_max(_parse(a["last_ts"]), totals["last_ts"]))


def add_job_totals(accum: dict, totals: dict) -> None:
    a = accum.setdefault("job", {"nic_n": 0, "nic_sum": 0.0, "nic_max": None,
                                 "net_bytes": None, "cpu_ts_n": 0, "cpu_cores_sum": 0.0})
    a["nic_n"] += totals["nic_n"] or 0
    a["nic_sum"] += totals["nic_sum"] or 0.0
    a["nic_max"] = _max(a["nic_max"], totals["nic_max"])
    if totals["net_bytes"] is not None:
        a["net_bytes"] = (a["net_bytes"] or 0.0) + totals["net_bytes"]
    a["cpu_ts_n"] += totals["cpu_ts_n"] or 0
    a["cpu_cores_sum"] += totals["cpu_cores_sum"] or 0.0


def percentile(hist: dict, p: float) -> float | None:
    """percentile_cont(p) of the values a {value: count} histogram holds."""
    items = sorted((float(k), c) for k, c in hist.items() if c)
    total = sum(c for _, c in items)
    if not total:
        return None
    pos = p * (total - 1)
    lo_rank, frac = int(pos), pos - int(pos)

    def value_at(rank: int) -> float:
        seen = 0
        for value, count in items:
            seen += count
            if rank < seen:
                return value
        return items[-1][0]

    lo = value_at(lo_rank)
    return lo if frac == 0 else lo + frac * (value_at(lo_rank + 1) - lo)


def _source(sm_n: int, busy_n: int) -> str:
    """SM activity when (nearly) every sample had it: GPM needs two readings, so a GPU's
    first sample after the collector starts carries NVML utilization only."""
    if sm_n == 0:
        return UtilSource.NVML_UTIL
    return UtilSource.SM_ACTIVE if sm_n >= 0.9 * busy_n else UtilSource.MIXED


def data_start(eff, interval_s: float) -> dt.datetime | None:
    """When the job's data begins: its first sample, less one sampling interval."""
    firsts = [a["first_ts"] for a in eff.accum.get("gpus", {}).values() if a["first_ts"]]
    if not firsts:
        return None
    return (min(dt.datetime.fromisoformat(f) for f in firsts)
            - dt.timedelta(seconds=interval_s))


def compute(eff, *, started_at: dt.datetime | None, interval_s: float, gpus: list,
            cpus_per_node: int | None, nodes: int) -> None:
    """Set ``eff``'s figures from ``eff.accum``. ``gpus``: the job's ``GpuInfo`` list."""
    acc_gpus = eff.accum.get("gpus", {})
    firsts = [dt.datetime.fromisoformat(a["first_ts"]) for a in acc_gpus.values()
              if a["first_ts"]]
    lasts = [dt.datetime.fromisoformat(a["last_ts"]) for a in acc_gpus.values() if a["last_ts"]]
    if not firsts:
        return
    # The GPUs were the job's from its start as the scheduler reported it, whenever our
    # first sample came; only a job whose start is unknown counts from its first sample.
    start = started_at if started_at is not None else (
        min(firsts) - dt.timedelta(seconds=interval_s))
    end = max(lasts)
    wall_h = max(0.0, (end - start).total_seconds()) / 3600.0
    eff.window_start, eff.window_end = start, end
    eff.measured_from = max(start, min(firsts) - dt.timedelta(seconds=interval_s))
    eff.gpus = len(gpus)
    # A MIG instance is its share of a GPU (slices over the GPU's), a whole GPU is 1.
    eff.gpu_hours_allocated = sum(g.share for g in gpus) * wall_h

    per_gpu, used, means = {}, 0.0, []
    unmeasured_h = 0.0  # MIG instances that reported no busy figure: not judged
    mem_peak = mem_cap = None
    energy = None
    nvl_sum = nvl_n = 0
    nvl_max = None
    for g in gpus:
        a = acc_gpus.get(str(g.gpu_id))
        entry = {"index": g.index, "node": g.node, "samples": 0, "mean": None, "p10": None,
                 "p90": None, "nvml_mean": None, "source": None, "mem_peak_mib": None,
                 "energy_j": None, "wasted_gpu_hours": g.share * wall_h}
        if g.share < 1.0:
            entry["mig_share"] = g.share
        if g.mig and not (a and a["busy_n"]):
            # NVML gives no utilization on MIG; without GPM nothing says what the instance
            # did, so its time is neither used nor wasted (never an idle guess).
            entry["wasted_gpu_hours"] = None
            unmeasured_h += g.share * wall_h
        if a and a["busy_n"]:
            mean = a["busy_sum"] / a["busy_n"]
            used_g = mean / 100.0 * g.share * wall_h
            used += used_g
            means.append(mean)
            entry.update(
                samples=a["n"], mean=round(mean, 2), p10=percentile(a["hist"], 0.10),
                p90=percentile(a["hist"], 0.90),
                nvml_mean=round(a["util_sum"] / a["util_n"], 2) if a["util_n"] else None,
                source=_source(a["sm_n"], a["busy_n"]),
                wasted_gpu_hours=g.share * wall_h - used_g,
            )
        if a:
            entry["mem_peak_mib"] = a["mem_max"]
            entry["energy_j"] = a["energy_j"]
            if a["mem_max"] is not None and (mem_peak is None or a["mem_max"] > mem_peak):
                mem_peak, mem_cap = a["mem_max"], g.memory_total_mib
            if a["energy_j"] is not None:
                energy = (energy or 0.0) + a["energy_j"]
            nvl_sum += a["nvl_sum"]
            nvl_n += a["nvl_n"]
            nvl_max = _max(nvl_max, a["nvl_max"])
        per_gpu[g.uuid] = entry
    eff.per_gpu = per_gpu
    eff.gpu_hours_used = used
    eff.gpu_hours_wasted = max(0.0, eff.gpu_hours_allocated - unmeasured_h - used)
    sources = {e["source"] for e in per_gpu.values() if e["source"]}
    eff.util_source = sources.pop() if len(sources) == 1 else (
        UtilSource.MIXED if sources else UtilSource.NVML_UTIL)
    eff.util_mean_pct = sum(means) / len(means) if means else None
    eff.mem_peak_mib = mem_peak
    eff.mem_capacity_mib = mem_cap
    eff.energy_j = energy
    eff.nvlink_util_mean_pct = nvl_sum / nvl_n if nvl_n else None
    eff.nvlink_util_peak_pct = nvl_max
    job = eff.accum.get("job", {})
    eff.net_bytes = job.get("net_bytes")
    eff.nic_util_mean_pct = job["nic_sum"] / job["nic_n"] if job.get("nic_n") else None
    eff.nic_util_peak_pct = job.get("nic_max")
    eff.cpu_cores_mean = (job["cpu_cores_sum"] / job["cpu_ts_n"]
                          if job.get("cpu_ts_n") else None)
    eff.cpus_allocated = cpus_per_node * nodes if cpus_per_node else None
