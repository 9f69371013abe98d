"""The packed rollups' codec: a blob reads back as the aggregates of its samples."""

import struct
import zlib

import numpy as np
import pytest

from clusterui.telemetry import codec, packed, rollupcodec
from clusterui.telemetry.metrics import GPU_METRIC_NAMES, ROLLUP_GAUGES

START = 1_763_798_400_000  # an hour, in ms


def samples(seed: int = 1) -> codec.Block:
    """An hour at 10 s at the collector's resolution (``docs/collector.md``): a job from the
    17th minute on (so minute 16 has two rows), SM activity missing from one sample in ten,
    tensor activity from all, busy byte rates as fractional float64s."""
    rng = np.random.default_rng(seed)
    n = 360
    values, nulls = {}, {}
    for m in GPU_METRIC_NAMES:
        if m in codec.INTEGER_METRICS:
            v = rng.integers(0, 80_000, n)
        elif m.endswith("_bytes_per_s"):
            v = rng.random(n) * 1e10 / 3
        elif m == "energy_j":
            v = np.cumsum(rng.integers(0, 7_000_000, n)) / 1000
        elif m == "sm_clock_mhz":
            v = rng.integers(1000, 1980, n).astype(float)
        elif m == "temp_c":
            v = rng.integers(30, 80, n).astype(float)
        else:
            v = np.round(rng.random(n) * 100, 2)
        null = np.zeros(n, bool)
        if m == "sm_active_pct":
            null = rng.random(n) < 0.1
        if m == "tensor_active_pct":
            null[:] = True
        values[m] = v if m in codec.INTEGER_METRICS else np.where(null, np.nan, v)
        nulls[m] = null
    ts = START + np.arange(n, dtype=np.int64) * 10_000 + 4_000
    job = np.where(np.arange(n) < 100, 0, 7)
    return codec.Block(start=START, ts=ts, job=job, values=values, nulls=nulls)


@pytest.mark.parametrize("width", [60, 300])
def test_a_blob_holds_each_buckets_count_sum_max_and_min(width):
    block = samples()
    got = rollupcodec.unpack(rollupcodec.pack_hour(block, width))
    want = packed.gpu_rollup([(1, block)], width, by_job=True)  # the rows of before
    assert (got.width, len(got)) == (width, len(want.n))
    assert np.array_equal(got.bucket, want.bucket) and np.array_equal(got.job, want.job)
    assert np.array_equal(got.n, want.n)
    for m in ROLLUP_GAUGES:
        avg, empty = want.cols[f"{m}_avg"]
        k = got.k[m]
        assert np.array_equal(k == 0, empty), m
        # Exact sums of the collector's values: the mean to float64's rounding.
        np.testing.assert_allclose(got.stats[m]["sum"][~empty] / k[~empty], avg[~empty],
                                   rtol=1e-12, err_msg=m)
        for agg in ("max", "min"):
            assert np.array_equal(got.stats[m][agg][~empty],
                                  want.cols[f"{m}_{agg}"][0][~empty]), (m, agg)
    for agg in ("min", "max", "last"):
        assert np.array_equal(got.stats["energy_j"][agg], want.cols[f"energy_j_{agg}"][0])
    assert np.array_equal(got.stats["throttle_reasons"]["or"],
                          want.cols["throttle_reasons_or"][0])
    assert got.k["tensor_active_pct"].sum() == 0


def test_rows_packed_again_read_back_the_same():
    r = rollupcodec.unpack(rollupcodec.pack_hour(samples(2), 60))
    again = rollupcodec.unpack(rollupcodec.pack_rows(START, 60, r.bucket, r.job, r.n, r.k,
                                                     r.stats))
    for m, aggs in rollupcodec.STATS:
        assert np.array_equal(again.k[m], r.k[m]), m
        for agg in aggs:
            has = r.k[m] > 0
            assert np.array_equal(again.stats[m][agg][has], r.stats[m][agg][has]), (m, agg)


def test_a_gauge_added_later_reads_as_unreported_from_older_blobs():
    blob = rollupcodec.pack_hour(samples(), 60)
    body = bytearray(zlib.decompress(blob[2:]))
    struct.pack_into("<H", body, 16, len(rollupcodec.STATS) - 1)  # one section fewer
    old = rollupcodec.unpack(blob[:2] + zlib.compress(bytes(body)))
    last = rollupcodec.STATS[-1][0]
    assert old.k[last].sum() == 0 and np.isnan(old.stats[last]["sum"]).all()
    assert np.array_equal(old.k["util_pct"], rollupcodec.unpack(blob).k["util_pct"])


def test_an_unknown_format_is_refused():
    blob = rollupcodec.pack_hour(samples(), 60)
    with pytest.raises(ValueError, match="unknown rollup format 9/1"):
        rollupcodec.unpack(b"\x09" + blob[1:])
