"""Log filters for ``settings.LOGGING``.

Django logs every 4xx response with the exception that caused it: an ordinary 403 (a
researcher opening a staff page) or 404 wrote a whole traceback to the web log, burying
the errors that matter. A client error is the client's: one line says all of it.
"""

import logging


class ClientErrorsOneLine(logging.Filter):
    """Drop the traceback from records about responses below 500 (keep the line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and status < 500 and record.exc_info:
            record.exc_info = None
            record.exc_text = None
        return True
