"""The ``gpu_health`` section's fields (contract 1, optional): GPU health counters that a
collector reads through NVML about once a minute (``docs/protocol.md``)."""

COUNTS = (
    "ecc_corrected_volatile", "ecc_uncorrected_volatile",
    "ecc_corrected_aggregate", "ecc_uncorrected_aggregate",
    "remapped_correctable", "remapped_uncorrectable",
    "retired_pages_sbe", "retired_pages_dbe",
    "nvlink_replay_errors", "nvlink_recovery_errors",
    "nvlink_crc_flit_errors", "nvlink_crc_data_errors",
    "pcie_replays",
)  # fmt: skip
FLAGS = ("remap_pending", "remap_failure", "retired_pages_pending")
FIELDS = COUNTS + FLAGS
COUNT_MAX = (1 << 63) - 1  # a bigint; NVML's counters are unsigned 32 or 64 bits
