"""The packed tier's codec: every value comes back within its stated precision, nulls as nulls;
byte rates and the energy counter exactly; chunks written by format version 1 still read."""

import base64

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterui.telemetry import codec
from clusterui.telemetry.metrics import GPU_METRIC_NAMES, GPU_METRICS

START = 1_790_002_800_000  # an hour boundary, ms
BOUNDS = {m.name: (m.lo, m.hi) for m in GPU_METRICS}


def tolerance(name: str, v: np.ndarray) -> np.ndarray:
    kind, scale = codec.PRECISION[name]
    if kind == "scale":
        # Half the step, plus float64's own rounding at large magnitudes (energy in mJ).
        return 0.5 / scale + np.abs(v) * 1e-15
    return np.zeros(len(v))


def expected(name: str, v):
    return np.asarray(v, np.float64)


@st.composite
def hours(draw):
    n = draw(st.integers(1, 400))
    offsets = sorted(draw(st.sets(st.integers(0, 3_599_999), min_size=n, max_size=n)))
    job = draw(st.lists(st.sampled_from([0, 1, 7, 2**31 - 1]), min_size=n, max_size=n))
    values, nulls = {}, {}
    for m in GPU_METRICS:
        lo, hi = BOUNDS[m.name]
        null = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        if draw(st.booleans()):
            null[:] = draw(st.booleans())  # all null or none, as well as mixed
        if m.integer:
            v = np.array(draw(st.lists(st.integers(int(lo), int(hi)), min_size=n,
                                       max_size=n)), np.int64)
            nulls[m.name] = null
        else:
            v = np.array(draw(st.lists(st.floats(lo, hi), min_size=n, max_size=n)))
            v[null] = np.nan
        values[m.name] = v
    return np.array(offsets, np.int64) + START, np.array(job, np.int64), values, nulls


@settings(max_examples=150, deadline=None)
@given(hours())
def test_round_trip_within_precision_with_nulls(hour):
    ts, job, values, nulls = hour
    block = codec.unpack(codec.pack(START, ts, job, values, nulls))
    assert block.start == START
    assert np.array_equal(block.ts, ts)
    assert np.array_equal(block.job, job)
    for name, v in values.items():
        null = nulls.get(name, np.isnan(v) if v.dtype.kind == "f" else np.zeros(len(v), bool))
        assert np.array_equal(block.nulls[name], null), name
        got, want = block.values[name][~null], expected(name, v[~null])
        assert np.all(np.abs(got - want) <= tolerance(name, want)), name
        if v.dtype.kind == "f":
            assert np.isnan(block.values[name][null]).all()


def test_extremes_survive():
    ts = START + np.array([0, 1, 3_599_999])
    values = {m.name: np.array([m.lo, m.hi, m.lo], np.int64 if m.integer else np.float64)
              for m in GPU_METRICS}
    block = codec.unpack(codec.pack(START, ts, [0, 2**31 - 1, 0], values))
    assert block.values["throttle_reasons"].tolist() == [0, 2**63 - 1, 0]
    assert block.values["energy_j"].tolist() == [0.0, 1e15, 0.0]
    assert block.values["temp_c"].tolist() == [-60.0, 200.0, -60.0]
    assert block.values["pcie_tx_bytes_per_s"].tolist() == [0.0, 1e13, 0.0]
    assert block.job.tolist() == [0, 2**31 - 1, 0]


def test_a_missing_metric_is_all_null_and_an_empty_chunk_is_refused():
    block = codec.unpack(codec.pack(START, [START], [3], {"util_pct": [50.0]}))
    assert block.values["util_pct"].tolist() == [50.0]
    assert block.nulls["power_w"].all()
    with pytest.raises(ValueError):
        codec.pack(START, [], [], {})


def test_a_steady_hour_packs_small():
    n = 360
    rng = np.random.default_rng(3)
    ts = START + np.arange(n) * 10_000 + rng.integers(0, 20, n)
    util = np.clip(rng.normal(90, 2, n), 0, 100)
    values = {"util_pct": util, "power_w": 300 + util * 4, "temp_c": np.full(n, 64.0),
              "mem_used_mib": np.full(n, 61234), "energy_j": 1e6 + np.arange(n) * 6500.0,
              "throttle_reasons": np.zeros(n, np.int64)}
    assert len(codec.pack(START, ts, np.full(n, 5), values)) / n < 10


RATES = [m.name for m in GPU_METRICS if m.name.endswith("_bytes_per_s")]


def bits(v) -> list[int]:
    return np.asarray(v, np.float64).view(np.int64).tolist()


@pytest.mark.parametrize("values, d", [
    ([0.0, 12_345_678.0, 4e11, 1e13], 0),  # whole B/s
    ([0.5, 1234.5, 98_765_432.1], 1),  # a rate over exactly 10 s
    ([0.001, 12_345_678.901], 3),  # the energy counter's mJ / 1000
    ([2963971415.608826, 13158336115.727716, 1.0], codec.FLOAT_BITS),  # over a measured dt
    ([1e13 + 0.5 * 3, 0.1 + 0.2], codec.FLOAT_BITS),
    ([5e-324, 1.7976931348623157e308, 0.0], codec.FLOAT_BITS),  # subnormal and the largest
    ([-0.0, 1.0], codec.FLOAT_BITS),  # no q / 10**d is -0.0
])
def test_exact_metrics_come_back_bit_for_bit(values, d):
    assert codec._decimals(np.array(values)) == d
    n = len(values)
    block = codec.unpack(codec.pack(START, START + np.arange(n), np.zeros(n, np.int64),
                                    {m: np.array(values) for m in [*RATES, "energy_j"]}))
    for m in [*RATES, "energy_j"]:
        assert bits(block.values[m]) == bits(values), m


def test_fractional_byte_rates_with_nulls_round_trip_bit_for_bit():
    rng = np.random.default_rng(11)
    n = 360
    rate = rng.integers(0, 4_500_000_000_000, n) / (10.0 + rng.normal(0, 0.004, n))
    rate[rng.random(n) < 0.1] = np.nan
    block = codec.unpack(codec.pack(START, START + np.arange(n) * 10_000, np.zeros(n),
                                    {"nvlink_tx_bytes_per_s": rate}))
    got = block.values["nvlink_tx_bytes_per_s"]
    assert np.array_equal(np.isnan(got), np.isnan(rate))
    assert bits(got[~np.isnan(got)]) == bits(rate[~np.isnan(rate)])


# A chunk packed by format version 1 (codec.py before migration 0008): byte rates as the
# float32 the hot table then held, energy at 1 mJ. Its inputs:
V1_START = 1_790_002_800_000
V1_BLOB = base64.b64decode(
    "AQF42mtQrT6ygJGBgZUBCbAoiOjM8wvw+QRk5yBLMDDyMTDwMio8YoFwmaJkFVz8/BhSYNIngIBRAW6OnjZj"
    "bS0DExNYTuC1ICNE+EWpu8WqTcJcXCDeir//wYDJRISDm4OBh5fhElQ70xWGg1t5GRh5mSAmQDRbvVp1NvTC"
    "Y85EtVmm85g4VUDWNdiDpWBqHBiBFu2dsz4ILFrJICFuyfDkSTxDY+NShkWSCLM4OL79/c/w/x8Dw///2LGp"
    "zJ37IPUc614w/Gdh3g8U4j/OwNDvx8CQmM7AkJvLwHDwIAODtDQA7xpJcw==")
V1_VALUES = {
    "util_pct": [12.5, 99.99, None, 0.0, 100.0],
    "mem_util_pct": [1.0, 2.0, 3.0, 4.0, 5.0],
    "mem_used_mib": [0, 81559, None, 1, 0],
    "power_w": [70.123, 699.999, 350.5, None, 0.0],
    "temp_c": [-60.0, 45.0, 46.0, 200.0, 33.0],
    "sm_clock_mhz": [210.0, 1980.0, 1980.0, 1755.0, 0.0],
    "pcie_tx_bytes_per_s": [0.0, 2963971415.608826, 13158336115.727716, 1e13, 123.5],
    "pcie_rx_bytes_per_s": [1.0, 2.0, None, 4.0, 5.0],
    "nvlink_tx_bytes_per_s": [377124442197.86865, 0.0, 0.0, 51793410325.00509, 1024.0],
    "throttle_reasons": [0, 4, 2**63 - 1, 0x80, 0],
    "energy_j": [12345678.901, 12345679.5, 12345680.0, 1e15, 0.0],
}


def test_a_version_1_chunk_still_reads():
    assert V1_BLOB[0] == 1 and codec.VERSION == 2
    block = codec.unpack(V1_BLOB)
    assert block.start == V1_START
    assert (block.ts - V1_START).tolist() == [0, 10_000, 20_250, 30_000, 3_599_999]
    assert block.job.tolist() == [0, 7, 7, 7, 0]
    for m in GPU_METRIC_NAMES:
        want = V1_VALUES.get(m, [None] * 5)
        assert block.nulls[m].tolist() == [w is None for w in want], m
        got = [None if null else v for v, null in zip(block.values[m].tolist(),
                                                      block.nulls[m].tolist(), strict=True)]
        if m in RATES:  # version 1 kept the float32
            want = [None if w is None else float(np.float32(w)) for w in want]
        assert got == want, m


def test_a_chunk_of_an_unknown_version_is_refused():
    blob = codec.pack(START, [START], [0], {"util_pct": [1.0]})
    with pytest.raises(ValueError, match="unknown chunk format 3/1"):
        codec.unpack(bytes([3]) + blob[1:])
