"""How the collector reacts to each NVML error (TELEMETRY.md section 3).

- permanent (NotSupported, FunctionNotFound, library mismatch, NoPermission): remember per
  GPU and reading, never ask again, send null;
- transient (Timeout, Unknown, NotFound, anything unexpected): null this tick only;
- lost (GpuIsLost): a ``gpu_lost`` event and nulls;
- reinit (Uninitialized, DriverNotLoaded, LibRmVersionMismatch): the library must be
  re-initialised (with backoff) before anything else is read.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

PERMANENT = "permanent"
TRANSIENT = "transient"
LOST = "lost"
REINIT = "reinit"

_BY_NAME = {
    "NVMLError_NotSupported": PERMANENT,
    "NVMLError_FunctionNotFound": PERMANENT,
    "NVMLLibraryMismatchError": PERMANENT,
    "NVMLError_NoPermission": PERMANENT,
    "NVMLError_GpuIsLost": LOST,
    "NVMLError_Uninitialized": REINIT,
    "NVMLError_DriverNotLoaded": REINIT,
    "NVMLError_LibRmVersionMismatch": REINIT,
    "NVMLError_LibraryNotFound": REINIT,
}
# nvml.h return codes, for per-entry results (field values, GPM metrics).
_BY_CODE = {3: PERMANENT, 13: PERMANENT, 4: PERMANENT, 15: LOST, 1: REINIT, 9: REINIT, 18: REINIT}
NVML_SUCCESS = 0


class NvmlGone(Exception):
    """NVML must be re-initialised (driver reload or upgrade)."""


class GpuLost(Exception):
    """The GPU fell off the bus (GpuIsLost)."""


def classify(exc: BaseException) -> str:
    for cls in type(exc).__mro__:
        kind = _BY_NAME.get(cls.__name__)
        if kind:
            return kind
    code = getattr(exc, "value", None)
    if isinstance(code, int):
        return _BY_CODE.get(code, TRANSIENT)
    return TRANSIENT


def classify_code(code: int) -> str:
    return _BY_CODE.get(code, TRANSIENT)


class Probe:
    """Calls one GPU's NVML readings, remembering the ones it can never answer."""

    def __init__(self, nvml, label: str) -> None:
        self.nvml = nvml
        self.label = label
        self.unsupported: set[str] = set()

    def supported(self, key: str) -> bool:
        return key not in self.unsupported

    def mark_unsupported(self, key: str, why: object) -> None:
        if key not in self.unsupported:
            self.unsupported.add(key)
            log.info("%s: %s not available (%s); sending null", self.label, key, why)

    def call(self, key: str, fn_name: str, *args, **kwargs):
        """``nvml.<fn_name>(*args)``, or None when it cannot answer now or ever.

        Raises ``GpuLost`` or ``NvmlGone``; the caller turns those into an event or a
        re-init.
        """
        if key in self.unsupported:
            return None
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            self.mark_unsupported(key, f"{fn_name} missing from the NVML binding")
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every NVML error has a defined outcome
            return self.handle(key, exc)

    def handle(self, key: str, exc: BaseException):
        kind = classify(exc)
        if kind == PERMANENT:
            self.mark_unsupported(key, exc)
        elif kind == LOST:
            raise GpuLost(str(exc)) from exc
        elif kind == REINIT:
            raise NvmlGone(str(exc)) from exc
        else:
            log.debug("%s: %s transient error: %r", self.label, key, exc)
        return None
