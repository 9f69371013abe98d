"""The detectors' thresholds, read once per pass from the ``DETECTOR_*`` settings.

The defaults and the practice they come from are in ``docs/detectors.md``. Tests build a
``Thresholds`` directly, or with ``replace(Thresholds.from_settings(), ...)``.
"""

from dataclasses import dataclass

from django.conf import settings

# Minutes: the pass keeps per-minute sums, so windows and the grace period are judged to
# the minute whatever the sampling interval.
SLICE_S = 60
# A lag-0 correlation needs this many paired samples before it means anything.
MIN_CORRELATION_POINTS = 30

# NVML clock event reasons (nvmlClocksEventReason*). The ones that mean the GPU is being
# held back: SW power cap, HW slowdown, SW thermal, HW thermal, HW power brake.
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
# Sync boost (0x10) is left out: it only says the GPU's clocks follow the slowest GPU of
# its sync-boost group, whose own reason (if any) is reported by that GPU. GPU idle (0x1),
# application clocks (0x2) and display clocks (0x100) are settings, not throttling.
REAL_THROTTLE_BITS = SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE
THROTTLE_NAMES = {
    SW_POWER_CAP: "software power cap",
    HW_SLOWDOWN: "hardware slowdown",
    SW_THERMAL: "software thermal slowdown",
    HW_THERMAL: "hardware thermal slowdown",
    HW_POWER_BRAKE: "hardware power brake",
}


@dataclass(frozen=True)
class Thresholds:
    window_s: int = 3600
    grace_s: int = 600
    min_span_s: int = 300
    min_samples: int = 10
    settle_s: int = 30
    final_lookback_s: int = 86400
    max_samples_per_pass: int = 360
    close_after_s: int = 600
    low_util_pct: float = 25.0
    idle_gpu_pct: float = 5.0
    working_gpu_pct: float = 25.0
    busy_pct: float = 50.0
    comm_traffic_pct: float = 60.0
    comm_traffic_share: float = 0.5
    comm_correlation: float = -0.5
    quiet_net_pct: float = 20.0
    input_cpu_pct: float = 85.0
    bnb_util_pct: float = 80.0
    bnb_sm_pct: float = 20.0
    throttle_share: float = 0.3
    throttle_clock_pct: float = 90.0
    straggler_busy_gap_pct: float = 15.0
    straggler_wait_gap_pct: float = 5.0
    straggler_fabric_ratio: float = 0.5
    straggler_fabric_min_pct: float = 10.0
    straggler_error_traffic_ratio: float = 0.85
    fabric_errors: int = 10
    waste_warning_gpu_h: float = 2.0
    waste_critical_gpu_h: float = 50.0

    @classmethod
    def from_settings(cls) -> "Thresholds":
        return cls(
            window_s=settings.DETECTOR_WINDOW_S,
            grace_s=settings.DETECTOR_GRACE_S,
            min_span_s=settings.DETECTOR_MIN_SPAN_S,
            min_samples=settings.DETECTOR_MIN_SAMPLES,
            settle_s=settings.DETECTOR_SETTLE_S,
            final_lookback_s=settings.DETECTOR_FINAL_LOOKBACK_S,
            max_samples_per_pass=settings.DETECTOR_MAX_SAMPLES_PER_PASS,
            close_after_s=settings.DETECTOR_CLOSE_AFTER_S,
            low_util_pct=settings.DETECTOR_LOW_UTIL_PCT,
            idle_gpu_pct=settings.DETECTOR_IDLE_GPU_PCT,
            working_gpu_pct=settings.DETECTOR_WORKING_GPU_PCT,
            busy_pct=settings.DETECTOR_BUSY_PCT,
            comm_traffic_pct=settings.DETECTOR_COMM_TRAFFIC_PCT,
            comm_traffic_share=settings.DETECTOR_COMM_TRAFFIC_SHARE,
            comm_correlation=settings.DETECTOR_COMM_CORRELATION,
            quiet_net_pct=settings.DETECTOR_QUIET_NET_PCT,
            input_cpu_pct=settings.DETECTOR_INPUT_CPU_PCT,
            bnb_util_pct=settings.DETECTOR_BNB_UTIL_PCT,
            bnb_sm_pct=settings.DETECTOR_BNB_SM_PCT,
            throttle_share=settings.DETECTOR_THROTTLE_SHARE,
            throttle_clock_pct=settings.DETECTOR_THROTTLE_CLOCK_PCT,
            straggler_busy_gap_pct=settings.DETECTOR_STRAGGLER_BUSY_GAP_PCT,
            straggler_wait_gap_pct=settings.DETECTOR_STRAGGLER_WAIT_GAP_PCT,
            straggler_fabric_ratio=settings.DETECTOR_STRAGGLER_FABRIC_RATIO,
            straggler_fabric_min_pct=settings.DETECTOR_STRAGGLER_FABRIC_MIN_PCT,
            straggler_error_traffic_ratio=settings.DETECTOR_STRAGGLER_ERROR_TRAFFIC_RATIO,
            fabric_errors=settings.DETECTOR_FABRIC_ERRORS,
            waste_warning_gpu_h=settings.DETECTOR_WASTE_WARNING_GPU_H,
            waste_critical_gpu_h=settings.DETECTOR_WASTE_CRITICAL_GPU_H,
        )
