"""GPU health counters: ECC, remapped rows, retired pages, NVLink and PCIe error counters.

They change rarely (an ECC error, a row remap) and some cost one NVML call per NVLink link,
so they are read once every ``HEALTH_EVERY_S`` (and at the first sample), not every tick.
Each is null when the GPU cannot report it (``NVML_ERROR_NOT_SUPPORTED``: no ECC on the
board, no row remapper before Ampere, no page retirement from Ampere on, no NVLink on a
PCIe board), never zero. Sources: ``docs/collector.md``, "GPU health counters".
"""

from __future__ import annotations

HEALTH_EVERY_S = 60.0

MEMORY_ERROR_CORRECTED = 0  # NVML_MEMORY_ERROR_TYPE_CORRECTED
MEMORY_ERROR_UNCORRECTED = 1
VOLATILE_ECC = 0  # NVML_VOLATILE_ECC: since the last driver load / GPU reset
AGGREGATE_ECC = 1  # NVML_AGGREGATE_ECC: the GPU's lifetime (InfoROM)
RETIRED_SBE = 0  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
RETIRED_DBE = 1
NVLINK_MAX_LINKS = 18  # NVLink 4 (Hopper) has 18; NVML_NVLINK_MAX_LINKS is an upper bound
NVLINK_ERRORS = (  # (name, NVML_NVLINK_ERROR_DL_*)
    ("nvlink_replay_errors", 0),
    ("nvlink_recovery_errors", 1),
    ("nvlink_crc_flit_errors", 2),
    ("nvlink_crc_data_errors", 3),
)

FIELDS = (
    "ecc_corrected_volatile", "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate", "ecc_uncorrected_aggregate",
    "remapped_correctable", "remapped_uncorrectable", "remap_pending", "remap_failure",
    "retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending",
    *(name for name, _ in NVLINK_ERRORS),
    "pcie_replays",
)  # fmt: skip
BOOLEAN_FIELDS = frozenset({"remap_pending", "remap_failure", "retired_pages_pending"})


class HealthReader:
    """One GPU's health counters, every ``every_s`` seconds."""

    def __init__(self, nvml, probe, handle, every_s: float = HEALTH_EVERY_S) -> None:
        self.nvml = nvml
        self.probe = probe
        self.handle = handle
        self.every_s = every_s
        self._next = None  # when the next reading is due (clock time)
        self._links: list[int] | None = None  # the NVLink links that answer

    def due(self, now: float) -> bool:
        return self._next is None or now >= self._next

    def read(self, now: float) -> dict | None:
        """``{field: value}`` (absent: null) when due, else None. Raises GpuLost/NvmlGone."""
        if not self.due(now):
            return None
        self._next = now + self.every_s
        p, h = self.probe, self.handle
        out: dict = {}
        for name, error, counter in (
            ("ecc_corrected_volatile", MEMORY_ERROR_CORRECTED, VOLATILE_ECC),
            ("ecc_uncorrected_volatile", MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC),
            ("ecc_corrected_aggregate", MEMORY_ERROR_CORRECTED, AGGREGATE_ECC),
            ("ecc_uncorrected_aggregate", MEMORY_ERROR_UNCORRECTED, AGGREGATE_ECC),
        ):
            out[name] = p.call(name, "nvmlDeviceGetTotalEccErrors", h, error, counter)
        rows = p.call("remapped_rows", "nvmlDeviceGetRemappedRows", h)
        if rows is not None:
            corr, unc, pending, failure = rows
            out["remapped_correctable"], out["remapped_uncorrectable"] = int(corr), int(unc)
            out["remap_pending"], out["remap_failure"] = bool(pending), bool(failure)
        for name, cause in (("retired_pages_sbe", RETIRED_SBE), ("retired_pages_dbe", RETIRED_DBE)):
            pages = p.call(name, "nvmlDeviceGetRetiredPages", h, cause)
            out[name] = None if pages is None else len(pages)
        pending = p.call("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h)
        out["retired_pages_pending"] = None if pending is None else bool(pending)
        out.update(self._nvlink())
        out["pcie_replays"] = p.call("pcie_replays", "nvmlDeviceGetPcieReplayCounter", h)
        return {k: v for k, v in out.items() if v is not None}

    def _nvlink(self) -> dict:
        """Each NVLink error counter summed over the links that answer; none: null."""
        p, h = self.probe, self.handle
        if self._links is None:
            self._links = []
            for link in range(NVLINK_MAX_LINKS):
                if p.call(f"nvlink_state:{link}", "nvmlDeviceGetNvLinkState", h, link) is None:
                    break  # links are numbered from 0: the first that cannot answer ends them
                self._links.append(link)
        links, out = self._links, {}
        if not links:
            self._links = None  # asked again next time (a transient error; cached if not)
        for name, counter in NVLINK_ERRORS:
            total, answered = 0, False
            for link in links:
                value = p.call(f"{name}:{link}", "nvmlDeviceGetNvLinkErrorCounter", h, link,
                               counter)
                if value is not None:
                    total, answered = total + int(value), True
            if answered:
                out[name] = total
        return out
