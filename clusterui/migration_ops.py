"""Operations that several apps' migrations share."""

from django.db import migrations


def fillfactor(tables: tuple[str, ...], percent: int) -> migrations.RunSQL:
    """Leave ``100 - percent`` % of each new heap page of ``tables`` free, so that an update
    of a row can stay on its page (a heap-only tuple: no index entry); reversed by resetting
    the tables to PostgreSQL's default."""
    return migrations.RunSQL(
        [f"ALTER TABLE {t} SET (fillfactor = {percent})" for t in tables],
        [f"ALTER TABLE {t} RESET (fillfactor)" for t in tables],
    )
