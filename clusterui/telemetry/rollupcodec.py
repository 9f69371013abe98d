"""The packed 1- and 5-minute GPU rollups: one GPU's buckets of one clock hour as one blob.

Issue 17 measured the 1-minute rollup as one row per (GPU, minute, job) at about 310 B
(51.7 B per raw sample at 10 s sampling), more than the raw packed tier itself. Packed per
(GPU, hour) like the raw chunks (``codec.py``), the same aggregates cost a few bytes per
raw sample: ``benchmarks/storage.py`` prints the figures.

A blob holds, per (bucket, job) of the hour (a job change inside a bucket splits it, as
the row tables did): ``n`` samples, and for every gauge of ``ROLLUP_GAUGES`` the count of
samples that reported it ``k``, their **sum**, max and min; the OR of the clock-event bit
masks; the energy counter's min, max and last. A sum, not a mean: each value is first made
an integer exactly as the raw chunk keeps it (``codec.PRECISION``: 0.01 %, 1 mW, the byte
rates' float64 as q / 10**d), so the sum of a bucket is exact and the mean a reader derives
(sum / k) is the mean of the very values the raw tier gives back, not a float4 of it.

Layout (little-endian)::

    byte 0  format version (1), byte 1  compressor (1 = zlib), then the deflated body:
        int64   start (ms, the hour), uint32 width (s), uint32 rows, uint16 sections
        ints    bucket index in the hour, job (0 = none), n          (``codec._put_ints``)
        ``sections`` sections in ``STATS`` order (throttle_reasons, energy_j, the gauges):
            ints   k, the samples that reported it (every row)
            uint8  flags: 2 = no row has one (nothing follows)
            uint8  d, as in ``codec`` (exact metrics only; 255: float64 bit patterns)
            ints   the aggregates of the rows with k > 0: sum, max, min (a gauge),
                   the OR (throttle reasons), min, max, last (energy)

Hand-written like ``codec.py``, for the same reason (docs/scaling.md): numpy columns in,
one deflated blob out; no library packs per-column integers with these exactness rules.
"""

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from clusterui.telemetry import codec
from clusterui.telemetry.metrics import ROLLUP_GAUGES

VERSION = 1
# (metric, the aggregates kept of the samples that reported it)
# (metric, the aggregates kept of the samples that reported it), in blob order. A gauge
# added to ``metrics.GPU_METRICS`` (at the end) comes last: a blob written before it holds
# fewer sections, and reads back with that gauge unreported (k = 0).
STATS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("throttle_reasons", ("or",)),
    ("energy_j", ("min", "max", "last")),
    *((m, ("sum", "max", "min")) for m in ROLLUP_GAUGES),
)
_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@dataclass
class RollupBlock:
    """One (GPU, hour)'s buckets, decoded: ``bucket`` (ms), ``job``, ``n`` parallel arrays;
    ``k[m]`` the samples that reported metric m; ``stats[m][agg]`` float64 (int64 for
    memory and the bit mask), NaN (0) where ``k[m]`` is 0."""

    start: int
    width: int
    bucket: np.ndarray
    job: np.ndarray
    n: np.ndarray
    k: dict[str, np.ndarray] = field(default_factory=dict)
    stats: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.bucket)


def pack_hour(block: codec.Block, width: int) -> bytes:
    """The rollup blob of ``width``-second buckets of one GPU-hour of samples (a Block)."""
    if not len(block):
        raise ValueError("a rollup holds at least one sample")
    width_ms = width * 1000
    index = (block.ts - block.start) // width_ms
    order = np.lexsort((block.job, index))
    index, job = index[order], block.job[order]
    change = np.ones(len(order), bool)
    change[1:] = (index[1:] != index[:-1]) | (job[1:] != job[:-1])
    starts = np.flatnonzero(change)
    n = np.diff(np.append(starts, len(order)))
    last_pos = np.arange(len(order))
    metrics = {}
    for name, aggs in STATS:
        null = block.nulls[name][order]
        k = np.add.reduceat((~null).astype(np.int64), starts)
        if not k.any():
            metrics[name] = (k, 0, {})
            continue
        v = block.values[name][order]
        kind, scale = codec.PRECISION[name]
        d = 0
        if kind == "exact":
            d = codec._decimals(np.ascontiguousarray(v[~null], np.float64))
        cols = {}
        for agg in aggs:
            if kind == "exact" and d == codec.FLOAT_BITS:
                # float64 bit patterns: aggregate the floats, keep their bits
                f = np.where(null, np.nan, v.astype(np.float64))
                cols[agg] = _reduce(agg, f, null, starts, last_pos).view(np.int64)
            else:
                q = np.zeros(len(v), np.int64)
                q[~null] = codec._quantise(kind, scale, v[~null], d)
                cols[agg] = _reduce(agg, q, null, starts, last_pos)
        metrics[name] = (k, d, cols)
    return _encode(block.start, width, index[starts], job[starts], n, metrics)


def pack_rows(start: int, width: int, bucket, job, n, k: dict, stats: dict) -> bytes:
    """A blob from aggregates already computed, in the metrics' units (``stats[m][agg]``,
    float64 or int64 arrays; rows where ``k[m]`` is 0 are ignored): migration 0009 packs the
    row tables' rollups with it. Each aggregate is quantised as the raw tier quantises the
    metric; an exact metric's aggregates take the fewest decimals that keep them all."""
    bucket = np.asarray(bucket, np.int64)
    metrics = {}
    for name, aggs in STATS:
        kk = np.asarray(k[name], np.int64)
        has = kk > 0
        if not has.any():
            metrics[name] = (kk, 0, {})
            continue
        kind, scale = codec.PRECISION[name]
        d = 0
        if kind == "exact":
            d = codec._decimals(np.ascontiguousarray(np.concatenate(
                [np.asarray(stats[name][a], np.float64)[has] for a in aggs])))
        cols = {}
        for agg in aggs:
            q = np.zeros(len(kk), np.int64)
            q[has] = codec._quantise(kind, scale, np.asarray(stats[name][agg])[has], d)
            cols[agg] = q
        metrics[name] = (kk, d, cols)
    return _encode(start, width, (bucket - start) // (width * 1000), np.asarray(job, np.int64),
                   np.asarray(n, np.int64), metrics)


def _encode(start, width, index, job, n, metrics) -> bytes:
    out = [struct.pack("<qIIH", int(start), width, len(index), len(STATS))]
    for col in (index, job, n):
        codec._put_ints(out, col.astype(np.int64))
    for name, aggs in STATS:
        k, d, cols = metrics[name]
        codec._put_ints(out, k)
        if not cols:
            out.append(b"\2")
            continue
        out.append(b"\0")
        if codec.PRECISION[name][0] == "exact":
            out.append(struct.pack("<B", d))
        has = k > 0
        for agg in aggs:
            codec._put_ints(out, cols[agg][has])
    body = b"".join(out)
    return struct.pack("<BB", VERSION, codec.ZLIB) + zlib.compress(body, codec.ZLIB_LEVEL)


def _reduce(agg, v, null, starts, pos):
    if agg == "sum":
        return np.add.reduceat(np.where(null, 0, v), starts)
    if agg == "or":
        return np.bitwise_or.reduceat(np.where(null, 0, v), starts)
    if agg == "last":
        at = np.maximum.reduceat(np.where(null, -1, pos), starts)
        return v[np.maximum(at, 0)]
    if v.dtype.kind == "f":
        fill = -np.inf if agg == "max" else np.inf
    else:
        fill = _I64_MIN if agg == "max" else _I64_MAX
    fn = np.maximum if agg == "max" else np.minimum
    return fn.reduceat(np.where(null, fill, v), starts)


def unpack(blob: bytes) -> RollupBlock:
    version, compressor = struct.unpack_from("<BB", blob)
    if version != VERSION or compressor != codec.ZLIB:
        raise ValueError(f"unknown rollup format {version}/{compressor}")
    buf = memoryview(zlib.decompress(memoryview(blob)[2:]))
    start, width, rows, sections = struct.unpack_from("<qIIH", buf)
    pos = 18
    index, pos = codec._get_ints(buf, pos, rows)
    job, pos = codec._get_ints(buf, pos, rows)
    n, pos = codec._get_ints(buf, pos, rows)
    out = RollupBlock(start=start, width=width, bucket=start + index * width * 1000, job=job,
                      n=n)
    for section, (name, aggs) in enumerate(STATS):
        integer = name in codec.INTEGER_METRICS
        blank = (lambda: np.zeros(rows, np.int64)) if integer else (lambda: np.full(rows, np.nan))
        out.stats[name] = {agg: blank() for agg in aggs}
        if section >= sections:  # a metric added after this blob was written
            out.k[name] = np.zeros(rows, np.int64)
            continue
        k, pos = codec._get_ints(buf, pos, rows)
        out.k[name] = k
        flags, pos = buf[pos], pos + 1
        if flags & 2:
            continue
        kind, scale = codec.PRECISION[name]
        d = 0
        if kind == "exact":
            d, pos = buf[pos], pos + 1
        has = k > 0
        for agg in aggs:
            q, pos = codec._get_ints(buf, pos, int(has.sum()))
            out.stats[name][agg][has] = codec._restore(kind, scale, q, d)
    return out


def take(r: RollupBlock, keep: np.ndarray) -> RollupBlock:
    """The rows of ``r`` where ``keep``."""
    return RollupBlock(start=r.start, width=r.width, bucket=r.bucket[keep], job=r.job[keep],
                       n=r.n[keep], k={m: v[keep] for m, v in r.k.items()},
                       stats={m: {a: v[keep] for a, v in s.items()} for m, s in r.stats.items()})


def concat(parts: list[RollupBlock]) -> RollupBlock:
    """The rows of several blocks of one width, sorted by (bucket, job)."""
    first = parts[0]
    bucket = np.concatenate([p.bucket for p in parts])
    job = np.concatenate([p.job for p in parts])
    order = np.lexsort((job, bucket))
    return RollupBlock(
        start=min(p.start for p in parts), width=first.width, bucket=bucket[order],
        job=job[order], n=np.concatenate([p.n for p in parts])[order],
        k={m: np.concatenate([p.k[m] for p in parts])[order] for m in first.k},
        stats={m: {a: np.concatenate([p.stats[m][a] for p in parts])[order] for a in aggs}
               for m, aggs in first.stats.items()})
