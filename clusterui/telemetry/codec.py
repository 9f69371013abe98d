"""The packed tier's codec: one GPU's samples of one clock hour as one compressed blob.

Layout of a blob (little-endian)::

    byte 0        format version (2; version 1 blobs are still read, see below)
    byte 1        compressor (1 = zlib)
    bytes 2..     the compressed body:
        int64     start, ms since the Unix epoch (the chunk's hour)
        uint32    n, the number of samples
        then one section per column, in ``COLUMNS`` order (ts, job, the 15 GPU metrics):
            uint8   flags: 1 = some values are null (a bit mask follows), 2 = all null
            [ceil(n/8) bytes: the null mask, np.packbits order]   if flags & 1
            [uint8  d: how an "exact" metric's values became integers] unless all null
            int64   the first non-null value, quantised                unless all null
            uint8   width w of the rest: 0, 1, 2, 4 or 8 bytes
            (k-1)*w bytes: the rest as zigzag(delta), byte-shuffled (every value's first
                    byte, then every value's second byte, ...)

Timestamps are ms offsets from ``start``; ``job`` is the job's id (0 = no job). Each metric
becomes an integer as ``PRECISION`` says, then is delta-encoded (neighbouring samples are
close) and zigzagged (small negative deltas stay small), and the whole body is deflated:

- "scale": round(v * s), a fixed step (0.01 %, 1 mW, ...) that divides the collector's own
  resolution, so rounding gives the collector's value back;
- "int": the integer as it is (memory in MiB, the clock-event bit mask);
- "exact" (byte rates, the energy counter): the float64 itself, bit for bit, however it was
  computed. Per chunk and metric, ``d`` is the fewest decimals 0..``MAX_DECIMALS`` with which
  every value is exactly ``q / 10**d`` for integers q (whole B/s, mJ / 1000: compact
  deltas), or ``FLOAT_BITS`` (255): the float64 bit patterns as int64 (a rate the collector
  divided by a measured interval has 52 significant bits; nothing smaller is exact).

Version 1 (until migration 0008) kept byte rates as the float32 the hot tier then stored
(its bit pattern as the integer) and the energy counter at 1 mJ ("scale" 1000), with no
``d`` byte; ``unpack`` reads both.

``pack``/``unpack`` are the whole API: numpy arrays in, bytes out, and back.
"""

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from clusterui.telemetry.metrics import GPU_METRIC_NAMES

VERSION = 2
ZLIB = 1
ZLIB_LEVEL = 9

# How each metric becomes an integer: ("scale", s) stores round(v * s); "int" stores the
# integer as it is; "exact" stores the float64 exactly (q / 10**d, or its bit pattern).
PRECISION: dict[str, tuple[str, float]] = {
    "util_pct": ("scale", 100),  # 0.01 %
    "mem_util_pct": ("scale", 100),
    "mem_used_mib": ("int", 1),  # 1 MiB, exact
    "power_w": ("scale", 1000),  # 1 mW (NVML reports mW)
    "temp_c": ("scale", 10),  # 0.1 °C (NVML reports whole °C)
    "sm_clock_mhz": ("scale", 1),  # 1 MHz (NVML reports whole MHz)
    "sm_active_pct": ("scale", 100),
    "tensor_active_pct": ("scale", 100),
    "dram_active_pct": ("scale", 100),
    "pcie_tx_bytes_per_s": ("exact", 1),  # the float64 B/s, bit for bit
    "pcie_rx_bytes_per_s": ("exact", 1),
    "nvlink_tx_bytes_per_s": ("exact", 1),
    "nvlink_rx_bytes_per_s": ("exact", 1),
    "throttle_reasons": ("int", 1),  # the bit mask, exact
    "energy_j": ("exact", 1),  # a counter: exact (NVML's mJ / 1000 packs as d = 3)
}
assert tuple(PRECISION) == GPU_METRIC_NAMES
# Version 1: byte rates as float32 bit patterns ("f32"), energy at 1 mJ.
PRECISION_V1 = {**PRECISION, **{m: ("f32", 1) for m in GPU_METRIC_NAMES
                                if m.endswith("_bytes_per_s")}, "energy_j": ("scale", 1000)}
MAX_DECIMALS = 6
FLOAT_BITS = 255
INTEGER_METRICS = frozenset(m for m, (kind, _) in PRECISION.items() if kind == "int")
COLUMNS = ("ts", "job", *GPU_METRIC_NAMES)


def describe_precision() -> dict[str, str]:
    """Each metric's stored precision, in words (the benchmark and the docs print it)."""
    units = {"util_pct": "%", "mem_util_pct": "%", "sm_active_pct": "%",
             "tensor_active_pct": "%", "dram_active_pct": "%", "power_w": "W",
             "temp_c": "°C", "sm_clock_mhz": "MHz", "energy_j": "J"}
    out = {}
    for name, (kind, scale) in PRECISION.items():
        if kind == "scale":
            out[name] = f"{1 / scale:g} {units[name]}"
        elif kind == "exact":
            out[name] = "exact (the float64 as ingested)"
        else:
            out[name] = "exact integer"
    return out


@dataclass
class Block:
    """One GPU's samples of one hour, decoded: parallel arrays sorted by time.

    ``ts`` is int64 ms since the epoch; ``job`` int64 (0 = no job); ``values[m]`` is float64
    with NaN where null, except the integer metrics (``INTEGER_METRICS``), which are int64;
    ``nulls[m]`` is the null mask of every metric (True = null).
    """

    start: int
    ts: np.ndarray
    job: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)
    nulls: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ts)


def _zigzag(x: np.ndarray) -> np.ndarray:
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return ((z >> np.uint64(1)).view(np.int64)) ^ -((z & np.uint64(1)).view(np.int64))


def _width(top: int) -> int:
    for w in (0, 1, 2, 4):
        if top < (1 << (8 * w)):
            return w
    return 8


def _put_ints(out: list[bytes], q: np.ndarray) -> None:
    """The first value, then zigzag deltas at the narrowest width, byte-shuffled."""
    out.append(struct.pack("<q", int(q[0])))
    with np.errstate(over="ignore"):
        z = _zigzag(np.diff(q))  # int64 arithmetic wraps: still exactly invertible
    w = _width(int(z.max())) if len(z) else 0
    out.append(struct.pack("<B", w))
    if w:
        out.append(z.astype(f"<u{w}").view(np.uint8).reshape(-1, w).T.tobytes())


def _get_ints(buf: memoryview, pos: int, k: int) -> tuple[np.ndarray, int]:
    (first,), pos = struct.unpack_from("<q", buf, pos), pos + 8
    w, pos = buf[pos], pos + 1
    if w:
        size = (k - 1) * w
        raw = np.frombuffer(buf[pos:pos + size], np.uint8).reshape(w, k - 1).T
        z = np.ascontiguousarray(raw).view(f"<u{w}").ravel().astype(np.uint64)
        pos += size
    else:
        z = np.zeros(k - 1, np.uint64)
    q = np.empty(k, np.int64)
    q[0] = first
    with np.errstate(over="ignore"):
        q[1:] = _unzigzag(z)
        np.cumsum(q, out=q)
    return q, pos


def _decimals(v: np.ndarray) -> int:
    """The fewest decimals d with every value exactly ``q / 10**d`` (integer q, |q| < 2**53),
    else ``FLOAT_BITS``; -0.0 (not q / 10**d for any q) takes the bit patterns."""
    bits = v.view(np.int64)
    for d in range(MAX_DECIMALS + 1):
        s = 10.0**d
        q = np.rint(v * s)
        if not (np.abs(q) < 2.0**53).all():
            break
        if np.array_equal((q.astype(np.int64) / s).view(np.int64), bits):
            return d
    return FLOAT_BITS


def _quantise(kind: str, scale: float, v: np.ndarray, d: int = 0) -> np.ndarray:
    if kind == "scale":
        return np.rint(np.asarray(v, np.float64) * scale).astype(np.int64)
    if kind == "exact":
        if d == FLOAT_BITS:
            return v.view(np.int64).copy()
        return np.rint(v * 10.0**d).astype(np.int64)
    if kind == "f32":
        return np.asarray(v, np.float32).view(np.int32).astype(np.int64)
    return np.asarray(v).astype(np.int64)


def _restore(kind: str, scale: float, q: np.ndarray, d: int = 0) -> np.ndarray:
    if kind == "scale":
        return q / scale
    if kind == "exact":
        return q.view(np.float64) if d == FLOAT_BITS else q / 10.0**d
    if kind == "f32":
        return q.astype(np.int32).view(np.float32).astype(np.float64)
    return q


def _null_mask(name: str, v: np.ndarray, nulls) -> np.ndarray:
    mask = nulls.get(name) if nulls else None
    if mask is None:
        mask = np.zeros(len(v), bool)
    mask = np.asarray(mask, bool)
    if np.asarray(v).dtype.kind == "f":
        mask = mask | np.isnan(v)
    return mask


def pack(start_ms: int, ts_ms, job, values: dict, nulls: dict | None = None) -> bytes:
    """One chunk's blob.

    ``ts_ms``: int64 ms since the epoch, ascending, within the hour from ``start_ms``;
    ``job``: int job ids, 0 for none; ``values``: every GPU metric (a missing one is all
    null), float arrays with NaN for null or integer arrays with their mask in ``nulls``.
    """
    ts = np.asarray(ts_ms, np.int64)
    n = len(ts)
    if n == 0:
        raise ValueError("a chunk holds at least one sample")
    out = [struct.pack("<qI", int(start_ms), n)]
    out.append(b"\0")
    _put_ints(out, ts - start_ms)
    out.append(b"\0")
    _put_ints(out, np.asarray(job, np.int64))
    for name in GPU_METRIC_NAMES:
        v = values.get(name)
        if v is None:
            out.append(b"\2")
            continue
        v = np.asarray(v)
        if len(v) != n:
            raise ValueError(f"{name}: {len(v)} values for {n} samples")
        mask = _null_mask(name, v, nulls)
        if mask.all():
            out.append(b"\2")
            continue
        if mask.any():
            out.append(b"\1")
            out.append(np.packbits(mask).tobytes())
            v = v[~mask]
        else:
            out.append(b"\0")
        kind, scale = PRECISION[name]
        d = 0
        if kind == "exact":
            v = np.ascontiguousarray(v, np.float64)
            d = _decimals(v)
            out.append(struct.pack("<B", d))
        _put_ints(out, _quantise(kind, scale, v, d))
    body = b"".join(out)
    return struct.pack("<BB", VERSION, ZLIB) + zlib.compress(body, ZLIB_LEVEL)


def unpack(blob: bytes) -> Block:
    version, compressor = struct.unpack_from("<BB", blob)
    if version not in (1, VERSION) or compressor != ZLIB:
        raise ValueError(f"unknown chunk format {version}/{compressor}")
    precision = PRECISION if version == VERSION else PRECISION_V1
    buf = memoryview(zlib.decompress(memoryview(blob)[2:]))
    start, n = struct.unpack_from("<qI", buf)
    pos = 12
    cols: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    for name in COLUMNS:
        kind, scale = precision.get(name, ("int", 1))
        flags, pos = buf[pos], pos + 1
        d = 0
        if flags & 2:
            mask = np.ones(n, bool)
            q = np.zeros(0, np.int64)
        else:
            if flags & 1:
                size = (n + 7) // 8
                mask = np.unpackbits(np.frombuffer(buf[pos:pos + size], np.uint8),
                                     count=n).astype(bool)
                pos += size
            else:
                mask = np.zeros(n, bool)
            if kind == "exact":
                d, pos = buf[pos], pos + 1
            q, pos = _get_ints(buf, pos, n - int(mask.sum()))
        masks[name] = mask
        if name in ("ts", "job"):
            cols[name] = q
            continue
        restored = _restore(kind, scale, q, d)
        if name in INTEGER_METRICS:
            full = np.zeros(n, np.int64)
        else:
            full = np.full(n, np.nan)
        full[~mask] = restored
        cols[name] = full
    return Block(start=start, ts=cols.pop("ts") + start, job=cols.pop("job"),
                 values=cols, nulls={m: masks[m] for m in GPU_METRIC_NAMES})
