"""A job's figures per node, from the detector pass's per-GPU figures (the API's job
detail and `clusterui jobstats` show them)."""


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def per_node(eff) -> list[dict]:
    """``eff.per_gpu`` summed per node: every GPU of a job is allocated for the job's whole
    wall time, so a node holds that share of the job's allocated GPU-hours, and its GPUs'
    wasted GPU-hours (a GPU without samples wasted all of its own)."""
    gpus = len(eff.per_gpu) or 1
    wall_h = eff.gpu_hours_allocated / gpus
    nodes: dict[str, list[dict]] = {}
    for entry in eff.per_gpu.values():
        nodes.setdefault(entry["node"], []).append(entry)
    out = []
    for name in sorted(nodes):
        entries = nodes[name]
        allocated = wall_h * len(entries)
        wasted = sum(e["wasted_gpu_hours"] for e in entries)
        mems = [e["mem_peak_mib"] for e in entries if e.get("mem_peak_mib") is not None]
        energies = [e["energy_j"] for e in entries if e.get("energy_j") is not None]
        out.append({
            "node": name, "gpus": len(entries), "gpu_hours_allocated": allocated,
            "gpu_hours_used": allocated - wasted, "gpu_hours_wasted": wasted,
            "efficiency_pct": 100.0 * (allocated - wasted) / allocated if allocated else None,
            "nvml_util_mean_pct": _mean(e.get("nvml_mean") for e in entries),
            "mem_peak_mib": max(mems) if mems else None,
            "energy_j": sum(energies) if energies else None,
        })
    return out
