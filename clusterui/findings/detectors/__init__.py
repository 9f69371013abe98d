"""The detectors: one small module per kind, each a plain function of numbers.

``WINDOW_DETECTORS`` decide on a job's utilization window (``detect(window, thresholds)``)
and run only past the grace period with enough samples; ``gpu_errors`` decides on the
window's events and runs always.
"""

from clusterui.findings.detectors import (
    busy_not_busy,
    comm_bound,
    gpu_errors,
    idle_gpu,
    input_bound,
    low_utilization,
    throttling,
)
from clusterui.findings.detectors.base import Decision

WINDOW_DETECTORS = (low_utilization, idle_gpu, comm_bound, input_bound, busy_not_busy,
                    throttling)

__all__ = ["WINDOW_DETECTORS", "Decision", "gpu_errors"]
