"""The rollout search's indexes that differ between the databases: the one place that knows them.

Missing values sort lowest (a rollout without a reward comes first ascending, last descending), which
is SQLite's own order, so there a plain (run, reward, id) index serves; PostgreSQL puts NULLs last
ascending, so its index says NULLS FIRST (SQLite cannot declare that). Django's Meta.indexes cannot
differ by database, hence these are made here, by migration runs/0008.

The text index is not here: it lives in a table of its own, filled behind ingestion
(webapp/runs/text_search.py says why).
"""
from .models import Rollout

TABLE = Rollout._meta.db_table
NULLABLE_ORDERS = ("reward", "advantage")  # sortable fields that may be missing


def create(connection) -> None:
    nulls = " NULLS FIRST" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_search_{field} ON {TABLE} (run_id, {field}{nulls}, id)")


def drop(connection) -> None:
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_{field}")
