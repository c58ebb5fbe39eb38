"""Bulk writes of the data plane: how ingestion appends many narrow rows at once.

PostgreSQL takes them through COPY (psycopg 3's cursor.copy), several times faster than
INSERT for the thousands of metric points and rollouts a restarted supervisor catches up
on; SQLite (the demo) through executemany, which is what it is good at."""
import json

from django.db import connection


def quoted(column: str) -> str:
    """A column name for raw SQL: "index" and "values" are keywords."""
    return connection.ops.quote_name(column)


def copy_rows(table: str, columns: list[str], rows) -> None:
    """Append rows (tuples in column order) to table. Rows must be new: COPY does not skip conflicts."""
    rows = list(rows)
    if not rows:
        return
    names = ", ".join(quoted(c) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})", rows)


def insert_new(table: str, columns: list[str], rows) -> int:
    """Insert rows, skipping those whose unique key is stored already (ON CONFLICT DO NOTHING, on PostgreSQL
    and SQLite alike); how many were new. Slower than copy_rows: for when another writer may race."""
    added = 0
    names = ", ".join(quoted(c) for c in columns)
    with connection.cursor() as cursor:
        for row in rows:
            cursor.execute(f"INSERT INTO {table} ({names}) VALUES ({placeholders(columns)}) ON CONFLICT DO NOTHING", row)
            added += cursor.rowcount
    return added


def upsert_points(table: str, rows) -> None:
    """(series_id, step, value) rows where a step may be stored already (a step logged again): the later
    value replaces the stored one. The same statement on PostgreSQL and SQLite."""
    rows = list(rows)
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (series_id, step, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (series_id, step) DO UPDATE SET value = excluded.value",
            rows,
        )


def json_text(value) -> str:
    """A JSON column's value as COPY and executemany take it: its text (PostgreSQL parses it into jsonb)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def fetch(sql: str, params=()) -> list[tuple]:
    """Rows of one raw statement: the hot path of a live poll runs a handful of fixed queries, and
    the ORM's compiling costs more than the round trip to the database itself."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def placeholders(values) -> str:
    return ", ".join(["%s"] * len(values))


def json_value(value):
    """A JSON column read by raw SQL: PostgreSQL's driver decodes jsonb, SQLite returns text."""
    return json.loads(value) if isinstance(value, str) else value
