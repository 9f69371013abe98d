"""The packed rollups' codec: a blob reads back as the aggregates of its samples."""

import numpy as np
import pytest

from clusterui.telemetry import codec, rollupcodec
from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    ROLLUP_EXTREMES,
    ROLLUP_GAUGES,
    ROLLUP_PEAKS,
)

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


def by_bucket(block: codec.Block, width: int) -> dict:
    """The reference, one bucket and job at a time: (bucket ms, job) -> the indexes of its
    samples."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (t, j) in enumerate(zip(block.ts.tolist(), block.job.tolist(), strict=True)):
        groups.setdefault((t - t % (width * 1000), j), []).append(i)
    return dict(sorted(groups.items()))


@pytest.mark.parametrize("width", [60, 300, 3600])
def test_a_blob_holds_each_buckets_count_sum_max_and_min(width):
    block = samples()
    got = rollupcodec.unpack(rollupcodec.pack_hour(block, width))
    groups = by_bucket(block, width)
    assert got.width == width
    assert list(zip(got.bucket.tolist(), got.job.tolist(), strict=True)) == list(groups)
    assert got.n.tolist() == [len(i) for i in groups.values()]
    for row, idx in enumerate(groups.values()):
        for m in ROLLUP_GAUGES:
            v = block.values[m][idx][~block.nulls[m][idx]]
            assert got.k[m][row] == len(v), m
            if not len(v):
                continue
            # Exact sums of the collector's values: the mean to float64's rounding.
            assert got.stats[m]["sum"][row] / len(v) == pytest.approx(np.mean(v), rel=1e-12)
            if m in ROLLUP_EXTREMES:  # the bands the pages draw
                assert (got.stats[m]["max"][row], got.stats[m]["min"][row]) == (
                    v.max(), v.min()), m
            elif m in ROLLUP_PEAKS:  # a job's peak memory
                assert got.stats[m]["max"][row] == v.max(), m
        e = block.values["energy_j"][idx]
        assert [got.stats["energy_j"][a][row] for a in ("min", "max", "last")] == [
            e.min(), e.max(), e[-1]]
        assert got.stats["throttle_reasons"]["or"][row] == np.bitwise_or.reduce(
            block.values["throttle_reasons"][idx])
    assert got.k["tensor_active_pct"].sum() == 0


def test_rows_packed_again_read_back_the_same():
    r = rollupcodec.unpack(rollupcodec.pack_hour(samples(2), 60))
    again = rollupcodec.unpack(rollupcodec.pack_rows(START, 60, r.bucket, r.job, r.n, r.k,
                                                     r.stats))
    for m, aggs in rollupcodec.KEPT.items():
        assert np.array_equal(again.k[m], r.k[m]), m
        for agg in aggs:
            has = r.k[m] > 0
            assert np.array_equal(again.stats[m][agg][has], r.stats[m][agg][has]), (m, agg)


def test_a_gauge_added_later_reads_as_unreported_from_older_blobs(monkeypatch):
    full = rollupcodec.STATS
    monkeypatch.setattr(rollupcodec, "STATS", full[:-1])  # as written before the last gauge
    blob = rollupcodec.pack_hour(samples(), 60)
    monkeypatch.setattr(rollupcodec, "STATS", full)
    old, now = rollupcodec.unpack(blob), rollupcodec.unpack(rollupcodec.pack_hour(samples(), 60))
    last = full[-1][0]
    assert old.k[last].sum() == 0 and np.isnan(old.stats[last]["sum"]).all()
    assert np.array_equal(old.k["util_pct"], now.k["util_pct"])
    assert np.array_equal(old.stats["util_pct"]["sum"], now.stats["util_pct"]["sum"])


def test_an_unknown_format_is_refused():
    blob = rollupcodec.pack_hour(samples(), 60)
    with pytest.raises(ValueError, match="unknown rollup format 9/1"):
        rollupcodec.unpack(b"\x09" + blob[1:])


def test_the_rollups_keep_the_extremes_the_pages_and_job_rollups_read_and_no_others():
    """Only what a reader uses is stored: the bands' min and max, the jobs' peak memory;
    the mean of every gauge (its sum) in any case."""
    from clusterui.web import gpupage, nodepage

    got = rollupcodec.unpack(rollupcodec.pack_hour(samples(), 60))
    for m in ROLLUP_GAUGES:
        assert "sum" in got.stats[m], m
    assert set(gpupage.BANDED) | set(nodepage.BANDED) <= set(ROLLUP_EXTREMES)
    assert {"sm_active_pct", "util_pct"} <= set(ROLLUP_EXTREMES)  # jobpage.activity_band
    assert set(got.stats["mem_used_mib"]) == {"sum", "max"}
    assert set(got.stats["temp_c"]) == {"sum"}


def test_a_blob_written_with_every_extreme_still_reads_whole(monkeypatch):
    """Blobs packed before the rollups kept fewer extremes hold all three aggregates of
    every gauge: they read back with all of them, and merge with newer ones on what both
    hold."""
    every = dict(rollupcodec.STATS)
    monkeypatch.setattr(rollupcodec, "KEPT", every)
    blob = rollupcodec.pack_hour(samples(), 60)
    monkeypatch.undo()
    old = rollupcodec.unpack(blob)
    new = rollupcodec.unpack(rollupcodec.pack_hour(samples(), 60))
    assert set(old.stats["temp_c"]) == {"sum", "max", "min"}
    assert np.array_equal(old.stats["temp_c"]["sum"], new.stats["temp_c"]["sum"],
                          equal_nan=True)
    both = rollupcodec.concat([old, new])
    assert set(both.stats["temp_c"]) == {"sum"}
    assert set(both.stats["util_pct"]) == {"sum", "max", "min"}
