"""VictoriaMetrics built from the workload: Debian's single-node ``victoria-metrics``,
started on a scratch directory and a free port, imports the samples as Prometheus text
(``/api/v1/import/prometheus``); then ``/internal/force_flush`` and
``/internal/force_merge`` (waiting until ``vm_active_force_merges`` is 0), and a graceful
stop (SIGINT: it writes everything out) before its directory is measured. It is started
again on that directory to read every sample back through ``/api/v1/export`` (JSON lines).
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmarks.peers.exposition import FAMILIES, ReadBack, metric_of, series_key, write
from benchmarks.peers.prometheus import dir_bytes, package_version

BINARY = "/usr/bin/victoria-metrics"
# What is measured: the samples (data) and the index (indexdb), not the caches (rebuilt on
# start) nor the empty snapshot and tmp directories.
MEASURED = ("data", "indexdb")


def version() -> str:
    return package_version("victoria-metrics")  # Debian's build prints no -version


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(storage: Path):
    port = _free_port()
    log = open(storage.parent / "victoria-metrics.log", "ab")
    proc = subprocess.Popen([BINARY, f"-storageDataPath={storage}",
                             f"-httpListenAddr=127.0.0.1:{port}", "-retentionPeriod=10y",
                             "-loggerLevel=ERROR"], stdout=log, stderr=log,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    log.flush()
                    said = (storage.parent / "victoria-metrics.log").read_text()[-300:].strip()
                    raise RuntimeError(f"victoria-metrics exited {proc.returncode}"
                                       + (f": {said}" if said else "")) from None
                time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)  # graceful: flushes and closes its parts
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as r:
        return r.read()


def _active_force_merges(url: str) -> float:
    for line in _get(url + "/metrics").decode().splitlines():
        if line.startswith("vm_active_force_merges "):
            return float(line.split()[1])
    return 0.0


def build(w, work: Path) -> dict:
    """Import, flush, force-merge, stop; returns {bytes, seconds (import + flush),
    samples, dir, parts: bytes of data and indexdb}."""
    text = work / "samples.prom"
    samples = write(w, text, openmetrics=False)
    storage = work / "victoria-metrics"
    with running(storage) as url:
        began = time.perf_counter()
        with open(text, "rb") as body:
            req = urllib.request.Request(url + "/api/v1/import/prometheus", data=body,
                                         method="POST",
                                         headers={"Content-Length": str(text.stat().st_size)})
            with urllib.request.urlopen(req, timeout=3600) as r:
                r.read()
        _get(url + "/internal/force_flush")
        seconds = time.perf_counter() - began
        _get(url + "/internal/force_merge")
        time.sleep(1)
        while _active_force_merges(url):
            time.sleep(0.5)
    text.unlink()
    parts = {d: dir_bytes(storage / d) for d in MEASURED}
    return {"bytes": sum(parts.values()), "seconds": seconds, "samples": samples,
            "dir": storage, "parts": parts}


def read_back(storage: Path) -> ReadBack:
    got: dict = defaultdict(lambda: defaultdict(lambda: ([], [])))
    with running(storage) as url:
        query = urllib.parse.urlencode({"match[]": '{__name__=~"' + FAMILIES + '"}'})
        with urllib.request.urlopen(f"{url}/api/v1/export?{query}", timeout=3600) as r:
            for line in r:
                row = json.loads(line)
                labels = row["metric"]
                device = labels["gpu"] if "gpu" in labels else labels["nic"]
                ts, values = got[metric_of(labels["__name__"])][
                    series_key(labels["node"], device)]
                ts.extend(row["timestamps"])
                values.extend(row["values"])
    out: ReadBack = {}
    for m, series in got.items():
        out[m] = {}
        for key, (t, v) in series.items():
            t, v = np.array(t, np.int64), np.array(v, np.float64)
            order = np.argsort(t, kind="stable")  # an export may split a series in parts
            out[m][key] = (t[order], v[order])
    return out
