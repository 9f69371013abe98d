"""``benchmarks/storage_vs_peers.py`` judges each store by its exactness check and feeds
the peers exposition text: the check must catch a value one bit off, a lost or an invented
sample, and the text must carry every float64 exactly (or a peer would be blamed for the
writer's rounding)."""

import re

import numpy as np

from benchmarks.peers import exposition
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
        got: dict = {}
        line = re.compile(r'gpu_(\w+)\{node="(\w+)",gpu="(\d+)"\} (\S+) (\S+)$')
        for text in path.read_text().splitlines():
            if text.startswith("#"):
                continue
            m, node, gpu, value, ts = line.match(text).groups()
            ts_ms = round(float(ts) * 1000) if openmetrics else int(ts)
            series = got.setdefault(m, {}).setdefault((node, gpu), ([], []))
            series[0].append(ts_ms)
            series[1].append(float(value))
        read = {m: {k: (np.array(t, np.int64), np.array(v)) for k, (t, v) in s.items()}
                for m, s in got.items()}
        checks = exposition.check(w, read)
        assert all(c.exact for c in checks), exposition.summary(checks)
        assert written == sum(c.expected for c in checks)
    assert path.read_text().count("# TYPE") == 15
