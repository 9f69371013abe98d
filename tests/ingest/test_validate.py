"""Validation of contract 1, without a database: each fault gets a precise reason and
refuses only what is faulty."""

import math

import pytest

from clusterui.ingest.validate import BatchRejected, validate_batch
from tests.factories import example_batch, node_batch

NOW = 1763800000.0


def test_the_contract_example_is_valid_as_it_is():
    batch = validate_batch(example_batch(), now=NOW)
    assert batch.rejected_total == 0
    assert len(batch.gpu_rows) == 4 and len(batch.nic_rows) == 4 and len(batch.job_rows) == 2
    assert len(batch.events) == 1
    assert batch.gpu_rows[3][3] is None  # null util on the GPU that could not report


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: e.update(schema=2), "schema: version 2 is not supported (this server speaks 1)"),
        (lambda e: e.pop("schema"), "schema: missing (this server speaks schema 1)"),
        (lambda e: e.update(node=""), "node: must not be empty"),
        (lambda e: e.update(cluster=5.5), "cluster: must be a string, got float"),
        (lambda e: e["agent"].update(seq=-1), "agent.seq: must be a non-negative integer, got -1"),
        (lambda e: e.update(agent="x"), "agent: must be an object with boot_id and seq"),
    ],
)
def test_a_bad_envelope_is_refused_whole_with_its_reason(mutate, reason):
    envelope = example_batch()
    mutate(envelope)
    with pytest.raises(BatchRejected) as err:
        validate_batch(envelope, now=NOW)
    assert err.value.reason == reason


def test_a_batch_that_is_not_an_object_is_refused():
    with pytest.raises(BatchRejected, match="envelope must be a JSON object, got list"):
        validate_batch([1, 2], now=NOW)


def test_an_oversized_batch_is_refused_with_the_limit_named():
    envelope = node_batch(samples=20, start=NOW - 300)
    with pytest.raises(BatchRejected, match=r"batch has 200 sample rows; the limit is 100"):
        validate_batch(envelope, now=NOW, max_rows=100)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (140.0, "gpu_samples: util_pct out of range [0, 100]"),
        (-1, "gpu_samples: util_pct out of range [0, 100]"),
        (math.nan, "gpu_samples: util_pct must be finite (NaN and infinity are not measurements)"),
        (math.inf, "gpu_samples: util_pct must be finite (NaN and infinity are not measurements)"),
        ("97", "gpu_samples: util_pct must be a number or null, got str"),
        (True, "gpu_samples: util_pct must be a number or null, got bool"),
    ],
)
def test_one_bad_value_refuses_that_sample_only(value, reason):
    envelope = example_batch()
    envelope["gpu_samples"]["rows"][1][3] = value
    batch = validate_batch(envelope, now=NOW)
    assert dict(batch.rejected) == {reason: 1}
    assert len(batch.gpu_rows) == 3
    assert batch.examples[reason].startswith("row 1")


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        (0, NOW + 3600, "gpu_samples: ts is more than 300 s in the future"),
        (0, 12.0, "gpu_samples: ts is older than raw retention (RAW_RETENTION_DAYS=14)"),
        (0, None, "gpu_samples: ts must be a finite number of Unix seconds"),
        (1, 7, "gpu_samples: gpu refers to no entry of this batch's inventory"),
        (1, "0", "gpu_samples: gpu must be an integer index, got str"),
        (2, "999", "gpu_samples: job is not one of this batch's jobs"),
    ],
)
def test_references_and_timestamps_are_checked(column, value, reason):
    envelope = example_batch()
    envelope["gpu_samples"]["rows"][0][column] = value
    batch = validate_batch(envelope, now=NOW)
    assert dict(batch.rejected) == {reason: 1}
    assert len(batch.gpu_rows) == 3


def test_unknown_fields_are_ignored_and_missing_ones_stored_as_null():
    envelope = example_batch()
    section = envelope["gpu_samples"]
    section["fields"] = ["gpu", "ts", "util_pct", "future_metric"]
    section["rows"] = [[0, NOW - 10, 50.0, "whatever"], [1, NOW - 10, 60.0, 1]]
    batch = validate_batch(envelope, now=NOW)
    assert batch.rejected_total == 0
    (ts, gpu, job, util, *rest), _ = batch.gpu_rows
    assert (ts, gpu, job, util) == (NOW - 10, 0, None, 50.0)
    assert all(v is None for v in rest)


def test_samples_without_ts_are_refused_with_the_missing_field_named():
    envelope = example_batch()
    envelope["nic_samples"]["fields"] = ["nic", "rx_bytes_per_s", "tx_bytes_per_s"]
    envelope["nic_samples"]["rows"] = [[0, 1.0, 2.0]]
    batch = validate_batch(envelope, now=NOW)
    assert dict(batch.rejected) == {"nic_samples: fields lack ts": 1}
    assert len(batch.gpu_rows) == 4  # the rest of the batch is untouched


def test_duplicate_rows_within_a_batch_are_stored_once():
    envelope = example_batch()
    envelope["gpu_samples"]["rows"].append(list(envelope["gpu_samples"]["rows"][0]))
    batch = validate_batch(envelope, now=NOW)
    assert dict(batch.rejected) == {"gpu_samples: duplicate (gpu, ts) within the batch": 1}
    assert len(batch.gpu_rows) == 4


def test_strings_that_postgres_cannot_store_are_refused():
    envelope = example_batch()
    envelope["jobs"][0]["name"] = "bad\udcffname"
    envelope["events"][0]["kind"] = "x\x00id"
    batch = validate_batch(envelope, now=NOW)
    assert batch.rejected["jobs: name is not valid UTF-8"] == 1
    assert batch.rejected["events: kind contains a NUL character"] == 1
    assert batch.jobs["812345"]["name"] == ""  # the job itself is kept
    assert batch.events == []


def test_mig_mode_is_read_from_the_field_the_collector_sends():
    envelope = example_batch()
    envelope["gpus"][0]["mig_enabled"] = True
    envelope["gpus"][1]["mig_enabled"] = "yes"
    batch = validate_batch(envelope, now=NOW)
    assert batch.gpus[0]["mig_mode"] is True
    assert batch.rejected["gpus: mig_enabled must be true, false or null, got str"] == 1
    assert batch.gpus[1]["mig_mode"] is None  # the GPU is kept without it
    assert len(batch.gpu_rows) == 4
