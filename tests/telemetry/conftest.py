import pytest

from clusterui.telemetry import partitions


@pytest.fixture(autouse=True)
def _forget_partitions():
    """A test's partitions go with its rolled-back transaction: so must the cache of them."""
    yield
    partitions.forget_known()
