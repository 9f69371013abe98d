#!/usr/bin/env python
"""The bulk consumer at steady state *with the clock moving*: every node sends one batch per
10 s flush interval, and between rounds the ingest worker's clock moves on 10 s, so whatever
the writer does once a minute of wall time (refreshing what it remembers of each node's
inventory) is counted, as a cluster would make it pay. A benchmark that stores its batches
in a few seconds of wall time (``ingest_e2e.py``) never reaches that minute.

    python benchmarks/ingest_steady.py [--nodes 1000] [--rounds 12] [--signed]
                                       [--against [REV] [--pairs 2] | --tree PATH]

In process, without Redis: ``Consumer.flush`` on the queue items collectors send, 500 per
flush, one warm-up round first. ``--tree`` runs another checkout's consumer (e.g. a
``git worktree`` of an older commit) with this same driver, for before/after figures in one
session; ``--signed`` signs as collectors do (trees from before signatures: leave it off).
Its own scratch database, ``clusterui_bench_steady`` (or ``BENCH_DATABASE``).

``--against [REV]`` (alone, as ``make bench`` gives it: ``ISSUE_TREE``, the commit issue 17
was filed on) checks that commit out in a temporary ``git worktree`` and runs it and this
tree alternately, ``--pairs`` times each, unsigned (as that tree's collectors sent), each
run in a process of its own, then prints the ratio of their rates: issue 17's "node-sized
batches >= 3x today's rate, measured in the same run". This machine's speed drifts by a
tenth or more from one run to the next, hence the alternation and the figure of every run.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLUSH = 500
INTERVAL_S = 10.0
ROOT = Path(__file__).resolve().parent.parent
ISSUE_TREE = "42da635"  # main when issue 17 was filed


def against(rev: str, pairs: int, passed: list[str]) -> None:
    """Run ``rev`` and this tree alternately; print each run's figure and the ratio."""
    if shutil.which("git") is None or subprocess.call(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"],
            stderr=subprocess.DEVNULL) != 0:
        print(f"commit {rev} is not in this checkout's history: no before/after ratio "
              "(run from a git clone of the project)")
        return
    scratch = Path(tempfile.mkdtemp(prefix="clusterui-steady-"))
    old = scratch / rev
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(old),
                    rev], check=True)
    figures: dict[str, list[float]] = {rev: [], "this tree": []}
    try:
        for _ in range(pairs):
            for label, tree in ((rev, old), ("this tree", ROOT)):
                out = subprocess.run([sys.executable, __file__, "--tree", str(tree), *passed],
                                     check=True, capture_output=True, text=True).stdout
                sys.stdout.write(out)
                figures[label].append(float(re.search(r"([\d.]+) ms per batch", out)[1]))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    before, after = figures[rev], figures["this tree"]
    issue_tree = rev == ISSUE_TREE
    print(f"\nalternated with {rev}{' (issue 17 filed)' if issue_tree else ''}, {pairs} runs "
          "each, unsigned:")
    for label, ms in figures.items():
        print(f"  {label:>10}: " + ", ".join(f"{x:.3f}" for x in ms)
              + f" ms per batch (median {statistics.median(ms):.3f})")
    pair_ratios = ", ".join(f"{b / a:.2f}x" for b, a in zip(before, after, strict=True))
    ratio = statistics.mean(before) / statistics.mean(after)
    print(f"  node-sized batches at steady state: {ratio:.2f}x {rev}'s rate (means of the "
          f"runs; pair by pair {pair_ratios}{'; target 3x' if issue_tree else ''})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=12, help="10 s flush intervals")
    parser.add_argument("--signed", action="store_true")
    parser.add_argument("--tree", default=None,
                        help="the checkout whose consumer runs (default: this one)")
    parser.add_argument("--against", nargs="?", const=ISSUE_TREE, default=None, metavar="REV",
                        help=f"alternate with this commit (alone: {ISSUE_TREE}, issue 17 filed)")
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    if args.against:
        if args.tree or args.signed:
            parser.error("--against runs both trees unsigned, each with its own --tree")
        against(args.against, args.pairs, ["--nodes", str(args.nodes),
                                           "--rounds", str(args.rounds)])
        return
    args.tree = args.tree or str(ROOT)
    os.environ.setdefault("BENCH_DATABASE", "clusterui_bench_steady")
    sys.path.insert(0, str(Path(args.tree).resolve()))
    from benchmarks import ingest_e2e as e2e  # the tree's own, for its database set-up

    e2e.setup_database()
    import django

    django.setup()
    import redis

    from clusterui.ingest import inventory_cache
    from clusterui.ingest.consumer import Consumer
    from collectors import wire

    if args.signed:
        from clusterui.ingest.models import IngestKey
        from collectors import signing

        IngestKey.objects.create(cluster="test", key_id="bench-1", secret="bench-secret")
        e2e.SIGNER = signing.node_signer("bench-1", "bench-secret")
    n = args.nodes
    envelopes = e2e.batches(n * (args.rounds + 1), samples=1, prefix="t", nodes=n)
    items = [wire.task_message(env, "ingest") for env in envelopes]
    # The worker's clock, as the inventory cache reads it, moves 10 s per round.
    moved = [0.0]
    real = time.monotonic
    inventory_cache.time = type("Clock", (), {"monotonic": staticmethod(
        lambda: real() + moved[0])})
    consumer = Consumer.from_settings(client=redis.Redis.from_url(e2e.BROKER))
    for i in range(0, n, FLUSH):
        consumer.flush(items[i:i + FLUSH])
    per_round = []
    began, cpu = time.perf_counter(), time.process_time()
    for r in range(1, args.rounds + 1):
        moved[0] += INTERVAL_S
        t = time.perf_counter()
        chunk = items[r * n:(r + 1) * n]
        for i in range(0, len(chunk), FLUSH):
            consumer.flush(chunk[i:i + FLUSH])
        per_round.append((time.perf_counter() - t) / n * 1000)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    count = n * args.rounds
    stored = consumer.totals.stored - n
    if stored != count:
        raise SystemExit(f"{stored} of {count} batches stored")
    print(f"{args.tree}: {n} nodes x {args.rounds} rounds of {INTERVAL_S:g} s, "
          f"{'signed' if args.signed else 'unsigned'}, load average {os.getloadavg()[0]:.2f}")
    print(f"  {wall / count * 1000:.3f} ms per batch ({count / wall:,.0f} batches/s), "
          f"consumer CPU {cpu / count * 1000:.3f} ms")
    print("  ms per batch, round by round: " + " ".join(f"{x:.2f}" for x in per_round))


if __name__ == "__main__":
    main()
