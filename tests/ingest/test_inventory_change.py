"""A node's inventory that changes between two batches seconds apart (well inside the
inventory cache's trust) is written at once, a change deep inside it as well as a change
back: the cache compares the whole content (``inventory_cache``), not only the devices."""

import time

import pytest

from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batches
from clusterui.inventory.models import Gpu, Nic
from tests.factories import node_batch

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_changed_inventory_is_written_at_once_and_so_is_a_change_back(clean_samples):
    start = float(int(time.time()) - 600)

    def store(seq, *, power=700.0, link=50e9):
        batch = node_batch(node="gpu-c01", seq=seq, gpus=4, samples=1, start=start + 10 * seq)
        batch["gpus"][3]["power_limit_w"] = power
        batch["nics"][0]["link_bytes_per_s"] = link
        [result] = store_batches([validate_batch(batch)])
        assert not result.duplicate

    def stored():
        gpu = Gpu.objects.get(uuid="GPU-gpu-c01-3")
        nic = Nic.objects.get(node__name="gpu-c01", name="mlx5_0:1")
        return gpu.power_limit_w, nic.link_bytes_per_s

    store(1)
    assert stored() == (700.0, 50e9)
    store(2, power=600.0)  # one GPU's power cap lowered, 10 s later
    assert stored() == (600.0, 50e9)
    store(3, power=600.0, link=25e9)  # the port retrained at half speed
    assert stored() == (600.0, 25e9)
    store(4)  # both back as in the first batch, which the cache no longer holds
    assert stored() == (700.0, 50e9)
