"""Series derived from the aligned ones ``clusterui.telemetry.series`` returns: means
across GPUs, and link traffic as a share of link capacity."""

from clusterui.inventory.choices import NicKind

FABRIC = (NicKind.INFINIBAND, NicKind.ROCE)


def mean_over(series, keys, metric) -> list[float | None]:
    """Per bucket, the mean of ``metric`` over the keys that have a value there."""
    columns = [series.values[k][metric] for k in keys if k in series.values]
    out = []
    for i in range(len(series.ts)):
        vals = [c[i] for c in columns if c[i] is not None]
        out.append(sum(vals) / len(vals) if vals else None)
    return out


def has_metric(series, keys, metric) -> bool:
    """Whether any of the keys reported ``metric`` in any bucket."""
    return any(v is not None for k in keys for v in series.values.get(k, {}).get(metric, []))


def extreme_over(series, keys, metric, pick) -> list[float | None]:
    """Per bucket, ``pick`` (``min`` or ``max``) of ``metric`` over the keys that have a
    value there: with a series read with ``agg="min"``/``"max"``, the lowest and highest
    sample of any of the GPUs in each bucket."""
    columns = [series.values[k][metric] for k in keys if k in series.values]
    out = []
    for i in range(len(series.ts)):
        vals = [c[i] for c in columns if c[i] is not None]
        out.append(pick(vals) if vals else None)
    return out


def fabric_nics(nics):
    """The NICs that carry a job's traffic: InfiniBand / RoCE ports when the node has any
    (the management Ethernet would dilute the share), otherwise every NIC; only those
    with a known capacity."""
    known = [n for n in nics if n.link_bytes_per_s]
    fabric = [n for n in known if n.kind in FABRIC]
    return fabric or known


def nic_load_pct(series, nics) -> list[float | None]:
    """Per bucket, the busier direction's traffic summed over ``nics`` as a % of their
    summed capacity (only NICs that reported in that bucket count)."""
    out = []
    for i in range(len(series.ts)):
        moved = capacity = 0.0
        for nic in nics:
            row = series.values.get(nic.id)
            if row is None or not nic.link_bytes_per_s:
                continue
            rx, tx = row["rx_bytes_per_s"][i], row["tx_bytes_per_s"][i]
            if rx is None and tx is None:
                continue
            moved += max(rx or 0.0, tx or 0.0)
            capacity += nic.link_bytes_per_s
        out.append(min(100.0, 100.0 * moved / capacity) if capacity else None)
    return out


def nvlink_load_pct(series, gpus) -> list[float | None]:
    """Per bucket, the mean over ``gpus`` of the busier NVLink direction as a % of the
    GPU's NVLink capacity; None where no GPU has NVLink or reported traffic."""
    out = []
    for i in range(len(series.ts)):
        shares = []
        for gpu in gpus:
            row = series.values.get(gpu.id)
            if row is None or not gpu.nvlink_bytes_per_s:
                continue
            tx, rx = row["nvlink_tx_bytes_per_s"][i], row["nvlink_rx_bytes_per_s"][i]
            if tx is None and rx is None:
                continue
            shares.append(100.0 * max(tx or 0.0, rx or 0.0) / gpu.nvlink_bytes_per_s)
        out.append(min(100.0, sum(shares) / len(shares)) if shares else None)
    return out
