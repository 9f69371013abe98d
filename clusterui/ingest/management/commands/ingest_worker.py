import logging
import multiprocessing
import os
import signal
import socket
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from clusterui.ingest import deadletter
from clusterui.ingest.consumer import Consumer
from clusterui.ingest.queue import PREFIX, ReliableQueue

log = logging.getLogger("clusterui.ingest.consumer")

# A child that dies is restarted after 1 s, then 2, 4 ... up to this many seconds while it
# keeps dying soon after its start; one that ran for STABLE_S starts the series again.
RESTART_BACKOFF_MAX_S = 60.0
STABLE_S = 60.0


def consumer_id(token: str, pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{token}"


def _child(token: str) -> None:
    connections.close_all()  # never share the parent's sockets
    Consumer.from_settings(consumer_id=consumer_id(token, os.getpid())).run()


class Command(BaseCommand):
    help = ("Consume the ingest queue in bulk: many collector batches per transaction "
            "(the fast path; Celery workers may share the same queue safely).")

    def add_arguments(self, parser):
        parser.add_argument("--processes", "-c", type=int, default=1,
                            help="consumer processes to run and supervise (default 1: this "
                                 "process consumes itself, unsupervised)")
        parser.add_argument("--exit-when-empty", action="store_true",
                            help="stop once the queue is empty (back-fills, benchmarks)")

    def handle(self, *args, **o):
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if not 1 <= o["processes"] <= 256:
            raise CommandError("--processes must be between 1 and 256")
        if o["processes"] == 1:
            consumer = Consumer.from_settings()
            until = None
            if o["exit_when_empty"]:
                def until():
                    q = consumer.queue
                    return q.client.llen(q.queue) == 0 and q.suspects() == 0
            totals = consumer.run(until=until)
            self.stdout.write(
                f"stored {totals.stored} batches ({totals.gpu_samples} GPU samples), "
                f"{totals.duplicates} duplicates skipped, {totals.refused} refused, "
                f"{totals.dead_lettered} dead-lettered")
            return
        if o["exit_when_empty"]:
            raise CommandError("--exit-when-empty works with one process only")
        self._supervise(o["processes"])

    def _supervise(self, n: int) -> None:
        """Run n consumers; restart one that dies (capped exponential backoff) and give its
        in-flight messages back at once, as suspects; on SIGTERM/SIGINT stop them all. No
        child's death ends this process."""
        ctx = multiprocessing.get_context("fork")
        connections.close_all()
        slots: list[dict] = [{"proc": None, "token": "", "started": 0.0, "failures": 0,
                              "restart_at": 0.0} for _ in range(n)]
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not stopping:
            now = time.monotonic()
            for i, slot in enumerate(slots):
                proc = slot["proc"]
                if proc is None:
                    if now >= slot["restart_at"] and not stopping:
                        slot["token"] = uuid.uuid4().hex[:8]
                        slot["proc"] = ctx.Process(target=_child, args=(slot["token"],),
                                                   daemon=False, name=f"ingest-consumer-{i}")
                        slot["proc"].start()
                        slot["started"] = now
                    continue
                if proc.is_alive() or stopping:
                    continue
                proc.join()
                ran = now - slot["started"]
                slot["failures"] = 1 if ran >= STABLE_S else slot["failures"] + 1
                delay = min(2.0 ** (slot["failures"] - 1), RESTART_BACKOFF_MAX_S)
                log.error("consumer process %s exited with code %s after %.0f s; restarting "
                          "in %.0f s", proc.pid, proc.exitcode, ran, delay)
                self._recover(consumer_id(slot["token"], proc.pid))
                slot["proc"] = None
                slot["restart_at"] = now + delay
            time.sleep(0.5)
        for slot in slots:
            if slot["proc"] is not None and slot["proc"].is_alive():
                os.kill(slot["proc"].pid, signal.SIGTERM)
        for slot in slots:
            if slot["proc"] is not None:
                slot["proc"].join(60)

    def _recover(self, dead_id: str) -> None:
        """The child is certainly dead (we reaped it): its liveness key means nothing now.
        Give its in-flight messages back at once, as suspects, rather than after the key's
        expiry; if Redis is away, the next sweep anywhere does it."""
        try:
            queue = ReliableQueue(deadletter.client(timeout=5), settings.INGEST_QUEUE,
                                  consumer_id=f"supervisor:{os.getpid()}")
            queue.client.delete(f"{PREFIX}:{queue.queue}:alive:{dead_id}")
            n = queue.restore_dead(dead_id)
            if n:
                log.warning("requeued %d in-flight messages of dead consumer %s (as suspects)",
                            n, dead_id)
        except Exception as exc:  # noqa: BLE001 - the sweeps will do it after the TTL
            log.warning("could not requeue the dead consumer's messages now (%s); a sweep "
                        "will once its liveness key expires", exc)
