"""How the batches reach the server: the four delivery shapes.

- ``live``: minute by minute of data, every node's batch for that minute, a short pause
  between minutes (live, with time compressed: the server's passes run meanwhile).
- ``backlog``: after the fact and as fast as the queue takes it, node after node, each
  node's whole history oldest first (collectors replaying a spool, a back-fill, a consumer
  that was down).
- ``out-of-order``: every batch of the shape in a random order, in bursts.
- ``spool-replay``: live, until one node of every job is cut off (the only node of a
  single-node job, the second of a multi-node one) for two hours of data while the others
  go on; the run waits, in real time, until the server has ended the cut-off single-node
  jobs for silence; then the cut-off nodes replay their spool, oldest first, and the stream
  goes on live to the end.

``Delivery`` is what a shape needs from the server: send batches, wait, and wait until
jobs are ended.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Protocol

from clusterui.findings.matrix.generate import NodeFeed, Plan

TICK_S = 0.2  # between minutes of data in the live parts
BURST = 40  # batches per burst, out of order


class Delivery(Protocol):
    def send(self, batches: list[dict]) -> None: ...

    def sleep(self, seconds: float) -> None: ...

    def wait_ended(self, external_ids: list[str]) -> None: ...


def _by_time(feeds: list[NodeFeed], lo: float = float("-inf"), hi: float = float("inf")
             ) -> list[list[dict]]:
    minutes: dict[float, list[dict]] = defaultdict(list)
    for feed in feeds:
        for t, batch in zip(feed.times, feed.batches, strict=True):
            if lo < t <= hi:
                minutes[t].append(batch)
    return [minutes[t] for t in sorted(minutes)]


def _live(out: Delivery, feeds, lo=float("-inf"), hi=float("inf")) -> None:
    for batches in _by_time(feeds, lo, hi):
        out.send(batches)
        out.sleep(TICK_S)


def live(plan: Plan, out: Delivery) -> None:
    _live(out, plan.feeds["live"])


def backlog(plan: Plan, out: Delivery) -> None:
    for feed in plan.feeds["backlog"]:
        out.send(feed.batches)


def out_of_order(plan: Plan, out: Delivery, seed: int = 7) -> None:
    batches = [b for feed in plan.feeds["out-of-order"] for b in feed.batches]
    random.Random(seed).shuffle(batches)
    for i in range(0, len(batches), BURST):
        out.send(batches[i:i + BURST])
        out.sleep(TICK_S / 4)


def cut_off(feeds: list[NodeFeed]) -> list[NodeFeed]:
    """The node of each job that the spool-replay shape cuts off."""
    ranks: dict[str, int] = defaultdict(int)
    for feed in feeds:
        ranks[feed.job_id] = max(ranks[feed.job_id], feed.rank)
    return [f for f in feeds if f.rank == min(1, ranks[f.job_id])]


def spool_replay(plan: Plan, out: Delivery) -> None:
    feeds = plan.feeds["spool-replay"]
    cut = cut_off(feeds)
    cut_names = {f.name for f in cut}
    others = [f for f in feeds if f.name not in cut_names]
    t1, t2 = plan.cut()
    _live(out, feeds, hi=t1)
    _live(out, others, lo=t1, hi=t2)
    # Single-node jobs whose node is cut off: the server must end them for silence first.
    ranks = defaultdict(int)
    for f in feeds:
        ranks[f.job_id] = max(ranks[f.job_id], f.rank)
    silent = sorted({f.job_id for f in cut if ranks[f.job_id] == 0
                     and f.times and f.times[0] <= t1})
    out.wait_ended(silent)
    for feed in cut:  # the spools, each oldest first
        out.send([b for t, b in zip(feed.times, feed.batches, strict=True) if t1 < t <= t2])
    _live(out, feeds, lo=t2)


SHAPE_RUNNERS = {"live": live, "backlog": backlog, "out-of-order": out_of_order,
                 "spool-replay": spool_replay}
