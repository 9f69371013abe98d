import os

from django.apps import AppConfig


class WriterFaultConfig(AppConfig):
    name = "tests.faults.writerfault"
    label = "writerfault"

    def ready(self):
        node = os.environ.get("CLUSTERUI_TEST_WRITER_FAULT_NODE")
        slow = os.environ.get("CLUSTERUI_TEST_WRITER_SLOW_NODE")
        if not (node or slow):
            return
        import time

        from clusterui.ingest import writer

        real = writer._insert_events

        def _insert_events(cur, batch, gpu_ids, batch_id):
            if batch.node == node:
                # What psycopg's binary COPY raises for an int8 column given 2**63.
                raise OverflowError("int too big to convert (injected by the test)")
            if batch.node == slow:
                # Storing it takes a minute (inside the transaction): a harness sees the
                # consumer working on it and can crash the consumer there.
                time.sleep(60)
            return real(cur, batch, gpu_ids, batch_id)

        writer._insert_events = _insert_events
