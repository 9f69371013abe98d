"""The bulk writer: chunks and rollups from numpy blocks, replaced (not doubled) when
written again."""

import datetime as dt

import numpy as np
import pytest
from django.db import connection

from clusterui.telemetry import codec, packed
from tests import rows
from tests.telemetry.packed_rollups import rollup_rows

pytestmark = pytest.mark.django_db
HOUR = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)


def block(start: dt.datetime, n: int, *, job: int, util: float) -> codec.Block:
    s = packed.dt_to_ms(start)
    ts = s + np.arange(n, dtype=np.int64) * 10_000
    values = {m: np.full(n, np.nan) for m in codec.GPU_METRIC_NAMES}
    values["util_pct"] = np.full(n, util)
    values["power_w"] = np.linspace(100, 200, n)
    values["mem_used_mib"] = np.arange(n, dtype=np.int64)
    values["throttle_reasons"] = np.zeros(n, np.int64)
    values["throttle_reasons"][5] = 4
    nulls = {m: np.isnan(v) if v.dtype.kind == "f" else np.zeros(n, bool)
             for m, v in values.items()}
    return codec.Block(start=s, ts=ts, job=np.full(n, job, np.int64), values=values,
                       nulls=nulls)


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def test_write_hours_makes_chunks_and_rollups_and_replaces_them():
    node = rows.node(gpus=2, latest=False)
    g1, g2 = node.gpus.order_by("index")
    job = rows.job(gpus=[g1, g2])
    blocks = [(g1.id, block(HOUR, 360, job=job.id, util=40.0)),
              (g2.id, block(HOUR, 360, job=job.id, util=80.0))]
    packed.ensure_partitions([b.start for _, b in blocks])
    for _ in range(2):  # the second write replaces the first
        written = packed.write_hours(blocks)
    assert (written.chunks, written.samples, written.jobs) == (2, 720, 1)
    assert fetch("SELECT count(*), sum(n) FROM telemetry_gpuchunk") == [(2, 720)]
    got = packed.raw_samples([g1.id], HOUR, HOUR + dt.timedelta(hours=1))
    assert got[0][0] == g1.id and np.array_equal(got[0][1].ts, blocks[0][1].ts)

    minute = rollup_rows(60, "n, util_pct_avg, power_w_min, mem_used_mib_max, "
                         "throttle_reasons_or, energy_j_last", "gpu_id = %s", [g1.id])
    assert len(minute) == 60
    assert minute[0][:2] == (6, 40.0)
    assert minute[0][3] == 5 and minute[0][4] == 4 and minute[0][5] is None
    assert minute[1][4] == 0
    hour = rollup_rows(3600, "n, util_pct_avg, util_pct_max, power_w_avg", "gpu_id = %s",
                       [g2.id])
    assert hour[0][:3] == (360, 80.0, 80.0)
    assert hour[0][3] == pytest.approx(150.0)

    jobs = fetch("SELECT gpus, samples, gpu_s, util_pct, busy_pct, power_w, mem_used_max_mib "
                 "FROM telemetry_jobrollup1h WHERE job_id = %s", [job.id])
    assert jobs == [(2, 720, 7200.0, 60.0, 60.0, pytest.approx(300.0), 359)]
