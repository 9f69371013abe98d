"""The fabric fields of NIC rows through the real validation and writer: stored per port
(``PortLink``) and where errors rose (``PortErrors``); bad values refused row by row; old
batches (no fabric fields) still accepted."""

import json
from pathlib import Path

import pytest

from clusterui.fabric.models import PortErrors, PortLink
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.telemetry.models import NicLatest
from tests.fabric_factories import fabric_batch, port
from tests.factories import EXAMPLE_PATH, node_batch

REPO_EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "contract1-example.json"

pytestmark = pytest.mark.django_db(transaction=True)


def test_link_state_and_error_increases_are_stored():
    ports = [[port(), port(link_state=1, phys_state=2)],
             [port(symbol_error=40, link_downed=1), port(link_state=1, phys_state=2)],
             [port(link_width=1, link_gbps=100.0, np_cnp_sent=7), port()]]
    ingest_envelope(fabric_batch(ports=ports))
    links = {p.nic.name: p for p in PortLink.objects.select_related("nic")}
    first, second = links["mlx5_0:1"], links["mlx5_1:1"]
    # The newest sample's state; the nominal rate from the ACTIVE samples (4X, 400 Gb/s).
    assert (first.link_width, first.link_gbps) == (1, 100.0)
    assert (first.nominal_width, first.nominal_gbps) == (4, 400.0)
    assert first.congestion == {"np_cnp_sent": 7}
    assert (second.link_state, second.nominal_gbps) == (4, 400.0)
    [errors] = PortErrors.objects.all()  # only the sample in which errors rose
    assert (errors.nic.name, errors.symbol_error, errors.link_downed) == ("mlx5_0:1", 40, 1)
    assert errors.port_rcv_errors is None  # not reported stays null, never 0


def test_an_old_batch_without_fabric_fields_is_accepted():
    ingest_envelope(node_batch(samples=3))
    batch = IngestBatch.objects.get()
    assert batch.rejected == 0 and batch.nic_samples == 3
    assert NicLatest.objects.count() == 1
    assert not PortLink.objects.exists() and not PortErrors.objects.exists()


@pytest.mark.parametrize("field, value, reason", [
    ("link_state", 9, "nic_samples: link_state out of range [0, 5]"),
    ("link_width", 0, "nic_samples: link_width out of range [1, 32]"),
    ("symbol_error", -1, "nic_samples: symbol_error out of range [0, 9.22337e+18]"),
    ("symbol_error", 2.5, "nic_samples: symbol_error must be an integer"),
    ("link_gbps", "400", "nic_samples: link_gbps must be a number or null, got str"),
])
def test_a_bad_fabric_value_refuses_its_row_only(field, value, reason):
    envelope = fabric_batch(ports=[[port()], [port(**{field: value})], [port()]])
    batch = validate_batch(envelope, max_rows=10_000, max_future_s=300)
    assert dict(batch.rejected) == {reason: 1}
    assert len(batch.nic_rows) == 2 and len(batch.fabric_rows) == 2


@pytest.mark.parametrize("path", [EXAMPLE_PATH, REPO_EXAMPLE])
def test_the_contract_examples_validate_with_or_without_fabric_fields(path):
    """The shared example (no fabric fields) and the repo's copy (with them) both land."""
    envelope = json.loads(path.read_text())
    batch = validate_batch(envelope, now=1763800000.0)
    assert batch.rejected_total == 0
    assert all(len(r) == 4 for r in batch.nic_rows)
    with_fabric = "link_state" in envelope["nic_samples"]["fields"]
    assert len(batch.fabric_rows) == (2 if with_fabric else 0)  # the InfiniBand port's rows
