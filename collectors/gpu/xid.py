"""Xid critical errors, waited for on a thread of their own (nvmlEventSetWait blocks)."""

from __future__ import annotations

import logging
import threading

from collectors.gpu.errors import PERMANENT, REINIT, TRANSIENT, classify

log = logging.getLogger(__name__)

XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError

# Meanings from NVIDIA's Xid catalogue, for the codes that matter on compute nodes.
XID_MESSAGES = {
    13: "Graphics engine exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double bit ECC error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def xid_message(code: int) -> str:
    return XID_MESSAGES.get(code, f"Xid {code}")


class XidWatcher:
    """Registers every GPU for Xid events and appends ``(uuid, code)`` via ``on_xid``."""

    def __init__(self, nvml, handles: dict[str, object], on_xid, wait_ms: int = 1000) -> None:
        self.nvml = nvml
        self.on_xid = on_xid
        self.wait_ms = wait_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._set = None
        self._uuid_by_handle: list[tuple[object, str]] = []
        event_type = getattr(nvml, "nvmlEventTypeXidCriticalError", XID_CRITICAL_ERROR)
        try:
            self._set = nvml.nvmlEventSetCreate()
        except Exception as exc:  # noqa: BLE001 - no events means no Xid reporting, not a crash
            log.warning("Xid events unavailable: nvmlEventSetCreate failed (%s)", exc)
            return
        registered = 0
        for uuid, handle in handles.items():
            try:
                nvml.nvmlDeviceRegisterEvents(handle, event_type, self._set)
                self._uuid_by_handle.append((handle, uuid))
                registered += 1
            except Exception as exc:  # noqa: BLE001
                log.info("%s: Xid events not available (%s)", uuid, exc)
        if registered:
            self._thread = threading.Thread(target=self._run, name="xid-events", daemon=True)
            self._thread.start()

    def _uuid_of(self, device) -> str | None:
        for handle, uuid in self._uuid_by_handle:
            if handle is device:
                return uuid
        try:
            return self.nvml.nvmlDeviceGetUUID(device)
        except Exception:  # noqa: BLE001
            return None

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                data = self.nvml.nvmlEventSetWait(self._set, self.wait_ms)
            except Exception as exc:  # noqa: BLE001
                kind = classify(exc)
                if kind == TRANSIENT and (
                    "Timeout" in type(exc).__name__ or getattr(exc, "value", None) == 10
                ):
                    continue  # nothing happened in this wait
                if kind in (PERMANENT, REINIT):
                    log.warning("Xid event thread stops: %s", exc)
                    return
                failures += 1
                self._stop.wait(min(30, failures))
                continue
            failures = 0
            code = int(getattr(data, "eventData", 0))
            self.on_xid(self._uuid_of(getattr(data, "device", None)), code)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.wait_ms / 1000 + 2)
        if self._set is not None:
            try:
                self.nvml.nvmlEventSetFree(self._set)
            except Exception:  # noqa: BLE001
                pass
            self._set = None
