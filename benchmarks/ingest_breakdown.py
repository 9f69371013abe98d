#!/usr/bin/env python
"""Where the bulk consumer's time goes, per batch: each PostgreSQL statement of a flush, and
the rest (the consumer's own Python: decoding the queue message, the signature, validation,
building the COPYs), for node-sized batches (8 GPUs, 4 InfiniBand ports, one job, one row
per device) and 1,000-GPU-row batches, next to the raw binary COPY ceiling measured in the
same run. The statements' time is what one connection cannot go below however fast the
Python around it gets: with it, the ingest targets' time budgets are checked here.

    python benchmarks/ingest_breakdown.py [--nodes 2000] [--batches 4000] [--large 200]

In process, without Redis: ``Consumer.flush`` on the queue items a collector sends
(``collectors.wire``, signed with a node key), 500 per flush as the consumer takes them,
every node's inventory already seen once (steady state). Each statement's time is its wall
time on the client (psycopg encoding its parameters, sending, the server's work, the
reply). The large batches are flushed twice: once with each group stored in line (the
split: nothing overlaps), once as the product stores them (a flush of several groups hands
each to a storing thread while the next is validated, ``consumer._Groups``): that second
time is the large batches' figure against the ceiling.
Its own scratch database, ``clusterui_bench_breakdown`` (or ``BENCH_DATABASE``).
"""

import argparse
import collections
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("BENCH_DATABASE", "clusterui_bench_breakdown")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import ingest_e2e as e2e  # noqa: E402 - after the database is chosen

FLUSH = 500  # messages per flush, the consumer's default (INGEST_BULK_MAX_MESSAGES)


class StatementClock:
    """Wall time per statement (its first words), over psycopg's execute, COPY and commit."""

    def __init__(self):
        import psycopg

        self.seconds: collections.Counter = collections.Counter()
        self._psycopg = psycopg
        self._saved = (psycopg.Cursor.execute, psycopg.Cursor.copy, psycopg.Connection.commit)

    @staticmethod
    def _name(query) -> str:
        text = " ".join(str(query if isinstance(query, str) else getattr(query, "_obj", query))
                        .split())
        return text[:64]

    def __enter__(self):
        execute, copy, commit = self._saved
        clock = self

        def timed_execute(cur, query, *args, **kwargs):
            began = time.perf_counter()
            try:
                return execute(cur, query, *args, **kwargs)
            finally:
                clock.seconds[clock._name(query)] += time.perf_counter() - began

        @contextlib.contextmanager
        def timed_copy(cur, statement, *args, **kwargs):
            began = time.perf_counter()
            with copy(cur, statement, *args, **kwargs) as cp:
                yield cp
            clock.seconds[clock._name(statement)] += time.perf_counter() - began

        def timed_commit(conn):
            began = time.perf_counter()
            try:
                return commit(conn)
            finally:
                clock.seconds["COMMIT"] += time.perf_counter() - began

        p = self._psycopg
        p.Cursor.execute, p.Cursor.copy, p.Connection.commit = (timed_execute, timed_copy,
                                                                timed_commit)
        return self

    def __exit__(self, *exc):
        p = self._psycopg
        p.Cursor.execute, p.Cursor.copy, p.Connection.commit = self._saved


class InlineStoring:
    """Stands in for the consumer's storing thread: each group is stored when handed over,
    in the flush's own thread, so that nothing overlaps and the flush's wall time less its
    statements' is exactly its Python (with the thread, a statement's wall time also counts
    the wait for the interpreter lock while the next group is validated)."""

    def __init__(self, *_args, **_kwargs):
        pass

    def submit(self, call, *args):
        import concurrent.futures

        done = concurrent.futures.Future()
        done.set_result(call(*args))
        return done

    def shutdown(self, *_args, **_kwargs):
        pass


def measure(label: str, nodes: int, count: int, samples: int, prefix: str,
            threaded: bool = False):
    """Flush ``count`` batches after one per node; print the split (the groups of a large
    flush stored in line) and return (ms per batch, the statements' ms per batch). With
    ``threaded``, flush them as the product does (groups stored by the storing thread) and
    return (ms per batch, None): the product's figure, with no split."""
    import redis

    from clusterui.ingest import consumer as consumer_module
    from clusterui.ingest.consumer import Consumer
    from collectors import wire

    envelopes = e2e.batches(nodes + count, samples=samples, prefix=prefix, nodes=nodes)
    items = [wire.task_message(env, "ingest") for env in envelopes]
    consumer = Consumer.from_settings(client=redis.Redis.from_url(e2e.BROKER))
    for i in range(0, nodes, FLUSH):
        consumer.flush(items[i:min(i + FLUSH, nodes)])
    measured = items[nodes:]
    if threaded:
        began = time.perf_counter()
        for i in range(0, len(measured), FLUSH):
            consumer.flush(measured[i:i + FLUSH])
        wall = time.perf_counter() - began
        if consumer.totals.stored - nodes != count:
            raise SystemExit(f"{label}: {consumer.totals.stored - nodes} of {count} stored")
        print(f"\n{label}, groups stored by the storing thread (the product): "
              f"{wall * 1000 / count:.3f} ms each ({count / wall:,.0f} batches/s)")
        return wall * 1000 / count, None
    real_executor = consumer_module.ThreadPoolExecutor
    consumer_module.ThreadPoolExecutor = InlineStoring
    with contextlib.ExitStack() as undo, StatementClock() as clock:
        undo.callback(setattr, consumer_module, "ThreadPoolExecutor", real_executor)
        began = time.perf_counter()
        for i in range(0, len(measured), FLUSH):
            consumer.flush(measured[i:i + FLUSH])
        wall = time.perf_counter() - began
    stored = consumer.totals.stored - nodes
    if stored != count:
        raise SystemExit(f"{label}: {stored} of {count} batches stored")
    per = 1000 / count
    statements = sum(clock.seconds.values()) * per
    print(f"\n{label}: {count} batches, {wall * per:.3f} ms each "
          f"({count / wall:,.0f} batches/s)")
    for name, seconds in clock.seconds.most_common(8):
        print(f"  {seconds * per:8.3f} ms  {name}")
    rest = len(clock.seconds) - 8
    if rest > 0:
        others = sum(s for _n, s in clock.seconds.most_common()[8:])
        print(f"  {others * per:8.3f} ms  ({rest} other statements)")
    print(f"  {statements:8.3f} ms  all PostgreSQL statements "
          f"({statements / (wall * per):.0%} of the batch)")
    print(f"  {wall * per - statements:8.3f} ms  the consumer's own Python (decode, "
          "signature, validation, building the COPYs)")
    return wall * per, statements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000, help="nodes of the small batches")
    parser.add_argument("--batches", type=int, default=4000, help="node-sized batches")
    parser.add_argument("--large", type=int, default=200, help="1,000-GPU-row batches")
    args = parser.parse_args()
    e2e.setup_database()
    import django

    django.setup()
    from clusterui.ingest.models import IngestKey
    from collectors import signing

    IngestKey.objects.create(cluster="test", key_id="bench-1", secret="bench-cluster-secret")
    e2e.SIGNER = signing.node_signer("bench-1", "bench-cluster-secret")
    print(f"bulk consumer in one process, signed batches, {FLUSH} per flush; load average "
          f"{os.getloadavg()[0]:.2f}")
    small, small_sql = measure("node-sized (8 GPU rows, 4 NIC rows, 1 job row)", args.nodes,
                               args.batches, 1, "k")
    label = "large (1,000 GPU rows, 500 NIC rows, 125 job rows)"
    _inline, large_sql = measure(label + ", groups stored in line", 50, args.large, 125, "K")
    large, _none = measure(label, 50, args.large, 125, "L", threaded=True)
    ceiling = statistics.median(e2e.copy_ceiling(200_000) for _ in range(3))
    budget = 1000 / (0.5 * ceiling) * 1000  # ms per 1,000-row batch at half the ceiling
    print(f"\nraw binary COPY ceiling, same run: {ceiling:,.0f} GPU rows/s")
    print(f"large batches: {1000 / large * 1000 / ceiling:.2f} of the ceiling; half of it "
          f"leaves {budget:.2f} ms per batch, of which the statements alone take "
          f"{large_sql:.2f} ms ({large_sql / budget:.0%})")
    print(f"node-sized batches: the statements alone take {small_sql:.3f} ms of "
          f"{small:.3f} ms, so one connection stores at most {1000 / small_sql:,.0f} "
          "batches/s with the Python around them free")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
