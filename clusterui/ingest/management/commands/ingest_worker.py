import logging
import multiprocessing
import os
import signal
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from clusterui.ingest.consumer import Consumer

log = logging.getLogger("clusterui.ingest.consumer")


def _child() -> None:
    connections.close_all()  # never share the parent's sockets
    Consumer.from_settings().run()


class Command(BaseCommand):
    help = ("Consume the ingest queue in bulk: many collector batches per transaction "
            "(the fast path; Celery workers may share the same queue safely).")

    def add_arguments(self, parser):
        parser.add_argument("--processes", "-c", type=int, default=1,
                            help="consumer processes to run and supervise (default 1)")
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
                    return consumer.queue.client.llen(consumer.queue.queue) == 0
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
        """Run n consumers; restart one that dies; on SIGTERM/SIGINT stop them all."""
        ctx = multiprocessing.get_context("fork")
        connections.close_all()
        children = [ctx.Process(target=_child, daemon=False) for _ in range(n)]
        for child in children:
            child.start()
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not stopping:
            time.sleep(0.5)
            for i, child in enumerate(children):
                if not child.is_alive() and not stopping:
                    log.error("consumer process %s exited with %s; restarting it",
                              child.pid, child.exitcode)
                    children[i] = ctx.Process(target=_child, daemon=False)
                    children[i].start()
        for child in children:
            if child.is_alive():
                os.kill(child.pid, signal.SIGTERM)
        for child in children:
            child.join(60)
