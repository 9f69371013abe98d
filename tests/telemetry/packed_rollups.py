"""The packed 1- and 5-minute GPU rollups read back as the rows the row tables held
(``telemetry_gpurollup1m``/``5m`` until migration 0009), for tests that check a rollup's
values: per (GPU, bucket, job) ``n``, ``<m>_avg``/``_n``, ``_max``/``_min`` where kept,
``throttle_reasons_or`` and ``energy_j_min``/``_max``/``_last``."""

import datetime as dt

from django.db import connection

from clusterui.telemetry import rollupcodec
from clusterui.telemetry.metrics import GPU_ROLLUP_TABLES, ROLLUP_GAUGES


def rollup_rows(width: int, columns: str, where: str = "", params=()) -> list[tuple]:
    """``columns`` (comma-separated names) of every row, ordered by (gpu_id, bucket, job_id);
    ``where``, a condition on the blob rows (``gpu_id``, ``start``)."""
    names = [c.strip() for c in columns.split(",")]
    with connection.cursor() as cur:
        cur.execute(f"SELECT gpu_id, data FROM {GPU_ROLLUP_TABLES[width]} "
                    f"{'WHERE ' + where if where else ''}", params)
        blobs = cur.fetchall()
    out = []
    for gpu_id, data in blobs:
        r = rollupcodec.unpack(bytes(data))
        for i in range(len(r)):
            out.append(_row(gpu_id, r, i))
    out.sort(key=lambda row: (row["gpu_id"], row["bucket"], row["job_id"]))
    return [tuple(row[c] for c in names) for row in out]


def _py(value):
    return value.item() if hasattr(value, "item") else value


def _row(gpu_id: int, r: rollupcodec.RollupBlock, i: int) -> dict:
    n = int(r.n[i])
    row = {"gpu_id": gpu_id, "job_id": int(r.job[i]), "n": n,
           "bucket": dt.datetime.fromtimestamp(int(r.bucket[i]) / 1000, dt.UTC)}
    for m in ROLLUP_GAUGES:
        k = int(r.k[m][i])
        s = r.stats[m]
        row[f"{m}_avg"] = float(s["sum"][i]) / k if k else None
        row[f"{m}_n"] = None if k == n else k
        for a in ("max", "min"):  # where the blob keeps it (``rollupcodec.KEPT``)
            if a in s:
                row[f"{m}_{a}"] = _py(s[a][i]) if k else None
    k = int(r.k["throttle_reasons"][i])
    row["throttle_reasons_or"] = int(r.stats["throttle_reasons"]["or"][i]) if k else None
    k = int(r.k["energy_j"][i])
    for a in ("min", "max", "last"):
        row[f"energy_j_{a}"] = float(r.stats["energy_j"][a][i]) if k else None
    return row
