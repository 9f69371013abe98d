"""``benchmarks/storage_vs_peers.py`` judges each store by its exactness check and feeds
the peers exposition text: the check must catch a value one bit off, a lost or an invented
sample, and the text must carry every float64 exactly (or a peer would be blamed for the
writer's rounding)."""

import re

import numpy as np

from benchmarks.peers import exposition
from benchmarks.peers.workload import batches as workload_batches
from benchmarks.peers.workload import generate

START_MS = 1_763_800_000_000


def small():
    return generate(nodes=4, gpus_per_node=2, hours=0.25, interval_s=10, start_ms=START_MS)


def as_read_back(w) -> exposition.ReadBack:
    """What a perfect store gives back: every non-null sample, as it went in."""
    out = {}
    for m, v in w.values.items():
        out[m] = {}
        for g in range(w.gpus):
            keep = ~np.isnan(v[g].astype(np.float64))
            key = (w.node_name(g // w.gpus_per_node), str(g % w.gpus_per_node))
            out[m][key] = (w.ts_ms[g][keep].copy(), v[g][keep].astype(np.float64))
    return out


def parse(path, *, openmetrics: bool) -> exposition.ReadBack:
    """The exposition text read back: a GPU's families by metric, a port's as
    ``nic_<metric>``; OpenMetrics times in seconds, the Prometheus format's in ms."""
    line = re.compile(r'(gpu|nic)_(\w+)\{node="(\w+)",(?:gpu|nic)="([\w:]+)"\} (\S+) (\S+)$')
    got: dict = {}
    for text in path.read_text().splitlines():
        if text.startswith("#"):
            continue
        family, m, node, device, value, ts = line.match(text).groups()
        metric = m if family == "gpu" else f"nic_{m}"
        series = got.setdefault(metric, {}).setdefault((node, device), ([], []))
        series[0].append(round(float(ts) * 1000) if openmetrics else int(ts))
        series[1].append(float(value))
    return {m: {k: (np.array(t, np.int64), np.array(v)) for k, (t, v) in s.items()}
            for m, s in got.items()}


def by_metric(checks):
    return {c.metric: c for c in checks}


def test_a_perfect_read_back_is_exact():
    w = small()
    checks = exposition.check(w, as_read_back(w))
    assert all(c.exact for c in checks)
    assert exposition.summary(checks).startswith("exact (")


def test_one_bit_off_a_lost_and_an_invented_sample_are_each_reported():
    w = small()
    got = as_read_back(w)
    key = ("peer003", "1")  # a communication-bound node's GPU
    ts, v = got["nvlink_tx_bytes_per_s"][key]
    v[5] = np.nextafter(v[5], np.inf)  # one ulp: what a decimal store's rounding does
    ts_p, v_p = got["power_w"][key]
    got["power_w"][key] = (np.delete(ts_p, 3), np.delete(v_p, 3))
    ts_t, v_t = got["temp_c"][key]
    got["temp_c"][key] = (np.append(ts_t, ts_t[-1] + 10_000), np.append(v_t, 40.0))
    checks = by_metric(exposition.check(w, got))
    assert (checks["nvlink_tx_bytes_per_s"].differ, checks["nvlink_tx_bytes_per_s"].ok) == (
        1, False)
    assert (checks["power_w"].missing, checks["power_w"].ok) == (1, False)
    assert (checks["temp_c"].extra, checks["temp_c"].ok) == (1, False)
    assert sum(not c.exact for c in checks.values()) == 3
    summary = exposition.summary(list(checks.values()))
    assert "nvlink_tx_bytes_per_s: 1 of" in summary and "power_w: 1 missing" in summary


def test_a_quantised_metric_passes_only_within_its_stated_step():
    w = small()
    got = as_read_back(w)
    key = ("peer000", "0")
    got["util_pct"][key][1][0] += 0.004  # inside a 0.01 % step
    got["util_pct"][key][1][1] += 0.02  # outside it
    c = by_metric(exposition.check(w, got, {"util_pct": 0.005}))["util_pct"]
    assert (c.differ, c.within, c.ok) == (2, 1, False)


def test_the_exposition_text_carries_every_value_exactly(tmp_path):
    w = small()
    for openmetrics in (True, False):
        path = tmp_path / f"samples-{openmetrics}.txt"
        written = exposition.write(w, path, openmetrics=openmetrics)
        checks = exposition.check(w, parse(path, openmetrics=openmetrics))
        assert all(c.exact for c in checks), exposition.summary(checks)
        assert written == sum(c.expected for c in checks)
    assert path.read_text().count("# TYPE") == 15


# --- with the nodes' InfiniBand ports (``--nics-per-node``) ---------------------------------

def with_ports():
    return generate(nodes=4, gpus_per_node=2, hours=0.25, interval_s=10, start_ms=START_MS,
                    nics_per_node=2)


def with_ports_read_back(w) -> exposition.ReadBack:
    out = as_read_back(w)
    ts = w.nic_ts_ms
    for m, v in w.nic_values.items():
        series = out[exposition.NIC_PREFIX + m] = {}
        for k in range(w.nics):
            keep = ~np.isnan(v[k])
            key = (w.node_name(k // w.nics_per_node), w.nic_name(k % w.nics_per_node))
            series[key] = (ts[k][keep].copy(), v[k][keep].copy())
    return out


def test_ports_leave_the_gpu_samples_as_they_were():
    """The GPU-only figures and the ones with ports are taken on the same GPU samples."""
    a, b = small(), with_ports()
    assert all(np.array_equal(a.values[m], b.values[m], equal_nan=True) for m in a.values)
    assert np.array_equal(a.ts_ms, b.ts_ms)


def test_the_batches_with_ports_pass_the_servers_validation():
    from clusterui.ingest.validate import validate_batch

    w = with_ports()
    batches = list(workload_batches(w))
    stored_rows = 0
    for batch in batches:
        checked = validate_batch(batch, now=w.ts_ms.max() / 1000 + 60)
        assert checked.rejected_total == 0, checked.rejected
        stored_rows += len(checked.nic_rows)
    assert stored_rows == w.nic_samples
    # Within the port's 400 Gb/s; a communication-bound node's ports busier than an idle
    # node's, whose only traffic is management.
    rates = w.nic_values["rx_bytes_per_s"][:, 1:]
    assert rates.min() >= 0 and rates.max() <= 50e9 * 1.001
    port_profiles = np.repeat(np.array(w.profiles), w.nics_per_node)
    assert rates[port_profiles == "comm"].mean() > 1e10
    assert rates[port_profiles == "idle"].max() < 1e5


def test_a_port_sample_lost_or_off_by_one_bit_is_reported():
    w = with_ports()
    got = with_ports_read_back(w)
    assert all(c.exact for c in exposition.check(w, got))
    key = ("peer003", "mlx5_1:1")
    ts, v = got["nic_tx_bytes_per_s"][key]
    v[2] = np.nextafter(v[2], 0)
    ts_r, v_r = got["nic_rx_bytes_per_s"][key]
    got["nic_rx_bytes_per_s"][key] = (ts_r[1:], v_r[1:])
    checks = by_metric(exposition.check(w, got))
    assert (checks["nic_tx_bytes_per_s"].differ, checks["nic_rx_bytes_per_s"].missing) == (1, 1)
    assert sum(not c.exact for c in checks.values()) == 2


def test_the_exposition_text_carries_every_port_value_exactly(tmp_path):
    w = with_ports()
    path = tmp_path / "samples.om"
    written = exposition.write(w, path, openmetrics=True)
    checks = exposition.check(w, parse(path, openmetrics=True))
    assert all(c.exact for c in checks), exposition.summary(checks)
    assert written == sum(c.expected for c in checks)
    assert {c.metric for c in checks} >= {"nic_rx_bytes_per_s", "nic_tx_bytes_per_s"}
    assert path.read_text().count("# TYPE") == 17
