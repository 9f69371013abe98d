"""Binary ``COPY`` from columns: rows given as numpy columns, packed into PostgreSQL's binary
COPY format by numpy a whole column at a time, never a Python call per row.

A binary COPY row is an int16 field count, then per field an int32 length (-1 for NULL)
and that many bytes, all big-endian. Without NULLs every row has the same layout: a numpy
structured dtype, filled with one strided assignment per column. A NULL changes its row's
length, so rows are grouped by which of their fields are NULL (a flush of samples has a
handful of such patterns: a GPU without GPM lacks the same metrics in every row, an idle
GPU has no job), each group one fixed layout without those fields' bytes. COPY takes rows
in any order.

Columns are ``(name, kind, values, nulls)``: ``kind`` one of ``TYPES``; ``values`` any
array-like (NaN in a float array is NULL too); ``nulls`` a boolean mask or None.
``timestamptz_ms`` takes int64 milliseconds since the Unix epoch, ``timestamptz_us`` int64
microseconds since 2000-01-01 UTC (a binary timestamptz as it is).
"""

import struct

import numpy as np

TYPES = {"int4": ">i4", "int8": ">i8", "float4": ">f4", "float8": ">f8",
         "timestamptz_ms": ">i8", "timestamptz_us": ">i8"}
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 UTC in Unix microseconds
MAX_COLUMNS = 64  # a row's NULL pattern is one uint64


def copy_columns(cur, table: str, columns, *, rows_per_write: int = 100_000) -> int:
    """COPY these columns into ``table`` with psycopg cursor ``cur``; the number of rows."""
    _check(columns)
    n = len(columns[0][2]) if columns else 0
    if n == 0:
        return 0
    names = ", ".join(c[0] for c in columns)
    with cur.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(HEADER)
        for lo in range(0, n, rows_per_write):
            copy.write(payload(columns, lo, min(n, lo + rows_per_write)))
        copy.write(TRAILER)
    return n


def _check(columns) -> None:
    """Refuse what cannot be sent before a COPY starts (a COPY aborted half way fails the
    caller's whole transaction)."""
    if len(columns) > MAX_COLUMNS:
        raise ValueError(f"at most {MAX_COLUMNS} columns, not {len(columns)}")
    for name, kind, values, _nulls in columns:
        if kind not in TYPES:
            raise ValueError(f"column {name}: unknown kind {kind!r}")
        if len(values) != len(columns[0][2]):
            raise ValueError(f"column {name}: {len(values)} values, not {len(columns[0][2])}")


def payload(columns, lo: int = 0, hi: int | None = None) -> bytes:
    """Rows ``lo`` to ``hi`` of these columns as binary COPY tuples (no header/trailer)."""
    _check(columns)
    hi = len(columns[0][2]) if hi is None else hi
    n = hi - lo
    prepared = []
    pattern = np.zeros(n, np.uint64)
    for j, (_name, kind, values, nulls) in enumerate(columns):
        v = np.asarray(values[lo:hi])
        if kind == "timestamptz_ms":
            v = v.astype(np.int64) * 1000 - PG_EPOCH_US
        null = np.zeros(n, bool) if nulls is None else np.asarray(nulls[lo:hi], bool)
        if v.dtype.kind == "f":
            null = null | np.isnan(v)
        if null.any():
            pattern |= null.astype(np.uint64) << np.uint64(j)
        prepared.append((v, np.dtype(TYPES[kind])))
    if n and (pattern == pattern[0]).all():
        groups = [(int(pattern[0]), slice(None))]
    else:
        kinds, inverse = np.unique(pattern, return_inverse=True)
        groups = [(int(k), np.flatnonzero(inverse == g)) for g, k in enumerate(kinds)]
    parts = []
    for nulls_of, rows in groups:
        fields = [("count", ">i2")]
        for j, (_, dtype) in enumerate(prepared):
            fields.append((f"len{j}", ">i4"))
            if not nulls_of >> j & 1:
                fields.append((f"val{j}", dtype))
        out = np.empty(len(pattern[rows]), np.dtype(fields))  # packed: no alignment gaps
        out["count"] = len(prepared)
        for j, (v, dtype) in enumerate(prepared):
            if nulls_of >> j & 1:
                out[f"len{j}"] = -1
            else:
                out[f"len{j}"] = dtype.itemsize
                out[f"val{j}"] = v[rows]
        parts.append(out.tobytes())
    return b"".join(parts)
