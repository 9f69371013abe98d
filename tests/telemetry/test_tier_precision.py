"""Every GPU metric, from the collector to every tier and back, at the precision stated for
it in ``docs/collector.md``.

Realistic noisy values at the collector's own resolution (``COLLECTOR``: what
``collectors/gpu/source.py`` sends) go in through the real validation and ingest writer;
they are read back from the hot tier, compacted, and read back from the packed tier
(``packed.raw_samples``) and from the 1-minute, 5-minute and 1-hour rollups, and each is
compared with the input:

- hot tier: exact for the ``double precision``, ``integer`` and ``bigint`` columns (byte
  rates, the energy counter, memory, the bit mask); a ``real`` column holds the float32
  nearest the value (well within the collector's resolution);
- packed tier: exactly the collector's value (byte rates and counters bit for bit; a
  quantised metric's step divides the collector's resolution, so rounding gives it back);
- rollups: min and max as the hot tier holds them, exactly; the mean as numpy computes it
  from the input, within float4's rounding (``real`` averages) or float64's (byte rates).

The test is parametrised over ``GPU_METRICS``: a new metric fails here until its
collector resolution is stated in ``COLLECTOR``.
"""

import datetime as dt

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone

from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.inventory.models import Gpu, Nic
from clusterui.telemetry import codec, compaction, packed, rollupcodec
from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    GPU_METRICS,
    GPU_PACKED_ROLLUP_WIDTHS,
    GPU_ROLLUP_TABLES,
    NIC_METRIC_NAMES,
    NIC_ROLLUP_TABLES,
)
from tests.factories import node_batch
from tests.telemetry.packed_rollups import rollup_rows

pytestmark = pytest.mark.django_db
NOW = timezone.now()
# A closed hour two days ago: before the compaction horizon, inside the raw retention.
HOUR = (NOW - dt.timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
N = 360  # one sample every 10 s
EVERY_S = 10.0


def _rate(rng, n, peak, unit=1):
    """A byte rate as the collector computes one: a counter's increase (whole ``unit``s:
    bytes for PCIe, KiB for NVLink) over the time between two readings (``time.time()``
    differences, never exactly the interval): a float with a fractional part."""
    delta = rng.integers(0, int(peak * EVERY_S / unit), n) * unit
    delta[rng.random(n) < 0.05] = 0  # idle links
    elapsed = EVERY_S + rng.normal(0, 0.004, n)
    return delta / elapsed


def _decimals(rng, n, lo, hi, digits):
    """Values with ``digits`` decimals, each the double nearest its decimal (as a JSON
    parser reads ``84.51``)."""
    return np.rint(rng.uniform(lo, hi, n) * 10**digits) / 10**digits


# What the collector sends for each metric (its resolution), as a function of (rng, n).
COLLECTOR = {
    "util_pct": lambda r, n: _decimals(r, n, 0, 100, 2),  # GPM-style two decimals
    "mem_util_pct": lambda r, n: _decimals(r, n, 0, 100, 2),
    "mem_used_mib": lambda r, n: r.integers(0, 81_559, n),
    "power_w": lambda r, n: r.integers(60_000, 700_000, n) / 1000.0,  # mW / 1000
    "temp_c": lambda r, n: r.integers(25, 90, n).astype(np.float64),
    "sm_clock_mhz": lambda r, n: r.integers(210, 1981, n).astype(np.float64),
    "sm_active_pct": lambda r, n: _decimals(r, n, 0, 100, 2),
    "tensor_active_pct": lambda r, n: _decimals(r, n, 0, 100, 2),
    "dram_active_pct": lambda r, n: _decimals(r, n, 0, 100, 2),
    "pcie_tx_bytes_per_s": lambda r, n: _rate(r, n, 64e9),
    "pcie_rx_bytes_per_s": lambda r, n: _rate(r, n, 64e9),
    "nvlink_tx_bytes_per_s": lambda r, n: _rate(r, n, 450e9, 1024),
    "nvlink_rx_bytes_per_s": lambda r, n: _rate(r, n, 450e9, 1024),
    "throttle_reasons": lambda r, n: r.choice([0, 1, 4, 0x80, 0x1_0000_0004, 2**63 - 1], n),
    # mJ since driver load, / 1000: a counter ~ 10^7 J into a long uptime.
    "energy_j": lambda r, n: (12_345_678_901 + np.cumsum(r.integers(0, 7_000_000, n)))
    / 1000.0,
}
METRIC = {m.name: m for m in GPU_METRICS}
# A rate needs two readings, GPM two samples: the collector's first tick sends none.
FIRST_NULL = {m for m in GPU_METRIC_NAMES if m.endswith(("_bytes_per_s", "_active_pct"))}


def collector_values(seed: int = 17) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {m: COLLECTOR[m](rng, N) for m in GPU_METRIC_NAMES if m in COLLECTOR}
    for m in FIRST_NULL:
        out[m][0] = np.nan
    return out


def ingest(values: dict[str, np.ndarray]) -> np.ndarray:
    """One GPU's hour of samples with these values through validation and the writer;
    returns their ts in ms."""
    start = HOUR.timestamp()
    ts = start + np.arange(N) * EVERY_S + 0.25
    batch = node_batch(gpus=1, samples=1, start=start, job=None, nics=0)
    names = list(values)
    rows = []
    for k in range(N):
        row = [float(ts[k]), 0, None]
        for m in names:
            v = values[m][k]
            row.append(int(v) if METRIC[m].integer else None if np.isnan(v) else float(v))
        rows.append(row)
    batch["gpu_samples"] = {"fields": ["ts", "gpu", "job", *names], "rows": rows}
    result = store_batch(validate_batch(batch))
    assert result.gpu_samples == N, result
    return np.rint(ts * 1000).astype(np.int64)


def the_block(gpu_id: int):
    blocks = packed.raw_samples([gpu_id], HOUR, HOUR + dt.timedelta(hours=1))
    assert [(g, b.start, len(b)) for g, b in blocks] == [(gpu_id, packed.dt_to_ms(HOUR), N)]
    return blocks[0][1]


def assert_stored(name: str, got, want, what: str) -> None:
    """``got`` is ``want`` as a column of the metric's SQL type holds it: a ``real`` the
    float32 nearest (compared as float32: a float4 may be read back as its shortest
    decimal), anything else exactly."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if METRIC[name].sql_type == "real":
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want, f"{name} ({what})")


def assert_packed(name: str, got: np.ndarray, v: np.ndarray) -> None:
    kind, scale = codec.PRECISION[name]
    if kind == "scale":
        # The codec's step divides the collector's resolution: rounding the (float32) hot
        # value to it gives the collector's value back.
        assert np.array_equal(np.rint(v * scale) / scale, v), f"{name}: finer than the codec"
    np.testing.assert_array_equal(got, v, err_msg=f"{name} (packed tier)")


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def read_rollup(width: int, table: str, columns: str, gpu_id: int) -> list[tuple]:
    """The rollup's rows of this GPU by bucket: the packed ones (1 and 5 minutes, migration
    0009) decoded, the 1-hour ones as stored."""
    if width in GPU_PACKED_ROLLUP_WIDTHS:
        return rollup_rows(width, columns, "gpu_id = %s", [gpu_id])
    return fetch(f"SELECT {columns} FROM {table} WHERE gpu_id = %s ORDER BY bucket", [gpu_id])


def assert_rollups(name: str, gpu_id: int, ts: np.ndarray, v: np.ndarray) -> None:
    for width, table in GPU_ROLLUP_TABLES.items():
        bucket = ts - ts % (width * 1000)
        edges = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        parts = np.split(np.arange(N), edges[1:])
        if name == "throttle_reasons":
            got = read_rollup(width, table, "throttle_reasons_or", gpu_id)
            want = [int(np.bitwise_or.reduce(v[p])) for p in parts]
            assert [g for (g,) in got] == want, (name, table)
            continue
        if name == "energy_j":
            got = read_rollup(width, table, "energy_j_min, energy_j_max, energy_j_last", gpu_id)
            want = [(v[p].min(), v[p].max(), v[p][-1]) for p in parts]
            assert got == want, (name, table)
            continue
        # The mean (and count) of every gauge; its min and max where the tier keeps them
        # (``rollupcodec.KEPT``: the pages' bands, a job's peak memory).
        extremes = [a for a in ("min", "max") if a in rollupcodec.KEPT[name]]
        got = read_rollup(width, table, ", ".join(
            [f"{name}_avg", f"{name}_n", *(f"{name}_{a}" for a in extremes)]), gpu_id)
        assert len(got) == len(parts), (name, table)
        avg, _, *kept = (np.array(c, np.float64) for c in zip(*got, strict=True))
        present = [p[~np.isnan(v[p])] if v.dtype.kind == "f" else p for p in parts]
        counts = [None if len(q) == len(p) else len(q)
                  for p, q in zip(parts, present, strict=True)]
        assert [g[1] for g in got] == counts, (name, table)  # NULL: all samples had it
        parts = present
        for agg, values in zip(extremes, kept, strict=True):
            reduce = np.min if agg == "min" else np.max
            assert_stored(name, values, [reduce(v[p]) for p in parts], f"{agg}, {table}")
        mean = np.array([np.mean(v[p].astype(np.float64)) for p in parts])
        # float4 averages: the hot tier's float32 values, their mean stored as a float32
        # (2**-24 each); float8 averages: float64 summation of N values.
        rtol = 2.0**-22 if METRIC[name].sql_type == "real" or name == "mem_used_mib" else 1e-13
        np.testing.assert_allclose(avg, mean, rtol=rtol, atol=0,
                                   err_msg=f"{name} avg {table}")


@pytest.mark.parametrize("name", GPU_METRIC_NAMES)
def test_every_tier_keeps_the_stated_precision(name):
    if name not in COLLECTOR:
        pytest.fail(f"{name}: state the collector's resolution in COLLECTOR and "
                    "docs/collector.md")
    values = collector_values()
    ts = ingest(values)
    gpu_id = Gpu.objects.get().id
    v = values[name]

    null = np.isnan(v) if v.dtype.kind == "f" else np.zeros(N, bool)
    hot = the_block(gpu_id)
    assert np.array_equal(hot.ts, ts) and np.array_equal(hot.nulls[name], null)
    assert_stored(name, hot.values[name][~null], v[~null], "hot tier")

    result = compaction.compact(NOW, budget_s=10**9)
    assert result.rows == N and result.chunks == 1, result
    assert fetch("SELECT count(*) FROM telemetry_gpusample") == [(0,)]
    chunk = the_block(gpu_id)
    assert np.array_equal(chunk.ts, ts) and np.array_equal(chunk.nulls[name], null)
    assert_packed(name, chunk.values[name][~null], v[~null])
    assert_rollups(name, gpu_id, ts, v)


def test_nic_byte_rates_are_exact_in_the_raw_rows_and_their_rollups():
    rng = np.random.default_rng(5)
    rx, tx = _rate(rng, N, 50e9), _rate(rng, N, 50e9)
    start = HOUR.timestamp()
    batch = node_batch(gpus=1, samples=1, start=start, job=None, nics=1)
    batch["gpu_samples"]["rows"] = []
    batch["nic_samples"]["rows"] = [[start + k * EVERY_S, 0, float(rx[k]), float(tx[k])]
                                    for k in range(N)]
    assert store_batch(validate_batch(batch)).nic_samples == N
    nic_id = Nic.objects.get().id
    raw = fetch("SELECT rx_bytes_per_s, tx_bytes_per_s FROM telemetry_nicsample "
                "WHERE nic_id = %s ORDER BY ts", [nic_id])
    np.testing.assert_array_equal(np.array(raw), np.c_[rx, tx])
    compaction.compact(NOW, budget_s=10**9)
    for width, table in NIC_ROLLUP_TABLES.items():
        parts = np.split(np.arange(N), np.arange(0, N, width // int(EVERY_S))[1:])
        for m, v in zip(NIC_METRIC_NAMES, (rx, tx), strict=True):
            got = fetch(f"SELECT {m}_min, {m}_max, {m}_avg FROM {table} WHERE nic_id = %s "
                        "ORDER BY bucket", [nic_id])
            assert [(a, b) for a, b, _ in got] == [(v[p].min(), v[p].max()) for p in parts]
            np.testing.assert_allclose([c for _, _, c in got], [v[p].mean() for p in parts],
                                       rtol=1e-13, atol=0)
