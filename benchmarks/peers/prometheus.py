"""Prometheus' TSDB built from the workload: Debian's ``promtool tsdb
create-blocks-from openmetrics`` (the documented backfill path) writes the blocks, their
directory is measured, and ``promtool tsdb dump`` reads every sample back (it prints each
value with Go's ``%g``: the shortest decimal that reads back as the same float64)."""

import re
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.peers.exposition import ReadBack, metric_of, series_key, write

PROMTOOL = "/usr/bin/promtool"
# Labels in name order: a GPU's series has gpu and node, a port's nic and node.
_LINE = re.compile(r'\{__name__="([^"]+)", (?:gpu|nic)="([^"]+)", node="([^"]+)"\} (\S+) (\d+)$')


def dir_bytes(path: Path) -> int:
    """The bytes of every file under ``path`` (their lengths, as the block sizes add up)."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def package_version(package: str) -> str:
    """The Debian package's version (upstream part), or "?"."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                         capture_output=True, text=True)
    return out.stdout.split("+")[0].split("-")[0] if out.returncode == 0 else "?"


def version() -> str:
    return package_version("prometheus")


def build(w, work: Path) -> dict:
    """Write the OpenMetrics text, make the blocks; returns {bytes, blocks, seconds,
    samples, dir, parts: bytes by kind of file}."""
    text = work / "samples.om"
    samples = write(w, text, openmetrics=True)
    out = work / "prometheus"
    began = time.perf_counter()
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(text), str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - began
    text.unlink()
    blocks = [p for p in out.iterdir() if p.is_dir()]
    chunks = sum(dir_bytes(b / "chunks") for b in blocks)
    index = sum((b / "index").stat().st_size for b in blocks)
    total = dir_bytes(out)
    return {"bytes": total, "blocks": len(blocks), "seconds": seconds, "samples": samples,
            "dir": out, "parts": {"chunks": chunks, "index": index,
                                  "meta and tombstones": total - chunks - index}}


def read_back(out: Path) -> ReadBack:
    """Every sample in the blocks under ``out``."""
    (out / "wal").mkdir(exist_ok=True)  # dump opens the directory as a database
    got: dict = defaultdict(lambda: defaultdict(lambda: ([], [])))
    with subprocess.Popen([PROMTOOL, "tsdb", "dump", str(out)], stdout=subprocess.PIPE,
                          text=True, bufsize=1 << 20) as proc:
        for line in proc.stdout:
            m = _LINE.match(line.rstrip("\n"))
            if not m:
                raise ValueError(f"promtool tsdb dump printed an unexpected line: {line!r}")
            name, device, node, value, ts = m.groups()
            ts_list, values = got[metric_of(name)][series_key(node, device)]
            ts_list.append(int(ts))
            values.append(float(value))
    if proc.returncode:
        raise RuntimeError(f"promtool tsdb dump exited {proc.returncode}")
    return {m: {k: (np.array(t, np.int64), np.array(v)) for k, (t, v) in s.items()}
            for m, s in got.items()}
