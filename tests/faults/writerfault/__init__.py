"""A test-only Django app that makes the writer raise a non-database exception, inside the
storing transaction, for batches of one node (``CLUSTERUI_TEST_WRITER_FAULT_NODE``).

It stands for any input that passes validation and still breaks the writer (the tester's
throttle_reasons = 2**63 made ``copy.write_row`` raise OverflowError) without depending on
that input staying broken. Real PostgreSQL and Redis; only the writer's own step is wrapped.
Loaded by ``tests.faults.writerfault.settings`` in consumer processes started by tests.
"""
