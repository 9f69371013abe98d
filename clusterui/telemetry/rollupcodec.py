"""The packed 1- and 5-minute GPU rollups: one GPU's buckets of one clock hour as one blob.

Issue 17 measured the 1-minute rollup as one row per (GPU, minute, job) at about 310 B
(51.7 B per raw sample at 10 s sampling), more than the raw packed tier itself. Packed per
(GPU, hour) like the raw chunks (``codec.py``), the same aggregates cost a few bytes per
raw sample: ``benchmarks/storage.py`` prints the figures.

A blob holds, per (bucket, job) of the hour (a job change inside a bucket splits it, as
the row tables did): ``n`` samples, and for every gauge of ``ROLLUP_GAUGES`` the count of
samples that reported it ``k``, their **sum**, and the max and min of the gauges whose
bands the pages draw (``metrics.ROLLUP_EXTREMES``; the max alone of ``ROLLUP_PEAKS``); the
OR of the clock-event bit masks; the energy counter's min, max and last. A sum, not a mean:
each value is first made an integer exactly as the raw chunk keeps it (``codec.PRECISION``:
0.01 %, 1 mW, the byte rates' float64 as q / 10**d), so the sum of a bucket is exact and
the mean a reader derives (sum / k) is the mean of the very values the raw tier gives
back, not a float4 of it.

Layout (little-endian)::

    byte 0  format version (1), byte 1  compressor (1 = zlib), then the deflated body:
        int64   start (ms, the hour or day), uint32 width (s), uint32 rows, uint16 sections
        per section (``STATS`` order: throttle_reasons, energy_j, the gauges):
            uint8  flags: 2 = no row has one (its aggregates are left out); 4, 8 = its
                   max, its min left out (a gauge no page or rollup reads them of: ``KEPT``)
            uint8  d, as in ``codec`` for an exact metric (255: float64 bit patterns), else 0
        the columns, as integers: bucket index, job (0 = none), n; then per section k (the
        samples that reported it) and, unless flagged, its aggregates: sum, max, min (a
        gauge), the OR (throttle reasons), min, max, last (energy); a row with k = 0
        repeats the previous value. Stored as: every column's first value (int64), then
        every column's zigzag deltas as 8 byte planes (byte 0 of every delta, byte 1, ...):
        the planes of small deltas are zeros, which deflate to almost nothing.

Hand-written like ``codec.py``, for the same reason (docs/scaling.md): numpy columns in,
one deflated blob out; no library packs per-column integers with these exactness rules.
One numpy pass over all columns of a blob: column by column it was 7 times slower.
"""

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from clusterui.telemetry import codec
from clusterui.telemetry.metrics import ROLLUP_EXTREMES, ROLLUP_GAUGES, ROLLUP_PEAKS

VERSION = 1
# zlib level 6, not the raw codec's 9: on a simulated node's blobs (24 GPU-hours, the three
# widths) 9 took 4.3 ms per GPU-hour for 0.8 % fewer bytes than 6 took in 0.3 ms.
ZLIB_LEVEL = 6
# (metric, the aggregates kept of the samples that reported it)
# (metric, the aggregates kept of the samples that reported it), in blob order. A gauge
# added to ``metrics.GPU_METRICS`` (at the end) comes last: a blob written before it holds
# fewer sections, and reads back with that gauge unreported (k = 0).
STATS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("throttle_reasons", ("or",)),
    ("energy_j", ("min", "max", "last")),
    *((m, ("sum", "max", "min")) for m in ROLLUP_GAUGES),
)
# What a blob written now holds of each metric: of a gauge, its sum, and its max and min
# only where ``ROLLUP_EXTREMES`` (the pages' bands) or ``ROLLUP_PEAKS`` (max alone) read them.
# A section's flags say which it left out (4: the max, 8: the min); a blob written before
# this holds all three and reads so.
KEPT: dict[str, tuple[str, ...]] = {
    m: (aggs if m not in ROLLUP_GAUGES or m in ROLLUP_EXTREMES
        else ("sum", "max") if m in ROLLUP_PEAKS else ("sum",))
    for m, aggs in STATS}
_LEFT_OUT = {"max": 4, "min": 8}
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
    return pack_hours(block, (width,))[width]


def pack_hours(block: codec.Block, widths, *, flat=()) -> dict[int, bytes]:
    """The rollup blobs of one GPU-hour of samples for each bucket width, the values
    quantised once for all; a width in ``flat`` is not split by job (job 0)."""
    if not len(block):
        raise ValueError("a rollup holds at least one sample")
    quant = {}
    for name, _ in STATS:
        null = block.nulls[name]
        if null.all():
            continue
        v = block.values[name]
        kind, scale = codec.PRECISION[name]
        d = 0
        if kind == "exact":
            d = codec._decimals(np.ascontiguousarray(v[~null], np.float64))
        if kind == "exact" and d == codec.FLOAT_BITS:
            # float64 bit patterns: aggregate the floats, keep their bits
            quant[name] = (null, np.where(null, np.nan, v.astype(np.float64)), d)
        else:
            q = np.zeros(len(v), np.int64)
            q[~null] = codec._quantise(kind, scale, v[~null], d)
            quant[name] = (null, q, d)
    out = {}
    for width in widths:
        index = (block.ts - block.start) // (width * 1000)
        job = np.zeros(len(block), np.int64) if width in flat else block.job
        order = np.lexsort((job, index))
        index, job = index[order], job[order]
        change = np.ones(len(order), bool)
        change[1:] = (index[1:] != index[:-1]) | (job[1:] != job[:-1])
        starts = np.flatnonzero(change)
        n = np.diff(np.append(starts, len(order)))
        last_pos = np.arange(len(order))
        metrics = {}
        for name, _aggs in STATS:
            if name not in quant:
                metrics[name] = (np.zeros(len(starts), np.int64), 0, {})
                continue
            null, values, d = quant[name]
            null, values = null[order], values[order]
            k = np.add.reduceat((~null).astype(np.int64), starts)
            cols = {agg: _reduce(agg, values, null, starts, last_pos) for agg in KEPT[name]}
            if values.dtype.kind == "f":
                cols = {agg: c.view(np.int64) for agg, c in cols.items()}
            metrics[name] = (k, d, cols)
        out[width] = _encode(block.start, width, index[starts], job[starts], n, metrics)
    return out


def pack_rows(start: int, width: int, bucket, job, n, k: dict, stats: dict) -> bytes:
    """A blob from aggregates already computed, in the metrics' units (``stats[m][agg]``,
    float64 or int64 arrays; rows where ``k[m]`` is 0 are ignored): migration 0009 packs the
    row tables' rollups with it. Each aggregate is quantised as the raw tier quantises the
    metric; an exact metric's aggregates take the fewest decimals that keep them all."""
    bucket = np.asarray(bucket, np.int64)
    metrics = {}
    for name, _ in STATS:
        aggs = KEPT[name]
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
    """Every column as one int64 matrix, encoded in a few numpy operations (a blob is about
    60 columns: one ``codec._put_ints`` call per column made compaction 7 times slower)."""
    descr = bytearray()
    cols = [index, job, n]
    for name, aggs in STATS:
        k, d, values = metrics[name]
        cols.append(k)
        if not values:
            descr += bytes((2, d))
        else:
            descr += bytes((sum(_LEFT_OUT.get(a, 0) for a in aggs if a not in values), d))
            aggs = tuple(a for a in aggs if a in values)
            # Rows where no sample reported it repeat the previous value: a zero delta.
            has = k > 0
            pos = np.arange(len(k))
            fill = np.maximum.accumulate(np.where(has, pos, int(np.argmax(has))))
            cols += [values[agg][fill] for agg in aggs]
    matrix = np.stack([np.asarray(c, np.int64) for c in cols])
    with np.errstate(over="ignore"):
        z = codec._zigzag(np.diff(matrix, axis=1))  # int64 arithmetic wraps: invertible
    planes = z.view(np.uint8).reshape(len(cols), -1, 8).transpose(0, 2, 1)
    body = b"".join((struct.pack("<qIIH", int(start), width, len(index), len(STATS)),
                     bytes(descr), matrix[:, 0].astype("<i8").tobytes(), planes.tobytes()))
    return struct.pack("<BB", VERSION, codec.ZLIB) + zlib.compress(body, ZLIB_LEVEL)


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
    descr = bytes(buf[pos:pos + 2 * sections])
    pos += 2 * sections
    reported = [descr[2 * i] & 2 == 0 for i in range(sections)]
    held = [tuple(a for a in aggs if not descr[2 * i] & _LEFT_OUT.get(a, 0))
            for i, (_, aggs) in enumerate(STATS[:sections])]
    ncols = 3 + sum(1 + (len(held[i]) if reported[i] else 0) for i in range(sections))
    first = np.frombuffer(buf[pos:pos + 8 * ncols], "<i8").astype(np.int64)
    pos += 8 * ncols
    planes = np.frombuffer(buf[pos:pos + 8 * ncols * (rows - 1)], np.uint8)
    z = np.ascontiguousarray(planes.reshape(ncols, 8, rows - 1).transpose(0, 2, 1))
    matrix = np.empty((ncols, rows), np.int64)
    matrix[:, 0] = first
    with np.errstate(over="ignore"):
        matrix[:, 1:] = codec._unzigzag(z.view(np.uint64).reshape(ncols, rows - 1))
        np.cumsum(matrix, axis=1, out=matrix)
    index, job, n = matrix[0], matrix[1], matrix[2]
    out = RollupBlock(start=start, width=width, bucket=start + index * width * 1000, job=job,
                      n=n)
    col = 3
    for section, (name, _aggs) in enumerate(STATS):
        integer = name in codec.INTEGER_METRICS
        if section >= sections:  # a metric added after this blob was written
            out.k[name] = np.zeros(rows, np.int64)
            out.stats[name] = {agg: np.zeros(rows, np.int64) if integer else np.full(rows, np.nan)
                               for agg in KEPT[name]}
            continue
        k = matrix[col]
        col += 1
        out.k[name] = k
        if not reported[section]:
            out.stats[name] = {agg: np.zeros(rows, np.int64) if integer else np.full(rows, np.nan)
                               for agg in KEPT[name]}
            continue
        kind, scale = codec.PRECISION[name]
        d = descr[2 * section + 1]
        none = k == 0
        out.stats[name] = {}
        for agg in held[section]:
            values = codec._restore(kind, scale, matrix[col], d)
            col += 1
            if integer:
                values = np.where(none, 0, values)
            else:
                values = np.where(none, np.nan, values)
            out.stats[name][agg] = values
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
        stats={m: {a: np.concatenate([p.stats[m][a] for p in parts])[order] for a in aggs
                   if all(a in p.stats[m] for p in parts)}
               for m, aggs in first.stats.items()})
