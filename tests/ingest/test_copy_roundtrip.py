"""What ingest stores is what was sent: every column of the GPU, NIC and job sample tables
(and the "latest" tables) through the real writer and PostgreSQL, for the range ends, NULL in
every nullable column, ints in real columns and doubles with every digit: byte rates and the
energy counter exactly, ``real`` gauges as float32 rounds them (what psycopg's per-row
``write_row`` stored before the writer built its COPY from numpy columns), bigints up to
2**63 - 1 exactly, never through a float."""

import datetime as dt
import random
import struct

import pytest
from django.db import connection

from clusterui.ingest import messages, typed_decode
from clusterui.ingest.auth import forget_keys
from clusterui.ingest.consumer import Consumer
from clusterui.ingest.models import IngestKey
from clusterui.ingest.queue import ReliableQueue
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.telemetry.metrics import (
    GPU_METRIC_NAMES,
    GPU_METRICS,
    JOB_METRIC_NAMES,
    JOB_METRICS,
    NIC_METRIC_NAMES,
    NIC_METRICS,
)
from clusterui.telemetry.models import GpuLatest, NicLatest
from collectors import signing
from tests.factories import node_batch, recent_start
from tests.services import publish

START = recent_start()
AWKWARD = [4093975977.3472037, 1 / 3, 2 / 3, 0.1, 1e-300, 5e-324, 123456789.98765433]


def _value(metric, rng: random.Random):
    """A value the metric accepts: an end of its range, null, or a random one with all the
    digits a double has (an int, as JSON may carry it, now and then in a real column)."""
    pick = rng.random()
    lo, hi = metric.lo, metric.hi
    if pick < 0.15:
        return None
    if pick < 0.25:
        return int(hi) if metric.integer else hi
    if pick < 0.35:
        return int(lo) if metric.integer else lo
    if metric.integer:
        return rng.randint(int(lo), int(hi))
    if pick < 0.45:
        return rng.randint(int(lo), int(hi))
    if pick < 0.55:
        awkward = [v for v in AWKWARD if lo <= v <= hi]
        return rng.choice(awkward)
    return rng.uniform(lo, hi)


def _stored_as(metric, value):
    """What the column keeps of ``value``: a real is the float32 nearest the double (the C
    cast ``struct`` does, as psycopg did), everything else exactly."""
    if value is None:
        return None
    if metric.sql_type == "real":
        return struct.unpack("f", struct.pack("f", float(value)))[0]
    if metric.sql_type == "double precision":
        return float(value)
    return value


def _envelope(node: str, seed: int, samples: int = 40, gpus: int = 3, nics: int = 2) -> dict:
    rng = random.Random(seed)
    env = node_batch(node=node, gpus=gpus, nics=nics, samples=samples, start=START)
    # Times a quarter second off the grid: exact in binary, so the expected time is exact.
    stamps = [START + k * 10 + 0.25 for k in range(samples)]
    env["gpu_samples"] = {
        "fields": ["ts", "gpu", "job", *GPU_METRIC_NAMES],
        "rows": [[ts, g, rng.choice(["4242", None]), *(_value(m, rng) for m in GPU_METRICS)]
                 for ts in stamps for g in range(gpus)]}
    # The last row of GPU 0 null in every column that may be null (the newest: "latest").
    env["gpu_samples"]["rows"][-gpus][2:] = [None] * (1 + len(GPU_METRICS))
    env["nic_samples"] = {
        "fields": ["ts", "nic", *NIC_METRIC_NAMES],
        "rows": [[ts, n, *(_value(m, rng) for m in NIC_METRICS)]
                 for ts in stamps for n in range(nics)]}
    env["nic_samples"]["rows"][-nics][2:] = [None] * len(NIC_METRICS)
    env["job_samples"] = {
        "fields": ["ts", "job", *JOB_METRIC_NAMES],
        "rows": [[ts, "4242", *(_value(m, rng) for m in JOB_METRICS)] for ts in stamps]}
    env["job_samples"]["rows"][-1][2:] = [None] * len(JOB_METRICS)
    return env


def _at(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


def _expected(env: dict) -> tuple[dict, dict, dict]:
    gpu = {(r[1], _at(r[0])): (r[2], *map(_stored_as, GPU_METRICS, r[3:]))
           for r in env["gpu_samples"]["rows"]}
    nic = {(r[1], _at(r[0])): tuple(map(_stored_as, NIC_METRICS, r[2:]))
           for r in env["nic_samples"]["rows"]}
    job = {_at(r[0]): tuple(map(_stored_as, JOB_METRICS, r[2:]))
           for r in env["job_samples"]["rows"]}
    return gpu, nic, job


def _columns(metrics) -> str:
    """The columns to select: a real as float8, the float32 it holds exactly (its text form
    is only the shortest that reads back as that float32)."""
    return ", ".join(f"s.{m.name}::float8" if m.sql_type == "real" else f"s.{m.name}"
                     for m in metrics)


def _stored(node: str) -> tuple[dict, dict, dict]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT g.index, s.ts, j.external_id, {_columns(GPU_METRICS)} "
            "FROM telemetry_gpusample s JOIN inventory_gpu g ON g.id = s.gpu_id "
            "JOIN inventory_node n ON n.id = g.node_id LEFT JOIN jobs_job j ON j.id = s.job_id "
            "WHERE n.name = %s", [node])
        gpu = {(r[0], r[1]): r[2:] for r in cur.fetchall()}
        cur.execute(
            f"SELECT c.name, s.ts, {_columns(NIC_METRICS)} "
            "FROM telemetry_nicsample s JOIN inventory_nic c ON c.id = s.nic_id "
            "JOIN inventory_node n ON n.id = c.node_id WHERE n.name = %s", [node])
        nic = {(int(r[0][5:-2]), r[1]): r[2:] for r in cur.fetchall()}  # mlx5_<n>:1
        cur.execute(
            f"SELECT s.ts, {_columns(JOB_METRICS)} "
            "FROM telemetry_jobsample s JOIN inventory_node n ON n.id = s.node_id "
            "JOIN jobs_job j ON j.id = s.job_id WHERE n.name = %s AND j.external_id = '4242'",
            [node])
        job = {r[0]: r[1:] for r in cur.fetchall()}
    return gpu, nic, job


@pytest.mark.django_db(transaction=True)
def test_every_column_comes_back_as_sent(clean_samples):
    # Two nodes in one flush (their rows in one COPY per table), a third alone.
    envs = {f"gpu-rt{i}": _envelope(f"gpu-rt{i}", seed=i) for i in range(3)}
    batches = {name: validate_batch(env) for name, env in envs.items()}
    assert not any(b.rejected for b in batches.values())
    store_batches([batches["gpu-rt0"], batches["gpu-rt1"]])
    store_batches([batches["gpu-rt2"]])
    for name, env in envs.items():
        gpu, nic, job = _stored(name)
        want_gpu, want_nic, want_job = _expected(env)
        assert len(gpu) == len(want_gpu) == 120 and len(nic) == 80 and len(job) == 40
        assert gpu == want_gpu
        assert nic == want_nic
        assert job == want_job
        # Every nullable column held a NULL somewhere, and a non-NULL somewhere.
        for table in (gpu, nic, job):
            for column in zip(*table.values(), strict=True):
                assert None in column and any(v is not None for v in column)

    # "Now": each device's newest row, nulls included (GPU 0's and NIC 0's are all null).
    last = _at(START + 39 * 10 + 0.25)
    for name, env in envs.items():
        want_gpu, want_nic, _job = _expected(env)
        for g in GpuLatest.objects.filter(gpu__node__name=name).select_related("gpu", "job"):
            assert g.ts == last
            assert ((g.job.external_id if g.job else None),
                    *(_stored_as(m, getattr(g, m.name)) for m in GPU_METRICS)
                    ) == want_gpu[(g.gpu.index, last)]
        assert GpuLatest.objects.get(gpu__node__name=name, gpu__index=0).util_pct is None
        for n in NicLatest.objects.filter(nic__node__name=name).select_related("nic"):
            assert (n.ts, n.rx_bytes_per_s, n.tx_bytes_per_s) == (
                last, *want_nic[(int(n.nic.name[5:-2]), last)])


@pytest.mark.django_db(transaction=True)
def test_a_resend_stores_only_the_new_rows_with_their_values(clean_samples):
    """A batch half stored before (its rows go through the duplicate check, not the live
    path) stores its other rows with the same values as if sent alone."""
    env = _envelope("gpu-rs", seed=7)
    first = {k: dict(env[k], rows=env[k]["rows"][: len(env[k]["rows"]) // 2])
             for k in ("gpu_samples", "nic_samples", "job_samples")}
    store_batches([validate_batch({**env, **first})])
    again = validate_batch({**env, "agent": {**env["agent"], "boot_id": "boot-2"}})
    (result,) = store_batches([again])
    assert (result.gpu_samples, result.nic_samples, result.job_samples) == (60, 40, 20)
    assert result.duplicates == 120
    assert _stored("gpu-rs") == _expected(env)


@pytest.mark.django_db(transaction=True)
def test_a_value_copy_cannot_encode_fails_the_flush_rather_than_wrapping(clean_samples):
    """2**63 in a bigint column (validation refuses it; here it is put past validation):
    the flush raises and stores nothing, as psycopg's ``write_row`` did, rather than a
    wrapped value."""
    batch = validate_batch(_envelope("gpu-of", seed=3))
    at = 3 + GPU_METRIC_NAMES.index("throttle_reasons")
    batch.gpu_rows[5] = (*batch.gpu_rows[5][:at], 1 << 63, *batch.gpu_rows[5][at + 1:])
    with pytest.raises(OverflowError):
        store_batches([batch])
    assert _stored("gpu-of") == ({}, {}, {})


@pytest.mark.django_db(transaction=True)
def test_sealed_batches_through_the_queue_come_back_as_sent(broker, clean_samples):
    """The same every-column check for batches as a collector sends them: sealed
    (signature version 2), through the real queue and the bulk consumer, whose sample rows
    are decoded typed (``typed_decode``: ints in real columns become floats there, values
    with every digit kept)."""
    secret = "roundtrip-cluster-secret-0123456789"
    IngestKey.objects.create(cluster="test", key_id="rt", secret=secret)
    forget_keys()
    envs = {f"gpu-sl{i}": _envelope(f"gpu-sl{i}", seed=10 + i) for i in range(3)}
    sealed = [signing.node_signer("rt", secret)(env) for env in envs.values()]
    for one in sealed:  # the path under test is the one taken
        decoded = typed_decode.decode(one[signing.BODY], messages.loads)
        for section in typed_decode.SECTIONS:
            assert type(decoded[section]["rows"]) is typed_decode.TypedRows
    publish(*sealed)
    try:
        c = Consumer(queue=ReliableQueue(broker, "ingest", ttl_s=60))
        result = c.flush(c.queue.take(500, block_s=0))
        c.queue.ack()
    finally:
        forget_keys()
    assert (result.stored, result.refused, result.dead_lettered) == (3, 0, 0)
    for name, env in envs.items():
        assert _stored(name) == _expected(env)
