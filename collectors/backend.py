"""Choosing the NVML backend named by ``config.nvml``: real library, simulator, or none."""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import shutil
import tempfile
import time

from collectors.config import Config, ConfigError

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Backend:
    nvml: object | None
    reason: str | None = None  # why there is no NVML, for the agent's notice
    config: Config | None = None  # the config to use (the simulator moves the roots)
    sim_node: object | None = None  # advance(t) before each sample when simulating
    ethtool: object | None = None  # netdev -> ethtool statistics; None: the kernel's


def open_backend(config: Config) -> Backend:
    if config.gpu_source == "dcgm-exporter":
        # GPUs come from the exporter's page (collectors/gpu/dcgm_exporter.py): no NVML.
        return Backend(None, None, config)
    if config.nvml == "none":
        return Backend(None, "nvml = none in the configuration", config)
    if config.nvml == "sim":
        return _simulator(config)
    try:
        import pynvml
    except ImportError as exc:
        return _unavailable(config, f"cannot import pynvml: {exc}", None)
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()  # reference-counted: the agent's GPU source inits its own
    except Exception as exc:  # noqa: BLE001 - e.g. NVMLError_LibraryNotFound on CPU nodes
        return _unavailable(config, f"nvmlInit failed: {exc}", pynvml)
    return Backend(pynvml, None, config)


def _unavailable(config: Config, reason: str, module) -> Backend:
    if config.nvml == "nvml" and module is not None:
        # Asked for explicitly: keep the library, the GPU source retries with backoff.
        log.warning("NVML not ready (%s); will keep retrying", reason)
        return Backend(module, None, config)
    return Backend(None, reason, config)


def _simulator(config: Config) -> Backend:
    """One simulated node under a private directory (interface: docs/collector-interface.md)."""
    try:
        from collectors.sim.fabric import SimEthtool
        from collectors.sim.node import SimNode
        from collectors.sim.nvml import SimNVML
    except ImportError as exc:
        raise ConfigError(
            f"nvml: 'sim' needs the simulator, which is not installed ({exc}); install the "
            "clusterui-collector-sim wheel (the collector's [sim] extra)") from None

    root = tempfile.mkdtemp(prefix="clusterui-sim-")
    atexit.register(shutil.rmtree, root, True)
    node = SimNode(root, config.node, seed=config.sim_seed)
    node.advance(time.time())  # the simulated GPUs answer once the model has a time
    roots = {
        key: getattr(node, key, os.path.join(root, default))
        for key, default in (
            ("sysfs_root", "sys"),
            ("procfs_root", "proc"),
            ("cgroup_root", "sys/fs/cgroup"),
            ("job_map_dir", "run/clusterui-jobs"),
        )
    }
    return Backend(SimNVML(node), None, dataclasses.replace(config, **roots), node,
                   SimEthtool(node))
