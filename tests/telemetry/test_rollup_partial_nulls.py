"""Rollup averages are over the samples that reported the metric, in every tier.

GPM readings can be intermittent (and GPM's first reading after a collector starts is
always missing): a bucket then holds SM activity for some of its samples only. Its average
must be the mean of those samples, and a reader combining buckets (a 2-minute step from
1-minute rows, a job's hour from its minutes) must weight each bucket by how many samples
reported the metric, not by all of them. Each case below reads back what the raw rows say.
"""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusterui.inventory.models import Nic
from clusterui.telemetry import compaction
from clusterui.telemetry.series import gpu_series, nic_series
from tests import rows

pytestmark = pytest.mark.django_db
NOW = timezone.now().replace(minute=0, second=0, microsecond=0)
# Two whole closed hours starting on an even hour (a 2-hour step is aligned on midnight).
H0 = NOW - dt.timedelta(hours=6 + (NOW.hour % 2))
JOB_ID = 4242  # the samples' job (no Job row: no detector pass holds compaction back)
EVERY_S = 10


def fetch(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def tables(fn) -> set[str]:
    with CaptureQueriesContext(connection) as ctx:
        fn()
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    return {t for t in ("telemetry_gpurollup1m", "telemetry_gpurollup5m",
                        "telemetry_gpurollup1h", "telemetry_gpuchunk",
                        "telemetry_nicrollup5m") if t in sql}


def pattern(width_s: int):
    """(ts, value or None) every 10 s for two hours: in even buckets of ``width_s`` only
    every other sample reports (60), in odd buckets every sample does (30)."""
    out = []
    for k in range(2 * 3600 // EVERY_S):
        t = H0 + dt.timedelta(seconds=k * EVERY_S)
        even = (k * EVERY_S // width_s) % 2 == 0
        out.append((t, (60.0 if k % 2 == 0 else None) if even else 30.0))
    return out


# In a pair of buckets: half a bucket's samples at 60 and a whole bucket's at 30.
PAIR_MEAN = (60.0 * 0.5 + 30.0 * 1.0) / 1.5  # 40, where weighting by n gives 45


@pytest.mark.parametrize("width, table", [(60, "telemetry_gpurollup1m"),
                                          (300, "telemetry_gpurollup5m"),
                                          (3600, "telemetry_gpurollup1h")])
def test_gpu_rollups_average_over_the_samples_that_reported_the_metric(width, table):
    gpu = rows.node(gpus=1, latest=False).gpus.get()
    data = pattern(width)
    rows._partitions(H0, H0 + dt.timedelta(hours=2))
    fetch("INSERT INTO telemetry_gpusample (ts, gpu_id, job_id, util_pct, sm_active_pct) "
          "SELECT u.ts, %s, %s, 99, u.sm FROM unnest(%s::timestamptz[], %s::real[]) "
          "AS u(ts, sm) RETURNING 1", [gpu.id, JOB_ID, [t for t, _ in data],
                                       [v for _, v in data]])
    end = H0 + dt.timedelta(hours=2)
    raw_pairs = gpu_series([gpu.id], ["sm_active_pct"], H0, end, step=2 * width)
    assert compaction.compact(NOW).rows == len(data)

    def read(step):
        return gpu_series([gpu.id], ["sm_active_pct", "util_pct"], H0, end, step=step)

    assert tables(lambda: read(width)) == {table}
    one = read(width).values[gpu.id]
    # Each bucket: the mean of the samples that carried SM activity (60 where half did).
    assert one["sm_active_pct"] == [60.0, 30.0] * (7200 // width // 2)
    assert one["util_pct"] == [99.0] * (7200 // width)
    assert tables(lambda: read(2 * width)) == {table}
    pairs = read(2 * width).values[gpu.id]["sm_active_pct"]
    assert pairs == pytest.approx([PAIR_MEAN] * (7200 // width // 2))
    assert pairs == pytest.approx(raw_pairs.values[gpu.id]["sm_active_pct"])


def test_job_rollups_average_over_the_samples_that_reported_the_metric():
    gpu = rows.node(gpus=1, latest=False).gpus.get()
    data = pattern(60)
    rows._partitions(H0, H0 + dt.timedelta(hours=2))
    fetch("INSERT INTO telemetry_gpusample (ts, gpu_id, job_id, util_pct, sm_active_pct) "
          "SELECT u.ts, %s, %s, 99, u.sm FROM unnest(%s::timestamptz[], %s::real[]) "
          "AS u(ts, sm) RETURNING 1", [gpu.id, JOB_ID, [t for t, _ in data],
                                       [v for _, v in data]])
    compaction.compact(NOW)
    hours = fetch("SELECT samples, util_pct, sm_active_pct, busy_pct, util_n, sm_active_n "
                  "FROM telemetry_jobrollup1h WHERE job_id = %s ORDER BY bucket", [JOB_ID])
    # Per hour 360 samples, 270 with SM activity: 90 at 60 and 180 at 30.
    assert hours == [(360, 99.0, pytest.approx(PAIR_MEAN), pytest.approx(PAIR_MEAN), None,
                      270)] * 2


@pytest.mark.parametrize("width, table", [(300, "telemetry_nicrollup5m")])
def test_nic_rollups_average_over_the_samples_that_reported_the_metric(width, table):
    node = rows.node(gpus=1, nics=1, latest=False)
    nic = Nic.objects.get(node=node)
    data = pattern(width)
    rows._partitions(H0, H0 + dt.timedelta(hours=2))
    fetch("INSERT INTO telemetry_nicsample (ts, nic_id, rx_bytes_per_s, tx_bytes_per_s) "
          "SELECT u.ts, %s, u.rx * 1e7, 1e9 FROM unnest(%s::timestamptz[], %s::float8[]) "
          "AS u(ts, rx) RETURNING 1", [nic.id, [t for t, _ in data], [v for _, v in data]])
    fetch("INSERT INTO telemetry_nicrollupdue (nic_id, hour) VALUES (%s, %s), (%s, %s) "
          "ON CONFLICT DO NOTHING RETURNING 1",
          [nic.id, H0, nic.id, H0 + dt.timedelta(hours=1)])
    end = H0 + dt.timedelta(hours=2)
    raw_pairs = nic_series([nic.id], ["rx_bytes_per_s"], H0, end, step=2 * width)
    assert compaction.compact(NOW).nic_hours == 2

    def read(step):
        return nic_series([nic.id], ["rx_bytes_per_s", "tx_bytes_per_s"], H0, end, step=step)

    assert tables(lambda: read(2 * width)) == {table}
    one = read(width).values[nic.id]
    assert one["rx_bytes_per_s"] == pytest.approx([6e8, 3e8] * (7200 // width // 2))
    pairs = read(2 * width).values[nic.id]
    assert pairs["rx_bytes_per_s"] == pytest.approx([PAIR_MEAN * 1e7] * (7200 // width // 2))
    assert pairs["rx_bytes_per_s"] == pytest.approx(raw_pairs.values[nic.id]["rx_bytes_per_s"])
    assert pairs["tx_bytes_per_s"] == pytest.approx([1e9] * (7200 // width // 2))
