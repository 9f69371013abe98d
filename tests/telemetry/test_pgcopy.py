"""Binary COPY from numpy columns: what PostgreSQL reads back is what was given, NULLs in
any pattern included, and bad input is refused before anything is sent."""

import datetime as dt

import numpy as np
import psycopg
import pytest
from django.db import connection

from clusterui.telemetry import pgcopy

pytestmark = pytest.mark.django_db


def table():
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE copied (ts timestamptz, at timestamptz, id int4, "
                    "big int8, r float4, d float8)")


def read():
    with connection.cursor() as cur:
        cur.execute("SELECT ts, at, id, big, r, d FROM copied ORDER BY id")
        return cur.fetchall()


def test_rows_come_back_as_given_with_nulls_in_every_pattern():
    table()
    rng = np.random.default_rng(3)
    n = 5000
    ms = 1_795_000_000_000 + np.arange(n, dtype=np.int64) * 10_000
    us = (ms - 946_684_800_000) * 1000 + 7  # microseconds since 2000, not whole ms
    big = np.full(n, (1 << 62) + 1, np.int64)  # beyond a float64's exact integers
    real = rng.random(n) * 100
    double = rng.random(n) * 1e9
    # Each row NULL in a different subset of columns: many layouts in one payload.
    null_real = rng.random(n) < 0.3
    null_big = rng.random(n) < 0.5
    double[rng.random(n) < 0.2] = np.nan  # NaN in a float column is NULL
    columns = [("ts", "timestamptz_ms", ms, None), ("at", "timestamptz_us", us, None),
               ("id", "int4", np.arange(n), None), ("big", "int8", big, null_big),
               ("r", "float4", np.where(null_real, np.nan, real), None),
               ("d", "float8", double, None)]
    with connection.cursor() as wrapper:
        assert pgcopy.copy_columns(psycopg.Cursor(wrapper.cursor.connection), "copied",
                                   columns, rows_per_write=1234) == n
    got = read()
    assert len(got) == n
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    pg_epoch = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    for i in (0, 1, 2, 999, 1234, 1235, n - 1):
        ts, at, ident, b, r, d = got[i]
        assert ts == epoch + dt.timedelta(milliseconds=int(ms[i]))
        assert at == pg_epoch + dt.timedelta(microseconds=int(us[i]))
        assert ident == i
        assert b == (None if null_big[i] else (1 << 62) + 1)
        assert r == (None if null_real[i] else pytest.approx(real[i], rel=1e-6))
        assert d == (None if np.isnan(double[i]) else double[i])
    assert sum(r[3] is None for r in got) == int(null_big.sum())
    assert sum(r[4] is None for r in got) == int(null_real.sum())


def test_no_rows_sends_nothing_and_bad_columns_are_refused():
    table()
    with connection.cursor() as wrapper:
        cur = psycopg.Cursor(wrapper.cursor.connection)
        assert pgcopy.copy_columns(cur, "copied", [("id", "int4", np.array([], int), None)]) == 0
        with pytest.raises(ValueError, match="unknown kind 'int2'"):
            pgcopy.copy_columns(cur, "copied", [("id", "int2", np.arange(3), None)])
        with pytest.raises(ValueError, match="column r: 2 values, not 3"):
            pgcopy.copy_columns(cur, "copied", [("id", "int4", np.arange(3), None),
                                                ("r", "float4", np.ones(2), None)])
    assert read() == []
