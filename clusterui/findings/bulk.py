"""Statements over many rows at once: the detector pass's plumbing.

- ``cursor()``: a cursor that sends parameters to the server as they are. Django's
  PostgreSQL cursors quote every parameter into the SQL text in Python, which costs more
  than the query itself for the pass's arrays of thousands of ids, times and JSON values.
- ``update_rows``: Django's ``bulk_update`` builds a CASE WHEN per row and field (over ten
  seconds of Python for a thousand efficiency rows); this sends each column as one array
  and joins them back with ``unnest``: one short statement, whatever the row count.
"""

import datetime as dt
import json

import psycopg
from django.db import connection, models


class _Encoder(json.JSONEncoder):
    """Times to the microsecond (Django's encoder cuts them to the millisecond, and a
    pass's ``through`` must match a sample's time exactly)."""

    def default(self, o):
        if isinstance(o, dt.datetime):
            return o.isoformat()
        return super().default(o)


def cursor() -> psycopg.Cursor:
    """A server-side-binding cursor on Django's connection (same transaction)."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)

_SQL_TYPES = {
    models.FloatField: "float8",
    models.IntegerField: "int8",
    models.BigIntegerField: "int8",
    models.PositiveSmallIntegerField: "int8",
    models.CharField: "text",
    models.TextField: "text",
    models.DateTimeField: "timestamptz",
    models.JSONField: "jsonb",
    models.ForeignKey: "int8",
    models.OneToOneField: "int8",
    models.BigAutoField: "int8",
}


def _sql_type(field) -> str:
    for cls in type(field).__mro__:
        if cls in _SQL_TYPES:
            return _SQL_TYPES[cls]
    raise TypeError(f"no SQL type for {field!r}")


def update_rows(objs, field_names: list[str]) -> int:
    """``UPDATE`` ``field_names`` of ``objs`` (saved instances of one model) in one query.

    The rows travel as one JSON document read back with ``jsonb_to_recordset``: a single
    parameter, which also spares the per-character escaping of arrays of JSON texts."""
    if not objs:
        return 0
    meta = type(objs[0])._meta
    pk = meta.pk
    fields = [meta.get_field(name) for name in field_names]
    rows = [{pk.column: obj.pk, **{f.column: getattr(obj, f.attname) for f in fields}}
            for obj in objs]
    record = ", ".join(f'"{c}" {t}' for c, t in
                       [(pk.column, _sql_type(pk))] + [(f.column, _sql_type(f)) for f in fields])
    assignments = ", ".join(f'"{f.column}" = u."{f.column}"' for f in fields)
    sql = (f'UPDATE "{meta.db_table}" AS t SET {assignments} '
           f"FROM jsonb_to_recordset(%s::jsonb) AS u({record}) "
           f'WHERE t."{pk.column}" = u."{pk.column}"')
    with cursor() as cur:
        cur.execute(sql, [json.dumps(rows, cls=_Encoder)])
        return cur.rowcount
