"""The scenario matrix: labelled jobs (``cases``) at every sampling rate from 1 to 60 s
(``generate``), delivered live, as a backlog, out of order and with a spool replay in the
middle of a live stream (``delivery``), through a running server's real broker and consumer
and read back through its JSON API (``client``), scored per finding kind, rate and shape
(``run``). ``manage.py scenario_report --through-queue`` runs it; the test suite runs it
against a server of its own (``tests/findings/test_matrix.py``)."""
