"""The fault tests' harness: a simulated cluster feeding through the real collector code,
a watch on the queue, and counts read straight from PostgreSQL, compared exactly."""

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import redis

from tests.services import OUTPUT, ROOT


class SimFeed:
    """``clusterui-simcluster`` as a process: 1 s sampling, 2 s batches, its own spool."""

    def __init__(self, tmp: Path, broker_url: str, *, nodes: int = 2, duration: float = 600):
        self.report_path = tmp / "sim-report.json"
        self.spool = tmp / "spool"
        self.log = open(tmp / "sim.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "collectors.sim.cluster", "--nodes", str(nodes), "--gpus", "8",
             "--interval", "1", "--flush", "2", "--broker-url", broker_url, "--cluster", "faults",
             "--root", str(tmp / "sim"), "--spool-dir", str(self.spool), "--duration",
             str(duration), "--report", str(self.report_path)],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def spooled(self) -> int:
        return len(list(self.spool.rglob("*.json")))

    def stop(self) -> dict:
        """SIGTERM (a final flush), then what the collectors produced, per node."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0
        return json.loads(self.report_path.read_text())["nodes"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def held(client) -> int:
    """Messages queued or taken and not yet acknowledged, by either kind of consumer: the
    ``ingest`` list, kombu's unacked hash, the bulk consumers' in-flight lists and the
    suspects (restored from a dead bulk consumer, waiting to be retried one at a time)."""
    inflight = sum(int(client.llen(k))
                   for k in client.scan_iter("clusterui:ingest:consumer:*:inflight:*"))
    return (int(client.llen("ingest")) + int(client.hlen("unacked")) + inflight
            + int(client.llen("ingest:suspect")))


class QueueWatch:
    """Samples the ingest queue's depth (queued + reserved) in the background."""

    def __init__(self, broker_url: str):
        self.client = redis.Redis.from_url(broker_url, socket_timeout=1,
                                           socket_connect_timeout=1)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def depth(self) -> int | None:
        try:
            return held(self.client)
        except redis.exceptions.RedisError:
            return None

    def _run(self):
        while not self._stop.wait(0.5):
            depth = self.depth()
            if depth is not None:
                self.peak = max(self.peak, depth)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def stored(database_url: str) -> dict:
    """Per node: batches, GPU samples stored, distinct (gpu, ts) and the seqs received."""
    with psycopg.connect(database_url.replace("postgres://", "postgresql://", 1)) as conn:
        batches = conn.execute(
            "SELECT n.name, b.seq, b.gpu_samples FROM ingest_ingestbatch b "
            "JOIN inventory_node n ON n.id = b.node_id ORDER BY b.id").fetchall()
        rows = dict(conn.execute(
            "SELECT n.name, count(*) FROM telemetry_gpusample s JOIN inventory_gpu g "
            "ON g.id = s.gpu_id JOIN inventory_node n ON n.id = g.node_id GROUP BY 1").fetchall())
        distinct = dict(conn.execute(
            "SELECT n.name, count(DISTINCT (s.gpu_id, s.ts)) FROM telemetry_gpusample s "
            "JOIN inventory_gpu g ON g.id = s.gpu_id JOIN inventory_node n ON n.id = g.node_id "
            "GROUP BY 1").fetchall())
    out: dict[str, dict] = {}
    for node, seq, _ in batches:
        entry = out.setdefault(node, {"seqs": [], "gpu_samples": 0, "distinct": 0})
        entry["seqs"].append(seq)
    for node, entry in out.items():
        entry["gpu_samples"] = rows.get(node, 0)
        entry["distinct"] = distinct.get(node, 0)
    return out


def compare(produced: dict, database_url: str) -> dict:
    """Lost and duplicated GPU samples, exactly: produced by the collectors vs stored."""
    have = stored(database_url)
    made = sum(p["gpu_samples"] for p in produced.values())
    rows = sum(h["gpu_samples"] for h in have.values())
    distinct = sum(h["distinct"] for h in have.values())
    return {"produced": made, "stored": rows, "lost": made - distinct,
            "duplicated": rows - distinct, "nodes": have}


def all_stored(produced: dict, database_url: str) -> bool:
    have = stored(database_url)
    return all(
        node in have and sorted(have[node]["seqs"]) == list(range(1, p["last_seq"] + 1))
        for node, p in produced.items()
    )


def record(name: str, figures: dict) -> None:
    """Keep the figures a fault test measured (the closing note quotes them)."""
    out = OUTPUT / "faults"
    out.mkdir(parents=True, exist_ok=True)
    figures = {k: v for k, v in figures.items() if k != "nodes"}
    (out / f"{name}.json").write_text(json.dumps(figures, indent=2))
    print(f"\n[fault {name}] {json.dumps(figures)}")


def wait_until(predicate, timeout: float, what: str, interval: float = 1.0) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start
