"""The workload as exposition text for the peers, and the exactness check every store's
read-back goes through.

Each metric is one family ``gpu_<metric>`` (a gauge), each GPU one series labelled
``node`` and ``gpu``; with network ports, each of their byte rates one family
``nic_<metric>``, each port one series labelled ``node`` and ``nic``. A null value is no
sample (neither peer has a null). The ports' fabric fields are not given to the peers:
ClusterUI keeps of them only each port's newest link state and the samples where an error
counter rose (``clusterui.fabric.store``), so the peers get what ClusterUI keeps per sample,
the byte rates. OpenMetrics
(``promtool tsdb create-blocks-from openmetrics``) writes timestamps in seconds and ends
with ``# EOF``; the Prometheus text format (VictoriaMetrics' ``/api/v1/import/prometheus``)
in milliseconds. Values are written as Python's ``repr``: the shortest decimal that reads
back as the same float64, so the text itself loses nothing.
"""

from dataclasses import dataclass

import numpy as np

from benchmarks.peers.workload import INTEGER, Workload
from clusterui.telemetry.metrics import GPU_METRIC_NAMES, NIC_METRIC_NAMES

PREFIX = "gpu_"
NIC_PREFIX = "nic_"
# The metric a family of the read-back is filed under: a GPU family without its prefix
# ("util_pct"), a port's with it ("nic_rx_bytes_per_s").
FAMILIES = r"gpu_.*|nic_.*"


def series_key(node: str, device: str) -> tuple[str, str]:
    """A series: its node's name and its GPU's index (as text) or its port's name."""
    return node, device


def metric_of(family: str) -> str:
    return family.removeprefix(PREFIX)


def _series(w: Workload):
    """(metric as read back, family, label, values, timestamps ms, [series key per row])
    for every metric of the workload."""
    for m in GPU_METRIC_NAMES:
        keys = [series_key(w.node_name(g // w.gpus_per_node), str(g % w.gpus_per_node))
                for g in range(w.gpus)]
        yield m, PREFIX + m, "gpu", w.values[m], w.ts_ms, keys
    if w.nics_per_node:
        ts = w.nic_ts_ms
        keys = [series_key(w.node_name(k // w.nics_per_node), w.nic_name(k % w.nics_per_node))
                for k in range(w.nics)]
        for m in NIC_METRIC_NAMES:
            yield NIC_PREFIX + m, NIC_PREFIX + m, "nic", w.nic_values[m], ts, keys


def write(w: Workload, path, *, openmetrics: bool) -> int:
    """Write every sample to ``path``; returns the number of samples written."""
    count = 0
    with open(path, "w") as out:
        for m, family, label, values_of, ts_of, keys in _series(w):
            out.write(f"# TYPE {family} gauge\n")
            for g, (node, device) in enumerate(keys):
                v = values_of[g]
                keep = np.ones(len(v), bool) if m in INTEGER else ~np.isnan(v)
                ts = ts_of[g][keep]
                stamps = ([f"{t // 1000}.{t % 1000:03d}" for t in ts.tolist()] if openmetrics
                          else map(str, ts.tolist()))
                values = map(str if m in INTEGER else repr, v[keep].tolist())
                head = f'{family}{{node="{node}",{label}="{device}"}} '
                out.write("".join(f"{head}{x} {t}\n" for x, t in zip(values, stamps,
                                                                      strict=True)))
                count += int(keep.sum())
        if openmetrics:
            out.write("# EOF\n")
    return count


# --- the exactness check -----------------------------------------------------------------

# What a store read back: metric (``metric_of`` its family) -> ``series_key`` -> (ts ms,
# values).
ReadBack = dict[str, dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]]


@dataclass
class MetricCheck:
    metric: str
    expected: int  # non-null samples that went in
    missing: int = 0  # samples (by timestamp) that did not come back
    extra: int = 0  # samples that came back but never went in
    differ: int = 0  # same timestamp, a different float64
    within: int = 0  # of which within the store's stated step (``tolerance``)
    max_error: float = 0.0

    @property
    def exact(self) -> bool:
        return not (self.missing or self.extra or self.differ)

    @property
    def ok(self) -> bool:
        """Exact, or off only by less than the stated step."""
        return not (self.missing or self.extra) and self.differ == self.within


def check(w: Workload, got: ReadBack, tolerance: dict[str, float] | None = None
          ) -> list[MetricCheck]:
    """Compare every non-null sample of ``w`` with what a store gave back: the same
    timestamps, and each value the same float64 bit for bit; a differing value counts as
    ``within`` when it is off by at most ``tolerance[metric]`` (a stated quantisation)."""
    tolerance = tolerance or {}
    out = []
    for m, _family, _label, values_of, ts_of, keys in _series(w):
        series = got.get(m, {})
        c = MetricCheck(m, 0)
        seen = set()
        for g, key in enumerate(keys):
            seen.add(key)
            v = values_of[g].astype(np.float64)
            keep = ~np.isnan(v)
            want_ts, want = ts_of[g][keep], v[keep]
            c.expected += len(want)
            ts, vals = series.get(key, (np.zeros(0, np.int64), np.zeros(0)))
            common, iw, ig = np.intersect1d(want_ts, ts, assume_unique=True,
                                            return_indices=True)
            c.missing += len(want_ts) - len(common)
            c.extra += len(ts) - len(common)
            a, b = want[iw], np.asarray(vals, np.float64)[ig]
            bad = a.view(np.int64) != b.view(np.int64)
            c.differ += int(bad.sum())
            if bad.any():
                err = np.abs(a[bad] - b[bad])
                c.max_error = max(c.max_error, float(np.nanmax(err)))
                c.within += int((err <= tolerance.get(m, -1)).sum())
        c.extra += sum(len(ts) for key, (ts, _) in series.items() if key not in seen)
        out.append(c)
    return out


def summary(checks: list[MetricCheck]) -> str:
    """One line: "exact" (every value bit for bit), or what differed."""
    if all(c.exact for c in checks):
        return f"exact ({sum(c.expected for c in checks):,} values, bit for bit)"
    parts = []
    for c in checks:
        if c.exact:
            continue
        what = []
        if c.missing:
            what.append(f"{c.missing:,} missing")
        if c.extra:
            what.append(f"{c.extra:,} extra")
        if c.differ:
            what.append(f"{c.differ:,} of {c.expected:,} differ (max {c.max_error:.3g}"
                        + (", within the stated step" if c.differ == c.within else "") + ")")
        parts.append(f"{c.metric}: {', '.join(what)}")
    return "NOT exact: " + "; ".join(parts)
