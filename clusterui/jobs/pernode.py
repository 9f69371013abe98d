"""A job's figures per node, from the detector pass's per-GPU figures (the API's job
detail and `clusterui jobstats` show them)."""


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def per_node(eff) -> list[dict]:
    """``eff.per_gpu`` summed per node: every GPU of a job is allocated for the job's whole
    wall time, so a node holds that share of the job's allocated GPU-hours, and its GPUs'
    wasted GPU-hours (a GPU without samples wasted all of its own). A MIG instance counts as
    its share of a GPU; one with no busy figure (``wasted_gpu_hours`` null) is neither used
    nor wasted (``clusterui/findings/efficiency.py``)."""
    shares = sum(e.get("mig_share", 1.0) for e in eff.per_gpu.values()) or 1.0
    wall_h = eff.gpu_hours_allocated / shares
    nodes: dict[str, list[dict]] = {}
    for entry in eff.per_gpu.values():
        nodes.setdefault(entry["node"], []).append(entry)
    out = []
    for name in sorted(nodes):
        entries = nodes[name]
        allocated = wall_h * sum(e.get("mig_share", 1.0) for e in entries)
        wasted = sum(e["wasted_gpu_hours"] or 0.0 for e in entries)
        unmeasured = wall_h * sum(e.get("mig_share", 1.0) for e in entries
                                  if e["wasted_gpu_hours"] is None)
        mems = [e["mem_peak_mib"] for e in entries if e.get("mem_peak_mib") is not None]
        energies = [e["energy_j"] for e in entries if e.get("energy_j") is not None]
        out.append({
            "node": name, "gpus": len(entries), "gpu_hours_allocated": allocated,
            "gpu_hours_used": allocated - unmeasured - wasted, "gpu_hours_wasted": wasted,
            "efficiency_pct": (100.0 * (allocated - unmeasured - wasted)
                               / (allocated - unmeasured) if allocated > unmeasured else None),
            "nvml_util_mean_pct": _mean(e.get("nvml_mean") for e in entries),
            "mem_peak_mib": max(mems) if mems else None,
            "energy_j": sum(energies) if energies else None,
        })
    return out
