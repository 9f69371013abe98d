"""How the batches beside this file were made: ``python capture.py N FILE`` on a GPU node.

The collector's own Agent with the real NVML (``CLUSTERUI_NVML=nvml``): one sample a second
for N seconds, then one batch written to FILE and its GPU rows printed. (The script that
ran differed only in layout.)
"""

import json
import os
import sys
import time

from collectors.agent import Agent
from collectors.backend import open_backend
from collectors.config import Config


def main(ticks: int, path: str) -> None:
    config = Config.load(None, os.environ, {})
    backend = open_backend(config)
    agent = Agent(config, nvml=backend.nvml, nvml_reason=backend.reason,
                  ethtool=backend.ethtool)
    for _ in range(ticks):
        agent.sample()
        time.sleep(1.0)
    batch = agent.build_batch()
    with open(path, "w") as out:
        json.dump(batch, out)
    fields = batch["gpu_samples"]["fields"]
    for row in batch["gpu_samples"]["rows"]:
        d = dict(zip(fields, row, strict=True))
        gbps = [None if d[k] is None else round(d[k] / 1e9, 3)
                for k in ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")]
        print(f"{d['ts'] % 1000:.2f} util {d['util_pct']} sm {d['sm_active_pct']} "
              f"pcie tx {gbps[0]} rx {gbps[1]}", flush=True)
    agent.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
