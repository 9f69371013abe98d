"""The packed tier's codec: every value comes back within its stated precision, nulls as nulls."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterui.telemetry import codec
from clusterui.telemetry.metrics import GPU_METRICS

START = 1_790_002_800_000  # an hour boundary, ms
BOUNDS = {m.name: (m.lo, m.hi) for m in GPU_METRICS}


def tolerance(name: str, v: np.ndarray) -> np.ndarray:
    kind, scale = codec.PRECISION[name]
    if kind == "scale":
        # Half the step, plus float64's own rounding at large magnitudes (energy in mJ).
        return 0.5 / scale + np.abs(v) * 1e-15
    return np.zeros(len(v))


def expected(name: str, v):
    kind, _ = codec.PRECISION[name]
    if kind == "f32":
        return np.asarray(v, np.float32).astype(np.float64)  # what the hot tier holds
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
    assert block.values["pcie_tx_bytes_per_s"][1] == np.float32(1e13)
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
