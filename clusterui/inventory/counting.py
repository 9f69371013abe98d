"""How GPUs are counted wherever a figure says "GPUs": physical GPUs, never MIG instances.

A MIG-enabled GPU is stored as a GPU, and each of its MIG instances as a GPU of its own
under it (``Gpu.parent``). Counting rows would count an H100 split into 7 instances as 8
GPUs. The rules, one place for the ORM and the SQL of ``/metrics``:

- **GPUs** are physical GPUs: rows without a parent (``physical``).
- **Allocated** is each allocated row's share of a GPU (``share``): 1 for a whole GPU,
  ``mig_share`` for a MIG instance (its slices over the GPU's, 1/7 for a 1g.10gb on an
  H100). A MIG-enabled GPU itself is held by no job while its instances are listed
  (``docs/collector.md``, "MIG instances"), so a GPU with 3 of 7 slices held is 3/7
  allocated, and with all 7 held it is 1.
- **Busy / idle** are judged on a row's busy figure (``busy_pct``): the larger of NVML
  utilization and SM activity (GPM), whichever the GPU reports. They cover different
  times: NVML's utilization is the share of its last sample period (1/6 s to 1 s) in
  which any kernel ran, GPM's SM activity the mean over the whole sampling interval. A
  kernel on any SM makes the GPU busy, so SM activity is a floor of the interval's busy
  time: a spiky job whose last second was quiet (NVML 4 %) but whose SMs were 42 % active
  over the interval is working, not idle. And a GPU that only copies (NVML 99 %, SM 0 %,
  ``tests/data/real-h200/``) is busy now; that it wastes its SMs is the low-utilization
  detector's call, over time. A MIG instance has no NVML utilization, so its SM activity
  alone decides; an instance with neither is neither busy nor idle, as in job efficiency.
  A MIG-enabled GPU itself has no busy figure: its instances' shares make up its cell (its
  own GPM reading is the whole GPU's, and would count it twice).
- **Gone** GPUs are not counted (``present``): those their node has stopped reporting
  while it reports (their ``last_seen`` more than ``GPU_GONE_AFTER_S`` behind the node's,
  both data time): a GPU taken out or replaced (its successor has a new UUID), a MIG
  instance destroyed when the GPU was split another way. Their latest sample would
  otherwise stand for "now" forever. A node that goes silent keeps its GPUs (it is silent,
  which every page says).
"""

import datetime as dt

from django.conf import settings
from django.db.models import Case, F, FloatField, Q, Value, When
from django.db.models.functions import Coalesce, Greatest

# A GPU counts as busy at or above this busy figure (``busy_pct``: NVML utilization or SM
# activity, the larger).
BUSY_UTIL_PCT = 10.0


def physical(prefix: str = "") -> Q:
    """The GPUs a user counts: whole GPUs and MIG-enabled GPUs, not their instances
    (``Gpu.objects.physical()`` for GPUs themselves). ``prefix`` reaches the GPU through
    a relation (``"gpus__"`` from a node)."""
    return Q(**{f"{prefix}parent__isnull": True})


def present(prefix: str = "", node: str = "node__") -> Q:
    """The GPUs their node still reports (see "Gone" above). ``prefix`` reaches the GPU,
    ``node`` its node, from the query's model: ``present()`` on GPUs,
    ``present("gpus__", "")`` on nodes."""
    gone_after = dt.timedelta(seconds=settings.GPU_GONE_AFTER_S)
    return Q(**{f"{prefix}last_seen__gte": F(f"{node}last_seen") - gone_after})


def is_gone(device, node) -> bool:
    """``present`` on a GPU (or a NIC, by the same rule) and its node already loaded."""
    return device.last_seen < node.last_seen - dt.timedelta(seconds=settings.GPU_GONE_AFTER_S)


def share(prefix: str = ""):
    """How much of a GPU a row is: 1, or a MIG instance's ``mig_share``."""
    return Coalesce(F(f"{prefix}mig_share"), Value(1.0), output_field=FloatField())


def busy_pct(prefix: str = ""):
    """The row's busy figure now, from its latest sample (see the module docstring)."""
    # GREATEST skips nulls (null only when both are): PostgreSQL's, as the SQL below.
    return Case(
        When(**{f"{prefix}mig_mode": True}, then=Value(None)),
        default=Greatest(F(f"{prefix}latest__util_pct"), F(f"{prefix}latest__sm_active_pct")),
        output_field=FloatField())


# The same rules in SQL, for the hand-written queries of /metrics: ``g`` is inventory_gpu,
# ``l`` its telemetry_gpulatest row.
SQL_PHYSICAL = "g.parent_id IS NULL"
# ``n`` is the GPU's inventory_node; the parameter %(gpu_gone_after)s is GPU_GONE_AFTER_S.
SQL_PRESENT = "g.last_seen >= n.last_seen - make_interval(secs => %(gpu_gone_after)s)"
SQL_SHARE = "COALESCE(g.mig_share, 1)"
SQL_BUSY_PCT = ("CASE WHEN g.mig_mode THEN NULL "
                "ELSE GREATEST(l.util_pct, l.sm_active_pct) END")


# The same rules on GPUs already loaded with their latest sample (the API's nodes).
def share_of(gpu) -> float:
    return gpu.mig_share if gpu.mig_share is not None else 1.0


def busy_pct_of(gpu, latest) -> float | None:
    if gpu.mig_mode:
        return None
    present = [v for v in (latest.util_pct, latest.sm_active_pct) if v is not None]
    return max(present) if present else None
