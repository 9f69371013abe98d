"""A version-2 batch's text decoded with typed rows (``typed_decode``) validates to exactly
what the plain decoding (``messages.loads``) validates to: the same rows kept, the same
refusals with the same reasons, whatever the text holds; and a collector's clean batch does
take the typed path (its checks are then skipped, so this is what makes skipping them
safe)."""

import json
import math
import time

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterui.ingest import messages, typed_decode, validate
from clusterui.ingest.auth import forget_keys, open_batch
from clusterui.telemetry.metrics import GPU_METRICS
from collectors import signing
from tests.factories import node_batch

NOW = time.time()


def _validated(envelope):
    try:
        batch = validate.validate_batch(envelope, now=NOW)
    except validate.BatchRejected as exc:
        return exc.reason
    return (batch.gpu_rows, batch.nic_rows, batch.fabric_rows, batch.job_rows,
            dict(batch.rejected), batch.gpus, batch.nics, batch.jobs, batch.events)


def _both(text: str):
    """(validated from the typed decoding, validated from the plain one), and the typed
    decoding itself."""
    typed = typed_decode.decode(text, messages.loads)
    try:
        plain = messages.loads(text)
    except ValueError as exc:
        plain = exc
    return _validated(typed), (
        _validated(plain) if not isinstance(plain, Exception) else plain), typed


def _large(**kwargs) -> dict:
    return node_batch(samples=12, gpus=8, nics=4, start=NOW - 600, **kwargs)  # 96 GPU rows


def test_a_collectors_clean_batch_takes_the_typed_path_and_validates_the_same():
    text = json.dumps(_large())
    assert len(text) >= typed_decode.TYPED_FROM_BYTES
    from_typed, from_plain, typed = _both(text)
    for section in typed_decode.SECTIONS:
        assert type(typed[section]["rows"]) is typed_decode.TypedRows, section
    assert from_typed == from_plain
    assert len(from_typed[0]) == 96 and from_typed[4] == {}


@pytest.fixture
def _cluster_key(db):
    """A key for cluster "test", forgotten by this process's key cache after the test
    (the database forgets it with the test's transaction)."""
    from clusterui.ingest.models import IngestKey

    forget_keys()
    IngestKey.objects.create(cluster="test", key_id="k1", secret="s" * 32)
    yield
    forget_keys()


def test_a_signed_version_2_batch_is_opened_through_the_typed_decoding(_cluster_key):
    sealed = signing.node_signer("k1", "s" * 32)(_large())
    envelope, refusal, key_id = open_batch(sealed)
    assert refusal is None and key_id == "k1"
    assert type(envelope["gpu_samples"]["rows"]) is typed_decode.TypedRows
    batch = validate.validate_batch(envelope, now=NOW)
    assert len(batch.gpu_rows) == 96 and not batch.rejected


def test_a_small_batch_is_decoded_plainly():
    text = json.dumps(node_batch(samples=1, start=NOW - 600))
    assert len(text) < typed_decode.TYPED_FROM_BYTES
    assert type(typed_decode.decode(text, messages.loads)["gpu_samples"]["rows"]) is list


HOSTILE = ["NaN", "Infinity", "-Infinity", "1e400", "-1", "101", "18446744073709551616",
           "9223372036854775808", "true", "false", "null", '"5"', '"\\ud800"', "[]", "{}",
           "1.5", "-0.0", "1e-400", "[" * 800 + "]" * 800]


@pytest.mark.parametrize("token", HOSTILE)
@pytest.mark.parametrize("column", ["ts", "gpu", "job", *(m.name for m in GPU_METRICS)])
def test_any_hostile_value_in_any_gpu_column_is_judged_as_before(column, token):
    envelope = _large()
    fields = envelope["gpu_samples"]["fields"]
    envelope["gpu_samples"]["rows"][5][fields.index(column)] = 271828.5
    text = json.dumps(envelope).replace("271828.5", token)
    from_typed, from_plain, typed = _both(text)
    assert from_typed == from_plain
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:  # not JSON to msgspec (NaN, a lone surrogate): all plain
        return
    assert type(typed["nic_samples"]["rows"]) is typed_decode.TypedRows  # untouched: typed


@pytest.mark.parametrize("change", [
    "unknown member", "unknown section member", "section a list", "rows before fields",
    "fields reordered", "unknown field", "field missing", "field twice", "fields not names",
    "no fields", "no rows", "duplicate member", "rows not a list", "a row too short",
    "a row an object", "an unknown job", "an unknown gpu", "a row twice", "ts in the future",
    "ts too old", "a lone surrogate in a user name",
])
def test_any_unusual_shape_is_judged_as_before(change):
    envelope = _large()
    gpu = envelope["gpu_samples"]
    text = None
    if change == "unknown member":
        envelope["extra"] = {"x": 2 ** 70}
    elif change == "unknown section member":
        gpu["note"] = "hi"
    elif change == "section a list":
        envelope["nic_samples"] = [1, 2]
    elif change == "rows before fields":
        envelope["gpu_samples"] = {"rows": gpu["rows"], "fields": gpu["fields"]}
    elif change == "fields reordered":
        gpu["fields"] = [gpu["fields"][1], gpu["fields"][0], *gpu["fields"][2:]]
    elif change == "unknown field":
        gpu["fields"].append("future_metric")
        for row in gpu["rows"]:
            row.append(2 ** 70)
    elif change == "field missing":
        gpu["fields"].pop(4)
        for row in gpu["rows"]:
            row.pop(4)
    elif change == "field twice":
        gpu["fields"][4] = "util_pct"
    elif change == "fields not names":
        gpu["fields"][4] = 7
    elif change == "no fields":
        del gpu["fields"]
    elif change == "no rows":
        del gpu["rows"]
    elif change == "duplicate member":
        text = json.dumps(envelope)[:-1] + ', "node": "other"}'
    elif change == "rows not a list":
        gpu["rows"] = {"a": 1}
    elif change == "a row too short":
        gpu["rows"][3].pop()
    elif change == "a row an object":
        gpu["rows"][3] = {"ts": NOW}
    elif change == "an unknown job":
        gpu["rows"][3][2] = "9999"
    elif change == "an unknown gpu":
        gpu["rows"][3][1] = 99
    elif change == "a row twice":
        gpu["rows"][4] = list(gpu["rows"][3])
    elif change == "ts in the future":
        gpu["rows"][3][0] = NOW + 86400
    elif change == "ts too old":
        gpu["rows"][3][0] = 1.0
    elif change == "a lone surrogate in a user name":
        envelope["jobs"][0]["user"] = "ali\ud800ce"
    from_typed, from_plain, _typed = _both(text or json.dumps(envelope))
    assert from_typed == from_plain


@pytest.mark.parametrize("depth", [900, 1_000, 5_000, 100_000])
@pytest.mark.parametrize("where", ["a member", "a row", "a metric"])
def test_nesting_deeper_than_msgspec_follows_is_judged_as_before(where, depth):
    """msgspec gives up at about 1,000 levels with a RecursionError, where the plain
    parsers follow further: the text is then read plainly, never raised out of decoding
    (which would set the batch aside instead of refusing it with its reason)."""
    envelope = _large()
    if where == "a member":
        envelope["events"] = 271828.5
    elif where == "a row":
        envelope["gpu_samples"]["rows"][5] = 271828.5
    else:
        envelope["gpu_samples"]["rows"][5][4] = 271828.5
    text = json.dumps(envelope).replace("271828.5", "[" * depth + "]" * depth)
    try:
        plain = _validated(messages.loads(text))
    except ValueError as exc:  # deeper than any parser follows: the text is refused whole
        with pytest.raises(ValueError) as typed:
            typed_decode.decode(text, messages.loads)
        assert str(typed.value) == str(exc) == "nested deeper than the parser can follow"
        return
    assert _validated(typed_decode.decode(text, messages.loads)) == plain


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(st.tuples(
    st.tuples(st.sampled_from(["gpu_samples", "nic_samples", "job_samples"]),
              st.integers(min_value=0, max_value=95), st.integers(min_value=0, max_value=17)),
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.text(max_size=5)
    | st.floats(allow_nan=True, allow_infinity=True) | st.floats(-10, 1e14)
    | st.sampled_from([NOW, NOW + 1e6, math.pi, 0, 7, "4242", [1], {"a": None}])),
    min_size=1, max_size=3))
def test_any_corruption_of_the_rows_is_judged_as_before(mutations):
    envelope = _large()
    for (section, row, column), value in mutations:
        rows = envelope[section]["rows"]
        if row < len(rows) and column < len(rows[row]):
            rows[row][column] = value
    from_typed, from_plain, _typed = _both(json.dumps(envelope))  # NaN: the token NaN
    assert from_typed == from_plain
