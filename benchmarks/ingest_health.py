#!/usr/bin/env python
"""The staff ingest health page over a large ingest log: how long it takes to render.

Builds (or reuses) a database whose ``ingest_ingestbatch`` holds ``--rows`` (10 million)
batches spread over the log's retention window (INGEST_LOG_RETENTION_DAYS, 7 days): 1,000
nodes sending a batch a minute, each restarted every couple of days (new boot id, seq from
1), a batch in 2,000 lost (gaps; the runs table, ``ingest_ingestrun``, is derived from the
rows), one in 100 with refusals, spool drops or duplicates, a few nodes whose clock is
ahead. Rows go in with binary COPY built from numpy columns. Then
it renders the page (the view, as a staff user, the real template) ``--runs`` times and
prints the median and p95, and each of the page's log queries on its own.

    python benchmarks/ingest_health.py [--rows 10000000] [--runs 15] [--rebuild]

Its database is ``<DATABASE_URL's name>_ingest_health``, kept between runs (reused when
it holds the rows asked for and was built in the last hours: the page reads a window that
ends now, so older data would not be in it); ``--drop`` removes it at the end.
"""

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
DB_NAME = BASE_DB.rsplit("/", 1)[1] + "_ingest_health"
BENCH_DB = BASE_DB.rsplit("/", 1)[0] + "/" + DB_NAME
os.environ.update(DATABASE_URL=BENCH_DB, DEBUG="1", LOG_LEVEL="WARNING",
                  DJANGO_SETTINGS_MODULE="clusterui.settings")

NODES = 1000
BOOTS_PER_NODE = 4  # over the retention window: a restart every ~2 days
REUSE_FOR = dt.timedelta(hours=3)
PG_EPOCH_US = 946_684_800_000_000


def _admin(sql: str) -> None:
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql)


def _exists() -> bool:
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            [DB_NAME]).fetchone() is not None


def _fixed_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """Non-negative integers as zero-padded decimal ASCII of ``width`` bytes each."""
    digits = np.empty((len(values), width), np.uint8)
    v = values.astype(np.int64).copy()
    for i in range(width - 1, -1, -1):
        digits[:, i] = 48 + v % 10
        v //= 10
    return digits


def _payload(columns) -> bytes:
    """Binary COPY tuples for fixed-width columns: (dtype or None for raw bytes, values).
    Raw bytes columns are 2-D uint8 arrays (one row of bytes per tuple)."""
    n = len(columns[0][1])
    fields = [("count", ">i2")]
    for j, (dtype, values) in enumerate(columns):
        fields.append((f"len{j}", ">i4"))
        fields.append((f"val{j}", dtype) if dtype else (f"val{j}", "u1", values.shape[1]))
    out = np.empty(n, np.dtype(fields))
    out["count"] = len(columns)
    for j, (dtype, values) in enumerate(columns):
        out[f"len{j}"] = np.dtype(dtype).itemsize if dtype else values.shape[1]
        out[f"val{j}"] = values
    return out.tobytes()


COLUMNS = ("node_id", "boot_id", "seq", "sent_at", "received_at", "first_ts", "last_ts",
           "gpu_samples", "nic_samples", "job_samples", "events", "rejected",
           "rejected_reasons", "rejected_examples", "spool_dropped", "key_id", "duplicates",
           "duplicate_reasons")


def build(rows: int, now: dt.datetime) -> None:
    import psycopg
    from django.conf import settings
    from django.db import connection

    retention_s = settings.INGEST_LOG_RETENTION_DAYS * 86_400
    per_node = rows // NODES
    interval_s = retention_s / per_node
    now_us = int(now.timestamp() * 1e6) - PG_EPOCH_US
    rng = np.random.default_rng(14)
    with connection.cursor() as cur:
        cur.execute("TRUNCATE ingest_ingestbatch, ingest_rejectedbatch, ingest_ingestrun, "
                    "inventory_node, inventory_cluster CASCADE")
        cur.execute("INSERT INTO inventory_cluster (name, created_at) VALUES ('bench', now()) "
                    "RETURNING id")
        cluster = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO inventory_node (cluster_id, name, agent_version, simulated, "
            "first_seen, last_seen, sample_interval_s) SELECT %s, 'gpu-' || lpad(i::text, 5, "
            "'0'), '1.0', false, now() - interval '8 days', now(), 10 FROM "
            "generate_series(1, %s) i RETURNING id", [cluster, NODES])
        node_ids = np.array(sorted(r[0] for r in cur.fetchall()), np.int64)
    began = time.perf_counter()
    url = BENCH_DB.replace("postgres://", "postgresql://", 1)
    written = 0
    special = []
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute("SET synchronous_commit = off")
        # One node at a time: 10,000 batches, bounded memory.
        with cur.copy(f"COPY ingest_ingestbatch ({', '.join(COLUMNS)}) FROM STDIN "
                      "(FORMAT BINARY)") as copy:
            copy.write(b"PGCOPY\n\xff\r\n\x00" + np.array([0, 0], ">i4").tobytes())
            for k, node_id in enumerate(node_ids):
                i = np.arange(per_node, dtype=np.int64)
                phase = rng.uniform(0, interval_s)
                received = now_us - ((per_node - 1 - i) * interval_s + phase) * 1e6
                received = received.astype(np.int64)
                delay = rng.gamma(2.0, 0.4, per_node) * 1e6  # sent -> stored
                sent = received - delay.astype(np.int64)
                boot = i * BOOTS_PER_NODE // per_node
                seq = i - (boot * per_node + BOOTS_PER_NODE - 1) // BOOTS_PER_NODE + 1
                keep = rng.random(per_node) >= 1 / 2000  # lost batches: gaps
                odd = rng.random(per_node) < 0.01  # refusals, spool drops, duplicates
                if k < 3:  # three nodes whose clock is 5 minutes ahead
                    sent = received + 300_000_000
                boot_id = np.concatenate([np.full((per_node, 1), ord("n"), np.uint8),
                                          _fixed_bytes(np.full(per_node, node_id), 6),
                                          np.full((per_node, 1), ord("-"), np.uint8),
                                          _fixed_bytes(boot, 4)], axis=1)
                sel = keep & ~odd
                m = int(sel.sum())
                empty_json = np.tile(np.frombuffer(b"\x01{}", np.uint8), (m, 1))
                copy.write(_payload([
                    (">i8", np.full(m, node_id)), (None, boot_id[sel]), (">i8", seq[sel]),
                    (">i8", sent[sel]), (">i8", received[sel]),
                    (">i8", sent[sel] - 10_000_000), (">i8", sent[sel] - 1_000_000),
                    (">i4", np.full(m, 8)), (">i4", np.full(m, 4)), (">i4", np.full(m, 1)),
                    (">i4", np.zeros(m)), (">i4", np.zeros(m)), (None, empty_json),
                    (None, empty_json), (">i4", np.zeros(m)),
                    (None, np.tile(np.frombuffer(b"k1", np.uint8), (m, 1))),
                    (">i4", np.zeros(m)), (None, empty_json)]))
                written += m
                for j in np.flatnonzero(keep & odd):
                    special.append((int(node_id), boot_id[j].tobytes().decode(), int(seq[j]),
                                    int(sent[j]), int(received[j]), k))
            copy.write(np.array([-1], ">i2").tobytes())
        reasons = ["gpu_samples: util_pct out of range [0, 100]",
                   "gpu_samples: ts is more than 300 s in the future",
                   "gpu_samples: duplicate of a stored sample (gpu, ts)", "spool"]
        with cur.copy(f"COPY ingest_ingestbatch ({', '.join(COLUMNS)}) FROM STDIN "
                      "(FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "int8", "int8", "int8", "int8", "int8", "int4",
                            "int4", "int4", "int4", "int4", "jsonb", "jsonb", "int4", "text",
                            "int4", "jsonb"])
            from psycopg.types.json import Jsonb

            for n, (node_id, boot_id, seq, sent, received, k) in enumerate(special):
                # Time refusals only from the nodes whose clock is ahead.
                kind = reasons[1] if k < 3 else (reasons[0], reasons[2], reasons[3])[n % 3]
                rejected = 2 if kind in reasons[:2] else 0
                dup = 8 if kind == reasons[2] else 0
                copy.write_row((
                    node_id, boot_id, seq, sent, received, sent - 10_000_000,
                    sent - 1_000_000, 8 - rejected - dup, 4, 1, 0, rejected,
                    Jsonb({kind: rejected} if rejected else {}),
                    Jsonb({kind: "row 3: got 140.0"} if rejected else {}),
                    3 if kind == "spool" else 0, "k1", dup,
                    Jsonb({kind: dup} if dup else {})))
        written += len(special)
        cur.execute("CREATE TABLE IF NOT EXISTS bench_anchor (built_at timestamptz, n bigint)")
        cur.execute("TRUNCATE bench_anchor")
        cur.execute("INSERT INTO bench_anchor VALUES (%s, %s)", [now, written])
        conn.commit()
    print(f"  built {written:,} ingest-log rows ({NODES} nodes, a batch every "
          f"{interval_s:.0f} s each, {BOOTS_PER_NODE} boot ids per node) in "
          f"{time.perf_counter() - began:.0f} s (binary COPY)", flush=True)
    began = time.perf_counter()
    with connection.cursor() as cur:
        # The runs the writer would have kept (IngestRun), as migration 0005 derives them.
        cur.execute("TRUNCATE ingest_ingestrun")
        cur.execute(
            "INSERT INTO ingest_ingestrun (node_id, boot_id, first_seq, last_seq, batches, "
            "first_received, last_received) SELECT node_id, boot_id, min(seq), max(seq), "
            "count(*), min(received_at), max(received_at) FROM ingest_ingestbatch "
            "WHERE seq >= 1 GROUP BY node_id, boot_id")
        cur.execute("VACUUM (ANALYZE) ingest_ingestbatch")
        cur.execute("VACUUM (ANALYZE) ingest_ingestrun")
    print(f"  VACUUM ANALYZE {time.perf_counter() - began:.0f} s", flush=True)


def _reusable(rows: int) -> bool:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass('bench_anchor') IS NOT NULL")
        if not cur.fetchone()[0]:
            return False
        cur.execute("SELECT built_at, n FROM bench_anchor")
        row = cur.fetchone()
    if row is None:
        return False
    built, n = row
    fresh = dt.datetime.now(dt.UTC) - built < REUSE_FOR
    print(f"  existing database: {n:,} rows built {built:%Y-%m-%d %H:%M} UTC"
          f"{'' if fresh else ' (too old: the page window ends now; rebuilding)'}")
    return fresh and n >= rows * 0.99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    args = parser.parse_args()
    if not _exists():
        _admin(f"CREATE DATABASE {DB_NAME}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory
    from django.utils import timezone

    from clusterui.ingest import health
    from clusterui.ingest.views import ingest_health

    print(f"ingest health page over a large ingest log (database {DB_NAME})")
    if args.rebuild or not _reusable(args.rows):
        build(args.rows, timezone.now())
    else:
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM ingest_ingestrun")
            if not cur.fetchone()[0]:  # built before the runs table existed
                cur.execute(
                    "INSERT INTO ingest_ingestrun (node_id, boot_id, first_seq, last_seq, "
                    "batches, first_received, last_received) SELECT node_id, boot_id, "
                    "min(seq), max(seq), count(*), min(received_at), max(received_at) "
                    "FROM ingest_ingestbatch WHERE seq >= 1 GROUP BY node_id, boot_id")
                cur.execute("VACUUM (ANALYZE) ingest_ingestrun")
    user, _ = get_user_model().objects.get_or_create(
        username="bench-ops", defaults={"is_staff": True, "email": "ops@example.org"})
    factory = RequestFactory()

    def render() -> tuple[float, int]:
        request = factory.get("/ingest/health/")
        request.user = user
        began = time.perf_counter()
        response = ingest_health(request)
        return time.perf_counter() - began, len(response.content)

    render()  # warm: imports, template compilation, caches
    times = []
    for _ in range(args.runs):
        seconds, size = render()
        times.append(seconds)
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    now = timezone.now()
    since = health.window_start(now)
    print(f"  page render (view + template, {size:,} bytes), {args.runs} runs: "
          f"median {statistics.median(times) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
          f"max {times[-1] * 1000:.0f} ms")
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM ingest_ingestbatch WHERE received_at >= %s", [since])
        in_window = cur.fetchone()[0]
    print(f"  rows in the page's window ({(now - since).total_seconds() / 3600:.0f} h): "
          f"{in_window:,}")
    queries = {
        "gaps_by_node": lambda: health.gaps_by_node(since),
        "batch_rates": lambda: health.batch_rates(now),
        "rejected_by_reason": lambda: health.rejected_by_reason(since),
        "duplicates_by_reason": lambda: health.duplicates_by_reason(since),
        "clock_off_nodes": lambda: health.clock_off_nodes(now, since),
        "spool_drops": lambda: health.spool_drops(since),
        "batches_by_key": lambda: health.batches_by_key(now - dt.timedelta(hours=1)),
    }
    for name, query in queries.items():
        runs = []
        for _ in range(5):
            began = time.perf_counter()
            out = query()
            runs.append(time.perf_counter() - began)
        shown = len(out) if isinstance(out, list) else "-"
        print(f"    {name:22} median {statistics.median(runs) * 1000:7.1f} ms  "
              f"({shown} rows)")
    print("  (target: well under a second; the page refreshes every 15 s)")
    if args.drop:
        connection.close()
        _admin(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


if __name__ == "__main__":
    main()
