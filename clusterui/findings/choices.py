from django.db import models


class FindingKind(models.TextChoices):
    LOW_UTILIZATION = "low_utilization", "Low GPU utilization"
    IDLE_GPU = "idle_gpu", "Idle allocated GPU"
    COMM_BOUND = "comm_bound", "Communication-bound"
    INPUT_BOUND = "input_bound", "Input / data-loader bound"
    BUSY_NOT_BUSY = "busy_not_busy", "Looks busy but is not"
    THROTTLING = "throttling", "Thermal or power throttling"
    GPU_ERRORS = "gpu_errors", "GPU errors"
    STRAGGLER = "straggler", "Straggler node"
    GPU_HEALTH = "gpu_health", "GPU needs reset or replacement"
    FABRIC_LINK = "fabric_link", "Degraded or erroring fabric link"


class Severity(models.TextChoices):
    INFO = "info", "Info"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"

    @property
    def color(self) -> str:
        # Colour-blind-safe pairs (blue / orange / vermilion, Okabe-Ito).
        return {"info": "#0072B2", "warning": "#E69F00", "critical": "#D55E00"}[self.value]

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "critical": 2}[self.value]


class FindingState(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


class UtilSource(models.TextChoices):
    """Which signal "used" GPU time was weighted by."""

    SM_ACTIVE = "sm_active", "SM activity (GPM)"
    NVML_UTIL = "nvml_util", "GPU utilization (NVML)"
    MIXED = "mixed", "SM activity (GPM) where reported, GPU utilization (NVML) elsewhere"
