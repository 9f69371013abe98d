"""The packed tier's codec: one GPU's samples of one clock hour as one compressed blob.

Layout of a blob (little-endian)::

    byte 0        format version (1)
    byte 1        compressor (1 = zlib)
    bytes 2..     the compressed body:
        int64     start, ms since the Unix epoch (the chunk's hour)
        uint32    n, the number of samples
        then one section per column, in ``COLUMNS`` order (ts, job, the 15 GPU metrics):
            uint8   flags: 1 = some values are null (a bit mask follows), 2 = all null
            [ceil(n/8) bytes: the null mask, np.packbits order]   if flags & 1
            int64   the first non-null value, quantised                unless all null
            uint8   width w of the rest: 0, 1, 2, 4 or 8 bytes
            (k-1)*w bytes: the rest as zigzag(delta), byte-shuffled (every value's first
                    byte, then every value's second byte, ...)

Timestamps are ms offsets from ``start``; ``job`` is the job's id (0 = no job). Each metric is
quantised to an integer at the precision in ``PRECISION`` (nothing NVML reports is finer),
then delta-encoded (neighbouring samples are close) and zigzagged (small negative deltas stay
small), and the whole body is deflated. Byte rates are not scaled: they are kept as the exact
float32 the hot tier stores (its bit pattern is the integer), so packing them loses nothing.

``pack``/``unpack`` are the whole API: numpy arrays in, bytes out, and back.
"""

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from clusterui.telemetry.metrics import GPU_METRIC_NAMES

VERSION = 1
ZLIB = 1
ZLIB_LEVEL = 9

# How each metric becomes an integer: ("scale", s) stores round(v * s); "f32" stores the
# float32's bit pattern (exact); "int" stores the integer as it is.
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
    "pcie_tx_bytes_per_s": ("f32", 1),  # the hot tier's float32, bit for bit
    "pcie_rx_bytes_per_s": ("f32", 1),
    "nvlink_tx_bytes_per_s": ("f32", 1),
    "nvlink_rx_bytes_per_s": ("f32", 1),
    "throttle_reasons": ("int", 1),  # the bit mask, exact
    "energy_j": ("scale", 1000),  # 1 mJ (NVML reports mJ)
}
assert tuple(PRECISION) == GPU_METRIC_NAMES
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
        elif kind == "f32":
            out[name] = "float32 as stored in the hot tier (exact)"
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


def _quantise(name: str, v: np.ndarray) -> np.ndarray:
    kind, scale = PRECISION[name]
    if kind == "scale":
        return np.rint(np.asarray(v, np.float64) * scale).astype(np.int64)
    if kind == "f32":
        return np.asarray(v, np.float32).view(np.int32).astype(np.int64)
    return np.asarray(v).astype(np.int64)


def _restore(name: str, q: np.ndarray) -> np.ndarray:
    kind, scale = PRECISION[name]
    if kind == "scale":
        return q / scale
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
        _put_ints(out, _quantise(name, v))
    body = b"".join(out)
    return struct.pack("<BB", VERSION, ZLIB) + zlib.compress(body, ZLIB_LEVEL)


def unpack(blob: bytes) -> Block:
    version, compressor = struct.unpack_from("<BB", blob)
    if version != VERSION or compressor != ZLIB:
        raise ValueError(f"unknown chunk format {version}/{compressor}")
    buf = memoryview(zlib.decompress(memoryview(blob)[2:]))
    start, n = struct.unpack_from("<qI", buf)
    pos = 12
    cols: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    for name in COLUMNS:
        flags, pos = buf[pos], pos + 1
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
            q, pos = _get_ints(buf, pos, n - int(mask.sum()))
        masks[name] = mask
        if name in ("ts", "job"):
            cols[name] = q
            continue
        restored = _restore(name, q)
        if name in INTEGER_METRICS:
            full = np.zeros(n, np.int64)
        else:
            full = np.full(n, np.nan)
        full[~mask] = restored
        cols[name] = full
    return Block(start=start, ts=cols.pop("ts") + start, job=cols.pop("job"),
                 values=cols, nulls={m: masks[m] for m in GPU_METRIC_NAMES})
