"""The detectors: one small module per kind, each a plain function of numbers.

``WINDOW_DETECTORS`` decide on a job's utilization window (``detect(window, thresholds)``)
and run only past the grace period with enough samples; ``gpu_errors`` decides on the
window's events and runs always. ``RETIRED_KINDS`` are no longer raised (``busy_not_busy``
is ``low_utilization``'s explanation now): their findings still open close as the others do.
"""

from clusterui.findings.choices import FindingKind
from clusterui.findings.detectors import (
    comm_bound,
    gpu_errors,
    idle_gpu,
    input_bound,
    low_utilization,
    straggler,
    throttling,
)
from clusterui.findings.detectors.base import Decision

WINDOW_DETECTORS = (low_utilization, idle_gpu, comm_bound, input_bound, throttling,
                    straggler)
RETIRED_KINDS = frozenset({FindingKind.BUSY_NOT_BUSY})

__all__ = ["RETIRED_KINDS", "WINDOW_DETECTORS", "Decision", "gpu_errors"]
