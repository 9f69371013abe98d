"""Validation means one thing everywhere: the column-wise fast path and the row loop agree on
every value, boundaries included; every accepted value fits its database column; hostile
JSON (NaN, 1e400, 2^64, lone surrogates, deep nesting) is refused one item at a time; a
message is measured before it is parsed; old samples are refused before they make
partitions."""

import base64
import json
import time

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterui.ingest import messages, validate
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.telemetry.metrics import GPU_METRICS, JOB_METRICS, NIC_METRICS
from tests.factories import node_batch

NOW = time.time()
BOUNDS = {  # the SQL types' ranges
    "integer": (-(1 << 31), (1 << 31) - 1),
    "bigint": (-(1 << 63), (1 << 63) - 1),
    "real": (-3.4e38, 3.4e38),
    "double precision": (-1.7e308, 1.7e308),
}
PIVOTS = [1 << 24, 1 << 31, 1 << 53, 1 << 56, 1 << 63, 1 << 64]


def boundary_values():
    near = st.builds(lambda p, d, neg: (-1 if neg else 1) * (p + d), st.sampled_from(PIVOTS),
                     st.integers(-1024, 1024), st.booleans())
    return near.flatmap(lambda v: st.sampled_from([v, float(v)]))


def _batch_with(metric: str, value, rows_per_gpu: int) -> dict:
    envelope = node_batch(samples=rows_per_gpu, start=NOW - 600)
    fields = envelope["gpu_samples"]["fields"]
    envelope["gpu_samples"]["rows"][0][fields.index(metric)] = value
    return envelope


def _both_paths(envelope: dict):
    out = []
    for fast in (True, False):
        validate.FAST_PATH = fast
        try:
            batch = validate_batch(envelope, now=NOW)
        finally:
            validate.FAST_PATH = True
        out.append((batch.gpu_rows, dict(batch.rejected)))
    return out


@pytest.mark.parametrize("metric", [m.name for m in GPU_METRICS])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=boundary_values())
def test_the_fast_path_and_the_row_loop_agree_on_every_boundary(metric, value):
    envelope = _batch_with(metric, value, rows_per_gpu=7)  # 56 rows: column-wise first
    (fast_rows, fast_refused), (slow_rows, slow_refused) = _both_paths(envelope)
    assert fast_refused == slow_refused
    assert fast_rows == slow_rows
    spec = next(m for m in GPU_METRICS if m.name == metric)
    accepted = not fast_refused
    in_range = spec.lo <= value <= spec.hi and (not spec.integer or float(value).is_integer())
    assert accepted == in_range, (value, fast_refused)


def test_every_metric_range_fits_its_column_type():
    for metric in (*GPU_METRICS, *NIC_METRICS, *JOB_METRICS):
        lo, hi = BOUNDS[metric.sql_type]
        assert lo <= metric.lo and metric.hi <= hi, metric.name
        if metric.integer:
            assert metric.sql_type in ("integer", "bigint"), metric.name


@pytest.mark.django_db(transaction=True)
def test_whatever_validation_accepts_at_the_boundaries_is_stored(clean_samples):
    """The values just inside every integer column's range, through the real writer."""
    envelope = node_batch(node="gpu-edge", samples=7, start=NOW - 600)
    fields = envelope["gpu_samples"]["fields"]
    rows = envelope["gpu_samples"]["rows"]
    for metric in GPU_METRICS:
        rows[0][fields.index(metric.name)] = (int(metric.hi) if metric.integer
                                              else metric.hi)
        rows[1][fields.index(metric.name)] = int(metric.lo) if metric.integer else metric.lo
    envelope["agent"]["spool_dropped"] = (1 << 31) - 1
    envelope["job_samples"]["rows"][0][3] = 1 << 56
    batch = validate_batch(envelope)
    assert not batch.rejected
    store_batches([batch])
    with connection.cursor() as cur:
        cur.execute("SELECT max(throttle_reasons), max(mem_used_mib) FROM telemetry_gpusample")
        assert cur.fetchone() == ((1 << 63) - 1, 1 << 24)
        cur.execute("SELECT spool_dropped FROM ingest_ingestbatch")
        assert cur.fetchone() == ((1 << 31) - 1,)


@pytest.mark.parametrize("agent_value, refused", [((1 << 31) - 1, False), (1 << 31, True),
                                                  (1 << 64, True), (-1, True)])
def test_spool_dropped_fits_its_int4_column(agent_value, refused):
    envelope = node_batch(start=NOW - 600)
    envelope["agent"]["spool_dropped"] = agent_value
    batch = validate_batch(envelope, now=NOW)
    assert ("agent.spool_dropped: out of range [0, 2.14748e+09]" in batch.rejected) is refused
    assert len(batch.gpu_rows) == 24


@pytest.mark.parametrize("sent_at", [1e300, float("nan"), -5.0, NOW + 86400, 10 ** 400])
def test_an_implausible_sent_at_is_dropped_not_trusted(sent_at):
    envelope = node_batch(start=NOW - 600)
    envelope["sent_at"] = sent_at
    batch = validate_batch(envelope, now=NOW)
    assert batch.sent_at is None and len(batch.gpu_rows) == 24
    assert any(r.startswith("sent_at:") for r in batch.rejected)


def _queue_item(body_text: str) -> bytes:
    body = f'[[{body_text}], {{}}, {{}}]'.encode("utf-8", "surrogateescape")
    return json.dumps({"body": base64.b64encode(body).decode(), "content-type":
                       "application/json", "headers": {"task": "clusterui.ingest"},
                       "properties": {"body_encoding": "base64"}}).encode()


@pytest.mark.parametrize("token, reason", [
    ("NaN", "gpu_samples: util_pct must be finite (NaN and infinity are not measurements)"),
    ("Infinity", "gpu_samples: util_pct must be finite (NaN and infinity are not measurements)"),
    ("-Infinity", "gpu_samples: util_pct must be finite (NaN and infinity are not measurements)"),
    ("1e400", "gpu_samples: util_pct must be finite (NaN and infinity are not measurements)"),
    ("18446744073709551616", "gpu_samples: util_pct out of range [0, 100]"),
    ('"\\ud800"', "gpu_samples: util_pct must be a number or null, got str"),
    ("[" * 800 + "]" * 800, "gpu_samples: util_pct must be a number or null, got list"),
])
def test_hostile_json_values_are_refused_one_row_at_a_time(token, reason):
    envelope = node_batch(start=NOW - 600)
    fields = envelope["gpu_samples"]["fields"]
    envelope["gpu_samples"]["rows"][0][fields.index("util_pct")] = 271828.5
    text = json.dumps(envelope).replace("271828.5", token)
    parsed = messages.envelope_of(_queue_item(text))
    batch = validate_batch(parsed, now=NOW)
    assert dict(batch.rejected) == {reason: 1}
    assert len(batch.gpu_rows) == 23


def test_a_lone_surrogate_or_a_byte_that_is_not_utf8_refuses_only_its_string():
    envelope = node_batch(start=NOW - 600)
    envelope["jobs"][0]["user"] = "ali\ud800ce"
    text = json.dumps(envelope)  # writes the escape \ud800
    batch = validate_batch(messages.envelope_of(_queue_item(text)), now=NOW)
    assert dict(batch.rejected) == {"jobs: user is not valid UTF-8": 1}
    assert batch.jobs["4242"]["user"] == "" and len(batch.gpu_rows) == 24
    clean = json.dumps(node_batch(start=NOW - 600))
    raw = clean.replace('"name": "train"', '"name": "tr\udcffin"')  # a raw 0xFF byte
    batch = validate_batch(messages.envelope_of(_queue_item(raw)), now=NOW)
    assert dict(batch.rejected) == {"jobs: name is not valid UTF-8": 1}


def test_nesting_no_parser_can_follow_is_refused_whole_with_its_reason():
    envelope = node_batch(start=NOW - 600)
    envelope["extra"] = 271828.5
    text = json.dumps(envelope).replace("271828.5", "[" * 200_000 + "]" * 200_000)
    with pytest.raises(messages.NotIngestMessage, match="nested deeper than the parser"):
        messages.envelope_of(_queue_item(text))


def test_a_signature_over_a_huge_integer_verifies(settings):
    """orjson reads 2^64 as a float; the exact re-read restores what was signed."""
    from collectors import signing

    envelope = node_batch(start=NOW - 600)
    fields = envelope["gpu_samples"]["fields"]
    envelope["gpu_samples"]["rows"][0][fields.index("throttle_reasons")] = 1 << 64
    signing.sign(envelope, "k1", "cluster-secret")
    raw = _queue_item(json.dumps(envelope))
    parsed = messages.envelope_of(raw)

    def check(e):
        return signing.verify(e, {"k1": "cluster-secret"}, cluster_wide={"k1"})

    assert check(parsed) is not None  # orjson's float breaks the canonical form
    exact, refusal = messages.verified_envelope(raw, parsed, check)
    assert refusal is None
    batch = validate_batch(exact, now=NOW)
    assert dict(batch.rejected) == {
        "gpu_samples: throttle_reasons out of range [0, 9.22337e+18]": 1}


def test_the_size_is_checked_before_parsing(settings):
    settings.INGEST_MAX_MESSAGE_BYTES = 100_000
    item = _queue_item(json.dumps(dict(node_batch(), padding="x" * 100_000)))
    with pytest.raises(messages.NotIngestMessage,
                       match=r"larger than INGEST_MAX_MESSAGE_BYTES \(100,000\); not parsed"):
        messages.envelope_of(item)


@pytest.mark.django_db(transaction=True)
def test_one_sample_five_years_old_makes_no_partition(clean_samples):
    envelope = node_batch(node="gpu-clock", samples=2, start=NOW - 600)
    envelope["gpu_samples"]["rows"][0][0] = NOW - 5 * 365 * 86400
    envelope["nic_samples"]["rows"][0][0] = NOW - 3 * 86400  # within retention, too far back
    batch = validate_batch(envelope)
    assert dict(batch.rejected) == {
        "gpu_samples: ts is older than raw retention (RAW_RETENTION_DAYS=14)": 1,
        "nic_samples: ts is more than 172800 s behind the batch's newest sample "
        "(INGEST_MAX_SPAN_S)": 1,
    }

    def partitions() -> int:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_inherits")
            return cur.fetchone()[0]

    before = partitions()
    store_batches([batch])
    assert partitions() - before <= 9  # today's (or yesterday's) day, per partitioned table
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), min(ts) > now() - interval '1 day' FROM telemetry_gpusample")
        assert cur.fetchone() == (15, True)
