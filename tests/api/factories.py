"""The API tests' cast: the shared rows (``tests/rows.py``) with the per-GPU figures and the
evidence these tests assert on."""

from tests.rows import cluster, job  # noqa: F401  (the tests use them through this module)
from tests.rows import finding as _finding
from tests.rows import node as _node


def _latest(i: int) -> dict:
    return {"util_pct": 10.0 * (i + 1), "power_w": 300.0 + i, "mem_used_mib": 1000 * (i + 1),
            "temp_c": 60.0}


def node(name="gpu-a001", *, gpus=2, **kwargs):
    return _node(name, gpus=gpus, latest_values=_latest, **kwargs)


def finding(j, kind="low_utilization", **kwargs):
    kwargs.setdefault("evidence", {"mean_util_pct": 7.9})
    return _finding(j, kind, **kwargs)
