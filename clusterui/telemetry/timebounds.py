"""The times a query may name (a page's custom range, an API parameter): samples cannot
predate 2000 (ingest refuses them: ``ingest/validate.py``, ``MIN_TS``), and the upper bound
keeps datetime arithmetic far from overflow."""

import datetime as dt

EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)
