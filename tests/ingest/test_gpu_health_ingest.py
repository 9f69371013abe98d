"""The optional ``gpu_health`` section (issue 19): validated row by row (a bad value refuses
its row only, with its reason), batches without it still valid, and stored as one state
row per GPU that a newer reading changes and an older one (a spool replay) never does."""

import copy
import time

import pytest

from clusterui.gpuhealth.fields import FIELDS
from clusterui.gpuhealth.models import GpuHealth
from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from tests.factories import example_batch, node_batch

NOW = 1763800000.0
HEADER = ["ts", "gpu", *FIELDS]


def health_row(ts, gpu, **values):
    base = dict.fromkeys(FIELDS, 0) | {"remap_pending": False, "remap_failure": False,
                                       "retired_pages_sbe": None, "retired_pages_dbe": None,
                                       "retired_pages_pending": None}
    base.update(values)
    return [ts, gpu, *(base[f] for f in FIELDS)]


def with_health(envelope, rows):
    envelope = copy.deepcopy(envelope)
    envelope["gpu_health"] = {"fields": HEADER, "rows": rows}
    return envelope


def test_a_batch_without_the_section_is_valid():
    batch = validate_batch(example_batch(), now=NOW)
    assert batch.rejected_total == 0 and batch.gpu_health == []


@pytest.mark.parametrize(("value", "reason"), [
    (-1, "gpu_health: ecc_uncorrected_volatile out of range [0, 9.22337e+18]"),
    (1 << 63, "gpu_health: ecc_uncorrected_volatile out of range [0, 9.22337e+18]"),
    (1.5, "gpu_health: ecc_uncorrected_volatile must be an integer"),
    ("3", "gpu_health: ecc_uncorrected_volatile must be a number or null, got str"),
    (True, "gpu_health: ecc_uncorrected_volatile must be a number or null, got bool"),
])
def test_a_bad_count_refuses_its_row_only(value, reason):
    ts = NOW - 30
    envelope = with_health(example_batch(), [health_row(ts, 0, ecc_uncorrected_volatile=value),
                                             health_row(ts, 1, ecc_uncorrected_volatile=2)])
    batch = validate_batch(envelope, now=NOW)
    assert dict(batch.rejected) == {reason: 1}
    assert [(r[1], r[2 + FIELDS.index("ecc_uncorrected_volatile")]) for r in batch.gpu_health] \
        == [(1, 2)]
    assert len(batch.gpu_rows) == 4  # the samples land


@pytest.mark.parametrize(("row", "reason"), [
    (health_row(NOW - 30, 0, remap_pending=1),
     "gpu_health: remap_pending must be true, false or null, got int"),
    (health_row(NOW - 30, 9), "gpu_health: gpu refers to no entry of this batch's inventory"),
    (health_row(NOW + 3600, 0), "gpu_health: ts is more than 300 s in the future"),
    ([NOW - 30, 0], "gpu_health: row length differs from fields"),
])
def test_other_faults_refuse_their_row(row, reason):
    batch = validate_batch(with_health(example_batch(), [row]), now=NOW)
    assert dict(batch.rejected) == {reason: 1} and batch.gpu_health == []


def test_a_malformed_section_is_refused_and_the_rest_lands():
    envelope = example_batch()
    envelope["gpu_health"] = [1, 2]
    batch = validate_batch(envelope, now=NOW)
    assert list(batch.rejected) == ["gpu_health: must be an object with fields and rows"]
    assert len(batch.gpu_rows) == 4


def test_unknown_fields_are_ignored_and_missing_ones_are_null():
    envelope = example_batch()
    envelope["gpu_health"] = {"fields": ["ts", "gpu", "future_counter", "remap_failure"],
                              "rows": [[NOW - 30, 0, 7, True]]}
    [row] = validate_batch(envelope, now=NOW).gpu_health
    values = dict(zip(FIELDS, row[2:], strict=True))
    assert values["remap_failure"] is True and values["ecc_corrected_volatile"] is None


@pytest.mark.django_db
def test_stored_on_change_newest_wins_and_null_keeps_the_known_value():
    ts = time.time() - 60

    def send(seq, rows):
        ingest_envelope(with_health(node_batch(seq=seq, gpus=2), rows))

    send(1, [health_row(ts, 0, ecc_uncorrected_volatile=1, remap_pending=True)])
    h = GpuHealth.objects.get(gpu__index=0)
    assert (h.ecc_uncorrected_volatile, h.remap_pending, h.retired_pages_sbe) == (1, True, None)
    first_change = h.changed_at
    # An older reading (a replayed spool) changes nothing.
    send(2, [health_row(ts - 60, 0, ecc_uncorrected_volatile=0, remap_pending=False)])
    h.refresh_from_db()
    assert (h.ecc_uncorrected_volatile, h.remap_pending) == (1, True)
    # A newer one with a null (a transient error) keeps what was known, and changes nothing.
    send(3, [health_row(ts + 1, 0, ecc_uncorrected_volatile=None, remap_pending=True)])
    h.refresh_from_db()
    assert (h.ecc_uncorrected_volatile, h.changed_at) == (1, first_change)
    # A reset: the state changes.
    send(4, [health_row(ts + 2, 0, ecc_uncorrected_volatile=0, remap_pending=False,
                        remapped_uncorrectable=1)])
    h.refresh_from_db()
    assert (h.ecc_uncorrected_volatile, h.remap_pending, h.remapped_uncorrectable) == (0, False, 1)
    assert h.changed_at > first_change
